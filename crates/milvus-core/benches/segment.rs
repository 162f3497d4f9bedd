//! Segment-level costs (Criterion): binlog encode/decode throughput, the
//! k-way merge of 8 segments' results, and one query by brute force against
//! one by HNSW at growing segment sizes: the crossover below which brute
//! force wins sets `search::BRUTE_FORCE_MAX_ROWS`; what loading an
//! index's segments costs a backend, one at a time against several at once;
//! a query whose rows are read by range against one on a mapped binlog;
//! and a filter's bitset over a segment's integer column.
//!
//! Run with `make bench-core`; results in docs/benchmarks.md.

use std::sync::atomic::AtomicBool;

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use milvus_core::Metric;
use milvus_core::cache::SegmentCache;
use milvus_core::element::{Row, Vectors};
use milvus_core::filter::{Cmp, Column, ColumnType, Filter, Key, Test, Value};
use milvus_core::format::insert::{self, InsertBinlog};
use milvus_core::format::manifest::Manifest;
use milvus_core::graph::segment::{HnswParams, SegmentIndex};
use milvus_core::jobs::{self, IndexId, JobControl, NewSegment, Target};
use milvus_core::search::{Hit, LoadedSegment, Source, merge};
use milvus_core::segment::{SealReason, SegmentId};
use milvus_core::storage::{RetryPolicy, S3Options, Storage};
use milvus_core::synthetic::{Rng, gaussian_mixture};

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
    g.bench_function("encode", |b| {
        b.iter(|| insert::encode(SegmentId(1), Metric::L2, DIMS, black_box(&keys), black_box(&vectors)))
    });
    g.bench_function("decode_verify", |b| b.iter(|| InsertBinlog::decode("o", black_box(&bytes)).unwrap().len()));
    g.finish();
}

fn merging(c: &mut Criterion) {
    let mut rng = Rng::new(3);
    let lists: Vec<Vec<Hit>> = (0..8u64)
        .map(|s| {
            let mut l: Vec<Hit> = (0..100u32)
                .map(|row| Hit {
                    source: Source::Segment(SegmentId(s)),
                    row,
                    key: row as u64,
                    distance: rng.next_f32().abs(),
                })
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
            bench.iter(|| brute.search(Row::F32(black_box(&query)), 10, 40, &|_| false).unwrap())
        });
        // What queries search: the flat graph.
        let flat = index.to_flat();
        g.bench_with_input(BenchmarkId::new("graph_ef40", rows), &rows, |bench, _| {
            bench.iter(|| {
                flat.search(Metric::L2, Row::F32(black_box(&query)), &|r| b.vector(r as usize), 10, 40, &|_| false)
            })
        });
    }
    g.finish();
}

/// Four flushed segments of 20,000 rows (each with its HNSW graph) in a
/// file:// store, cache warm: what a new backend pays before its first
/// search, opening them (maps and header checks) one by one and on two
/// threads (`jobs::load_all`).
fn loading(c: &mut Criterion) {
    let (segments, rows) = (4, 20_000);
    let dir = tempfile::tempdir().unwrap();
    let storage = std::sync::Arc::new(
        Storage::open(
            &format!("file://{}", dir.path().join("objects").display()),
            &S3Options::default(),
            RetryPolicy::default(),
        )
        .unwrap(),
    );
    let cache = SegmentCache::new(dir.path().join("cache"), 1 << 32).unwrap();
    let id = IndexId { cluster: 1, database: 1, index: 1 };
    let mut m = Manifest::new(DIMS as u32, Metric::L2, None);
    for s in 0..segments {
        let segment = m.add_growing(0);
        m.seal(segment, rows as u64, SealReason::Manual, 0).unwrap();
        let keys: Vec<u64> = (0..rows as u64).collect();
        let vectors = gaussian_mixture(rows, DIMS, 100, 0.1, s as u64);
        let params = HnswParams::default();
        let rows = NewSegment {
            segment,
            metric: Metric::L2,
            dims: DIMS,
            keys: &keys,
            vectors: Vectors::F32(vectors[..].into()),
            params,
            graph_min_rows: 0,
            seed: None,
            columns: &[],
        };
        let to = Target { storage: &storage, cache: &cache, index: id };
        let flushed = jobs::flush(to, &rows, &JobControl::default()).unwrap();
        m.publish_flush(flushed, 0).unwrap();
    }
    let entries: Vec<_> = m.live_segments().cloned().collect();
    let mut g = c.benchmark_group("load_4_segments_20k_x_128");
    g.sample_size(10);
    for threads in [1usize, 2] {
        g.bench_with_input(BenchmarkId::new("threads", threads), &threads, |b, &threads| {
            b.iter(|| {
                jobs::load_all(&storage, &cache, &entries, Metric::L2, threads, false)
                    .into_iter()
                    .map(|l| l.unwrap().live_rows())
                    .sum::<usize>()
            })
        });
    }
    g.finish();
}

/// One query (top 10, ef 40) on one flushed segment of 20,000 rows of 768
/// dimensions under cosine, with codes, in a file:// store: its binlog
/// mapped from the cache, against its rows read by range from the store
/// (a cache too small for the segment: only the index file and the read
/// index local).
fn by_range(c: &mut Criterion) {
    let (rows, dims) = (20_000, 768);
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("objects").display());
    let storage = std::sync::Arc::new(Storage::open(&url, &S3Options::default(), RetryPolicy::default()).unwrap());
    let cache = SegmentCache::new(dir.path().join("cache"), 1 << 32).unwrap();
    let mut m = Manifest::new(dims as u32, Metric::Cosine, None);
    let segment = m.add_growing(0);
    m.seal(segment, rows as u64, SealReason::Manual, 0).unwrap();
    let keys: Vec<u64> = (0..rows as u64).collect();
    let vectors = gaussian_mixture(rows + 100, dims, 200, 0.1, 9);
    let new = NewSegment {
        segment,
        metric: Metric::Cosine,
        dims,
        keys: &keys,
        vectors: Vectors::F32(vectors[..rows * dims].into()),
        params: HnswParams::default(),
        graph_min_rows: 0,
        seed: None,
        columns: &[],
    };
    let to = Target { storage: &storage, cache: &cache, index: IndexId { cluster: 1, database: 1, index: 1 } };
    m.publish_flush(jobs::flush(to, &new, &JobControl::default()).unwrap(), 0).unwrap();
    let entries: Vec<_> = m.live_segments().cloned().collect();
    let index_bytes = entries[0].index_file.as_ref().unwrap().size;
    let small = SegmentCache::new(dir.path().join("small"), index_bytes + (1 << 20)).unwrap();
    let load = |cache: &SegmentCache| {
        let by_range = jobs::rows_by_range(cache, &entries);
        jobs::load_all(&storage, cache, &entries, Metric::Cosine, 1, by_range).pop().unwrap().unwrap()
    };
    let queries: Vec<&[f32]> = vectors[rows * dims..].chunks(dims).collect();
    let mut g = c.benchmark_group("one_query_768_cosine_20k");
    for (name, segment) in [("binlog_mapped", load(&cache)), ("rows_by_range", load(&small))] {
        assert_eq!(segment.reads_by_range(), name == "rows_by_range");
        let mut i = 0;
        g.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 1) % queries.len();
                segment.search(Row::F32(black_box(queries[i])), 10, 40, &|_| false).unwrap().len()
            })
        });
    }
    g.finish();
}

/// A pushed filter evaluated over a segment's column of 100,000 integers
/// (`bucket = key % 1000`, `make bench`'s): the bitset of its passing rows,
/// which every filtered search builds for every segment it does not skip.
fn filtering(c: &mut Criterion) {
    let rows = 100_000;
    let values: Vec<Value> = (0..rows as i64).map(|k| Value::Int(k % 1000)).collect();
    let columns = [Column::build(ColumnType::Int, &values).unwrap()];
    let mut g = c.benchmark_group("filter_100k_ints");
    g.throughput(Throughput::Elements(rows as u64));
    for (name, test) in [
        ("eq_0.1%", Test::Cmp(Cmp::Eq, Value::Int(7))),
        ("lt_1%", Test::Cmp(Cmp::Lt, Value::Int(10))),
        ("lt_10%", Test::Cmp(Cmp::Lt, Value::Int(100))),
        ("lt_40%", Test::Cmp(Cmp::Lt, Value::Int(400))),
        ("lt_60%", Test::Cmp(Cmp::Lt, Value::Int(600))),
        ("in_3", Test::In(vec![Value::Int(3), Value::Int(300), Value::Int(900)])),
    ] {
        let filter = Filter { keys: vec![Key { column: 0, test }] };
        g.bench_function(name, |b| b.iter(|| black_box(&filter).matches(&columns, rows).count()));
    }
    g.finish();
}

criterion_group!(benches, formats, merging, crossover, loading, by_range, filtering);
criterion_main!(benches);
