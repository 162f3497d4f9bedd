//! A sealed segment of sparse rows as an inverted index, searched exactly.
//!
//! Milvus answers sparse vectors (SPLADE-style learned term weights) with
//! an inverted index, `SPARSE_INVERTED_INDEX`, not a graph: each dimension
//! that occurs keeps a posting list of the rows holding it and their values.
//! A query reads only the lists of its own dimensions, and the top k it
//! returns is exact: no row is missed, whatever the data.
//!
//! **Scores.** Every metric is searched as a score to maximise that is a
//! sum over the query's dimensions, plus a per-row term:
//!
//! | metric | rows stored | score of row x | distance |
//! |---|---|---|---|
//! | inner product | as given | q·x | -score |
//! | cosine | normalised | q·x̂ | 1 - score / \|q\| |
//! | L2 | as given | 2 q·x - \|x\|² | sqrt(\|q\|² - score) |
//!
//! **Pruning (MaxScore).** Each list knows its largest and least value, so
//! each query dimension has an upper bound on what it adds to any row's
//! score. The dimensions are ordered by that bound; once the k-th best score
//! so far (the threshold) reaches the sum of the smallest bounds, a row found
//! only in those lists cannot enter the top k, so rows are taken from the
//! other lists alone, and the small lists are probed (by galloping search)
//! only for rows still able to beat the threshold. This is Turtle and
//! Flood's MaxScore, as Lucene and PISA run it document at a time; the
//! answer is the one an exhaustive scan gives.
//!
//! **Accumulating.** When the query's lists are long (more postings than
//! [`ACCUMULATE_ABOVE`] per row of the segment: its dimensions are the
//! frequent ones), MaxScore prunes little and pays its row-by-row merge on
//! every row, so the search instead adds each list in turn into one score
//! per row (term at a time) and offers the rows it touched. Under L2 the
//! per-row term leaves MaxScore nothing to prune, so L2 always accumulates.
//! Both walks give the same answer.
//!
//! **Rows no list of the query holds** have a score of their own: 0 (inner
//! product, cosine) or -|x|² (L2). When the overlapping rows leave room in
//! the top k for such a score, the search adds the best of them: for L2 the
//! smallest norms (a list of rows by norm is kept), otherwise any (the
//! lowest row numbers). A row of no entries has no direction: under cosine
//! its distance is NaN, which sorts after every number, as Postgres sorts
//! it.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::distance::Metric;
use crate::sparse::Sparse;

/// The metrics an inverted segment answers.
pub fn supports(metric: Metric) -> bool {
    matches!(metric, Metric::L2 | Metric::InnerProduct | Metric::Cosine)
}

/// One segment's inverted index, its arrays borrowed from a mapped file or
/// owned after a build.
#[derive(Debug, Clone, PartialEq)]
pub struct Inverted<'a> {
    pub(crate) metric: Metric,
    pub(crate) rows: usize,
    /// The dimensions that occur, ascending.
    pub(crate) dims: Cow<'a, [u32]>,
    /// Dimension `dims[t]`'s postings are `starts[t]..starts[t + 1]`.
    pub(crate) starts: Cow<'a, [u32]>,
    /// Each list's largest and least value.
    pub(crate) list_max: Cow<'a, [f32]>,
    pub(crate) list_min: Cow<'a, [f32]>,
    /// Postings: row numbers ascending within a list, and their values.
    pub(crate) posting_rows: Cow<'a, [u32]>,
    pub(crate) posting_values: Cow<'a, [f32]>,
    /// Each row's |x|² as given (before any normalisation).
    pub(crate) norms: Cow<'a, [f32]>,
    /// Row numbers by |x|² ascending (ties by row number).
    pub(crate) by_norm: Cow<'a, [u32]>,
}

/// A hit: a row of the segment and its distance under the metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub row: u32,
    pub distance: f32,
}

/// What a search did, for EXPLAIN and the benches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InvertedStats {
    /// Rows whose score was computed.
    pub scored: u64,
    /// Postings read or skipped over by the query's lists.
    pub postings: u64,
}

impl Inverted<'static> {
    /// Builds the index of `rows` (row i is the segment's row i), each of
    /// checked entries (`crate::sparse`). Panics on a metric it does not
    /// answer ([`supports`]).
    pub fn build<'r>(metric: Metric, rows: impl IntoIterator<Item = Sparse<'r>>) -> Self {
        assert!(supports(metric), "no inverted index under {metric:?}");
        let mut norms = Vec::new();
        let mut entries: Vec<(u32, u32, f32)> = Vec::new();
        for (row, v) in rows.into_iter().enumerate() {
            let norm = v.values.iter().fold(0.0f64, |s, &x| s + x as f64 * x as f64);
            norms.push(norm as f32);
            let scale = if metric == Metric::Cosine && norm > 0.0 { 1.0 / norm.sqrt() } else { 1.0 };
            for (&i, &x) in v.indices.iter().zip(v.values) {
                let x = (x as f64 * scale) as f32;
                if x != 0.0 {
                    entries.push((i as u32, row as u32, x));
                }
            }
        }
        assert!(entries.len() < u32::MAX as usize, "postings fit u32 offsets");
        // Rows were read in order, so a stable sort by dimension keeps each
        // list's rows ascending.
        entries.sort_by_key(|e| e.0);
        let (mut dims, mut starts, mut list_max, mut list_min) = (vec![], vec![], vec![], vec![]);
        for (at, &(dim, _, x)) in entries.iter().enumerate() {
            if dims.last() != Some(&dim) {
                dims.push(dim);
                starts.push(at as u32);
                list_max.push(x);
                list_min.push(x);
            } else {
                let t = dims.len() - 1;
                list_max[t] = list_max[t].max(x);
                list_min[t] = list_min[t].min(x);
            }
        }
        starts.push(entries.len() as u32);
        let mut by_norm: Vec<u32> = (0..norms.len() as u32).collect();
        by_norm.sort_by(|&a, &b| norms[a as usize].total_cmp(&norms[b as usize]).then(a.cmp(&b)));
        Inverted {
            metric,
            rows: norms.len(),
            dims: dims.into(),
            starts: starts.into(),
            list_max: list_max.into(),
            list_min: list_min.into(),
            posting_rows: entries.iter().map(|e| e.1).collect::<Vec<_>>().into(),
            posting_values: entries.iter().map(|e| e.2).collect::<Vec<_>>().into(),
            norms: norms.into(),
            by_norm: by_norm.into(),
        }
    }
}

/// How a search walks the query's lists; [`Inverted::search`] picks one,
/// [`Inverted::search_by`] is told (the bench times both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walk {
    /// Row by row, in row order, pruning (MaxScore).
    MaxScore,
    /// List by list into a score per row: every posting read once, no
    /// pruning, no per-row bookkeeping.
    Accumulate,
}

/// A query whose lists hold more postings than this many per row of the
/// segment is answered by [`Walk::Accumulate`]: over long lists MaxScore
/// prunes little and pays its row-by-row merge for every row. Under L2 the
/// per-row term -|x|² leaves it nothing to prune, so L2 always accumulates.
/// Measured on 100k SPLADE-like rows (`--bench inverted`; docs/benchmarks.md,
/// "Constants and the measurements behind them"): MaxScore wins below
/// about 2 postings a row, accumulating above, by more the longer the
/// lists.
pub const ACCUMULATE_ABOVE: usize = 2;

/// A bound widened past the rounding of a sum of a few dozen f32 terms,
/// so that no row whose computed score reaches the threshold is pruned.
fn loose(bound: f32) -> f32 {
    bound + bound.abs() * 1e-5
}

/// A query dimension's cursor over its posting list.
struct Cursor<'s> {
    weight: f32,
    /// The most this dimension adds to any row's score.
    bound: f32,
    rows: &'s [u32],
    values: &'s [f32],
    at: usize,
}

impl Cursor<'_> {
    fn row(&self) -> u32 {
        self.rows.get(self.at).copied().unwrap_or(u32::MAX)
    }

    /// Moves to the first posting at or after `row` (galloping, then a
    /// binary search), counting what it passed.
    fn seek(&mut self, row: u32, stats: &mut InvertedStats) {
        let start = self.at;
        let mut step = 1;
        let mut hi = self.at;
        while hi < self.rows.len() && self.rows[hi] < row {
            self.at = hi + 1;
            hi += step;
            step *= 2;
        }
        let end = hi.min(self.rows.len());
        if self.at < end {
            self.at += self.rows[self.at..end].partition_point(|&r| r < row);
        }
        stats.postings += (self.at - start) as u64;
    }
}

/// A scored row in the top-k heap: the heap's top is the worst kept.
#[derive(Clone, Copy, PartialEq)]
struct Scored {
    score: f32,
    row: u32,
}

impl Eq for Scored {}

impl Ord for Scored {
    /// Worse is greater: a lower score, then (for equal scores) a higher
    /// row number, so ties keep the lowest rows, as a scan in row order.
    fn cmp(&self, other: &Self) -> Ordering {
        other.score.total_cmp(&self.score).then(self.row.cmp(&other.row))
    }
}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The best `k` scores seen.
struct TopK {
    k: usize,
    heap: BinaryHeap<Scored>,
}

impl TopK {
    fn threshold(&self) -> f32 {
        if self.heap.len() < self.k { f32::NEG_INFINITY } else { self.heap.peek().expect("k > 0").score }
    }

    /// Whether `s` would enter: asked before `skip`, which a search
    /// through SQL pays a lookup for (the rows already offered, the
    /// tombstones), so that only rows that could enter pay it.
    fn admits(&self, s: Scored) -> bool {
        self.heap.len() < self.k || s < *self.heap.peek().expect("k > 0")
    }

    fn offer(&mut self, s: Scored) {
        if self.heap.len() < self.k {
            self.heap.push(s);
        } else if s < *self.heap.peek().expect("k > 0") {
            self.heap.pop();
            self.heap.push(s);
        }
    }
}

impl<'a> Inverted<'a> {
    pub fn metric(&self) -> Metric {
        self.metric
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The postings of dimension `dim`, if any row holds it.
    fn list(&self, dim: u32) -> Option<(&[u32], &[f32])> {
        let t = self.dims.binary_search(&dim).ok()?;
        let (a, b) = (self.starts[t] as usize, self.starts[t + 1] as usize);
        Some((&self.posting_rows[a..b], &self.posting_values[a..b]))
    }

    /// The score of a row with no entry in the query's lists.
    fn lone_score(&self, row: u32) -> f32 {
        if self.metric == Metric::L2 { -self.norms[row as usize] } else { 0.0 }
    }

    /// The exact `k` nearest rows to `query` (same dimensions as the rows,
    /// checked by the caller), nearest first, rows for which `skip` holds
    /// left out (deleted rows). Equal distances come in row order. Over a
    /// file decoded without its body verified, damage gives wrong answers
    /// at worst, never a panic or a row beyond the segment.
    pub fn search(&self, query: Sparse, k: usize, skip: impl Fn(u32) -> bool) -> (Vec<Hit>, InvertedStats) {
        let postings: usize = query.indices.iter().filter_map(|&d| self.list(d as u32)).map(|(r, _)| r.len()).sum();
        let walk = if self.metric == Metric::L2 || postings > self.rows * ACCUMULATE_ABOVE {
            Walk::Accumulate
        } else {
            Walk::MaxScore
        };
        self.search_by(walk, query, k, &skip)
    }

    /// [`Self::search`] walking the lists as `walk` says: the same answer
    /// either way.
    pub fn search_by(
        &self,
        walk: Walk,
        query: Sparse,
        k: usize,
        skip: &dyn Fn(u32) -> bool,
    ) -> (Vec<Hit>, InvertedStats) {
        let mut stats = InvertedStats::default();
        if k == 0 || self.rows == 0 {
            return (Vec::new(), stats);
        }
        let query_norm = query.values.iter().fold(0.0f64, |s, &x| s + x as f64 * x as f64);
        let mut top = TopK { k, heap: BinaryHeap::with_capacity(k + 1) };
        // Under Accumulate, each row's sum over the query's lists.
        let sums = match walk {
            Walk::MaxScore => {
                self.max_score(query, &mut top, &mut stats, skip);
                None
            }
            Walk::Accumulate => Some(self.accumulate(query, &mut top, &mut stats, skip)),
        };
        let lone_bound = self.lone_bound();
        // Rows in none of the query's lists, where they could still enter.
        if top.heap.len() < k || top.threshold() <= lone_bound {
            let overlaps = |row: u32| match &sums {
                Some(sums) => sums[row as usize] != 0.0,
                None => query
                    .indices
                    .iter()
                    .any(|&dim| self.list(dim as u32).is_some_and(|(rows, _)| rows.binary_search(&row).is_ok())),
            };
            let lone: Box<dyn Iterator<Item = u32>> = match self.metric {
                Metric::L2 => Box::new(self.by_norm.iter().copied()),
                _ => Box::new(0..self.rows as u32),
            };
            let mut added = 0;
            for row in lone.filter(|&r| (r as usize) < self.rows) {
                let s = Scored { score: self.lone_score(row), row };
                if added == k || (top.heap.len() == k && s > *top.heap.peek().expect("k > 0")) {
                    break;
                }
                if skip(row) || overlaps(row) || (self.metric == Metric::Cosine && self.norms[row as usize] == 0.0) {
                    continue;
                }
                stats.scored += 1;
                top.offer(s);
                added += 1;
            }
        }
        let mut hits: Vec<Hit> = top
            .heap
            .into_sorted_vec()
            .into_iter()
            .map(|s| Hit { row: s.row, distance: self.distance(s.score, query_norm) })
            .collect();
        // Under cosine a row of no entries is at NaN, after every number.
        if self.metric == Metric::Cosine && hits.len() < k {
            let empty = (0..self.rows as u32).filter(|&r| self.norms[r as usize] == 0.0 && !skip(r));
            hits.extend(empty.take(k - hits.len()).map(|row| Hit { row, distance: f32::NAN }));
        }
        (hits, stats)
    }

    /// The most the per-row term adds (L2: -|x|², at most -min |x|²).
    fn lone_bound(&self) -> f32 {
        match (self.metric, self.by_norm.first()) {
            (Metric::L2, Some(&row)) => -self.norms.get(row as usize).copied().unwrap_or(0.0),
            _ => 0.0,
        }
    }

    /// Every row the query's lists hold, scored by adding list after list
    /// into one sum per row of the segment, then offered. Returns the sums.
    /// A row whose sum is 0 is left to the rows in none of the lists: its
    /// score is theirs (0, or -|x|² under L2), and so is where it ranks.
    /// (Keeping no separate mark of the rows touched spares a store and a
    /// bounds check a posting: measured through SQL, docs/benchmarks.md.)
    fn accumulate(
        &self,
        query: Sparse,
        top: &mut TopK,
        stats: &mut InvertedStats,
        skip: &dyn Fn(u32) -> bool,
    ) -> Vec<f32> {
        let scale = if self.metric == Metric::L2 { 2.0 } else { 1.0 };
        let mut sums = vec![0.0f32; self.rows];
        for (&dim, &w) in query.indices.iter().zip(query.values) {
            let Some((rows, values)) = self.list(dim as u32) else { continue };
            let weight = w * scale;
            for (&row, &x) in rows.iter().zip(values) {
                // A damaged file's row beyond the segment is passed over.
                if let Some(sum) = sums.get_mut(row as usize) {
                    *sum += weight * x;
                }
            }
            stats.postings += rows.len() as u64;
        }
        for (row, &sum) in sums.iter().enumerate() {
            if sum != 0.0 {
                stats.scored += 1;
                let s = Scored { score: sum + self.lone_score(row as u32), row: row as u32 };
                if top.admits(s) && !skip(row as u32) {
                    top.offer(s);
                }
            }
        }
        sums
    }

    /// The rows the query's lists hold, taken in row order from the lists
    /// that can still matter and scored only while they can enter (see the
    /// module's doc).
    fn max_score(&self, query: Sparse, top: &mut TopK, stats: &mut InvertedStats, skip: &dyn Fn(u32) -> bool) {
        let scale = if self.metric == Metric::L2 { 2.0 } else { 1.0 };
        let mut cursors: Vec<Cursor> = query
            .indices
            .iter()
            .zip(query.values)
            .filter_map(|(&dim, &w)| {
                let (rows, values) = self.list(dim as u32)?;
                let t = self.dims.binary_search(&(dim as u32)).expect("listed");
                let weight = w * scale;
                let bound = loose((weight * self.list_max[t]).max(weight * self.list_min[t]));
                Some(Cursor { weight, bound, rows, values, at: 0 })
            })
            .collect();
        cursors.sort_by(|a, b| a.bound.total_cmp(&b.bound));
        // prefix[i]: the bounds of cursors 0..=i together.
        let prefix: Vec<f32> = cursors
            .iter()
            .scan(0.0f32, |s, c| {
                *s += c.bound.max(0.0);
                Some(*s)
            })
            .collect();
        let lone_bound = self.lone_bound();
        // Cursors below `essential` are probed, never walked.
        let mut essential = 0;
        loop {
            let threshold = top.threshold();
            while essential < cursors.len() && prefix[essential] + lone_bound <= threshold {
                essential += 1;
            }
            let Some(row) = cursors[essential..].iter().map(Cursor::row).min().filter(|&r| r != u32::MAX) else {
                break;
            };
            let mut score = 0.0;
            for c in &mut cursors[essential..] {
                if c.row() == row {
                    score += c.weight * c.values[c.at];
                    c.at += 1;
                    stats.postings += 1;
                }
            }
            // A damaged file's row beyond the segment is passed over.
            if row as usize >= self.rows {
                continue;
            }
            score += self.lone_score(row);
            for i in (0..essential).rev() {
                if score + prefix[i] <= threshold {
                    break;
                }
                let c = &mut cursors[i];
                c.seek(row, stats);
                if c.row() == row {
                    score += c.weight * c.values[c.at];
                }
            }
            stats.scored += 1;
            let s = Scored { score, row };
            if top.admits(s) && !skip(row) {
                top.offer(s);
            }
        }
    }

    /// A score as the metric's distance.
    fn distance(&self, score: f32, query_norm: f64) -> f32 {
        match self.metric {
            Metric::L2 => ((query_norm - score as f64).max(0.0)).sqrt() as f32,
            Metric::Cosine => {
                if query_norm == 0.0 {
                    f32::NAN
                } else {
                    (1.0 - (score as f64 / query_norm.sqrt()).clamp(-1.0, 1.0)) as f32
                }
            }
            _ => -score,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sparse::{self, SparseVec};
    use proptest::prelude::*;

    /// The exact answer by computing every distance, as pgvector would.
    fn brute_force(
        metric: Metric,
        rows: &[SparseVec],
        q: &SparseVec,
        k: usize,
        skip: impl Fn(u32) -> bool,
    ) -> Vec<f32> {
        let mut d: Vec<f32> = rows
            .iter()
            .enumerate()
            .filter(|(i, _)| !skip(*i as u32))
            .map(|(_, r)| match metric {
                Metric::L2 => (sparse::l2_squared(r.view(), q.view()) as f64).sqrt() as f32,
                Metric::InnerProduct => -sparse::inner_product(r.view(), q.view()),
                _ => sparse::cosine_distance(r.view(), q.view()) as f32,
            })
            .collect();
        d.sort_by(f32::total_cmp);
        d.truncate(k);
        d
    }

    fn sv(dim: usize, entries: &[(i32, f32)]) -> SparseVec {
        SparseVec { dim, indices: entries.iter().map(|e| e.0).collect(), values: entries.iter().map(|e| e.1).collect() }
    }

    #[test]
    fn lists_hold_each_dimension_rows_ascending() {
        let rows = [sv(10, &[(1, 1.0), (4, 2.0)]), sv(10, &[]), sv(10, &[(4, -1.0), (9, 3.0)])];
        let index = Inverted::build(Metric::InnerProduct, rows.iter().map(|r| r.view()));
        assert_eq!(&*index.dims, &[1, 4, 9]);
        assert_eq!(&*index.starts, &[0, 1, 3, 4]);
        assert_eq!(&*index.posting_rows, &[0, 0, 2, 2]);
        assert_eq!((&*index.list_max, &*index.list_min), (&[1.0, 2.0, 3.0][..], &[1.0, -1.0, 3.0][..]));
        assert_eq!(&*index.norms, &[5.0, 0.0, 10.0]);
        assert_eq!(&*index.by_norm, &[1, 0, 2]);
    }

    #[test]
    fn rows_outside_the_query_lists_fill_the_top_k_when_they_rank() {
        // Every overlapping row scores below zero: the rows the query does
        // not touch (score 0) rank first under inner product.
        let rows = [sv(4, &[(0, 1.0)]), sv(4, &[(1, 1.0)]), sv(4, &[(0, 2.0)]), sv(4, &[(3, 0.5)])];
        let q = sv(4, &[(0, -1.0)]);
        let index = Inverted::build(Metric::InnerProduct, rows.iter().map(|r| r.view()));
        let (hits, _) = index.search(q.view(), 3, |_| false);
        assert_eq!(hits.iter().map(|h| h.row).collect::<Vec<_>>(), vec![1, 3, 0]);
        assert_eq!(hits.iter().map(|h| h.distance).collect::<Vec<_>>(), vec![0.0, 0.0, 1.0]);
        // Under L2 the untouched rows come by their norms.
        let index = Inverted::build(Metric::L2, rows.iter().map(|r| r.view()));
        let (hits, _) = index.search(q.view(), 2, |_| false);
        assert_eq!(hits.iter().map(|h| h.row).collect::<Vec<_>>(), vec![3, 1]);
    }

    #[test]
    fn cosine_puts_rows_of_no_entries_last_and_skips_deleted_rows() {
        let rows = [sv(3, &[]), sv(3, &[(0, 2.0)]), sv(3, &[(0, 1.0), (1, 1.0)]), sv(3, &[(2, 1.0)])];
        let index = Inverted::build(Metric::Cosine, rows.iter().map(|r| r.view()));
        let (hits, _) = index.search(sv(3, &[(0, 3.0)]).view(), 4, |_| false);
        assert_eq!(hits.iter().map(|h| h.row).collect::<Vec<_>>(), vec![1, 2, 3, 0]);
        assert!(hits[0].distance.abs() < 1e-6 && hits[3].distance.is_nan());
        let (hits, _) = index.search(sv(3, &[(0, 3.0)]).view(), 4, |r| r == 1);
        assert_eq!(hits.iter().map(|h| h.row).collect::<Vec<_>>(), vec![2, 3, 0]);
    }

    #[test]
    fn pruning_scores_fewer_rows_than_the_query_lists_hold() {
        let rows = crate::synthetic::splade_like(5_000, 3_000, 60, 3);
        let queries = crate::synthetic::splade_like(20, 3_000, 12, 4);
        let index = Inverted::build(Metric::InnerProduct, rows.iter().map(|r| r.view()));
        let (mut scored, mut held) = (0, 0);
        for q in &queries {
            let (hits, stats) = index.search_by(Walk::MaxScore, q.view(), 10, &|_| false);
            let want = brute_force(Metric::InnerProduct, &rows, q, 10, |_| false);
            assert_eq!(hits.len(), 10);
            for (h, w) in hits.iter().zip(&want) {
                assert!((h.distance - w).abs() <= 1e-4 * w.abs().max(1.0), "{} vs {w}", h.distance);
            }
            scored += stats.scored;
            held += rows.iter().filter(|r| r.indices.iter().any(|i| q.indices.contains(i))).count() as u64;
        }
        // An exhaustive walk of the lists scores every row they hold;
        // MaxScore leaves a fifth of them or more unscored here.
        assert!(scored * 5 < held * 4, "{scored} rows scored of {held} the lists hold");
    }

    fn data() -> impl Strategy<Value = (Vec<SparseVec>, SparseVec, usize, u64)> {
        let row = |dim: usize| {
            prop::collection::btree_map(0..dim as i32, prop_oneof![-4i8..=4i8, 1i8..=4i8], 0..=dim.min(6)).prop_map(
                move |m| {
                    let entries: Vec<(i32, f32)> =
                        m.into_iter().filter(|e| e.1 != 0).map(|(i, x)| (i, x as f32 * 0.25)).collect();
                    SparseVec {
                        dim,
                        indices: entries.iter().map(|e| e.0).collect(),
                        values: entries.iter().map(|e| e.1).collect(),
                    }
                },
            )
        };
        (2usize..24).prop_flat_map(move |dim| {
            // Up to 300 rows: lists of several blocks.
            (prop::collection::vec(row(dim), 0..300), row(dim), 1usize..12, any::<u64>())
        })
    }

    proptest! {
        #[test]
        fn search_equals_brute_force((rows, q, k, deleted) in data()) {
            let skip = |r: u32| deleted >> (r % 64) & 1 == 1 && r.is_multiple_of(3);
            for (metric, walk) in [Metric::InnerProduct, Metric::L2, Metric::Cosine]
                .into_iter()
                .flat_map(|m| [(m, Walk::MaxScore), (m, Walk::Accumulate)])
            {
                let index = Inverted::build(metric, rows.iter().map(|r| r.view()));
                let (hits, _) = index.search_by(walk, q.view(), k, &skip);
                let want = brute_force(metric, &rows, &q, k, skip);
                prop_assert_eq!(hits.len(), want.len(), "{:?} {:?}", metric, walk);
                for (h, w) in hits.iter().zip(&want) {
                    prop_assert!(
                        (h.distance.is_nan() && w.is_nan()) || (h.distance - w).abs() <= 1e-5,
                        "{:?}: {:?} against {:?}", metric, hits, want
                    );
                    prop_assert!(!skip(h.row));
                }
            }
        }
    }
}
