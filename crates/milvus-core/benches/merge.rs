//! What a merge costs beside a rebuild: one segment of 100,000 × 128 rows
//! (a Gaussian mixture) with its graph, merged with four segments of 2,000
//! rows, as compaction merges them: the output keeps the large segment's
//! graph and inserts the other 8,000 rows (`milvus_core::graph::build`), against
//! building the output's graph from scratch. Then the same with one row in
//! ten of the large segment deleted (a merge that also purges), and a purge
//! alone (the large segment with a quarter of its rows deleted, nothing
//! added; compaction rebuilds such a graph: see `KEEP_MAX_DELETED`). Each
//! line: time, ratio to the rebuild, recall@10 at ef_search 40 of both
//! graphs on 1,000 held-out queries. A plain harness: a rebuild is
//! seconds, too long for Criterion's repeated sampling.
//!
//! `cargo bench -p milvus-core --bench merge [-- ROWS SMALL DIMS]` (defaults
//! 100000 2000 128).

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use milvus_core::Metric;
use milvus_core::element::Row;
use milvus_core::format::insert::{self, InsertBinlog};
use milvus_core::graph::FlatGraph;
use milvus_core::graph::build::Seed;
use milvus_core::graph::segment::{HnswParams, SegmentIndex};
use milvus_core::quant::Quantization;
use milvus_core::segment::SegmentId;
use milvus_core::synthetic::gaussian_mixture;

const PARAMS: HnswParams = HnswParams { m: 16, ef_construction: 64, quantization: Quantization::Sq8 };

fn binlog(dims: usize, rows: &[f32]) -> InsertBinlog<'static> {
    let keys: Vec<u64> = (0..(rows.len() / dims) as u64).collect();
    let bytes = insert::encode(SegmentId(1), Metric::L2, dims, &keys, rows);
    InsertBinlog::decode("bench", &bytes).unwrap().into_owned()
}

fn recall(graph: &FlatGraph, b: &InsertBinlog<'_>, queries: &[&[f32]]) -> f64 {
    let search = |q: &[f32]| {
        let got = graph.search(Metric::L2, Row::F32(q), &|r| b.vector(r as usize), 10, 40, &|_| false);
        got.into_iter().map(|(_, r)| r).collect()
    };
    recall_of(&search, b, queries)
}

/// Recall@10 of `search` (rows of `b`) against exact search over `b`.
fn recall_of(search: &dyn Fn(&[f32]) -> Vec<u32>, b: &InsertBinlog<'_>, queries: &[&[f32]]) -> f64 {
    let mut hits = 0;
    for q in queries {
        let mut all: Vec<(f32, u32)> =
            (0..b.len() as u32).map(|r| (Metric::L2.between(Row::F32(q), b.vector(r as usize)), r)).collect();
        all.select_nth_unstable_by(10, |x, y| x.0.total_cmp(&y.0));
        let truth: HashSet<u32> = all[..10].iter().map(|(_, r)| *r).collect();
        hits += search(q).iter().filter(|r| truth.contains(r)).count();
    }
    hits as f64 / (10 * queries.len()) as f64
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let large = args.first().copied().unwrap_or(100_000);
    let small = args.get(1).copied().unwrap_or(2_000);
    let dims = args.get(2).copied().unwrap_or(128);
    let data = gaussian_mixture(large + 4 * small + 1000, dims, 1000, 0.1, 42);
    let (rows, held_out) = data.split_at((large + 4 * small) * dims);
    let queries: Vec<&[f32]> = held_out.chunks_exact(dims).collect();
    let queries = &queries[..];
    let input = binlog(dims, &rows[..large * dims]);
    let t = Instant::now();
    let kept = SegmentIndex::build(&input, PARAMS, &AtomicBool::new(false)).unwrap().to_flat();
    println!("rows {large} + 4 x {small}, dims {dims}, m 16, ef_construction 64, one thread");
    println!("the large segment's graph: {:.2} s", t.elapsed().as_secs_f64());
    println!();
    println!("| merge | rows out | rebuild (s) | merge (s) | merge / rebuild | recall rebuilt | recall merged |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let cases: [(String, usize, usize); 3] = [
        (format!("{large} + 4 x {small}"), 0, 4 * small),
        (format!("{large} (1 in 10 deleted) + 4 x {small}"), 10, 4 * small),
        (format!("{large} (1 in 4 deleted), purge only"), 4, 0),
    ];
    let mut before_purge = None;
    for (name, every, added) in cases {
        let deleted = |r: usize| every > 0 && r.is_multiple_of(every);
        let (mut out, mut positions) = (Vec::new(), Vec::with_capacity(large));
        for r in 0..large {
            positions.push((!deleted(r)).then(|| (out.len() / dims) as u32));
            if !deleted(r) {
                out.extend_from_slice(&rows[r * dims..(r + 1) * dims]);
            }
        }
        out.extend_from_slice(&rows[large * dims..(large + added) * dims]);
        let output = binlog(dims, &out);
        let t = Instant::now();
        let rebuilt = SegmentIndex::build(&output, PARAMS, &AtomicBool::new(false)).unwrap().to_flat();
        let rebuild = t.elapsed().as_secs_f64();
        let seed = Seed { graph: &kept, positions: &positions };
        let t = Instant::now();
        let merged =
            SegmentIndex::build_seeded(&output, PARAMS, Some(&seed), &AtomicBool::new(false)).unwrap().to_flat();
        let merge = t.elapsed().as_secs_f64();
        println!(
            "| {name} | {} | {rebuild:.2} | {merge:.2} | {:.3} | {:.3} | {:.3} |",
            output.len(),
            merge / rebuild,
            recall(&rebuilt, &output, queries),
            recall(&merged, &output, queries)
        );
        if added == 0 {
            // What searches found before the purge: the kept graph, its
            // deleted rows traversed but skipped.
            let search = |q: &[f32]| {
                let got = kept
                    .search(Metric::L2, Row::F32(q), &|r| input.vector(r as usize), 10, 40, &|r| deleted(r as usize));
                got.into_iter().map(|(_, r)| positions[r as usize].expect("a live row")).collect::<Vec<u32>>()
            };
            before_purge = Some(recall_of(&search, &output, queries));
        }
    }
    if let Some(r) = before_purge {
        println!();
        println!("recall before the purge (the large segment's graph, deleted rows skipped): {r:.3}");
    }
}
