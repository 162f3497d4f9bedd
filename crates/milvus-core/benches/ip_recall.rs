//! Inner-product recall of one segment's graph, on rows that are not
//! normalised (standard Gaussian: norms spread around sqrt(dims)) and on
//! the same rows normalised, at 64, 768 and 1,536 dimensions: recall@10
//! against exact search at ef_search 40, 200 and 1,000, searched as queries
//! search (the flat graph of the index file), with m 16 and ef_construction
//! 64 as pgvector's defaults. `make bench-ip` runs the same distributions
//! beside pgvector, end to end.
//!
//! `cargo bench -p milvus-core --bench ip_recall [-- ROWS QUERIES DIMS...]`
//! (defaults 20000 200 64 768 1536).

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use milvus_core::Metric;
use milvus_core::element::Row;
use milvus_core::format::insert::{self, InsertBinlog};
use milvus_core::graph::segment::{HnswParams, SegmentIndex};
use milvus_core::segment::SegmentId;
use milvus_core::synthetic::Rng;

const EF: [usize; 3] = [40, 200, 1000];

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let rows = args.first().copied().unwrap_or(20_000);
    let queries = args.get(1).copied().unwrap_or(200);
    let dims: Vec<usize> = if args.len() > 2 { args[2..].to_vec() } else { vec![64, 768, 1536] };
    let params = HnswParams { m: 16, ef_construction: 64, ..Default::default() };
    println!("rows {rows}, queries {queries}, m {}, ef_construction {}", params.m, params.ef_construction);
    println!();
    println!("| rows | dims | build (s) | recall@10 ef 40 | ef 200 | ef 1000 |");
    println!("|---|---:|---:|---:|---:|---:|");
    for &dim in &dims {
        let mut rng = Rng::new(7 + dim as u64);
        let gaussian: Vec<f32> = (0..(rows + queries) * dim).map(|_| rng.next_gaussian()).collect();
        let normalised: Vec<f32> = gaussian.chunks_exact(dim).flat_map(milvus_core::vector::l2_normalize).collect();
        for (name, data) in [("Gaussian", &gaussian), ("normalised", &normalised)] {
            let (base, held_out) = data.split_at(rows * dim);
            let keys: Vec<u64> = (0..rows as u64).collect();
            let bytes = insert::encode(SegmentId(1), Metric::InnerProduct, dim, &keys, base);
            let binlog = InsertBinlog::decode("bench", &bytes).unwrap();
            let t = Instant::now();
            let index = SegmentIndex::build(&binlog, params, &AtomicBool::new(false)).unwrap();
            let build = t.elapsed().as_secs_f64();
            let graph = index.to_flat();
            let truth: Vec<HashSet<u32>> = held_out
                .chunks_exact(dim)
                .map(|q| {
                    let mut d: Vec<(f32, u32)> = (0..rows)
                        .map(|i| (Metric::InnerProduct.between(Row::F32(q), binlog.vector(i)), i as u32))
                        .collect();
                    d.select_nth_unstable_by(10, |a, b| a.0.total_cmp(&b.0));
                    d[..10].iter().map(|e| e.1).collect()
                })
                .collect();
            let recalls: Vec<String> = EF
                .iter()
                .map(|&ef| {
                    let hits: usize = held_out
                        .chunks_exact(dim)
                        .zip(&truth)
                        .map(|(q, truth)| {
                            let got = graph.search(
                                Metric::InnerProduct,
                                Row::F32(q),
                                &|r| binlog.vector(r as usize),
                                10,
                                ef,
                                &|_| false,
                            );
                            got.iter().filter(|(_, r)| truth.contains(r)).count()
                        })
                        .sum();
                    format!("{:.3}", hits as f64 / (queries * 10) as f64)
                })
                .collect();
            println!("| {rows} {name} | {dim} | {build:.1} | {} |", recalls.join(" | "));
        }
    }
}
