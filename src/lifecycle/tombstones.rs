//! Settling tombstones: VACUUM records the positions of a flushed
//! segment's dead rows in the manifest as pending tombstones
//! (`crate::am::vacuum`), and never waits for the store; this job writes
//! them to object storage as a delta binlog each, as Milvus' L0 deletes
//! reach segments. The workers run it after their merges, and
//! `milvus_flush()` before it returns.

use milvus_core::error::Failed;
use milvus_core::format::delta;
use milvus_core::jobs::{self, JobError};
use milvus_core::segment::{SegmentId, SegmentState};

use super::segment_lock::SegmentLock;
use crate::error::OrRaise;
use crate::pages::{Index, manifest_chain};

/// Writes the pending tombstones of every flushed segment of `index` to a
/// delta binlog each and publishes them: the store's part of VACUUM's
/// work, done after it. The upload holds no lock; the publication takes
/// the segment's job lock, and settles only the rows it wrote (VACUUM may
/// have recorded more meanwhile). A segment compacted meanwhile is passed
/// over: its output carries its tombstones, and what was written is
/// garbage. Returns how many tombstones it settled, or why it failed.
pub fn settle(index: Index) -> Result<u64, Failed<JobError>> {
    let (_, manifest) = manifest_chain::snapshot(index);
    let pending: Vec<(SegmentId, Vec<u32>)> = manifest
        .flushed_segments()
        .filter(|e| !e.pending_tombstones.is_empty())
        .map(|e| (e.meta.id, e.pending_tombstones.iter().collect()))
        .collect();
    if pending.is_empty() {
        return Ok(0);
    }
    let id = crate::catalog::index_id(index);
    let doing = |segment: SegmentId| format!("write tombstones of segment {segment} of index \"{}\"", index.name());
    let store = crate::storage::try_storage_at(manifest.storage_url.as_deref()).map_err(|e| {
        Failed::new(doing(pending[0].0), JobError::from(e)).with_detail(super::flush::FLUSH_FAILED_DETAIL)
    })?;
    let mut settled = 0;
    for (segment, rows) in pending {
        let written = rows.clone();
        let store = store.clone();
        let url = manifest.storage_url.as_deref();
        let failed = |e: JobError| Failed::new(doing(segment), e).with_detail(super::flush::FLUSH_FAILED_DETAIL);
        let mut delta =
            crate::off_thread::run("tombstones", move |_| jobs::write_tombstones(&store, id, segment, &written))
                .map_err(failed)?;
        let bytes = delta::encode(segment, &rows);
        let _writing =
            super::object_pages::write_delta(index, url, &mut delta, &bytes).map_err(|e| failed(JobError::from(e)))?;
        let _lock = SegmentLock::acquire(index, segment.0);
        let (_, now) = manifest_chain::snapshot(index);
        if now.segment(segment).is_some_and(|e| e.meta.state == SegmentState::Flushed) {
            manifest_chain::change(index, |m| m.settle_tombstones(segment, delta, &rows)).or_raise();
            settled += rows.len() as u64;
        }
    }
    Ok(settled)
}
