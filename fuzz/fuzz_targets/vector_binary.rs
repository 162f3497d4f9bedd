//! The binary (send/recv) decoders of `vector`, `halfvec` and `sparsevec`:
//! never panic, accept only finite elements, and a halfvec or sparsevec
//! read back encodes to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use milvus_core::sparse;
use milvus_core::vector::{decode_binary, decode_half_binary, encode_half_binary, to_half};

fuzz_target!(|data: &[u8]| {
    if let Ok(values) = decode_binary(data) {
        assert!(values.iter().all(|v| v.is_finite()));
    }
    if let Ok(values) = decode_half_binary(data) {
        assert!(values.iter().all(|v| v.is_finite()));
        let half = to_half(&values).expect("a half value widened narrows back");
        assert_eq!(encode_half_binary(&half), data, "round trip");
    }
    if let Ok(v) = sparse::decode_binary(data, None) {
        assert!(v.values.iter().all(|x| x.is_finite() && *x != 0.0));
        assert!(v.indices.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(sparse::encode_binary(v.view()), data, "round trip");
    }
});
