//! Which flushed segments compaction rewrites, and why: a tiered merge
//! policy (Milvus' mix compaction of small segments into large ones, with
//! the size tiers of an LSM tree), and purges.
//!
//! Growing segments seal small (`growing_max_rows`), so fresh rows reach
//! an indexed segment within seconds; merges then build the large segments
//! searches want, without rewriting a large segment to absorb a small one:
//!
//! - **tiers**: a segment's tier is its size in powers of the fan-in `F`
//!   over the sealed size `min_rows`, rounded: tier 0 holds segments of
//!   about `min_rows` (from `min_rows / sqrt F` to `min_rows * sqrt F`), tier
//!   1 about `F * min_rows`, and so on. Smaller ones (a manual flush, a
//!   purge's output) are **undersized**.
//! - **merge**: `F` segments of one tier, oldest first, become one segment
//!   of the next tier; when fewer than `F` of them fit under `target_rows`
//!   (`segment_max_rows`), as many as fit, if two or more. Undersized
//!   segments merge as soon as there are two, as many as fit. Inputs of a merge differ in
//!   size by a factor of about `F` at most, so a merge never rewrites a
//!   segment much larger than what it adds, and a row goes through at most
//!   about `log_F(target_rows / min_rows)` merges ([`simulate_ingest`]).
//! - **purge**: a segment whose deleted fraction reaches
//!   `milvus.compaction_delete_ratio` (default 0.2) loses its tombstoned
//!   rows: merged with the smaller or equal segments that fit beside it
//!   under the target, since it is rewritten anyway, or alone when none
//!   does. Every merge purges its inputs' tombstones.
//!
//! - **clustering** (an index `WITH (cluster_by = ...)`, Milvus' clustering
//!   compaction): once the rows of segments not yet clustered reach `1 /
//!   F` of the clustered rows (at once when none is clustered yet), every
//!   flushed segment is rewritten at once, its rows
//!   ordered by the column and cut into segments of about `target_rows` at
//!   changes of its value ([`crate::jobs::Merge::layout`]). Each output
//!   then holds a narrow range of the column, and a filter on it skips the
//!   others by their statistics. Tiers merge only unclustered segments; a
//!   clustered segment is purged alone and stays clustered. The clustered
//!   rows grow by at least `1 + 1/F` between two clusterings, so each
//!   rewrites at most `F + 1` times the rows it adds: under a steady ingest
//!   a row is rewritten 6 to 7 times in all, tier merges included, against
//!   3 to 4 without clustering ([`simulate_ingest`]).
//!
//! [`plan`] is pure and fast: it reads metadata only, never puts a segment in
//! two plans, never touches a segment already in a running job, and its
//! result is what `milvus_compact(dry_run => true)` shows.

use std::collections::HashSet;
use std::fmt;

use crate::segment::{SealReason, SegmentId, SegmentMeta, SegmentState};

/// The fan-in of a merge: four segments of a tier make one of the next.
/// Higher means fewer rewrites and more segments for each search to visit.
pub const FAN_IN: u64 = 4;

/// The most inputs one plan takes (undersized segments, a purge's
/// companions): what the job log records of a running merge, so that no
/// other plan takes a segment it is rewriting.
pub const MAX_INPUTS: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionPolicy {
    /// Deleted fraction at which a segment is purged (Milvus: 0.2).
    pub delete_ratio: f64,
    /// Live rows a merged segment aims for (the index's `segment_max_rows`).
    pub target_rows: u64,
    /// Rows of tier 0: what a growing segment seals at when the index sets
    /// `growing_max_rows`, 2,048 when it does not (wide rows seal sooner,
    /// and their segments start undersized).
    pub min_rows: u64,
    /// Segments of one tier merged into one of the next.
    pub fan_in: u64,
    /// Whether the index clusters its rows by a column (`cluster_by`).
    pub clustering: bool,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        CompactionPolicy {
            delete_ratio: 0.2,
            target_rows: 100_000,
            min_rows: 10_000,
            fan_in: FAN_IN,
            clustering: false,
        }
    }
}

impl CompactionPolicy {
    /// The tier of a segment of `rows` live rows; `None` for undersized.
    pub fn tier(&self, rows: u64) -> Option<u32> {
        let (min, f) = (self.min_rows.max(1) as f64, self.fan_in.max(2) as f64);
        let exact = (rows.max(1) as f64 / min).ln() / f.ln();
        let tier = exact.round();
        (tier >= 0.0).then_some(tier as u32)
    }

    /// Whether `plan` is quick: a merge of undersized or tier-0 segments
    /// (some `fan_in` sealed segments' rows at most, under a second at 768
    /// dimensions). A worker runs quick merges while a longer one writes, as
    /// Milvus runs several compaction tasks at once: the segments fresh rows
    /// seal into then never pile up behind a merge of a minute, each one
    /// more for every query to visit.
    pub fn is_quick(plan: &CompactionPlan) -> bool {
        plan.kind == PlanKind::Merge && matches!(plan.reason, Some(MergeReason::Small | MergeReason::Tier(0)))
    }

    /// The bound on the merges a row goes through under steady ingest:
    /// `1 + log_F(target_rows / min_rows)`.
    pub fn rewrite_bound(&self) -> f64 {
        let ratio = self.target_rows.max(self.min_rows) as f64 / self.min_rows.max(1) as f64;
        1.0 + ratio.ln() / (self.fan_in.max(2) as f64).ln()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanKind {
    /// Rewrite one segment without its tombstoned rows.
    Purge,
    /// Merge segments into one (purging their tombstones).
    Merge,
    /// Rewrite segments as segments each holding one range of the
    /// clustering column (purging their tombstones).
    Cluster,
}

impl PlanKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanKind::Purge => "purge",
            PlanKind::Merge => "merge",
            PlanKind::Cluster => "cluster",
        }
    }
}

/// Why a merge is planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeReason {
    /// Undersized segments (below half the sealed size).
    Small,
    /// Segments of one tier.
    Tier(u32),
    /// A segment to purge, merged with segments that fit beside it.
    Purge,
}

/// One compaction to do: its inputs and why.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionPlan {
    pub kind: PlanKind,
    pub reason: Option<MergeReason>,
    pub inputs: Vec<SegmentId>,
    /// Live rows the output will hold.
    pub output_rows: u64,
    /// Tombstoned rows it removes.
    pub removed_rows: u64,
    /// Segments it writes: one, or a clustering's several.
    pub outputs: u64,
    /// Whether its outputs are clustered segments: a clustering's, or a
    /// clustered segment's purge.
    pub clustered: bool,
}

impl fmt::Display for CompactionPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<String> = self.inputs.iter().map(|s| s.to_string()).collect();
        let (n, ids, rows) = (ids.len(), ids.join(", "), self.output_rows);
        match (self.kind, self.reason) {
            (PlanKind::Purge, _) => write!(
                f,
                "purge segment {ids}: {} of {} rows deleted",
                self.removed_rows,
                self.output_rows + self.removed_rows
            ),
            (PlanKind::Merge, Some(MergeReason::Tier(tier))) => {
                write!(f, "merge {n} segments of tier {tier} [{ids}] into one of {rows} rows")
            }
            (PlanKind::Merge, Some(MergeReason::Purge)) => {
                write!(f, "merge {n} segments [{ids}] into one of {rows} rows, purging {} deleted", self.removed_rows)
            }
            (PlanKind::Merge, _) => write!(f, "merge {n} small segments [{ids}] into one of {rows} rows"),
            (PlanKind::Cluster, _) => {
                write!(f, "cluster {n} segments [{ids}] into {} of {rows} rows by their ranges", self.outputs)
            }
        }
    }
}

fn plan_of(kind: PlanKind, reason: Option<MergeReason>, inputs: &[&SegmentMeta]) -> CompactionPlan {
    CompactionPlan {
        kind,
        reason,
        inputs: inputs.iter().map(|s| s.id).collect(),
        output_rows: inputs.iter().map(|s| s.live_rows()).sum(),
        removed_rows: inputs.iter().map(|s| s.deleted_rows).sum(),
        outputs: 1,
        clustered: false,
    }
}

/// Whether a clustering wrote `s` (or purged a segment one wrote).
pub fn is_clustered(s: &SegmentMeta) -> bool {
    matches!(s.seal_reason, Some(SealReason::Clustering { .. }))
}

/// The clustering of `eligible` (flushed, not busy, by id), if its
/// unclustered rows are due one: all of them, at most [`MAX_INPUTS`],
/// into segments of about `target_rows`.
fn clustering(eligible: &[&SegmentMeta], policy: &CompactionPolicy) -> Option<CompactionPlan> {
    let rows = |clustered: bool| -> u64 {
        eligible.iter().filter(|s| is_clustered(s) == clustered).map(|s| s.live_rows()).sum()
    };
    let (fresh, clustered) = (rows(false), rows(true));
    let due = fresh > 0 && fresh >= clustered / policy.fan_in;
    if !due {
        return None;
    }
    let inputs = &eligible[..eligible.len().min(MAX_INPUTS)];
    let mut plan = plan_of(PlanKind::Cluster, None, inputs);
    plan.outputs = plan.output_rows.div_ceil(policy.target_rows.max(1)).clamp(1, plan.output_rows.max(1));
    plan.clustered = true;
    Some(plan)
}

/// The oldest of `candidates` that fit together under `target` rows, up to
/// the first that does not (then `true`: the bin is full).
fn fitting<'a>(candidates: &[&'a SegmentMeta], target: u64) -> (Vec<&'a SegmentMeta>, bool) {
    let mut bin = Vec::new();
    let mut rows = 0;
    for s in candidates {
        if rows + s.live_rows() > target {
            return (bin, true);
        }
        rows += s.live_rows();
        bin.push(*s);
    }
    (bin, false)
}

/// Of `candidates`, oldest first, each that still fits under `target` rows.
fn fill<'a>(candidates: &[&'a SegmentMeta], target: u64) -> Vec<&'a SegmentMeta> {
    let mut rows = 0;
    candidates
        .iter()
        .copied()
        .filter(|s| {
            let fits = rows + s.live_rows() <= target;
            rows += if fits { s.live_rows() } else { 0 };
            fits
        })
        .collect()
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
    let tier = |s: &SegmentMeta| policy.tier(s.live_rows());
    let mut plans = Vec::new();
    let mut planned: HashSet<SegmentId> = HashSet::new();
    if policy.clustering {
        if let Some(cluster) = clustering(&eligible, policy) {
            planned.extend(cluster.inputs.iter().copied());
            plans.push(cluster);
        }
        // Clustered segments are purged alone, and stay clustered.
        for s in eligible.iter().copied().filter(|s| is_clustered(s) && needs_purge(s) && !planned.contains(&s.id)) {
            let mut purge = plan_of(PlanKind::Purge, None, &[s]);
            purge.clustered = true;
            plans.push(purge);
        }
        eligible.retain(|s| !is_clustered(s) && !planned.contains(&s.id));
    }

    // Merges within a tier, lowest first: undersized (None) then 0, 1, ...
    let mut tiers: Vec<Option<u32>> = eligible.iter().map(|s| tier(s)).collect();
    tiers.sort();
    tiers.dedup();
    for t in tiers {
        let mut members: Vec<&SegmentMeta> =
            eligible.iter().copied().filter(|s| tier(s) == t && s.live_rows() < policy.target_rows).collect();
        // Undersized segments: as many as fit; a tier: `fan_in` of them.
        let wanted = if t.is_none() { MAX_INPUTS } else { (policy.fan_in as usize).min(MAX_INPUTS) };
        loop {
            let (mut bin, capped) = fitting(&members, policy.target_rows);
            bin.truncate(wanted);
            let full = bin.len() == wanted || capped || (t.is_none() && bin.len() == members.len());
            if !full || bin.len() < 2 {
                break;
            }
            let reason = t.map_or(MergeReason::Small, MergeReason::Tier);
            plans.push(plan_of(PlanKind::Merge, Some(reason), &bin));
            planned.extend(bin.iter().map(|s| s.id));
            members.retain(|s| !planned.contains(&s.id));
        }
    }

    // Purges: with the unplanned segments no larger that fit beside it.
    for s in eligible.iter().copied().filter(|s| needs_purge(s)) {
        if planned.contains(&s.id) {
            continue;
        }
        let others: Vec<&SegmentMeta> = eligible
            .iter()
            .copied()
            .filter(|o| o.id != s.id && !planned.contains(&o.id) && tier(o) <= tier(s))
            .collect();
        let mut bin = fill(&others, policy.target_rows.saturating_sub(s.live_rows()));
        bin.truncate(MAX_INPUTS - 1);
        bin.insert(0, s);
        bin.sort_by_key(|o| o.id);
        let plan = if bin.len() >= 2 {
            plan_of(PlanKind::Merge, Some(MergeReason::Purge), &bin)
        } else {
            plan_of(PlanKind::Purge, None, &bin)
        };
        planned.extend(bin.iter().map(|o| o.id));
        plans.push(plan);
    }
    plans
}

/// What [`simulate_ingest`] found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IngestSimulation {
    /// Merges a row went through on average, from its flush to its final
    /// segment.
    pub rewrites_per_row: f64,
    /// [`CompactionPolicy::rewrite_bound`].
    pub bound: f64,
    /// Segments at the end, and the most at any moment between merges.
    pub final_segments: usize,
    pub most_segments: usize,
}

/// A long steady ingest: `segments` full growing segments of
/// `policy.min_rows` rows sealed and flushed one after the other, every plan
/// carried out as soon as it is proposed; the rows rewritten by merges
/// (and clusterings), per row ingested.
pub fn simulate_ingest(policy: &CompactionPolicy, segments: u64) -> IngestSimulation {
    use crate::segment::IndexState;
    let mut live: Vec<SegmentMeta> = Vec::new();
    let mut next_id = 1;
    let mut new_segment = |rows: u64, clustered: bool| {
        let mut s = SegmentMeta::growing(SegmentId(next_id), 0);
        next_id += 1;
        s.rows = rows;
        let reason = if clustered { SealReason::Clustering { inputs: vec![] } } else { SealReason::Manual };
        s.seal(reason, 0).expect("growing");
        s.start_flush().expect("sealed");
        s.flushed(rows, 0).expect("flushing");
        s.set_index_state(IndexState::Ready).ok();
        s
    };
    let (mut rewritten, mut most) = (0u64, 0usize);
    for _ in 0..segments {
        live.push(new_segment(policy.min_rows, false));
        most = most.max(live.len());
        loop {
            let plans = plan(&live, &HashSet::new(), policy);
            if plans.is_empty() {
                break;
            }
            for p in plans {
                rewritten += p.output_rows;
                live.retain(|s| !p.inputs.contains(&s.id));
                for n in 0..p.outputs {
                    let share = p.output_rows * (n + 1) / p.outputs - p.output_rows * n / p.outputs;
                    live.push(new_segment(share, p.clustered));
                }
            }
        }
    }
    IngestSimulation {
        rewrites_per_row: rewritten as f64 / (segments * policy.min_rows) as f64,
        bound: policy.rewrite_bound(),
        final_segments: live.len(),
        most_segments: most,
    }
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

    const POLICY: CompactionPolicy =
        CompactionPolicy { delete_ratio: 0.2, target_rows: 1000, min_rows: 100, fan_in: 4, clustering: false };

    fn inputs(p: &CompactionPlan) -> Vec<u64> {
        p.inputs.iter().map(|s| s.0).collect()
    }

    #[test]
    fn tiers_are_powers_of_the_fan_in_around_the_sealed_size() {
        let tiers: Vec<Option<u32>> =
            [1, 50, 51, 100, 199, 200, 400, 799, 800, 3199, 3200].map(|r| POLICY.tier(r)).into();
        let want = [None, None, Some(0), Some(0), Some(0), Some(1), Some(1), Some(1), Some(2), Some(2), Some(3)];
        assert_eq!(tiers, want);
        assert!((POLICY.rewrite_bound() - (1.0 + 10f64.ln() / 4f64.ln())).abs() < 1e-9);
    }

    #[test]
    fn a_lone_purge_and_a_purge_merged_with_what_fits_beside_it() {
        let segs = [flushed(1, 1000, 199), flushed(2, 1000, 200), flushed(3, 1000, 1000)];
        let plans = plan(&segs, &HashSet::new(), &POLICY);
        // Segment 3 is all deleted: nothing of it is rewritten, so it fits
        // beside segment 2, whose purge takes it along.
        assert_eq!(plans.len(), 1, "{plans:?}");
        assert_eq!(plans[0].to_string(), "merge 2 segments [2, 3] into one of 800 rows, purging 1200 deleted");
        let alone = plan(&[flushed(1, 1000, 199), flushed(2, 1000, 200)], &HashSet::new(), &POLICY);
        assert_eq!(alone[0].to_string(), "purge segment 2: 200 of 1000 rows deleted");
        assert_eq!((alone[0].output_rows, alone[0].removed_rows), (800, 200));
    }

    #[test]
    fn four_of_a_tier_merge_and_fewer_wait() {
        let three = [flushed(1, 100, 0), flushed(2, 110, 0), flushed(3, 90, 0)];
        assert!(plan(&three, &HashSet::new(), &POLICY).is_empty(), "three of tier 0 wait for a fourth");
        let four = [flushed(1, 100, 0), flushed(2, 110, 0), flushed(3, 90, 0), flushed(9, 400, 0), flushed(4, 100, 5)];
        let plans = plan(&four, &HashSet::new(), &POLICY);
        assert_eq!(plans.len(), 1, "{plans:?}");
        assert_eq!(plans[0].to_string(), "merge 4 segments of tier 0 [1, 2, 3, 4] into one of 395 rows");
        assert_eq!((plans[0].removed_rows, plans[0].reason), (5, Some(MergeReason::Tier(0))));
    }

    /// A tier whose `fan_in` segments would pass the target merges as many
    /// as fit; a big segment never absorbs a small one.
    #[test]
    fn merges_stop_at_the_target_and_never_rewrite_a_big_segment_for_a_small_one() {
        let segs = [flushed(1, 400, 0), flushed(2, 400, 0), flushed(3, 400, 0), flushed(4, 100, 0)];
        let plans = plan(&segs, &HashSet::new(), &POLICY);
        assert_eq!(plans.len(), 1, "{plans:?}");
        assert_eq!(inputs(&plans[0]), vec![1, 2], "two of 400 fit under 1000, a third does not");
        assert!(plan(&[flushed(1, 900, 0), flushed(2, 100, 0)], &HashSet::new(), &POLICY).is_empty());
    }

    #[test]
    fn merges_of_undersized_and_tier_0_segments_are_quick() {
        let segs = [
            flushed(1, 400, 0),
            flushed(2, 400, 0),
            flushed(3, 400, 0),
            flushed(4, 400, 0),
            flushed(5, 100, 0),
            flushed(6, 100, 0),
            flushed(7, 100, 0),
            flushed(8, 100, 0),
            flushed(9, 30, 0),
            flushed(10, 30, 0),
            flushed(11, 500, 300),
        ];
        let plans = plan(&segs, &HashSet::new(), &POLICY);
        let quick: Vec<(Vec<u64>, bool)> = plans.iter().map(|p| (inputs(p), CompactionPolicy::is_quick(p))).collect();
        assert_eq!(
            quick,
            vec![(vec![9, 10], true), (vec![5, 6, 7, 8], true), (vec![1, 2], false), (vec![3, 4, 11], false)],
            "{plans:?}"
        );
    }

    #[test]
    fn undersized_segments_merge_as_soon_as_there_are_two() {
        let segs = [flushed(1, 30, 0), flushed(2, 40, 10), flushed(3, 30, 0), flushed(4, 600, 0)];
        let plans = plan(&segs, &HashSet::new(), &POLICY);
        assert_eq!(plans.len(), 1, "{plans:?}");
        assert_eq!(plans[0].to_string(), "merge 3 small segments [1, 2, 3] into one of 90 rows");
    }

    #[test]
    fn leaves_busy_and_unflushed_segments_alone() {
        let mut sealed = SegmentMeta::growing(SegmentId(9), 0);
        sealed.rows = 10;
        sealed.deleted_rows = 10;
        sealed.seal(SealReason::Manual, 0).unwrap();
        let segs = [flushed(1, 1000, 500), sealed];
        assert!(plan(&segs, &HashSet::new(), &POLICY).len() == 1);
        assert!(plan(&segs, &HashSet::from([SegmentId(1)]), &POLICY).is_empty());
    }

    /// The write amplification of a long steady ingest, for the defaults
    /// and for a wide range of sizes: within the bound.
    #[test]
    fn a_steady_ingest_rewrites_each_row_within_the_bound() {
        for (min_rows, target_rows) in [(10_000, 100_000), (2_000, 100_000), (5_000, 1_000_000), (100, 1000)] {
            let policy = CompactionPolicy { min_rows, target_rows, ..CompactionPolicy::default() };
            let sim = simulate_ingest(&policy, 20 * target_rows / min_rows);
            assert!(sim.rewrites_per_row <= sim.bound, "{min_rows}..{target_rows}: {sim:?}");
            assert!(sim.rewrites_per_row >= sim.bound - 1.5, "merges happen: {sim:?}");
            // Segments searched stay few: the tiers below the top hold fewer
            // than fan-in each.
            let tiers = policy.tier(target_rows).unwrap() as usize + 1;
            assert!(sim.most_segments <= 20 + tiers * FAN_IN as usize, "{sim:?}");
        }
    }

    fn clustered(id: u64, rows: u64, deleted: u64) -> SegmentMeta {
        let mut s = flushed(id, rows, deleted);
        s.seal_reason = Some(SealReason::Clustering { inputs: vec![] });
        s
    }

    const CLUSTERING: CompactionPolicy = CompactionPolicy { clustering: true, ..POLICY };

    #[test]
    fn a_clustering_takes_every_segment_once_the_fresh_rows_are_due() {
        // 1,800 clustered rows: due at 450 fresh ones (a fan-in's share).
        let mut segs = vec![clustered(1, 900, 0), clustered(2, 900, 0), flushed(3, 200, 0), flushed(4, 200, 0)];
        let plans = plan(&segs, &HashSet::new(), &CLUSTERING);
        assert_eq!(plans.len(), 0, "400 fresh rows of 2,200 wait: {plans:?}");
        segs.push(flushed(5, 60, 0));
        let plans = plan(&segs, &HashSet::new(), &CLUSTERING);
        assert_eq!(plans.len(), 1, "{plans:?}");
        assert_eq!(plans[0].to_string(), "cluster 5 segments [1, 2, 3, 4, 5] into 3 of 2260 rows by their ranges");
        assert!(plans[0].clustered && plans[0].kind == PlanKind::Cluster);
        // Nothing clustered yet: any fresh rows are due. A busy segment
        // stays out.
        let fresh = [flushed(1, 700, 0), flushed(2, 600, 0), flushed(3, 60, 0)];
        let plans = plan(&fresh, &HashSet::from([SegmentId(3)]), &CLUSTERING);
        assert_eq!(plans[0].to_string(), "cluster 2 segments [1, 2] into 2 of 1300 rows by their ranges");
        assert_eq!(plan(&fresh[2..], &HashSet::new(), &CLUSTERING)[0].outputs, 1);
    }

    #[test]
    fn clustered_segments_are_purged_alone_and_fresh_ones_merge_by_tiers() {
        let segs = [
            clustered(1, 1000, 300),
            clustered(2, 1000, 0),
            flushed(3, 100, 0),
            flushed(4, 100, 0),
            flushed(5, 100, 0),
            flushed(6, 100, 0),
        ];
        let plans = plan(&segs, &HashSet::new(), &CLUSTERING);
        let shown: Vec<String> = plans.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            shown,
            [
                "purge segment 1: 300 of 1000 rows deleted",
                "merge 4 segments of tier 0 [3, 4, 5, 6] into one of 400 rows"
            ]
        );
        assert_eq!((plans[0].clustered, plans[1].clustered), (true, false));
    }

    /// Clustering rewrites every row again, as Milvus' does; spaced by the
    /// fan-in's share, a row's rewrites stay within `F + 1` more than the
    /// tiers' bound (6.1 to 7.1 in all here, against bounds of 2.7 to 3.8).
    #[test]
    fn a_steady_ingest_with_clustering_rewrites_each_row_a_bounded_number_of_times() {
        for (min_rows, target_rows) in [(10_000, 100_000), (2_000, 100_000), (100, 1000)] {
            let policy = CompactionPolicy { min_rows, target_rows, clustering: true, ..CompactionPolicy::default() };
            let sim = simulate_ingest(&policy, 30 * target_rows / min_rows);
            assert!(sim.rewrites_per_row <= sim.bound + FAN_IN as f64 + 1.0, "{min_rows}..{target_rows}: {sim:?}");
            // About 30 clustered segments of the target size, and the fresh
            // ones of fewer than a fan-in's share.
            assert!(sim.final_segments <= 30 + 2 * FAN_IN as usize + 2, "{sim:?}");
        }
    }

    fn segments() -> impl Strategy<Value = Vec<SegmentMeta>> {
        prop::collection::vec((1u64..3000, 0.0f64..=1.0), 0..40).prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(i, (rows, frac))| flushed(i as u64 + 1, rows, (rows as f64 * frac) as u64))
                .collect()
        })
    }

    #[test]
    fn a_plan_takes_at_most_max_inputs_segments() {
        // 150 undersized segments of 2 rows (a purge's outputs, manual flushes).
        let segs: Vec<SegmentMeta> = (1..=150).map(|i| flushed(i, 2, 0)).collect();
        let plans = plan(&segs, &HashSet::new(), &POLICY);
        let sizes: Vec<usize> = plans.iter().map(|p| p.inputs.len()).collect();
        assert_eq!(sizes, vec![MAX_INPUTS, MAX_INPUTS, 150 - 2 * MAX_INPUTS]);
    }

    proptest! {
        #[test]
        fn planner_properties(
            mut segs in segments(),
            busy_mask in any::<u64>(),
            clustered_mask in any::<u64>(),
            policy in prop_oneof![Just(POLICY), Just(CLUSTERING)],
        ) {
            for s in segs.iter_mut().filter(|s| clustered_mask >> (s.id.0 % 64) & 1 == 1) {
                s.seal_reason = Some(SealReason::Clustering { inputs: vec![] });
            }
            let busy: HashSet<SegmentId> =
                segs.iter().filter(|s| busy_mask >> (s.id.0 % 64) & 1 == 1).map(|s| s.id).collect();
            let plans = plan(&segs, &busy, &policy);
            let mut seen = HashSet::new();
            for p in &plans {
                for id in &p.inputs {
                    prop_assert!(seen.insert(*id), "segment {} in two plans", id);
                    prop_assert!(!busy.contains(id), "busy segment {} planned", id);
                }
                let inputs: Vec<&SegmentMeta> = segs.iter().filter(|s| p.inputs.contains(&s.id)).collect();
                // Dead rows are never carried over: the output holds live rows only.
                prop_assert_eq!(p.output_rows, inputs.iter().map(|s| s.live_rows()).sum::<u64>());
                prop_assert!(p.inputs.len() <= MAX_INPUTS);
                match p.kind {
                    PlanKind::Merge => {
                        prop_assert!(p.inputs.len() >= 2);
                        // Merging a clustered segment with others would undo
                        // its clustering.
                        prop_assert!(!policy.clustering || inputs.iter().all(|s| !is_clustered(s)));
                        prop_assert!(!p.clustered);
                        prop_assert!(p.output_rows <= POLICY.target_rows);
                        // A tier's merge: inputs within about the fan-in of each other.
                        if let Some(MergeReason::Tier(t)) = p.reason {
                            prop_assert!(inputs.iter().all(|s| POLICY.tier(s.live_rows()) == Some(t)));
                        }
                    }
                    PlanKind::Purge => {
                        prop_assert_eq!(p.inputs.len(), 1);
                        prop_assert!(inputs[0].deleted_ratio() >= POLICY.delete_ratio);
                        prop_assert_eq!(p.clustered, policy.clustering && is_clustered(inputs[0]));
                    }
                    PlanKind::Cluster => {
                        prop_assert!(policy.clustering && p.clustered);
                        prop_assert!(p.outputs >= 1 && p.outputs <= p.output_rows.max(1));
                        prop_assert!(p.output_rows <= p.outputs * POLICY.target_rows);
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
