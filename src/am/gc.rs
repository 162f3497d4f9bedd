//! Garbage collection: `milvus_gc()`.
//!
//! An object is garbage when no manifest references it: the upload of a
//! flush or compaction that crashed before its commit, the segments a
//! compaction replaced, everything of a dropped (or truncated, or reindexed)
//! index. It is deleted only once older than `milvus.gc_grace_period`, so a
//! query that loaded a segment just before a compaction replaced it, or an
//! upload whose commit is a moment away, is never robbed (invariant 5: a
//! referenced object is never deleted).
//!
//! Per index: the referenced set is its manifest's keys; afterwards dropped
//! segments whose objects are all gone leave the manifest. For the whole
//! database (index NULL), also every index prefix in storage whose index no
//! longer exists, and every database prefix of this cluster whose database
//! no longer exists (DROP DATABASE cannot reach object storage). An index
//! being created is not yet visible in the catalog, but its creator holds a
//! lock on its OID: GC skips any OID it cannot lock, so a long CREATE INDEX
//! never loses its first segments.

use std::collections::{BTreeSet, HashSet};
use std::time::SystemTime;

use milvus_core::storage::{GcReport, ObjectKey};
use pgrx::prelude::*;

use super::flush::change_manifest;
use super::flush::{self, index_id, index_id_of};
use super::page;
use crate::error::raise_io;
use crate::gucs::PausePoint;
use crate::worker::shared::{JobKind, JobRecord};

/// (index, deleted, kept referenced, kept young, error): one row of
/// `milvus_gc()`. No index: the objects of dropped databases, or a storage
/// location that could not be listed.
type GcRow = (Option<pg_sys::Oid>, i64, i64, i64, Option<String>);

fn collect(url: Option<&str>, prefix: String, referenced: HashSet<String>) -> Result<GcReport, String> {
    let storage = crate::storage::try_storage_at(url)?;
    let grace = crate::gucs::gc_grace_period();
    let hold = crate::debug::Hold::at(PausePoint::Gc);
    crate::storage::run_job("gc", move |cancel| {
        storage.collect_garbage(&prefix, &referenced, grace, SystemTime::now(), &|| hold.hold(cancel))
    })
    .map_err(|e| format!("garbage collection failed: {e}"))
}

fn row(oid: Option<pg_sys::Oid>, r: &GcReport) -> GcRow {
    (oid, r.deleted.len() as i64, r.kept_referenced as i64, r.kept_young as i64, None)
}

fn failed_row(oid: Option<pg_sys::Oid>, error: String) -> GcRow {
    (oid, 0, 0, 0, Some(error))
}

fn record(r: &GcReport, job: JobRecord) {
    if r.deleted.is_empty() {
        job.discard();
    } else {
        job.done(r.deleted.len() as u64, r.deleted_bytes);
    }
}

/// Collects one index's garbage; returns its row (with the error, if its
/// storage failed) and its storage URL.
unsafe fn gc_index(oid: pg_sys::Oid, why: &str) -> (GcRow, Option<String>) {
    unsafe {
        let index = pg_sys::index_open(oid, pg_sys::RowExclusiveLock as i32);
        flush::check_milvus_index(index);
        flush::check_owner(index);
        let name = super::relation_name(index);
        let job = JobRecord::start(JobKind::Gc, oid.to_u32(), &[], format!("index \"{name}\""), why.to_owned());
        let (_, manifest) = page::read_meta_and_manifest(index);
        let referenced: HashSet<String> = manifest.referenced_keys().map(str::to_owned).collect();
        let row = match collect(manifest.storage_url.as_deref(), index_id(index).prefix(), referenced) {
            Ok(report) => {
                record(&report, job);
                // Dropped segments none of whose objects is left, including
                // those an earlier collection deleted before it was cut short.
                let gone = |k: &str| !report.remaining.contains(k);
                if manifest.clone().forget_dropped(gone) > 0 {
                    change_manifest(index, |m| m.forget_dropped(gone));
                }
                row(Some(oid), &report)
            }
            Err(message) => {
                let message = format!("index \"{name}\": {message}");
                job.failed(&message);
                failed_row(Some(oid), message)
            }
        };
        pg_sys::index_close(index, pg_sys::RowExclusiveLock as i32);
        (row, manifest.storage_url)
    }
}

/// What `url` holds of this cluster, from one listing: the databases with
/// objects there, and the indexes of `database` with objects there.
fn stored_at(url: Option<&str>, cluster: u64, database: u32) -> Result<(BTreeSet<u32>, BTreeSet<u32>), String> {
    let prefix = ObjectKey::cluster_prefix(cluster);
    let storage = crate::storage::try_storage_at(url)?;
    let listed = crate::storage::run_job("gc", move |_| storage.list(&prefix).map(|l| (prefix, l)));
    let (prefix, listed) = listed.map_err(|e| format!("garbage collection failed: {e}"))?;
    let (mut databases, mut indexes) = (BTreeSet::new(), BTreeSet::new());
    for object in &listed {
        let mut numbers = object.key.strip_prefix(&prefix).unwrap_or_default().split('/').map(str::parse::<u32>);
        if let Some(Ok(d)) = numbers.next() {
            databases.insert(d);
            if let (true, Some(Ok(index))) = (d == database, numbers.next()) {
                indexes.insert(index);
            }
        }
    }
    Ok((databases, indexes))
}

/// Collects the objects of an index that no longer exists, unless its OID
/// is locked (an index being created).
unsafe fn gc_dropped(oid: u32, url: Option<&str>, why: &str) -> Option<GcRow> {
    unsafe {
        let relid = pg_sys::Oid::from(oid);
        if !pg_sys::ConditionalLockRelationOid(relid, pg_sys::AccessExclusiveLock as i32) {
            return None;
        }
        let result = (!super::relation_exists(oid)).then(|| {
            let job = JobRecord::start(JobKind::Gc, oid, &[], format!("dropped index {oid}"), why.to_owned());
            match collect(url, index_id_of(oid).prefix(), HashSet::new()) {
                Ok(report) => {
                    record(&report, job);
                    row(Some(relid), &report)
                }
                Err(message) => {
                    job.failed(&message);
                    failed_row(Some(relid), format!("dropped index {oid}: {message}"))
                }
            }
        });
        pg_sys::UnlockRelationOid(relid, pg_sys::AccessExclusiveLock as i32);
        result
    }
}

/// Collects, at `url`, the objects of those of `databases` (of `cluster`)
/// that no longer exist (DROP DATABASE leaves its indexes' objects behind:
/// no manifest references them any more). The grace period still applies.
fn gc_dropped_databases(
    url: Option<&str>,
    cluster: u64,
    databases: &BTreeSet<u32>,
    why: &str,
) -> Result<Option<GcRow>, String> {
    let mut total: Option<GcRow> = None;
    for &database in databases.iter().filter(|d| !super::database_exists(**d)) {
        let job = JobRecord::start(JobKind::Gc, 0, &[], format!("dropped database {database}"), why.to_owned());
        let report = collect(url, ObjectKey::database_prefix(cluster, database), HashSet::new())?;
        record(&report, job);
        let r = row(None, &report);
        total = Some(match total {
            Some(t) => (None, t.1 + r.1, t.2 + r.2, t.3 + r.3, None),
            None => r,
        });
    }
    Ok(total)
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
    flush::check_not_in_recovery("milvus_gc()");
    let rows: Vec<GcRow> = match index {
        // One index: its failure is the call's.
        Some(oid) => flush::leaf_indexes(oid)
            .into_iter()
            // SAFETY: index_open checks the OID and locks the relation.
            .map(|oid| unsafe { gc_index(oid, "milvus_gc()").0 })
            .map(|row| match row.4 {
                Some(message) => raise_io(message),
                None => row,
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
            gc_database("milvus_gc()")
        }
    };
    TableIterator::new(rows)
}

/// Collects the garbage of every milvus index of the database, of every
/// dropped one, and of every dropped database; `why` is logged with each
/// job. One index whose storage fails does not stop the others: its row
/// carries the error.
///
/// Dropped indexes and databases are looked for wherever objects may be:
/// the embedded default, `milvus.storage_url`, every live index's location,
/// and every location an index was ever built with (`remembered_locations`).
/// A location of live indexes that cannot be listed gives a row with the
/// error; one only dropped indexes used (a bucket since deleted) is skipped
/// quietly: nothing there is anybody's any more.
pub(crate) fn gc_database(why: &str) -> Vec<GcRow> {
    let live = flush::all_milvus_indexes();
    let live_u32: HashSet<u32> = live.iter().map(|o| o.to_u32()).collect();
    let mut locations: Vec<Option<String>> = vec![None, crate::gucs::storage_url_setting()];
    let mut rows = Vec::new();
    for oid in live {
        // SAFETY: index_open checks the OID and locks the relation.
        let (row, url) = unsafe { gc_index(oid, why) };
        rows.push(row);
        locations.push(url);
    }
    locations.sort();
    locations.dedup();
    let remembered = crate::storage::remembered_locations().into_iter().map(Some).filter(|u| !locations.contains(u));
    let locations: Vec<(Option<String>, bool)> =
        locations.iter().cloned().map(|u| (u, true)).chain(remembered.map(|u| (u, false))).collect();
    // SAFETY: reading backend globals.
    let (cluster, database) = unsafe { (pg_sys::GetSystemIdentifier(), pg_sys::MyDatabaseId.to_u32()) };
    for (url, in_use) in &locations {
        let name = url.as_deref().unwrap_or("the default location");
        let found = stored_at(url.as_deref(), cluster, database).and_then(|(databases, indexes)| {
            Ok((indexes, gc_dropped_databases(url.as_deref(), cluster, &databases, why)?))
        });
        let (indexes, dropped_databases) = match found {
            Ok(found) => found,
            Err(message) if *in_use => {
                rows.push(failed_row(None, format!("storage location {name}: {message}")));
                continue;
            }
            Err(message) => {
                debug1!("pg_milvus: skipping storage location {name} of dropped indexes: {message}");
                continue;
            }
        };
        for oid in indexes.into_iter().filter(|o| !live_u32.contains(o)) {
            // SAFETY: gc_dropped locks what it collects.
            rows.extend(unsafe { gc_dropped(oid, url.as_deref(), why) });
        }
        rows.extend(dropped_databases);
    }
    rows
}
