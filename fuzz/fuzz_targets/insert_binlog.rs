//! The insert binlog decoder: never panics; what it accepts can be read
//! row by row.
#![no_main]
use libfuzzer_sys::fuzz_target;
use milvus_core::format::insert::InsertBinlog;

fuzz_target!(|data: &[u8]| {
    if let Ok(b) = InsertBinlog::decode("fuzz", data) {
        assert_eq!(b.keys().len(), b.len());
        for i in 0..b.len() {
            std::hint::black_box(b.vector(i));
        }
    }
});
