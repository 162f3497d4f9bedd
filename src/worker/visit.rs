//! One visit of one database by a worker.
//!
//! For each milvus index, in a transaction of its own: seal the growing
//! segment if the seal policy says so, flush every sealed segment, run the
//! compaction plans one by one, flushing what inserts seal while a merge
//! writes and running the quick merges of those meanwhile, and write the
//! tombstones VACUUM recorded to delta binlogs;
//! then, every `milvus.gc_interval`, collect garbage. The jobs are the
//! ones `milvus_flush()`, `milvus_compact()` and `milvus_gc()` run, under
//! the same per-segment job locks, so a worker and a user (or two workers)
//! never do the same job at once.
//!
//! An index that a DDL statement holds (REINDEX, DROP) is skipped, not
//! waited for. A failure (storage down, disk full) aborts that index's
//! transaction, nothing else: the rows stay sealed in pages, the index backs
//! off (`milvus_core::policy::retry`), and the first failure of a streak and
//! the recovery are logged once each; `milvus_segments()` shows the error.

use std::panic::AssertUnwindSafe;

use milvus_core::policy::compaction::CompactionPolicy;
use milvus_core::policy::retry::Streak;
use milvus_core::policy::seal::GrowingStats;
use milvus_core::segment::unix_now as now;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;

use super::signals::reload_if_asked;
use crate::am::options;
use crate::catalog;
use crate::lifecycle::flush::{self, SealRequest};
use crate::lifecycle::{adopt, compact, gc, tombstones};
use crate::pages::{Index, OpenIndex, chain, manifest_chain};
use crate::shared;
use milvus_core::pages::growing::size_rule;

/// Visits the database; false if it has no milvus index.
pub(super) fn visit_database(database: u32) -> bool {
    let indexes = match in_transaction(Snapshot::Take, || Ok(catalog::all_milvus_indexes())) {
        Ok(indexes) => indexes,
        Err(failure) => {
            warning!("pg_milvus worker could not list the milvus indexes: {}", failure.message);
            return true;
        }
    };
    if indexes.is_empty() {
        return false;
    }
    for oid in indexes {
        reload_if_asked();
        let now = now();
        if !shared::ready(database, oid.to_u32(), now) {
            continue;
        }
        let outcome = in_transaction(Snapshot::None, || visit_index(database, oid));
        let subject = |name: Option<&str>| {
            format!("background work on index \"{}\"", name.map_or_else(|| oid.to_u32().to_string(), str::to_owned))
        };
        let outcome = match outcome {
            Ok(Visited::Done { name }) => Ok(subject(Some(&name))),
            Ok(Visited::Skipped) => Ok(subject(None)),
            Err(failure) => {
                Err((format!("{} failed: {}", subject(failure.index.as_deref()), failure.message), failure))
            }
        };
        report(database, oid.to_u32(), now, outcome);
    }
    let now = now();
    if shared::ready(database, DATABASE_GC, now) && shared::gc_due(database, now, crate::gucs::gc_interval().as_secs())
    {
        // A location that failed is in its row; the others were collected.
        let outcome = in_transaction(Snapshot::Take, || {
            match gc::gc_database("background worker").into_iter().find_map(|c| c.error) {
                Some(failed) => Err(Failure { index: None, segment: 0, message: failed.to_string() }),
                None => Ok(()),
            }
        });
        let outcome = outcome
            .map(|_| "garbage collection".to_owned())
            .map_err(|failure| (format!("garbage collection failed: {}", failure.message), failure));
        report(database, DATABASE_GC, now, outcome);
    }
    true
}

/// The retry slot of the database-wide garbage collection (index slots are
/// keyed by index OIDs, which never take this value).
const DATABASE_GC: u32 = u32::MAX;

/// A failed visit of an index (or the database's GC): what to show in
/// `milvus_segments()` and the log.
#[derive(Debug)]
struct Failure {
    /// The index's name, when it was known.
    index: Option<String>,
    /// The segment the failed job worked on; 0 for none in particular.
    segment: u64,
    message: String,
}

/// What a visit of an index did.
enum Visited {
    Done {
        name: String,
    },
    /// The index is busy with DDL, or gone: skipped, to come back next time.
    Skipped,
}

/// Records the outcome of the work on `slot` (an index, or the database's
/// GC): `Ok(subject)`, or `Err((log line, failure))`. Logs the first
/// failure of a streak and the recovery that ends it, once each.
fn report(database: u32, slot: u32, now: u64, outcome: Result<String, (String, Failure)>) {
    match outcome {
        Ok(subject) => {
            if let Streak::Ended { failures } = shared::record_outcome(database, slot, now, Ok(())) {
                log!("pg_milvus worker: {subject} works again after {failures} failed attempts");
            }
        }
        Err((line, failure)) => {
            let outcome = Err((failure.segment, failure.message.as_str()));
            if shared::record_outcome(database, slot, now, outcome) == Streak::Started {
                ereport!(
                    PgLogLevel::WARNING,
                    PgSqlErrorCode::ERRCODE_IO_ERROR,
                    format!("pg_milvus worker: {line}"),
                    "Nothing is lost: the rows stay in pages. The worker retries with backoff and logs again once it \
                        succeeds."
                );
            }
        }
    }
}

/// Seals, flushes and compacts one index.
fn visit_index(database: u32, oid: pg_sys::Oid) -> Result<Visited, Failure> {
    // Never queue behind DDL: skip, and come back next time.
    // SAFETY: a conditional lock, kept to the end of the transaction.
    if !unsafe { pg_sys::ConditionalLockRelationOid(oid, pg_sys::RowExclusiveLock as i32) } {
        return Ok(Visited::Skipped);
    }
    if !catalog::relation_exists(oid.to_u32()) {
        return Ok(Visited::Skipped);
    }
    // Closed on every return, and by an error's unwinding.
    let index = OpenIndex::under_lock(oid);
    if !index.has_pages() {
        return Ok(Visited::Skipped);
    }
    let name = index.name();
    let failed = |segment: u64, message: String| Failure { index: Some(name.clone()), segment, message };

    // A copied index takes what it references under its own prefix first.
    adopt::adopt_if_copied(*index).map_err(|e| failed(0, e.to_string()))?;

    // Seal, when the policy says so.
    let (meta, manifest) = manifest_chain::snapshot(*index);
    let now = now();
    let rows = chain::count_rows(*index, meta.growing_head, meta.shape());
    let stats = GrowingStats {
        rows,
        bytes: rows * (meta.shape().bytes() as u64 + 8),
        created_at: manifest.segment(meta.growing()).map_or(now, |e| e.meta.created_at),
        last_insert_at: shared::observe_growing(database, oid.to_u32(), meta.growing_segment, rows, now),
    };
    let policy = crate::gucs::seal_policy(size_rule(options::of(*index).growing_rows(meta.shape()), meta.shape()));
    if let Some(reason) = policy.check(&stats, now) {
        flush::seal(*index, SealRequest::growing(reason));
    }

    // Flush what is sealed. The pages it empties are reused by the next
    // rows; the file's free tail goes back at VACUUM (autovacuum visits
    // insert-only tables too), not here: the lock it takes is logged,
    // and on a standby it would cancel queries after every flush.
    let flush_sealed = || -> Result<(), Failure> {
        for sealed in index.meta_copy().sealed() {
            let segment = milvus_core::segment::SegmentId(sealed.segment);
            flush::flush_segment(*index, segment, "sealed; background worker")
                .map_err(|e| failed(segment.0, e.to_string()))?;
        }
        Ok(())
    };
    flush_sealed()?;

    // Compact, one plan at a time, planned again after each. A merge can
    // take tens of seconds: what inserts seal meanwhile is flushed while it
    // runs (a merge holds no segment lock while it writes), and the quick
    // merges of what was flushed ([`CompactionPolicy::is_quick`]) run too,
    // so fresh rows never wait in pages, nor pile up in small segments,
    // behind it. At most `PLANS_PER_VISIT`, so that a steady stream of
    // merges never keeps the worker from other indexes.
    let mut done = std::collections::HashSet::new();
    while done.len() < PLANS_PER_VISIT
        && let Some(plan) = compact::plans(*index).into_iter().find(|p| !done.contains(&p.inputs))
    {
        let mut failure = None;
        let mut meanwhile = || {
            if failure.is_none() {
                failure = flush_sealed().err();
            }
            if failure.is_none() && !CompactionPolicy::is_quick(&plan) {
                failure = quick_merges(*index, &mut || flush_sealed().err()).err();
            }
        };
        let ran = compact::run_plan(*index, &plan, &mut meanwhile);
        ran.map_err(|e| failed(plan.inputs.first().map_or(0, |s| s.0), e.to_string()))?;
        if let Some(failure) = failure {
            return Err(failure);
        }
        flush_sealed()?;
        done.insert(plan.inputs);
    }

    // Write the tombstones VACUUM recorded in the manifest to the store
    // (after the merges, which drop the rows of segments they purge).
    tombstones::settle(*index).map_err(|e| failed(0, e.to_string()))?;
    Ok(Visited::Done { name })
}

/// Runs the quick merges `index` has now, one after another, on this
/// thread while a longer merge writes on its own; `flush` flushes what is
/// sealed meanwhile (and says why it failed).
fn quick_merges(index: Index, flush: &mut dyn FnMut() -> Option<Failure>) -> Result<(), Failure> {
    let mut failure = None;
    for plan in compact::plans(index).into_iter().filter(CompactionPolicy::is_quick) {
        let mut meanwhile = || {
            if failure.is_none() {
                failure = flush();
            }
        };
        compact::run_plan(index, &plan, &mut meanwhile).map_err(|e| Failure {
            index: Some(index.name()),
            segment: plan.inputs.first().map_or(0, |s| s.0),
            message: e.to_string(),
        })?;
        if let Some(failure) = failure.take() {
            return Err(failure);
        }
    }
    Ok(())
}

/// The most compaction plans one visit runs on an index (a cascade of
/// merges, tier after tier, continues at the next visit).
const PLANS_PER_VISIT: usize = 16;

/// Whether a worker's transaction takes a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Snapshot {
    /// For SQL (SPI).
    Take,
    /// For work on index pages and catalogs only: a long flush or compaction
    /// then never holds back the xmin horizon (VACUUM could not remove the
    /// rows just deleted, and compaction would have no tombstones to purge).
    None,
}

/// Runs `f` in a transaction of its own: committed when `f` returns `Ok`,
/// aborted when it returns `Err` (a failed job commits nothing) or raises
/// an error (which comes back as a [`Failure`] blaming no segment).
fn in_transaction<T>(snapshot: Snapshot, f: impl FnOnce() -> Result<T, Failure>) -> Result<T, Failure> {
    // SAFETY: a worker's main loop, between transactions.
    unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        if snapshot == Snapshot::Take {
            pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
        }
    }
    let result = PgTryBuilder::new(AssertUnwindSafe(f))
        .catch_others(|e| {
            let message = match e {
                CaughtError::PostgresError(r)
                | CaughtError::ErrorReport(r)
                | CaughtError::RustPanic { ereport: r, .. } => r.message().to_owned(),
            };
            Err(Failure { index: None, segment: 0, message })
        })
        .execute();
    // SAFETY: ending the transaction started above.
    unsafe {
        if result.is_ok() {
            if snapshot == Snapshot::Take {
                pg_sys::PopActiveSnapshot();
            }
            pg_sys::CommitTransactionCommand();
        } else {
            pg_sys::AbortCurrentTransaction();
        }
    }
    result
}
