//! Distance kernels: simsimd (what the product runs) against the scalar `f64`
//! reference, at the dimensions of common embedding models.
//!
//! Run with `make bench-core`; results are recorded in docs/benchmarks.md.

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use milvus_core::Metric;
use milvus_core::distance::reference;
use milvus_core::synthetic::Rng;

fn kernels(c: &mut Criterion) {
    for metric in Metric::ALL {
        let mut group = c.benchmark_group(format!("{metric:?}"));
        for dim in [128usize, 384, 768, 1536] {
            let mut rng = Rng::new(dim as u64);
            let (a, b) = (rng.vector(dim), rng.vector(dim));
            group.throughput(Throughput::Elements(dim as u64));
            group.bench_with_input(BenchmarkId::new("simsimd", dim), &dim, |bench, _| {
                bench.iter(|| metric.distance(black_box(&a), black_box(&b)))
            });
            group.bench_with_input(BenchmarkId::new("scalar", dim), &dim, |bench, _| {
                bench.iter(|| reference::distance(metric, black_box(&a), black_box(&b)))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, kernels);
criterion_main!(benches);
