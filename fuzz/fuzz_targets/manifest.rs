//! The manifest decoder: never panics; what it accepts encodes and decodes
//! back to itself.
#![no_main]
use libfuzzer_sys::fuzz_target;
use milvus_core::format::manifest::Manifest;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Manifest::decode("fuzz", data) {
        assert_eq!(Manifest::decode("fuzz", &m.encode()).unwrap(), m);
    }
});
