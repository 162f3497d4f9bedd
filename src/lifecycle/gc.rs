//! Garbage collection: `milvus_gc()`.
//!
//! An object is garbage when no manifest references it: the upload of a
//! flush or compaction that crashed before its commit, the segments a
//! compaction replaced, everything of a dropped (or truncated, or reindexed)
//! index. It is deleted only once `milvus.gc_grace_period` has passed since
//! it stopped being referenced (since the compaction that dropped its
//! segment; since its creation for the rest), so a query that loaded a
//! segment just before a compaction replaced it, a point-in-time restore to
//! a moment before the compaction, or an upload whose commit is a moment
//! away, is never robbed (invariant 5: a referenced object is never
//! deleted).
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

use milvus_core::error::Failed;
use milvus_core::jobs::{IndexId, JobError};
use milvus_core::storage::{GcReport, ObjectKey};
use pgrx::prelude::*;

use crate::catalog::{self, index_id, index_id_of};
use crate::pages::{OpenIndex, manifest_chain};
use crate::shared::{JobKind, JobRecord};

/// What one collection did: of an index, or (no index) of dropped
/// databases, or of a storage location that could not be listed; with
/// what failed, keeping its cause's SQLSTATE for the call that raises it.
#[derive(Debug, Default)]
pub struct Collected {
    pub index: Option<pg_sys::Oid>,
    pub deleted: u64,
    pub kept_referenced: u64,
    pub kept_young: u64,
    pub error: Option<Failed<JobError>>,
}

impl Collected {
    fn of(index: Option<pg_sys::Oid>, r: &GcReport) -> Collected {
        let (deleted, kept_referenced, kept_young) =
            (r.deleted.len() as u64, r.kept_referenced as u64, r.kept_young as u64);
        Collected { index, deleted, kept_referenced, kept_young, error: None }
    }

    fn failed(index: Option<pg_sys::Oid>, error: Failed<JobError>) -> Collected {
        Collected { index, error: Some(error), ..Collected::default() }
    }
}

/// Deletes the garbage under `prefix` (`what` names it in an error: "the
/// garbage of index ...").
fn collect(
    url: Option<&str>,
    prefix: String,
    referenced: HashSet<String>,
    what: &str,
) -> Result<GcReport, Failed<JobError>> {
    let failed = |e: milvus_core::storage::StorageError| Failed::new(format!("collect {what}"), JobError::from(e));
    let storage = crate::storage::try_storage_at(url).map_err(failed)?;
    let grace = crate::gucs::gc_grace_period();
    crate::off_thread::run("gc", move |control| {
        storage.collect_garbage(&prefix, &referenced, grace, SystemTime::now(), control.cancel_flag())
    })
    .map_err(failed)
}

fn record(r: &GcReport, job: JobRecord) {
    if r.deleted.is_empty() {
        job.discard();
    } else {
        job.done(r.deleted.len() as u64, r.deleted_bytes);
    }
}

/// Collects one index's garbage; returns what it did (with the error, if
/// its storage failed) and its storage URL. Owner or superuser.
pub fn gc_index(oid: pg_sys::Oid, why: &str) -> (Collected, Option<String>) {
    let index = OpenIndex::open(oid, pg_sys::RowExclusiveLock);
    if !catalog::is_built_milvus_index(*index) {
        // Being built concurrently: its objects are the build's, all of
        // them to be referenced once it commits.
        return (Collected { index: Some(oid), ..Collected::default() }, None);
    }
    catalog::check_owner(*index);
    let name = index.name();
    // A copy takes what it references under its own prefix first: the
    // collection below keeps to that prefix, its origin does not.
    if let Err(e) = super::adopt::adopt_if_copied(*index) {
        return (Collected::failed(Some(oid), e), None);
    }
    let job = JobRecord::start(JobKind::Gc, oid.to_u32(), &[], format!("index \"{name}\""), why.to_owned());
    let (_, snapshot) = manifest_chain::snapshot(*index);
    // A segment dropped by a merge keeps its objects for the grace period
    // counted from the drop, when queries, copies and restores to a point
    // before it stop needing them.
    let now = milvus_core::segment::unix_now();
    let grace = crate::gucs::gc_grace_period();
    let referenced: HashSet<String> = snapshot.kept_keys(now, grace).map(str::to_owned).collect();
    let what = format!("the garbage of index \"{name}\"");
    let collected = match collect(snapshot.storage_url.as_deref(), index_id(*index).prefix(), referenced, &what) {
        Ok(report) => {
            record(&report, job);
            // Dropped segments none of whose objects is left, including
            // those an earlier collection deleted before it was cut short.
            let gone = |k: &str| !report.remaining.contains(k);
            if snapshot.clone().forget_dropped(gone) > 0 {
                manifest_chain::change(*index, |m| m.forget_dropped(gone));
            }
            Collected::of(Some(oid), &report)
        }
        Err(failed) => {
            job.failed(&failed.to_string());
            Collected::failed(Some(oid), failed)
        }
    };
    (collected, snapshot.storage_url)
}

/// What `url` holds of this cluster, from one listing: the databases with
/// objects there, and the indexes of `database` with objects there.
/// `name` names the location in an error.
fn stored_at(
    url: Option<&str>,
    name: &str,
    cluster: u64,
    database: u32,
) -> Result<(BTreeSet<u32>, BTreeSet<u32>), Failed<JobError>> {
    let failed = |e| Failed::new(format!("list storage location {name}"), JobError::from(e));
    let prefix = ObjectKey::cluster_prefix(cluster);
    let storage = crate::storage::try_storage_at(url).map_err(failed)?;
    let listed = crate::off_thread::run("gc", move |_| storage.list(&prefix).map(|l| (prefix, l)));
    let (prefix, listed) = listed.map_err(failed)?;
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
fn gc_dropped(oid: u32, url: Option<&str>, why: &str) -> Option<Collected> {
    let relid = pg_sys::Oid::from(oid);
    // SAFETY: a conditional lock on an OID, released below (or by an
    // error's abort).
    if !unsafe { pg_sys::ConditionalLockRelationOid(relid, pg_sys::AccessExclusiveLock as i32) } {
        return None;
    }
    let result = (!catalog::relation_exists(oid)).then(|| {
        let job = JobRecord::start(JobKind::Gc, oid, &[], format!("dropped index {oid}"), why.to_owned());
        let what = format!("the objects of dropped index {oid}");
        match collect(url, index_id_of(oid).prefix(), HashSet::new(), &what) {
            Ok(report) => {
                record(&report, job);
                Collected::of(Some(relid), &report)
            }
            Err(failed) => {
                job.failed(&failed.to_string());
                Collected::failed(Some(relid), failed)
            }
        }
    });
    // SAFETY: the lock taken above.
    unsafe { pg_sys::UnlockRelationOid(relid, pg_sys::AccessExclusiveLock as i32) };
    result
}

/// Collects, at `url`, the objects of those of `databases` (of `cluster`)
/// that no longer exist (DROP DATABASE leaves its indexes' objects behind:
/// no manifest references them any more). The grace period still applies.
fn gc_dropped_databases(
    url: Option<&str>,
    cluster: u64,
    databases: &BTreeSet<u32>,
    why: &str,
) -> Result<Option<Collected>, Failed<JobError>> {
    let mut total: Option<Collected> = None;
    for &database in databases.iter().filter(|d| !catalog::database_exists(**d)) {
        let job = JobRecord::start(JobKind::Gc, 0, &[], format!("dropped database {database}"), why.to_owned());
        let what = format!("the objects of dropped database {database}");
        let report = collect(url, ObjectKey::database_prefix(cluster, database), HashSet::new(), &what)?;
        record(&report, job);
        let t = total.get_or_insert_default();
        t.deleted += report.deleted.len() as u64;
        t.kept_referenced += report.kept_referenced as u64;
        t.kept_young += report.kept_young as u64;
    }
    Ok(total)
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
pub fn gc_database(why: &str) -> Vec<Collected> {
    let live = catalog::all_milvus_indexes();
    let live_u32: HashSet<u32> = live.iter().map(|o| o.to_u32()).collect();
    let mut locations: Vec<Option<String>> = vec![None, crate::gucs::storage_url_setting()];
    let mut rows = Vec::new();
    for oid in live {
        let (row, url) = gc_index(oid, why);
        rows.push(row);
        locations.push(url);
    }
    locations.sort();
    locations.dedup();
    let remembered = crate::storage::remembered_locations().into_iter().map(Some).filter(|u| !locations.contains(u));
    let locations: Vec<(Option<String>, bool)> =
        locations.iter().cloned().map(|u| (u, true)).chain(remembered.map(|u| (u, false))).collect();
    let IndexId { cluster, database, .. } = index_id_of(0);
    for (url, in_use) in &locations {
        let name = url.as_deref().unwrap_or("the default location");
        let found = stored_at(url.as_deref(), name, cluster, database).and_then(|(databases, indexes)| {
            Ok((indexes, gc_dropped_databases(url.as_deref(), cluster, &databases, why)?))
        });
        let (indexes, dropped_databases) = match found {
            Ok(found) => found,
            Err(failed) if *in_use => {
                rows.push(Collected::failed(None, failed));
                continue;
            }
            Err(failed) => {
                debug1!("pg_milvus: skipping a storage location of dropped indexes: {failed}");
                continue;
            }
        };
        for oid in indexes.into_iter().filter(|o| !live_u32.contains(o)) {
            rows.extend(gc_dropped(oid, url.as_deref(), why));
        }
        rows.extend(dropped_databases);
    }
    rows
}
