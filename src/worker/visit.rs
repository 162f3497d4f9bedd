//! One visit of one database by a worker.
//!
//! For each milvus index, in a transaction of its own: seal the growing
//! segment if the seal policy says so, flush every sealed segment, run the
//! compaction plans; then, every `milvus.gc_interval`, collect garbage. The
//! jobs are the ones `milvus_flush()`, `milvus_compact()` and `milvus_gc()`
//! run, under the same per-segment job locks, so a worker and a user (or two
//! workers) never do the same job at once.
//!
//! An index that a DDL statement holds (REINDEX, DROP) is skipped, not
//! waited for. A failure (storage down, disk full) aborts that index's
//! transaction, nothing else: the rows stay sealed in pages, the index backs
//! off (`milvus_core::policy::retry`), and the first failure of a streak and
//! the recovery are logged once each; `milvus_segments()` shows the error.

use std::panic::AssertUnwindSafe;

use milvus_core::policy::retry::Streak;
use milvus_core::policy::seal::GrowingStats;
use milvus_core::segment::SegmentId;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;

use super::shared;
use crate::am::flush::{self, now};
use crate::am::{compact, gc, options, page};

/// Visits the database; false if it has no milvus index.
pub(super) fn visit_database(database: u32) -> bool {
    let indexes = match in_transaction(true, || Ok::<_, Failure>(flush::all_milvus_indexes())) {
        Ok(indexes) => indexes,
        Err((_, _, e)) => {
            warning!("pg_milvus worker could not list the milvus indexes: {e}");
            return true;
        }
    };
    if indexes.is_empty() {
        return false;
    }
    for oid in indexes {
        super::reload_if_asked();
        let now = now();
        if !shared::ready(database, oid.to_u32(), now) {
            continue;
        }
        // SAFETY: visit_index locks and checks the relation itself.
        let outcome = in_transaction(false, || unsafe { visit_index(database, oid) });
        let subject = |name: Option<String>| {
            format!("background work on index \"{}\"", name.unwrap_or_else(|| oid.to_u32().to_string()))
        };
        let outcome = outcome
            .map(subject)
            .map_err(|(name, segment, message)| (format!("{} failed: {message}", subject(name)), segment, message));
        report(database, oid.to_u32(), now, outcome);
    }
    let now = now();
    if shared::ready(database, DATABASE_GC, now) && shared::gc_due(database, now, crate::gucs::gc_interval().as_secs())
    {
        // Its errors say "garbage collection failed: ..." themselves.
        // A location that failed is in its row; the others were collected.
        let outcome =
            in_transaction(true, || match gc::gc_database("background worker").into_iter().find_map(|row| row.4) {
                Some(message) => Err((None, 0, message)),
                None => Ok(()),
            });
        let outcome = outcome.map(|_| "garbage collection".to_owned());
        report(
            database,
            DATABASE_GC,
            now,
            outcome.map_err(|(_, _, message)| (format!("garbage collection failed: {message}"), 0, message)),
        );
    }
    true
}

/// The retry slot of the database-wide garbage collection (index slots are
/// keyed by index OIDs, which never take this value).
const DATABASE_GC: u32 = u32::MAX;

/// (index name if known, segment, error) of a failed index visit.
type Failure = (Option<String>, u64, String);

/// An open index, closed when dropped: every early return of a visit
/// closes it (a relation left open is a relcache reference leak).
struct OpenIndex(pg_sys::Relation);

impl Drop for OpenIndex {
    fn drop(&mut self) {
        // SAFETY: opened by index_open in visit_index; the lock is kept to
        // the end of the transaction.
        unsafe { pg_sys::index_close(self.0, pg_sys::NoLock as i32) };
    }
}

/// Records the outcome of the work on `slot` (an index, or the database's
/// GC): `Ok(subject)`, or `Err((log line, segment, error))`. Logs the first
/// failure of a streak and the recovery that ends it, once each.
fn report(database: u32, slot: u32, now: u64, outcome: Result<String, (String, u64, String)>) {
    match outcome {
        Ok(subject) => {
            if let Streak::Ended { failures } = shared::record_outcome(database, slot, now, Ok(())) {
                log!("pg_milvus worker: {subject} works again after {failures} failed attempts");
            }
        }
        Err((line, segment, message)) => {
            if shared::record_outcome(database, slot, now, Err((segment, &message))) == Streak::Started {
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

/// Seals, flushes and compacts one index. `Ok(None)` when the index is busy
/// or gone (skipped); `Ok(Some(name))` when done.
unsafe fn visit_index(database: u32, oid: pg_sys::Oid) -> Result<Option<String>, Failure> {
    unsafe {
        // Never queue behind DDL: skip, and come back next time.
        if !pg_sys::ConditionalLockRelationOid(oid, pg_sys::RowExclusiveLock as i32) {
            return Ok(None);
        }
        if !crate::am::relation_exists(oid.to_u32()) {
            return Ok(None);
        }
        let open = OpenIndex(pg_sys::index_open(oid, pg_sys::NoLock as i32));
        let index = open.0;
        let name = crate::am::relation_name(index);
        let failed = |segment: u64, message: String| Err((Some(name.clone()), segment, message));

        // Seal, when the policy says so.
        let (meta, manifest) = page::read_meta_and_manifest(index);
        let now = now();
        let dims = meta.dims as u64;
        let rows = flush::count_rows(index, meta.growing_head, meta.dims as usize);
        let stats = GrowingStats {
            rows,
            bytes: rows * (dims * 4 + 8),
            created_at: manifest.segment(SegmentId(meta.growing_segment)).map_or(now, |e| e.meta.created_at),
            last_insert_at: shared::observe_growing(database, oid.to_u32(), meta.growing_segment, rows, now),
        };
        let max_rows = options::of(index).segment_max_rows as u64;
        if let Some(reason) = crate::gucs::seal_policy(max_rows).check(&stats, now) {
            flush::seal(index, reason);
        }

        // Flush what is sealed. The pages it empties are reused by the next
        // rows; the file's free tail goes back at VACUUM (autovacuum visits
        // insert-only tables too), not here: the lock it takes is logged,
        // and on a standby it would cancel queries after every flush.
        for chain in page::read_meta(index).sealed() {
            if let Err(message) = flush::flush_segment(index, SegmentId(chain.segment), "sealed; background worker") {
                return failed(chain.segment, message);
            }
        }

        // Compact.
        for plan in compact::plans(index) {
            if let Err(message) = compact::run_plan(index, &plan) {
                return failed(plan.inputs.first().map_or(0, |s| s.0), message);
            }
        }
        Ok(Some(name))
    }
}

/// Runs `f` in a transaction of its own: committed when `f` returns `Ok`,
/// aborted when it returns `Err` (a failed job commits nothing) or raises
/// an error (which comes back as a [`Failure`] blaming no segment). With
/// `snapshot`, for SQL (SPI), under an active snapshot; without, `f` works
/// on index pages and catalogs only and holds no snapshot, so a long flush
/// or compaction never holds back the xmin horizon (VACUUM could not remove
/// the rows just deleted, and compaction would have no tombstones to purge).
fn in_transaction<T, E: Into<Failure>>(snapshot: bool, f: impl FnOnce() -> Result<T, E>) -> Result<T, Failure> {
    // SAFETY: a worker's main loop, between transactions.
    unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        if snapshot {
            pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
        }
    }
    let result = PgTryBuilder::new(AssertUnwindSafe(|| f().map_err(Into::into)))
        .catch_others(|e| {
            Err(match e {
                CaughtError::PostgresError(r)
                | CaughtError::ErrorReport(r)
                | CaughtError::RustPanic { ereport: r, .. } => (None, 0, r.message().to_owned()),
            })
        })
        .execute();
    // SAFETY: ending the transaction started above.
    unsafe {
        if result.is_ok() {
            if snapshot {
                pg_sys::PopActiveSnapshot();
            }
            pg_sys::CommitTransactionCommand();
        } else {
            pg_sys::AbortCurrentTransaction();
        }
    }
    result
}
