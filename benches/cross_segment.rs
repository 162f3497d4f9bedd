//! The same 100,000 × 128 rows (a Gaussian mixture of 1,000 clusters) held
//! as 1, 2, 4 and 8 flushed segments: recall@10 and single-thread QPS of
//! the cross-segment search queries run (`milvus_core::search::Search`,
//! where a query's `ef_search` is split across the segments by their rows),
//! beside each segment searched with the whole `ef_search` and the lists
//! merged (what a search did before). A plain harness: the builds take
//! about a minute.
//!
//! `cargo bench -p milvus-core --bench cross_segment [-- ROWS QUERIES]`

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use milvus_core::Metric;
use milvus_core::element::Row;
use milvus_core::format::insert::{self, InsertBinlog};
use milvus_core::format::page::PageHits;
use milvus_core::hnsw::{HnswParams, SegmentIndex};
use milvus_core::search::{self, IterativeScan, LoadedSegment, Search, SearchOptions};
use milvus_core::segment::SegmentId;
use milvus_core::synthetic::gaussian_mixture;

const DIMS: usize = 128;

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let rows = args.first().copied().unwrap_or(100_000);
    let queries = args.get(1).copied().unwrap_or(500);
    let data = gaussian_mixture(rows + queries, DIMS, 1000, 0.1, 42);
    let (base, held_out) = data.split_at(rows * DIMS);
    let truth: Vec<HashSet<u64>> = held_out
        .chunks_exact(DIMS)
        .map(|q| {
            let mut d: Vec<(f32, u64)> =
                base.chunks_exact(DIMS).enumerate().map(|(i, v)| (Metric::L2.distance(q, v), i as u64)).collect();
            d.select_nth_unstable_by(10, |a, b| a.0.total_cmp(&b.0));
            d[..10].iter().map(|e| e.1).collect()
        })
        .collect();
    println!("rows {rows}, dims {DIMS}, {queries} queries, m 16, ef_construction 64, search on one thread\n");
    println!("| segments | ef_search | search | recall@10 | QPS | p99 (ms) |");
    println!("|---:|---:|---|---:|---:|---:|");
    for count in [1usize, 2, 4, 8] {
        let per = rows.div_ceil(count);
        let segments: Vec<Arc<LoadedSegment>> = (0..count)
            .map(|s| {
                let (start, end) = (s * per, ((s + 1) * per).min(rows));
                let keys: Vec<u64> = (start as u64..end as u64).collect();
                let bytes =
                    insert::encode(SegmentId(s as u64 + 1), Metric::L2, DIMS, &keys, &base[start * DIMS..end * DIMS]);
                let binlog = InsertBinlog::decode("bench", &bytes).unwrap().into_owned();
                let index = SegmentIndex::build(&binlog, HnswParams::default(), &AtomicBool::new(false)).unwrap();
                Arc::new(LoadedSegment::new(binlog, Some(index), Vec::new()))
            })
            .collect();
        for ef in [40usize, 100] {
            let options = SearchOptions {
                ef_search: ef,
                first_k: ef,
                max_approximate: usize::MAX,
                iterative: IterativeScan::Relaxed,
            };
            let shared = |q: &[f32]| {
                Search::new(q.to_vec().into(), PageHits::default(), segments.clone(), options)
                    .take(10)
                    .map(|h| h.key)
                    .collect()
            };
            let independent = |q: &[f32]| {
                let lists = segments.iter().map(|s| s.search(Row::F32(q), ef, ef, &|_| false)).collect();
                search::merge(lists, 10).into_iter().map(|h| h.key).collect()
            };
            type Run<'a> = (&'a str, &'a dyn Fn(&[f32]) -> Vec<u64>);
            let runs: [Run; 2] = [("ef split by rows", &shared), ("each segment at ef", &independent)];
            for (name, run) in runs {
                let mut latencies = Vec::with_capacity(queries);
                let mut hits = 0;
                let start = Instant::now();
                for (q, truth) in held_out.chunks_exact(DIMS).zip(&truth) {
                    let t = Instant::now();
                    let got = run(q);
                    latencies.push(t.elapsed().as_secs_f64() * 1e3);
                    hits += got.iter().filter(|k| truth.contains(k)).count();
                }
                let qps = queries as f64 / start.elapsed().as_secs_f64();
                latencies.sort_by(f64::total_cmp);
                let p99 = latencies[((latencies.len() as f64 * 0.99) as usize).min(latencies.len() - 1)];
                println!(
                    "| {count} | {ef} | {name} | {:.3} | {qps:.0} | {p99:.3} |",
                    hits as f64 / (queries * 10) as f64
                );
            }
        }
    }
}
