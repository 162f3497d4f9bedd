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
mod passing;
mod ranged;
mod segment;

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use crate::cache::CacheError;
use crate::element::Vectors;
use crate::filter::{Bitset, Filter, Plan};

pub use hits::{Hit, PageHits, PageRows, RowBits, Source, merge, recall};
use hits::{kth_distance, merge_lists, search_pages};
use passing::{Passing, SegmentPlans};
pub use ranged::{RangeReads, StoredRows};
pub use segment::{BRUTE_FORCE_MAX_ROWS, LoadedSegment, OpenError, RowsFrom, SegmentReads};

/// An approximate round that asks for `k` rows is an HNSW search with
/// `ef = k` in each segment; the rounds double, so all of them together
/// cost about twice the last. The exact tail costs one distance per live
/// row, read in order. Measured on 100k x 128 (docs/benchmarks.md,
/// "Constants and the measurements behind them"), a round costs a few
/// hundred times what the tail pays a row (the tail is memory bound), so
/// the rounds stop paying once `k` times a few hundred reaches the live
/// rows. This factor puts the switch there: at 100k rows a filter
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
/// Measured on 100k x 128 (`crates/milvus-core/benches/cross_segment.rs`;
/// docs/benchmarks.md, "Constants and the measurements behind them"): 8
/// segments searched by shares answer at about 3x the QPS of each searched
/// with the whole `ef`, at the recall of one segment. The rounds
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
/// against floors of 10 and 2 (docs/benchmarks.md, "Constants and the
/// measurements behind them"): 10 costs QPS on a stream's layout and on
/// many small segments for little recall; 2 loses recall, as a search of
/// `ef` 2 in a 3k-row graph often stops short of the segment's nearest
/// row, which widening cannot see.
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
    /// A filtered search's: segments whose statistics (or columns) left no
    /// row, rows the filter passed in all sources, and segment searches
    /// answered by measuring every passing row or by the graph walk.
    pub skipped: usize,
    pub matched: usize,
    pub exact_segments: usize,
    pub walked_segments: usize,
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
    /// A filtered search's passing rows, a set per source (as `offered`),
    /// tombstones taken out, and how many each holds.
    passing: Option<Passing>,
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
            passing: None,
            buffer: VecDeque::new(),
            phase: Phase::Approximate,
            last: f32::NEG_INFINITY,
            stats: SearchStats::default(),
        }
    }

    /// The search restricted to rows `filter` passes: a segment's by its
    /// filter columns (none read where its statistics exclude the filter),
    /// the pages' by `pages`, a bit per page row that the caller evaluated
    /// as it read them. Each segment then answers a round as Milvus'
    /// segcore does ([`Plan::choose`]): by measuring its passing rows when
    /// they are few, else by the graph walk that steps through rows the
    /// filter rejects but returns only passing ones, and that falls back to
    /// measuring when it comes back short. The exact tail holds passing rows
    /// only, so the search ends once every passing row is offered. The
    /// caller rechecks what it returns.
    pub fn filtered(mut self, filter: &Filter, pages: Bitset) -> Self {
        debug_assert_eq!(pages.len(), self.pages.len());
        let mut sets = vec![pages];
        for segment in &self.segments {
            let columns = segment.columns().len();
            let set = if filter.keys.iter().any(|k| k.column >= columns) {
                // A segment without the columns (none is written so): every
                // live row, for the caller's recheck to filter.
                let mut set = Bitset::all(segment.rows());
                set.retain(|row| !segment.is_deleted(row as u32));
                set
            } else if filter.excludes(segment.column_stats()) {
                self.stats.skipped += 1;
                Bitset::none(segment.rows())
            } else {
                let mut set = filter.matches(segment.columns(), segment.rows());
                set.retain(|row| !segment.is_deleted(row as u32));
                if set.is_empty() {
                    self.stats.skipped += 1;
                }
                set
            };
            sets.push(set);
        }
        let passing = Passing::new(sets, self.live_rows());
        self.stats.matched = passing.total();
        self.passing = Some(passing);
        self
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

    /// Whether a filter restricts it ([`Search::filtered`]).
    pub fn is_filtered(&self) -> bool {
        self.passing.is_some()
    }

    /// Rows held in pages that the search reads (its brute-force part).
    pub fn page_rows(&self) -> usize {
        self.pages.len()
    }

    /// The flushed segments it searches.
    pub fn segments(&self) -> usize {
        self.segments.len()
    }

    /// Rows the search may return across all sources: the live ones, or
    /// those of them the filter passes.
    fn total_rows(&self) -> usize {
        match &self.passing {
            Some(passing) => passing.total(),
            None => self.live_rows(),
        }
    }

    /// Live rows across all sources, passing a filter or not.
    fn live_rows(&self) -> usize {
        self.pages.len() + self.segments.iter().map(|s| s.live_rows()).sum::<usize>()
    }

    /// The rows of segment `i` a search may return: its live rows, or
    /// those of them the filter passes.
    fn segment_rows(&self, i: usize) -> usize {
        match &self.passing {
            Some(passing) => passing.count(i + 1),
            None => self.segments[i].live_rows(),
        }
    }

    /// Whether row `row` of `source` may be returned: not offered yet, and
    /// passing the filter, if any.
    fn open(&self, source: usize, row: u32) -> bool {
        !self.offered.contains(source, row) && self.passing.as_ref().is_none_or(|p| p.allows(source, row))
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
        let live = (0..self.segments.len()).map(|i| self.segment_rows(i)).sum::<usize>();
        // Brute force reads every row whatever it keeps, and so does a
        // filtered segment measuring its passing rows: they keep the whole `ef`.
        let efs = (0..self.segments.len())
            .map(|i| match self.plan(i, k) {
                Plan::Walk if self.segments[i].by_graph() => {
                    segment_ef(ef, self.segment_rows(i), live, self.options.segment_ef_floor)
                }
                _ => ef,
            })
            .collect();
        let (lists, reads, plans) = self.search_sources(k, ef, efs)?;
        if self.passing.is_some() {
            self.stats.exact_segments += plans.exact;
            self.stats.walked_segments += plans.walked;
        }
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
    ) -> Result<(Vec<Vec<Hit>>, SegmentReads, SegmentPlans), CacheError> {
        let mut reads = SegmentReads::default();
        let mut plans = SegmentPlans::default();
        let mut search = |i: usize, ef: usize| {
            let segment = &self.segments[i];
            let plan = self.plan(i, k);
            plans.count(plan);
            let hits = match plan {
                Plan::Skip => Vec::new(),
                Plan::Exact => {
                    let (hits, read) = segment.nearest_of(self.query.all(), k, self.unoffered(i + 1))?;
                    reads.by_range.add(read);
                    hits
                }
                Plan::Walk => {
                    let skip = |r| !self.open(i + 1, r);
                    let (hits, read) = segment.search_counted(self.query.all(), k.min(ef), ef, &skip)?;
                    reads.reranked += read.reranked;
                    reads.by_range.add(read.by_range);
                    hits
                }
            };
            Ok::<_, CacheError>(hits)
        };
        let mut lists = vec![search_pages(&self.pages, k, &|r| !self.open(0, r))];
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
        Ok((lists, reads, plans))
    }

    /// How segment `i` answers a round looking for `k` rows: by its graph
    /// (or brute force, below [`BRUTE_FORCE_MAX_ROWS`]) unless filtered.
    fn plan(&self, i: usize, k: usize) -> Plan {
        match &self.passing {
            None => Plan::Walk,
            Some(passing) if !self.segments[i].by_graph() => {
                if passing.count(i + 1) == 0 {
                    Plan::Skip
                } else {
                    Plan::Exact
                }
            }
            Some(passing) => Plan::choose(passing.count(i + 1), self.segments[i].rows(), k, passing.searched()),
        }
    }

    /// The exact tail: every row not yet offered (live, and passing the
    /// filter if there is one), by exact distance. (A segment whose rows
    /// are read by range reads them all here.)
    fn exact_tail(&self) -> Result<(BinaryHeap<Remaining>, RangeReads), CacheError> {
        let mut rows: Vec<Remaining> = Vec::with_capacity(self.total_rows().saturating_sub(self.offered.len()));
        let mut reads = RangeReads::default();
        for row in self.unoffered(0) {
            rows.push(Remaining { distance: self.pages.distance(row as usize), source: 0, row });
        }
        for (s, segment) in self.segments.iter().enumerate() {
            let source = s as u32 + 1;
            reads.add(segment.distances(self.query.all(), self.unoffered(s + 1), |row, distance| {
                rows.push(Remaining { distance, source, row })
            })?);
        }
        Ok((BinaryHeap::from(rows), reads))
    }

    /// The rows of `source` (0 the pages, `i + 1` the `i`-th segment) the
    /// search may still return, ascending: live, passing the filter if
    /// there is one, not offered yet.
    fn unoffered(&self, source: usize) -> Box<dyn Iterator<Item = u32> + '_> {
        let rows: Box<dyn Iterator<Item = u32>> = match (&self.passing, source) {
            (Some(passing), _) => Box::new(passing.rows(source)),
            (None, 0) => Box::new(0..self.pages.len() as u32),
            (None, s) => {
                let segment = &self.segments[s - 1];
                Box::new((0..segment.rows() as u32).filter(|r| !segment.is_deleted(*r)))
            }
        };
        Box::new(rows.filter(move |r| !self.offered.contains(source, *r)))
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
mod tests;
