//! Which flushed segments compaction rewrites, and why.
//!
//! Two rules, Milvus' own:
//! - **purge**: a segment whose deleted fraction reaches
//!   `milvus.compaction_delete_ratio` (default 0.2) is rewritten without its
//!   tombstoned rows;
//! - **merge**: flushed segments with fewer live rows than half the target
//!   size are merged, in id order, into segments of at most the target size.
//!   A merge purges its inputs' tombstones too.
//!
//! [`plan`] is pure and fast: it reads metadata only, never puts a segment in
//! two plans, never touches a segment already in a running job, and its
//! result is what `milvus_compact(dry_run => true)` shows.

use std::collections::HashSet;
use std::fmt;

use crate::segment::{SegmentId, SegmentMeta, SegmentState};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionPolicy {
    /// Deleted fraction at which a segment is purged (Milvus: 0.2).
    pub delete_ratio: f64,
    /// Live rows a merged segment aims for (the index's `segment_max_rows`).
    pub target_rows: u64,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        CompactionPolicy { delete_ratio: 0.2, target_rows: 100_000 }
    }
}

impl CompactionPolicy {
    /// A segment below this many live rows is "small" and may be merged.
    pub fn small_rows(&self) -> u64 {
        self.target_rows / 2
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanKind {
    /// Rewrite one segment without its tombstoned rows.
    Purge,
    /// Merge small segments into one.
    Merge,
}

impl PlanKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanKind::Purge => "purge",
            PlanKind::Merge => "merge",
        }
    }
}

/// One compaction to do: its inputs and why.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionPlan {
    pub kind: PlanKind,
    pub inputs: Vec<SegmentId>,
    /// Live rows the output will hold.
    pub output_rows: u64,
    /// Tombstoned rows it removes.
    pub removed_rows: u64,
}

impl fmt::Display for CompactionPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<String> = self.inputs.iter().map(|s| s.to_string()).collect();
        match self.kind {
            PlanKind::Purge => write!(
                f,
                "purge segment {}: {} of {} rows deleted",
                ids[0],
                self.removed_rows,
                self.output_rows + self.removed_rows
            ),
            PlanKind::Merge => write!(
                f,
                "merge {} small segments [{}] into one of {} rows",
                ids.len(),
                ids.join(", "),
                self.output_rows
            ),
        }
    }
}

fn plan_of(kind: PlanKind, inputs: &[&SegmentMeta]) -> CompactionPlan {
    CompactionPlan {
        kind,
        inputs: inputs.iter().map(|s| s.id).collect(),
        output_rows: inputs.iter().map(|s| s.live_rows()).sum(),
        removed_rows: inputs.iter().map(|s| s.deleted_rows).sum(),
    }
}

/// The compactions worth doing now. `busy` holds segments that a running job
/// (flush, build, another compaction) owns; they are left alone.
pub fn plan<'a>(
    segments: impl IntoIterator<Item = &'a SegmentMeta>,
    busy: &HashSet<SegmentId>,
    policy: &CompactionPolicy,
) -> Vec<CompactionPlan> {
    let mut eligible: Vec<&SegmentMeta> =
        segments.into_iter().filter(|s| s.state == SegmentState::Flushed && !busy.contains(&s.id)).collect();
    eligible.sort_by_key(|s| s.id);
    let needs_purge = |s: &SegmentMeta| s.deleted_rows > 0 && s.deleted_ratio() >= policy.delete_ratio;

    let mut plans = Vec::new();
    let mut planned: HashSet<SegmentId> = HashSet::new();

    // Merge: greedy bins of small segments in id order, each bin at most the
    // target size. A bin of one merges nothing; it may still be purged below.
    let mut bin: Vec<&SegmentMeta> = Vec::new();
    let mut bin_rows = 0u64;
    let mut close_bin = |bin: &mut Vec<&SegmentMeta>, plans: &mut Vec<CompactionPlan>| {
        if bin.len() >= 2 {
            plans.push(plan_of(PlanKind::Merge, bin));
            planned.extend(bin.iter().map(|s| s.id));
        }
        bin.clear();
    };
    for s in eligible.iter().filter(|s| s.live_rows() < policy.small_rows()) {
        if bin_rows + s.live_rows() > policy.target_rows {
            close_bin(&mut bin, &mut plans);
            bin_rows = 0;
        }
        bin.push(s);
        bin_rows += s.live_rows();
    }
    close_bin(&mut bin, &mut plans);

    for s in eligible {
        if !planned.contains(&s.id) && needs_purge(s) {
            plans.push(plan_of(PlanKind::Purge, &[s]));
        }
    }
    plans
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::{IndexState, SealReason};
    use proptest::prelude::*;

    fn flushed(id: u64, rows: u64, deleted: u64) -> SegmentMeta {
        let mut s = SegmentMeta::growing(SegmentId(id), 0);
        s.rows = rows;
        s.deleted_rows = deleted;
        s.seal(SealReason::Manual, 0).unwrap();
        s.start_flush().unwrap();
        s.flushed(rows * 16, 0).unwrap();
        s.set_index_state(IndexState::Building).unwrap();
        s.set_index_state(IndexState::Ready).unwrap();
        s
    }

    const POLICY: CompactionPolicy = CompactionPolicy { delete_ratio: 0.2, target_rows: 1000 };

    #[test]
    fn purges_at_the_delete_ratio() {
        let segs = [flushed(1, 1000, 199), flushed(2, 1000, 200), flushed(3, 1000, 1000)];
        let plans = plan(&segs, &HashSet::new(), &POLICY);
        assert_eq!(plans.len(), 2);
        assert_eq!(plans[0].to_string(), "purge segment 2: 200 of 1000 rows deleted");
        assert_eq!((plans[0].output_rows, plans[0].removed_rows), (800, 200));
        assert_eq!(plans[1].to_string(), "purge segment 3: 1000 of 1000 rows deleted");
    }

    #[test]
    fn merges_small_segments_up_to_the_target() {
        let segs =
            [flushed(1, 300, 0), flushed(2, 400, 100), flushed(3, 400, 0), flushed(4, 499, 0), flushed(5, 900, 0)];
        let plans = plan(&segs, &HashSet::new(), &POLICY);
        // 300 + 300 live + 400 = 1000; 499 alone is no merge; 900 is not small.
        assert_eq!(plans.len(), 1, "{plans:?}");
        assert_eq!(plans[0].kind, PlanKind::Merge);
        assert_eq!(plans[0].inputs, vec![SegmentId(1), SegmentId(2), SegmentId(3)]);
        assert_eq!((plans[0].output_rows, plans[0].removed_rows), (1000, 100));
        assert_eq!(plans[0].to_string(), "merge 3 small segments [1, 2, 3] into one of 1000 rows");
    }

    #[test]
    fn leaves_busy_and_unflushed_segments_alone() {
        let mut sealed = SegmentMeta::growing(SegmentId(9), 0);
        sealed.rows = 10;
        sealed.deleted_rows = 10;
        sealed.seal(SealReason::Manual, 0).unwrap();
        let segs = [flushed(1, 1000, 500), sealed];
        assert!(plan(&segs, &HashSet::from([SegmentId(1)]), &POLICY).is_empty());
    }

    fn segments() -> impl Strategy<Value = Vec<SegmentMeta>> {
        prop::collection::vec((1u64..3000, 0.0f64..=1.0), 0..40).prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(i, (rows, frac))| flushed(i as u64 + 1, rows, (rows as f64 * frac) as u64))
                .collect()
        })
    }

    proptest! {
        #[test]
        fn planner_properties(segs in segments(), busy_mask in any::<u64>()) {
            let busy: HashSet<SegmentId> =
                segs.iter().filter(|s| busy_mask >> (s.id.0 % 64) & 1 == 1).map(|s| s.id).collect();
            let plans = plan(&segs, &busy, &POLICY);
            let mut seen = HashSet::new();
            for p in &plans {
                for id in &p.inputs {
                    prop_assert!(seen.insert(*id), "segment {} in two plans", id);
                    prop_assert!(!busy.contains(id), "busy segment {} planned", id);
                }
                let inputs: Vec<&SegmentMeta> = segs.iter().filter(|s| p.inputs.contains(&s.id)).collect();
                // Dead rows are never carried over: the output holds live rows only.
                prop_assert_eq!(p.output_rows, inputs.iter().map(|s| s.live_rows()).sum::<u64>());
                match p.kind {
                    PlanKind::Merge => {
                        prop_assert!(p.inputs.len() >= 2);
                        prop_assert!(p.output_rows <= POLICY.target_rows);
                        prop_assert!(inputs.iter().all(|s| s.live_rows() < POLICY.small_rows()));
                    }
                    PlanKind::Purge => {
                        prop_assert_eq!(p.inputs.len(), 1);
                        prop_assert!(inputs[0].deleted_ratio() >= POLICY.delete_ratio);
                    }
                }
            }
            // Nothing that qualifies for a purge is left out.
            for s in &segs {
                if !busy.contains(&s.id) && s.deleted_rows > 0 && s.deleted_ratio() >= POLICY.delete_ratio {
                    prop_assert!(seen.contains(&s.id), "segment {} needs a purge", s.id);
                }
            }
        }
    }
}
