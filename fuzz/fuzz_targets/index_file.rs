//! The index file decoder (both versions): never panics; a graph it accepts
//! can be searched without a panic, whatever its neighbour arrays hold
//! (damage is skipped, never followed), under both checks.
#![no_main]
use libfuzzer_sys::fuzz_target;
use milvus_core::Metric;
use milvus_core::format::Check;
use milvus_core::format::index::IndexFile;

fuzz_target!(|data: &[u8]| {
    for check in [Check::Full, Check::Header] {
        if let Ok(IndexFile::Flat { graph, .. }) = IndexFile::decode("fuzz", data, check) {
            let vectors = [[0.0f32, 1.0], [1.0, 0.0], [0.5, 0.5]];
            let found = graph.search(Metric::L2, &[0.2, 0.7], &|r| &vectors[r as usize % 3], 5, 16, &|r| r % 4 == 1);
            assert!(found.len() <= 5 && found.iter().all(|(_, r)| (*r as usize) < graph.rows() && r % 4 != 1));
        }
    }
});
