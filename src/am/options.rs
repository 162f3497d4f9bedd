//! Index options: `CREATE INDEX ... USING milvus (...) WITH (m = 16,
//! ef_construction = 64, segment_max_rows = 100000)`, validated by
//! Postgres' reloptions machinery with the ranges below.

use std::mem::offset_of;

use pgrx::pg_sys;

/// The parsed options, as Postgres stores them in `rd_options`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Options {
    vl_len_: i32,
    pub m: i32,
    pub ef_construction: i32,
    pub segment_max_rows: i32,
}

pub const DEFAULT_M: i32 = 16;
pub const DEFAULT_EF_CONSTRUCTION: i32 = 64;
pub const DEFAULT_SEGMENT_MAX_ROWS: i32 = 100_000;

static mut RELOPT_KIND: pg_sys::relopt_kind::Type = 0;

/// Registers the options; called from `_PG_init`.
pub fn init() {
    // SAFETY: _PG_init runs once per process, before any index is opened.
    unsafe {
        RELOPT_KIND = pg_sys::add_reloption_kind();
        let lock = pg_sys::AccessExclusiveLock as pg_sys::LOCKMODE;
        pg_sys::add_int_reloption(RELOPT_KIND, c"m".as_ptr(), c"Neighbours per HNSW node and layer (2 to 100)".as_ptr(), DEFAULT_M, 2, 100, lock);
        pg_sys::add_int_reloption(
            RELOPT_KIND,
            c"ef_construction".as_ptr(),
            c"HNSW candidate list size while building (4 to 1000, at least 2 * m)".as_ptr(),
            DEFAULT_EF_CONSTRUCTION,
            4,
            1000,
            lock,
        );
        pg_sys::add_int_reloption(
            RELOPT_KIND,
            c"segment_max_rows".as_ptr(),
            c"Rows at which a growing segment seals (100 to 100000000)".as_ptr(),
            DEFAULT_SEGMENT_MAX_ROWS,
            100,
            100_000_000,
            lock,
        );
    }
}

#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn amoptions(reloptions: pg_sys::Datum, validate: bool) -> *mut pg_sys::bytea {
    let int = |name: &'static std::ffi::CStr, offset: usize| pg_sys::relopt_parse_elt {
        optname: name.as_ptr(),
        opttype: pg_sys::relopt_type::RELOPT_TYPE_INT,
        offset: offset as i32,
    };
    let table = [
        int(c"m", offset_of!(Options, m)),
        int(c"ef_construction", offset_of!(Options, ef_construction)),
        int(c"segment_max_rows", offset_of!(Options, segment_max_rows)),
    ];
    // SAFETY: the table describes `Options`, which starts with a varlena header.
    unsafe {
        pg_sys::build_reloptions(
            reloptions,
            validate,
            RELOPT_KIND,
            std::mem::size_of::<Options>(),
            table.as_ptr(),
            table.len() as i32,
        )
        .cast()
    }
}

/// The options of an open index, defaults where none were given.
pub(crate) unsafe fn of(index: pg_sys::Relation) -> Options {
    // SAFETY: rd_options is null or an `Options` built by `amoptions`.
    unsafe {
        let raw = (*index).rd_options.cast::<Options>();
        if raw.is_null() {
            Options { vl_len_: 0, m: DEFAULT_M, ef_construction: DEFAULT_EF_CONSTRUCTION, segment_max_rows: DEFAULT_SEGMENT_MAX_ROWS }
        } else {
            *raw
        }
    }
}
