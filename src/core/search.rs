//! Search across segments: what a QueryNode does, inside one backend.
//!
//! An index scan asks for rows in order of distance to a query. The rows are
//! in two kinds of places:
//! - **pages**: the growing segment, and sealed segments not yet flushed;
//!   their rows are searched by brute force, by distances computed as the
//!   pages are read ([`PageHits`]);
//! - **flushed segments** ([`LoadedSegment`]): searched with their HNSW graph,
//!   or by brute force below [`BRUTE_FORCE_MAX_ROWS`] rows (where brute force
//!   is faster: see docs/benchmarks.md), skipping tombstoned rows.
//!
//! Every candidate is re-ranked by its exact distance, and the per-source
//! lists are merged k-way by distance. A [`Search`] is an iterator: when the
//! caller wants more rows than the first round found (a `WHERE` clause
//! rejected some), it searches again with twice the `k`, skipping rows it
//! already returned, until every row has been offered or `max_candidates`
//! is reached. As with any approximate search, a later round may find a row
//! nearer than one already returned; rows are never returned twice.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet, VecDeque};
use std::sync::Arc;

use crate::distance::Metric;
use crate::format::insert::InsertBinlog;
use crate::hnsw::SegmentIndex;
use crate::segment::SegmentId;

/// Up to this many rows a segment is searched by brute force, and flushed
/// without a graph. Measured at 128 dimensions (`benches/segment.rs`,
/// docs/benchmarks.md): brute force and HNSW at ef 40 cost about the same
/// per top-10 query at 4,096 rows; brute force wins below, HNSW above.
pub const BRUTE_FORCE_MAX_ROWS: usize = 4096;

/// Where a hit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// Index pages (growing or sealed-not-flushed rows).
    Pages,
    Segment(SegmentId),
}

/// A row found by a search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub source: Source,
    /// Position in its source.
    pub row: u32,
    /// The row's key (its heap TID, packed).
    pub key: u64,
    /// Exact distance under the metric.
    pub distance: f32,
}

impl Hit {
    fn order(&self, other: &Hit) -> Ordering {
        self.distance.total_cmp(&other.distance).then(self.source.cmp(&other.source)).then(self.row.cmp(&other.row))
    }
}

/// The `k` nearest of `candidates` by exact distance (NaN last), sorted.
fn top_k(mut hits: Vec<Hit>, k: usize) -> Vec<Hit> {
    if hits.len() > k {
        hits.select_nth_unstable_by(k, Hit::order);
        hits.truncate(k);
    }
    hits.sort_by(Hit::order);
    hits
}

/// Rows held in index pages, with their vectors row-major.
#[derive(Debug, Clone, Default)]
pub struct PageRows {
    pub dims: usize,
    pub keys: Vec<u64>,
    pub vectors: Vec<f32>,
}

impl PageRows {
    pub fn new(dims: usize) -> Self {
        PageRows { dims, keys: Vec::new(), vectors: Vec::new() }
    }

    pub fn push(&mut self, key: u64, vector: &[f32]) {
        debug_assert_eq!(vector.len(), self.dims);
        self.keys.push(key);
        self.vectors.extend_from_slice(vector);
    }

    /// The rows' distances to `query`: what a search needs of them.
    pub fn hits(&self, metric: Metric, query: &[f32]) -> PageHits {
        let mut hits = PageHits::default();
        for (i, key) in self.keys.iter().enumerate() {
            hits.push(*key, metric.distance(query, &self.vectors[i * self.dims..(i + 1) * self.dims]));
        }
        hits
    }
}

/// Rows held in index pages as a search sees them: each row's key and its
/// distance to the query, computed once, as the pages are read. The vectors
/// are never copied out of the pages: a scan holds 12 bytes per row instead
/// of the row. (It is not faster: reading the rows costs the same whether a
/// copy or the distance kernel reads them first; docs/benchmarks.md.)
#[derive(Debug, Clone, Default)]
pub struct PageHits {
    keys: Vec<u64>,
    distances: Vec<f32>,
}

impl PageHits {
    pub fn push(&mut self, key: u64, distance: f32) {
        self.keys.push(key);
        self.distances.push(distance);
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    fn search(&self, k: usize, skip: &dyn Fn(Source, u32) -> bool) -> Vec<Hit> {
        let hits = (0..self.keys.len())
            .filter(|i| !skip(Source::Pages, *i as u32))
            .map(|i| Hit { source: Source::Pages, row: i as u32, key: self.keys[i], distance: self.distances[i] })
            .collect();
        top_k(hits, k)
    }
}

/// A flushed segment ready to search: its rows, graph and tombstones.
pub struct LoadedSegment {
    pub id: SegmentId,
    binlog: InsertBinlog<'static>,
    index: Option<SegmentIndex>,
    /// Tombstoned row positions, sorted.
    tombstones: Vec<u32>,
}

impl LoadedSegment {
    /// `tombstones` may be unsorted and repeated (the union of delta binlogs).
    pub fn new(binlog: InsertBinlog<'static>, index: Option<SegmentIndex>, mut tombstones: Vec<u32>) -> Self {
        tombstones.sort_unstable();
        tombstones.dedup();
        LoadedSegment { id: binlog.segment, binlog, index, tombstones }
    }

    pub fn is_deleted(&self, row: u32) -> bool {
        self.tombstones.binary_search(&row).is_ok()
    }

    pub fn rows(&self) -> usize {
        self.binlog.len()
    }

    pub fn live_rows(&self) -> usize {
        self.binlog.len() - self.tombstones.len()
    }

    pub fn binlog(&self) -> &InsertBinlog<'static> {
        &self.binlog
    }

    pub fn tombstones(&self) -> &[u32] {
        &self.tombstones
    }

    fn hit(&self, query: &[f32], row: u32) -> Hit {
        Hit {
            source: Source::Segment(self.id),
            row,
            key: self.binlog.keys()[row as usize],
            distance: self.binlog.metric.distance(query, self.binlog.vector(row as usize)),
        }
    }

    /// The `k` nearest live rows not skipped, by exact distance.
    pub fn search(&self, query: &[f32], k: usize, ef_search: usize, skip: &dyn Fn(Source, u32) -> bool) -> Vec<Hit> {
        let source = Source::Segment(self.id);
        let excluded = |row: u32| self.is_deleted(row) || skip(source, row);
        if let Some(index) = self.index.as_ref().filter(|_| self.rows() > BRUTE_FORCE_MAX_ROWS) {
            let found = index.search(query, k, ef_search, &|row| excluded(row as u32));
            // A graph filtered this hard can come back short while rows
            // remain; then brute force keeps the iteration complete.
            if found.len() >= k {
                return top_k(found.into_iter().map(|row| self.hit(query, row)).collect(), k);
            }
        }
        let all = (0..self.rows() as u32).filter(|r| !excluded(*r)).map(|row| self.hit(query, row)).collect();
        top_k(all, k)
    }
}

/// Merges per-source lists, each sorted by distance, into one sorted list.
pub fn merge(lists: Vec<Vec<Hit>>, k: usize) -> Vec<Hit> {
    struct Head(Hit, usize, usize);
    impl PartialEq for Head {
        fn eq(&self, o: &Self) -> bool {
            self.cmp(o) == Ordering::Equal
        }
    }
    impl Eq for Head {}
    impl PartialOrd for Head {
        fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
            Some(self.cmp(o))
        }
    }
    impl Ord for Head {
        // Reversed: BinaryHeap is a max-heap, the nearest must come out first.
        fn cmp(&self, o: &Self) -> Ordering {
            o.0.order(&self.0)
        }
    }
    let mut heap: BinaryHeap<Head> =
        lists.iter().enumerate().filter_map(|(l, list)| list.first().map(|h| Head(*h, l, 0))).collect();
    let mut out = Vec::with_capacity(k.min(lists.iter().map(Vec::len).sum()));
    while let Some(Head(hit, l, i)) = heap.pop() {
        out.push(hit);
        if out.len() == k {
            break;
        }
        if let Some(next) = lists[l].get(i + 1) {
            heap.push(Head(*next, l, i + 1));
        }
    }
    out
}

/// How a [`Search`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchOptions {
    /// HNSW candidate list size (`milvus.ef_search`).
    pub ef_search: usize,
    /// Rows the first round looks for.
    pub first_k: usize,
    /// Most rows offered in all (`milvus.max_scan_tuples`); then the search
    /// ends even if rows remain.
    pub max_candidates: usize,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions { ef_search: 40, first_k: 40, max_candidates: 20_000 }
    }
}

/// Rows in order of distance from every source, produced on demand. It owns
/// what it searches (segments are shared with the backend's cache), so an
/// index scan can keep it between fetches.
pub struct Search {
    query: Vec<f32>,
    pages: PageHits,
    segments: Vec<Arc<LoadedSegment>>,
    options: SearchOptions,
    k: usize,
    offered: HashSet<(Source, u32)>,
    buffer: VecDeque<Hit>,
    exhausted: bool,
}

impl Search {
    /// `pages`: the page-resident rows' distances to `query` (the segments
    /// compute theirs under the metric they were built with).
    pub fn new(query: Vec<f32>, pages: PageHits, segments: Vec<Arc<LoadedSegment>>, options: SearchOptions) -> Self {
        Search {
            query,
            pages,
            segments,
            options,
            k: 0,
            offered: HashSet::new(),
            buffer: VecDeque::new(),
            exhausted: false,
        }
    }

    /// Live rows across all sources.
    fn total_rows(&self) -> usize {
        self.pages.len() + self.segments.iter().map(|s| s.live_rows()).sum::<usize>()
    }

    /// One round: the k nearest not yet offered, from every source.
    fn refill(&mut self) {
        let cap = self.options.max_candidates.min(self.total_rows());
        if self.offered.len() >= cap {
            self.exhausted = true;
            return;
        }
        self.k = if self.k == 0 { self.options.first_k.max(1) } else { self.k * 2 };
        let want = self.k.min(cap - self.offered.len());
        let offered = &self.offered;
        let skip = |s: Source, r: u32| offered.contains(&(s, r));
        let ef = self.options.ef_search.max(want);
        let mut lists = vec![self.pages.search(want, &skip)];
        lists.extend(self.segments.iter().map(|s| s.search(&self.query, want, ef, &skip)));
        let hits = merge(lists, want);
        if hits.is_empty() {
            self.exhausted = true;
        }
        for h in hits {
            self.offered.insert((h.source, h.row));
            self.buffer.push_back(h);
        }
    }
}

impl Iterator for Search {
    type Item = Hit;

    fn next(&mut self) -> Option<Hit> {
        if self.buffer.is_empty() && !self.exhausted {
            self.refill();
        }
        self.buffer.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::insert;
    use crate::hnsw::HnswParams;
    use crate::synthetic::Rng;
    use std::sync::atomic::AtomicBool;

    const DIMS: usize = 8;

    fn segment(id: u64, rows: usize, key_base: u64, with_index: bool, tombstones: Vec<u32>) -> LoadedSegment {
        let mut rng = Rng::new(id);
        let keys: Vec<u64> = (0..rows as u64).map(|i| key_base + i).collect();
        let bytes = insert::encode(SegmentId(id), Metric::L2, DIMS, &keys, &rng.vector(rows * DIMS));
        let binlog = InsertBinlog::decode("o", &bytes).unwrap().into_owned();
        let index = with_index.then(|| SegmentIndex::build(&binlog, HnswParams::default(), &AtomicBool::new(false)).unwrap());
        LoadedSegment::new(binlog, index, tombstones)
    }

    #[test]
    fn merge_is_a_k_way_merge_by_distance() {
        let h = |s: u64, row: u32, d: f32| Hit { source: Source::Segment(SegmentId(s)), row, key: row as u64, distance: d };
        let lists = vec![vec![h(1, 0, 0.1), h(1, 1, 0.5)], vec![], vec![h(2, 0, 0.2), h(2, 1, 0.3), h(2, 2, 0.9)]];
        let merged: Vec<f32> = merge(lists.clone(), 10).iter().map(|h| h.distance).collect();
        assert_eq!(merged, vec![0.1, 0.2, 0.3, 0.5, 0.9]);
        assert_eq!(merge(lists, 2).len(), 2);
    }

    #[test]
    fn every_row_is_offered_once_in_order_and_tombstones_never() {
        let segs = vec![
            Arc::new(segment(1, 5000, 0, true, (0..5000).step_by(10).collect())),
            Arc::new(segment(2, 500, 10_000, false, vec![1, 2, 3])),
        ];
        let mut rng = Rng::new(5);
        let pages = PageRows { dims: DIMS, keys: (20_000..20_050).collect(), vectors: rng.vector(50 * DIMS) };
        let query = rng.vector(DIMS);
        let options = SearchOptions { ef_search: 40, first_k: 10, max_candidates: usize::MAX };
        let all: Vec<Hit> = Search::new(query.clone(), pages.hits(Metric::L2, &query), segs, options).collect();

        let live = 5000 - 500 + 500 - 3 + 50;
        assert_eq!(all.len(), live, "every live row offered exactly once");
        let keys: HashSet<u64> = all.iter().map(|h| h.key).collect();
        assert_eq!(keys.len(), live, "no row twice");
        assert!(all.iter().all(|h| !(h.key < 5000 && h.key % 10 == 0)), "tombstoned rows never offered");
        assert!(!keys.contains(&10_001) && keys.contains(&10_000));

        // The first 10 are the exact top 10 (brute force over everything).
        let mut exact: Vec<(f32, u64)> = all.iter().map(|h| (h.distance, h.key)).collect();
        exact.sort_by(|a, b| a.0.total_cmp(&b.0));
        let first: HashSet<u64> = all.iter().take(10).map(|h| h.key).collect();
        let truth: HashSet<u64> = exact.iter().take(10).map(|(_, k)| *k).collect();
        assert!(first.intersection(&truth).count() >= 9, "recall@10 of the first round");
        assert!(all.windows(2).take(9).all(|w| w[0].distance <= w[1].distance), "first round sorted");
    }

    #[test]
    fn max_candidates_bounds_the_search() {
        let segs = vec![Arc::new(segment(1, 100, 0, false, vec![]))];
        let options = SearchOptions { ef_search: 40, first_k: 7, max_candidates: 30 };
        assert_eq!(Search::new(vec![0.0; DIMS], PageHits::default(), segs, options).count(), 30);
    }

    #[test]
    fn nan_distances_sort_last() {
        let pages = PageRows { dims: 2, keys: vec![1, 2, 3], vectors: vec![0.0, 0.0, 1.0, 0.0, 0.0, 1.0] };
        let query = vec![1.0, 0.0];
        let hits: Vec<u64> = Search::new(query.clone(), pages.hits(Metric::Cosine, &query), vec![], SearchOptions::default()).map(|h| h.key).collect();
        assert_eq!(hits, vec![2, 3, 1]);
    }
}
