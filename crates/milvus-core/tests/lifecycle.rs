//! The whole segment lifecycle in the core, on real stores: flush five
//! segments, delete 10%, search, compact, search again, collect garbage.
//! Run on `memory://` and on `file://` (a real directory).

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use milvus_core::Metric;
use milvus_core::cache::SegmentCache;
use milvus_core::element::Vectors;
use milvus_core::format::manifest::Manifest;
use milvus_core::graph::segment::HnswParams;
use milvus_core::jobs::{self, IndexId, JobControl, Merge, NewSegment, Target};
use milvus_core::pause;
use milvus_core::policy::compaction::{self, CompactionPolicy, PlanKind};
use milvus_core::search::PageHits;
use milvus_core::search::{LoadedSegment, Search, SearchOptions};
use milvus_core::segment::{SealReason, SegmentState};
use milvus_core::storage::{RetryPolicy, S3Options, Storage};
use milvus_core::synthetic::Rng;

const DIMS: usize = 24;
const SEGMENTS: usize = 5;
const ROWS_PER_SEGMENT: usize = 10_000;
const ID: IndexId = IndexId { cluster: 0x7301_0000_0000_0001, database: 1, index: 16384 };

thread_local! {
    /// Where [`crash_where_asked`] crashes the job on this thread.
    static CRASH_AT: std::cell::Cell<Option<pause::Point>> = const { std::cell::Cell::new(None) };
}

/// The test hook: a panic at the point this thread asked for, the crash a
/// test simulates (other threads' tests are not touched).
fn crash_where_asked(point: pause::Point, _: &AtomicBool) {
    if CRASH_AT.get() == Some(point) {
        panic!("the crash a test simulates at {point:?}");
    }
}

/// 200 Gaussian clusters: shaped like real embeddings, unlike uniform noise.
fn dataset(n: usize) -> Vec<f32> {
    milvus_core::synthetic::gaussian_mixture(n, DIMS, 200, 0.1, 2026)
}

/// A pseudo-random 10% of rows, independent of cluster and segment.
fn is_deleted(key: u64) -> bool {
    key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32 < (u32::MAX as u64) / 10
}

/// Every live segment, loaded three at a time (the order is the manifest's).
fn load_all(storage: &Arc<Storage>, cache: &SegmentCache, m: &Manifest) -> Vec<Arc<LoadedSegment>> {
    let entries: Vec<_> = m.live_segments().cloned().collect();
    let by_range = jobs::rows_by_range(cache, &entries);
    let loaded = jobs::load_all(storage, cache, &entries, Metric::L2, 3, by_range);
    assert_eq!(loaded.len(), entries.len());
    entries
        .iter()
        .zip(loaded)
        .map(|(e, l)| {
            let l = l.expect("segment loads");
            assert_eq!(l.id, e.meta.id, "in the manifest's order");
            Arc::new(l)
        })
        .collect()
}

/// recall@10 of the index search against exact search over live rows, and
/// a check that no dead row is ever returned.
fn check_search(segments: &[Arc<LoadedSegment>], data: &[f32], deleted: &dyn Fn(u64) -> bool) -> f64 {
    let mut rng = Rng::new(7);
    let n = data.len() / DIMS;
    let (mut hits, mut total) = (0, 0);
    for _ in 0..50 {
        let q: Vec<f32> =
            data[(rng.next_u64() as usize % n) * DIMS..][..DIMS].iter().map(|x| x + 0.05 * rng.next_f32()).collect();
        let mut exact: Vec<(f32, u64)> = (0..n as u64)
            .filter(|k| !deleted(*k))
            .map(|k| (Metric::L2.distance(&q, &data[k as usize * DIMS..][..DIMS]), k))
            .collect();
        exact.sort_by(|a, b| a.0.total_cmp(&b.0));
        let truth: HashSet<u64> = exact.iter().take(10).map(|e| e.1).collect();
        let got: Vec<u64> = Search::new(q.into(), PageHits::default(), segments.to_vec(), SearchOptions::default())
            .take(10)
            .map(|h| h.expect("rows read").key)
            .collect();
        assert_eq!(got.len(), 10);
        assert!(got.iter().all(|k| !deleted(*k)), "a dead row was returned");
        hits += got.iter().filter(|k| truth.contains(k)).count();
        total += 10;
    }
    hits as f64 / total as f64
}

fn lifecycle(url: &str) {
    let storage = Arc::new(Storage::open(url, &S3Options::default(), RetryPolicy::default()).unwrap());
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = SegmentCache::new(cache_dir.path(), 1 << 30).unwrap();
    let control = JobControl::default();
    let to = Target { storage: &storage, cache: &cache, index: ID };
    let params = HnswParams::default();
    let data = dataset(SEGMENTS * ROWS_PER_SEGMENT);
    let mut m = Manifest::new(DIMS as u32, Metric::L2, None);

    // Five segments: grow, seal, flush (binlog + HNSW), publish.
    for s in 0..SEGMENTS {
        let id = m.add_growing(100);
        m.seal(id, ROWS_PER_SEGMENT as u64, SealReason::Rows { rows: 10_000, max_rows: 10_000 }, 101).unwrap();
        let keys: Vec<u64> = (s * ROWS_PER_SEGMENT..(s + 1) * ROWS_PER_SEGMENT).map(|k| k as u64).collect();
        let vectors = Vectors::F32(data[s * ROWS_PER_SEGMENT * DIMS..(s + 1) * ROWS_PER_SEGMENT * DIMS].into());
        let rows = NewSegment {
            segment: id,
            metric: Metric::L2,
            dims: DIMS,
            keys: &keys,
            vectors,
            params,
            graph_min_rows: 0,
            seed: None,
            columns: &[],
        };
        let flushed = jobs::flush(to, &rows, &control).unwrap();
        assert!(flushed.index_file.is_some());
        m.publish_flush(flushed, 102).unwrap();
    }
    // The manifest survives its own encoding (it is what gets persisted).
    m = Manifest::decode("manifest", &m.encode()).unwrap();
    let loaded = load_all(&storage, &cache, &m);
    assert!(loaded.iter().all(|s| s.is_mapped()), "searched in place");
    assert_eq!(cache.stats.misses.load(Ordering::Relaxed), 0, "the flushes cached what they wrote");
    let recall = check_search(&loaded, &data, &|_| false);
    assert!(recall >= 0.95, "recall@10 before deletes: {recall}");

    // Delete 10%: tombstones by row position, one delta binlog per segment.
    for entry in m.segments.clone() {
        let first_key = (entry.meta.id.0 as usize - 1) * ROWS_PER_SEGMENT;
        let rows: Vec<u32> =
            (0..ROWS_PER_SEGMENT as u32).filter(|r| is_deleted((first_key + *r as usize) as u64)).collect();
        let delta = jobs::write_tombstones(&storage, ID, entry.meta.id, &rows).unwrap();
        m.add_tombstones(entry.meta.id, delta, rows.len() as u64).unwrap();
    }
    let before = load_all(&storage, &cache, &m);
    let recall = check_search(&before, &data, &is_deleted);
    assert!(recall >= 0.95, "recall@10 after deletes: {recall}");

    // Compact: 10% deleted is under the purge ratio, but all five segments
    // are small against a 50,000-row target, so they merge into one.
    // Five segments of one tier, a fan-in of five: one merge of all.
    let policy =
        CompactionPolicy { delete_ratio: 0.2, target_rows: 50_000, min_rows: 10_000, fan_in: 5, clustering: false };
    let plans = compaction::plan(m.segments.iter().map(|e| &e.meta), &HashSet::new(), &policy);
    assert_eq!(plans.len(), 1, "{plans:?}");
    let dead = (0..(SEGMENTS * ROWS_PER_SEGMENT) as u64).filter(|k| is_deleted(*k)).count() as u64;
    assert!((4_000..6_000).contains(&dead), "about 10% deleted: {dead}");
    let live = (SEGMENTS * ROWS_PER_SEGMENT) as u64 - dead;
    assert_eq!(
        (plans[0].kind, plans[0].inputs.len(), plans[0].output_rows, plans[0].removed_rows),
        (PlanKind::Merge, 5, live, dead)
    );
    let old_keys: HashSet<String> = m.referenced_keys().map(str::to_owned).collect();
    let inputs: Vec<&LoadedSegment> = before.iter().filter(|s| plans[0].inputs.contains(&s.id)).map(|s| &**s).collect();
    let out = m.allocate_segment_id();
    let merge = Merge { inputs: &inputs, outputs: &[out], cluster_by: None, metric: Metric::L2, dims: DIMS, params };
    let flushed = jobs::compact(to, &merge, &control).unwrap().segments.remove(0);
    assert_eq!(flushed.rows, live, "dead rows are not carried over");
    m.publish_compaction(&plans[0].inputs, vec![flushed], false, 200).unwrap();
    assert_eq!(m.live_segments().count(), 1);
    assert!(m.segments.iter().filter(|s| s.meta.id != out).all(|s| s.meta.state == SegmentState::Dropped));

    let after = load_all(&storage, &cache, &m);
    assert_eq!(after[0].live_rows() as u64, live);
    assert_eq!(after[0].deleted_rows(), 0);
    let recall = check_search(&after, &data, &is_deleted);
    assert!(recall >= 0.95, "recall@10 after compaction: {recall}");

    // GC: nothing young is touched; past the grace period exactly the
    // compacted-away objects go, and everything referenced stays readable.
    let referenced: HashSet<String> = m.referenced_keys().map(str::to_owned).collect();
    let grace = Duration::from_secs(600);
    let now = SystemTime::now();
    let go_on = AtomicBool::new(false);
    let young = storage.collect_garbage(&ID.prefix(), &referenced, grace, now, &go_on).unwrap();
    assert!(young.deleted.is_empty());
    // A collection a crash cut short after its first deletion...
    pause::install(crash_where_asked);
    CRASH_AT.set(Some(pause::Point::GcDeleted));
    let cut = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        storage.collect_garbage(&ID.prefix(), &referenced, grace, now + 2 * grace, &go_on)
    }));
    CRASH_AT.set(None);
    assert!(cut.is_err(), "something was deleted, then the crash");
    // ...then a whole one: together, exactly the dropped segments' objects.
    let report = storage.collect_garbage(&ID.prefix(), &referenced, grace, now + 2 * grace, &go_on).unwrap();
    assert_eq!(report.deleted.len(), old_keys.len() - 1, "the first went before the crash");
    assert!(report.deleted.iter().all(|k| old_keys.contains(k)));
    assert_eq!(report.kept_referenced, referenced.len());
    assert_eq!(report.remaining, referenced, "what is left is what is referenced");
    for key in &referenced {
        storage.get(key).expect("a referenced object is never collected");
    }
    // The manifest forgets the dropped segments whose objects are gone, the
    // one deleted before the crash included.
    let dropped = m.segments.iter().filter(|s| s.meta.state == SegmentState::Dropped).count();
    assert!(dropped > 0);
    assert_eq!(m.forget_dropped(|k| !report.remaining.contains(k)), dropped);
    assert!(m.segments.iter().all(|s| s.meta.state != SegmentState::Dropped));
}

#[test]
fn lifecycle_on_memory_store() {
    lifecycle("memory://");
}

#[test]
fn lifecycle_on_file_store() {
    let dir = tempfile::tempdir().unwrap();
    lifecycle(&format!("file://{}", dir.path().join("objects").display()));
}

/// One segment of 6,000 rows flushed to a `memory://` store through a
/// fresh cache, and published. Keep `cache_dir` bound: it is removed when
/// dropped.
struct OneSegment {
    storage: Arc<Storage>,
    cache: SegmentCache,
    cache_dir: tempfile::TempDir,
    manifest: Manifest,
    data: Vec<f32>,
}

fn one_segment() -> OneSegment {
    one_segment_at("memory://")
}

fn one_segment_at(url: &str) -> OneSegment {
    let storage = Arc::new(Storage::open(url, &S3Options::default(), RetryPolicy::default()).unwrap());
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = SegmentCache::new(cache_dir.path(), 1 << 30).unwrap();
    let rows = 6000;
    let data = dataset(rows);
    let keys: Vec<u64> = (0..rows as u64).collect();
    let mut manifest = Manifest::new(DIMS as u32, Metric::L2, None);
    let id = manifest.add_growing(100);
    manifest.seal(id, rows as u64, SealReason::Manual, 101).unwrap();
    let rows = NewSegment {
        segment: id,
        metric: Metric::L2,
        dims: DIMS,
        keys: &keys,
        vectors: Vectors::F32(data[..].into()),
        params: HnswParams::default(),
        graph_min_rows: 0,
        seed: None,
        columns: &[],
    };
    let flushed = jobs::flush(Target { storage: &storage, cache: &cache, index: ID }, &rows, &JobControl::default());
    manifest.publish_flush(flushed.unwrap(), 102).unwrap();
    OneSegment { storage, cache, cache_dir, manifest, data }
}

/// An index flushed by 0.1 has index files of version 1 (hnsw_rs' dump):
/// they load with no REINDEX, are converted once per server into a cached
/// version 2 file that every later open maps, and answer as before.
#[test]
fn index_files_of_version_1_still_load() {
    let OneSegment { storage, cache, cache_dir: _dir, manifest: mut m, data } = one_segment();
    let current = load_all(&storage, &cache, &m);
    let recall = check_search(&current, &data, &|_| false);

    // Rewrite the segment's index file as 0.1 did: hnsw_rs' graph, dumped.
    let entry = m.segments[0].clone();
    let binlog_bytes = storage.get(&entry.insert_binlog.as_ref().unwrap().key).unwrap();
    let binlog = milvus_core::format::insert::InsertBinlog::decode("b", &binlog_bytes).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let old = milvus_core::graph::v0_1::hnsw_rs_dump_file(&binlog, HnswParams::default(), scratch.path()).unwrap();
    let old_ref = milvus_core::format::manifest::ObjectRef::of("0.1/index-file.hnsw", &old);
    storage.put(&old_ref.key, old.into()).unwrap();
    m.segments[0].index_file = Some(old_ref.clone());

    let fresh = tempfile::tempdir().unwrap();
    let cache = SegmentCache::new(fresh.path(), 1 << 30).unwrap();
    let upgraded = load_all(&storage, &cache, &m);
    assert!(upgraded[0].is_mapped(), "the converted file is mapped too");
    assert!(cache.path_of("0.1/index-file.hnsw.v2").exists(), "converted once, cached");
    assert!(
        std::fs::read_dir(fresh.path().join("unpacked")).map_or(true, |mut d| d.next().is_none()),
        "the dump is not left unpacked"
    );
    let upgraded_recall = check_search(&upgraded, &data, &|_| false);
    assert!(upgraded_recall >= 0.95 && (upgraded_recall - recall).abs() < 0.05, "{upgraded_recall} against {recall}");

    // Another backend of the server maps the converted file: no reload.
    let other = SegmentCache::new(fresh.path(), 1 << 30).unwrap();
    load_all(&storage, &other, &m);
    assert_eq!(other.stats.misses.load(Ordering::Relaxed), 0, "everything was in the cache, the conversion too");
}

/// An index flushed before codes has index files of version 2: they load
/// as they are and are searched on their rows, with the recall of the
/// current files, which carry codes.
#[test]
fn index_files_of_version_2_load_without_codes() {
    use milvus_core::format::Check;
    use milvus_core::format::index::{self, IndexFile};
    let OneSegment { storage, cache, cache_dir: _dir, manifest: mut m, data } = one_segment();
    let current = load_all(&storage, &cache, &m);
    assert!(current[0].codes().is_some(), "files written today carry codes");
    let recall = check_search(&current, &data, &|_| false);

    let entry = m.segments[0].clone();
    let bytes = storage.get(&entry.index_file.as_ref().unwrap().key).unwrap();
    let IndexFile::Flat { segment, metric, graph, .. } = IndexFile::decode("i", &bytes, Check::Full).unwrap() else {
        panic!("a current index file")
    };
    let old = index::encode_version(index::VERSION_FLAT, segment, metric, &graph, None);
    let old_ref = milvus_core::format::manifest::ObjectRef::of("0.2/index-file.hnsw", &old);
    storage.put(&old_ref.key, old.into()).unwrap();
    m.segments[0].index_file = Some(old_ref);

    let fresh = tempfile::tempdir().unwrap();
    let loaded = load_all(&storage, &SegmentCache::new(fresh.path(), 1 << 30).unwrap(), &m);
    assert!(loaded[0].codes().is_none() && loaded[0].is_mapped());
    let old_recall = check_search(&loaded, &data, &|_| false);
    assert!(old_recall >= 0.95 && (old_recall - recall).abs() < 0.02, "{old_recall} against {recall}");
}

/// A segment in use is pinned: eviction leaves its files while a backend
/// maps them, and removes them once nobody does; the next open fetches
/// them again.
#[test]
fn a_segment_in_use_is_pinned_against_eviction() {
    let OneSegment { storage, cache, cache_dir, manifest: m, data } = one_segment();
    let loaded = load_all(&storage, &cache, &m);
    let before = check_search(&loaded, &data, &|_| false);
    let tiny = SegmentCache::new(cache_dir.path(), 0).unwrap();
    assert_eq!(tiny.evict().unwrap(), 0, "binlog and index file are mapped");
    assert_eq!(check_search(&loaded, &data, &|_| false), before);
    drop(loaded);
    assert_eq!(tiny.evict().unwrap(), 2, "unpinned, unlinked");
    assert_eq!(tiny.size().unwrap(), 0);
    let again = load_all(&storage, &cache, &m);
    assert_eq!(cache.stats.misses.load(Ordering::Relaxed), 2, "fetched again");
    assert_eq!(check_search(&again, &data, &|_| false), before);
}

/// A cached file damaged after it entered the cache: a bad header is
/// caught when a backend opens it (dropped and fetched again), a bad body
/// by the full check `milvus_prewarm()` runs, which drops it too.
#[test]
fn damaged_cache_files_are_found_and_fetched_again() {
    let OneSegment { storage, cache, cache_dir: _dir, manifest: m, data } = one_segment();
    let recall = check_search(&load_all(&storage, &cache, &m), &data, &|_| false);
    let index_ref = m.segments[0].index_file.clone().unwrap();
    let path = cache.path_of(&index_ref.key);
    let good = std::fs::read(&path).unwrap();

    let mut bad_header = good.clone();
    bad_header[20] ^= 1;
    std::fs::write(&path, &bad_header).unwrap();
    assert_eq!(check_search(&load_all(&storage, &cache, &m), &data, &|_| false), recall);
    assert_eq!(std::fs::read(&path).unwrap(), good, "replaced by a fresh download");

    let mut bad_body = good.clone();
    let last = bad_body.len() - 1;
    bad_body[last] ^= 1;
    std::fs::write(&path, &bad_body).unwrap();
    let e = cache.verify_entry(&index_ref).unwrap_err().to_string();
    assert!(e.contains("is corrupt: checksum"), "{e}");
    assert!(!path.exists(), "dropped");
    assert!(!cache.verify_entry(&index_ref).unwrap(), "not cached any more");
    load_all(&storage, &cache, &m);
    assert!(cache.verify_entry(&index_ref).unwrap(), "fetched again, whole");
}

/// The store's copy of a segment checked in full, whatever the cache holds:
/// whole, then one object gone and one damaged, each named with its cause.
#[test]
fn verify_stored_reads_the_store_not_the_cache() {
    let OneSegment { storage, cache, cache_dir: _cache_dir, manifest: m, .. } = one_segment();
    let entry = m.segments.iter().find(|e| e.insert_binlog.is_some()).unwrap();
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let whole = jobs::verify_stored(&storage, entry, &cancel);
    assert_eq!(whole.len(), 2, "binlog and index file");
    assert!(whole.iter().all(|o| o.error.is_none() && o.bytes > 0), "{whole:?}");
    let (binlog, index) = (&whole[0].key, &whole[1].key);
    storage.delete(binlog).unwrap();
    storage.put(index, bytes::Bytes::from(vec![0u8; 16])).unwrap();
    let found = jobs::verify_stored(&storage, entry, &cancel);
    assert_eq!(found[0].error.as_deref(), Some(format!("storage memory://: object {binlog} not found").as_str()));
    let damaged = found[1].error.as_deref().unwrap();
    assert!(damaged.starts_with(&format!("object {index} is corrupt: 16 bytes, the manifest says ")), "{damaged}");
    // The cache still serves searches: only the store's copy was checked.
    assert_eq!(load_all(&storage, &cache, &m).len(), 1);
}

/// A manifest copied with its database (another index instance): its
/// objects are foreign to the copy's prefix until it adopts them; once
/// adopted, the origin deleting every object of its own loses the copy
/// nothing.
#[test]
fn an_adopted_copy_survives_its_origin_collecting_everything() {
    let OneSegment { storage, cache_dir: _cache_dir, manifest: origin, data, .. } = one_segment();
    let copy_id = IndexId { database: ID.database + 1, ..ID };
    let mut copy = origin.clone();
    let foreign = copy.foreign_objects(&copy_id.prefix());
    assert_eq!(foreign.len(), 2, "binlog and index file under the origin's prefix");
    assert!(origin.foreign_objects(&ID.prefix()).is_empty(), "the origin's own");
    let moved = jobs::adopt(&storage, copy_id, &foreign, &AtomicBool::new(false)).unwrap();
    assert_eq!(copy.rehome(&moved.into_iter().collect()), 2);
    assert!(copy.foreign_objects(&copy_id.prefix()).is_empty());
    // The origin collects everything under its prefix (as if it had been
    // compacted away and dropped): the copy answers from its own objects.
    let report = storage
        .collect_garbage(&ID.prefix(), &HashSet::new(), Duration::ZERO, SystemTime::now(), &AtomicBool::new(false))
        .unwrap();
    assert_eq!(report.deleted.len(), 2);
    let fresh = tempfile::tempdir().unwrap();
    let cache = SegmentCache::new(fresh.path(), 1 << 30).unwrap();
    let loaded = load_all(&storage, &cache, &copy);
    assert!(check_search(&loaded, &data, &|_| false) >= 0.9);
}

/// The keys and distances of the ten nearest rows to a few queries, or the
/// first error a search met.
fn answers(segments: &[Arc<LoadedSegment>], data: &[f32]) -> Result<Vec<(u64, f32)>, String> {
    let mut got = Vec::new();
    for q in (0..data.len() / DIMS).step_by(397) {
        let query: Vec<f32> = data[q * DIMS..][..DIMS].iter().map(|x| x + 0.01).collect();
        let search = Search::new(query.into(), PageHits::default(), segments.to_vec(), SearchOptions::default());
        for hit in search.take(10) {
            let hit = hit.map_err(|e| e.to_string())?;
            got.push((hit.key, hit.distance));
        }
    }
    Ok(got)
}

/// An index larger than the cache: each segment keeps its index file
/// (graph and codes) and its binlog's read index in the cache, reads the
/// rows it re-ranks by range from storage, and answers exactly as with its
/// binlog cached, row for row. A merge reads such inputs whole. Damage in
/// storage is an error naming the object; so is a binlog gone from S3 (or
/// `memory://`), while a local directory's binlog, once open, is read to
/// the end of the segment's use.
fn rows_read_by_range(url: &str) {
    let local = url.strip_prefix("file://");
    let OneSegment { storage, cache, cache_dir: _dir, manifest: mut m, data } = one_segment_at(url);
    let cached = load_all(&storage, &cache, &m);
    assert!(!cached[0].reads_by_range());
    let want = answers(&cached, &data).unwrap();

    let entry = m.segments[0].clone();
    let (binlog, index) = (entry.insert_binlog.clone().unwrap(), entry.index_file.clone().unwrap());
    // Room for the index file and the read index (keys and a checksum a
    // row), not for the binlog besides.
    let capacity = index.size + 64 * 1024 + 12 * 6000;
    assert!(capacity < index.size + binlog.size);
    let fresh = tempfile::tempdir().unwrap();
    let small = SegmentCache::new(fresh.path(), capacity).unwrap();
    assert!(jobs::rows_by_range(&small, &m.segments));
    let ranged = load_all(&storage, &small, &m);
    assert!(ranged[0].reads_by_range() && ranged[0].is_mapped() && ranged[0].binlog().is_none());
    assert!(small.contains(&index) && !small.contains(&binlog), "the graph and codes are local, the rows not");
    assert_eq!(answers(&ranged, &data).unwrap(), want, "the same rows at the same distances");
    let query: Vec<f32> = data[..DIMS].to_vec();
    let mut search = Search::new(query.into(), PageHits::default(), ranged.clone(), SearchOptions::default());
    assert_eq!(search.by_ref().take(10).count(), 10);
    let stats = search.stats();
    assert_eq!(stats.read_rows, stats.reranked, "the rows re-ranked, read by range and nothing else");
    assert_eq!(stats.read_bytes, stats.read_rows as u64 * 4 * DIMS as u64);
    // Another backend maps the same read index: it is derived once.
    let misses = small.stats.misses.load(Ordering::Relaxed);
    assert_eq!(answers(&load_all(&storage, &small, &m), &data).unwrap(), want);
    assert_eq!(small.stats.misses.load(Ordering::Relaxed), misses, "nothing fetched again");

    // A merge of a segment read by range reads it whole.
    let (control, to) = (JobControl::default(), Target { storage: &storage, cache: &cache, index: ID });
    let out = m.allocate_segment_id();
    let inputs = [&*ranged[0]];
    let merge = Merge {
        inputs: &inputs,
        outputs: &[out],
        cluster_by: None,
        metric: Metric::L2,
        dims: DIMS,
        params: HnswParams::default(),
    };
    assert_eq!(jobs::compact(to, &merge, &control).unwrap().segments[0].rows, 6000);

    // Rows changed in storage after the read index was taken (in place, as
    // a disk's damage would): the rows a search reads fail their checksums.
    let vectors = 64 + 8 * 6000;
    let mut damaged = storage.get(&binlog.key).unwrap().to_vec();
    damaged[vectors..].iter_mut().for_each(|b| *b ^= 0x40);
    match local {
        Some(root) => std::fs::write(std::path::Path::new(root).join(&binlog.key), &damaged).unwrap(),
        None => storage.put(&binlog.key, damaged.into()).unwrap(),
    }
    let e = answers(&ranged, &data).unwrap_err();
    assert!(e.starts_with(&format!("object {} is corrupt: row ", binlog.key)) && e.contains("checksum"), "{e}");
    // A read index is derived from the stored binlog only when it checks out.
    let other = tempfile::tempdir().unwrap();
    let e = jobs::load(&storage, &SegmentCache::new(other.path(), capacity).unwrap(), &m.segments[0], Metric::L2, true)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains(&binlog.key) && e.contains("checksum"), "{e}");
    // The binlog gone from storage.
    storage.delete(&binlog.key).unwrap();
    let e = answers(&ranged, &data).unwrap_err();
    match local {
        Some(_) => assert!(e.contains("is corrupt: row "), "still read through the open file: {e}"),
        None => assert_eq!(e, format!("storage {url}: object {} not found", binlog.key)),
    }
    let fresh = tempfile::tempdir().unwrap();
    let e = jobs::load(&storage, &SegmentCache::new(fresh.path(), capacity).unwrap(), &m.segments[0], Metric::L2, true)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains(&binlog.key) && e.contains("not found"), "{e}");
}

#[test]
fn rows_read_by_range_answer_as_cached_rows_on_memory_store() {
    rows_read_by_range("memory://");
}

#[test]
fn rows_read_by_range_answer_as_cached_rows_on_file_store() {
    let dir = tempfile::tempdir().unwrap();
    rows_read_by_range(&format!("file://{}", dir.path().join("objects").display()));
}

/// Sparse rows through the lifecycle: flushed as an inverted segment,
/// loaded from the store, searched beside rows in pages, tombstoned and
/// merged; every answer the exact one a brute-force scan gives.
#[test]
fn sparse_segments_answer_exactly_through_flush_tombstones_and_merge() {
    use milvus_core::element::{Element, Row, Shape, sparse_words};
    use milvus_core::format::page::{RowPage, row_pages};
    const VOCAB: usize = 3000;
    let docs = milvus_core::synthetic::splade_like(3000, VOCAB, 40, 11);
    let queries = milvus_core::synthetic::splade_like(20, VOCAB, 8, 12);
    let words: Vec<Vec<u32>> = docs.iter().map(|d| sparse_words(d.view())).collect();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let storage = Arc::new(Storage::open(&url, &S3Options::default(), RetryPolicy::default()).unwrap());
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = SegmentCache::new(cache_dir.path(), 1 << 30).unwrap();
    let to = Target { storage: &storage, cache: &cache, index: ID };
    let control = JobControl::default();
    let dead = |key: u64| key % 7 == 3;

    for metric in [Metric::InnerProduct, Metric::L2, Metric::Cosine] {
        let mut m = Manifest::new(VOCAB as u32, metric, None);
        // Three segments of 800 rows flushed, the last 600 rows in pages.
        for s in 0..3usize {
            let id = m.add_growing(100);
            m.seal(id, 800, SealReason::Manual, 101).unwrap();
            let keys: Vec<u64> = (s as u64 * 800..(s as u64 + 1) * 800).collect();
            let mut vectors = Vectors::new(Element::Sparse);
            keys.iter().for_each(|k| vectors.push(Row::Sparse(&words[*k as usize])));
            let rows = NewSegment {
                segment: id,
                metric,
                dims: VOCAB,
                keys: &keys,
                vectors,
                params: HnswParams::default(),
                graph_min_rows: 0,
                seed: None,
                columns: &[],
            };
            let flushed = jobs::flush(to, &rows, &control).unwrap();
            assert!(flushed.index_file.is_some(), "an inverted index for every sparse segment");
            m.publish_flush(flushed, 102).unwrap();
        }
        let shape = Shape::new(VOCAB, Element::Sparse);
        let mut growing = Vectors::new(Element::Sparse);
        (2400..3000).for_each(|k| growing.push(Row::Sparse(&words[k])));
        let pages = row_pages(shape, &growing);

        let search = |segments: &[Arc<LoadedSegment>], deleted: &dyn Fn(u64) -> bool| {
            for q in &queries {
                let query = sparse_words(q.view());
                let mut exact: Vec<(f32, u64)> = (0..3000u64)
                    .filter(|k| !deleted(*k))
                    .map(|k| (metric.between(Row::Sparse(&query), Row::Sparse(&words[k as usize])), k))
                    .collect();
                exact.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                let mut hits = PageHits::default();
                for p in &pages {
                    let page = RowPage::new(p.bytes(), shape).unwrap();
                    page.distances(metric, Row::Sparse(&query), |k, d| hits.push(k, d)).unwrap();
                }
                // Page keys are row positions in `growing`: make them the rows' keys.
                let mut in_pages = PageHits::default();
                hits.iter().filter(|(k, _)| !deleted(k + 2400)).for_each(|(k, d)| in_pages.push(k + 2400, d));
                let got: Vec<(f32, u64)> = Search::new(
                    Vectors::of(Row::Sparse(&query)),
                    in_pages,
                    segments.to_vec(),
                    SearchOptions::default(),
                )
                .take(10)
                .map(|h| h.map(|h| (h.distance, h.key)).expect("rows read"))
                .collect();
                let want: Vec<f32> = exact.iter().take(10).map(|e| e.0).collect();
                assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), want, "{metric:?}: the exact distances");
                for (d, key) in &got {
                    assert!(!deleted(*key), "a dead row was returned");
                    let truth = metric.between(Row::Sparse(&query), Row::Sparse(&words[*key as usize]));
                    assert_eq!(*d, truth, "{metric:?}: row {key}'s own distance");
                }
            }
        };
        let entries: Vec<_> = m.live_segments().cloned().collect();
        let loaded: Vec<Arc<LoadedSegment>> = jobs::load_all(&storage, &cache, &entries, metric, 2, false)
            .into_iter()
            .map(|l| Arc::new(l.expect("a sparse segment loads")))
            .collect();
        assert!(loaded.iter().all(|s| s.inverted().is_some() && s.graph().is_none()));
        search(&loaded, &|_| false);

        // Tombstones, then a merge of the three that leaves them out.
        for (s, entry) in entries.iter().enumerate() {
            let rows: Vec<u32> = (0..800u32).filter(|r| dead(s as u64 * 800 + *r as u64)).collect();
            let delta = jobs::write_tombstones(&storage, ID, entry.meta.id, &rows).unwrap();
            m.add_tombstones(entry.meta.id, delta, rows.len() as u64).unwrap();
        }
        let entries: Vec<_> = m.live_segments().cloned().collect();
        let tombstoned: Vec<Arc<LoadedSegment>> = jobs::load_all(&storage, &cache, &entries, metric, 2, false)
            .into_iter()
            .map(|l| Arc::new(l.unwrap()))
            .collect();
        search(&tombstoned, &dead);
        let inputs: Vec<&LoadedSegment> = tombstoned.iter().map(|s| &**s).collect();
        let out = m.allocate_segment_id();
        let merge = Merge {
            inputs: &inputs,
            outputs: &[out],
            cluster_by: None,
            metric,
            dims: VOCAB,
            params: HnswParams::default(),
        };
        let flushed = jobs::compact(to, &merge, &control).unwrap().segments.remove(0);
        let live = (0..2400u64).filter(|k| !dead(*k)).count() as u64;
        assert_eq!(flushed.rows, live, "dead rows are not carried over");
        let ids: Vec<_> = entries.iter().map(|e| e.meta.id).collect();
        m.publish_compaction(&ids, vec![flushed], false, 200).unwrap();
        let merged: Vec<Arc<LoadedSegment>> =
            jobs::load_all(&storage, &cache, &m.live_segments().cloned().collect::<Vec<_>>(), metric, 1, false)
                .into_iter()
                .map(|l| Arc::new(l.unwrap()))
                .collect();
        assert_eq!((merged.len(), merged[0].deleted_rows(), merged[0].rows() as u64), (1, 0, live));
        search(&merged, &dead);
    }
}
