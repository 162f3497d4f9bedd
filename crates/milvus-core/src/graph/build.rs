//! Building a segment's graph: HNSW insertion into flat arrays, and merges
//! that keep the largest input's graph.
//!
//! - **Insertion** is HNSW's (Malkov and Yashunin, algorithm 1): a row draws
//!   a level, descends greedily to it through the upper layers, and on each
//!   layer from there down a beam search of `ef_construction` gathers its
//!   candidates; the heuristic ([`super::select`]) picks its neighbours, and
//!   each neighbour links back, its list selected again by the heuristic
//!   once it is full, as pgvector and hnswlib do. (hnsw_rs, which built
//!   0.1's and 0.2's first graphs, dropped the farthest entry instead; a
//!   refinement pass over the whole graph made up for it.)
//! - **One thread, no locks**: a build owns its arrays, the beam's scratch
//!   is the thread's and reused by every insertion, and a row's lists are
//!   slices of the arrays an index file stores ([`FlatGraph`]), so nothing
//!   is allocated per node and nothing is converted at the end.
//! - **A merge starts from a kept graph** ([`Builder::seeded`]): the largest
//!   input's lists, renumbered to the output's rows, its deleted rows cut
//!   out, and their in-neighbours reconnected through the deleted rows'
//!   out-neighbours (FreshDiskANN's delete consolidation, with its relaxed
//!   heuristic: [`Builder::repair`]); only the other inputs' rows are then
//!   inserted, as in Lucene's merge of HNSW segments.
//!
//! **Cost model.** An insertion costs about `ef_construction` beam steps
//! of `m0` distances each, plus a heuristic selection for each neighbour
//! whose list is full: call it `c`, nearly constant in the graph's size
//! (the descent is logarithmic). A build from scratch of `n` rows costs
//! `n c`. A merge that keeps a graph of `k` live rows and `d` deleted ones
//! costs a copy of its lists (no distances), a repair of each list that
//! names a deleted row (about `m0² d / (k + d)` distances to candidates and
//! as many heuristic checks; every list names one once `d` is a few
//! percent of the rows), and `(n - k) c` for the rows inserted. A 100k-row
//! segment merged with four of 2k rows thus costs 7-8% of rebuilding its
//! output (`cargo bench -p milvus-core --bench merge`).
//!
//! Every graph ends with [`FlatGraph::connect`], so every node is reachable
//! from the entry point.

use std::borrow::Cow;

use super::{Beam, FlatGraph, NONE, SCRATCH, select};
use crate::synthetic::Rng;

/// The distance between two rows of the graph being built, by position:
/// the metric's, a NaN counted as the farthest.
pub type PairDistance<'d> = &'d (dyn Fn(u32, u32) -> f32 + Sync);

/// Asks the CPU for a row's vector before its distance is computed.
pub type Prefetch<'d> = &'d (dyn Fn(u32) + Sync);

/// A merge keeps a graph only while at most this fraction of its rows
/// are deleted; past it, the output is built from scratch. Cutting rows
/// out costs recall that a rebuild does not lose: with one row in four
/// deleted a merged graph trails a rebuilt one by about a hundredth of
/// recall@10, with one in ten deleted and rows added the two are level
/// (`--bench merge`; docs/benchmarks.md, "Constants and the measurements
/// behind them"). A purge (a segment past
/// `milvus.compaction_delete_ratio`, 0.2 by default) is thus a rebuild;
/// a merge of a large segment with the small ones a stream seals is not.
pub const KEEP_MAX_DELETED: f64 = 0.1;

/// Whether a merge may start from a graph of `rows` rows of which
/// `deleted` are deleted ([`KEEP_MAX_DELETED`]).
pub fn worth_keeping(rows: usize, deleted: usize) -> bool {
    deleted as f64 <= KEEP_MAX_DELETED * rows as f64
}

/// How much nearer to a list's entry than to its owner a candidate may be
/// and still join the list in a repair (DiskANN's `alpha`, for distances
/// that are not negative; inner product fills its lists instead).
const REPAIR_ALPHA: f32 = 1.2;

/// Levels above this are not drawn (the chance of one is `m^-16`).
const MAX_LEVEL: u8 = 15;

/// A graph under construction over `rows` rows (positions of the output's
/// insert binlog), of which those inserted or seeded are nodes so far.
pub struct Builder<'d> {
    graph: FlatGraph<'static>,
    distance: PairDistance<'d>,
    prefetch: Prefetch<'d>,
    ef_construction: usize,
    /// Fill lists the heuristic leaves short with the nearest pruned
    /// candidates (inner product: see `SegmentIndex::build`).
    fill: bool,
    /// 1 / ln(m): a level is `floor(-ln(u) * level_scale)`.
    level_scale: f64,
    rng: Rng,
    /// Whether any node is in the graph (then `graph.entry` is one).
    started: bool,
}

/// A kept graph and where its rows go: `positions[row]` is the output
/// position of the kept graph's row, or `None` for a row deleted.
pub struct Seed<'g> {
    pub graph: &'g FlatGraph<'g>,
    pub positions: &'g [Option<u32>],
}

impl<'d> Builder<'d> {
    /// An empty graph over `rows` rows, `m` neighbours per upper layer and
    /// `2 m` on layer 0, as pgvector and hnswlib lay it out.
    pub fn new(rows: usize, m: usize, ef_construction: usize, fill: bool, distance: PairDistance<'d>) -> Self {
        let m = m.max(1);
        let graph = FlatGraph {
            rows,
            entry: 0,
            m0: 2 * m,
            m,
            levels: Cow::Owned(vec![0; rows]),
            layer0: Cow::Owned(vec![NONE; rows * 2 * m]),
            upper_start: Cow::Owned(vec![NONE; rows]),
            upper: Cow::Owned(Vec::new()),
            reusable: true,
        };
        Builder {
            graph,
            distance,
            prefetch: &|_| {},
            ef_construction: ef_construction.max(1),
            fill,
            level_scale: 1.0 / (m.max(2) as f64).ln(),
            rng: Rng::new(0x0067_7261_7068),
            started: false,
        }
    }

    /// The builder, prefetching rows with `prefetch` as its searches reach
    /// them (a neighbourhood's rows lie anywhere in the segment: their loads
    /// overlap instead of each waiting its turn).
    pub fn prefetching(self, prefetch: Prefetch<'d>) -> Self {
        Builder { prefetch, ..self }
    }

    /// A builder over `rows` rows holding the seed's live rows at their
    /// positions, with their levels and lists; lists that named a deleted
    /// row are repaired from the deleted rows' live neighbours
    /// ([`Builder::repair`]). None when the seed's strides are not this
    /// build's (an index whose `m` changed) or its positions do not fit
    /// the rows.
    pub fn seeded(
        rows: usize,
        m: usize,
        ef_construction: usize,
        fill: bool,
        distance: PairDistance<'d>,
        seed: &Seed<'_>,
    ) -> Option<Self> {
        let mut builder = Builder::new(rows, m, ef_construction, fill, distance);
        let kept = seed.graph;
        let fits = seed.positions.len() == kept.rows && seed.positions.iter().flatten().all(|p| (*p as usize) < rows);
        if (kept.m0, kept.m) != (builder.graph.m0, builder.graph.m) || !fits {
            return None;
        }
        let at = |row: u32| seed.positions[row as usize];
        for (row, position) in seed.positions.iter().enumerate() {
            if let Some(p) = position {
                builder.set_level(*p, kept.levels[row].min(MAX_LEVEL));
            }
        }
        let mut candidates = Vec::new();
        for (row, position) in seed.positions.iter().enumerate() {
            let Some(p) = *position else { continue };
            for layer in 0..=builder.graph.levels[p as usize] as usize {
                let list = kept.neighbours(row as u32, layer);
                if list.clone().all(|n| at(n).is_some()) {
                    let slots = builder.slots(p, layer);
                    for (slot, n) in slots.iter_mut().zip(list) {
                        *slot = at(n).expect("a live row");
                    }
                    continue;
                }
                let (live, dead): (Vec<u32>, Vec<u32>) = list.partition(|n| at(*n).is_some());
                let live: Vec<u32> = live.into_iter().filter_map(at).collect();
                candidates.clear();
                for n in dead {
                    candidates
                        .extend(kept.neighbours(n, layer).filter_map(at).filter(|q| *q != p && !live.contains(q)));
                }
                builder.repair(p, layer, live, &candidates);
            }
        }
        let live = |row: u32| at(row).map(|p| (kept.levels[row as usize], p));
        let entry = live(kept.entry).or_else(|| (0..kept.rows as u32).filter_map(live).max_by_key(|(level, _)| *level));
        if let Some((_, p)) = entry {
            builder.graph.entry = p;
            builder.started = true;
        }
        Some(builder)
    }

    /// Inserts the row at `node` (a position not inserted or seeded yet).
    pub fn insert(&mut self, node: u32) {
        let level = self.draw_level();
        self.set_level(node, level);
        if !self.started {
            (self.graph.entry, self.started) = (node, true);
            return;
        }
        let distance = self.distance;
        let to_node = |n: u32| distance(node, n);
        let entry = self.graph.entry;
        let top = self.graph.levels[entry as usize] as usize;
        let (mut at, mut at_distance) = (entry, to_node(entry));
        for layer in (level as usize + 1..=top).rev() {
            (at, at_distance) = self.graph.descend(layer, at, at_distance, &to_node);
        }
        for layer in (0..=(level as usize).min(top)).rev() {
            let (ef, prefetch) = (self.ef_construction, self.prefetch);
            let found = SCRATCH.with_borrow_mut(|s| {
                s.beam(
                    &self.graph,
                    layer,
                    at,
                    at_distance,
                    &Beam { distance: &to_node, prefetch, skip: &|_| false },
                    ef,
                    ef,
                )
            });
            let chosen = select(&found, self.cap(layer), distance, self.fill);
            self.slots(node, layer)[..chosen.len()].copy_from_slice(&chosen);
            for &n in &chosen {
                self.link(n, node, layer);
            }
            (at_distance, at) = found[0];
        }
        if level as usize > top {
            self.graph.entry = node;
        }
    }

    /// The graph, every node made reachable from the entry point.
    pub fn finish(mut self) -> FlatGraph<'static> {
        if self.graph.rows > 0 {
            self.graph.connect(self.distance);
        }
        self.graph
    }

    fn cap(&self, layer: usize) -> usize {
        if layer == 0 { self.graph.m0 } else { self.graph.m }
    }

    fn draw_level(&mut self) -> u8 {
        let u = 1.0 - (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        (-u.ln() * self.level_scale).floor().min(MAX_LEVEL as f64) as u8
    }

    /// Gives `node` its level and its (empty) upper lists.
    fn set_level(&mut self, node: u32, level: u8) {
        self.graph.levels.to_mut()[node as usize] = level;
        if level > 0 {
            let upper = self.graph.upper.to_mut();
            self.graph.upper_start.to_mut()[node as usize] = upper.len() as u32;
            upper.resize(upper.len() + level as usize * self.graph.m, NONE);
        }
    }

    /// `node`'s list on `layer`, padded with [`NONE`].
    fn slots(&mut self, node: u32, layer: usize) -> &mut [u32] {
        let g = &mut self.graph;
        if layer == 0 {
            &mut g.layer0.to_mut()[node as usize * g.m0..(node as usize + 1) * g.m0]
        } else {
            let start = g.upper_start[node as usize] as usize + (layer - 1) * g.m;
            &mut g.upper.to_mut()[start..start + g.m]
        }
    }

    /// Adds `new` to `node`'s list on `layer`: into a free slot, or by
    /// selecting the list again with it among the candidates.
    fn link(&mut self, node: u32, new: u32, layer: usize) {
        let slots = self.slots(node, layer);
        if let Some(free) = slots.iter().position(|s| *s == NONE) {
            slots[free] = new;
            return;
        }
        let mut candidates: Vec<u32> = slots.to_vec();
        candidates.push(new);
        self.reselect(node, layer, &candidates);
    }

    /// Fills the slots of `node`'s list on `layer` that deleted rows left
    /// (`live` being what remains) from `candidates` (the deleted rows'
    /// neighbours), nearest first, each only if it is not much nearer to an
    /// entry of the list than to `node` (the heuristic relaxed by
    /// [`REPAIR_ALPHA`]; inner product: the heuristic, then the nearest).
    ///
    /// The live entries stay. Re-selecting the whole list from them and the
    /// candidates, as FreshDiskANN does, thinned lists that reverse links
    /// had filled, and lost recall a rebuild keeps; this repair keeps it
    /// (`a_merged_graph_finds_what_a_rebuilt_one_finds` holds it to a
    /// rebuild's, with one row in ten deleted and with half).
    fn repair(&mut self, node: u32, layer: usize, mut live: Vec<u32>, candidates: &[u32]) {
        let distance = self.distance;
        let near = self.nearest_first(node, candidates);
        let (cap, alpha) = (self.cap(layer), if self.fill { 1.0 } else { REPAIR_ALPHA });
        for &(d, c) in &near {
            if live.len() == cap {
                break;
            }
            if live.iter().all(|&k| alpha * distance(c, k) > d) {
                live.push(c);
            }
        }
        if self.fill {
            for &(_, c) in &near {
                if live.len() == cap {
                    break;
                }
                if !live.contains(&c) {
                    live.push(c);
                }
            }
        }
        let slots = self.slots(node, layer);
        slots.fill(NONE);
        slots[..live.len()].copy_from_slice(&live);
    }

    /// `candidates` (repeats allowed) with their distances to `node`,
    /// nearest first, each once.
    fn nearest_first(&self, node: u32, candidates: &[u32]) -> Vec<(f32, u32)> {
        let distance = self.distance;
        let mut near: Vec<(f32, u32)> = candidates.iter().map(|&c| (distance(node, c), c)).collect();
        near.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        near.dedup_by_key(|(_, c)| *c);
        near
    }

    /// Sets `node`'s list on `layer` to the heuristic's choice among
    /// `candidates` (repeats allowed).
    fn reselect(&mut self, node: u32, layer: usize, candidates: &[u32]) {
        let distance = self.distance;
        let near = self.nearest_first(node, candidates);
        let chosen = select(&near, self.cap(layer), distance, self.fill);
        let slots = self.slots(node, layer);
        slots.fill(NONE);
        slots[..chosen.len()].copy_from_slice(&chosen);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::distance::Metric;
    use crate::element::Row;
    use crate::format::insert::{self, InsertBinlog};
    use crate::graph::segment::{HnswParams, SegmentIndex};
    use crate::graph::tests::assert_sound;
    use crate::segment::SegmentId;
    use crate::synthetic::{Rng, gaussian_mixture};

    static NO_CANCEL: AtomicBool = AtomicBool::new(false);
    const EF: usize = 12;

    fn binlog(metric: Metric, dims: usize, data: &[f32]) -> InsertBinlog<'static> {
        let keys: Vec<u64> = (0..(data.len() / dims) as u64).collect();
        let bytes = if metric.measures(crate::element::Element::Bit) {
            let bits: Vec<u8> =
                data.chunks_exact(8).map(|c| c.iter().fold(0u8, |b, x| (b << 1) | (*x > 0.0) as u8)).collect();
            insert::encode(SegmentId(1), metric, dims, &keys, Row::Bit { len: data.len(), bits: &bits })
        } else {
            insert::encode(SegmentId(1), metric, dims, &keys, data)
        };
        InsertBinlog::decode("o", &bytes).unwrap().into_owned()
    }

    /// A merge as compaction makes one: `kept` rows of which those that
    /// `deleted` names are gone, then `added` rows. Returns the kept
    /// segment's graph, the output's binlog, and the kept rows' positions
    /// in it.
    struct Merge {
        kept: FlatGraph<'static>,
        output: InsertBinlog<'static>,
        positions: Vec<Option<u32>>,
    }

    fn merge(metric: Metric, dims: usize, data: &[f32], kept: usize, deleted: &dyn Fn(u32) -> bool, m: usize) -> Merge {
        let params = HnswParams { m, ef_construction: 64.max(2 * m), ..Default::default() };
        let input = binlog(metric, dims, &data[..kept * dims]);
        let graph = SegmentIndex::build(&input, params, &NO_CANCEL).unwrap().to_flat();
        let (mut rows, mut positions) = (Vec::new(), Vec::new());
        for row in 0..kept as u32 {
            positions.push((!deleted(row)).then(|| (rows.len() / dims) as u32));
            if !deleted(row) {
                rows.extend_from_slice(&data[row as usize * dims..(row as usize + 1) * dims]);
            }
        }
        rows.extend_from_slice(&data[kept * dims..]);
        Merge { kept: graph, output: binlog(metric, dims, &rows), positions }
    }

    impl Merge {
        fn build(&self, m: usize, seeded: bool) -> FlatGraph<'static> {
            let params = HnswParams { m, ef_construction: 64.max(2 * m), ..Default::default() };
            let seed = Seed { graph: &self.kept, positions: &self.positions };
            let seed = seeded.then_some(&seed);
            SegmentIndex::build_seeded(&self.output, params, seed, &NO_CANCEL).unwrap().to_flat()
        }
    }

    fn recall(graph: &FlatGraph, b: &InsertBinlog<'_>, queries: &[Vec<f32>]) -> f64 {
        let mut hits = 0;
        for q in queries {
            let mut all: Vec<(f32, u32)> =
                (0..b.len() as u32).map(|r| (b.metric.between(Row::F32(q), b.vector(r as usize)), r)).collect();
            all.sort_by(|x, y| x.0.total_cmp(&y.0));
            let truth: HashSet<u32> = all.iter().take(10).map(|(_, r)| *r).collect();
            let got = graph.search(b.metric, Row::F32(q), &|r| b.vector(r as usize), 10, EF, &|_| false);
            hits += got.iter().filter(|(_, r)| truth.contains(r)).count();
        }
        hits as f64 / (10 * queries.len()) as f64
    }

    #[test]
    fn a_merged_graph_finds_what_a_rebuilt_one_finds() {
        // 16k rows kept, one in ten deleted, 4k inserted: recall@10 at ef
        // 12 (low, to tell graphs apart) of the merged graph against a
        // rebuild of the same output.
        let (dims, kept, added) = (32, 16_000, 4_000);
        let data = gaussian_mixture(kept + added + 500, dims, 200, 0.1, 7);
        let (rows, held_out) = data.split_at((kept + added) * dims);
        let queries: Vec<Vec<f32>> = held_out.chunks_exact(dims).map(<[f32]>::to_vec).collect();
        for metric in [Metric::L2, Metric::InnerProduct] {
            let m = merge(metric, dims, rows, kept, &|r| r % 10 == 3, 16);
            let (merged, rebuilt) = (m.build(16, true), m.build(16, false));
            assert!(merged.is_reusable());
            assert_sound(&merged);
            let (merged, rebuilt) = (recall(&merged, &m.output, &queries), recall(&rebuilt, &m.output, &queries));
            assert!(merged >= rebuilt - 0.005, "{metric:?}: merged {merged}, rebuilt {rebuilt}");
        }
    }

    #[test]
    fn a_graph_with_half_its_rows_deleted_is_repaired_not_rebuilt() {
        let (dims, kept) = (16, 6_000);
        let data = gaussian_mixture(kept + 300, dims, 50, 0.1, 8);
        let (rows, held_out) = data.split_at(kept * dims);
        let queries: Vec<Vec<f32>> = held_out.chunks_exact(dims).map(<[f32]>::to_vec).collect();
        let m = merge(Metric::L2, dims, rows, kept, &|r| r % 2 == 0, 16);
        assert_eq!(m.output.len(), kept / 2, "nothing added: a purge");
        let (merged, rebuilt) = (m.build(16, true), m.build(16, false));
        assert_sound(&merged);
        let (merged, rebuilt) = (recall(&merged, &m.output, &queries), recall(&rebuilt, &m.output, &queries));
        assert!(merged >= rebuilt - 0.005, "merged {merged}, rebuilt {rebuilt}");
    }

    #[test]
    fn a_deleted_entry_point_gives_way_to_a_live_node_of_the_top_layer() {
        let dims = 8;
        let data = gaussian_mixture(3000, dims, 20, 0.1, 9);
        let input = binlog(Metric::L2, dims, &data);
        let kept = SegmentIndex::build(&input, HnswParams::default(), &NO_CANCEL).unwrap().to_flat();
        let entry = kept.entry;
        let m = merge(Metric::L2, dims, &data, 3000, &|r| r == entry, 16);
        let seed = Seed { graph: &m.kept, positions: &m.positions };
        let distance = |a: u32, b: u32| Metric::L2.between(m.output.vector(a as usize), m.output.vector(b as usize));
        let builder = Builder::seeded(m.output.len(), 16, 64, false, &distance, &seed).unwrap();
        let top = (0..3000u32).filter(|r| *r != entry).map(|r| kept.levels[r as usize]).max().unwrap();
        assert_eq!(builder.graph.levels[builder.graph.entry as usize], top);
        assert_sound(&builder.finish());
    }

    #[test]
    fn a_seed_of_other_strides_is_not_used() {
        let dims = 8;
        let data = gaussian_mixture(600, dims, 5, 0.1, 10);
        let m = merge(Metric::L2, dims, &data, 500, &|_| false, 8);
        let seed = Seed { graph: &m.kept, positions: &m.positions };
        let distance = |a: u32, b: u32| Metric::L2.between(m.output.vector(a as usize), m.output.vector(b as usize));
        assert!(Builder::seeded(m.output.len(), 16, 64, false, &distance, &seed).is_none());
        assert!(Builder::seeded(m.output.len(), 8, 64, false, &distance, &seed).is_some());
        // Through the index: built from scratch, and sound.
        assert_sound(&m.build(16, true));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

        /// Whatever was deleted and added, a merged graph's lists are sound
        /// and every node is reachable from its entry point.
        #[test]
        fn merged_graphs_are_sound(
            kept in 1usize..1200,
            added in 0usize..400,
            deleted_per_mille in 0u64..1000,
            metric in proptest::sample::select(Metric::ALL.to_vec()),
            m in 2usize..17,
            clusters in 1usize..20,
            seed in 0u64..1000,
        ) {
            let dims = 16;
            let data = gaussian_mixture(kept + added, dims, clusters, 0.01, seed);
            let mut rng = Rng::new(seed);
            let doomed: Vec<bool> = (0..kept).map(|_| rng.next_u64() % 1000 < deleted_per_mille).collect();
            let merged = merge(metric, dims, &data, kept, &|r| doomed[r as usize], m);
            let graph = merged.build(m, true);
            proptest::prop_assert_eq!(graph.rows(), merged.output.len());
            assert_sound(&graph);
        }
    }
}
