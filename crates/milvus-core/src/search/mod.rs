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
//! lists are merged k-way by distance. A [`Search`] is an iterator, and it
//! runs in two phases:
//! 1. **approximate rounds**: the first looks for `first_k` rows, with one
//!    `ef` budget split across the segments by their rows
//!    ([`segment_ef`]); when the caller wants more (a `WHERE` clause
//!    rejected some), each next round searches again with twice the `k`,
//!    skipping rows already offered;
//! 2. **the exact tail**: once a round would cost more than brute force over
//!    every row ([`EXACT_SWITCH_FACTOR`]), or the approximate rounds have
//!    offered `max_approximate` rows, every live row not yet offered gets its
//!    exact distance and they come out nearest first.
//!
//! So a search never ends while a live row has not been offered (unless
//! [`IterativeScan::Off`] asks it to stop after the first round): a filtered
//! query fills its `LIMIT` whenever a sequential scan would, with the rows a
//! sequential scan returns once the approximate rounds are used up. As with
//! any approximate search, a later round (or the exact tail) may find a row
//! nearer than one already returned; [`IterativeScan::Strict`] drops such
//! rows, as pgvector's `strict_order` does, [`IterativeScan::Relaxed`]
//! returns them late. Rows are never returned twice.

mod hits;
mod ranged;
mod segment;

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use crate::cache::CacheError;
use crate::element::Vectors;
use crate::format::page::PageHits;

pub use hits::{Hit, PageRows, RowBits, Source, merge, recall};
use hits::{kth_distance, merge_lists, search_pages};
pub use ranged::{RangeReads, StoredRows};
pub use segment::{BRUTE_FORCE_MAX_ROWS, LoadedSegment, OpenError, RowsFrom, SegmentReads};

/// An approximate round that asks for `k` rows is an HNSW search with
/// `ef = k` in each segment; the rounds double, so all of them together
/// cost about twice the last. The exact tail costs one distance per live
/// row, read in order. Measured on 100k x 128 (docs/benchmark-runs.md): a
/// round costs some 12 us per row asked for, the tail some 60 ns per row
/// (memory bound), so the rounds stop paying once `k` times about 400
/// reaches the live rows. This factor puts the switch there: at 100k rows a filter
/// keeping 10% is served by three rounds, one keeping 1% by three rounds
/// and the tail.
pub const EXACT_SWITCH_FACTOR: usize = 512;

/// A round's `ef` is one budget for the whole index, not one per segment:
/// each flushed segment gets the share of it its live rows hold, with
/// [`SEGMENT_EF_SLACK`] for a query whose nearest rows bunch in one
/// segment, and at least [`SEGMENT_EF_FLOOR`]. The rows of a segment are a
/// sample of the index, so a segment holding an eighth of the rows holds
/// about an eighth of a query's nearest ones: searching each of 8 segments
/// with the whole `ef` did 8 full searches for what one index search does.
/// Measured on 100k x 128 (`crates/milvus-core/benches/cross_segment.rs`, docs/benchmarks.md):
/// 8 segments at ef 40 answer at 2.8-3.1x the QPS of each searched with the
/// whole `ef` (recall 0.972 against 1.000; one segment: 0.967). The rounds
/// after the first (a filter rejected rows) and the exact tail find what a
/// share missed.
pub(crate) fn segment_ef(ef: usize, rows: usize, live: usize, floor: usize) -> usize {
    let share = ef as f64 * rows as f64 / live.max(1) as f64 * SEGMENT_EF_SLACK;
    let floor = floor.max(1);
    (share.ceil() as usize).clamp(floor, ef.max(floor))
}

/// How much more than its share of `ef` a segment gets.
pub const SEGMENT_EF_SLACK: f64 = 1.5;
/// The least `ef` a segment is searched with. A segment holding 3% of the
/// rows holds, for most queries, none or one of their ten nearest, and a
/// search of `ef` 5 finds it; a query whose neighbours bunch in a small
/// segment (rows inserted together are often alike) is caught by the
/// widening ([`SEGMENT_WIDEN_RANK`]). Measured in `crates/milvus-core/benches/cross_segment.rs`
/// (docs/benchmarks.md) against a floor of 10: 1.2x the QPS on a stream's
/// layout (50k + 32k + 2 x 8k + 3 x 2k rows, in random order) at recall
/// 0.979 instead of 0.983, and 1.6x on 32 segments of 3k at 0.980 instead
/// of 0.995. A floor of 2 fell to 0.907 there: a search of `ef` 2 in a
/// 3k-row graph often stops short of the segment's nearest row, which
/// widening cannot see.
pub const SEGMENT_EF_FLOOR: usize = 5;
/// A segment all of whose hits rank among a round's this many nearest may
/// hold more of them than its share says: it is searched again with
/// [`SEGMENT_EF_WIDEN`] times the `ef`, up to the round's, until none
/// does. The head of the answer is what a bunching query loses; ranking
/// against the round's whole `k` (40 at ef 40) widened 1 segment search
/// in 6 on rows in random order, for no recall.
pub const SEGMENT_WIDEN_RANK: usize = 10;
/// How much wider a segment is searched again.
pub const SEGMENT_EF_WIDEN: usize = 4;

/// What a search does once its first round is used up: pgvector's
/// `hnsw.iterative_scan`, as `milvus.iterative_scan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IterativeScan {
    /// The first round only: at most `first_k` rows, then the search ends,
    /// even if a filter rejected them all.
    Off,
    /// Rounds, then the exact tail: every live row is offered once. A row an
    /// approximate round missed may come after a farther one.
    Relaxed,
    /// As `Relaxed`, but rows come out in non-decreasing distance: a row
    /// found nearer than one already offered is dropped.
    Strict,
}

/// How a [`Search`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchOptions {
    /// HNSW candidate list size (`milvus.ef_search`).
    pub ef_search: usize,
    /// Rows the first round looks for.
    pub first_k: usize,
    /// Most rows the approximate rounds offer (`milvus.max_scan_tuples`);
    /// past them the search goes on exactly.
    pub max_approximate: usize,
    pub iterative: IterativeScan,
    /// The least `ef` a flushed segment is searched with ([`segment_ef`]).
    pub segment_ef_floor: usize,
    /// A segment whose hits all rank among this many nearest of a round is
    /// searched again, wider ([`SEGMENT_WIDEN_RANK`]); 0 never.
    pub segment_widen_rank: usize,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            ef_search: 40,
            first_k: 40,
            max_approximate: 20_000,
            iterative: IterativeScan::Relaxed,
            segment_ef_floor: SEGMENT_EF_FLOOR,
            segment_widen_rank: SEGMENT_WIDEN_RANK,
        }
    }
}

/// What a search did, for EXPLAIN ANALYZE.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SearchStats {
    /// Approximate rounds run.
    pub rounds: usize,
    /// Whether the exact tail ran.
    pub exact: bool,
    /// Rows offered to the caller.
    pub offered: usize,
    /// Rows `Strict` dropped for coming out of order.
    pub dropped: usize,
    /// Rows of segments with codes read for their exact distances (the
    /// re-rank of what the codes found).
    pub reranked: usize,
    /// Rows read by range from storage, of segments whose binlogs the
    /// cache has no room for, and the bytes read.
    pub read_rows: usize,
    pub read_bytes: u64,
}

/// A row of the exact tail: 12 bytes, so the tail of a million-row index
/// costs 12 MB, not a `Hit` per row. `source` is 0 for pages, `i + 1` for
/// the `i`-th segment.
#[derive(Clone, Copy)]
struct Remaining {
    distance: f32,
    source: u32,
    row: u32,
}

impl PartialEq for Remaining {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Remaining {}
impl PartialOrd for Remaining {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Remaining {
    // Reversed: BinaryHeap is a max-heap, the nearest must come out first.
    fn cmp(&self, o: &Self) -> Ordering {
        o.distance.total_cmp(&self.distance).then(o.source.cmp(&self.source)).then(o.row.cmp(&self.row))
    }
}

/// The rows a search has offered, a [`RowBits`] per source (0 for the
/// pages, `i + 1` for the `i`-th segment). A filtered graph search asks
/// about every node it visits; a bit costs no hashing (a hash set of
/// (source, row) took a quarter of a filtered query's time).
struct Offered {
    sources: Vec<RowBits>,
}

impl Offered {
    fn new(rows: impl Iterator<Item = usize>) -> Self {
        Offered { sources: rows.map(RowBits::new).collect() }
    }

    fn contains(&self, source: usize, row: u32) -> bool {
        self.sources[source].contains(row)
    }

    fn insert(&mut self, source: usize, row: u32) {
        self.sources[source].insert(row);
    }

    fn len(&self) -> usize {
        self.sources.iter().map(RowBits::len).sum()
    }
}

/// Where a search is.
enum Phase {
    Approximate,
    Exact(BinaryHeap<Remaining>),
    /// Over; `ran_out` when no live row was left unoffered.
    Done {
        ran_out: bool,
    },
}

/// Rows in order of distance from every source, produced on demand. It owns
/// what it searches (segments are shared with the backend's cache), so an
/// index scan can keep it between fetches.
pub struct Search {
    /// One row, of the segments' element type.
    query: Vectors<'static>,
    pages: PageHits,
    segments: Vec<Arc<LoadedSegment>>,
    options: SearchOptions,
    k: usize,
    offered: Offered,
    buffer: VecDeque<Hit>,
    phase: Phase,
    /// The distance of the last row returned (for `Strict`).
    last: f32,
    stats: SearchStats,
}

impl Search {
    /// `pages`: the page-resident rows' distances to `query` (the segments
    /// compute theirs under the metric they were built with).
    pub fn new(
        query: Vectors<'static>,
        pages: PageHits,
        segments: Vec<Arc<LoadedSegment>>,
        options: SearchOptions,
    ) -> Self {
        let offered = Offered::new(std::iter::once(pages.len()).chain(segments.iter().map(|s| s.rows())));
        Search {
            query,
            pages,
            segments,
            options,
            k: 0,
            offered,
            buffer: VecDeque::new(),
            phase: Phase::Approximate,
            last: f32::NEG_INFINITY,
            stats: SearchStats::default(),
        }
    }

    /// What the search did so far.
    pub fn stats(&self) -> SearchStats {
        self.stats
    }

    /// Whether the search has ended having offered every live row of every
    /// source (approximately or in the exact tail); one that stopped after
    /// its first round (iterative scans off) did not run out of rows.
    pub fn exhausted(&self) -> bool {
        matches!(self.phase, Phase::Done { ran_out: true })
    }

    /// Rows held in pages that the search reads (its brute-force part).
    pub fn page_rows(&self) -> usize {
        self.pages.len()
    }

    /// The flushed segments it searches.
    pub fn segments(&self) -> usize {
        self.segments.len()
    }

    /// Live rows across all sources.
    fn total_rows(&self) -> usize {
        self.pages.len() + self.segments.iter().map(|s| s.live_rows()).sum::<usize>()
    }

    /// The next round's `k`, or `None` when the approximate phase is over:
    /// after the first round with `Off`, at `max_approximate` rows, or when
    /// the round would cost more than going exact.
    fn next_round(&self, total: usize) -> Option<usize> {
        if self.k == 0 {
            return Some(self.options.first_k.max(1).min(self.options.max_approximate.max(1)));
        }
        if self.options.iterative == IterativeScan::Off {
            return None;
        }
        let k = self.k * 2;
        let budget = self.options.max_approximate.saturating_sub(self.offered.len());
        (budget > 0 && k.saturating_mul(EXACT_SWITCH_FACTOR) < total).then_some(k.min(budget))
    }

    /// One approximate round: the k nearest not yet offered, from every
    /// source. False when there is no round to run.
    fn round(&mut self) -> Result<bool, CacheError> {
        let total = self.total_rows();
        if self.offered.len() >= total {
            return Ok(false);
        }
        let Some(k) = self.next_round(total) else { return Ok(false) };
        self.k = k;
        self.stats.rounds += 1;
        let ef = self.options.ef_search.max(k);
        let live = self.segments.iter().map(|s| s.live_rows()).sum::<usize>();
        // Brute force reads every row whatever it keeps: it keeps the whole `ef`.
        let efs = self
            .segments
            .iter()
            .map(|s| if s.by_graph() { segment_ef(ef, s.live_rows(), live, self.options.segment_ef_floor) } else { ef })
            .collect();
        let (lists, reads) = self.search_sources(k, ef, efs)?;
        self.stats.reranked += reads.reranked;
        self.stats.read_rows += reads.by_range.rows;
        self.stats.read_bytes += reads.by_range.bytes;
        for (source, h) in merge_lists(lists, k) {
            self.offered.insert(source, h.row);
            self.buffer.push_back(h);
        }
        Ok(true)
    }

    /// The `k` nearest rows not yet offered from each source, the `i`-th
    /// segment searched with `efs[i]`, widened where its hits all rank
    /// among the nearest ([`SEGMENT_WIDEN_RANK`]). Index 0 is the pages.
    fn search_sources(
        &self,
        k: usize,
        ef: usize,
        mut efs: Vec<usize>,
    ) -> Result<(Vec<Vec<Hit>>, SegmentReads), CacheError> {
        let offered = &self.offered;
        let mut reads = SegmentReads::default();
        let mut search = |i: usize, ef: usize| {
            let skip = |r| offered.contains(i + 1, r);
            let (hits, read) = self.segments[i].search_counted(self.query.all(), k.min(ef), ef, &skip)?;
            reads.reranked += read.reranked;
            reads.by_range.add(read.by_range);
            Ok::<_, CacheError>(hits)
        };
        let mut lists = vec![search_pages(&self.pages, k, &|r| offered.contains(0, r))];
        for (i, &ef) in efs.iter().enumerate() {
            lists.push(search(i, ef)?);
        }
        let rank = k.min(self.options.segment_widen_rank);
        let mut widened = rank > 0;
        while widened {
            let bound = kth_distance(&lists, rank);
            widened = false;
            for (i, segment_ef) in efs.iter_mut().enumerate() {
                let hits = &lists[i + 1];
                let full = hits.len() >= k.min(*segment_ef);
                if *segment_ef < ef && full && hits.last().is_some_and(|h| h.distance <= bound) {
                    *segment_ef = (*segment_ef * SEGMENT_EF_WIDEN).min(ef);
                    lists[i + 1] = search(i, *segment_ef)?;
                    widened = true;
                }
            }
        }
        Ok((lists, reads))
    }

    /// The exact tail: every live row not yet offered, by exact distance.
    /// (A segment whose rows are read by range reads them all here.)
    fn exact_tail(&self) -> Result<(BinaryHeap<Remaining>, RangeReads), CacheError> {
        let offered = &self.offered;
        let mut rows: Vec<Remaining> = Vec::with_capacity(self.total_rows().saturating_sub(offered.len()));
        let mut reads = RangeReads::default();
        for i in 0..self.pages.len() {
            if !offered.contains(0, i as u32) {
                rows.push(Remaining { distance: self.pages.distance(i), source: 0, row: i as u32 });
            }
        }
        for (s, segment) in self.segments.iter().enumerate() {
            let left = (0..segment.rows() as u32).filter(|r| !segment.is_deleted(*r) && !offered.contains(s + 1, *r));
            let source = s as u32 + 1;
            reads.add(
                segment.distances(self.query.all(), left, |row, distance| {
                    rows.push(Remaining { distance, source, row })
                })?,
            );
        }
        Ok((BinaryHeap::from(rows), reads))
    }

    /// The hit of a row of the exact tail.
    fn hit_of(&self, r: Remaining) -> Hit {
        match r.source {
            0 => Hit { source: Source::Pages, row: r.row, key: self.pages.key(r.row as usize), distance: r.distance },
            s => {
                let segment = &self.segments[s as usize - 1];
                Hit {
                    source: Source::Segment(segment.id),
                    row: r.row,
                    key: segment.keys()[r.row as usize],
                    distance: r.distance,
                }
            }
        }
    }

    /// The next row in search order, before `Strict` has its say.
    fn next_candidate(&mut self) -> Result<Option<Hit>, CacheError> {
        loop {
            if let Some(hit) = self.buffer.pop_front() {
                return Ok(Some(hit));
            }
            match &mut self.phase {
                Phase::Approximate => {
                    if !self.round()? {
                        let ran_out = self.offered.len() >= self.total_rows();
                        self.phase = if self.options.iterative == IterativeScan::Off || ran_out {
                            Phase::Done { ran_out }
                        } else {
                            self.stats.exact = true;
                            let (tail, reads) = self.exact_tail()?;
                            self.stats.read_rows += reads.rows;
                            self.stats.read_bytes += reads.bytes;
                            Phase::Exact(tail)
                        };
                    }
                }
                Phase::Exact(heap) => match heap.pop() {
                    Some(r) => return Ok(Some(self.hit_of(r))),
                    None => self.phase = Phase::Done { ran_out: true },
                },
                Phase::Done { .. } => return Ok(None),
            }
        }
    }
}

/// Rows in search order; a segment whose rows could not be read by range
/// ends the search with its error.
impl Iterator for Search {
    type Item = Result<Hit, CacheError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let hit = match self.next_candidate() {
                Ok(hit) => hit?,
                Err(e) => {
                    self.phase = Phase::Done { ran_out: false };
                    self.buffer.clear();
                    return Some(Err(e));
                }
            };
            if self.options.iterative == IterativeScan::Strict && hit.distance < self.last {
                self.stats.dropped += 1;
                continue;
            }
            self.last = hit.distance;
            self.stats.offered += 1;
            return Some(Ok(hit));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distance::Metric;
    use crate::element::{Row, Shape};
    use crate::format::insert::{self, InsertBinlog};
    use crate::hnsw::HnswParams;
    use crate::hnsw::SegmentIndex;
    use crate::segment::SegmentId;
    use crate::synthetic::Rng;
    use std::collections::HashSet;
    use std::sync::atomic::AtomicBool;

    const DIMS: usize = 8;

    fn segment(id: u64, rows: usize, key_base: u64, with_index: bool, tombstones: Vec<u32>) -> LoadedSegment {
        let mut rng = Rng::new(id);
        let keys: Vec<u64> = (0..rows as u64).map(|i| key_base + i).collect();
        let bytes = insert::encode(SegmentId(id), Metric::L2, DIMS, &keys, &rng.vector(rows * DIMS));
        let binlog = InsertBinlog::decode("o", &bytes).unwrap().into_owned();
        let index =
            with_index.then(|| SegmentIndex::build(&binlog, HnswParams::default(), &AtomicBool::new(false)).unwrap());
        LoadedSegment::new(binlog, index, tombstones)
    }

    /// A halfvec index: rows stored as f16 in the segment (and its pages),
    /// the query as f16, every metric. The search returns what the same
    /// search over the rows widened to f32 returns, at the same distances.
    #[test]
    fn half_segments_search_as_their_widened_rows() {
        use crate::element::f16;
        let (rows, dims) = (3000, 16);
        let halves: Vec<f16> = Rng::new(11).vector(rows * dims).iter().map(|x| f16::from_f32(*x)).collect();
        let widened: Vec<f32> = halves.iter().map(|h| h.to_f32()).collect();
        let keys: Vec<u64> = (0..rows as u64).collect();
        for metric in Metric::ALL {
            let open = |vectors: Row<'_>| {
                let bytes = insert::encode(SegmentId(1), metric, dims, &keys, vectors);
                let binlog = InsertBinlog::decode("o", &bytes).unwrap().into_owned();
                let index = SegmentIndex::build(&binlog, HnswParams::default(), &AtomicBool::new(false)).unwrap();
                Arc::new(LoadedSegment::new(binlog, Some(index), vec![3, 5]))
            };
            let (half, full) = (open(Row::F16(&halves)), open(Row::F32(&widened)));
            assert_eq!(half.binlog().unwrap().element(), crate::element::Element::F16);
            let pages = PageRows { dims, keys: vec![10_000], vectors: halves[..dims].to_vec().into() };
            let query: Vec<f16> = halves[7 * dims..8 * dims].to_vec();
            let wide_query: Vec<f32> = query.iter().map(|h| h.to_f32()).collect();
            let search = |segment: &Arc<LoadedSegment>, query: Vectors<'static>| {
                let hits = pages.hits(metric, query.all());
                Search::new(query, hits, vec![segment.clone()], SearchOptions::default())
                    .map(Result::unwrap)
                    .take(10)
                    .map(|h| (h.key, h.distance))
                    .collect::<Vec<_>>()
            };
            let (got, want) = (search(&half, query.into()), search(&full, wide_query.into()));
            assert_eq!(got.iter().map(|h| h.0).collect::<Vec<_>>(), want.iter().map(|h| h.0).collect::<Vec<_>>());
            for ((_, a), (_, b)) in got.iter().zip(&want) {
                assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "{metric:?}: {a} against {b}");
            }
            assert!(got.iter().all(|h| h.0 != 3 && h.0 != 5), "tombstones hold");
        }
    }

    /// A segment walked by its codes (8-bit, RaBitQ) finds what one walked
    /// by its rows does, at the same `ef`: recall within 0.005, every hit
    /// with its exact distance, nearest first, tombstones held, for each
    /// metric with codes and for `vector` and `halfvec` rows.
    #[test]
    fn segments_with_codes_find_what_segments_without_do() {
        use crate::element::f16;
        use crate::quant::Quantization;
        let (rows, dims) = (5000, 48);
        let data = crate::synthetic::gaussian_mixture(rows, dims, 50, 0.3, 8);
        let halves: Vec<f16> = data.iter().map(|x| f16::from_f32(*x)).collect();
        let keys: Vec<u64> = (0..rows as u64).collect();
        let deleted: Vec<u32> = (0..rows as u32).step_by(7).collect();
        for (metric, quantization) in [Metric::L2, Metric::InnerProduct, Metric::Cosine]
            .into_iter()
            .flat_map(|m| [(m, Quantization::Sq8), (m, Quantization::RaBitQ)])
        {
            for vectors in [Row::F32(&data), Row::F16(&halves)] {
                let bytes = insert::encode(SegmentId(1), metric, dims, &keys, vectors);
                let binlog = InsertBinlog::decode("o", &bytes).unwrap().into_owned();
                let open = |quantization| {
                    let params = HnswParams { quantization, ..HnswParams::default() };
                    let index = SegmentIndex::build(&binlog, params, &AtomicBool::new(false)).unwrap();
                    LoadedSegment::new(binlog.clone(), Some(index), deleted.clone())
                };
                let (coded, plain) = (open(quantization), open(Quantization::None));
                assert!(coded.codes().is_some() && plain.codes().is_none());
                let (mut coded_hits, mut plain_hits) = (0, 0);
                for q in (0..rows).step_by(53) {
                    let query: Vec<f32> = data[q * dims..(q + 1) * dims].iter().map(|x| x + 0.05).collect();
                    let mut exact: Vec<(f32, u64)> = (0..rows as u32)
                        .filter(|r| r % 7 != 0)
                        .map(|r| (metric.between(Row::F32(&query), binlog.vector(r as usize)), keys[r as usize]))
                        .collect();
                    exact.sort_by(|a, b| a.0.total_cmp(&b.0));
                    let truth: HashSet<u64> = exact[..10].iter().map(|e| e.1).collect();
                    let got = coded.search(Row::F32(&query), 10, 40, &|_| false).unwrap();
                    assert_eq!(got.len(), 10);
                    assert!(got.windows(2).all(|w| w[0].distance <= w[1].distance), "nearest first");
                    for hit in &got {
                        assert!(hit.row % 7 != 0, "a tombstone returned");
                        let d = metric.between(Row::F32(&query), binlog.vector(hit.row as usize));
                        assert_eq!(hit.distance, d, "exact distances");
                    }
                    coded_hits += got.iter().filter(|h| truth.contains(&h.key)).count();
                    plain_hits += plain
                        .search(Row::F32(&query), 10, 40, &|_| false)
                        .unwrap()
                        .iter()
                        .filter(|h| truth.contains(&h.key))
                        .count();
                }
                let queries = rows.div_ceil(53) as f64 * 10.0;
                let (coded, plain) = (coded_hits as f64 / queries, plain_hits as f64 / queries);
                assert!(
                    coded >= plain - 0.005,
                    "{metric:?} {quantization:?} {:?}: {coded} with codes, {plain} without",
                    vectors.element()
                );
            }
        }
    }

    /// A bit index (`bit_hamming_ops`, `bit_jaccard_ops`): binary-quantized
    /// clustered rows, a graph built on the bits as stored. Distances are
    /// integers for Hamming, so ties are many: a hit counts when its
    /// distance is within the exact 10th nearest's.
    #[test]
    fn bit_segments_search_by_their_metric() {
        use crate::element::{Element, pack_bits};
        let (rows, dims) = (4000, 256);
        let floats = crate::synthetic::gaussian_mixture(rows, dims, 40, 0.3, 5);
        let quantize = |r: &[f32]| pack_bits(&r.iter().map(|x| *x > 0.0).collect::<Vec<_>>());
        let bits: Vec<u8> = floats.chunks(dims).flat_map(quantize).collect();
        let keys: Vec<u64> = (0..rows as u64).collect();
        for metric in Metric::BITS {
            let row = Row::Bit { bits: &bits, len: 8 * bits.len() };
            let bytes = insert::encode(SegmentId(1), metric, dims, &keys, row);
            let binlog = InsertBinlog::decode("o", &bytes).unwrap().into_owned();
            assert_eq!(binlog.element(), Element::Bit);
            let index = SegmentIndex::build(&binlog, HnswParams::default(), &AtomicBool::new(false)).unwrap();
            let segment = LoadedSegment::new(binlog, Some(index), vec![]);
            let mut within = 0;
            for q in (0..rows).step_by(97) {
                let query = segment.binlog().unwrap().vector(q);
                let mut exact: Vec<f32> =
                    (0..rows).map(|r| metric.between(query, segment.binlog().unwrap().vector(r))).collect();
                exact.sort_by(f32::total_cmp);
                let got = segment.search(query, 10, 40, &|_| false).unwrap();
                assert_eq!(got.len(), 10);
                within += got.iter().filter(|h| h.distance <= exact[9]).count();
            }
            let recall = within as f64 / (10 * rows.div_ceil(97)) as f64;
            assert!(recall >= 0.95, "{metric:?}: {recall}");
        }
        // A bit metric over floats, or a float metric over bits, is no index.
        let row = Row::Bit { bits: &bits[..32], len: 256 };
        let bytes = insert::encode(SegmentId(1), Metric::L2, dims, &keys[..1], row);
        let binlog = InsertBinlog::decode("o", &bytes).unwrap();
        assert!(SegmentIndex::build(&binlog, HnswParams::default(), &AtomicBool::new(false)).is_err());
    }

    #[test]
    fn ef_is_split_across_segments_by_their_rows() {
        assert_eq!(segment_ef(40, 100_000, 100_000, 10), 40, "one segment: the whole budget");
        assert_eq!(segment_ef(40, 50_000, 100_000, 10), 30, "half the rows: half, and the slack");
        assert_eq!(segment_ef(40, 12_500, 100_000, 10), 10, "an eighth: the floor");
        assert_eq!(segment_ef(200, 12_500, 100_000, 10), 38);
        assert_eq!(segment_ef(5, 100, 100, 10), 10, "never below the floor");
        assert_eq!(segment_ef(40, 0, 0, 10), 10);
        assert_eq!(segment_ef(40, 1_000, 100_000, 0), 1, "a floor of 0 is 1");
    }

    /// A segment of `rows` rows around `query` (keys from 100,000), with its
    /// graph, and the keys of the query's ten nearest: all of them in it.
    fn near_segment(rows: usize, query: &[f32], rng: &mut Rng) -> (Arc<LoadedSegment>, HashSet<u64>) {
        let near: Vec<f32> = (0..rows * DIMS).map(|i| query[i % DIMS] + 0.05 * rng.vector(1)[0]).collect();
        let keys: Vec<u64> = (100_000..100_000 + rows as u64).collect();
        let bytes = insert::encode(SegmentId(2), Metric::L2, DIMS, &keys, &near);
        let binlog = InsertBinlog::decode("o", &bytes).unwrap().into_owned();
        let index = SegmentIndex::build(&binlog, HnswParams::default(), &AtomicBool::new(false)).unwrap();
        let mut exact: Vec<(f32, u64)> =
            near.chunks_exact(DIMS).zip(&keys).map(|(v, k)| (Metric::L2.distance(query, v), *k)).collect();
        exact.sort_by(|a, b| a.0.total_cmp(&b.0));
        (Arc::new(LoadedSegment::new(binlog, Some(index), Vec::new())), exact[..10].iter().map(|e| e.1).collect())
    }

    /// How many of `want` a search over `segments` returns in its first ten,
    /// with widening at `widen_rank` (0: none).
    fn found(segments: &[Arc<LoadedSegment>], query: &[f32], want: &HashSet<u64>, widen_rank: usize) -> usize {
        let options = SearchOptions { first_k: 40, segment_widen_rank: widen_rank, ..SearchOptions::default() };
        let search = Search::new(query.to_vec().into(), PageHits::default(), segments.to_vec(), options);
        search.map(Result::unwrap).take(10).filter(|h| want.contains(&h.key)).count()
    }

    /// A query whose ten nearest rows are all in a small segment: its share
    /// of `ef` finds a few of them, the widening finds them all.
    #[test]
    fn a_segment_holding_the_nearest_rows_is_searched_wider() {
        let big = Arc::new(segment(1, 6000, 0, true, Vec::new()));
        let mut rng = Rng::new(9);
        let query = rng.vector(DIMS);
        let (small, want) = near_segment(600, &query, &mut rng);
        assert!(small.by_graph());
        assert_eq!(segment_ef(40, 600, 6600, SEGMENT_EF_FLOOR), 6, "the small segment's share");
        let segments = [big, small];
        assert_eq!(found(&segments, &query, &want, SEGMENT_WIDEN_RANK), 10);
        assert!(
            found(&segments, &query, &want, 0) <= 6,
            "without widening, the share bounds what the small segment gives"
        );
    }

    /// A segment searched by brute force reads every row anyway: it keeps
    /// the whole `ef`, not its share, and needs no widening.
    #[test]
    fn a_segment_searched_by_brute_force_keeps_the_whole_ef() {
        let big = Arc::new(segment(1, 6000, 0, true, Vec::new()));
        let mut rng = Rng::new(9);
        let query = rng.vector(DIMS);
        let (small, want) = near_segment(400, &query, &mut rng);
        assert!(!small.by_graph());
        assert_eq!(segment_ef(40, 400, 6400, SEGMENT_EF_FLOOR), SEGMENT_EF_FLOOR, "its share would be the floor");
        assert_eq!(found(&[big, small], &query, &want, 0), 10);
    }

    #[test]
    fn row_bits_count_each_row_once() {
        let mut set = RowBits::new(130);
        assert!(set.is_empty() && !set.contains(0) && !set.contains(500));
        for row in [0, 63, 64, 129, 64] {
            set.insert(row);
        }
        assert_eq!(set.len(), 4);
        assert!(set.contains(63) && set.contains(64) && set.contains(129) && !set.contains(1));
        // Tombstones repeated across delta binlogs, or past the rows, count once or not at all.
        let seg = segment(1, 100, 0, false, vec![5, 5, 7, 100, 4000]);
        assert_eq!((seg.deleted_rows(), seg.live_rows()), (2, 98));
    }

    #[test]
    fn merge_is_a_k_way_merge_by_distance() {
        let h =
            |s: u64, row: u32, d: f32| Hit { source: Source::Segment(SegmentId(s)), row, key: row as u64, distance: d };
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
        let pages = PageRows { dims: DIMS, keys: (20_000..20_050).collect(), vectors: rng.vector(50 * DIMS).into() };
        let query = rng.vector(DIMS);
        let options = SearchOptions {
            ef_search: 40,
            first_k: 10,
            max_approximate: usize::MAX,
            iterative: IterativeScan::Relaxed,
            ..SearchOptions::default()
        };
        let all: Vec<Hit> = Search::new(query.clone().into(), pages.hits(Metric::L2, Row::F32(&query)), segs, options)
            .map(Result::unwrap)
            .collect();

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

    /// The exact truth: every live row's key by distance, `keep` applied.
    fn brute_force(
        segs: &[Arc<LoadedSegment>],
        pages: &PageRows,
        query: &[f32],
        keep: &dyn Fn(u64) -> bool,
    ) -> Vec<(f32, u64)> {
        let mut all: Vec<(f32, u64)> = Vec::new();
        for s in segs {
            for row in (0..s.rows() as u32).filter(|r| !s.is_deleted(*r)) {
                all.push((
                    Metric::L2.between(Row::F32(query), s.binlog().unwrap().vector(row as usize)),
                    s.binlog().unwrap().keys()[row as usize],
                ));
            }
        }
        for (i, key) in pages.keys.iter().enumerate() {
            all.push((Metric::L2.between(Row::F32(query), pages.vectors.row(i, pages.dims)), *key));
        }
        all.retain(|(_, k)| keep(*k));
        all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        all
    }

    fn options(first_k: usize, max_approximate: usize, iterative: IterativeScan) -> SearchOptions {
        SearchOptions { first_k, max_approximate, iterative, ..SearchOptions::default() }
    }

    #[test]
    fn past_max_approximate_the_search_goes_on_exactly() {
        let segs = vec![Arc::new(segment(1, 100, 0, false, vec![]))];
        let query = vec![0.0; DIMS];
        let mut search = Search::new(
            query.clone().into(),
            PageHits::default(),
            segs.clone(),
            options(7, 30, IterativeScan::Relaxed),
        );
        let all: Vec<Hit> = search.by_ref().map(Result::unwrap).collect();
        assert_eq!(all.len(), 100, "the bound ends the approximate rounds, never the search");
        assert!(search.stats().exact && search.stats().rounds >= 1);
        assert!(search.exhausted(), "the exact tail ran out of rows: what follows is NULL rows");
        let truth = brute_force(&segs, &PageRows::new(Shape::f32(DIMS)), &query, &|_| true);
        let offered: HashSet<u64> = all.iter().take(30).map(|h| h.key).collect();
        let tail: Vec<u64> = all[30..].iter().map(|h| h.key).collect();
        let expected: Vec<u64> = truth.iter().map(|(_, k)| *k).filter(|k| !offered.contains(k)).collect();
        assert_eq!(tail, expected, "the exact tail is every remaining row, nearest first");
    }

    /// The reproduction: a filter keeping 2% of the rows, all of
    /// them the farthest from the query. An approximate search alone offers
    /// none of them; the exact tail finds exactly the rows a sequential scan
    /// returns.
    #[test]
    fn a_selective_filter_gets_the_rows_a_sequential_scan_gets() {
        let segs = vec![Arc::new(segment(1, 6000, 0, true, vec![])), Arc::new(segment(2, 3000, 10_000, false, vec![]))];
        let pages =
            PageRows { dims: DIMS, keys: (20_000..20_200).collect(), vectors: Rng::new(9).vector(200 * DIMS).into() };
        let far = |k: u64| k.is_multiple_of(50);
        let query = vec![30.0; DIMS];
        for iterative in [IterativeScan::Relaxed, IterativeScan::Strict] {
            let search = Search::new(
                query.clone().into(),
                pages.hits(Metric::L2, Row::F32(&query)),
                segs.clone(),
                options(40, 20_000, iterative),
            );
            let got: Vec<u64> = search.map(Result::unwrap).filter(|h| far(h.key)).take(10).map(|h| h.key).collect();
            let truth: Vec<u64> = brute_force(&segs, &pages, &query, &far).iter().take(10).map(|(_, k)| *k).collect();
            assert_eq!(got.len(), 10, "{iterative:?}: the LIMIT is filled");
            let got: HashSet<u64> = got.into_iter().collect();
            assert!(truth.iter().filter(|k| got.contains(k)).count() >= 9, "{iterative:?}: the sequential scan's rows");
        }
    }

    #[test]
    fn off_stops_after_the_first_round() {
        let segs = vec![Arc::new(segment(1, 5000, 0, true, vec![]))];
        let query = Rng::new(3).vector(DIMS);
        let mut search = Search::new(query.into(), PageHits::default(), segs, options(40, 20_000, IterativeScan::Off));
        assert_eq!(search.by_ref().count(), 40);
        assert!(!search.stats().exact);
        assert_eq!(search.stats().rounds, 1);
        assert!(!search.exhausted(), "4,960 rows were never offered");
    }

    #[test]
    fn strict_order_never_goes_back() {
        let segs = vec![Arc::new(segment(1, 5000, 0, true, vec![])), Arc::new(segment(2, 800, 10_000, false, vec![]))];
        let query = Rng::new(4).vector(DIMS);
        let mut search =
            Search::new(query.into(), PageHits::default(), segs, options(10, 20_000, IterativeScan::Strict));
        let all: Vec<Hit> = search.by_ref().map(Result::unwrap).collect();
        assert!(all.windows(2).all(|w| w[0].distance <= w[1].distance), "non-decreasing");
        assert_eq!(all.len() + search.stats().dropped, 5800, "every row offered or dropped for its order");
        assert!(search.exhausted());
    }

    #[test]
    fn an_unselective_search_stays_approximate() {
        // A LIMIT 10 with no filter takes the first round; nobody pays for
        // the exact tail.
        let segs = vec![Arc::new(segment(1, 20_000, 0, true, vec![]))];
        let query = Rng::new(6).vector(DIMS);
        let mut search = Search::new(query.into(), PageHits::default(), segs, SearchOptions::default());
        assert_eq!(search.by_ref().take(10).count(), 10);
        // The segment has codes: the 40 rows its walk kept are re-ranked.
        let stats =
            SearchStats { rounds: 1, exact: false, offered: 10, dropped: 0, reranked: 40, ..Default::default() };
        assert_eq!(search.stats(), stats);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        /// Any filter, any sizes: a filtered LIMIT gets as many rows as a
        /// sequential scan, every live row is offered exactly once, and once
        /// the approximate rounds are over the rows come in exact order.
        #[test]
        fn a_filtered_limit_is_filled_like_a_sequential_scan(
            rows in 1usize..6000, in_pages in 0usize..300, modulus in 1u64..400, limit in 1usize..50,
            seed in 0u64..1000,
        ) {
            let deleted = (0..rows as u32).step_by(7).collect();
            let segs = vec![Arc::new(segment(seed + 1, rows, 0, rows > BRUTE_FORCE_MAX_ROWS, deleted))];
            let keys = (100_000..100_000 + in_pages as u64).collect();
            let pages = PageRows { dims: DIMS, keys, vectors: Rng::new(seed).vector(in_pages * DIMS).into() };
            let query = Rng::new(seed + 7).vector(DIMS);
            let keep = |k: u64| k.is_multiple_of(modulus);
            let truth = brute_force(&segs, &pages, &query, &keep);
            // The search is lazy: the prefix a LIMIT takes is the prefix of all of it.
            let options = options(40, 2_000, IterativeScan::Relaxed);
            let page_hits = pages.hits(Metric::L2, Row::F32(&query));
            let hits: Vec<Hit> =
                Search::new(query.clone().into(), page_hits, segs.clone(), options).map(Result::unwrap).collect();
            proptest::prop_assert_eq!(hits.iter().filter(|h| keep(h.key)).take(limit).count(), truth.len().min(limit));
            let live = brute_force(&segs, &pages, &query, &|_| true).len();
            proptest::prop_assert_eq!(hits.len(), live, "every live row offered");
            proptest::prop_assert_eq!(hits.iter().map(|h| h.key).collect::<HashSet<_>>().len(), live, "none twice");
        }
    }

    #[test]
    fn nan_distances_sort_last() {
        let pages = PageRows { dims: 2, keys: vec![1, 2, 3], vectors: vec![0.0, 0.0, 1.0, 0.0, 0.0, 1.0].into() };
        let query = vec![1.0, 0.0];
        let hits: Vec<u64> = Search::new(
            query.clone().into(),
            pages.hits(Metric::Cosine, Row::F32(&query)),
            vec![],
            SearchOptions::default(),
        )
        .map(|h| h.unwrap().key)
        .collect();
        assert_eq!(hits, vec![2, 3, 1]);
    }
}
