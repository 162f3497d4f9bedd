//! Compaction by hand: `milvus_compact()`, what users schedule with pg_cron.
//!
//! The core's planner (`milvus_core::policy::compaction`) looks at the
//! manifest and proposes plans: purge a flushed segment whose deleted
//! fraction reached `milvus.compaction_delete_ratio`, merge small flushed
//! segments toward `segment_max_rows`. A dry run returns the plans.
//!
//! Each plan runs under the job locks of its inputs (taken in id order), so
//! no flush, VACUUM or other compaction changes them meanwhile. The inputs'
//! live rows are written as a new segment (binlog, HNSW, upload, on a helper
//! thread); then one manifest commit drops the inputs and publishes the
//! output. Searches that began before keep the inputs they loaded; their
//! objects are collected after `milvus.gc_grace_period`. A plan whose inputs
//! hold no live row only drops them.

use std::collections::HashSet;

use milvus_core::Metric;
use milvus_core::format::manifest::Flushed;
use milvus_core::hnsw::HnswParams;
use milvus_core::jobs;
use milvus_core::policy::compaction::{self, CompactionPlan, CompactionPolicy};
use milvus_core::search::LoadedSegment;
use milvus_core::segment::{SegmentId, SegmentState};
use pgrx::prelude::*;

use super::flush::{self, SegmentLock, change_manifest, index_id, now};
use super::page;
use super::{options, relation_name};
use crate::gucs::PausePoint;
use crate::worker::shared::{JobKind, JobRecord};

type CompactRow = (pg_sys::Oid, String, Vec<i64>, Option<i64>, i64);

unsafe fn compact_index(oid: pg_sys::Oid, dry_run: bool) -> Vec<CompactRow> {
    unsafe {
        let index = pg_sys::index_open(oid, pg_sys::RowExclusiveLock as i32);
        flush::check_milvus_index(index);
        flush::check_owner(index);
        let mut rows = Vec::new();
        for plan in plans(index) {
            let inputs: Vec<i64> = plan.inputs.iter().map(|s| s.0 as i64).collect();
            let output = if dry_run {
                None
            } else {
                run_plan(index, &plan).unwrap_or_else(|message| -> Option<Option<SegmentId>> {
                    ereport!(
                        ERROR,
                        PgSqlErrorCode::ERRCODE_IO_ERROR,
                        message,
                        "The segments stay as they were; nothing is lost. Call milvus_compact() again once the cause \
                            is fixed."
                    );
                })
            };
            if dry_run || output.is_some() {
                rows.push((
                    oid,
                    plan.to_string(),
                    inputs,
                    output.flatten().map(|s| s.0 as i64),
                    plan.removed_rows as i64,
                ));
            }
        }
        pg_sys::index_close(index, pg_sys::RowExclusiveLock as i32);
        rows
    }
}

/// What the compaction policy proposes for `index` now.
pub(crate) unsafe fn plans(index: pg_sys::Relation) -> Vec<CompactionPlan> {
    let (_, manifest) = unsafe { page::read_meta_and_manifest(index) };
    let o = unsafe { options::of(index) };
    let policy = CompactionPolicy {
        delete_ratio: crate::gucs::compaction_delete_ratio(),
        target_rows: o.segment_max_rows as u64,
    };
    compaction::plan(manifest.segments.iter().map(|e| &e.meta), &HashSet::new(), &policy)
}

/// Runs one plan; `Ok(None)` if its inputs changed meanwhile (skipped),
/// `Ok(Some(None))` if it only dropped them, `Ok(Some(Some(id)))` for a new
/// segment, `Err(message)` if storage or the build failed (the inputs stay
/// as they were).
pub(crate) unsafe fn run_plan(
    index: pg_sys::Relation,
    plan: &CompactionPlan,
) -> Result<Option<Option<SegmentId>>, String> {
    unsafe {
        let mut ids = plan.inputs.clone();
        ids.sort();
        let _locks: Vec<SegmentLock> = ids.iter().map(|id| SegmentLock::acquire(index, id.0)).collect();
        let (meta, manifest) = page::read_meta_and_manifest(index);
        if !plan.inputs.iter().all(|id| manifest.segment(*id).is_some_and(|e| e.meta.state == SegmentState::Flushed)) {
            return Ok(None);
        }
        let (metric, dims) = (Metric::from_code(meta.metric).expect("meta page checked"), meta.dims as usize);
        let segments: Vec<u64> = plan.inputs.iter().map(|s| s.0).collect();
        let what = format!("segments {segments:?} of index \"{}\"", relation_name(index));
        let job =
            JobRecord::start(JobKind::Compact, (*index).rd_id.to_u32(), &segments, what.clone(), plan.to_string());
        let loaded = crate::am::scan::loaded_segments(index, &manifest, metric);
        let inputs: Vec<std::sync::Arc<LoadedSegment>> =
            loaded.into_iter().filter(|s| plan.inputs.contains(&s.id)).collect();
        if inputs.iter().all(|s| s.live_rows() == 0) {
            change_manifest(index, |m| m.drop_segments(&plan.inputs)).unwrap_or_else(|e| error!("{e}"));
            job.done(0, 0);
            return Ok(Some(None));
        }
        let output = change_manifest(index, |m| m.allocate_segment_id());
        let o = options::of(index);
        let params = HnswParams {
            m: o.m as usize,
            ef_construction: o.ef_construction as usize,
            threads: flush::build_threads(),
        };
        let id = index_id(index);
        let storage = crate::storage::try_storage_at(manifest.storage_url.as_deref());
        let cache = crate::storage::cache();
        let flushed: Result<Flushed, String> = crate::storage::run_job("compact", move |cancel| {
            let storage = storage?;
            let refs: Vec<&LoadedSegment> = inputs.iter().map(|s| &**s).collect();
            jobs::compact(&storage, &cache, id, &refs, output, metric, dims, params, cancel).map_err(|e| e.to_string())
        });
        let flushed = match flushed {
            Ok(flushed) => flushed,
            Err(cause) => {
                let message = format!("could not compact {what}: {cause}");
                job.failed(&message);
                return Err(message);
            }
        };
        crate::debug::pause_at(PausePoint::Commit);
        let (rows, bytes) = (flushed.rows, flushed.bytes);
        change_manifest(index, |m| m.publish_compaction(&plan.inputs, flushed, now()))
            .unwrap_or_else(|e| error!("{e}"));
        job.done(rows, bytes);
        Ok(Some(Some(output)))
    }
}

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
    if !dry_run {
        flush::check_not_in_recovery("milvus_compact()");
    }
    let oids = index.map(flush::leaf_indexes).unwrap_or_else(flush::all_milvus_indexes);
    let to_workers = !wait && !dry_run && crate::worker::shared::workers_running();
    if !wait && !dry_run && !to_workers {
        notice!(
            "no pg_milvus background workers run (pg_milvus not in shared_preload_libraries, or milvus.max_workers = \
                0); compacting in this session"
        );
    }
    // SAFETY: index_open checks each OID and locks the relation.
    let rows: Vec<CompactRow> =
        oids.into_iter().flat_map(|oid| unsafe { compact_index(oid, dry_run || to_workers) }).collect();
    if to_workers {
        // SAFETY: a backend global.
        crate::worker::shared::wake_launcher(unsafe { pg_sys::MyDatabaseId.to_u32() });
    }
    TableIterator::new(rows)
}
