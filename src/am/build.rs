//! CREATE INDEX: lay out the meta page and the growing segment, then index
//! the table's existing rows.
//!
//! Phase 1 writes the manifest (one growing segment, id 1), then the meta
//! page (format, dimensions, metric, where the manifest is) and the growing
//! segment's first row page in one WAL record.
//! Phase 2, "loading rows", scans the heap (`table_index_build_scan`) and
//! appends each row as `aminsert` does, which seals the growing segment at
//! `segment_max_rows`; the last one is sealed after the scan. Should the
//! sealed segments reach the most that may wait (64), they are flushed
//! right away, and the load goes on.
//! Phase 3, "flushing segments", flushes every sealed segment (binlog, HNSW
//! built on a helper thread, upload, manifest), so the index starts out as
//! flushed, indexed segments. If storage refuses, CREATE INDEX still
//! succeeds with a WARNING: the rows stay sealed in pages, searches see
//! them, and `milvus_flush()` retries (an unreachable storage must not make
//! an index impossible to create).
//! The pages the load used and the flush freed are then given back to the
//! file system (`pages::free::give_back_tail`): a flushed index is a few pages.
//! Both phases show in `pg_stat_progress_create_index`. Options are
//! validated before anything is written.

use std::ffi::c_void;

use milvus_core::Metric;
use milvus_core::element::{Element, Shape};
use milvus_core::format::manifest::Manifest;
use milvus_core::format::meta::MetaPage;
use milvus_core::segment::{SealReason, unix_now};
use pgrx::prelude::*;

use super::flush::{self, SealRequest};
use super::insert::{self, Row};
use super::options;
use crate::pages::rows::{manifest_pages, pack_tid};
use crate::pages::{Buffer, Index, META_BLOCK, Record, free, manifest_chain};
use crate::shared;
use crate::types::IndexVector;

struct BuildState {
    index: Index,
    rows: f64,
    /// A flush during the load failed (and warned): the rest waits, sealed.
    flush_failed: bool,
}

const PHASE_LOAD: i64 = 2;
const PHASE_FLUSH: i64 = 3;

/// Names of the build phases, for `pg_stat_progress_create_index`.
#[pg_guard]
pub unsafe extern "C-unwind" fn ambuildphasename(phase: i64) -> *mut std::ffi::c_char {
    let name: &'static std::ffi::CStr = match phase {
        PHASE_LOAD => c"loading rows",
        PHASE_FLUSH => c"flushing segments",
        _ => return std::ptr::null_mut(),
    };
    name.as_ptr().cast_mut()
}

fn report(param: u32, value: i64) {
    // SAFETY: progress reporting of the running command.
    unsafe { pg_sys::pgstat_progress_update_param(param as i32, value) }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn ambuild(
    heap: pg_sys::Relation,
    index: pg_sys::Relation,
    index_info: *mut pg_sys::IndexInfo,
) -> *mut pg_sys::IndexBuildResult {
    // SAFETY: Postgres passes the open heap and index.
    let index = unsafe { Index::from_raw(index) };
    if index.blocks() != 0 {
        error!("index \"{}\" already contains data", index.name());
    }
    validate_options(index);
    init_index(index, pg_sys::ForkNumber::MAIN_FORKNUM);

    let mut state = BuildState { index, rows: 0.0, flush_failed: false };
    report(pg_sys::PROGRESS_CREATEIDX_SUBPHASE, PHASE_LOAD);
    // SAFETY: the standard heap scan of a build, calling back per row.
    let heap_rows = unsafe {
        pg_sys::table_index_build_scan(
            heap,
            index.raw(),
            index_info,
            true,
            true,
            Some(build_callback),
            (&mut state as *mut BuildState).cast(),
            std::ptr::null_mut(),
        )
    };
    flush::seal(index, SealRequest::growing(SealReason::Build));
    flush_sealed_segments(index, state.rows);
    // The rows went to object storage: the pages they used are free.
    free::give_back_tail(index);
    // A database that had no milvus index is visited again at once; a
    // rebuilt index has no damaged segment.
    let database = crate::catalog::database();
    shared::set_idle_until(database, 0);
    shared::set_damage(database, index.oid().to_u32(), 0, None);

    // SAFETY: palloc'd in the current memory context, handed to Postgres.
    let mut result = unsafe { PgBox::<pg_sys::IndexBuildResult>::alloc0() };
    result.heap_tuples = heap_rows;
    result.index_tuples = state.rows;
    result.into_pg()
}

#[pg_guard]
unsafe extern "C-unwind" fn build_callback(
    _index: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    values: *mut pg_sys::Datum,
    isnull: *mut bool,
    _alive: bool,
    state: *mut c_void,
) {
    // SAFETY: the state passed to table_index_build_scan, and one value,
    // null flag and TID per row.
    unsafe {
        let state = &mut *state.cast::<BuildState>();
        if *isnull {
            return;
        }
        let (index, rows, may_flush) = (state.index, state.rows, !state.flush_failed);
        let vector = IndexVector::from_datum(*values, index.element());
        let flush_failed = &mut state.flush_failed;
        let mut make_room = || {
            *flush_failed = !flush_sealed_segments(index, rows);
            report(pg_sys::PROGRESS_CREATEIDX_SUBPHASE, PHASE_LOAD);
        };
        let make_room: Option<&mut dyn FnMut()> = if may_flush { Some(&mut make_room) } else { None };
        let row = Row { key: pack_tid(&*tid), vector: vector.row() };
        // The table's rows go straight into segments of segment_max_rows.
        let max_rows = options::of(index).segment_max_rows as u64;
        insert::insert_row(index, row, max_rows, Some(SealReason::Build), make_room);
        state.rows += 1.0;
    }
}

/// Phase 3 (and during phase 2 when 64 sealed segments wait): flushes what
/// the load sealed, reporting rows done; false if storage failed (a
/// WARNING says why, and the rows wait, sealed).
fn flush_sealed_segments(index: Index, rows: f64) -> bool {
    report(pg_sys::PROGRESS_CREATEIDX_SUBPHASE, PHASE_FLUSH);
    report(pg_sys::PROGRESS_CREATEIDX_TUPLES_TOTAL, rows as i64);
    let mut done = 0;
    for chain in index.meta_copy().sealed() {
        match flush::flush_segment(index, milvus_core::segment::SegmentId(chain.segment), "CREATE INDEX") {
            Ok(flush::Flushed::Rows(rows)) => done += rows as i64,
            Ok(flush::Flushed::AlreadyFlushed) => {}
            Err(e) => {
                crate::error::report_error(PgLogLevel::WARNING, &e);
                return false;
            }
        }
        report(pg_sys::PROGRESS_CREATEIDX_TUPLES_DONE, done);
    }
    true
}

/// For unlogged tables: the init fork gets an empty index.
#[pg_guard]
pub unsafe extern "C-unwind" fn ambuildempty(index: pg_sys::Relation) {
    // SAFETY: Postgres passes the open index.
    init_index(unsafe { Index::from_raw(index) }, pg_sys::ForkNumber::INIT_FORKNUM)
}

/// Checks the options together (each is range-checked on its own by reloptions).
fn validate_options(index: Index) {
    if let Err(reason) = options::of(index).hnsw_params().validate() {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid milvus index options: {reason}")
        );
    }
}

/// Writes the meta page, the growing segment's first page and the manifest
/// into `fork`.
fn init_index(index: Index, fork: pg_sys::ForkNumber::Type) {
    let (metric, element) = opclass_of(index);
    let shape = Shape::new(dims_of(index, element), element);
    // Where the objects will live, for good: the index's storage_url
    // option, else milvus.storage_url, else the embedded default (None).
    let url = options::storage_url(index).or_else(crate::gucs::storage_url_setting);
    if let Some(url) = &url {
        crate::storage::remember_location(url);
    }
    let mut manifest = Manifest::new(shape.dims as u32, metric, url);
    let growing = manifest.add_growing(unix_now());
    let bytes = manifest.encode();

    let mut meta_page = index.extend(fork);
    let mut row_page = index.extend(fork);
    let mut manifest_buffers: Vec<Buffer> = (0..manifest_pages(bytes.len())).map(|_| index.extend(fork)).collect();
    assert_eq!(meta_page.block(), META_BLOCK);
    manifest_chain::fill_chain(index, &mut manifest_buffers, &bytes);

    let meta = MetaPage::new(shape, metric, growing, row_page.block(), manifest_buffers[0].block(), bytes.len() as u32);
    let mut record = Record::start(index);
    record.init_meta(&mut meta_page, meta);
    record.fresh_page(&mut row_page).init_rows(growing.0);
    record.finish();
    if fork == pg_sys::ForkNumber::INIT_FORKNUM {
        // GenericXLog writes no WAL for an unlogged index, but its init
        // fork must survive a crash: log the pages whole.
        for buffer in [&meta_page, &row_page].into_iter().chain(&manifest_buffers) {
            buffer.log_whole_page();
        }
    }
}

/// The metric and element type of an index, from its opclass' distance
/// function: its name, and the type it takes (`vector` or `halfvec`, this
/// extension's or pgvector's: the same layout; or Postgres' `bit`).
fn opclass_of(index: Index) -> (Metric, Element) {
    // SAFETY: an open index with one key column and one support function
    // of two arguments.
    let (name, arg_type) = unsafe {
        let proc = pg_sys::index_getprocid(index.raw(), 1, 1);
        let name = std::ffi::CStr::from_ptr(pg_sys::get_func_name(proc)).to_string_lossy().into_owned();
        let mut args: *mut pg_sys::Oid = std::ptr::null_mut();
        let mut nargs = 0;
        pg_sys::get_func_signature(proc, &mut args, &mut nargs);
        let arg = if nargs > 0 { *args } else { pg_sys::InvalidOid };
        (name, std::ffi::CStr::from_ptr(pg_sys::format_type_be(arg)).to_string_lossy().into_owned())
    };
    let metric = match name.as_str() {
        "l2_distance" => Metric::L2,
        "vector_negative_inner_product" | "halfvec_negative_inner_product" => Metric::InnerProduct,
        "cosine_distance" => Metric::Cosine,
        "l1_distance" => Metric::L1,
        "hamming_distance" => Metric::Hamming,
        "jaccard_distance" => Metric::Jaccard,
        other => error!("milvus index opclass has an unknown distance function \"{other}\""),
    };
    // `format_type_be` qualifies a type outside the search path.
    let element = match arg_type.rsplit('.').next().unwrap_or_default().trim_matches('"') {
        "vector" => Element::F32,
        "halfvec" => Element::F16,
        "bit" => Element::Bit,
        other => error!("milvus index opclass is for an unknown type \"{other}\""),
    };
    if !metric.measures(element) {
        error!("milvus index opclass orders {arg_type} by {name}, which does not measure it");
    }
    (metric, element)
}

/// The dimensions of the indexed column, from its type modifier.
fn dims_of(index: Index, element: Element) -> usize {
    // SAFETY: an open index with one key column.
    let typmod = unsafe { (*(*index.raw()).rd_att).attrs.as_slice(1)[0].atttypmod };
    if typmod < 1 {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "column does not have dimensions",
            format!("A milvus index needs a column of type {0}(n), e.g. embedding {0}(128).", element.type_name())
        );
    }
    // One limit for the column, the pages and the segment files.
    let dims = typmod as usize;
    let max = element.max_dims();
    if dims > max {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("column cannot have more than {max} dimensions for milvus index"),
            format!("The column has {dims}.")
        );
    }
    dims
}
