//! One index's rows held as several flushed segments: recall@10 and
//! single-thread QPS of the cross-segment search queries run
//! (`milvus_core::search::Search`). Two studies over a Gaussian mixture of
//! 1,000 clusters at 128 dimensions:
//!
//! 1. **equal segments**: the same rows as 1, 2, 4 and 8 segments, a
//!    query's `ef_search` split across them by their rows, beside each
//!    segment searched with the whole `ef_search` and the lists merged;
//! 2. **the least `ef` a segment gets** (`SEGMENT_EF_FLOOR`), with and
//!    without the widening of a segment that holds the query's nearest
//!    rows (`SEGMENT_WIDEN_RANK`), on two layouts: a stream's (50k + 32k +
//!    2 x 8k + 3 x 2k rows, what a query meets while rows stream in) and
//!    a bulk load's before its merges (32 segments of 3k); once with the
//!    rows in random order, once sorted along one coordinate, so that each
//!    segment holds a region of the space and a query's neighbours bunch
//!    in one of them.
//!
//! A plain harness: the builds take about three minutes.
//!
//! `cargo bench -p milvus-core --bench cross_segment [-- ROWS QUERIES]`

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use milvus_core::Metric;
use milvus_core::element::Row;
use milvus_core::format::insert::{self, InsertBinlog};
use milvus_core::graph::segment::{HnswParams, SegmentIndex};
use milvus_core::search::PageHits;
use milvus_core::search::{self, LoadedSegment, SEGMENT_WIDEN_RANK, Search, SearchOptions};
use milvus_core::segment::SegmentId;
use milvus_core::synthetic::gaussian_mixture;

const DIMS: usize = 128;

/// A stream's layout: the rows loaded before it, a merged tier, two of
/// the tier below, three freshly sealed.
const STREAM_LAYOUT: [usize; 7] = [50_000, 32_768, 8_192, 8_192, 2_048, 2_048, 2_048];
/// A bulk load's layout before its merges: 32 segments of about 3k rows.
const BULK_LAYOUT: [usize; 32] = [3_125; 32];

/// Rows, held-out queries, and each query's ten nearest rows.
struct Data {
    base: Vec<f32>,
    queries: Vec<f32>,
    truth: Vec<HashSet<u64>>,
}

impl Data {
    fn new(rows: usize, queries: usize, bunched: bool) -> Self {
        let data = gaussian_mixture(rows + queries, DIMS, 1000, 0.1, 42);
        let (base, held_out) = data.split_at(rows * DIMS);
        let mut order: Vec<usize> = (0..rows).collect();
        if bunched {
            order.sort_by(|&a, &b| base[a * DIMS].total_cmp(&base[b * DIMS]));
        }
        let base: Vec<f32> = order.iter().flat_map(|&i| base[i * DIMS..(i + 1) * DIMS].iter().copied()).collect();
        let truth = held_out
            .chunks_exact(DIMS)
            .map(|q| {
                let mut d: Vec<(f32, u64)> =
                    base.chunks_exact(DIMS).enumerate().map(|(i, v)| (Metric::L2.distance(q, v), i as u64)).collect();
                d.select_nth_unstable_by(10, |a, b| a.0.total_cmp(&b.0));
                d[..10].iter().map(|e| e.1).collect()
            })
            .collect();
        Data { base, queries: held_out.to_vec(), truth }
    }

    /// The rows as consecutive segments of `sizes` rows, keys their positions.
    fn segments(&self, sizes: &[usize]) -> Vec<Arc<LoadedSegment>> {
        let mut start = 0;
        sizes
            .iter()
            .enumerate()
            .map(|(s, &n)| {
                let keys: Vec<u64> = (start as u64..(start + n) as u64).collect();
                let vectors = &self.base[start * DIMS..(start + n) * DIMS];
                start += n;
                let bytes = insert::encode(SegmentId(s as u64 + 1), Metric::L2, DIMS, &keys, vectors);
                let binlog = InsertBinlog::decode("bench", &bytes).unwrap().into_owned();
                let index = SegmentIndex::build(&binlog, HnswParams::default(), &AtomicBool::new(false)).unwrap();
                Arc::new(LoadedSegment::new(binlog, Some(index), Vec::new()))
            })
            .collect()
    }

    /// Recall@10, QPS and p99 (ms) of `run` over every query.
    fn measure(&self, run: &dyn Fn(&[f32]) -> Vec<u64>) -> (f64, f64, f64) {
        let mut latencies = Vec::with_capacity(self.truth.len());
        let mut hits = 0;
        let start = Instant::now();
        for (q, truth) in self.queries.chunks_exact(DIMS).zip(&self.truth) {
            let t = Instant::now();
            let got = run(q);
            latencies.push(t.elapsed().as_secs_f64() * 1e3);
            hits += got.iter().filter(|k| truth.contains(k)).count();
        }
        let qps = self.truth.len() as f64 / start.elapsed().as_secs_f64();
        latencies.sort_by(f64::total_cmp);
        let p99 = latencies[((latencies.len() as f64 * 0.99) as usize).min(latencies.len() - 1)];
        (hits as f64 / (self.truth.len() * 10) as f64, qps, p99)
    }
}

/// The top ten of a [`Search`] over `segments`.
fn top10(segments: &[Arc<LoadedSegment>], options: SearchOptions, q: &[f32]) -> Vec<u64> {
    Search::new(q.to_vec().into(), PageHits::default(), segments.to_vec(), options)
        .take(10)
        .map(|h| h.unwrap().key)
        .collect()
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let rows = args.first().copied().unwrap_or(100_000);
    let queries = args.get(1).copied().unwrap_or(500);
    println!("dims {DIMS}, {queries} queries, m 16, ef_construction 64, search on one thread\n");
    equal_segments(&Data::new(rows, queries, false), rows);
    println!();
    for (name, layout) in
        [("a stream's layout", &STREAM_LAYOUT[..]), ("a bulk load before its merges", &BULK_LAYOUT[..])]
    {
        floors(name, layout, queries);
        println!();
    }
}

fn equal_segments(data: &Data, rows: usize) {
    println!("{rows} rows as equal segments\n");
    println!("| segments | ef_search | search | recall@10 | QPS | p99 (ms) |");
    println!("|---:|---:|---|---:|---:|---:|");
    for count in [1usize, 2, 4, 8] {
        let per = rows.div_ceil(count);
        let sizes: Vec<usize> = (0..count).map(|s| per.min(rows - s * per)).collect();
        let segments = data.segments(&sizes);
        for ef in [40usize, 100] {
            let options =
                SearchOptions { ef_search: ef, first_k: ef, max_approximate: usize::MAX, ..Default::default() };
            let shared = |q: &[f32]| top10(&segments, options, q);
            let independent = |q: &[f32]| {
                let lists = segments.iter().map(|s| s.search(Row::F32(q), ef, ef, &|_| false).unwrap()).collect();
                search::merge(lists, 10).into_iter().map(|h| h.key).collect()
            };
            type Run<'a> = (&'a str, &'a dyn Fn(&[f32]) -> Vec<u64>);
            let runs: [Run; 2] = [("ef split by rows", &shared), ("each segment at ef", &independent)];
            for (name, run) in runs {
                let (recall, qps, p99) = data.measure(run);
                println!("| {count} | {ef} | {name} | {recall:.3} | {qps:.0} | {p99:.3} |");
            }
        }
    }
}

fn floors(name: &str, layout: &[usize], queries: usize) {
    let rows: usize = layout.iter().sum();
    println!("{rows} rows as {name} ({} segments), ef_search 40, two passes interleaved\n", layout.len());
    println!("| rows | least ef | widening | recall@10 | QPS (pass 1, pass 2) | p99 (ms) |");
    println!("|---|---:|---|---:|---:|---:|");
    let configs = [
        (10, 0),
        (5, 0),
        (2, 0),
        (10, SEGMENT_WIDEN_RANK),
        (5, SEGMENT_WIDEN_RANK),
        (3, SEGMENT_WIDEN_RANK),
        (2, SEGMENT_WIDEN_RANK),
    ];
    for (order, bunched) in [("random order", false), ("by region", true)] {
        let data = Data::new(rows, queries, bunched);
        let segments = data.segments(layout);
        let mut results = vec![Vec::new(); configs.len()];
        for _pass in 0..2 {
            for (&(floor, widen), result) in configs.iter().zip(&mut results) {
                let options = SearchOptions {
                    max_approximate: usize::MAX,
                    segment_ef_floor: floor,
                    segment_widen_rank: widen,
                    ..Default::default()
                };
                result.push(data.measure(&|q| top10(&segments, options, q)));
            }
        }
        for (&(floor, widen), r) in configs.iter().zip(&results) {
            let widening = if widen == 0 { "none".to_string() } else { format!("top {widen}") };
            println!(
                "| {order} | {floor} | {widening} | {:.3} | {:.0}, {:.0} | {:.3} |",
                r[0].0,
                r[0].1,
                r[1].1,
                r[0].2.max(r[1].2)
            );
        }
    }
}
