//! The read index of an insert binlog: its decoder never panics, and what
//! it accepts gives every row a range inside the binlog it describes; its
//! builder, fed any bytes in any pieces, never panics, and what it builds
//! decodes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use milvus_core::format::Check;
use milvus_core::format::ranges::{Builder, RowRanges};

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = RowRanges::decode("fuzz", data, Check::Full) {
        let size = 64 + r.header.body_len();
        for row in 0..r.len() as u32 {
            let range = r.range_of(row);
            assert!(range.start >= 64 + 8 * r.len() as u64 && range.end <= size);
        }
    }
    let piece = 1 + data.first().map_or(0, |b| *b as usize);
    let mut builder = Builder::new("fuzz");
    if data.chunks(piece).all(|chunk| builder.feed(chunk).is_ok())
        && let Ok(index) = builder.finish()
    {
        RowRanges::decode("fuzz", &index, Check::Full).expect("a built read index decodes");
    }
});
