//! A multicolumn index's segments through their life on a real store: rows
//! flushed with their filter columns (a scalar binlog beside each insert
//! binlog), tombstoned, loaded and searched with a filter, merged (the
//! columns follow their rows) or clustered by a column, and searched again; every filtered answer
//! checked against the rows a sequential scan keeps.

use std::collections::HashSet;
use std::sync::Arc;

use milvus_core::Metric;
use milvus_core::cache::SegmentCache;
use milvus_core::element::{Row, Vectors};
use milvus_core::filter::{Bitset, Cmp, Column, ColumnType, Filter, Key, Test, Value};
use milvus_core::format::manifest::Manifest;
use milvus_core::graph::segment::HnswParams;
use milvus_core::jobs::{self, IndexId, JobControl, Merge, NewSegment, Target};
use milvus_core::search::PageHits;
use milvus_core::search::{LoadedSegment, Search, SearchOptions};
use milvus_core::segment::SealReason;
use milvus_core::storage::{RetryPolicy, S3Options, Storage};
use milvus_core::synthetic::{Rng, gaussian_mixture};

const DIMS: usize = 16;
const SEGMENTS: usize = 3;
const ROWS: usize = 6000;
const ID: IndexId = IndexId { cluster: 0x7301_0000_0000_0002, database: 1, index: 16385 };

/// A row's tenant (one of 200: 0.5% of the rows each) and its labels.
fn tenant(key: u64) -> i64 {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as i64 % 200
}

fn labels(key: u64) -> Value {
    match key % 5 {
        0 => Value::Null,
        k => Value::Texts((0..k).map(|i| format!("l{}", (key + i) % 7)).collect()),
    }
}

fn deleted(key: u64) -> bool {
    key % 9 == 4
}

fn columns(keys: &[u64]) -> Vec<Column> {
    let tenants: Vec<Value> = keys.iter().map(|k| Value::Int(tenant(*k))).collect();
    let labels: Vec<Value> = keys.iter().map(|k| labels(*k)).collect();
    vec![Column::build(ColumnType::Int, &tenants).unwrap(), Column::build(ColumnType::TextArray, &labels).unwrap()]
}

fn merge_of<'a>(inputs: &'a [&'a LoadedSegment], outputs: &'a [milvus_core::segment::SegmentId]) -> Merge<'a> {
    Merge { inputs, outputs, cluster_by: None, metric: Metric::L2, dims: DIMS, params: HnswParams::default() }
}

fn passes(filter: &Filter, key: u64) -> bool {
    filter.matches(&columns(&[key]), 1).contains(0)
}

/// Every filtered answer against brute force: only passing rows, every
/// passing row once, the first ten exactly a sequential scan's at the 0.5%
/// filter, and at the labels filter (about 40% of rows) most of them.
fn check(segments: &[Arc<LoadedSegment>], data: &[f32]) {
    let n = data.len() / DIMS;
    let mut rng = Rng::new(3);
    let (mut found, mut wanted) = (0, 0);
    for q in 0..12 {
        let query: Vec<f32> = data[(rng.next_u64() as usize % n) * DIMS..][..DIMS].to_vec();
        let by_tenant = Filter { keys: vec![Key { column: 0, test: Test::Cmp(Cmp::Eq, Value::Int(q * 13)) }] };
        let by_label = Filter { keys: vec![Key { column: 1, test: Test::Contains(vec![Value::Text("l3".into())]) }] };
        for (filter, exact) in [(by_tenant, true), (by_label, false)] {
            let mut truth: Vec<(f32, u64)> = (0..n as u64)
                .filter(|k| !deleted(*k) && passes(&filter, *k))
                .map(|k| (Metric::L2.between(Row::F32(&query), Row::F32(&data[k as usize * DIMS..][..DIMS])), k))
                .collect();
            truth.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let search =
                Search::new(query.clone().into(), PageHits::default(), segments.to_vec(), SearchOptions::default())
                    .filtered(&filter, Bitset::none(0));
            let all: Vec<(f32, u64)> = search.map(|h| h.unwrap()).map(|h| (h.distance, h.key)).collect();
            assert!(all.iter().all(|(_, k)| passes(&filter, *k) && !deleted(*k)));
            assert_eq!(all.len(), truth.len(), "every passing row, once");
            assert_eq!(all.iter().map(|h| h.1).collect::<HashSet<_>>().len(), truth.len());
            if exact {
                assert_eq!(all[..10.min(truth.len())], truth[..10.min(truth.len())], "{filter:?}");
            } else {
                let first: HashSet<u64> = all[..10].iter().map(|h| h.1).collect();
                found += truth[..10].iter().filter(|t| first.contains(&t.1)).count();
                wanted += 10;
            }
        }
    }
    assert!(found as f64 / wanted as f64 >= 0.9, "recall@10 under the labels filter: {found}/{wanted}");
}

#[test]
fn filter_columns_live_with_their_segments() {
    let storage = Arc::new(Storage::open("memory://", &S3Options::default(), RetryPolicy::default()).unwrap());
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = SegmentCache::new(cache_dir.path(), 1 << 30).unwrap();
    let control = JobControl::default();
    let to = Target { storage: &storage, cache: &cache, index: ID };
    let data = gaussian_mixture(SEGMENTS * ROWS, DIMS, 60, 0.1, 7);
    let mut m = Manifest::new(DIMS as u32, Metric::L2, None);
    for s in 0..SEGMENTS {
        let id = m.add_growing(1);
        m.seal(id, ROWS as u64, SealReason::Manual, 2).unwrap();
        let keys: Vec<u64> = (s * ROWS..(s + 1) * ROWS).map(|k| k as u64).collect();
        let rows = NewSegment {
            segment: id,
            metric: Metric::L2,
            dims: DIMS,
            keys: &keys,
            vectors: Vectors::F32(data[s * ROWS * DIMS..(s + 1) * ROWS * DIMS].into()),
            params: HnswParams::default(),
            graph_min_rows: 0,
            seed: None,
            columns: &columns(&keys),
        };
        let flushed = jobs::flush(to, &rows, &control).unwrap();
        assert!(flushed.scalar_binlog.as_ref().is_some_and(|o| o.key.contains("/scalar-")));
        m.publish_flush(flushed, 3).unwrap();
        let dead: Vec<u32> = (0..ROWS as u32).filter(|r| deleted(keys[*r as usize])).collect();
        let delta = jobs::write_tombstones(&storage, ID, id, &dead).unwrap();
        m.add_tombstones(id, delta, dead.len() as u64).unwrap();
    }
    m = Manifest::decode("manifest", &m.encode()).unwrap();
    assert_eq!(m.referenced_keys().filter(|k| k.contains("/scalar-")).count(), SEGMENTS, "the manifest keeps them");
    let entries: Vec<_> = m.live_segments().cloned().collect();
    let load = |entries: &[_]| -> Vec<Arc<LoadedSegment>> {
        jobs::load_all(&storage, &cache, entries, Metric::L2, 2, false)
            .into_iter()
            .map(|l| Arc::new(l.unwrap()))
            .collect()
    };
    let loaded = load(&entries);
    for segment in &loaded {
        assert_eq!(segment.columns(), columns(segment.keys()).as_slice(), "row for row");
    }
    check(&loaded, &data);

    // A clustering of all three by tenant: the same rows, each tenant in
    // one of three segments, which a tenant's filter searches alone.
    let inputs: Vec<&LoadedSegment> = loaded.iter().map(|s| &**s).collect();
    let mut clustered = m.clone();
    let outputs: Vec<_> = (0..SEGMENTS).map(|_| clustered.allocate_segment_id()).collect();
    let merge = Merge { cluster_by: Some(0), ..merge_of(&inputs, &outputs) };
    let written = jobs::compact(to, &merge, &control).unwrap().segments;
    let ids: Vec<_> = entries.iter().map(|e| e.meta.id).collect();
    clustered.publish_compaction(&ids, written, true, 4).unwrap();
    let clustered = load(&clustered.live_segments().cloned().collect::<Vec<_>>());
    assert_eq!(clustered.len(), SEGMENTS);
    for t in 0..200 {
        let one = Filter { keys: vec![Key { column: 0, test: Test::Cmp(Cmp::Eq, Value::Int(t)) }] };
        let searched = clustered.iter().filter(|s| !one.excludes(s.column_stats())).count();
        assert!(searched <= 2, "tenant {t}: {searched} segments searched");
    }
    check(&clustered, &data);

    // A merge of all three: the dead rows go, the columns follow the rest.
    let out = m.allocate_segment_id();
    let outputs = [out];
    let merge = merge_of(&inputs, &outputs);
    let flushed = jobs::compact(to, &merge, &control).unwrap().segments.remove(0);
    m.publish_compaction(&ids, vec![flushed], false, 4).unwrap();
    let merged = load(&m.live_segments().cloned().collect::<Vec<_>>());
    assert_eq!(merged.len(), 1);
    assert!(merged[0].keys().iter().all(|k| !deleted(*k)));
    assert_eq!(merged[0].columns(), columns(merged[0].keys()).as_slice(), "the columns follow their rows");
    check(&merged, &data);
}
