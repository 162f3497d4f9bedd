//! Seal and flush: Milvus' Flush, inside Postgres.
//!
//! **Seal.** Under the meta page's exclusive lock, which waits out every
//! insert in flight (they hold it shared), the growing segment's page chain
//! becomes a sealed chain and a new, empty growing segment takes its place.
//! That is the barrier: every row appended before it is in the sealed
//! segment, every row after it in the new one. The manifest records the seal
//! in the same WAL record (it is switched at the meta page; see `commit`).
//!
//! **Flush.** A sealed segment's rows are read from its pages and handed to
//! `milvus_core::jobs::flush` on a helper thread (binlog, HNSW build, upload;
//! `storage::run_job`). Data first, metadata last: only once the objects are
//! in storage does one WAL record publish them in the manifest and drop the
//! sealed chain from the meta page, after which its pages are freed. A crash
//! before that record leaves the rows sealed in pages (flushed again later)
//! and the uploads unreferenced (garbage for GC); a crash after leaves them
//! in the flushed segment only. Never both, never neither (invariant 2).
//!
//! **Jobs on a segment are exclusive.** Flushing a segment, compacting it
//! and VACUUM on it hold a lock on (index, segment) (`SegmentLock`), so a
//! flush never publishes rows that VACUUM removed meanwhile, and two flushes
//! never upload the same segment.

use std::time::SystemTime;

use milvus_core::Metric;
use milvus_core::format::manifest::{Flushed, Manifest};
use milvus_core::hnsw::HnswParams;
use milvus_core::jobs::{self, IndexId};
use milvus_core::search::{PageHits, PageRows};
use milvus_core::segment::{SealReason, SegmentId, SegmentState};
use pgrx::prelude::*;

use super::page::{self, META_BLOCK, Meta, SealedChain, Xlog};
use super::{options, relation_name};
use crate::gucs::PausePoint;
use crate::storage;
use crate::worker::shared::{JobKind, JobRecord};

/// Unix time in seconds.
pub fn now() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// The numbers object keys are built from.
pub(crate) unsafe fn index_id(index: pg_sys::Relation) -> IndexId {
    index_id_of(unsafe { (*index).rd_id.to_u32() })
}

/// The same for an index of this database known only by its OID (GC of
/// dropped indexes).
pub(crate) fn index_id_of(index: u32) -> IndexId {
    // SAFETY: reading backend globals set at connection.
    unsafe { IndexId { cluster: pg_sys::GetSystemIdentifier(), database: pg_sys::MyDatabaseId.to_u32(), index } }
}

/// The job lock of (index, segment), held while one job (a flush, a
/// compaction, a VACUUM pass) works on the segment; released when dropped,
/// and by the transaction's abort on an error.
///
/// Released as soon as the job is done, not at commit: a flush from a
/// session then holds one lock at a time and never waits while holding one,
/// and compaction takes its inputs' locks in id order, so two sessions and
/// a worker cannot deadlock on them (they did, before: a worker held a
/// segment it had flushed while waiting for a compaction input another
/// session's flush still held).
pub(crate) struct SegmentLock(pg_sys::LOCKTAG);

impl SegmentLock {
    pub(crate) unsafe fn acquire(index: pg_sys::Relation, segment: u64) -> SegmentLock {
        unsafe {
            let tag = pg_sys::LOCKTAG {
                locktag_field1: pg_sys::MyDatabaseId.to_u32(),
                locktag_field2: (*index).rd_id.to_u32(),
                locktag_field3: segment as u32,
                // "MV" in the field SQL-level advisory locks set to 1 or 2, so
                // these never collide with a user's pg_advisory_lock.
                locktag_field4: 0x4d56,
                locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
                locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
            };
            pg_sys::LockAcquire(&tag, pg_sys::ExclusiveLock as i32, false, false);
            SegmentLock(tag)
        }
    }
}

impl Drop for SegmentLock {
    fn drop(&mut self) {
        // SAFETY: releasing the lock acquired in `acquire`, held until now.
        unsafe { pg_sys::LockRelease(&self.0, pg_sys::ExclusiveLock as i32, false) };
    }
}

/// Under the meta page's exclusive lock: writes `manifest` as a new chain
/// and, in one WAL record with whatever `change` does to the meta page (and
/// to buffers it registers), points the meta page at it and lists the old
/// manifest's chain, and `released` (a chain the change stops referencing),
/// as released. Call [`page::drain_released`] once the meta lock is
/// released to empty them.
pub(crate) unsafe fn commit(
    index: pg_sys::Relation,
    meta_buffer: pg_sys::Buffer,
    manifest: &Manifest,
    released: Option<pg_sys::BlockNumber>,
    change: impl FnOnce(&mut Xlog, &mut Meta),
) {
    unsafe {
        // Room for what this commit releases: normally there is; after a
        // crash, or while another session drains, empty some pages first.
        let needed = 1 + released.is_some() as usize;
        while !page::has_release_room(&*page::meta(pg_sys::BufferGetPage(meta_buffer)), needed) {
            let block = page::release_one(index, meta_buffer).expect("slots taken, so something is released");
            pg_sys::RecordFreeIndexPage(index, block);
        }
        let bytes = manifest.encode();
        let head = page::write_manifest_chain(index, &bytes);
        let mut xlog = Xlog::start(index);
        let meta_page = xlog.register(meta_buffer, false);
        page::cover_meta(meta_page);
        let meta = &mut *page::meta(meta_page);
        change(&mut xlog, meta);
        let room = page::switch_manifest(meta, head, bytes.len())
            && released.is_none_or(|chain| page::add_released(meta, chain));
        assert!(room, "room was made above");
        xlog.finish();
    }
}

/// Applies `change` to the manifest under the meta page's exclusive lock.
pub(crate) unsafe fn change_manifest<T>(index: pg_sys::Relation, change: impl FnOnce(&mut Manifest) -> T) -> T {
    unsafe {
        let meta_buffer = page::read_buffer(index, META_BLOCK);
        page::lock(meta_buffer, true);
        let meta = *page::meta(pg_sys::BufferGetPage(meta_buffer));
        let mut manifest = page::read_manifest(index, &meta);
        let out = change(&mut manifest);
        commit(index, meta_buffer, &manifest, None, |_, _| {});
        pg_sys::UnlockReleaseBuffer(meta_buffer);
        page::drain_released(index);
        out
    }
}

/// Seals the growing segment if it has rows; returns the sealed segment.
/// With [`page::MAX_SEALED`] segments already waiting for their flush, an
/// error says so.
pub(crate) unsafe fn seal(index: pg_sys::Relation, reason: SealReason) -> Option<SegmentId> {
    unsafe { seal_with(index, reason, None, true) }
}

/// [`seal`], with two conditions: with `only`, it seals only that segment
/// (if another session sealed it first, the new growing segment is left
/// alone); without `full_is_error`, no room for another sealed segment means
/// no seal (`None`) instead of an error.
pub(crate) unsafe fn seal_with(
    index: pg_sys::Relation,
    reason: SealReason,
    only: Option<SegmentId>,
    full_is_error: bool,
) -> Option<SegmentId> {
    unsafe {
        let meta_buffer = page::read_buffer(index, META_BLOCK);
        page::lock(meta_buffer, true);
        let meta = *page::meta(pg_sys::BufferGetPage(meta_buffer));
        page::check_meta(index, &meta);
        if only.is_some_and(|s| s.0 != meta.growing_segment) || growing_is_empty(index, &meta) {
            pg_sys::UnlockReleaseBuffer(meta_buffer);
            return None;
        }
        if meta.sealed_count as usize == page::MAX_SEALED {
            pg_sys::UnlockReleaseBuffer(meta_buffer);
            if !full_is_error {
                return None;
            }
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "index \"{}\" has {} sealed segments waiting for their flush",
                    relation_name(index),
                    page::MAX_SEALED
                ),
                "Flush them first (SELECT milvus_flush(...)); if it fails, the error says why."
            );
        }
        let sealed = SegmentId(meta.growing_segment);
        let mut manifest = page::read_manifest(index, &meta);
        let now = now();
        let rows = count_rows(index, meta.growing_head, meta.dims as usize);
        let why = reason.to_string();
        manifest.seal(sealed, rows, reason, now).unwrap_or_else(|e| error!("{e}"));
        let growing = manifest.add_growing(now);
        let new_buffer = page::new_buffer(index);
        let new_block = pg_sys::BufferGetBlockNumber(new_buffer);
        let job = JobRecord::start(JobKind::Seal, (*index).rd_id.to_u32(), &[sealed.0], describe(index, sealed), why);
        commit(index, meta_buffer, &manifest, None, |xlog, m| {
            let p = xlog.register(new_buffer, true);
            page::init_row_page(p, growing.0);
            m.sealed[m.sealed_count as usize] = SealedChain { segment: sealed.0, head: m.growing_head, _reserved: 0 };
            m.sealed_count += 1;
            m.growing_segment = growing.0;
            m.growing_head = new_block;
            m.growing_tail = new_block;
            m.growing_pages = 1;
        });
        pg_sys::UnlockReleaseBuffer(new_buffer);
        pg_sys::UnlockReleaseBuffer(meta_buffer);
        page::drain_released(index);
        job.done(rows, 0);
        Some(sealed)
    }
}

unsafe fn growing_is_empty(index: pg_sys::Relation, meta: &Meta) -> bool {
    if meta.growing_head != meta.growing_tail {
        return false;
    }
    let mut empty = true;
    unsafe {
        page::walk_chain(index, meta.growing_head, |_, p| {
            page::for_each_row(p, meta.dims as usize, |_, _, _| empty = false)
        })
    };
    empty
}

/// Live rows in a page chain.
pub(crate) unsafe fn count_rows(index: pg_sys::Relation, head: pg_sys::BlockNumber, dims: usize) -> u64 {
    let mut rows = 0;
    unsafe { page::walk_chain(index, head, |_, p| page::for_each_row(p, dims, |_, _, _| rows += 1)) };
    rows
}

/// "segment 3 of index \"items_idx\"", for messages and the job log.
pub(crate) unsafe fn describe(index: pg_sys::Relation, segment: SegmentId) -> String {
    format!("segment {segment} of index \"{}\"", unsafe { relation_name(index) })
}

/// Flushes one sealed segment, for `why` (who asked); `Ok(Some(rows))` with
/// the rows it flushed, `Ok(None)` if another job flushed it meanwhile,
/// `Err(cause)` if storage or the build failed (the segment stays sealed,
/// nothing is lost).
pub(crate) unsafe fn flush_segment(
    index: pg_sys::Relation,
    segment: SegmentId,
    why: &str,
) -> Result<Option<u64>, String> {
    unsafe {
        let _lock = SegmentLock::acquire(index, segment.0);
        let (meta, manifest) = page::read_meta_and_manifest(index);
        let Some(chain) = meta.sealed().iter().find(|c| c.segment == segment.0).copied() else {
            return Ok(None);
        };
        let dims = meta.dims as usize;
        let metric = Metric::from_code(meta.metric).expect("meta page checked");
        // The chain is stable: inserts go to the growing segment, and VACUUM
        // and other flushes wait for the segment lock we hold.
        let mut rows = PageRows::new(dims);
        page::walk_chain(index, chain.head, |_, p| page::for_each_row(p, dims, |_, key, v| rows.push(key, v)));
        let job = JobRecord::start(
            JobKind::Flush,
            (*index).rd_id.to_u32(),
            &[segment.0],
            describe(index, segment),
            why.to_owned(),
        );
        let o = options::of(index);
        let params =
            HnswParams { m: o.m as usize, ef_construction: o.ef_construction as usize, threads: build_threads() };
        let id = index_id(index);
        let storage = storage::try_storage_at(manifest.storage_url.as_deref());
        let cache = storage::cache();
        let hold = crate::debug::Hold::at(PausePoint::Upload);
        let flushed: Result<Flushed, String> = storage::run_job("flush", move |cancel| {
            let storage = storage?;
            let binlog_uploaded = || hold.hold(cancel);
            jobs::flush(
                &storage,
                &cache,
                id,
                segment,
                metric,
                dims,
                &rows.keys,
                &rows.vectors,
                params,
                cancel,
                &binlog_uploaded,
            )
            .map_err(|e| e.to_string())
        });
        let flushed = match flushed {
            Ok(flushed) => flushed,
            Err(cause) => {
                let message = format!("could not flush {}: {cause}", describe(index, segment));
                job.failed(&message);
                return Err(message);
            }
        };
        crate::debug::pause_at(PausePoint::Commit);
        let (rows, bytes) = (flushed.rows, flushed.bytes);
        publish_flush(index, flushed, chain);
        job.done(rows, bytes);
        Ok(Some(rows))
    }
}

/// What a failed flush means for the user, as the DETAIL of its message.
pub const FLUSH_FAILED_DETAIL: &str =
    "The rows stay in the sealed segment; nothing is lost. Call milvus_flush() again once the cause is fixed.";

/// The threads an HNSW build, or a load of several segments, may use: the
/// machine's cores, at most 4.
pub(super) fn build_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get().min(4)).unwrap_or(1)
}

unsafe fn publish_flush(index: pg_sys::Relation, flushed: Flushed, chain: SealedChain) {
    unsafe {
        let meta_buffer = page::read_buffer(index, META_BLOCK);
        page::lock(meta_buffer, true);
        let meta = *page::meta(pg_sys::BufferGetPage(meta_buffer));
        let mut manifest = page::read_manifest(index, &meta);
        manifest.publish_flush(flushed, now()).unwrap_or_else(|e| error!("{e}"));
        commit(index, meta_buffer, &manifest, Some(chain.head), |_, m| {
            let n = m.sealed_count as usize;
            let at =
                m.sealed[..n].iter().position(|c| c.segment == chain.segment).expect("sealed chain under our lock");
            m.sealed.copy_within(at + 1..n, at);
            m.sealed_count -= 1;
        });
        pg_sys::UnlockReleaseBuffer(meta_buffer);
        crate::debug::pause_at(PausePoint::Release);
        page::drain_released(index);
    }
}

/// Seals one index and, with `flush`, flushes every sealed segment, waiting
/// for a job another session or a worker runs on one. Returns (segment,
/// state) of each segment that was sealed: `flushed` (or `dropped`, if a
/// compaction got to it first) once flushed, `sealed` when left to the workers.
unsafe fn flush_index(index_oid: pg_sys::Oid, flush: bool) -> Vec<(i64, String)> {
    unsafe {
        let index = pg_sys::index_open(index_oid, pg_sys::RowExclusiveLock as i32);
        check_milvus_index(index);
        check_owner(index);
        seal(index, SealReason::Manual);
        let meta = page::read_meta(index);
        let mut out = Vec::new();
        for chain in meta.sealed() {
            let segment = SegmentId(chain.segment);
            if !flush {
                out.push((segment.0 as i64, SegmentState::Sealed.as_str().to_owned()));
                continue;
            }
            match flush_segment(index, segment, "milvus_flush()") {
                Ok(Some(_)) => out.push((segment.0 as i64, SegmentState::Flushed.as_str().to_owned())),
                Ok(None) => {
                    // Another job flushed it while we waited for its lock.
                    let (_, manifest) = page::read_meta_and_manifest(index);
                    if let Some(e) = manifest.segment(segment) {
                        out.push((segment.0 as i64, e.meta.state.as_str().to_owned()));
                    }
                }
                Err(message) => {
                    ereport!(ERROR, PgSqlErrorCode::ERRCODE_IO_ERROR, message, FLUSH_FAILED_DETAIL);
                }
            }
        }
        if flush {
            // The flushed rows' pages are free: give the file's tail back.
            page::give_back_free_tail(index);
        }
        pg_sys::index_close(index, pg_sys::RowExclusiveLock as i32);
        out
    }
}

/// Maintenance writes WAL and objects: not on a standby, where the
/// primary's jobs arrive by replay.
pub(crate) fn check_not_in_recovery(function: &str) {
    // SAFETY: reads shared state.
    if unsafe { pg_sys::RecoveryInProgress() } {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION,
            format!("cannot run {function} on a standby"),
            "Segments are sealed, flushed and compacted on the primary; the standby replays them."
        );
    }
}

/// Refuses anything but a milvus index with storage: another kind of
/// relation, or a partitioned index (whose partitions each have their own
/// milvus index; functions that can, expand it with [`leaf_indexes`]).
pub(crate) unsafe fn check_milvus_index(index: pg_sys::Relation) {
    unsafe {
        let am = pg_sys::get_am_name((*(*index).rd_rel).relam);
        let name = relation_name(index);
        if am.is_null() || std::ffi::CStr::from_ptr(am).to_bytes() != b"milvus" {
            ereport!(ERROR, PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE, format!("\"{name}\" is not a milvus index"));
        }
        if (*(*index).rd_rel).relkind as u8 == pg_sys::RELKIND_PARTITIONED_INDEX {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
                format!("\"{name}\" is a partitioned index: its segments are in the index of each partition"),
                format!(
                    "Ask each partition's index, e.g. SELECT p.relid AS index, s.* FROM pg_partition_tree('{}') p, \
                        milvus_segments(p.relid) s WHERE p.isleaf;",
                    name.replace('\'', "''")
                )
            );
        }
    }
}

/// The indexes `index` stands for: itself, or for a partitioned index the
/// index of every leaf partition, in OID order (what `milvus_flush`,
/// `milvus_compact`, `milvus_prewarm` and `milvus_gc` work on).
pub(crate) fn leaf_indexes(index: pg_sys::Oid) -> Vec<pg_sys::Oid> {
    // SAFETY: a syscache lookup.
    if unsafe { pg_sys::get_rel_relkind(index) } as u8 != pg_sys::RELKIND_PARTITIONED_INDEX {
        return vec![index];
    }
    Spi::connect(|client| {
        client
            .select(
                "SELECT relid FROM pg_catalog.pg_partition_tree($1::pg_catalog.regclass) WHERE isleaf ORDER BY relid",
                None,
                &[index.into()],
            )
            .map(|rows| rows.filter_map(|r| r.get::<pg_sys::Oid>(1).ok().flatten()).collect())
            .unwrap_or_else(|e| error!("could not list the partitions of index {}: {e}", index.to_u32()))
    })
}

pub(crate) unsafe fn check_owner(index: pg_sys::Relation) {
    unsafe {
        if !pg_sys::pg_class_ownercheck((*index).rd_id, pg_sys::GetUserId()) {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!("must be owner of index {}", relation_name(index))
            );
        }
    }
}

/// Every milvus index of the current database. Every name and operator is
/// schema-qualified: a search_path set by a database owner cannot put its
/// own `=` under a superuser's (or a worker's) query.
pub(crate) fn all_milvus_indexes() -> Vec<pg_sys::Oid> {
    Spi::connect(|client| {
        client
            .select(
                "SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_am a ON a.oid OPERATOR(pg_catalog.=) \
                    c.relam \
                 WHERE a.amname OPERATOR(pg_catalog.=) 'milvus' AND c.relkind OPERATOR(pg_catalog.=) 'i' ORDER BY \
                     c.oid",
                None,
                &[],
            )
            .map(|rows| rows.filter_map(|r| r.get::<pg_sys::Oid>(1).ok().flatten()).collect())
            .unwrap_or_default()
    })
}

/// Seals the growing segment of `index` (of every milvus index of the
/// database when NULL) and flushes every sealed segment: binlog and HNSW
/// index written to object storage, then published in the manifest.
///
/// With `wait` (the default) the calling backend flushes, interruptibly; a
/// segment a worker or another session is flushing is waited for. A cancel
/// leaves the segments sealed, safe, for the workers (or the next call).
/// With `wait => false` it returns right after the seal and wakes the
/// background workers to flush; without workers (pg_milvus not preloaded,
/// or `milvus.max_workers = 0`) it says so and flushes anyway, since nobody
/// else would. Only the index's owner (or a superuser) may flush.
/// (`regclass` in SQL is an `oid` here: the same bits.)
#[pg_extern(sql = "
CREATE FUNCTION milvus_flush(index regclass DEFAULT NULL, wait boolean DEFAULT true)
    RETURNS TABLE(index regclass, segment_id bigint, state text)
    VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
COMMENT ON FUNCTION milvus_flush(regclass, boolean) IS 'seal the growing segment and flush sealed segments to object \
    storage';
")]
fn milvus_flush(
    index: default!(Option<pg_sys::Oid>, "NULL"),
    wait: default!(bool, true),
) -> TableIterator<'static, (name!(index, pg_sys::Oid), name!(segment_id, i64), name!(state, String))> {
    check_not_in_recovery("milvus_flush()");
    let oids = match index {
        Some(oid) => leaf_indexes(oid),
        None => all_milvus_indexes(),
    };
    let workers = !wait && crate::worker::shared::workers_running();
    if !wait && !workers {
        notice!(
            "no pg_milvus background workers run (pg_milvus not in shared_preload_libraries, or milvus.max_workers = \
                0); flushing in this session"
        );
    }
    let mut rows = Vec::new();
    for oid in &oids {
        // SAFETY: index_open checks the OID and locks the relation.
        for (segment, state) in unsafe { flush_index(*oid, !workers) } {
            rows.push((*oid, segment, state));
        }
    }
    if workers {
        // SAFETY: a backend global.
        crate::worker::shared::wake_launcher(unsafe { pg_sys::MyDatabaseId.to_u32() });
    }
    TableIterator::new(rows)
}

/// The segments of a milvus index, the growing one included: Milvus'
/// GetSegmentInfo.
#[pg_extern(sql = "
CREATE FUNCTION milvus_segments(index regclass)
    RETURNS TABLE(segment_id bigint, state text, index_state text, rows bigint, deleted_rows bigint, bytes bigint,
                  seal_reason text, created_at timestamptz, sealed_at timestamptz, flushed_at timestamptz, error text)
    STABLE PARALLEL SAFE STRICT LANGUAGE c AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
COMMENT ON FUNCTION milvus_segments(regclass) IS 'the segments of a milvus index, growing one included';
")]
#[allow(clippy::type_complexity)] // a SQL result row, spelled out for pgrx
fn milvus_segments(
    index: pg_sys::Oid,
) -> TableIterator<
    'static,
    (
        name!(segment_id, i64),
        name!(state, String),
        name!(index_state, String),
        name!(rows, i64),
        name!(deleted_rows, i64),
        name!(bytes, i64),
        name!(seal_reason, Option<String>),
        name!(created_at, TimestampWithTimeZone),
        name!(sealed_at, Option<TimestampWithTimeZone>),
        name!(flushed_at, Option<TimestampWithTimeZone>),
        name!(error, Option<String>),
    ),
> {
    // SAFETY: index_open checks the OID and locks the relation.
    let rows = unsafe {
        let rel = pg_sys::index_open(index, pg_sys::AccessShareLock as i32);
        check_milvus_index(rel);
        let (manifest, page_rows) = page::with_meta_shared(rel, |meta| {
            let dims = meta.dims as usize;
            let heads = std::iter::once((meta.growing_segment, meta.growing_head))
                .chain(meta.sealed().iter().map(|c| (c.segment, c.head)));
            let page_rows: Vec<(u64, u64)> = heads.map(|(s, h)| (s, count_rows(rel, h, dims))).collect();
            (page::read_manifest(rel, meta), page_rows)
        });
        pg_sys::index_close(rel, pg_sys::AccessShareLock as i32);
        let time = |secs: u64| to_timestamptz(secs);
        // The background workers' current failure streak on this index, and
        // a segment searches could not load.
        let trouble = crate::worker::shared::trouble(pg_sys::MyDatabaseId.to_u32(), index.to_u32());
        manifest
            .segments
            .iter()
            .map(|e| {
                let m = &e.meta;
                let rows = page_rows.iter().find(|(s, _)| *s == m.id.0).map(|(_, r)| *r).unwrap_or(m.rows);
                (
                    m.id.0 as i64,
                    m.state.as_str().to_owned(),
                    m.index_state.as_str().to_owned(),
                    rows as i64,
                    m.deleted_rows as i64,
                    m.bytes as i64,
                    m.seal_reason.as_ref().map(|r| r.to_string()),
                    time(m.created_at),
                    m.sealed_at.map(time),
                    m.flushed_at.map(time),
                    trouble.damage.as_ref().filter(|(s, _)| *s == m.id.0).map(|(_, error)| error.clone()).or_else(
                        || {
                            // A failure not tied to a segment concerns every sealed one.
                            trouble
                                .failure
                                .as_ref()
                                .filter(|(s, _, _)| *s == m.id.0 || (*s == 0 && m.state == SegmentState::Sealed))
                                .map(|(_, error, attempts)| {
                                    format!(
                                        "{error} (background worker, {attempts} failed attempts; retrying with backoff)"
                                    )
                                })
                        },
                    ),
                )
            })
            .collect::<Vec<_>>()
    };
    TableIterator::new(rows)
}

fn to_timestamptz(unix_secs: u64) -> TimestampWithTimeZone {
    // SAFETY: a pure conversion.
    let ts = unsafe { pg_sys::time_t_to_timestamptz(unix_secs as pg_sys::pg_time_t) };
    TimestampWithTimeZone::try_from(ts).unwrap_or_else(|_| error!("timestamp out of range: {unix_secs}"))
}

/// The distances to `query` of the rows a scan must search in pages: the
/// growing segment and every sealed segment not yet flushed, computed as
/// each page is read (no row is copied out). Call with the meta page
/// share-locked.
pub(crate) unsafe fn page_hits(index: pg_sys::Relation, meta: &Meta, metric: Metric, query: &[f32]) -> PageHits {
    let dims = meta.dims as usize;
    let mut hits = PageHits::default();
    let heads = std::iter::once(meta.growing_head).chain(meta.sealed().iter().map(|c| c.head));
    for head in heads {
        unsafe {
            page::walk_chain(index, head, |_, p| {
                page::for_each_row(p, dims, |_, key, v| hits.push(key, metric.distance(query, v)))
            })
        };
    }
    hits
}
