//! Compaction: what `milvus_compact()` (which users schedule with pg_cron)
//! and the background workers run.
//!
//! The core's planner (`milvus_core::policy::compaction`) looks at the
//! manifest and proposes plans: purge a flushed segment whose deleted
//! fraction reached `milvus.compaction_delete_ratio`, merge small flushed
//! segments toward `segment_max_rows`, and for an index `WITH (cluster_by
//! = ...)` rewrite its segments as ranges of that column. A dry run returns
//! the plans.
//!
//! A plan takes its inputs' job locks (in id order) twice, briefly: to read
//! them and record the job in the job log (which keeps every other plan,
//! of a worker or of a session, off them), and to publish. In between, on a
//! helper thread, their live rows are written as a new segment (binlog,
//! HNSW, upload) while VACUUM and flushes go on: rows VACUUM tombstoned in
//! the inputs meanwhile become the output's first delta binlog, in the one
//! manifest commit that drops the inputs and publishes the output. Searches
//! that began before keep the inputs they loaded; their objects are
//! collected after `milvus.gc_grace_period`. A plan whose inputs hold no
//! live row only drops them.

use std::collections::HashSet;
use std::sync::Arc;

use milvus_core::element::Shape;
use milvus_core::error::Failed;
use milvus_core::format::manifest::{Manifest, ManifestError};
use milvus_core::jobs::{self, JobError, Merge, Merged, Target};
use milvus_core::policy::compaction::{self, CompactionPlan, CompactionPolicy, PlanKind};
use milvus_core::search::LoadedSegment;
use milvus_core::segment::{SegmentId, SegmentState, unix_now};

use super::segment_lock::SegmentLock;
use super::{flush, object_pages, open_segments};
use crate::am::{filter_columns, options};
use crate::error::OrRaise;
use crate::gucs::PausePoint;
use crate::pages::{Index, manifest_chain};
use crate::shared::{JobKind, JobRecord};
use crate::{catalog, shared, storage};
use milvus_core::pages::growing::size_rule;

/// The compaction policy of `index` (of rows of `shape`), from its
/// reloptions and the settings.
pub fn policy(index: Index, shape: Shape) -> CompactionPolicy {
    let o = options::of(index);
    CompactionPolicy {
        delete_ratio: crate::gucs::compaction_delete_ratio(),
        target_rows: o.segment_max_rows as u64,
        // Tier 0, in whole pages of rows.
        min_rows: size_rule(o.tier_rows(), shape).row_capacity(),
        fan_in: compaction::FAN_IN,
        clustering: cluster_column(index).is_some(),
    }
}

/// The filter column `index` clusters its rows by, if any. A `cluster_by`
/// that an ALTER INDEX set to a column the index cannot cluster by is
/// warned about, and compaction goes on without clustering.
fn cluster_column(index: Index) -> Option<usize> {
    filter_columns::cluster_column(index).unwrap_or_else(|message| {
        pgrx::warning!("milvus index \"{}\": {message}; compacting without clustering", index.name());
        None
    })
}

/// What the compaction policy proposes for `index` now.
pub fn plans(index: Index) -> Vec<CompactionPlan> {
    let (meta, manifest) = manifest_chain::snapshot(index);
    let policy = policy(index, meta.shape());
    let busy: HashSet<SegmentId> =
        shared::compacting(catalog::database(), index.oid().to_u32()).into_iter().map(SegmentId).collect();
    compaction::plan(manifest.segments.iter().map(|e| &e.meta), &busy, &policy)
}

/// What running a plan did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compacted {
    /// Its inputs changed meanwhile (another job got to them): skipped.
    Skipped,
    /// Its inputs held no live row: they were only dropped.
    Dropped,
    /// Its inputs' live rows are these new segments (a clustering's
    /// several, in the column's order; one otherwise).
    Into(Vec<SegmentId>),
}

/// Runs one plan; `Err(message)` if storage or the build failed (the inputs
/// stay as they were).
///
/// The inputs' job locks are held twice, briefly: to read them (and record
/// the job, which keeps every other plan off them) and to publish. In
/// between, while the output is written and indexed (seconds to minutes),
/// VACUUM and searches go on: the rows VACUUM tombstones in the inputs
/// meanwhile are carried over as the output's first delta binlog, in the
/// commit that publishes it.
///
/// An error if storage or the build failed: the inputs stay as they were
/// ([`COMPACT_FAILED_DETAIL`]).
///
/// `meanwhile` is called on this thread every 100 ms while the output is
/// written (a worker flushes what was sealed meanwhile); `&mut || {}` for
/// nothing.
/// What a failed merge or purge means for the data.
pub const COMPACT_FAILED_DETAIL: &str =
    "The segments stay as they were; nothing is lost. Call milvus_compact() again once the cause is fixed.";

pub fn run_plan(
    index: Index,
    plan: &CompactionPlan,
    meanwhile: &mut dyn FnMut(),
) -> Result<Compacted, Failed<JobError>> {
    let ids: Vec<u64> = plan.inputs.iter().map(|s| s.0).collect();
    let what = format!("segments {ids:?} of index \"{}\"", index.name());
    let (oid, database) = (index.oid().to_u32(), catalog::database());
    let locks = SegmentLock::acquire_all(index, &ids);
    let (meta, manifest) = manifest_chain::snapshot(index);
    let busy = shared::compacting(database, oid);
    if !inputs_flushed(&manifest, plan) || ids.iter().any(|s| busy.contains(s)) {
        return Ok(Compacted::Skipped);
    }
    let (metric, dims) = (meta.metric(), meta.dims());
    let job = JobRecord::start(JobKind::Compact, oid, &ids, what.clone(), plan.to_string());
    let before = inputs_of(plan, open_segments::loaded(index, &manifest, metric));
    if before.iter().all(|s| s.live_rows() == 0) {
        manifest_chain::change(index, |m| m.drop_segments(&plan.inputs, unix_now())).or_raise();
        job.done(0, 0);
        return Ok(Compacted::Dropped);
    }
    let cluster_by = match plan.kind {
        PlanKind::Cluster => match cluster_column(index) {
            Some(column) => Some(column),
            // ALTER INDEX dropped the option since the plan was made.
            None => return Ok(Compacted::Skipped),
        },
        _ => None,
    };
    // As many outputs as the plan says (one but for a clustering), never
    // more than the rows they will hold.
    let live = before.iter().map(|s| s.live_rows() as u64).sum::<u64>();
    let outputs: Vec<SegmentId> =
        manifest_chain::change(index, |m| (0..plan.outputs.clamp(1, live)).map(|_| m.allocate_segment_id()).collect());
    drop(locks);

    let params = flush::hnsw_params(index);
    let id = catalog::index_id(index);
    let url = manifest.storage_url.clone();
    let store = storage::try_storage_at(url.as_deref());
    let cache = storage::cache();
    let (inputs, ids_out) = (before.clone(), outputs.clone());
    let flushed = crate::off_thread::run_meanwhile(
        "compact",
        crate::off_thread::Priority::Maintenance,
        |_| {},
        meanwhile,
        move |control| {
            let refs: Vec<&LoadedSegment> = inputs.iter().map(|s| &**s).collect();
            let merge = Merge { inputs: &refs, outputs: &ids_out, cluster_by, metric, dims, params };
            let store = store?;
            jobs::compact(Target { storage: &store, cache: &cache, index: id }, &merge, control)
        },
    );
    let written = flushed.and_then(|mut merged| {
        let mut writing = Vec::with_capacity(merged.segments.len());
        for output in &mut merged.segments {
            writing.push(object_pages::write(index, url.as_deref(), output.objects_mut())?);
            object_pages::keys_into_pages(index, url.as_deref(), output);
        }
        Ok((merged, writing))
    });
    let (Merged { segments: flushed, layout }, _writing) = match written {
        Ok(written) => written,
        Err(cause) => {
            let failed = Failed::new(format!("compact {what}"), cause).with_detail(COMPACT_FAILED_DETAIL);
            job.failed(&failed.to_string());
            return Err(failed);
        }
    };
    crate::pause::pause_at(PausePoint::Commit);

    let _locks = SegmentLock::acquire_all(index, &ids);
    let (_, manifest) = manifest_chain::snapshot(index);
    if !inputs_flushed(&manifest, plan) {
        // Only a job that ignored the job log gets here; what was written
        // is garbage, collected after the grace period.
        job.discard();
        return Ok(Compacted::Skipped);
    }
    let after = inputs_of(plan, open_segments::loaded(index, &manifest, metric));
    // Rows VACUUM found dead while the merge wrote: pending on the outputs,
    // like any VACUUM's, so publishing writes nothing more to the store.
    let carried = jobs::carried_tombstones(&layout, &refs(&after));
    let (rows, bytes) = flushed.iter().fold((0, 0), |(r, b), f| (r + f.rows, b + f.bytes));
    manifest_chain::change(index, |m| -> Result<(), ManifestError> {
        m.publish_compaction(&plan.inputs, flushed, plan.clustered, unix_now())?;
        for (output, died) in outputs.iter().zip(&carried).filter(|(_, died)| !died.is_empty()) {
            m.add_pending_tombstones(*output, died)?;
        }
        Ok(())
    })
    .or_raise();
    job.done(rows, bytes);
    Ok(Compacted::Into(outputs))
}

/// Whether every input of `plan` is still a flushed segment of `manifest`.
fn inputs_flushed(manifest: &Manifest, plan: &CompactionPlan) -> bool {
    plan.inputs.iter().all(|id| manifest.segment(*id).is_some_and(|e| e.meta.state == SegmentState::Flushed))
}

/// The inputs of `plan` among the loaded segments, in the plan's order.
fn inputs_of(plan: &CompactionPlan, loaded: Vec<Arc<LoadedSegment>>) -> Vec<Arc<LoadedSegment>> {
    plan.inputs.iter().filter_map(|id| loaded.iter().find(|s| s.id == *id).cloned()).collect()
}

fn refs(segments: &[Arc<LoadedSegment>]) -> Vec<&LoadedSegment> {
    segments.iter().map(|s| &**s).collect()
}
