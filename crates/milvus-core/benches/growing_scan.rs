//! The growing scan: the per-row cost of reading page-resident rows (the
//! growing segment and sealed segments not yet flushed) and computing their
//! distances to the query, over pages in Postgres' layout
//! (`milvus_core::format::page`), against the distance kernel alone over the
//! same rows held contiguously; for `vector` rows (f32), `halfvec` rows
//! (f16, `half/` in the names) and `bit` rows under Hamming (`bit/`). Throughput is in rows, so Criterion's time
//! per element is the ns/row docs/benchmarks.md records.
//!
//! Run with `make bench-core`.

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use milvus_core::Metric;
use milvus_core::element::{Element, Row, Shape, Vectors, f16, pack_bits};
use milvus_core::format::page::{RowPage, row_pages};
use milvus_core::search::PageHits;
use milvus_core::synthetic::Rng;

/// What a growing segment holds at its default size (`growing_max_rows`).
const ROWS: usize = 2048;

fn growing_scan(c: &mut Criterion) {
    let mut group = c.benchmark_group("growing_scan");
    group.throughput(Throughput::Elements(ROWS as u64));
    let shapes =
        [(Element::F32, 128usize), (Element::F32, 768), (Element::F16, 128), (Element::F16, 768), (Element::Bit, 768)];
    for (element, dims) in shapes {
        let shape = Shape::new(dims, element);
        let mut rng = Rng::new(dims as u64);
        let as_stored = |v: Vec<f32>| -> Vectors<'static> {
            match element {
                Element::F32 => v.into(),
                Element::F16 => v.iter().map(|x| f16::from_f32(*x)).collect::<Vec<_>>().into(),
                Element::Bit => Vectors::Bit(
                    v.chunks(dims).flat_map(|r| pack_bits(&r.iter().map(|x| *x > 0.0).collect::<Vec<_>>())).collect(),
                ),
                Element::Sparse => unreachable!("dense shapes"),
            }
        };
        let vectors = as_stored(rng.vector(ROWS * dims));
        let query = as_stored(rng.vector(dims));
        let pages = row_pages(shape, &vectors);
        let metric = if element == Element::Bit { Metric::Hamming } else { Metric::L2 };
        let name = |what: &str| match element {
            Element::F32 => what.to_owned(),
            Element::F16 => format!("half/{what}"),
            Element::Bit => format!("bit/{what}"),
            Element::Sparse => unreachable!("dense shapes"),
        };
        // The kernel alone: the element type matched once, rows contiguous.
        group.bench_with_input(BenchmarkId::new(name("kernel"), dims), &dims, |b, _| {
            b.iter(|| {
                let mut hits = PageHits::default();
                match (black_box(&query), &vectors) {
                    (Vectors::F32(q), Vectors::F32(v)) => {
                        for (key, row) in v.chunks_exact(dims).enumerate() {
                            hits.push(key as u64, metric.distance(q, row));
                        }
                    }
                    (Vectors::F16(q), Vectors::F16(v)) => {
                        for (key, row) in v.chunks_exact(dims).enumerate() {
                            hits.push(key as u64, metric.distance_f16(q, row));
                        }
                    }
                    (Vectors::Bit(q), Vectors::Bit(v)) => {
                        for (key, row) in v.chunks_exact(shape.bytes()).enumerate() {
                            hits.push(key as u64, metric.distance_bits(q, row));
                        }
                    }
                    _ => unreachable!("the query and the rows have one element type"),
                }
                hits
            })
        });
        group.bench_with_input(BenchmarkId::new(name("pages"), dims), &dims, |b, _| {
            b.iter(|| {
                let mut hits = PageHits::default();
                let query: Row = black_box(query.all());
                for page in &pages {
                    RowPage::new(page.bytes(), shape)
                        .unwrap()
                        .distances(metric, query, |k, d| hits.push(k, d))
                        .unwrap();
                }
                hits
            })
        });
    }
    group.finish();
}

criterion_group!(benches, growing_scan);
criterion_main!(benches);
