//! The `vector` text parser: never panics; what it accepts, written back
//! as text (Rust's shortest round-trip form here; the extension writes
//! Postgres' own), parses to the same values.
#![no_main]
use libfuzzer_sys::fuzz_target;
use milvus_core::vector::parse;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(values) = parse(text) {
        let text: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        let again = parse(&format!("[{}]", text.join(","))).expect("formatted text parses");
        assert_eq!(again.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), values.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    }
});
