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
//! file system (`page::give_back_free_tail`): a flushed index is a few pages.
//! Both phases show in `pg_stat_progress_create_index`. Options are
//! validated before anything is written.

use std::ffi::c_void;

use milvus_core::hnsw::HnswParams;
use pgrx::FromDatum;
use pgrx::prelude::*;

use milvus_core::format::manifest::Manifest;
use milvus_core::segment::{SealReason, SegmentId};

use super::page::{self, INVALID_BLOCK, META_BLOCK, Meta, SealedChain, Xlog};
use super::{dims_of, flush, insert, metric_of, options};
use crate::vector::PgVector;

struct BuildState {
    index: pg_sys::Relation,
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
    unsafe {
        if pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM) != 0 {
            error!("index \"{}\" already contains data", super::relation_name(index));
        }
        validate_options(index);
        init_index(index, pg_sys::ForkNumber::MAIN_FORKNUM);

        let mut state = BuildState { index, rows: 0.0, flush_failed: false };
        report(pg_sys::PROGRESS_CREATEIDX_SUBPHASE, PHASE_LOAD);
        let heap_rows = pg_sys::table_index_build_scan(
            heap,
            index,
            index_info,
            true,
            true,
            Some(build_callback),
            (&mut state as *mut BuildState).cast(),
            std::ptr::null_mut(),
        );
        flush::seal(index, SealReason::Build);
        flush_sealed_segments(index, state.rows);
        // The rows went to object storage: the pages they used are free.
        page::give_back_free_tail(index);
        // A database that had no milvus index is visited again at once; a
        // rebuilt index has no damaged segment.
        crate::worker::shared::set_idle_until(pg_sys::MyDatabaseId.to_u32(), 0);
        crate::worker::shared::set_damage(pg_sys::MyDatabaseId.to_u32(), (*index).rd_id.to_u32(), 0, None);

        let mut result = PgBox::<pg_sys::IndexBuildResult>::alloc0();
        result.heap_tuples = heap_rows;
        result.index_tuples = state.rows;
        result.into_pg()
    }
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
    unsafe {
        let state = &mut *state.cast::<BuildState>();
        if *isnull {
            return;
        }
        let vector = PgVector::from_datum(*values, false).expect("not null");
        let (index, rows, may_flush) = (state.index, state.rows, !state.flush_failed);
        let flush_failed = &mut state.flush_failed;
        let mut make_room = || {
            *flush_failed = !flush_sealed_segments(index, rows);
            report(pg_sys::PROGRESS_CREATEIDX_SUBPHASE, PHASE_LOAD);
        };
        let make_room: Option<&mut dyn FnMut()> = if may_flush { Some(&mut make_room) } else { None };
        insert::insert_row(index, page::pack_tid(&*tid), vector.as_slice(), |_, _| SealReason::Build, make_room);
        state.rows += 1.0;
    }
}

/// Phase 3 (and during phase 2 when 64 sealed segments wait): flushes what
/// the load sealed, reporting rows done; false if storage failed (a
/// WARNING says why, and the rows wait, sealed).
unsafe fn flush_sealed_segments(index: pg_sys::Relation, rows: f64) -> bool {
    unsafe {
        report(pg_sys::PROGRESS_CREATEIDX_SUBPHASE, PHASE_FLUSH);
        report(pg_sys::PROGRESS_CREATEIDX_TUPLES_TOTAL, rows as i64);
        let meta = page::read_meta(index);
        let mut done = 0;
        for chain in meta.sealed() {
            match flush::flush_segment(index, SegmentId(chain.segment), "CREATE INDEX") {
                Ok(rows) => done += rows.unwrap_or(0) as i64,
                Err(message) => {
                    ereport!(WARNING, PgSqlErrorCode::ERRCODE_IO_ERROR, message, flush::FLUSH_FAILED_DETAIL);
                    return false;
                }
            }
            report(pg_sys::PROGRESS_CREATEIDX_TUPLES_DONE, done);
        }
        true
    }
}

/// For unlogged tables: the init fork gets an empty index.
#[pg_guard]
pub unsafe extern "C-unwind" fn ambuildempty(index: pg_sys::Relation) {
    unsafe { init_index(index, pg_sys::ForkNumber::INIT_FORKNUM) }
}

/// Checks the options together (each is range-checked on its own by reloptions).
unsafe fn validate_options(index: pg_sys::Relation) {
    let o = unsafe { options::of(index) };
    let params = HnswParams { m: o.m as usize, ef_construction: o.ef_construction as usize, threads: 1 };
    if let Err(reason) = params.validate() {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("invalid milvus index options: {reason}")
        );
    }
}

/// Writes the meta page, the growing segment's first page and the manifest
/// into `fork`.
unsafe fn init_index(index: pg_sys::Relation, fork: pg_sys::ForkNumber::Type) {
    unsafe {
        let dims = dims_of(index);
        let metric = metric_of(index);
        // Where the objects will live, for good: the index's storage_url
        // option, else milvus.storage_url, else the embedded default (None).
        let url = super::options::storage_url(index).or_else(crate::gucs::storage_url_setting);
        if let Some(url) = &url {
            crate::storage::remember_location(url);
        }
        let mut manifest = Manifest::new(dims as u32, metric, url);
        let growing_segment = manifest.add_growing(super::flush::now());
        let manifest_bytes = manifest.encode();

        let new_page = || {
            let buffer = pg_sys::ReadBufferExtended(
                index,
                fork,
                page::P_NEW,
                pg_sys::ReadBufferMode::RBM_NORMAL,
                std::ptr::null_mut(),
            );
            page::lock(buffer, true);
            buffer
        };
        let meta_buffer = new_page();
        let row_buffer = new_page();
        let manifest_buffers: Vec<pg_sys::Buffer> =
            (0..page::manifest_pages(manifest_bytes.len())).map(|_| new_page()).collect();
        assert_eq!(pg_sys::BufferGetBlockNumber(meta_buffer), META_BLOCK);
        page::fill_manifest_pages(index, &manifest_buffers, &manifest_bytes);

        let first_row_block = pg_sys::BufferGetBlockNumber(row_buffer);
        let mut xlog = Xlog::start(index);
        let meta_page = xlog.register(meta_buffer, true);
        let row_page = xlog.register(row_buffer, true);
        page::init_meta(
            meta_page,
            Meta {
                magic: page::META_MAGIC,
                version: page::META_VERSION,
                dims: dims as u32,
                metric: metric.code(),
                _reserved: [0; 3],
                growing_segment: growing_segment.0,
                growing_head: first_row_block,
                growing_tail: first_row_block,
                manifest_head: pg_sys::BufferGetBlockNumber(manifest_buffers[0]),
                manifest_len: manifest_bytes.len() as u32,
                sealed_count: 0,
                _reserved2: 0,
                sealed: [SealedChain::default(); page::MAX_SEALED],
                released: [page::NO_BLOCK; page::MAX_RELEASED],
                growing_pages: 1,
            },
        );
        page::init_row_page(row_page, growing_segment.0);
        debug_assert_eq!((*page::opaque(row_page)).next, INVALID_BLOCK);
        xlog.finish();
        let all: Vec<pg_sys::Buffer> = [meta_buffer, row_buffer].into_iter().chain(manifest_buffers).collect();
        if fork == pg_sys::ForkNumber::INIT_FORKNUM {
            // GenericXLog writes no WAL for an unlogged index, but its init
            // fork must survive a crash: log the pages whole.
            for b in &all {
                pg_sys::log_newpage_buffer(*b, true);
            }
        }
        for b in all {
            pg_sys::UnlockReleaseBuffer(b);
        }
    }
}
