//! The maintenance functions: the jobs of `crate::am` run by hand (or by
//! pg_cron), over one index, each partition's index of a partitioned one,
//! or every milvus index of the database. Each checks that the caller owns
//! what it works on, and refuses to run on a standby.

use std::sync::Arc;

use milvus_core::format::manifest::SegmentEntry;
use milvus_core::jobs;
use milvus_core::segment::{SealReason, SegmentId, SegmentState};
use milvus_core::storage::Storage;
use pgrx::prelude::*;

use crate::catalog;
use crate::error::{OrRaise, raise_error};
use crate::lifecycle::compact::{self, Compacted};
use crate::lifecycle::flush::{self, Flushed, SealRequest};
use crate::lifecycle::{gc, open_segments};
use crate::pages::{free, manifest_chain};
use crate::{shared, storage};

/// Who carries a job out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    /// This session, now (`wait => true`, or no workers).
    Here,
    /// The background workers, woken now (`wait => false`).
    Workers,
}

impl Run {
    /// `wait => false` hands the work to the workers if they run; without
    /// them a NOTICE says so and this session does it, since nobody else
    /// would.
    fn choose(wait: bool, what: &str) -> Run {
        if wait {
            return Run::Here;
        }
        if shared::workers_running() {
            return Run::Workers;
        }
        notice!(
            "no pg_milvus background workers run (pg_milvus not in shared_preload_libraries, or \
                milvus.max_workers = 0); {what} in this session"
        );
        Run::Here
    }
}

/// The indexes a maintenance call works on: `index` (its partitions' for a
/// partitioned one), or every milvus index of the database the caller owns
/// (a superuser owns them all): other roles' indexes are theirs to flush.
fn targets(index: Option<pg_sys::Oid>) -> Vec<pg_sys::Oid> {
    index
        .map(catalog::leaf_indexes)
        .unwrap_or_else(|| catalog::all_milvus_indexes().into_iter().filter(|oid| catalog::owns(*oid)).collect())
}

/// Seals the growing segment of `index` (of every milvus index of the
/// database when NULL) and flushes every sealed segment: binlog and HNSW
/// index written to object storage, then published in the manifest; and
/// writes the tombstones VACUUM recorded to delta binlogs.
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
    catalog::check_not_in_recovery("milvus_flush()");
    let run = Run::choose(wait, "flushing");
    let mut rows = Vec::new();
    for oid in targets(index) {
        for (segment, state) in flush_index(oid, run) {
            rows.push((oid, segment.0 as i64, state.as_str().to_owned()));
        }
    }
    if run == Run::Workers {
        shared::wake_launcher(catalog::database());
    }
    TableIterator::new(rows)
}

/// Seals one index and, run here, flushes every sealed segment, waiting
/// for a job another session or a worker runs on one. Returns each sealed
/// segment with its state: `flushed` (or `dropped`, if a compaction got to
/// it first) once flushed, `sealed` when left to the workers.
fn flush_index(oid: pg_sys::Oid, run: Run) -> Vec<(SegmentId, SegmentState)> {
    let index = catalog::open_owned(oid, pg_sys::RowExclusiveLock);
    adopt_if_copied(*index);
    flush::seal(*index, SealRequest::growing(SealReason::Manual));
    let sealed: Vec<SegmentId> = index.meta_copy().sealed().iter().map(|c| SegmentId(c.segment)).collect();
    if run == Run::Workers {
        return sealed.into_iter().map(|s| (s, SegmentState::Sealed)).collect();
    }
    let mut out = Vec::new();
    for segment in sealed {
        match flush::flush_segment(*index, segment, "milvus_flush()") {
            Ok(Flushed::Rows(_)) => out.push((segment, SegmentState::Flushed)),
            Ok(Flushed::AlreadyFlushed) => {
                // Another job flushed it while we waited for its lock.
                let (_, manifest) = manifest_chain::snapshot(*index);
                out.extend(manifest.segment(segment).map(|e| (segment, e.meta.state)));
            }
            Err(e) => raise_error(&e),
        }
    }
    // The tombstones VACUUM recorded in the manifest go to the store too.
    crate::lifecycle::tombstones::settle(*index).or_raise();
    // The flushed rows' pages are free: give the file's tail back.
    free::give_back_tail(*index);
    out
}

/// Adopts what a copied index references (`lifecycle/adopt.rs`) before a job
/// writes to it; its failure is the call's.
fn adopt_if_copied(index: crate::pages::Index) {
    crate::lifecycle::adopt::adopt_if_copied(index).or_raise();
}

/// What `milvus_compact()` does with the plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CompactMode {
    Run(Run),
    /// Lists the plans and their reasons, does nothing.
    DryRun,
}

type CompactRow = (pg_sys::Oid, String, Vec<i64>, Option<i64>, i64);

/// Compacts `index` (every milvus index of the database when NULL): purges
/// segments with many deleted rows and merges small ones. With `dry_run`,
/// lists the plans and their reasons without doing them. Owner or superuser.
/// With `wait => false` and background workers running, returns the plans
/// (output_segment NULL) and wakes the workers to carry them out; without
/// workers it says so and compacts in this session.
#[pg_extern(sql = "
CREATE FUNCTION milvus_compact(index regclass DEFAULT NULL, wait boolean DEFAULT true, dry_run boolean DEFAULT false)
    RETURNS TABLE(index regclass, plan text, input_segments bigint[], output_segment bigint, removed_rows bigint)
    VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
COMMENT ON FUNCTION milvus_compact(regclass, boolean, boolean) IS 'purge deleted rows and merge small segments of \
    milvus indexes';
")]
#[allow(clippy::type_complexity)] // a SQL result row, spelled out for pgrx
fn milvus_compact(
    index: default!(Option<pg_sys::Oid>, "NULL"),
    wait: default!(bool, true),
    dry_run: default!(bool, false),
) -> TableIterator<
    'static,
    (
        name!(index, pg_sys::Oid),
        name!(plan, String),
        name!(input_segments, Vec<i64>),
        name!(output_segment, Option<i64>),
        name!(removed_rows, i64),
    ),
> {
    let mode = if dry_run {
        CompactMode::DryRun
    } else {
        catalog::check_not_in_recovery("milvus_compact()");
        CompactMode::Run(Run::choose(wait, "compacting"))
    };
    let rows: Vec<CompactRow> = targets(index).into_iter().flat_map(|oid| compact_index(oid, mode)).collect();
    if mode == CompactMode::Run(Run::Workers) {
        shared::wake_launcher(catalog::database());
    }
    TableIterator::new(rows)
}

/// One row per plan for `oid`: what it would do (a dry run, or left to the
/// workers, output NULL), or what it did (skipped plans left out).
fn compact_index(oid: pg_sys::Oid, mode: CompactMode) -> Vec<CompactRow> {
    let index = catalog::open_owned(oid, pg_sys::RowExclusiveLock);
    if mode != CompactMode::DryRun {
        adopt_if_copied(*index);
    }
    let mut rows = Vec::new();
    for plan in compact::plans(*index) {
        let row = |output: Option<SegmentId>| {
            let inputs = plan.inputs.iter().map(|s| s.0 as i64).collect();
            (oid, plan.to_string(), inputs, output.map(|s| s.0 as i64), plan.removed_rows as i64)
        };
        match mode {
            CompactMode::DryRun | CompactMode::Run(Run::Workers) => rows.push(row(None)),
            CompactMode::Run(Run::Here) => match compact::run_plan(*index, &plan, &mut || {}) {
                Ok(Compacted::Skipped) => {}
                Ok(Compacted::Dropped) => rows.push(row(None)),
                // A clustering's first output: its plan says how many it wrote.
                Ok(Compacted::Into(outputs)) => rows.push(row(outputs.first().copied())),
                Err(e) => raise_error(&e),
            },
        }
    }
    rows
}

/// Deletes objects no manifest references, older than
/// `milvus.gc_grace_period`: of `index` (of each partition's index, for a
/// partitioned one), or (NULL) of every milvus index of the database, of
/// every dropped index, and of every dropped database. Superuser for the
/// whole database, owner for one index.
#[pg_extern(sql = "
CREATE FUNCTION milvus_gc(index regclass DEFAULT NULL)
    RETURNS TABLE(index regclass, deleted_objects bigint, referenced_objects bigint, young_objects bigint, error text)
    VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
COMMENT ON FUNCTION milvus_gc(regclass) IS 'delete unreferenced objects of milvus indexes after the grace period';
")]
#[allow(clippy::type_complexity)] // a SQL result row, spelled out for pgrx
fn milvus_gc(
    index: default!(Option<pg_sys::Oid>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(index, Option<pg_sys::Oid>),
        name!(deleted_objects, i64),
        name!(referenced_objects, i64),
        name!(young_objects, i64),
        name!(error, Option<String>),
    ),
> {
    catalog::check_not_in_recovery("milvus_gc()");
    let collected: Vec<gc::Collected> = match index {
        // One index: its failure is the call's.
        Some(oid) => catalog::leaf_indexes(oid)
            .into_iter()
            .map(|oid| gc::gc_index(oid, "milvus_gc()").0)
            .map(|c| match c.error {
                Some(failed) => raise_error(&failed),
                None => c,
            })
            .collect(),
        None => {
            // SAFETY: a catalog check of the current user.
            if !unsafe { pg_sys::superuser() } {
                ereport!(
                    ERROR,
                    PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                    "must be superuser to collect garbage of every index",
                    "Owners can call milvus_gc('<index>') on their own indexes."
                );
            }
            gc::gc_database("milvus_gc()")
        }
    };
    let rows = collected.into_iter().map(|c| {
        (c.index, c.deleted as i64, c.kept_referenced as i64, c.kept_young as i64, c.error.map(|e| e.to_string()))
    });
    TableIterator::new(rows)
}

/// Brings every flushed segment of `index` (of each partition's index, for
/// a partitioned one) into the local cache and opens it, so the first
/// queries do not pay for a download (for an index larger than the cache:
/// its index files and its binlogs' read indexes, the rows staying in the
/// store); returns how many segments and bytes the objects hold. Files already cached are read through and checked in
/// full (opening a mapped file checks only its header): a damaged one gets
/// a WARNING naming it, and is fetched again. Fails like a search would,
/// naming a segment that cannot be read. Owner or superuser, as the other
/// maintenance functions.
#[pg_extern(sql = "
CREATE FUNCTION milvus_prewarm(index regclass)
    RETURNS TABLE(segments integer, bytes bigint)
    VOLATILE PARALLEL UNSAFE STRICT LANGUAGE c AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
COMMENT ON FUNCTION milvus_prewarm(regclass) IS 'load the flushed segments of a milvus index into the local cache';
")]
fn milvus_prewarm(index: pg_sys::Oid) -> TableIterator<'static, (name!(segments, i32), name!(bytes, i64))> {
    let (mut count, mut bytes) = (0, 0);
    for oid in catalog::leaf_indexes(index) {
        let index = catalog::open_owned(oid, pg_sys::AccessShareLock);
        let (meta, manifest) = manifest_chain::snapshot(*index);
        let flushed: Vec<SegmentEntry> = manifest.flushed_segments().cloned().collect();
        bytes += flushed.iter().map(|e| e.meta.bytes as i64).sum::<i64>();
        let cache = storage::cache();
        let damaged = crate::off_thread::run("verify", move |_| {
            flushed.iter().flat_map(|e| jobs::verify_cached(&cache, e)).collect::<Vec<_>>()
        });
        if !damaged.is_empty() {
            for what in &damaged {
                warning!("damaged file in the segment cache, fetched again: {what}");
            }
            // This backend's mappings of the damaged files go too.
            open_segments::forget(oid.to_u32());
        }
        count += open_segments::loaded(*index, &manifest, meta.metric()).len() as i32;
    }
    TableIterator::once((count, bytes))
}

/// Checks every object of `entries` in `storage`, off the main thread.
fn verify(storage: &Arc<Storage>, entries: Vec<SegmentEntry>) -> Vec<(SegmentId, Vec<jobs::StoredObject>)> {
    let storage = Arc::clone(storage);
    crate::off_thread::run("verify", move |control| {
        entries.iter().map(|e| (e.meta.id, jobs::verify_stored(&storage, e, control.cancel_flag()))).collect()
    })
}

/// Reads every object the manifest of `index` (of each partition's index,
/// for a partitioned one) references from object storage, bypassing the
/// cache, and checks each in full: one row per object, `error` saying why
/// its segment could not be rebuilt from the store (gone, unreadable,
/// damaged) or NULL when it is whole. Searches served from the cache do not
/// tell: this does, before the cache loses its copies. For whoever may read
/// the table, as `milvus_segments()`; on a standby too.
#[pg_extern(sql = "
CREATE FUNCTION milvus_verify(index regclass)
    RETURNS TABLE(index regclass, segment_id bigint, object text, bytes bigint, error text)
    VOLATILE PARALLEL UNSAFE STRICT LANGUAGE c AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
COMMENT ON FUNCTION milvus_verify(regclass) IS 'check that every object of a milvus index is whole in object storage';
")]
#[allow(clippy::type_complexity)] // a SQL result row, spelled out for pgrx
fn milvus_verify(
    index: pg_sys::Oid,
) -> TableIterator<
    'static,
    (
        name!(index, pg_sys::Oid),
        name!(segment_id, i64),
        name!(object, String),
        name!(bytes, i64),
        name!(error, Option<String>),
    ),
> {
    let mut rows = Vec::new();
    for oid in catalog::leaf_indexes(index) {
        let (flushed, storage) = {
            let index = crate::pages::OpenIndex::open(oid, pg_sys::AccessShareLock);
            catalog::check_milvus_index(*index);
            catalog::check_can_read(*index);
            let (_, manifest) = manifest_chain::snapshot(*index);
            let flushed: Vec<SegmentEntry> = manifest.flushed_segments().cloned().collect();
            // An embedded index's objects missing from the directory are
            // copied from its pages first: what is then checked is what
            // searches read.
            let storage = crate::lifecycle::object_pages::reading_store(*index, &manifest).or_raise();
            (flushed, storage)
        };
        let mut checked = verify(&storage, flushed.clone());
        // An embedded index's files damaged on disk are written again from
        // its pages (with a warning), then checked once more.
        let damaged: Vec<SegmentEntry> = flushed
            .into_iter()
            .filter(|e| checked.iter().any(|(id, o)| *id == e.meta.id && o.iter().any(|o| o.error.is_some())))
            .collect();
        if !damaged.is_empty() {
            let index = crate::pages::OpenIndex::open(oid, pg_sys::AccessShareLock);
            let (_, manifest) = manifest_chain::snapshot(*index);
            if crate::lifecycle::object_pages::heal(*index, &manifest, &storage, &damaged) > 0 {
                checked.retain(|(id, _)| damaged.iter().all(|e| e.meta.id != *id));
                checked.extend(verify(&storage, damaged));
                checked.sort_by_key(|(id, _)| *id);
            }
        }
        for (segment, objects) in checked {
            for o in objects {
                rows.push((oid, segment.0 as i64, o.key, o.bytes as i64, o.error));
            }
        }
    }
    TableIterator::new(rows)
}
