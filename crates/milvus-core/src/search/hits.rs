//! What a search returns and the lists it merges: hits, the top k of a
//! source, the rows held in pages, sets of rows a bit each; and the recall
//! of an answer against the exact one.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::hash::Hash;

use crate::distance::Metric;
use crate::element::{Row, Shape, Vectors};
use crate::filter::{Bitset, Column, ColumnType, Value, WrongType};
use crate::segment::SegmentId;

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

    /// The key of the row pushed `row`-th.
    pub fn key(&self, row: usize) -> u64 {
        self.keys[row]
    }

    /// The distance of the row pushed `row`-th.
    pub fn distance(&self, row: usize) -> f32 {
        self.distances[row]
    }

    /// `(key, distance)` of every row, in the order pushed.
    pub fn iter(&self) -> impl Iterator<Item = (u64, f32)> + '_ {
        self.keys.iter().copied().zip(self.distances.iter().copied())
    }
}

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

/// A hit ordered by [`Hit::order`], for the heaps of [`top_k`] and
/// [`merge`].
struct ByOrder(Hit);

impl PartialEq for ByOrder {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for ByOrder {}
impl PartialOrd for ByOrder {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for ByOrder {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.order(&o.0)
    }
}

/// The `k` nearest of `candidates` by exact distance (NaN last), sorted:
/// a bounded heap, so a brute-force pass over thousands of rows keeps `k`
/// hits, never all of them (collecting and partitioning every row's hit
/// was a tenth of a streaming query's profile).
fn top_k(candidates: impl IntoIterator<Item = Hit>, k: usize) -> Vec<Hit> {
    let mut top = TopK::new(k);
    candidates.into_iter().for_each(|hit| top.push(hit));
    top.into_sorted()
}

/// [`top_k`], fed one hit at a time.
pub(super) struct TopK {
    k: usize,
    /// A max-heap: its top is the farthest hit kept.
    heap: BinaryHeap<ByOrder>,
}

impl TopK {
    pub(super) fn new(k: usize) -> Self {
        TopK { k, heap: BinaryHeap::with_capacity(k + 1) }
    }

    #[inline]
    pub(super) fn push(&mut self, hit: Hit) {
        if self.heap.len() < self.k {
            self.heap.push(ByOrder(hit));
        } else if let Some(mut top) = self.heap.peek_mut()
            && hit.order(&top.0) == Ordering::Less
        {
            *top = ByOrder(hit);
        }
    }

    pub(super) fn into_sorted(self) -> Vec<Hit> {
        let mut hits: Vec<Hit> = self.heap.into_iter().map(|f| f.0).collect();
        hits.sort_by(Hit::order);
        hits
    }
}

/// Rows held in index pages, with their vectors row-major, and in an index
/// with filter columns each row's filter values (`crate::format::values`).
#[derive(Debug, Clone)]
pub struct PageRows {
    pub dims: usize,
    pub keys: Vec<u64>,
    pub vectors: Vectors<'static>,
    pub values: Vec<Vec<Value>>,
}

impl PageRows {
    pub fn new(shape: Shape) -> Self {
        PageRows { dims: shape.dims, keys: Vec::new(), vectors: Vectors::new(shape.element), values: Vec::new() }
    }

    pub fn push(&mut self, key: u64, vector: Row<'_>) {
        debug_assert_eq!(vector.len(), self.dims);
        self.keys.push(key);
        self.vectors.push(vector);
    }

    /// [`Self::push`] of a row of an index with filter columns.
    pub fn push_with(&mut self, key: u64, vector: Row<'_>, values: Vec<Value>) {
        self.push(key, vector);
        self.values.push(values);
    }

    /// The rows' filter columns, of `kinds` (the index's, in order): what a
    /// flush writes beside them, even of no row. None for an index without
    /// filter columns, whose rows have no values.
    pub fn columns(&self, kinds: &[ColumnType]) -> Result<Vec<Column>, WrongType> {
        if kinds.is_empty() {
            return Ok(Vec::new());
        }
        assert_eq!(self.values.len(), self.keys.len(), "every row of an index with filter columns has its values");
        kinds
            .iter()
            .enumerate()
            .map(|(c, kind)| {
                let column: Vec<Value> =
                    self.values.iter().map(|row| row.get(c).cloned().unwrap_or(Value::Null)).collect();
                Column::build(*kind, &column)
            })
            .collect()
    }

    /// Bytes the rows take: keys, vectors, and sparse rows' starts.
    pub fn bytes(&self) -> usize {
        let starts = if self.vectors.element().is_fixed() { 0 } else { 8 * self.keys.len() };
        8 * self.keys.len() + self.vectors.bytes().len() + starts
    }

    /// The rows' distances to `query`: what a search needs of them.
    pub fn hits(&self, metric: Metric, query: Row<'_>) -> PageHits {
        let mut hits = PageHits::default();
        for (i, key) in self.keys.iter().enumerate() {
            hits.push(*key, metric.between(query, self.vectors.row(i, self.dims)));
        }
        hits
    }
}

/// The `k` nearest of the rows held in pages, skipping those `skip` names
/// (by position).
pub(super) fn search_pages(pages: &PageHits, k: usize, skip: &dyn Fn(u32) -> bool) -> Vec<Hit> {
    let hits = pages.iter().enumerate().filter(|(i, _)| !skip(*i as u32)).map(|(i, (key, distance))| Hit {
        source: Source::Pages,
        row: i as u32,
        key,
        distance,
    });
    top_k(hits, k)
}

/// A set of row positions, a bit each ([`Bitset`]), and their count: what a
/// graph search asks about at every node it visits (tombstones, rows
/// already offered) costs no search and no hashing.
#[derive(Debug, Clone, Default)]
pub struct RowBits {
    rows: Bitset,
    count: usize,
}

impl RowBits {
    /// An empty set for rows `0..rows`.
    pub fn new(rows: usize) -> Self {
        RowBits { rows: Bitset::none(rows), count: 0 }
    }

    /// Whether `row` is in; a row past the set's is not.
    pub fn contains(&self, row: u32) -> bool {
        self.rows.contains(row as usize)
    }

    /// Adds `row` (within the set's rows); adding it twice counts once.
    pub fn insert(&mut self, row: u32) {
        if !self.contains(row) {
            self.rows.insert(row as usize);
            self.count += 1;
        }
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// Merges per-source lists, each sorted by distance, into one sorted list.
pub fn merge(lists: Vec<Vec<Hit>>, k: usize) -> Vec<Hit> {
    merge_lists(lists, k).into_iter().map(|(_, hit)| hit).collect()
}

/// The distance of the `k`-th nearest hit of all `lists`; infinite when
/// they hold fewer than `k`.
pub(super) fn kth_distance(lists: &[Vec<Hit>], k: usize) -> f32 {
    let mut all: Vec<f32> = lists.iter().flatten().map(|h| h.distance).collect();
    if k == 0 || all.len() < k {
        return f32::INFINITY;
    }
    *all.select_nth_unstable_by(k - 1, f32::total_cmp).1
}

/// [`merge`], each hit with the number of the list it came from.
pub(super) fn merge_lists(lists: Vec<Vec<Hit>>, k: usize) -> Vec<(usize, Hit)> {
    // Each list's head: (hit, list, position), reversed, so that the
    // max-heap gives the nearest first.
    let head = |hit: Hit, l: usize, i: usize| Reverse((ByOrder(hit), l, i));
    let mut heap: BinaryHeap<Reverse<(ByOrder, usize, usize)>> =
        lists.iter().enumerate().filter_map(|(l, list)| list.first().map(|h| head(*h, l, 0))).collect();
    let mut out = Vec::with_capacity(k.min(lists.iter().map(Vec::len).sum()));
    while let Some(Reverse((ByOrder(hit), l, i))) = heap.pop() {
        out.push((l, hit));
        if out.len() == k {
            break;
        }
        if let Some(next) = lists[l].get(i + 1) {
            heap.push(head(*next, l, i + 1));
        }
    }
    out
}

/// The share of `exact` (a multiset of rows) that `answer` holds, each row
/// of `answer` matching one of `exact` at most; `None` for an empty `exact`.
/// What `milvus_recall()` reports.
pub fn recall<T: Eq + Hash>(answer: &[T], exact: &[T]) -> Option<f64> {
    if exact.is_empty() {
        return None;
    }
    let mut unmatched: HashMap<&T, usize> = HashMap::new();
    for row in answer {
        *unmatched.entry(row).or_default() += 1;
    }
    let mut found = 0;
    for row in exact {
        if let Some(n @ 1..) = unmatched.get_mut(row) {
            *n -= 1;
            found += 1;
        }
    }
    Some(found as f64 / exact.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::recall;

    #[test]
    fn recall_is_the_share_of_the_exact_rows_found() {
        assert_eq!(recall(&[1, 2, 3, 4], &[1, 2, 3, 4]), Some(1.0));
        assert_eq!(recall(&[4, 3, 9, 8], &[1, 2, 3, 4]), Some(0.5), "order does not matter");
        assert_eq!(recall(&[1], &[1, 2, 3, 4]), Some(0.25), "a short answer misses rows");
        assert_eq!(recall(&[1, 1], &[1, 2]), Some(0.5), "a row returned twice counts once");
        assert_eq!(recall(&[1, 1], &[1, 1]), Some(1.0), "equal rows of the exact answer each count");
        assert_eq!(recall::<u32>(&[], &[]), None);
    }
}
