//! Index options: `CREATE INDEX ... USING milvus (...) WITH (m = 16,
//! ef_construction = 64, segment_max_rows = 100000, growing_max_rows =
//! 2048, quantization = rabitq, storage_url = 's3://bucket/prefix')`,
//! validated by Postgres' reloptions machinery with the ranges below (and
//! the URL by its form).
//!
//! `quantization` says what a segment's index file keeps beside its graph:
//! `sq8` 8-bit codes of its rows, which searches walk the graph by
//! (`milvus_core::quant`), `rabitq` RaBitQ codes of 4 bits a dimension,
//! `none` nothing. Unset, it is `rabitq` from 256 dimensions, `sq8` from 8
//! and `none` below (`milvus_core::quant::RABITQ_FROM_DIMS`,
//! `milvus_core::quant::CODES_FROM_DIMS`). Like `m`, it applies to
//! segments flushed or compacted from then on.
//!
//! `growing_max_rows` is where the growing segment seals (the rows every
//! query reads from pages stay at most that many); `segment_max_rows` is
//! what merges build flushed segments up to, and what CREATE INDEX seals
//! the table's rows at.
//!
//! `cluster_by` names a filter column (of an integer, boolean, date,
//! timestamp or uuid type) that compaction clusters the rows by
//! (`milvus_core::policy::compaction`): checked at CREATE INDEX, and by
//! compaction, which warns and merges unclustered if an ALTER INDEX named
//! a column the index does not filter on.
//!
//! `storage_url` is checked when set: only a superuser chooses a location
//! (others: the default, or one under `milvus.allowed_storage_urls`), and
//! never inside the data directory. It is read when the index is built (CREATE INDEX, REINDEX,
//! TRUNCATE) and recorded in its manifest; changing it with ALTER INDEX
//! takes effect at the next REINDEX, never strands the objects already
//! written.

use std::mem::offset_of;

use milvus_core::element::Shape;
use milvus_core::graph::segment::HnswParams;
use milvus_core::quant::Quantization;
use pgrx::pg_sys;

use crate::pages::Index;

/// The parsed options, as Postgres stores them in `rd_options`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Options {
    vl_len_: i32,
    pub m: i32,
    pub ef_construction: i32,
    pub segment_max_rows: i32,
    pub growing_max_rows: i32,
    /// Offset of the `storage_url` string from the start of the struct, 0
    /// when not given (how Postgres stores string options).
    storage_url_offset: i32,
    /// `QUANTIZATION_*`.
    quantization: i32,
    /// Offset of the `cluster_by` string, 0 when not given.
    cluster_by_offset: i32,
}

pub const DEFAULT_M: i32 = 16;
pub const DEFAULT_EF_CONSTRUCTION: i32 = 64;
pub const DEFAULT_SEGMENT_MAX_ROWS: i32 = 100_000;
/// Unset: the growing segment seals at the rows whose vectors fill 1 MiB
/// (`milvus_core::policy::seal::default_growing_rows`: 2,048 rows of 128
/// dimensions, 341 of 768), so the rows every query reads from pages stay
/// few in bytes, whatever their width.
pub const DEFAULT_GROWING_MAX_ROWS: i32 = 0;
/// The values of `quantization`, as Postgres stores an enum option; unset,
/// its default, which no name spells: chosen by the rows' dimensions.
const QUANTIZATION_SQ8: i32 = 0;
const QUANTIZATION_NONE: i32 = 1;
const QUANTIZATION_RABITQ: i32 = 2;
const QUANTIZATION_UNSET: i32 = -1;

static mut RELOPT_KIND: pg_sys::relopt_kind::Type = 0;

/// Registers the options; called from `_PG_init`.
pub fn init() {
    // SAFETY: _PG_init runs once per process, before any index is opened.
    unsafe {
        RELOPT_KIND = pg_sys::add_reloption_kind();
        let lock = pg_sys::AccessExclusiveLock as pg_sys::LOCKMODE;
        pg_sys::add_int_reloption(
            RELOPT_KIND,
            c"m".as_ptr(),
            c"Neighbours per HNSW node and layer (2 to 100)".as_ptr(),
            DEFAULT_M,
            2,
            100,
            lock,
        );
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
        pg_sys::add_int_reloption(
            RELOPT_KIND,
            c"growing_max_rows".as_ptr(),
            c"Rows at which the growing segment seals, to be flushed and merged into segments of segment_max_rows \
                (100 to 100000000; unset: the rows whose vectors fill 1 MiB, 256 to 2048)"
                .as_ptr(),
            DEFAULT_GROWING_MAX_ROWS,
            100,
            100_000_000,
            lock,
        );
        // Postgres keeps the members for the life of the process.
        let members = Box::leak(Box::new([
            pg_sys::relopt_enum_elt_def { string_val: c"sq8".as_ptr(), symbol_val: QUANTIZATION_SQ8 },
            pg_sys::relopt_enum_elt_def { string_val: c"rabitq".as_ptr(), symbol_val: QUANTIZATION_RABITQ },
            pg_sys::relopt_enum_elt_def { string_val: c"none".as_ptr(), symbol_val: QUANTIZATION_NONE },
            pg_sys::relopt_enum_elt_def { string_val: std::ptr::null(), symbol_val: 0 },
        ]));
        pg_sys::add_enum_reloption(
            RELOPT_KIND,
            c"quantization".as_ptr(),
            c"Codes kept beside each segment's graph, which searches walk it by: sq8 (8-bit codes), rabitq (RaBitQ, 4-bit) \
                or none (unset: rabitq from 256 dimensions, sq8 from 8, none below)"
                .as_ptr(),
            members.as_mut_ptr(),
            QUANTIZATION_UNSET,
            c"Valid values are \"sq8\", \"rabitq\" and \"none\".".as_ptr(),
            lock,
        );
        pg_sys::add_string_reloption(
            RELOPT_KIND,
            c"storage_url".as_ptr(),
            c"Where this index's segments are stored (file:///dir or s3://bucket/prefix), instead of \
                milvus.storage_url"
                .as_ptr(),
            std::ptr::null(),
            Some(validate_storage_url),
            lock,
        );
        pg_sys::add_string_reloption(
            RELOPT_KIND,
            c"cluster_by".as_ptr(),
            c"A filter column whose values compaction clusters the rows by, so that a filter on it searches few \
                segments"
                .as_ptr(),
            std::ptr::null(),
            None,
            lock,
        );
    }
}

/// Refuses a malformed `storage_url` option at CREATE INDEX or ALTER INDEX,
/// and one the user may not choose (`storage::check_index_location`).
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn validate_storage_url(value: *const std::ffi::c_char) {
    if value.is_null() {
        return;
    }
    // SAFETY: Postgres passes the option's value as a C string.
    let url = unsafe { std::ffi::CStr::from_ptr(value) }.to_string_lossy();
    if let Err(e) = milvus_core::storage::StorageUrl::parse(&url) {
        pgrx::ereport!(
            ERROR,
            pgrx::PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid storage_url option: {e}")
        );
    }
    crate::storage::check_index_location(&url);
}

/// One option of [`Options`] for `build_reloptions`, at `offset`.
fn element(
    name: &'static std::ffi::CStr,
    opttype: pg_sys::relopt_type::Type,
    offset: usize,
) -> pg_sys::relopt_parse_elt {
    pg_sys::relopt_parse_elt {
        optname: name.as_ptr(),
        opttype,
        offset: offset as i32,
        // PostgreSQL 18: no field records whether the option was given.
        #[cfg(feature = "pg18")]
        isset_offset: 0,
    }
}

#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn amoptions(reloptions: pg_sys::Datum, validate: bool) -> *mut pg_sys::bytea {
    let int =
        |name: &'static std::ffi::CStr, offset: usize| element(name, pg_sys::relopt_type::RELOPT_TYPE_INT, offset);
    let table = [
        int(c"m", offset_of!(Options, m)),
        int(c"ef_construction", offset_of!(Options, ef_construction)),
        int(c"segment_max_rows", offset_of!(Options, segment_max_rows)),
        int(c"growing_max_rows", offset_of!(Options, growing_max_rows)),
        element(c"storage_url", pg_sys::relopt_type::RELOPT_TYPE_STRING, offset_of!(Options, storage_url_offset)),
        element(c"quantization", pg_sys::relopt_type::RELOPT_TYPE_ENUM, offset_of!(Options, quantization)),
        element(c"cluster_by", pg_sys::relopt_type::RELOPT_TYPE_STRING, offset_of!(Options, cluster_by_offset)),
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
pub fn of(index: Index) -> Options {
    // SAFETY: rd_options is null or an `Options` built by `amoptions`.
    unsafe {
        let raw = (*index.raw()).rd_options.cast::<Options>();
        if raw.is_null() {
            Options {
                vl_len_: 0,
                m: DEFAULT_M,
                ef_construction: DEFAULT_EF_CONSTRUCTION,
                segment_max_rows: DEFAULT_SEGMENT_MAX_ROWS,
                growing_max_rows: DEFAULT_GROWING_MAX_ROWS,
                storage_url_offset: 0,
                quantization: QUANTIZATION_UNSET,
                cluster_by_offset: 0,
            }
        } else {
            *raw
        }
    }
}

impl Options {
    /// The graph's parameters and the codes kept beside it.
    pub fn hnsw_params(&self) -> HnswParams {
        let quantization = match self.quantization {
            QUANTIZATION_SQ8 => Quantization::Sq8,
            QUANTIZATION_NONE => Quantization::None,
            QUANTIZATION_RABITQ => Quantization::RaBitQ,
            _ => Quantization::Auto,
        };
        HnswParams { m: self.m as usize, ef_construction: self.ef_construction as usize, quantization }
    }

    /// Rows at which the growing segment of rows of `shape` seals:
    /// `growing_max_rows`, or when it is unset the rows whose vectors fill
    /// 1 MiB; at most `segment_max_rows`.
    pub fn growing_rows(&self, shape: Shape) -> u64 {
        self.growing_max_rows_or(milvus_core::policy::seal::default_growing_rows(shape.bytes()))
    }

    /// Rows of a tier-0 segment, the base of the merge tiers: what the
    /// growing segment seals at when `growing_max_rows` is set; unset,
    /// 2,048 rows however wide the rows, so that wide rows, sealed at 1 MiB,
    /// flush as undersized segments that merge as soon as there are two,
    /// and the tiers above hold as few segments as narrow rows' do.
    pub fn tier_rows(&self) -> u64 {
        self.growing_max_rows_or(milvus_core::policy::seal::GROWING_ROWS_MAX)
    }

    /// `growing_max_rows`, or `unset` when it is not set; at most
    /// `segment_max_rows`.
    fn growing_max_rows_or(&self, unset: u64) -> u64 {
        let rows = match self.growing_max_rows {
            0 => unset,
            set => set as u64,
        };
        rows.min(self.segment_max_rows as u64)
    }
}

/// The index's `storage_url` option, if given.
pub fn storage_url(index: Index) -> Option<String> {
    string_option(index, |o| o.storage_url_offset)
}

/// The index's `cluster_by` option, if given: the name of a filter column.
pub fn cluster_by(index: Index) -> Option<String> {
    string_option(index, |o| o.cluster_by_offset)
}

/// A string option of `index`, at the offset `offset` reads, if given.
fn string_option(index: Index, offset: impl Fn(&Options) -> i32) -> Option<String> {
    // SAFETY: a string option lives inside the same varlena, at its offset.
    unsafe {
        let raw = (*index.raw()).rd_options.cast::<Options>();
        if raw.is_null() || offset(&*raw) == 0 {
            return None;
        }
        let value = std::ffi::CStr::from_ptr(raw.cast::<std::ffi::c_char>().add(offset(&*raw) as usize));
        Some(value.to_string_lossy().into_owned()).filter(|s| !s.is_empty())
    }
}
