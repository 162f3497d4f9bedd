//! The growing scan: the per-row cost of reading page-resident rows (the
//! growing segment and sealed segments not yet flushed) and computing their
//! distances to the query, over pages in Postgres' layout
//! (`milvus_core::format::page`), against the distance kernel alone over the
//! same rows held contiguously. Throughput is in rows, so Criterion's
//! time per element is the ns/row docs/benchmarks.md records.
//!
//! Run with `make bench-core`.

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use milvus_core::Metric;
use milvus_core::format::page::{RowPage, row_pages};
use milvus_core::search::PageHits;
use milvus_core::synthetic::Rng;

/// What a growing segment holds at its default size (`growing_max_rows`).
const ROWS: usize = 2048;

fn growing_scan(c: &mut Criterion) {
    let mut group = c.benchmark_group("growing_scan");
    group.throughput(Throughput::Elements(ROWS as u64));
    for dims in [128usize, 768] {
        let mut rng = Rng::new(dims as u64);
        let vectors = rng.vector(ROWS * dims);
        let query = rng.vector(dims);
        let pages = row_pages(dims, &vectors);
        let metric = Metric::L2;
        group.bench_with_input(BenchmarkId::new("kernel", dims), &dims, |b, _| {
            b.iter(|| {
                let mut hits = PageHits::default();
                for (key, v) in vectors.chunks_exact(dims).enumerate() {
                    hits.push(key as u64, metric.distance(black_box(&query), v));
                }
                hits
            })
        });
        group.bench_with_input(BenchmarkId::new("pages", dims), &dims, |b, _| {
            b.iter(|| {
                let mut hits = PageHits::default();
                for page in &pages {
                    RowPage::new(page.bytes(), dims).unwrap().distances(metric, black_box(&query), &mut hits).unwrap();
                }
                hits
            })
        });
    }
    group.finish();
}

criterion_group!(benches, growing_scan);
criterion_main!(benches);
