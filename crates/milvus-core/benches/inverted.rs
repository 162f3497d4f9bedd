//! One segment of sparse rows as an inverted index (`milvus_core::inverted`)
//! beside a scan of every row: SPLADE-like rows (Zipf-distributed terms,
//! positive weights), single-thread QPS of an exact top 10, and what the
//! search read: rows scored and postings passed per query, and the QPS of
//! each of the two ways to walk the lists (MaxScore, accumulating), of
//! which the search picks one by the query's postings per row. The answers
//! are checked against the scan's (distances within 1e-4: the two sum in
//! different orders). The index is searched as a segment would be: decoded
//! in place from its file's bytes. A plain harness: the build of 100k rows
//! takes a second, long for Criterion's repeated sampling.
//!
//! `cargo bench -p milvus-core --bench inverted [-- ROWS VOCAB NNZ QUERY_NNZ QUERIES]`
//! (defaults 100000 30000 120 20 300).

use std::time::Instant;

use milvus_core::Metric;
use milvus_core::format::{Check, inverted as file};
use milvus_core::inverted::{Inverted, Walk};
use milvus_core::segment::SegmentId;
use milvus_core::sparse::{self, SparseVec};
use milvus_core::synthetic::splade_like;

const K: usize = 10;

fn scan(metric: Metric, rows: &[SparseVec], q: &SparseVec) -> Vec<f32> {
    let mut d: Vec<f32> = rows
        .iter()
        .map(|r| match metric {
            Metric::L2 => (sparse::l2_squared(r.view(), q.view()) as f64).sqrt() as f32,
            Metric::InnerProduct => -sparse::inner_product(r.view(), q.view()),
            _ => sparse::cosine_distance(r.view(), q.view()) as f32,
        })
        .collect();
    d.sort_by(f32::total_cmp);
    d.truncate(K);
    d
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let arg = |i: usize, default: usize| args.get(i).copied().unwrap_or(default);
    let (n, vocab, nnz, query_nnz, queries) = (arg(0, 100_000), arg(1, 30_000), arg(2, 120), arg(3, 20), arg(4, 300));
    let rows = splade_like(n, vocab, nnz, 42);
    let qs = splade_like(queries, vocab, query_nnz, 7);
    println!("{n} rows of {vocab} dimensions, {nnz} terms each; {queries} queries of {query_nnz} terms; top {K}\n");
    println!(
        "| metric | build (s) | file MB | rows MB | inverted QPS | scan QPS | ratio | rows scored / query | postings read / query | listed / row | MaxScore QPS | accumulate QPS | answers equal |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let rows_mb = rows.iter().map(|r| 16 + 8 * r.indices.len()).sum::<usize>() as f64 / 1e6;
    for metric in [Metric::InnerProduct, Metric::Cosine, Metric::L2] {
        let start = Instant::now();
        let built = Inverted::build(metric, rows.iter().map(|r| r.view()));
        let bytes = file::encode(SegmentId(1), &built);
        let build_s = start.elapsed().as_secs_f64();
        drop(built);
        // A heap buffer is aligned as a mapped file is: the arrays are borrowed.
        let (_, index) = file::decode("bench", &bytes, Check::Header).unwrap();

        let start = Instant::now();
        let mut answers = Vec::with_capacity(queries);
        let (mut scored, mut postings) = (0u64, 0u64);
        for q in &qs {
            let (hits, stats) = index.search(q.view(), K, |_| false);
            scored += stats.scored;
            postings += stats.postings;
            answers.push(hits);
        }
        let inverted_qps = queries as f64 / start.elapsed().as_secs_f64();
        // QPS walking the lists one way, and the postings the lists hold
        // (all read when accumulating).
        let walk_qps = |walk: Walk| {
            let start = Instant::now();
            let mut postings = 0;
            for (q, want) in qs.iter().zip(&answers) {
                let (hits, stats) = index.search_by(walk, q.view(), K, &|_| false);
                assert_eq!(hits.len(), want.len(), "both walks answer alike");
                postings += stats.postings;
            }
            (queries as f64 / start.elapsed().as_secs_f64(), postings)
        };
        let (max_score_qps, _) = walk_qps(Walk::MaxScore);
        let (accumulate_qps, listed) = walk_qps(Walk::Accumulate);

        let start = Instant::now();
        let exact: Vec<Vec<f32>> = qs.iter().map(|q| scan(metric, &rows, q)).collect();
        let scan_qps = queries as f64 / start.elapsed().as_secs_f64();

        let equal = answers.iter().zip(&exact).all(|(hits, want)| {
            hits.len() == want.len()
                && hits.iter().zip(want).all(|(h, w)| (h.distance - w).abs() <= 1e-4 * w.abs().max(1.0))
        });
        println!(
            "| {metric:?} | {build_s:.2} | {:.1} | {rows_mb:.1} | {inverted_qps:.0} | {scan_qps:.0} | {:.0}x | {:.0} | {:.0} | {:.1} | {max_score_qps:.0} | {accumulate_qps:.0} | {} |",
            bytes.len() as f64 / 1e6,
            inverted_qps / scan_qps,
            scored as f64 / queries as f64,
            postings as f64 / queries as f64,
            listed as f64 / queries as f64 / n as f64,
            if equal { "yes" } else { "NO" }
        );
        assert!(equal, "the inverted index must answer as the scan does");
    }
}
