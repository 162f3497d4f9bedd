//! The delta binlog (tombstones) decoder: never panics; what it accepts
//! encodes back to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use milvus_core::format::delta::{DeltaBinlog, encode};

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = DeltaBinlog::decode("fuzz", data) {
        assert_eq!(DeltaBinlog::decode("fuzz", &encode(d.segment, &d.rows)).unwrap().rows, d.rows);
    }
});
