//! Every `milvus.*` setting, in one place: private statics, one `init()`,
//! typed accessors. Each description states the range.

use std::ffi::CStr;

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

static EF_SEARCH: GucSetting<i32> = GucSetting::<i32>::new(40);
static MAX_SCAN_TUPLES: GucSetting<i32> = GucSetting::<i32>::new(20_000);

/// Registers the settings; called from `_PG_init`.
pub fn init() {
    GucRegistry::define_int_guc(
        c"milvus.ef_search",
        c"Size of the HNSW candidate list per sealed segment in searches.",
        c"Larger is more accurate and slower. Range 1 to 1000; default 40, like pgvector's hnsw.ef_search.",
        &EF_SEARCH,
        1,
        1000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"milvus.max_scan_tuples",
        c"Most rows one index scan offers before it stops.",
        c"Bounds the work of a filtered query that rejects most rows (like pgvector's hnsw.max_scan_tuples). Range 1 to 2147483647; default 20000.",
        &MAX_SCAN_TUPLES,
        1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::default(),
    );
    // SAFETY: called once from _PG_init, in the postmaster or a backend.
    unsafe { pgrx::pg_sys::MarkGUCPrefixReserved(PREFIX.as_ptr()) };
}

const PREFIX: &CStr = c"milvus";

pub fn ef_search() -> usize {
    EF_SEARCH.get() as usize
}

pub fn max_scan_tuples() -> usize {
    MAX_SCAN_TUPLES.get() as usize
}
