//! Seal and flush: Milvus' Flush, inside Postgres.
//!
//! **Seal.** Under the meta page's exclusive lock, which waits out every
//! insert in flight (they hold it shared), the growing segment's page chain
//! becomes a sealed chain and a new, empty growing segment takes its place
//! (`milvus_core::format::meta::MetaPage::seal`). That is the barrier: every row
//! appended before it is in the sealed segment, every row after it in the
//! new one. The manifest records the seal in the same WAL record
//! (`pages::manifest_chain::commit`).
//!
//! **Flush.** A sealed segment's rows are read from its pages and handed to
//! `milvus_core::jobs::flush` on a helper thread (binlog, HNSW build, upload;
//! `crate::off_thread::run`; a small segment flushed behind others, as a bulk
//! insert seals them, gets no graph: searched by brute force until a merge
//! gives it one); meanwhile `milvus_segments()` shows the segment
//! `flushing`, and its index `building` while the graph is built. On the
//! embedded store the main thread then copies the objects into the index's
//! pages (`object_pages.rs`), so the WAL carries them. Data
//! first, metadata last: only once the objects are in storage does one WAL
//! record publish them in the manifest and drop the sealed chain from the
//! meta page, after which its pages are freed. A crash before that record
//! leaves the rows sealed in pages (flushed again later) and the uploads
//! unreferenced (garbage for GC); a crash after leaves them in the flushed
//! segment only. Never both, never neither (invariant 2).
//!
//! Flushing a segment holds its job lock (`segment_lock.rs`), as
//! compaction and VACUUM do.

use std::sync::Arc;

use milvus_core::Metric;
use milvus_core::error::Failed;
use milvus_core::format::manifest::{self, Manifest};
use milvus_core::graph::segment::HnswParams;
use milvus_core::jobs::{self, JobError, NewSegment, Target};
use milvus_core::search::PageRows;
use milvus_core::segment::{SealReason, SegmentId, unix_now};
use pgrx::prelude::*;

use super::object_pages;
use super::segment_lock::SegmentLock;
use crate::am::options;
use crate::catalog;
use crate::error::OrRaise;
use crate::gucs::PausePoint;
use crate::pages::{Index, Lock, chain, growing, manifest_chain, release};
use crate::shared::{JobKind, JobRecord};
use crate::storage;

/// What a seal is asked to do.
#[derive(Debug, Clone)]
pub struct SealRequest {
    pub reason: SealReason,
    /// Seal only this segment: if another session sealed it first, the new
    /// growing segment is left alone.
    pub only: Option<SegmentId>,
    /// With [`milvus_core::format::meta::MAX_SEALED`] segments already waiting for
    /// their flush.
    pub when_full: WhenFull,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenFull {
    /// Raise an error saying so (a user's `milvus_flush()`, a worker).
    Raise,
    /// Do not seal: the growing segment grows on (an insert at the size
    /// limit).
    GrowOn,
}

impl SealRequest {
    /// Seal whatever is growing, for `reason`.
    pub fn growing(reason: SealReason) -> SealRequest {
        SealRequest { reason, only: None, when_full: WhenFull::Raise }
    }
}

/// What a seal did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sealed {
    /// This segment was sealed.
    Segment(SegmentId),
    /// The growing segment had no row.
    Empty,
    /// The segment asked for is not growing any more.
    Already,
    /// No room for another sealed segment ([`WhenFull::GrowOn`]).
    NoRoom,
}

/// Seals the growing segment as `request` says.
pub fn seal(index: Index, request: SealRequest) -> Sealed {
    let mut meta = index.meta(Lock::Exclusive);
    if request.only.is_some_and(|s| s != meta.growing()) {
        return Sealed::Already;
    }
    if chain::growing_is_empty(index, &meta) {
        return Sealed::Empty;
    }
    if !meta.can_seal() {
        if request.when_full == WhenFull::GrowOn {
            return Sealed::NoRoom;
        }
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!(
                "index \"{}\" has {} sealed segments waiting for their flush",
                index.name(),
                milvus_core::format::meta::MAX_SEALED
            ),
            "Flush them first (SELECT milvus_flush(...)); if it fails, the error says why."
        );
    }
    let sealed = meta.growing();
    let mut manifest = manifest_chain::read(&meta);
    let now = unix_now();
    let rows = chain::count_rows(index, meta.growing_head, meta.shape());
    let why = request.reason.to_string();
    manifest.seal(sealed, rows, request.reason, now).or_raise();
    let growing = manifest.add_growing(now);
    let job = JobRecord::start(JobKind::Seal, index.oid().to_u32(), &[sealed.0], describe(index, sealed), why);
    growing::commit_seal(&mut meta, &manifest, growing);
    drop(meta);
    release::drain_released(index);
    job.done(rows, 0);
    Sealed::Segment(sealed)
}

/// "segment 3 of index \"items_idx\"", for messages and the job log.
pub fn describe(index: Index, segment: SegmentId) -> String {
    format!("segment {segment} of index \"{}\"", index.name())
}

/// What a flush of one segment did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flushed {
    /// Flushed this many rows.
    Rows(u64),
    /// Another job flushed (or compacted) it meanwhile.
    AlreadyFlushed,
}

/// What a failed flush means for the user, as the DETAIL of its message.
pub const FLUSH_FAILED_DETAIL: &str =
    "The rows stay in the sealed segment; nothing is lost. Call milvus_flush() again once the cause is fixed.";

/// The graph parameters of the index's segments, and their codes.
pub fn hnsw_params(index: Index) -> HnswParams {
    options::of(index).hnsw_params()
}

/// Flushes one sealed segment, for `why` (who asked). An error if storage
/// or the build failed: the segment stays sealed, nothing is lost.
pub fn flush_segment(index: Index, segment: SegmentId, why: &str) -> Result<Flushed, Failed<JobError>> {
    let _lock = SegmentLock::acquire(index, segment.0);
    let (meta, manifest) = manifest_chain::snapshot(index);
    let Some(sealed) = meta.sealed_chain(segment) else {
        return Ok(Flushed::AlreadyFlushed);
    };
    // Behind a backlog (a bulk insert sealed many small segments), no graph
    // for a small one: all are searchable sooner, and a merge builds one.
    let graph_min_rows = if meta.sealed().len() > 1 { jobs::FLUSH_GRAPH_MIN_ROWS } else { 0 };
    // The chain is stable: inserts go to the growing segment, and VACUUM
    // and other flushes wait for the segment lock we hold.
    let rows = chain::read_rows(index, sealed.head, meta.shape());
    let job =
        JobRecord::start(JobKind::Flush, index.oid().to_u32(), &[segment.0], describe(index, segment), why.into());
    let written = write_segment(index, segment, meta.metric(), &manifest, Arc::new(rows), graph_min_rows, &job);
    let (mut flushed, _writing) = match written {
        Ok(written) => written,
        Err(cause) => {
            let failed = Failed::new(format!("flush {}", describe(index, segment)), cause);
            job.failed(&failed.to_string());
            return Err(failed.with_detail(FLUSH_FAILED_DETAIL));
        }
    };
    crate::pause::pause_at(PausePoint::Commit);
    let (rows, bytes) = (flushed.rows, flushed.bytes);
    let keys = std::mem::take(&mut flushed.row_keys);
    publish(index, flushed);
    if !object_pages::is_embedded(manifest.storage_url.as_deref()) {
        object_pages::write_keys_after_flush(index, segment, &keys);
    }
    job.done(rows, bytes);
    Ok(Flushed::Rows(rows))
}

/// Writes `rows` as segment `segment` to the index's storage (insert binlog,
/// graph from `graph_min_rows` rows on, both cached), on a helper thread
/// that reports its phases to `job`, and on the embedded store into the
/// index's pages: what the manifest then lists, and the lock to hold until
/// it does (a shared store's keys go to pages too, before the publication
/// or, for a flush, after it: `object_pages`). A flush reads the rows from
/// a sealed chain; CREATE INDEX hands
/// over the table's rows directly, and keeps them (the `Arc` is its own
/// again once this returns) to write them to pages if storage refused.
pub fn write_segment(
    index: Index,
    segment: SegmentId,
    metric: Metric,
    manifest: &Manifest,
    rows: Arc<PageRows>,
    graph_min_rows: usize,
    job: &JobRecord,
) -> Result<(manifest::Flushed, SegmentLock), JobError> {
    let dims = manifest.dims as usize;
    let params = hnsw_params(index);
    let kinds = crate::am::filter_columns::kinds(index);
    let id = catalog::index_id(index);
    let url = manifest.storage_url.as_deref();
    let store = storage::try_storage_at(url);
    let cache = storage::cache();
    let mut flushed = crate::off_thread::run_watched(
        "flush",
        crate::off_thread::Priority::Maintenance,
        |phase| job.set_phase(phase),
        move |control| {
            let store = store?;
            let target = Target { storage: &store, cache: &cache, index: id };
            let (keys, vectors) = (&rows.keys, rows.vectors.view());
            let columns = rows.columns(&kinds).expect("values of the columns' types");
            let columns = &columns;
            let new = NewSegment { segment, metric, dims, keys, vectors, params, graph_min_rows, seed: None, columns };
            jobs::flush(target, &new, control)
        },
    )?;
    let writing = object_pages::write(index, url, flushed.objects_mut())?;
    Ok((flushed, writing))
}

/// One WAL record: the manifest lists the flushed segment, and the meta page
/// releases its sealed chain; then the chain's pages are emptied.
fn publish(index: Index, flushed: manifest::Flushed) {
    let segment = flushed.segment;
    let mut meta = index.meta(Lock::Exclusive);
    let mut manifest = manifest_chain::read(&meta);
    manifest.publish_flush(flushed, unix_now()).or_raise();
    growing::commit_flush(&mut meta, &manifest, segment);
    drop(meta);
    crate::pause::pause_at(PausePoint::Release);
    release::drain_released(index);
}
