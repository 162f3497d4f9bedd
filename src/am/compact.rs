//! Compaction: what `milvus_compact()` (which users schedule with pg_cron)
//! and the background workers run.
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
use std::sync::Arc;

use milvus_core::jobs::{self, Merge, Target};
use milvus_core::policy::compaction::{self, CompactionPlan, CompactionPolicy};
use milvus_core::search::LoadedSegment;
use milvus_core::segment::{SegmentId, SegmentState, unix_now};
use pgrx::prelude::*;

use super::insert::size_rule;
use super::segment_lock::SegmentLock;
use super::{flush, options, segments};
use crate::gucs::PausePoint;
use crate::pages::{Index, manifest};
use crate::shared::{JobKind, JobRecord};
use crate::{catalog, storage};

/// What the compaction policy proposes for `index` now.
pub fn plans(index: Index) -> Vec<CompactionPlan> {
    let (meta, manifest) = manifest::snapshot(index);
    let (o, dims) = (options::of(index), meta.dims());
    let policy = CompactionPolicy {
        delete_ratio: crate::gucs::compaction_delete_ratio(),
        target_rows: o.segment_max_rows as u64,
        // What a growing segment seals at: whole pages of rows.
        min_rows: size_rule(o.growing_rows(), dims).row_capacity(),
        fan_in: compaction::FAN_IN,
    };
    compaction::plan(manifest.segments.iter().map(|e| &e.meta), &HashSet::new(), &policy)
}

/// What running a plan did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compacted {
    /// Its inputs changed meanwhile (another job got to them): skipped.
    Skipped,
    /// Its inputs held no live row: they were only dropped.
    Dropped,
    /// Its inputs' live rows are this new segment.
    Into(SegmentId),
}

/// Runs one plan; `Err(message)` if storage or the build failed (the inputs
/// stay as they were).
pub fn run_plan(index: Index, plan: &CompactionPlan) -> Result<Compacted, String> {
    let ids: Vec<u64> = plan.inputs.iter().map(|s| s.0).collect();
    let _locks = SegmentLock::acquire_all(index, &ids);
    let (meta, manifest) = manifest::snapshot(index);
    if !plan.inputs.iter().all(|id| manifest.segment(*id).is_some_and(|e| e.meta.state == SegmentState::Flushed)) {
        return Ok(Compacted::Skipped);
    }
    let (metric, dims) = (meta.metric(), meta.dims());
    let what = format!("segments {ids:?} of index \"{}\"", index.name());
    let job = JobRecord::start(JobKind::Compact, index.oid().to_u32(), &ids, what.clone(), plan.to_string());
    let loaded = segments::loaded(index, &manifest, metric);
    let inputs: Vec<Arc<LoadedSegment>> = loaded.into_iter().filter(|s| plan.inputs.contains(&s.id)).collect();
    if inputs.iter().all(|s| s.live_rows() == 0) {
        manifest::change(index, |m| m.drop_segments(&plan.inputs)).unwrap_or_else(|e| error!("{e}"));
        job.done(0, 0);
        return Ok(Compacted::Dropped);
    }
    let output = manifest::change(index, |m| m.allocate_segment_id());
    let params = flush::hnsw_params(index);
    let id = catalog::index_id(index);
    let store = storage::try_storage_at(manifest.storage_url.as_deref());
    let cache = storage::cache();
    let flushed = storage::run_job("compact", move |control| {
        let refs: Vec<&LoadedSegment> = inputs.iter().map(|s| &**s).collect();
        let merge = Merge { inputs: &refs, output, metric, dims, params };
        let store = store?;
        jobs::compact(Target { storage: &store, cache: &cache, index: id }, &merge, control).map_err(|e| e.to_string())
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
    manifest::change(index, |m| m.publish_compaction(&plan.inputs, flushed, unix_now()))
        .unwrap_or_else(|e| error!("{e}"));
    job.done(rows, bytes);
    Ok(Compacted::Into(output))
}
