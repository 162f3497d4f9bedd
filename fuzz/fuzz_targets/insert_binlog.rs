//! The insert binlog decoder: never panics; what it accepts (under either
//! check) can be read row by row, a sparse row's entries too, and measured.
#![no_main]
use libfuzzer_sys::fuzz_target;
use milvus_core::Metric;
use milvus_core::element::Row;
use milvus_core::format::Check;
use milvus_core::format::insert::InsertBinlog;

fuzz_target!(|data: &[u8]| {
    for check in [Check::Full, Check::Header] {
        if let Ok(b) = InsertBinlog::decode_checked("fuzz", data, check) {
            assert_eq!(b.keys().len(), b.len());
            for i in 0..b.len() {
                let row = std::hint::black_box(b.vector(i));
                if let Row::Sparse(_) = row {
                    std::hint::black_box(Metric::InnerProduct.between(row, row));
                }
            }
        }
    }
});
