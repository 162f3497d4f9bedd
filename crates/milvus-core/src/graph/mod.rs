//! A segment's HNSW graph: the flat arrays and the search over them (this
//! file), the builder that fills them (`build.rs`), a sealed segment's
//! graph and codes as they are built, merged and stored (`segment.rs`),
//! and the reader of 0.1's index files, hnsw_rs' dumps (`v0_1.rs`).
//!
//! The graph is kept as flat arrays: each node's neighbours at a fixed
//! stride per layer, no pointers, no locks, no per-node allocation. The
//! builder ([`build`]) inserts rows straight into these arrays, an index
//! file holds them as they are (`crate::format::index`), and a searching
//! backend borrows them from the mapped file. The search is ours: greedy
//! descent through the upper layers, a beam search of `ef` on layer 0,
//! exact distances with the simsimd kernels (or any distance the caller
//! gives: a segment's codes, `crate::quant`), and scratch (visited stamps,
//! the two heaps) kept per thread and reused by every search, so a hop
//! allocates nothing.
//!
//! Rows a caller skips (tombstones, rows already offered) are traversed but
//! never returned, as in hnsw_rs' filtered search: a skipped region does not
//! cut the graph.
//!
//! Every graph is searched with its metric's own distance over the rows as
//! stored. That holds for 0.1's inner-product graphs too, built over
//! augmented vectors `[x, sqrt(M² - |x|²)]` under L2: their squared distance
//! to `[q, 0]`, `|q|² + M² - 2 q·x`, orders nodes as negative inner product
//! does.
//!
//! Every node of a graph built here is reachable from its entry point on
//! layer 0 ([`FlatGraph::connect`]).

pub mod build;
pub mod segment;
pub mod v0_1;

use std::borrow::Cow;
use std::cell::RefCell;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::distance::Metric;
use crate::element::Row;

/// "No neighbour" in a padded neighbour list.
const NONE: u32 = u32::MAX;

/// A graph of `rows` nodes (node = row position in the segment), owning
/// its arrays (built here) or borrowing them in place from an index file
/// ([`crate::format::index`], usually memory-mapped from the local cache).
///
/// A borrowed graph is read as found: a neighbour outside the rows or a
/// list outside the arrays (a file damaged after it was verified) is
/// skipped, never followed, so damage costs recall, not a crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlatGraph<'a> {
    rows: usize,
    /// A node of the top layer, where searches start.
    entry: u32,
    /// Neighbours per node on layer 0, and on each upper layer.
    m0: usize,
    m: usize,
    /// Each node's level (its highest layer).
    levels: Cow<'a, [u8]>,
    /// `rows * m0` neighbour rows, padded with [`NONE`].
    layer0: Cow<'a, [u32]>,
    /// Per node, where its upper layers start in `upper` ([`NONE`] for a
    /// node of layer 0 only); its level `l` takes `l * m` slots there.
    upper_start: Cow<'a, [u32]>,
    upper: Cow<'a, [u32]>,
    /// Whether a merge may keep this graph and insert into it: built here
    /// by insertion ([`build`]), every list selected by the heuristic.
    /// Graphs of earlier builders (hnsw_rs', and 0.1's inner-product graphs
    /// over augmented rows) are rebuilt by the merge that first takes them.
    reusable: bool,
}

/// One node's neighbours on each layer, `layers[0]` being layer 0: what a
/// builder hands [`FlatGraph::from_nodes`].
pub type NodeLinks = Vec<Vec<u32>>;

/// A [`FlatGraph`]'s arrays and shape, as an index file stores them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphParts<'a> {
    pub rows: usize,
    pub entry: u32,
    pub m0: usize,
    pub m: usize,
    pub levels: Cow<'a, [u8]>,
    pub layer0: Cow<'a, [u32]>,
    pub upper_start: Cow<'a, [u32]>,
    pub upper: Cow<'a, [u32]>,
    pub reusable: bool,
}

impl<'a> FlatGraph<'a> {
    /// The graph of `nodes` (indexed by row; a node's level is its count of
    /// layers minus one), entered at `entry`. Strides are the longest list
    /// of each kind. A neighbour is kept on a layer only if it reaches that
    /// layer (hnsw_rs' lists do not promise it), and within the rows.
    pub fn from_nodes(nodes: &[NodeLinks], entry: u32) -> FlatGraph<'static> {
        let rows = nodes.len();
        let m0 = nodes.iter().filter_map(|n| n.first()).map(Vec::len).max().unwrap_or(0).max(1);
        let m = nodes.iter().flat_map(|n| n.iter().skip(1)).map(Vec::len).max().unwrap_or(0).max(1);
        let levels: Vec<u8> = nodes.iter().map(|n| n.len().saturating_sub(1).min(u8::MAX as usize) as u8).collect();
        let valid = |r: &u32| (*r as usize) < rows;
        let reaches = |r: &u32, layer: usize| valid(r) && levels[*r as usize] as usize >= layer;
        let mut layer0 = vec![NONE; rows * m0];
        let mut upper_start = vec![NONE; rows];
        let mut upper = Vec::new();
        for (row, links) in nodes.iter().enumerate() {
            if let Some(first) = links.first() {
                for (slot, n) in layer0[row * m0..(row + 1) * m0].iter_mut().zip(first.iter().filter(|r| valid(r))) {
                    *slot = *n;
                }
            }
            if links.len() > 1 {
                upper_start[row] = upper.len() as u32;
                for (at, layer) in links.iter().enumerate().skip(1) {
                    let mut slots = vec![NONE; m];
                    for (slot, n) in slots.iter_mut().zip(layer.iter().filter(|r| reaches(r, at))) {
                        *slot = *n;
                    }
                    upper.extend(slots);
                }
            }
        }
        let entry = if (entry as usize) < rows { entry } else { 0 };
        FlatGraph {
            rows,
            entry,
            m0,
            m,
            levels: Cow::Owned(levels),
            layer0: Cow::Owned(layer0),
            upper_start: Cow::Owned(upper_start),
            upper: Cow::Owned(upper),
            reusable: false,
        }
    }

    /// A graph over arrays read from an index file. Checks the shape (array
    /// lengths against `rows` and the strides, the entry within the rows),
    /// not every neighbour: those are checked as searches read them.
    pub fn from_parts(parts: GraphParts<'a>) -> Result<Self, String> {
        let GraphParts { rows, entry, m0, m, levels, layer0, upper_start, upper, reusable } = parts;
        if m0 == 0 || m == 0 {
            return Err(format!("neighbour lists of length {m0} and {m}"));
        }
        if levels.len() != rows || upper_start.len() != rows || Some(layer0.len()) != rows.checked_mul(m0) {
            return Err(format!(
                "{rows} rows but {} levels, {} layer-0 slots of {m0}, {} upper starts",
                levels.len(),
                layer0.len(),
                upper_start.len()
            ));
        }
        if (rows > 0 && entry as usize >= rows) || rows >= NONE as usize {
            return Err(format!("entry {entry} of {rows} rows"));
        }
        Ok(FlatGraph { rows, entry, m0, m, levels, layer0, upper_start, upper, reusable })
    }

    /// Makes every node reachable from the entry point on layer 0
    /// (`connect_from`): what every build ends with.
    pub fn connect(&mut self, distance: &dyn Fn(u32, u32) -> f32) {
        let mut lists: Vec<Vec<u32>> = (0..self.rows as u32).map(|n| self.neighbours(n, 0).collect()).collect();
        connect_from(&mut lists, self.m0, self.entry, distance);
        self.set_layer0(&lists);
    }

    fn set_layer0(&mut self, lists: &[Vec<u32>]) {
        let m0 = self.m0;
        let layer0 = self.layer0.to_mut();
        for (node, list) in lists.iter().enumerate() {
            let slots = &mut layer0[node * m0..(node + 1) * m0];
            slots.fill(NONE);
            slots[..list.len()].copy_from_slice(list);
        }
    }

    /// How many nodes a search from the entry point cannot reach on
    /// layer 0 (where every node is): none in a graph this crate builds.
    pub fn unreached(&self) -> usize {
        if self.rows == 0 {
            return 0;
        }
        let mut reached = vec![false; self.rows];
        let mut queue = vec![self.entry];
        reached[self.entry as usize] = true;
        while let Some(node) = queue.pop() {
            for n in self.neighbours(node, 0) {
                if !std::mem::replace(&mut reached[n as usize], true) {
                    queue.push(n);
                }
            }
        }
        reached.iter().filter(|r| !**r).count()
    }

    /// The mean length of the layer-0 lists (at most `m0`): how much of
    /// each list the neighbour selection filled.
    pub fn mean_layer0_degree(&self) -> f64 {
        let links: usize = (0..self.rows as u32).map(|n| self.neighbours(n, 0).count()).sum();
        links as f64 / self.rows.max(1) as f64
    }

    /// The arrays and shape, to store.
    pub fn parts(&self) -> GraphParts<'_> {
        GraphParts {
            rows: self.rows,
            entry: self.entry,
            m0: self.m0,
            m: self.m,
            levels: Cow::Borrowed(&self.levels),
            layer0: Cow::Borrowed(&self.layer0),
            upper_start: Cow::Borrowed(&self.upper_start),
            upper: Cow::Borrowed(&self.upper),
            reusable: self.reusable,
        }
    }

    /// Whether the arrays borrow their input (no copy was made).
    pub fn is_borrowed(&self) -> bool {
        matches!(
            (&self.levels, &self.layer0, &self.upper_start, &self.upper),
            (Cow::Borrowed(_), Cow::Borrowed(_), Cow::Borrowed(_), Cow::Borrowed(_))
        )
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The neighbours of `node` (a row) on `layer`; none if the node does
    /// not reach it, or if its list lies outside the arrays, and only those
    /// within the rows (damage is skipped, not followed).
    fn neighbours(&self, node: u32, layer: usize) -> impl Iterator<Item = u32> + Clone + '_ {
        let node = node as usize;
        let list = if layer > self.levels.get(node).copied().unwrap_or(0) as usize {
            None
        } else if layer == 0 {
            self.layer0.get(node * self.m0..(node + 1) * self.m0)
        } else {
            let start = self.upper_start[node] as usize + (layer - 1) * self.m;
            self.upper.get(start..start + self.m)
        };
        let rows = self.rows;
        list.unwrap_or(&[]).iter().copied().take_while(|n| *n != NONE).filter(move |n| (*n as usize) < rows)
    }

    /// Up to `k` rows near `query`, nearest first by `distance(query, row)`
    /// (`ef` at least `k` candidates on layer 0), none for which `skip` is
    /// true. `vector` gives a row's vector.
    pub fn search<'v>(
        &self,
        metric: Metric,
        query: Row<'_>,
        vector: &dyn Fn(u32) -> Row<'v>,
        k: usize,
        ef: usize,
        skip: &dyn Fn(u32) -> bool,
    ) -> Vec<(f32, u32)> {
        let distance = |node: u32| metric.between(query, vector(node));
        let prefetch = |node: u32| vector(node).prefetch();
        self.search_with(&distance, &prefetch, k, ef, skip)
    }

    /// [`Self::search`] by any distance to the query: `distance(row)`, with
    /// `prefetch(row)` asking for what it will read (a segment's codes
    /// traverse the graph by their estimates, `crate::quant`).
    pub fn search_with(
        &self,
        distance: &dyn Fn(u32) -> f32,
        prefetch: &dyn Fn(u32),
        k: usize,
        ef: usize,
        skip: &dyn Fn(u32) -> bool,
    ) -> Vec<(f32, u32)> {
        if self.rows == 0 || k == 0 {
            return Vec::new();
        }
        let (mut at, mut at_distance) = (self.entry, distance(self.entry));
        for layer in (1..=self.levels[at as usize] as usize).rev() {
            (at, at_distance) = self.descend(layer, at, at_distance, distance);
        }
        let beam = Beam { distance, prefetch, skip };
        SCRATCH.with_borrow_mut(|s| s.beam(self, 0, at, at_distance, &beam, k, ef.max(k)))
    }

    /// Greedy search on `layer` from `at`: moves to the nearest neighbour
    /// while one is nearer, and returns where it stops, with its distance.
    fn descend(&self, layer: usize, mut at: u32, mut at_distance: f32, distance: &dyn Fn(u32) -> f32) -> (u32, f32) {
        loop {
            let mut moved = false;
            for n in self.neighbours(at, layer) {
                let d = distance(n);
                if d < at_distance {
                    (at, at_distance) = (n, d);
                    moved = true;
                }
            }
            if !moved {
                return (at, at_distance);
            }
        }
    }

    /// The level of `node` (its highest layer).
    pub fn level(&self, node: u32) -> u8 {
        self.levels.get(node as usize).copied().unwrap_or(0)
    }

    /// Whether a merge may keep this graph (see the field).
    pub fn is_reusable(&self) -> bool {
        self.reusable
    }
}

/// Makes every node reachable from `entry` over `lists` (layer 0, each at
/// most `m` long, in any order): HNSW's selection leaves some nodes that
/// no list names (0.3-0.4% of them on a Gaussian mixture, more under
/// inner product, where rows of small norm are nobody's nearest) and some
/// groups that only name each other; a row no search can reach caps recall however large `ef_search`
/// is.
///
/// Each node not reached gets an edge from the reached node nearest to it
/// among its own neighbours, else from where a greedy walk from `entry`
/// towards it ends: into a free slot, or in place of that list's farthest
/// entry, which the node then links to in turn (`from -> node -> farthest`;
/// the node's own farthest entry gives way if its list is full). No path
/// between reached nodes went through the node, so every reached node stays
/// reached, and the node and all it reaches join them: one pass connects
/// all.
fn connect_from(lists: &mut [Vec<u32>], m: usize, entry: u32, distance: &dyn Fn(u32, u32) -> f32) {
    let rows = lists.len();
    if rows == 0 || m == 0 {
        return;
    }
    let mut reached = vec![false; rows];
    let mut queue = Vec::new();
    spread(lists, entry, &mut reached, &mut queue);
    for node in 0..rows as u32 {
        if reached[node as usize] {
            continue;
        }
        let from = lists[node as usize]
            .iter()
            .copied()
            .filter(|n| reached[*n as usize])
            .min_by(|a, b| distance(node, *a).total_cmp(&distance(node, *b)))
            .unwrap_or_else(|| walk_towards(lists, entry, node, distance));
        if lists[from as usize].len() < m {
            lists[from as usize].push(node);
        } else {
            let slot = farthest(&lists[from as usize], from, distance);
            let farthest_entry = std::mem::replace(&mut lists[from as usize][slot], node);
            if !lists[node as usize].contains(&farthest_entry) {
                if lists[node as usize].len() < m {
                    lists[node as usize].push(farthest_entry);
                } else {
                    let slot = farthest(&lists[node as usize], node, distance);
                    lists[node as usize][slot] = farthest_entry;
                }
            }
        }
        spread(lists, node, &mut reached, &mut queue);
    }
}

/// The slot of `list` (`owner`'s, not empty) farthest from `owner`.
fn farthest(list: &[u32], owner: u32, distance: &dyn Fn(u32, u32) -> f32) -> usize {
    (0..list.len()).max_by(|a, b| distance(owner, list[*a]).total_cmp(&distance(owner, list[*b]))).expect("a full list")
}

/// Marks what `from` reaches over `lists` (breadth first; `queue` is
/// scratch), stopping at nodes already marked.
fn spread(lists: &[Vec<u32>], from: u32, reached: &mut [bool], queue: &mut Vec<u32>) {
    reached[from as usize] = true;
    queue.clear();
    queue.push(from);
    while let Some(node) = queue.pop() {
        for &n in &lists[node as usize] {
            if !reached[n as usize] {
                reached[n as usize] = true;
                queue.push(n);
            }
        }
    }
}

/// Where a greedy walk from `entry` towards `target` stops: a node
/// reachable from `entry` with no neighbour nearer to `target`.
fn walk_towards(lists: &[Vec<u32>], entry: u32, target: u32, distance: &dyn Fn(u32, u32) -> f32) -> u32 {
    let (mut at, mut at_distance) = (entry, distance(entry, target));
    loop {
        let nearer = lists[at as usize]
            .iter()
            .map(|&n| (distance(n, target), n))
            .filter(|(d, n)| *d < at_distance && *n != target)
            .min_by(|a, b| a.0.total_cmp(&b.0));
        match nearer {
            Some((d, n)) => (at, at_distance) = (n, d),
            None => return at,
        }
    }
}

/// [`select_diverse`], then with `fill` the nearest candidates it pruned,
/// in order, up to `m` (HNSW's `keepPrunedConnections`).
fn select(near: &[(f32, u32)], m: usize, distance: &dyn Fn(u32, u32) -> f32, fill: bool) -> Vec<u32> {
    let mut kept = select_diverse(near, m, distance);
    if fill {
        for &(_, c) in near {
            if kept.len() == m {
                break;
            }
            if !kept.contains(&c) {
                kept.push(c);
            }
        }
    }
    kept
}

/// HNSW's neighbour selection (Malkov and Yashunin, algorithm 4): from
/// `near` (a node's candidates, nearest first, with their distances to it),
/// keep a candidate unless one kept before it is nearer to it than the node
/// is, up to `m`. Neighbours then point in different directions, and the
/// few long links between clusters survive. A tie keeps the candidate, as
/// hnswlib decides: under Hamming a distance is one of a few integers and
/// most candidates tie with a kept neighbour, and pruning them left bit
/// rows' lists short (5.9 of 8 at m 4). Not at distance 0: of a node's duplicates one
/// is kept, so that a row repeated many times does not fill lists with its
/// copies.
fn select_diverse(near: &[(f32, u32)], m: usize, distance: &dyn Fn(u32, u32) -> f32) -> Vec<u32> {
    let mut kept: Vec<u32> = Vec::with_capacity(m);
    for &(d, c) in near {
        if kept.len() == m {
            break;
        }
        if kept.iter().all(|&k| {
            let between = distance(c, k);
            between > d || (between == d && d > 0.0)
        }) {
            kept.push(c);
        }
    }
    kept
}

/// A distance and a node, ordered by distance (NaN last), then node.
#[derive(Clone, Copy, PartialEq)]
struct Near(f32, u32);

impl Eq for Near {}
impl PartialOrd for Near {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Near {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0).then(self.1.cmp(&o.1))
    }
}

/// What a search reuses from one to the next on a thread: a visit stamp
/// per node (a node is visited when its stamp is the current search's), and
/// the heaps, emptied but not freed.
#[derive(Default)]
struct Scratch {
    stamps: Vec<u32>,
    stamp: u32,
    candidates: BinaryHeap<Reverse<Near>>,
    results: BinaryHeap<Near>,
    /// The neighbours of the node a beam search expands, to compute.
    hop: Vec<u32>,
}

/// What a beam search computes with: a node's distance to the target, a
/// prefetch of what that reads, and the nodes it must not return.
pub(crate) struct Beam<'a> {
    pub distance: &'a dyn Fn(u32) -> f32,
    pub prefetch: &'a dyn Fn(u32),
    pub skip: &'a dyn Fn(u32) -> bool,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl Scratch {
    /// A fresh visited set for `rows` nodes, in O(1) but once per 4 billion
    /// searches.
    fn start(&mut self, rows: usize) {
        if self.stamps.len() < rows {
            self.stamps.resize(rows, 0);
        }
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.stamps.fill(0);
            self.stamp = 1;
        }
        self.candidates.clear();
        self.results.clear();
    }

    /// Marks `node` visited; false if it was already.
    fn visit(&mut self, node: u32) -> bool {
        let slot = &mut self.stamps[node as usize];
        let fresh = *slot != self.stamp;
        *slot = self.stamp;
        fresh
    }

    /// The beam search of `layer` from `entry`. Before the distances of a
    /// node's neighbours are computed, the vectors of those not yet visited
    /// are prefetched: their loads overlap instead of each waiting its turn
    /// (rows of a graph neighbourhood lie anywhere in the segment).
    #[allow(clippy::too_many_arguments)]
    fn beam(
        &mut self,
        graph: &FlatGraph,
        layer: usize,
        entry: u32,
        entry_distance: f32,
        with: &Beam<'_>,
        k: usize,
        ef: usize,
    ) -> Vec<(f32, u32)> {
        self.start(graph.rows);
        self.visit(entry);
        self.candidates.push(Reverse(Near(entry_distance, entry)));
        if !(with.skip)(entry) {
            self.results.push(Near(entry_distance, entry));
        }
        let mut hop = std::mem::take(&mut self.hop);
        while let Some(Reverse(Near(d, node))) = self.candidates.pop() {
            if self.results.len() >= ef && self.results.peek().is_some_and(|worst| d > worst.0) {
                break;
            }
            hop.clear();
            for n in graph.neighbours(node, layer) {
                if self.visit(n) {
                    (with.prefetch)(n);
                    hop.push(n);
                }
            }
            for &n in &hop {
                let dn = (with.distance)(n);
                if self.results.len() < ef || self.results.peek().is_some_and(|worst| dn < worst.0) {
                    self.candidates.push(Reverse(Near(dn, n)));
                    if !(with.skip)(n) {
                        self.results.push(Near(dn, n));
                        if self.results.len() > ef {
                            self.results.pop();
                        }
                    }
                }
            }
        }
        self.hop = hop;
        let mut out: Vec<(f32, u32)> = self.results.drain().map(|Near(d, n)| (d, n)).collect();
        out.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        out.truncate(k);
        out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::format::insert::{self, InsertBinlog};
    use crate::graph::segment::{HnswParams, SegmentIndex};
    use crate::segment::SegmentId;
    use crate::synthetic::{Rng, gaussian_mixture};
    use std::collections::HashSet;
    use std::sync::atomic::AtomicBool;

    fn binlog(rows: usize, dims: usize, metric: Metric, seed: u64) -> InsertBinlog<'static> {
        let keys: Vec<u64> = (0..rows as u64).collect();
        let bytes = insert::encode(SegmentId(1), metric, dims, &keys, &gaussian_mixture(rows, dims, 50, 0.1, seed));
        InsertBinlog::decode("o", &bytes).unwrap().into_owned()
    }

    fn exact(b: &InsertBinlog<'_>, query: &[f32], k: usize, skip: &dyn Fn(u32) -> bool) -> Vec<u32> {
        let mut all: Vec<(f32, u32)> = (0..b.len() as u32)
            .filter(|r| !skip(*r))
            .map(|r| (b.metric.between(Row::F32(query), b.vector(r as usize)), r))
            .collect();
        all.sort_by(|a, c| a.0.total_cmp(&c.0));
        all.into_iter().take(k).map(|(_, r)| r).collect()
    }

    /// Recall@10 at ef 40 of the flat search over a graph built here, on
    /// 50 queries near rows.
    fn recall(metric: Metric, skip: &dyn Fn(u32) -> bool) -> f64 {
        let b = binlog(5000, 16, metric, 3);
        let index = SegmentIndex::build(&b, HnswParams::default(), &AtomicBool::new(false)).unwrap();
        let flat = index.to_flat();
        assert_eq!(flat.rows(), 5000);
        let mut rng = Rng::new(9);
        let mut hits = 0.0;
        for _ in 0..50 {
            let q = b
                .vector(rng.next_u64() as usize % 5000)
                .to_f32()
                .iter()
                .map(|x| x + 0.05 * rng.next_gaussian())
                .collect::<Vec<f32>>();
            let truth: HashSet<u32> = exact(&b, &q, 10, skip).into_iter().collect();
            let got = flat.search(metric, Row::F32(&q), &|r| b.vector(r as usize), 10, 40, skip);
            assert!(got.windows(2).all(|w| w[0].0 <= w[1].0), "nearest first");
            assert!(got.iter().all(|(_, r)| !skip(*r)), "no skipped row");
            hits += got.iter().filter(|(_, r)| truth.contains(r)).count() as f64 / 10.0;
        }
        hits / 50.0
    }

    #[test]
    fn the_flat_search_finds_the_nearest_rows_for_every_metric() {
        for metric in Metric::ALL {
            let r = recall(metric, &|_| false);
            assert!(r >= 0.95, "{metric:?}: recall {r}");
        }
    }

    /// Random bit rows (pgvector's `hnsw_bit_*_recall` tests) at m 4 and
    /// ef_construction 8: a distance takes one of 65 values under Hamming,
    /// few more under Jaccard, so most candidates tie with a neighbour
    /// already kept. Recall@20 at ef 100, a row counted as found when no
    /// row is nearer than the 20th nearest (ties share the 20th place).
    /// Pruning ties and leaving lists short found 0.73 (Hamming, layer-0
    /// lists 5.9 of 8 long) and 0.61 (Jaccard, 4.9).
    #[test]
    fn bit_rows_whose_distances_tie_keep_their_recall() {
        for (metric, least) in [(Metric::Hamming, 0.8), (Metric::Jaccard, 0.68)] {
            let (rows, bits, k) = (2500, 64, 20);
            let mut rng = Rng::new(21);
            let data: Vec<u8> = (0..rows * bits / 8).map(|_| rng.next_u64() as u8).collect();
            let keys: Vec<u64> = (0..rows as u64).collect();
            let bytes = insert::encode(SegmentId(1), metric, bits, &keys, Row::Bit { len: rows * bits, bits: &data });
            let b = InsertBinlog::decode("o", &bytes).unwrap();
            let params = HnswParams { m: 4, ef_construction: 8, ..Default::default() };
            let graph = SegmentIndex::build(&b, params, &AtomicBool::new(false)).unwrap().to_flat();
            assert_eq!(graph.mean_layer0_degree(), 8.0, "{metric:?}: every list filled");
            let queries = 50;
            let mut found = 0;
            for _ in 0..queries {
                let q: Vec<u8> = (0..bits / 8).map(|_| rng.next_u64() as u8).collect();
                let query = Row::Bit { len: bits, bits: &q };
                let mut all: Vec<f32> = (0..rows).map(|r| metric.between(query, b.vector(r))).collect();
                all.sort_by(f32::total_cmp);
                let got = graph.search(metric, query, &|r| b.vector(r as usize), k, 100, &|_| false);
                found += got.iter().filter(|(d, _)| *d <= all[k - 1]).count();
            }
            let recall = found as f64 / (queries * k) as f64;
            assert!(recall >= least, "{metric:?}: recall@{k} {recall}");
        }
    }

    #[test]
    fn built_lists_are_sound() {
        for metric in Metric::ALL {
            let b = binlog(3000, 16, metric, 5);
            let graph = SegmentIndex::build(&b, HnswParams::default(), &AtomicBool::new(false)).unwrap().to_flat();
            assert_sound(&graph);
        }
    }

    /// Every list of `graph` names distinct nodes other than its owner, at
    /// most the layer's stride, each reaching the layer; every node is
    /// reachable from the entry point on layer 0.
    pub(crate) fn assert_sound(graph: &FlatGraph) {
        assert_eq!(graph.unreached(), 0, "every node can be reached on layer 0");
        for node in 0..graph.rows() as u32 {
            for layer in 0..=graph.levels[node as usize] as usize {
                let list: Vec<u32> = graph.neighbours(node, layer).collect();
                let unique: HashSet<u32> = list.iter().copied().collect();
                let cap = if layer == 0 { graph.m0 } else { graph.m };
                assert!(
                    unique.len() == list.len() && !unique.contains(&node) && list.len() <= cap,
                    "node {node} on layer {layer}: {list:?}"
                );
                assert!(list.iter().all(|n| graph.levels[*n as usize] as usize >= layer), "{list:?}");
            }
        }
    }

    #[test]
    fn a_node_no_list_names_gets_an_edge_from_its_nearest() {
        // On a line at 0, 1, 5 and 2.5; from entry 0, nothing names 2. Its
        // nearest reached neighbour is 1, whose list is full (m = 2): 2
        // takes the place of 1's farthest, 3, and links to it in place of
        // its own farthest, 0 (its list is full too).
        let at = [0.0f32, 1.0, 5.0, 2.5];
        let d = |a: u32, b: u32| (at[a as usize] - at[b as usize]).abs();
        let mut lists = vec![vec![3, 1], vec![0, 3], vec![0, 1], vec![1]];
        connect_from(&mut lists, 2, 0, &d);
        assert_eq!(lists, vec![vec![3, 1], vec![0, 2], vec![3, 1], vec![1]]);
    }

    #[test]
    fn a_group_that_only_names_itself_is_linked_in() {
        // On a line: 0-1-2 name each other, 5-6-7 name each other; 7 names
        // 2 (so nobody lacks an incoming edge), but nothing reaches 5-6-7
        // from 0. The greedy walk from 0 towards 5 ends at 2, which has room.
        let d = |a: u32, b: u32| (a as f32 - b as f32).abs();
        let mut lists = vec![vec![1], vec![0, 2], vec![1], vec![], vec![], vec![6], vec![5, 7], vec![6, 2]];
        lists[3] = vec![2];
        lists[4] = vec![3];
        lists[2].push(3);
        lists[3].push(4);
        connect_from(&mut lists, 3, 0, &d);
        let g = FlatGraph::from_nodes(&lists.iter().map(|l| vec![l.clone()]).collect::<Vec<_>>(), 0);
        assert_eq!(g.unreached(), 0, "{lists:?}");
        assert_eq!(lists[4], vec![3, 5], "4 is the reached node nearest to 5");
    }

    #[test]
    fn the_heuristic_keeps_one_neighbour_per_direction() {
        // Node at 0; candidates at 1, 1.1 (behind 1) and -2 (the other way).
        let at = [0.0f32, 1.0, 1.1, -2.0];
        let d = |a: u32, b: u32| (at[a as usize] - at[b as usize]).powi(2);
        let near = [(d(0, 1), 1), (d(0, 2), 2), (d(0, 3), 3)];
        assert_eq!(select_diverse(&near, 4, &d), vec![1, 3]);
        assert_eq!(select_diverse(&near, 1, &d), vec![1]);
        // Filling: the pruned candidate after the kept ones, up to m.
        assert_eq!(select(&near, 4, &d, true), vec![1, 3, 2]);
        assert_eq!(select(&near, 2, &d, true), vec![1, 3]);
        assert_eq!(select(&near, 4, &d, false), vec![1, 3]);
    }

    #[test]
    fn skipped_rows_are_traversed_never_returned() {
        // Every other row skipped: the graph stays connected through them.
        let r = recall(Metric::L2, &|r| r % 2 == 0);
        assert!(r >= 0.9, "recall {r}");
    }

    #[test]
    fn small_and_empty_graphs() {
        let empty = FlatGraph::from_nodes(&[], 0);
        assert!(empty.search(Metric::L2, Row::F32(&[0.0]), &|_| Row::F32(&[]), 10, 40, &|_| false).is_empty());
        // A chain 0 - 1 - 2 with 2 on layer 1 as the entry.
        let nodes = vec![vec![vec![1]], vec![vec![0, 2]], vec![vec![1], vec![]]];
        let g = FlatGraph::from_nodes(&nodes, 2);
        assert_eq!(g.levels[g.entry as usize], 1);
        let vectors = [[0.0f32], [1.0], [2.0]];
        let got = g.search(Metric::L2, Row::F32(&[0.1]), &|r| Row::F32(&vectors[r as usize]), 2, 4, &|_| false);
        assert_eq!(got.iter().map(|(_, r)| *r).collect::<Vec<_>>(), vec![0, 1]);
        let got = g.search(Metric::L2, Row::F32(&[0.1]), &|r| Row::F32(&vectors[r as usize]), 3, 4, &|r| r == 0);
        assert_eq!(got.iter().map(|(_, r)| *r).collect::<Vec<_>>(), vec![1, 2]);
    }

    /// Rows for the reachability property: a tight mixture (`distinct` 0),
    /// or `rows` drawn from only `distinct` different vectors.
    fn crowded_binlog(
        rows: usize,
        dims: usize,
        metric: Metric,
        clusters: usize,
        distinct: usize,
        seed: u64,
    ) -> Vec<u8> {
        let keys: Vec<u64> = (0..rows as u64).collect();
        let mut data = gaussian_mixture(rows, dims, clusters, 0.01, seed);
        if distinct > 0 {
            let pool = data[..distinct * dims].to_vec();
            let mut rng = Rng::new(seed);
            for row in data.chunks_exact_mut(dims) {
                let pick = rng.next_u64() as usize % distinct;
                row.copy_from_slice(&pool[pick * dims..(pick + 1) * dims]);
            }
        }
        if metric.measures(crate::element::Element::Bit) {
            let bits: Vec<u8> =
                data.chunks_exact(8).map(|c| c.iter().fold(0u8, |b, x| (b << 1) | (*x > 0.0) as u8)).collect();
            return insert::encode(SegmentId(1), metric, dims, &keys, Row::Bit { len: rows * dims, bits: &bits });
        }
        insert::encode(SegmentId(1), metric, dims, &keys, &data)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

        /// Every node of every graph a build makes is reachable from its
        /// entry point, on clustered and on duplicate-heavy rows.
        #[test]
        fn every_node_is_reachable_from_the_entry_point(
            rows in 50usize..1500,
            metric in proptest::sample::select(Metric::ALL.to_vec()),
            clusters in 1usize..20,
            distinct in proptest::prop_oneof![proptest::strategy::Just(0usize), 1usize..40],
            m in 2usize..17,
            seed in 0u64..1000,
        ) {
            let bytes = crowded_binlog(rows, 16, metric, clusters, distinct, seed);
            let b = InsertBinlog::decode("o", &bytes).unwrap();
            let params = HnswParams { m, ef_construction: 2 * m.max(16), ..Default::default() };
            let graph = SegmentIndex::build(&b, params, &AtomicBool::new(false)).unwrap().to_flat();
            proptest::prop_assert_eq!(graph.unreached(), 0);
        }
    }
}
