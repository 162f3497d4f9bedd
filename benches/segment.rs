//! Segment-level costs (Criterion): binlog encode/decode throughput, the
//! k-way merge of 8 segments' results, and one query by brute force against
//! one by HNSW at growing segment sizes: the crossover below which brute
//! force wins sets `search::BRUTE_FORCE_MAX_ROWS`.
//!
//! Run with `make bench-core`; results in docs/benchmarks.md.

use std::sync::atomic::AtomicBool;

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use milvus_core::format::insert::{self, InsertBinlog};
use milvus_core::hnsw::{HnswParams, SegmentIndex};
use milvus_core::search::{Hit, LoadedSegment, Source, merge};
use milvus_core::segment::SegmentId;
use milvus_core::synthetic::{Rng, gaussian_mixture};
use milvus_core::Metric;

const DIMS: usize = 128;

fn binlog(rows: usize, seed: u64) -> Vec<u8> {
    let keys: Vec<u64> = (0..rows as u64).collect();
    insert::encode(SegmentId(1), Metric::L2, DIMS, &keys, &gaussian_mixture(rows, DIMS, 100, 0.1, seed))
}

fn formats(c: &mut Criterion) {
    let rows = 10_000;
    let keys: Vec<u64> = (0..rows as u64).collect();
    let vectors = gaussian_mixture(rows, DIMS, 100, 0.1, 1);
    let bytes = insert::encode(SegmentId(1), Metric::L2, DIMS, &keys, &vectors);
    let mut g = c.benchmark_group("insert_binlog_10k_x_128");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("encode", |b| b.iter(|| insert::encode(SegmentId(1), Metric::L2, DIMS, black_box(&keys), black_box(&vectors))));
    g.bench_function("decode_verify", |b| b.iter(|| InsertBinlog::decode("o", black_box(&bytes)).unwrap().len()));
    g.finish();
}

fn merging(c: &mut Criterion) {
    let mut rng = Rng::new(3);
    let lists: Vec<Vec<Hit>> = (0..8u64)
        .map(|s| {
            let mut l: Vec<Hit> = (0..100u32)
                .map(|row| Hit { source: Source::Segment(SegmentId(s)), row, key: row as u64, distance: rng.next_f32().abs() })
                .collect();
            l.sort_by(|a, b| a.distance.total_cmp(&b.distance));
            l
        })
        .collect();
    let mut g = c.benchmark_group("merge_8_segments_x_100");
    for k in [10usize, 100] {
        g.bench_with_input(BenchmarkId::new("top", k), &k, |b, k| b.iter(|| merge(black_box(lists.clone()), *k)));
    }
    g.finish();
}

fn crossover(c: &mut Criterion) {
    let mut g = c.benchmark_group("one_query_top10");
    for rows in [512usize, 1024, 2048, 4096, 8192] {
        let bytes = binlog(rows, rows as u64);
        let b = InsertBinlog::decode("o", &bytes).unwrap().into_owned();
        let index = SegmentIndex::build(&b, HnswParams::default(), &AtomicBool::new(false)).unwrap();
        let brute = LoadedSegment::new(b.clone(), None, vec![]);
        let query = Rng::new(9).vector(DIMS);
        g.bench_with_input(BenchmarkId::new("brute_force", rows), &rows, |bench, _| {
            bench.iter(|| brute.search(black_box(&query), 10, 40, &|_, _| false))
        });
        g.bench_with_input(BenchmarkId::new("hnsw_ef40", rows), &rows, |bench, _| {
            bench.iter(|| index.search(black_box(&query), 10, 40, &|_| false))
        });
    }
    g.finish();
}

criterion_group!(benches, formats, merging, crossover);
criterion_main!(benches);
