//! A sealed segment's graph and codes: built, merged, stored.
//!
//! - **Build** from a segment's insert binlog with the crate's own builder
//!   ([`crate::graph::build`]): each row's node is its position in the
//!   binlog, so tombstones (positions) filter it directly. Rows go in in a
//!   fixed shuffled order, and a cancel flag is checked between chunks, so a
//!   build stays interruptible.
//! - **Merge** ([`SegmentIndex::build_seeded`]): a compaction's output keeps
//!   the largest input's graph, renumbered, its deleted rows cut out, and
//!   only the other rows are inserted into it.
//! - **Distances** are the metric's over the rows as stored (f32, f16 or
//!   bits: no widened copy), a NaN (cosine with a zero vector) counted as
//!   the farthest so that it never breaks the graph's ordering. Inner
//!   product is built as it is searched, by inner product, as pgvector
//!   builds it, its lists filled up to `m0` with the nearest candidates the
//!   heuristic pruned (HNSW's `keepPrunedConnections`): under inner product
//!   the heuristic alone keeps little more than a few rows of large norm
//!   per list. 0.1 reduced inner product to L2 instead (row `x` indexed as
//!   `[x, sqrt(M² - |x|²)]`): distances from a query to rows order the same,
//!   but that graph links rows by their L2 neighbourhoods on a sphere the
//!   query lies far from, and greedy search strands in it (`--bench
//!   ip_recall` measures both; docs/benchmarks.md).
//! - **Store** as flat arrays in an index file of our own
//!   ([`crate::format::index`], version 2), which searches read in place
//!   ([`crate::graph`]).
//! - **Files of 0.1** carry hnsw_rs' dump (version 1): `super::v0_1`
//!   reads them once and turns them into flat arrays too.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::distance::Metric;
use crate::element::{Element, Vectors};
use crate::error::{SqlError, SqlState};
use crate::format::FormatError;
use crate::format::index;
use crate::format::insert::InsertBinlog;
use crate::graph::FlatGraph;
use crate::graph::build::{Builder, PairDistance, Seed};
use crate::quant::{Codes, Quantization};
use crate::segment::SegmentId;

/// Graph parameters (the index's reloptions `m` and `ef_construction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HnswParams {
    /// Neighbours per node per layer (pgvector's `m`), 2..=100.
    pub m: usize,
    /// Candidate list size while building, at least `2 * m`.
    pub ef_construction: usize,
    /// The rows' codes the index file keeps beside the graph.
    pub quantization: Quantization,
}
impl Default for HnswParams {
    fn default() -> Self {
        HnswParams { m: 16, ef_construction: 64, quantization: Quantization::default() }
    }
}

impl HnswParams {
    /// Checks the parameters, with the reason when they are refused.
    pub fn validate(&self) -> Result<(), String> {
        if !(2..=100).contains(&self.m) {
            return Err(format!("m must be between 2 and 100, not {}", self.m));
        }
        if self.ef_construction < 2 * self.m || self.ef_construction > 1000 {
            return Err(format!(
                "ef_construction must be between 2 * m ({}) and 1000, not {}",
                2 * self.m,
                self.ef_construction
            ));
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("invalid HNSW parameters: {0}")]
    Params(String),
    #[error("index build cancelled")]
    Cancelled,
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error("index file of segment {segment}: {message}")]
    Io { segment: SegmentId, message: String },
}

impl SqlError for IndexError {
    fn sqlstate(&self) -> SqlState {
        match self {
            IndexError::Params(_) => SqlState::InvalidParameterValue,
            IndexError::Cancelled => SqlState::QueryCanceled,
            IndexError::Format(e) => e.sqlstate(),
            IndexError::Io { .. } => SqlState::IoError,
        }
    }
}

/// Rows inserted between two looks at the cancel flag.
const BUILD_CHUNK: usize = 2048;

/// A segment's HNSW graph, built here or converted from a 0.1 dump, and
/// its rows' codes.
pub struct SegmentIndex {
    pub segment: SegmentId,
    pub metric: Metric,
    pub(super) graph: FlatGraph<'static>,
    pub(super) codes: Option<Codes<'static>>,
}

/// Whether a graph under `metric` fills the lists the heuristic leaves
/// short with the nearest candidates it pruned ([`Builder::new`]'s `fill`):
/// under inner product, where the heuristic keeps a few rows of large norm
/// and little else, and under Hamming and Jaccard, whose distances take few
/// values, so that a node's candidates crowd at the same distances.
fn fills_lists(metric: Metric) -> bool {
    matches!(metric, Metric::InnerProduct | Metric::Hamming | Metric::Jaccard)
}

impl SegmentIndex {
    /// Builds the graph of a segment. `cancel` is checked between chunks.
    pub fn build(binlog: &InsertBinlog<'_>, params: HnswParams, cancel: &AtomicBool) -> Result<Self, IndexError> {
        Self::build_seeded(binlog, params, None, cancel)
    }

    /// Builds the graph of a segment starting from `seed` (a merge's
    /// largest input: see [`crate::graph::build`]), inserting only the rows
    /// the seed does not place; from scratch without a seed, or with one
    /// whose strides are not `params`'. `cancel` is checked between chunks.
    pub fn build_seeded(
        binlog: &InsertBinlog<'_>,
        params: HnswParams,
        seed: Option<&Seed<'_>>,
        cancel: &AtomicBool,
    ) -> Result<Self, IndexError> {
        params.validate().map_err(IndexError::Params)?;
        let metric = binlog.metric;
        if !metric.measures(binlog.element()) {
            return Err(IndexError::Params(format!("{metric:?} does not measure {:?} rows", binlog.element())));
        }
        let (rows, fill) = (binlog.len(), fills_lists(metric));
        let (m, ef) = (params.m, params.ef_construction);
        let prefetch = |row: u32| binlog.vector(row as usize).prefetch();
        let graph = with_pair_distance(binlog, |distance| {
            let seeded = seed.and_then(|seed| Some((Builder::seeded(rows, m, ef, fill, distance, seed)?, seed)));
            let (builder, placed) = match seeded {
                Some((builder, seed)) => {
                    let mut placed = vec![false; rows];
                    seed.positions.iter().flatten().for_each(|p| placed[*p as usize] = true);
                    (builder, placed)
                }
                None => (Builder::new(rows, m, ef, fill, distance), vec![false; rows]),
            };
            let mut builder = builder.prefetching(&prefetch);
            let pending: Vec<u32> = insertion_order(rows).into_iter().filter(|r| !placed[*r as usize]).collect();
            for chunk in pending.chunks(BUILD_CHUNK) {
                if cancel.load(Ordering::Relaxed) {
                    return Err(IndexError::Cancelled);
                }
                chunk.iter().for_each(|node| builder.insert(*node));
            }
            Ok(builder.finish())
        })?;
        let codes = Codes::encode(params.quantization, metric, binlog.dims, binlog.vectors(), cancel)
            .map_err(|_| IndexError::Cancelled)?;
        Ok(SegmentIndex { segment: binlog.segment, metric, graph, codes })
    }

    pub fn rows(&self) -> usize {
        self.graph.rows()
    }

    /// The graph as flat arrays, as [`crate::graph::FlatGraph::search`]
    /// searches it.
    pub fn to_flat(&self) -> FlatGraph<'static> {
        self.graph.clone()
    }

    /// The rows' codes, if the index keeps them.
    pub fn codes(&self) -> Option<&Codes<'static>> {
        self.codes.as_ref()
    }

    /// The graph and codes as an index file ([`crate::format::index`]).
    pub fn to_index_file(&self) -> Vec<u8> {
        index::encode(self.segment, self.metric, &self.graph, self.codes.as_ref())
    }
}

/// Runs `f` with the graph's distance between two rows of `binlog` (by
/// position), read as stored, a NaN counted as the farthest.
fn with_pair_distance<R>(binlog: &InsertBinlog<'_>, f: impl FnOnce(PairDistance<'_>) -> R) -> R {
    let (metric, dims) = (binlog.metric, binlog.dims);
    let finite = |d: f32| if d.is_nan() { f32::MAX } else { d };
    let at = |row: u32, stride: usize| row as usize * stride..(row as usize + 1) * stride;
    match binlog.vectors() {
        Vectors::F32(v) => f(&|a, b| finite(metric.distance(&v[at(a, dims)], &v[at(b, dims)]))),
        Vectors::F16(v) => f(&|a, b| finite(metric.distance_f16(&v[at(a, dims)], &v[at(b, dims)]))),
        Vectors::Bit(v) => {
            let stride = Element::Bit.bytes(dims);
            f(&|a, b| finite(metric.distance_bits(&v[at(a, stride)], &v[at(b, stride)])))
        }
        Vectors::Sparse(v) => {
            use crate::element::Row;
            f(&|a, b| finite(metric.between(Row::Sparse(v.row(a as usize)), Row::Sparse(v.row(b as usize)))))
        }
    }
}

/// The order rows enter the graph: a fixed pseudo-random permutation.
///
/// Rows come in arrival order, and arrivals drift (a batch of one kind of
/// data, then another). Inserted in that order, the clusters that arrive
/// late hang off the early graph by the few long links HNSW's neighbour
/// pruning keeps, and searches miss them (a mixture loaded in two batches
/// loses a tenth of its recall@10 at ef 40: `--bench hnsw_recall`,
/// docs/benchmarks.md, "Constants and the measurements behind them"). A
/// shuffled order builds the graph as if all clusters arrived together.
pub(super) fn insertion_order(rows: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..rows as u32).collect();
    let mut rng = crate::synthetic::Rng::new(0x6d69_6c76_7573);
    for i in (1..rows).rev() {
        order.swap(i, rng.next_u64() as usize % (i + 1));
    }
    order
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::element::Row;
    use crate::format::insert;
    use crate::graph::v0_1::hnsw_rs_dump_file;
    use crate::synthetic::Rng;

    pub(crate) fn binlog_bytes(rows: usize, dims: usize, metric: Metric) -> Vec<u8> {
        let mut rng = Rng::new(11);
        let keys: Vec<u64> = (0..rows as u64).collect();
        insert::encode(SegmentId(3), metric, dims, &keys, &rng.vector(rows * dims))
    }

    pub(crate) fn exact(b: &InsertBinlog<'_>, q: &[f32], k: usize, deleted: &dyn Fn(u32) -> bool) -> Vec<u32> {
        let mut all: Vec<(f32, u32)> = (0..b.len() as u32)
            .filter(|i| !deleted(*i))
            .map(|i| (b.metric.between(Row::F32(q), b.vector(i as usize)), i))
            .collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        all.into_iter().take(k).map(|(_, i)| i).collect()
    }

    /// What a query runs: the flat search over the index's graph.
    pub(crate) fn search(
        index: &SegmentIndex,
        b: &InsertBinlog<'_>,
        q: &[f32],
        k: usize,
        deleted: &dyn Fn(u32) -> bool,
    ) -> Vec<u32> {
        let found = index.graph.search(b.metric, Row::F32(q), &|r| b.vector(r as usize), k, 40, deleted);
        found.into_iter().map(|(_, r)| r).collect()
    }

    pub(crate) fn recall(index: &SegmentIndex, b: &InsertBinlog<'_>, deleted: &dyn Fn(u32) -> bool) -> f64 {
        let mut rng = Rng::new(99);
        let (mut hit, mut total) = (0, 0);
        for _ in 0..50 {
            let q = rng.vector(b.dims);
            let want = exact(b, &q, 10, deleted);
            let got = search(index, b, &q, 10, deleted);
            assert!(got.iter().all(|i| !deleted(*i)), "a deleted row was returned");
            hit += got.iter().filter(|i| want.contains(i)).count();
            total += want.len();
        }
        hit as f64 / total as f64
    }

    #[test]
    fn rows_that_arrived_in_drifting_batches_stay_reachable() {
        // Two batches with clusters of their own, in arrival order: the case
        // the shuffled insertion order is for (without it, recall falls
        // below the bound asserted here).
        let dims = 64;
        let mut vectors = crate::synthetic::gaussian_mixture(6000, dims, 50, 0.1, 1);
        vectors.extend(crate::synthetic::gaussian_mixture(6000, dims, 50, 0.1, 2));
        let keys: Vec<u64> = (0..12_000).collect();
        let bytes = insert::encode(SegmentId(3), Metric::L2, dims, &keys, &vectors);
        let b = InsertBinlog::decode("o", &bytes).unwrap();
        let index = SegmentIndex::build(&b, HnswParams::default(), &AtomicBool::new(false)).unwrap();
        let none = |_: u32| false;
        let (mut hit, mut total) = (0, 0);
        for q in (0..12_000).step_by(40).map(|i| b.vector(i).to_f32().iter().map(|x| x + 0.01).collect::<Vec<f32>>()) {
            let want = exact(&b, &q, 10, &none);
            hit += search(&index, &b, &q, 10, &none).iter().filter(|i| want.contains(i)).count();
            total += want.len();
        }
        let r = hit as f64 / total as f64;
        assert!(r >= 0.95, "recall {r}");
    }

    #[test]
    fn inner_product_graphs_find_the_largest_products_of_unnormalised_rows() {
        // Standard Gaussian rows: norms spread around sqrt(dims), the case
        // where the L2 graph over augmented rows strands a greedy search.
        let (rows, dims) = (5000, 32);
        let mut rng = Rng::new(21);
        let vectors: Vec<f32> = (0..(rows + 100) * dims).map(|_| rng.next_gaussian()).collect();
        let (base, queries) = vectors.split_at(rows * dims);
        let keys: Vec<u64> = (0..rows as u64).collect();
        let bytes = insert::encode(SegmentId(3), Metric::InnerProduct, dims, &keys, base);
        let b = InsertBinlog::decode("o", &bytes).unwrap();
        let params = HnswParams { m: 16, ef_construction: 64, ..Default::default() };
        let index = SegmentIndex::build(&b, params, &AtomicBool::new(false)).unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let file = hnsw_rs_dump_file(&b, params, scratch.path()).unwrap();
        let augmented =
            SegmentIndex::from_hnsw_dump("o", &file, Metric::InnerProduct, &scratch.path().join("3")).unwrap();
        let none = |_: u32| false;
        let recall = |index: &SegmentIndex| {
            let hits: usize = queries
                .chunks_exact(dims)
                .map(|q| {
                    let want = exact(&b, q, 10, &none);
                    search(index, &b, q, 10, &none).iter().filter(|i| want.contains(i)).count()
                })
                .sum();
            hits as f64 / 1000.0
        };
        let (built, reduced) = (recall(&index), recall(&augmented));
        assert!(built >= 0.95 && built >= reduced + 0.1, "recall@10 at ef 40: {built}, augmented L2 graph: {reduced}");
    }

    #[test]
    fn builds_and_searches_with_tombstones_for_every_metric() {
        for metric in Metric::ALL {
            let bytes = binlog_bytes(3000, 16, metric);
            let b = InsertBinlog::decode("o", &bytes).unwrap();
            let index = SegmentIndex::build(&b, HnswParams::default(), &AtomicBool::new(false)).unwrap();
            assert!(index.to_flat().is_reusable(), "a graph built here may seed a merge");
            let none = |_: u32| false;
            let r = recall(&index, &b, &none);
            assert!(r >= 0.95, "{metric:?}: recall {r}");

            let every_third = |i: u32| i.is_multiple_of(3);
            let r = recall(&index, &b, &every_third);
            assert!(r >= 0.9, "{metric:?}: recall with tombstones {r}");

            if metric != Metric::InnerProduct {
                let q = b.vector(5).to_f32().into_owned();
                assert_eq!(search(&index, &b, &q, 3, &none)[0], 5, "{metric:?}: a row is its own nearest neighbour");
            }
        }
    }

    #[test]
    fn a_build_can_be_cancelled_and_parameters_are_checked() {
        let bytes = binlog_bytes(100, 4, Metric::L2);
        let b = InsertBinlog::decode("o", &bytes).unwrap();
        assert!(matches!(
            SegmentIndex::build(&b, HnswParams::default(), &AtomicBool::new(true)),
            Err(IndexError::Cancelled)
        ));
        let bad = HnswParams { m: 1, ..Default::default() };
        assert_eq!(bad.validate().unwrap_err(), "m must be between 2 and 100, not 1");
        let bad = HnswParams { m: 16, ef_construction: 10, ..Default::default() };
        assert_eq!(bad.validate().unwrap_err(), "ef_construction must be between 2 * m (32) and 1000, not 10");
    }

    #[test]
    fn an_empty_segment_builds_and_finds_nothing() {
        let bytes = insert::encode(SegmentId(1), Metric::L2, 4, &[], Row::F32(&[]));
        let b = InsertBinlog::decode("o", &bytes).unwrap();
        let index = SegmentIndex::build(&b, HnswParams::default(), &AtomicBool::new(false)).unwrap();
        assert!(search(&index, &b, &[0.0; 4], 5, &|_| false).is_empty());
    }
}
