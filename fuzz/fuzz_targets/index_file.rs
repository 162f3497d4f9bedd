//! The index file decoder (every version): never panics; a graph it
//! accepts can be searched without a panic, whatever its neighbour arrays
//! hold (damage is skipped, never followed), and so can its codes, under
//! both checks.
#![no_main]
use libfuzzer_sys::fuzz_target;
use milvus_core::Metric;
use milvus_core::element::Row;
use milvus_core::format::Check;
use milvus_core::format::index::IndexFile;

fuzz_target!(|data: &[u8]| {
    for check in [Check::Full, Check::Header] {
        if let Ok(IndexFile::Flat { graph, codes, .. }) = IndexFile::decode("fuzz", data, check) {
            let vectors = [[0.0f32, 1.0], [1.0, 0.0], [0.5, 0.5]];
            let vector = |r: u32| Row::F32(&vectors[r as usize % 3]);
            let found = graph.search(Metric::L2, Row::F32(&[0.2, 0.7]), &vector, 5, 16, &|r| r % 4 == 1);
            assert!(found.len() <= 5 && found.iter().all(|(_, r)| (*r as usize) < graph.rows() && r % 4 != 1));
            if let Some(codes) = codes {
                let query = vec![0.3f32; codes.dims()];
                let prepared = codes.prepare(Row::F32(&query));
                (0..codes.rows() as u32).for_each(|r| {
                    codes.distance(&prepared, r);
                });
            }
        }
    }
});
