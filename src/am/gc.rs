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
//! longer exists. An index being created is not yet visible in the catalog,
//! but its creator holds a lock on its OID: GC skips any OID it cannot lock,
//! so a long CREATE INDEX never loses its first segments.

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

type GcRow = (pg_sys::Oid, i64, i64, i64);

fn collect(url: Option<&str>, prefix: String, referenced: HashSet<String>) -> GcReport {
    let storage = crate::storage::storage_at(url);
    let grace = crate::gucs::gc_grace_period();
    let hold = crate::debug::Hold::at(PausePoint::Gc);
    crate::storage::run_job("gc", move |cancel| {
        storage.collect_garbage(&prefix, &referenced, grace, SystemTime::now(), &|| hold.hold(cancel))
    })
        .unwrap_or_else(|e| raise_io(format!("garbage collection failed: {e}")))
}

fn row(oid: pg_sys::Oid, r: &GcReport) -> GcRow {
    (oid, r.deleted.len() as i64, r.kept_referenced as i64, r.kept_young as i64)
}

fn record(r: &GcReport, job: JobRecord) {
    if r.deleted.is_empty() {
        job.discard();
    } else {
        job.done(r.deleted.len() as u64, r.deleted_bytes);
    }
}

/// Collects one index's garbage; returns its row and its storage URL.
unsafe fn gc_index(oid: pg_sys::Oid, why: &str) -> (GcRow, Option<String>) {
    unsafe {
        let index = pg_sys::index_open(oid, pg_sys::RowExclusiveLock as i32);
        flush::check_milvus_index(index);
        flush::check_owner(index);
        let job = JobRecord::start(JobKind::Gc, oid.to_u32(), &[], format!("index \"{}\"", super::relation_name(index)), why.to_owned());
        let (_, manifest) = page::read_meta_and_manifest(index);
        let referenced: HashSet<String> = manifest.referenced_keys().map(str::to_owned).collect();
        let report = collect(manifest.storage_url.as_deref(), index_id(index).prefix(), referenced);
        record(&report, job);
        // Dropped segments none of whose objects is left, including those
        // an earlier collection deleted before it was cut short.
        let gone = |k: &str| !report.remaining.contains(k);
        if manifest.clone().forget_dropped(gone) > 0 {
            change_manifest(index, |m| m.forget_dropped(gone));
        }
        pg_sys::index_close(index, pg_sys::RowExclusiveLock as i32);
        (row(oid, &report), manifest.storage_url)
    }
}

/// Index OIDs with objects under this database's prefix at `url`.
fn indexes_in_storage(url: Option<&str>) -> Result<BTreeSet<u32>, String> {
    // SAFETY: reading backend globals.
    let (cluster, database) = unsafe { (pg_sys::GetSystemIdentifier(), pg_sys::MyDatabaseId.to_u32()) };
    let prefix = ObjectKey::database_prefix(cluster, database);
    let storage = crate::storage::try_storage_at(url)?;
    let listed = crate::storage::run_job("gc", move |_| storage.list(&prefix).map(|l| (prefix, l)));
    let (prefix, listed) = listed.map_err(|e| format!("garbage collection failed: {e}"))?;
    Ok(listed.iter().filter_map(|o| o.key.strip_prefix(&prefix)?.split('/').next()?.parse().ok()).collect())
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
            let report = collect(url, index_id_of(oid).prefix(), HashSet::new());
            record(&report, job);
            row(relid, &report)
        });
        pg_sys::UnlockRelationOid(relid, pg_sys::AccessExclusiveLock as i32);
        result
    }
}

/// Deletes objects no manifest references, older than
/// `milvus.gc_grace_period`: of `index`, or (NULL) of every milvus index of
/// the database and of every dropped one. Superuser for the whole database,
/// owner for one index.
#[pg_extern(sql = "
CREATE FUNCTION milvus_gc(index regclass DEFAULT NULL)
    RETURNS TABLE(index regclass, deleted_objects bigint, referenced_objects bigint, young_objects bigint)
    VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
COMMENT ON FUNCTION milvus_gc(regclass) IS 'delete unreferenced objects of milvus indexes after the grace period';
")]
fn milvus_gc(
    index: default!(Option<pg_sys::Oid>, "NULL"),
) -> TableIterator<
    'static,
    (name!(index, pg_sys::Oid), name!(deleted_objects, i64), name!(referenced_objects, i64), name!(young_objects, i64)),
> {
    flush::check_not_in_recovery("milvus_gc()");
    let rows: Vec<GcRow> = match index {
        // SAFETY: index_open checks the OID and locks the relation.
        Some(oid) => vec![unsafe { gc_index(oid, "milvus_gc()").0 }],
        None => {
            // SAFETY: a catalog check of the current user.
            if !unsafe { pg_sys::superuser() } {
                ereport!(ERROR, PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, "must be superuser to collect garbage of every index", "Owners can call milvus_gc('<index>') on their own indexes.");
            }
            gc_database("milvus_gc()")
        }
    };
    TableIterator::new(rows)
}

/// Collects the garbage of every milvus index of the database, and of every
/// dropped one; `why` is logged with each job.
///
/// Dropped indexes are looked for wherever objects may be: the embedded
/// default, `milvus.storage_url`, every live index's location, and every
/// location an index was ever built with (`remembered_locations`). A
/// remembered location that cannot be listed (a bucket since deleted) is
/// skipped with a WARNING; the others fail the collection.
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
    for (url, required) in &locations {
        let oids = match indexes_in_storage(url.as_deref()) {
            Ok(oids) => oids,
            Err(message) if *required => raise_io(message),
            Err(message) => {
                warning!("skipping storage location {}: {message}", url.as_deref().unwrap_or("default"));
                continue;
            }
        };
        for oid in oids.into_iter().filter(|o| !live_u32.contains(o)) {
            // SAFETY: gc_dropped locks what it collects.
            rows.extend(unsafe { gc_dropped(oid, url.as_deref(), why) });
        }
    }
    rows
}
