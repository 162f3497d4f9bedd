//! One segment searched by its rows, by its 8-bit codes and by its RaBitQ
//! codes (`quantization = none | sq8 | rabitq`), the same graph under all:
//! recall@10 against exact search beside single-thread QPS and the rows
//! each query re-ranks, per `ef_search`; and what the codes cost: encoding
//! time and bytes beside the rows'.
//! Each segment is opened as a search opens it: its index file decoded in
//! place over the file's bytes. A plain harness: building the graph takes
//! seconds, too long for Criterion's repeated sampling.
//!
//! `cargo bench -p milvus-core --bench quantized [-- ROWS DIMS METRIC QUERIES]`
//! (defaults 50000 768 cosine 500; METRIC is l2, ip or cosine).

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use milvus_core::Metric;
use milvus_core::cache::ObjectBytes;
use milvus_core::element::Row;
use milvus_core::format::Check;
use milvus_core::format::index;
use milvus_core::format::insert::{self, InsertBinlog};
use milvus_core::graph::segment::{HnswParams, SegmentIndex};
use milvus_core::quant::{Codes, Quantization};
use milvus_core::search::{LoadedSegment, RowsFrom};
use milvus_core::segment::SegmentId;
use milvus_core::synthetic::gaussian_mixture;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let rows: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let dims: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(768);
    let metric = match args.get(2).map(String::as_str) {
        Some("l2") => Metric::L2,
        Some("ip") => Metric::InnerProduct,
        _ => Metric::Cosine,
    };
    let queries: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(500);
    let data = gaussian_mixture(rows + queries, dims, 1000, 0.1, 42);
    let (base, held_out) = data.split_at(rows * dims);
    let keys: Vec<u64> = (0..rows as u64).collect();
    let binlog_bytes = insert::encode(SegmentId(1), metric, dims, &keys, base);
    let binlog = InsertBinlog::decode("bench", &binlog_bytes).unwrap();

    let t = Instant::now();
    let params = HnswParams { quantization: Quantization::None, ..HnswParams::default() };
    let index = SegmentIndex::build(&binlog, params, &AtomicBool::new(false)).unwrap();
    let build = t.elapsed().as_secs_f64();
    let without = index::encode(SegmentId(1), metric, &index.to_flat(), None);
    println!("{rows} x {dims} {metric:?}: graph built in {build:.2} s");
    let row_bytes = rows * dims * 4;
    println!("bytes: rows {row_bytes}, graph {}", without.len());
    let mut files = vec![("rows", without.clone())];
    for (name, quantization) in [("sq8 codes", Quantization::Sq8), ("rabitq codes", Quantization::RaBitQ)] {
        let t = Instant::now();
        let codes =
            Codes::encode(quantization, metric, dims, binlog.vectors(), &AtomicBool::new(false)).unwrap().unwrap();
        let encode = t.elapsed().as_secs_f64();
        println!(
            "{name}: encoded in {encode:.2} s, {} bytes ({:.3} of the rows; graph and codes {:.3})",
            codes.bytes(),
            codes.bytes() as f64 / row_bytes as f64,
            (codes.bytes() + without.len()) as f64 / row_bytes as f64
        );
        files.push((name, index::encode(SegmentId(1), metric, &index.to_flat(), Some(&codes))));
    }

    let open = |file: &[u8]| {
        let binlog = RowsFrom::Binlog("binlog", ObjectBytes::Memory(binlog_bytes.clone()));
        LoadedSegment::open(binlog, Some(("index".into(), ObjectBytes::Memory(file.to_vec()))), vec![], Check::Full)
            .unwrap()
    };
    let segments: Vec<(&str, LoadedSegment)> = files.iter().map(|(name, file)| (*name, open(file))).collect();

    let truth: Vec<HashSet<u64>> = held_out
        .chunks(dims)
        .map(|q| {
            let mut all: Vec<(f32, u64)> =
                (0..rows).map(|r| (metric.between(Row::F32(q), binlog.vector(r)), keys[r])).collect();
            all.select_nth_unstable_by(9, |a, b| a.0.total_cmp(&b.0));
            all[..10].iter().map(|e| e.1).collect()
        })
        .collect();
    println!("| ef_search | walk | recall@10 | QPS | rows re-ranked per query |");
    println!("|---:|---|---:|---:|---:|");
    for ef in [10, 20, 40, 100, 200] {
        for (name, segment) in &segments {
            let (mut hits, mut read) = (0, 0);
            let t = Instant::now();
            for (q, want) in held_out.chunks(dims).zip(&truth) {
                let (found, reads) = segment.search_counted(Row::F32(q), 10, ef, &|_| false).unwrap();
                hits += found.iter().filter(|h| want.contains(&h.key)).count();
                read += reads.reranked;
            }
            let elapsed = t.elapsed().as_secs_f64();
            let read =
                if segment.codes().is_some() { format!("{:.0}", read as f64 / queries as f64) } else { "-".into() };
            println!(
                "| {ef} | {name} | {:.3} | {:.0} | {read} |",
                hits as f64 / (10 * queries) as f64,
                queries as f64 / elapsed
            );
        }
    }
}
