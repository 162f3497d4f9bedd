//! The index file decoder (every version): never panics; a graph it
//! accepts can be searched without a panic, whatever its neighbour arrays
//! hold (damage is skipped, never followed), and so can its codes, under
//! both checks. The same for the inverted index file of sparse rows.
#![no_main]
use libfuzzer_sys::fuzz_target;
use milvus_core::Metric;
use milvus_core::element::Row;
use milvus_core::format::Check;
use milvus_core::format::index::IndexFile;
use milvus_core::format::inverted;
use milvus_core::sparse::Sparse;

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
        if let Ok((_, index)) = inverted::decode("fuzz", data, check) {
            let query = Sparse { dim: 1 << 20, indices: &[0, 1, 2, 7, 40], values: &[1.0, -0.5, 2.0, 0.25, 3.0] };
            let (hits, _) = index.search(query, 5, |r| r % 4 == 1);
            assert!(hits.len() <= 5 && hits.iter().all(|h| (h.row as usize) < index.rows() && h.row % 4 != 1));
        }
    }
});
