//! The `vector` binary (send/recv) decoder: never panics, and accepts only
//! finite elements.
#![no_main]
use libfuzzer_sys::fuzz_target;
use milvus_core::vector::decode_binary;

fuzz_target!(|data: &[u8]| {
    if let Ok(values) = decode_binary(data) {
        assert!(values.iter().all(|v| v.is_finite()));
    }
});
