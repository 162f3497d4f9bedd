//! CREATE INDEX: write the table's rows to storage as flushed segments,
//! then lay out the index's few pages.
//!
//! Phase 2, "loading rows", scans the heap (`table_index_build_scan`) and
//! gathers the rows in memory, `segment_max_rows` at a time, or fewer if
//! that many would take more than `maintenance_work_mem` (a NOTICE says so
//! once: the segments are smaller, and merges combine them later). Phase 3,
//! "flushing segments", entered at each full segment and after the scan,
//! writes the gathered rows as one segment (insert binlog, HNSW graph built
//! on a helper thread, both uploaded as a flush's are) and lists it in the
//! manifest, still in memory. Then the manifest (those segments and an empty
//! growing one after them), the meta page (format, dimensions, metric,
//! where the manifest is) and the growing segment's first row page are
//! written, a WAL record per three pages. The rows never pass through the
//! index's row pages: the WAL holds those pages, not a record per row. On
//! the embedded store each segment's objects are written into pages as
//! they come (`object_pages.rs`: the WAL carries them, as pgvector's
//! carries its graph), after block 0, which the scan reserves for the meta
//! page; on S3 a standby reads the segments from the bucket (docs/design.md,
//! "Seal small, merge big"). A crash or an error before the commit leaves
//! only unreferenced objects, which GC collects with the index that never
//! was.
//!
//! If storage refuses, CREATE INDEX still succeeds with a WARNING: the
//! pages are laid out then, and from that segment on the rows go into them
//! as inserts' do, sealed at `segment_max_rows`; searches see them, and
//! `milvus_flush()` writes them once storage works (an unreachable storage
//! must not make an index impossible to create).
//! Both phases show in `pg_stat_progress_create_index`. Options are
//! validated before anything is written.

use std::ffi::c_void;

use milvus_core::Metric;
use milvus_core::element::{Element, Shape};
use milvus_core::error::Failed;
use milvus_core::format::manifest::Manifest;
use milvus_core::format::meta::MetaPage;
use milvus_core::search::PageRows;
use milvus_core::segment::{SealReason, unix_now};
use pgrx::PgTupleDesc;
use pgrx::prelude::*;

use super::insert::{self, Row};
use super::options;
use crate::error::OrRaise;
use crate::gucs::PausePoint;
use crate::lifecycle::flush::{self, SealRequest};
use crate::lifecycle::object_pages;
use crate::pages::rows::{manifest_pages, pack_tid};
use crate::pages::{Buffer, INVALID_BLOCK, Index, Lock, PageStore, free};
use crate::shared::{self, JobKind, JobRecord};
use crate::types::indexed::IndexVector;
use milvus_core::pages::META_BLOCK;
use milvus_core::pages::growing::lay_out;

struct BuildState {
    index: Index,
    shape: Shape,
    /// The types of the filter columns (`filter_columns.rs`), if any.
    types: Vec<pg_sys::Oid>,
    metric: Metric,
    /// Rows seen, and rows written to storage.
    rows: f64,
    written: i64,
    /// The segment being gathered, written whole at `max_rows`, or once it
    /// takes `budget_bytes` (`maintenance_work_mem`) if sooner.
    pending: PageRows,
    max_rows: usize,
    budget_bytes: usize,
    /// The manifest, in memory while the rows go to storage: it lists the
    /// segments written so far, and is committed with the index's first
    /// pages once the scan is done. `None` once storage refused a segment
    /// (a WARNING said why): the pages are laid out then, and the rest of
    /// the rows go into them, as inserts' do, to wait for `milvus_flush()`.
    manifest: Option<Manifest>,
}

/// What a build that could not write to storage tells the user.
const BUILD_IN_PAGES_DETAIL: &str = "The rows are kept in the index's pages instead, sealed; nothing is lost. \
     Call milvus_flush() once the cause is fixed.";

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
        crate::error::raise(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("index \"{}\" already contains data", index.name()),
            None,
            None,
        );
    }
    validate_options(index);
    super::filter_columns::validate(index);
    let (manifest, shape, metric) = new_manifest(index);
    let types = super::filter_columns::types(index);
    // Block 0 is the meta page's: objects written into pages during the
    // scan take the blocks after it.
    drop(index.extend_fork(pg_sys::ForkNumber::MAIN_FORKNUM));

    let max_rows = options::of(index).segment_max_rows as usize;
    let budget_bytes = budget_bytes();
    let pending = PageRows::new(shape);
    let manifest = Some(manifest);
    let mut state =
        BuildState { index, shape, types, metric, rows: 0.0, written: 0, pending, max_rows, budget_bytes, manifest };
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
    write_pending(&mut state);
    match state.manifest.take() {
        Some(manifest) => init_index(index, pg_sys::ForkNumber::MAIN_FORKNUM, manifest, shape, metric),
        None => {
            flush::seal(index, SealRequest::growing(SealReason::Build));
            free::give_back_tail(index);
        }
    }
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
        let vector = IndexVector::from_datum(*values, state.shape.element);
        let filter_values = super::filter_columns::row_values(&state.types, values, isnull);
        let row = Row { key: pack_tid(&*tid), vector: vector.row(), values: &[] };
        milvus_core::vector::check_row(state.shape.dims, row.vector).or_raise_for(row.vector.element());
        state.rows += 1.0;
        if state.manifest.is_none() {
            let encoded = encode_values(state.shape, &filter_values);
            let row = Row { values: &encoded, ..row };
            insert::insert_row(state.index, row, state.max_rows as u64, Some(SealReason::Build), None);
            return;
        }
        if state.shape.values {
            state.pending.push_with(row.key, row.vector, filter_values);
        } else {
            state.pending.push(row.key, row.vector);
        }
        let gathered = state.pending.keys.len();
        // Full when another row of the average size would not fit.
        let bytes = state.pending.bytes();
        let over_budget = bytes + bytes / gathered > state.budget_bytes;
        if over_budget && gathered < state.max_rows && state.written == 0 {
            notice_budget(state, gathered);
        }
        if gathered >= state.max_rows || over_budget {
            write_pending(state);
        }
    }
}

/// Bytes of rows `maintenance_work_mem` holds, as the build gathers them
/// (`PageRows::bytes`: keys and elements; sparse rows vary in width).
fn budget_bytes() -> usize {
    // SAFETY: a GUC of this backend, read on its main thread.
    let budget_kb = unsafe { pg_sys::maintenance_work_mem } as usize;
    budget_kb * 1024
}

/// Tells the user, once, that `maintenance_work_mem` cuts the segments
/// shorter than `segment_max_rows` (pgvector says as much when its graph
/// outgrows it).
fn notice_budget(state: &BuildState, rows: usize) {
    crate::error::notice(
        format!(
            "milvus index \"{}\": maintenance_work_mem holds {} rows, fewer than segment_max_rows ({})",
            state.index.name(),
            rows,
            state.max_rows
        ),
        "CREATE INDEX writes segments of that many rows; merges combine them afterwards.",
        "Increase maintenance_work_mem for larger segments from the start.",
    );
}

/// Phase 3: writes the gathered rows to storage as one flushed segment,
/// listed in the manifest in memory. If storage refuses, warns, lays out
/// the index's pages and puts the rows into them, as every row after them.
fn write_pending(state: &mut BuildState) {
    let rows = std::mem::replace(&mut state.pending, PageRows::new(state.shape));
    let Some(manifest) = state.manifest.as_mut().filter(|_| !rows.keys.is_empty()) else {
        return;
    };
    report(pg_sys::PROGRESS_CREATEIDX_SUBPHASE, PHASE_FLUSH);
    report(pg_sys::PROGRESS_CREATEIDX_TUPLES_TOTAL, state.rows as i64);
    let index = state.index;
    let segment = manifest.allocate_segment_id();
    let what = flush::describe(index, segment);
    let job = JobRecord::start(JobKind::Flush, index.oid().to_u32(), &[segment.0], what, "CREATE INDEX".into());
    let rows = std::sync::Arc::new(rows);
    match flush::write_segment(index, segment, state.metric, manifest, rows.clone(), 0, &job) {
        // Nothing else sees the index before CREATE INDEX commits: no
        // VACUUM to keep off the pages written, so no lock to hold.
        Ok((mut flushed, _)) => {
            object_pages::keys_into_pages(index, manifest.storage_url.as_deref(), &mut flushed);
            crate::pause::pause_at(PausePoint::Commit);
            let (count, bytes) = (flushed.rows, flushed.bytes);
            manifest.publish_built(flushed, unix_now()).or_raise();
            job.done(count, bytes);
            state.written += count as i64;
            report(pg_sys::PROGRESS_CREATEIDX_TUPLES_DONE, state.written);
        }
        Err(cause) => {
            let doing = format!("write the rows of index \"{}\" to storage", index.name());
            let failed = Failed::new(doing, cause).with_detail(BUILD_IN_PAGES_DETAIL);
            job.failed(&failed.to_string());
            crate::error::report_error(PgLogLevel::WARNING, &failed);
            let manifest = state.manifest.take().expect("matched above");
            init_index(index, pg_sys::ForkNumber::MAIN_FORKNUM, manifest, state.shape, state.metric);
            for i in 0..rows.keys.len() {
                let values = rows.values.get(i).map_or_else(Vec::new, |v| encode_values(state.shape, v));
                let row = Row { key: rows.keys[i], vector: rows.vectors.row(i, state.shape.dims), values: &values };
                insert::insert_row(index, row, state.max_rows as u64, Some(SealReason::Build), None);
            }
        }
    }
    report(pg_sys::PROGRESS_CREATEIDX_SUBPHASE, PHASE_LOAD);
}

/// A row's filter values as the pages keep them; none in an index of a
/// vector alone.
fn encode_values(shape: Shape, values: &[milvus_core::filter::Value]) -> Vec<u8> {
    if shape.values { milvus_core::format::values::encode(values) } else { Vec::new() }
}

/// For unlogged tables: the init fork gets an empty index.
#[pg_guard]
pub unsafe extern "C-unwind" fn ambuildempty(index: pg_sys::Relation) {
    // SAFETY: Postgres passes the open index.
    let index = unsafe { Index::from_raw(index) };
    let (manifest, shape, metric) = new_manifest(index);
    init_index(index, pg_sys::ForkNumber::INIT_FORKNUM, manifest, shape, metric)
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

/// The new index's manifest, still without segments, and its rows' shape
/// and metric, from its column and opclass.
fn new_manifest(index: Index) -> (Manifest, Shape, Metric) {
    let (metric, element) = opclass_of(index);
    let filtered = !super::filter_columns::types(index).is_empty();
    let shape = Shape::new(dims_of(index, element), element).with_values(filtered);
    // A row and its filter values share one item of a page.
    if filtered && (element == Element::Sparse || milvus_core::format::page::Chunks::of(shape).is_some()) {
        crate::error::raise(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!(
                "a milvus index with filter columns cannot index {}",
                if element == Element::Sparse {
                    "sparsevec".to_string()
                } else {
                    format!(
                        "{} of more than {} dimensions",
                        element.type_name(),
                        milvus_core::format::page::max_dims_per_page(element)
                    )
                }
            ),
            None,
            Some("Index the vector alone, and filter in the WHERE clause."),
        );
    }
    // Where the objects will live, for good: the index's storage_url
    // option, else milvus.storage_url, else the embedded default (None).
    let url = options::storage_url(index).or_else(crate::gucs::storage_url_setting);
    if let Some(url) = &url {
        crate::storage::remember_location(url);
    }
    (Manifest::new(shape.dims as u32, metric, url), shape, metric)
}

/// Writes the meta page, a new growing segment's first page and `manifest`
/// (with that segment added, after any the build wrote) into `fork`.
fn init_index(index: Index, fork: pg_sys::ForkNumber::Type, mut manifest: Manifest, shape: Shape, metric: Metric) {
    let growing = manifest.add_growing(unix_now());
    let bytes = manifest.encode();

    let mut meta_page = match fork {
        pg_sys::ForkNumber::MAIN_FORKNUM => index.read(META_BLOCK, Lock::Exclusive),
        _ => index.extend_fork(fork),
    };
    let mut row_page = index.extend_fork(fork);
    let mut manifest_buffers: Vec<Buffer> = (0..manifest_pages(bytes.len())).map(|_| index.extend_fork(fork)).collect();
    // `lay_out` places the chains: the blocks are set there.
    let meta = MetaPage::new(shape, metric, growing, INVALID_BLOCK, INVALID_BLOCK, 0);
    lay_out(index, &mut meta_page, &mut row_page, &mut manifest_buffers, &bytes, meta);
    if fork == pg_sys::ForkNumber::INIT_FORKNUM {
        // GenericXLog writes no WAL for an unlogged index, but its init
        // fork must survive a crash: log the pages whole.
        for buffer in [&meta_page, &row_page].into_iter().chain(&manifest_buffers) {
            buffer.log_whole_page();
        }
    }
}

/// The metric and element type of an index, from its opclass' distance
/// function: its name, and the type it takes (`vector`, `halfvec` or
/// `sparsevec`, this extension's or pgvector's: the same layouts; or
/// Postgres' `bit`).
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
        "vector_negative_inner_product" | "halfvec_negative_inner_product" | "sparsevec_negative_inner_product" => {
            Metric::InnerProduct
        }
        "cosine_distance" => Metric::Cosine,
        "l1_distance" => Metric::L1,
        "hamming_distance" => Metric::Hamming,
        "jaccard_distance" => Metric::Jaccard,
        other => bad_opclass(format!("milvus index opclass has an unknown distance function \"{other}\"")),
    };
    // `format_type_be` qualifies a type outside the search path.
    let element = match arg_type.rsplit('.').next().unwrap_or_default().trim_matches('"') {
        "vector" => Element::F32,
        "halfvec" => Element::F16,
        "bit" => Element::Bit,
        "sparsevec" => Element::Sparse,
        other => bad_opclass(format!("milvus index opclass is for an unknown type \"{other}\"")),
    };
    if !metric.measures(element) {
        bad_opclass(format!("milvus index opclass orders {arg_type} by {name}, which does not measure it"));
    }
    (metric, element)
}

/// An operator class whose distance function the index cannot use.
fn bad_opclass(message: String) -> ! {
    crate::error::raise(
        PgSqlErrorCode::ERRCODE_INVALID_OBJECT_DEFINITION,
        message,
        None,
        Some("Use one of the extension's operator classes: docs/usage.md, \"The milvus index\"."),
    )
}

/// The dimensions of the indexed column, from its type modifier.
fn dims_of(index: Index, element: Element) -> usize {
    // SAFETY: an open index with one key column.
    let typmod =
        unsafe { PgTupleDesc::from_pg_unchecked((*index.raw()).rd_att) }.get(0).expect("a key column").atttypmod;
    if typmod < 1 {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "column does not have dimensions",
            format!(
                "A milvus index needs a column of type {0}(n), e.g. embedding {0}({1}).",
                element.type_name(),
                if element == Element::Sparse { 30522 } else { 128 }
            )
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
