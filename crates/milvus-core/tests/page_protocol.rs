//! The page protocol under crashes, without a server: the crash matrix's
//! sequences (inserts that extend and seal, a flush's commit and the
//! release of its chain, VACUUM's deletions and sweep, packing the file)
//! run against pages in memory (`milvus_core::pages::memory`), with a crash
//! injected at every WAL record boundary in turn. After each crash the
//! recovered pages are checked as `tests/test_crash.py` checks a real
//! server's: the meta page and the manifest agree, no page is in two
//! chains or leaks, every committed row is there exactly once, and the
//! index goes on working.
//!
//! The functions run are the ones the server runs: the skin implements the
//! same `PageStore` over Postgres' buffers and GenericXLog.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

use milvus_core::Metric;
use milvus_core::element::{Row, Shape};
use milvus_core::format::manifest::{Flushed, Manifest, ObjectRef};
use milvus_core::format::meta::MetaPage;
use milvus_core::format::page::{MANIFEST_PAGE_ID, ROW_PAGE_ID, manifest_pages, rows_per_page};
use milvus_core::pages::growing::Full;
use milvus_core::pages::memory::{Crash, MemoryPages};
use milvus_core::pages::{
    Block, Lock, LockedBuffer, MetaGuard, PageStore, chain, free, growing, manifest_chain, release,
};
use milvus_core::segment::{SealReason, SegmentId, SegmentState};

/// Rows of 200 dimensions, ten to a page; and rows wider than a page, in
/// two chunks each, on pages of their own.
const NARROW: Shape = Shape::f32(200);
const WIDE: Shape = Shape::f32(3000);
const NOW: u64 = 1_700_000_000;

type Store<'s> = &'s MemoryPages;

/// What survives a crash beside the pages: the objects flushes wrote (the
/// keys of each flushed segment's rows, in row order).
type Objects = RefCell<HashMap<SegmentId, Vec<u64>>>;

fn vector(key: u64, shape: Shape) -> Vec<f32> {
    (0..shape.dims).map(|i| (key * 7 + i as u64) as f32).collect()
}

fn shape_of(store: Store) -> Shape {
    milvus_core::pages::meta_copy(store).shape()
}

/// Rows a page takes (one, for a row in chunks).
fn rows_per_page_of(shape: Shape) -> u64 {
    growing::size_rule(0, shape).rows_per_page
}

/// CREATE INDEX on an empty table: the meta page, an empty growing
/// segment, the manifest.
fn create(store: Store, shape: Shape) {
    let mut manifest = Manifest::new(shape.dims as u32, Metric::L2, None);
    let growing = manifest.add_growing(NOW);
    let bytes = manifest.encode();
    let mut meta_page = store.extend();
    let mut row_page = store.extend();
    let mut manifest_buffers: Vec<_> = (0..manifest_pages(bytes.len())).map(|_| store.extend()).collect();
    let meta = MetaPage::new(shape, Metric::L2, growing, 0, 0, 0);
    growing::lay_out(store, &mut meta_page, &mut row_page, &mut manifest_buffers, &bytes, meta);
}

/// An insert, through the loop `am/insert.rs` runs, sealing as
/// `lifecycle/flush.rs` does when the segment is full.
fn insert(store: Store, key: u64, max_rows: u64) {
    let v = vector(key, shape_of(store));
    let sealed = |_, reason| seal(store, reason).map_or(Full::GrowOn, Full::Sealed);
    growing::insert_row(store, key, Row::F32(&v), &[], max_rows, sealed).expect("rows of the index's dimensions");
}

/// A seal, as `lifecycle/flush.rs` does it.
fn seal(store: Store, reason: SealReason) -> Option<SegmentId> {
    let mut meta = MetaGuard::lock(store, Lock::Exclusive);
    if chain::growing_is_empty(store, &meta) || !meta.can_seal() {
        return None;
    }
    let sealed = meta.growing();
    let mut manifest = manifest_chain::read(&meta);
    let rows = chain::count_rows(store, meta.growing_head, meta.shape());
    manifest.seal(sealed, rows, reason, NOW).unwrap();
    let next = manifest.add_growing(NOW);
    growing::commit_seal(&mut meta, &manifest, next);
    drop(meta);
    release::drain_released(store);
    Some(sealed)
}

/// A flush of the oldest sealed segment: its rows written to "storage",
/// then the commit that publishes them and releases the chain.
fn flush(store: Store, objects: &Objects) -> Option<SegmentId> {
    let (meta, _) = manifest_chain::snapshot(store);
    let sealed = *meta.sealed().first()?;
    let segment = SegmentId(sealed.segment);
    let mut keys = Vec::new();
    chain::for_each_row(store, sealed.head, meta.shape(), |key, _| keys.push(key));
    let binlog = ObjectRef::of(format!("segment-{segment}"), &[]);
    let flushed = Flushed {
        segment,
        rows: keys.len() as u64,
        insert_binlog: binlog,
        index_file: None,
        bytes: 0,
        row_keys: keys.clone(),
        keys: None,
        scalar_binlog: None,
    };
    objects.borrow_mut().insert(segment, keys);
    let mut meta = MetaGuard::lock(store, Lock::Exclusive);
    let mut manifest = manifest_chain::read(&meta);
    manifest.publish_flush(flushed, NOW).unwrap();
    growing::commit_flush(&mut meta, &manifest, segment);
    drop(meta);
    release::drain_released(store);
    Some(segment)
}

/// VACUUM: dead rows leave the pages; in flushed segments they become
/// pending tombstones (one manifest commit per segment); then the sweep.
fn vacuum(store: Store, objects: &Objects, is_dead: &dyn Fn(u64) -> bool) {
    let meta = milvus_core::pages::meta_copy(store);
    for (_, head) in meta.in_pages() {
        chain::delete_rows(store, head, meta.shape(), is_dead, || {});
    }
    let (_, manifest) = manifest_chain::snapshot(store);
    for entry in manifest.flushed_segments() {
        let keys = &objects.borrow()[&entry.meta.id];
        let dead: Vec<u32> = (0..keys.len() as u32).filter(|&p| is_dead(keys[p as usize])).collect();
        if !dead.is_empty() && entry.pending_tombstones.is_empty() {
            manifest_chain::change(store, |m| m.add_pending_tombstones(entry.meta.id, &dead)).unwrap();
        }
    }
    free::sweep(store, true);
}

/// The rows the workload's second VACUUM finds dead (its first, a part).
fn may_be_dead(key: u64) -> bool {
    key.is_multiple_of(5) || key.is_multiple_of(7)
}

/// The workload the matrix crashes in, recording in `committed` each key
/// whose insert returned.
fn workload(store: Store, objects: &Objects, committed: &RefCell<Vec<u64>>) {
    let per_page = rows_per_page_of(shape_of(store));
    let max_rows = 3 * per_page;
    let mut key = 0;
    let mut insert_n = |n: u64| {
        for _ in 0..n {
            insert(store, key, max_rows);
            committed.borrow_mut().push(key);
            key += 1;
        }
    };
    // Four pages' worth: the fourth seals the first segment by size.
    insert_n(4 * per_page);
    seal(store, SealReason::Manual);
    insert_n(per_page + 1);
    flush(store, objects);
    vacuum(store, objects, &|k| k.is_multiple_of(5));
    flush(store, objects);
    insert_n(2);
    vacuum(store, objects, &may_be_dead);
    let end = free::pack(store);
    assert!(end <= store.blocks());
}

/// Checks the recovered pages; returns the keys the index holds.
fn check(store: Store, objects: &Objects) -> Vec<u64> {
    let (meta, manifest) = manifest_chain::snapshot(store);
    // No page in two chains, no chain looping.
    let mut owner: HashMap<Block, String> = HashMap::new();
    for (kind, head) in meta.chains() {
        for block in chain::blocks(store, head) {
            let page = store.read(block, Lock::Share);
            let opaque = page.page().chain().expect("a chain page");
            let expected = if kind.as_str() == "manifest" { MANIFEST_PAGE_ID } else { ROW_PAGE_ID };
            if kind.as_str() != "released" {
                assert_eq!(opaque.page_id, expected, "block {block} of the {} chain", kind.as_str());
            }
            if let Some(other) = owner.insert(block, kind.as_str().into()) {
                panic!("block {block} is in the {other} and the {} chains", kind.as_str());
            }
        }
    }
    // The meta page and the manifest agree on every segment's state.
    let growing = manifest.segment(meta.growing()).expect("the growing segment is in the manifest");
    assert_eq!(growing.meta.state, SegmentState::Growing);
    let sealed_in_pages: HashSet<u64> = meta.sealed().iter().map(|c| c.segment).collect();
    for entry in manifest.live_segments() {
        let id = entry.meta.id;
        match entry.meta.state {
            SegmentState::Growing => assert_eq!(id, meta.growing()),
            SegmentState::Sealed => assert!(sealed_in_pages.contains(&id.0), "sealed {id} has no chain"),
            SegmentState::Flushed => assert!(objects.borrow().contains_key(&id), "flushed {id} has no objects"),
            other => panic!("segment {id} is {other:?}"),
        }
    }
    for segment in &sealed_in_pages {
        let state = manifest.segment(SegmentId(*segment)).map(|e| e.meta.state);
        assert_eq!(state, Some(SegmentState::Sealed), "sealed chain of segment {segment}");
    }
    // The keys: in pages, and in flushed segments but their tombstones.
    let mut keys = Vec::new();
    for (_, head) in meta.in_pages() {
        chain::for_each_row(store, head, meta.shape(), |key, v| {
            assert_eq!(v, Row::F32(&vector(key, meta.shape())), "row {key} came back whole");
            keys.push(key)
        });
    }
    for entry in manifest.flushed_segments() {
        let stored = &objects.borrow()[&entry.meta.id];
        assert_eq!(stored.len() as u64, entry.meta.rows);
        let dead: HashSet<u32> = entry.pending_tombstones.iter().collect();
        keys.extend((0..stored.len() as u32).filter(|p| !dead.contains(p)).map(|p| stored[p as usize]));
    }
    keys
}

fn quiet_crashes() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<Crash>().is_none() {
                default(info)
            }
        }));
    });
}

/// The workload's WAL records, when nothing crashes.
fn records_of_the_workload(shape: Shape) -> u64 {
    let store = MemoryPages::new();
    create(&store, shape);
    let before = store.records();
    workload(&store, &Objects::default(), &RefCell::default());
    store.records() - before
}

#[test]
fn a_crash_at_any_record_boundary_leaves_sound_pages_and_every_committed_row() {
    crash_at_every_record(NARROW);
}

/// The same with rows cut in chunks: a crash between two chunks of a row
/// leaves an unfinished row that readers leave out.
#[test]
fn a_crash_between_the_chunks_of_a_wide_row_loses_no_committed_row() {
    crash_at_every_record(WIDE);
}

fn crash_at_every_record(shape: Shape) {
    quiet_crashes();
    let total = records_of_the_workload(shape);
    assert!(total >= 40, "the workload writes records of every kind: {total}");
    for crash_after in 0..total {
        let store = MemoryPages::new();
        let objects = Objects::default();
        let committed = RefCell::new(Vec::new());
        create(&store, shape);
        store.crash_after(store.records() + crash_after);
        let ran = catch_unwind(AssertUnwindSafe(|| workload(&store, &objects, &committed)));
        let payload = ran.expect_err("the workload crashes");
        assert!(payload.downcast_ref::<Crash>().is_some(), "after {crash_after} records: not the crash");
        store.restart();

        let at = format!("crash after {crash_after} of {total} records");
        // What recovery left, before anything else runs.
        let keys = check(&store, &objects);
        let mut seen = HashSet::new();
        for key in &keys {
            assert!(seen.insert(*key), "{at}: row {key} is in the index twice");
        }
        // Every committed row is there but those VACUUM may have removed
        // (a row is only ever deleted once it is dead).
        for key in committed.borrow().iter().filter(|k| !may_be_dead(**k)) {
            assert!(seen.contains(key), "{at}: committed row {key} is lost");
        }
        // Whatever was in flight is there at most once, and nothing else.
        let last = committed.borrow().last().map_or(0, |k| k + 1);
        assert!(keys.iter().all(|k| *k <= last), "{at}: a row nobody inserted");

        // The index goes on as it was left, released chains and orphaned
        // pages included: more rows, a seal and a flush, then VACUUM's
        // sweep, which takes back whatever the crash left.
        let more = rows_per_page_of(shape) * 2;
        for key in 10_000..10_000 + more {
            insert(&store, key, 1_000);
        }
        seal(&store, SealReason::Manual);
        while flush(&store, &objects).is_some() {}
        let swept = free::sweep(&store, true);
        let census: HashMap<_, _> = free::census(&store).into_iter().collect();
        assert_eq!((census["unreferenced"], census["released"]), (0, 0), "{at}: {census:?} after {swept:?}");
        let after = check(&store, &objects);
        assert_eq!(after.len(), keys.len() + more as usize, "{at}: rows after recovery");
    }
}

/// A free space map that lost its changes in the crash lists any block:
/// a page is taken for a chain only if it is really free.
#[test]
fn a_stale_free_space_map_never_hands_out_a_used_page() {
    let store = MemoryPages::new();
    create(&store, NARROW);
    for key in 0..rows_per_page(NARROW) as u64 * 3 {
        insert(&store, key, 1_000);
    }
    store.restart(); // no crash: the map now lists every block
    let before = check(&store, &Objects::default());
    for key in 100..110 {
        insert(&store, key, 1_000);
    }
    let after = check(&store, &Objects::default());
    assert_eq!(after.len(), before.len() + 10);
}

/// Every manifest commit moves the generation on, also one whose change
/// left it as it was, and the first page of the chain tells it: a
/// backend's cached manifest is never taken for a newer one.
#[test]
fn every_commit_moves_the_generation_on() {
    let store = MemoryPages::new();
    create(&store, NARROW);
    let generation = || manifest_chain::generation(&MetaGuard::lock(&store, Lock::Share)).unwrap();
    let first = generation();
    assert_eq!(first, manifest_chain::snapshot(&store).1.generation);
    manifest_chain::change(&store, |m| m.storage_url = Some("file:///elsewhere".into()));
    assert_eq!(generation(), first + 1);
    manifest_chain::change(&store, |m| m.allocate_segment_id());
    assert!(generation() > first + 1);
    assert_eq!(generation(), manifest_chain::snapshot(&store).1.generation);
}

/// The page layer's own rules hold on every path the workload takes: a
/// record registers at most four pages, and a block is never locked twice
/// (the in-memory store fails the test on either).
#[test]
fn the_workload_keeps_the_lock_and_record_rules() {
    let store = MemoryPages::new();
    let objects = Objects::default();
    create(&store, NARROW);
    workload(&store, &objects, &RefCell::default());
    let keys = check(&store, &objects);
    assert!(!keys.is_empty());
    let census: HashMap<_, _> = free::census(&store).into_iter().collect();
    assert_eq!((census["unreferenced"], census["released"]), (0, 0));
}
