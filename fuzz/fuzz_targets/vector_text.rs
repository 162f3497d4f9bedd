//! The `vector` text parser: never panics; what it accepts formats back to
//! text that parses to the same values (the type's text round trip).
#![no_main]
use libfuzzer_sys::fuzz_target;
use milvus_core::vector::{format, parse};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(values) = parse(text) {
        let again = parse(&format(&values)).expect("formatted text parses");
        assert_eq!(again.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), values.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    }
});
