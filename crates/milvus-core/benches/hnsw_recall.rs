//! HNSW on one segment of 100,000 × 128 vectors (a Gaussian mixture): build
//! time of the crate's builder beside hnsw_rs' (both on one thread, the
//! same rows in the same order), then recall@10 against exact search beside
//! single-client QPS and p50/p99 latency at several `ef_search`, each graph
//! searched as queries search it (flat, mapped). A plain harness: one build
//! is seconds, too long for Criterion's repeated sampling.
//!
//! `cargo bench -p milvus-core --bench hnsw_recall [-- ROWS QUERIES DIMS CLUSTERS BATCHES]`
//! (defaults 100000 500 128 1000 1). BATCHES > 1 loads the rows as that many
//! mixtures one after the other, each with its own clusters: data whose
//! distribution drifts as it arrives, which is how a growing segment fills.
//! CLUSTERS 0: rows without clusters, uniform in [-1, 1) (seed 42), the
//! very rows `benches/reference/graph_recall.py` gives pg_milvus, pgvector
//! and hnswlib.

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use milvus_core::Metric;
use milvus_core::cache::{CacheError, SegmentCache};
use milvus_core::element::Row;
use milvus_core::format::Check;
use milvus_core::format::index::IndexFile;
use milvus_core::format::insert::{self, InsertBinlog};
use milvus_core::graph::FlatGraph;
use milvus_core::graph::segment::{HnswParams, SegmentIndex};
use milvus_core::graph::v0_1::hnsw_rs_dump_file;
use milvus_core::segment::SegmentId;
use milvus_core::synthetic::{Rng, gaussian_mixture};

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let rows = args.first().copied().unwrap_or(100_000);
    let queries = args.get(1).copied().unwrap_or(500);
    let dims = args.get(2).copied().unwrap_or(128);
    let clusters = args.get(3).copied().unwrap_or(1000);
    let batches = args.get(4).copied().unwrap_or(1).max(1);
    // Each batch: its rows, then its share of held-out queries.
    let (mut base, mut held_out) = (Vec::new(), Vec::new());
    if clusters == 0 {
        let data = Rng::new(42).vector((rows + queries) * dims);
        base.extend_from_slice(&data[..rows * dims]);
        held_out.extend_from_slice(&data[rows * dims..]);
    } else {
        for b in 0..batches {
            let (n, q) = (rows / batches, queries / batches);
            let data = gaussian_mixture(n + q, dims, (clusters / batches).max(1), 0.1, 42 + b as u64);
            base.extend_from_slice(&data[..n * dims]);
            held_out.extend_from_slice(&data[n * dims..]);
        }
    }
    let (rows, queries) = (base.len() / dims, held_out.len() / dims);
    let keys: Vec<u64> = (0..rows as u64).collect();
    let bytes = insert::encode(SegmentId(1), Metric::L2, dims, &keys, &base);
    let binlog = InsertBinlog::decode("bench", &bytes).unwrap();

    let params = HnswParams { m: 16, ef_construction: 64, ..Default::default() };
    let t = Instant::now();
    let index = SegmentIndex::build(&binlog, params, &AtomicBool::new(false)).unwrap();
    let build = t.elapsed().as_secs_f64();
    // Searched as queries see it: written as an index file, mapped from the
    // cache and read in place, not the graph in the builder's memory.
    let dir = tempfile::tempdir().unwrap();
    let cache = SegmentCache::new(dir.path(), u64::MAX).unwrap();
    let file = cache.map_derived("index", || Ok::<_, CacheError>(index.to_index_file())).unwrap();
    // What a backend pays before its first search of the segment: a map
    // and a header check (version 2), or hnsw_rs' reload of a dump (0.1).
    let t = Instant::now();
    let IndexFile::Flat { graph: flat, .. } = IndexFile::decode("bench", &file, Check::Header).unwrap() else {
        unreachable!()
    };
    let open = t.elapsed().as_secs_f64();
    // hnsw_rs, as 0.1 built and stored graphs: its build (and dump), then
    // the reload that converts the dump to flat arrays.
    let t = Instant::now();
    let dump = hnsw_rs_dump_file(&binlog, params, dir.path()).unwrap();
    let hnsw_rs_build = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let hnsw_rs = SegmentIndex::from_hnsw_dump("bench", &dump, Metric::L2, &dir.path().join("unpacked")).unwrap();
    let reload = t.elapsed().as_secs_f64();
    println!(
        "rows {rows}, dims {dims}, clusters {clusters} in {batches} batches, m {}, ef_construction {}, one thread",
        params.m, params.ef_construction
    );
    println!(
        "build: {build:.1} s ({:.0} rows/s), layer-0 lists {:.1} long on average (of {}); hnsw_rs: {hnsw_rs_build:.1} s",
        rows as f64 / build,
        flat.mean_layer0_degree(),
        2 * params.m
    );
    println!(
        "open the index file ({:.1} MB, mapped): {:.3} ms; reload 0.1's hnsw_rs dump ({:.1} MB): {reload:.3} s",
        file.len() as f64 / 1e6,
        open * 1e3,
        dump.len() as f64 / 1e6
    );

    // Exact top-10 of each held-out query (brute force, the ground truth).
    let truth: Vec<HashSet<u32>> = held_out
        .chunks_exact(dims)
        .map(|q| {
            let mut d: Vec<(f32, u32)> =
                (0..rows).map(|i| (Metric::L2.between(Row::F32(q), binlog.vector(i)), i as u32)).collect();
            d.select_nth_unstable_by(10, |a, b| a.0.total_cmp(&b.0));
            d[..10].iter().map(|e| e.1).collect()
        })
        .collect();
    let t = Instant::now();
    for q in held_out.chunks_exact(dims) {
        std::hint::black_box(
            (0..rows).map(|i| Metric::L2.between(Row::F32(q), binlog.vector(i))).fold(f32::MAX, f32::min),
        );
    }
    let brute_qps = queries as f64 / t.elapsed().as_secs_f64();

    println!();
    type SearchFn<'a> = Box<dyn Fn(&[f32], usize) -> Vec<u32> + 'a>;
    let built = hnsw_rs.to_flat();
    let flat_search = |g: &FlatGraph, q: &[f32], ef| {
        g.search(Metric::L2, Row::F32(q), &|r| binlog.vector(r as usize), 10, ef, &|_| false)
            .into_iter()
            .map(|(_, r)| r)
            .collect()
    };
    let searches: [(&str, SearchFn); 2] = [
        ("built here", Box::new(|q, ef| flat_search(&flat, q, ef))),
        ("hnsw_rs' graph", Box::new(|q, ef| flat_search(&built, q, ef))),
    ];
    println!("| search | ef_search | recall@10 | QPS (1 client) | p50 (ms) | p99 (ms) |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, search) in &searches {
        for ef in [20usize, 40, 100, 200, 400] {
            let mut latencies = Vec::with_capacity(queries);
            let mut hits = 0;
            let start = Instant::now();
            for (q, truth) in held_out.chunks_exact(dims).zip(&truth) {
                let t = Instant::now();
                let got = search(q, ef);
                latencies.push(t.elapsed().as_secs_f64() * 1e3);
                hits += got.iter().filter(|r| truth.contains(r)).count();
            }
            let qps = queries as f64 / start.elapsed().as_secs_f64();
            latencies.sort_by(f64::total_cmp);
            let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
            println!(
                "| {name} | {ef} | {:.3} | {qps:.0} | {:.3} | {:.3} |",
                hits as f64 / (queries * 10) as f64,
                pct(0.5),
                pct(0.99)
            );
        }
    }
    println!("| exact (brute force) | | 1.000 | {brute_qps:.0} | | |");
}
