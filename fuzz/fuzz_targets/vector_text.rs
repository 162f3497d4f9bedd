//! The `vector` and `sparsevec` text parsers: never panic; what they
//! accept, written back as text (Rust's shortest round-trip form here; the
//! extension writes Postgres' own), parses to the same values.
#![no_main]
use libfuzzer_sys::fuzz_target;
use milvus_core::{sparse, vector};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let bits = |values: &[f32]| values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    if let Ok(values) = vector::parse(text) {
        let text: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        let again = vector::parse(&format!("[{}]", text.join(","))).expect("formatted text parses");
        assert_eq!(bits(&again), bits(&values));
    }
    if let Ok(v) = sparse::parse(text, None) {
        let entries: Vec<String> = v.indices.iter().zip(&v.values).map(|(i, x)| format!("{}:{x}", i + 1)).collect();
        let again =
            sparse::parse(&format!("{{{}}}/{}", entries.join(","), v.dim), None).expect("formatted text parses");
        assert_eq!((again.dim, &again.indices, bits(&again.values)), (v.dim, &v.indices, bits(&v.values)));
    }
});
