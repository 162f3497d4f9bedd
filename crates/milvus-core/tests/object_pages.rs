//! The embedded store's objects in pages (`milvus_core::pages::objects`),
//! without a server: written from a local directory before the commit
//! that references them, read back into a directory that lost them (a
//! standby's, a restored backup's), freed when the manifest lets them go,
//! and, with a crash at every WAL record boundary of that sequence, never
//! a page leaked or a referenced chain freed.

use std::panic::{AssertUnwindSafe, catch_unwind};

use bytes::Bytes;
use milvus_core::Metric;
use milvus_core::element::Shape;
use milvus_core::format::delta;
use milvus_core::format::manifest::{Flushed, Manifest, ObjectRef};
use milvus_core::format::meta::MetaPage;
use milvus_core::format::page::{OBJECT_PAGE_ID, manifest_bytes_per_page, manifest_pages};
use milvus_core::pages::memory::{Crash, MemoryPages};
use milvus_core::pages::objects::{self, CopyError};
use milvus_core::pages::{Lock, LockedBuffer, MetaGuard, PageStore, free, growing, manifest_chain};
use milvus_core::segment::SegmentId;
use milvus_core::storage::{RetryPolicy, S3Options, Storage, StorageError};

const NOW: u64 = 1_700_000_000;

/// A new index's pages (meta page, growing segment, manifest).
fn create(store: &MemoryPages) {
    let mut manifest = Manifest::new(4, Metric::L2, None);
    let growing = manifest.add_growing(NOW);
    let bytes = manifest.encode();
    let mut meta_page = store.extend();
    let mut row_page = store.extend();
    let mut manifest_buffers: Vec<_> = (0..manifest_pages(bytes.len())).map(|_| store.extend()).collect();
    let meta = MetaPage::new(Shape::f32(4), Metric::L2, growing, 0, 0, 0);
    growing::lay_out(store, &mut meta_page, &mut row_page, &mut manifest_buffers, &bytes, meta);
}

fn local_store(dir: &std::path::Path) -> Storage {
    Storage::open(&format!("file://{}", dir.display()), &S3Options::default(), RetryPolicy::default()).unwrap()
}

/// A new index and a local store in a directory of its own (kept while
/// the directory is).
fn index_and_store() -> (MemoryPages, Storage, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let local = local_store(dir.path());
    let pages = MemoryPages::new();
    create(&pages);
    (pages, local, dir)
}

/// A flushed segment's two objects, put in the directory as a flush puts
/// them.
fn put_segment(local: &Storage, segment: u64, len: usize) -> Flushed {
    let object = |kind: &str, seed: u64| {
        let bytes: Vec<u8> = (0..len as u64).map(|i| (i * 13 + seed * 7) as u8).collect();
        let key = format!("1/5/16384/{segment}/{kind}-{seed:08x}");
        local.put(&key, Bytes::from(bytes.clone())).unwrap();
        ObjectRef::of(key, &bytes)
    };
    let (insert_binlog, index_file) = (object("insert", segment), object("index", segment + 100));
    Flushed {
        segment: SegmentId(segment),
        rows: 10,
        bytes: 2 * len as u64,
        insert_binlog,
        index_file: Some(index_file),
        row_keys: (0..10).map(|r| segment << 32 | r).collect(),
        keys: None,
        scalar_binlog: None,
    }
}

/// Writes the segment's objects into pages and publishes it, as a flush
/// or CREATE INDEX does.
fn publish(store: &MemoryPages, local: &Storage, mut flushed: Flushed) {
    objects::write_from_local(store, local, &mut flushed.insert_binlog).unwrap();
    objects::write_from_local(store, local, flushed.index_file.as_mut().unwrap()).unwrap();
    manifest_chain::change(store, |m| {
        let id = m.allocate_segment_id();
        m.publish_built(Flushed { segment: id, ..flushed }, NOW).unwrap()
    });
}

/// Restores what `local` lacks, under the meta page's lock.
fn restore(pages: &MemoryPages, local: &Storage) -> Result<objects::Restored, CopyError> {
    let meta = MetaGuard::lock(pages, Lock::Share);
    objects::restore_missing(&meta, &manifest_chain::read(&meta), local)
}

/// Object pages in the relation, and the pages the manifest's objects need.
fn object_pages(store: &MemoryPages) -> (usize, usize) {
    let in_relation = (1..store.blocks())
        .filter(|b| store.read(*b, Lock::Share).page().chain().is_some_and(|o| o.page_id == OBJECT_PAGE_ID))
        .count();
    let (_, manifest) = manifest_chain::snapshot(store);
    let referenced = manifest.chains().map(|o| manifest_pages(o.size as usize)).sum();
    (in_relation, referenced)
}

#[test]
fn a_directory_that_lost_its_objects_gets_them_back_from_the_pages() {
    let (pages, local, _dir) = index_and_store();
    let elsewhere = tempfile::tempdir().unwrap();
    publish(&pages, &local, put_segment(&local, 1, 3 * manifest_bytes_per_page() + 5));
    publish(&pages, &local, put_segment(&local, 2, 100));
    assert_eq!(object_pages(&pages), (10, 10));
    // The pages travel (a standby replays them); the directory does not.
    let replica = local_store(elsewhere.path());
    let restored = restore(&pages, &replica).unwrap();
    assert_eq!(restored.objects, 4);
    let (_, manifest) = manifest_chain::snapshot(&pages);
    for o in manifest.objects() {
        assert_eq!(replica.get(&o.key).unwrap(), local.get(&o.key).unwrap(), "{} restored byte for byte", o.key);
    }
    let again = restore(&pages, &replica).unwrap();
    assert_eq!(again.objects, 0, "what is there is left alone");
    assert!(
        std::fs::read_dir(elsewhere.path().join("1/5/16384/1")).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains('#')),
        "no staging file left behind"
    );

    // A file damaged on the replica's disk (a flipped bit, a cut): found,
    // removed and written again from the pages; whole files stay.
    let flushed: Vec<_> = manifest.flushed_segments().collect();
    let (first, second) = (flushed[0].insert_binlog.clone().unwrap(), flushed[1].index_file.clone().unwrap());
    let mut bytes = std::fs::read(replica.local_path(&first.key).unwrap()).unwrap();
    bytes[7] ^= 0x10;
    std::fs::write(replica.local_path(&first.key).unwrap(), &bytes).unwrap();
    std::fs::write(replica.local_path(&second.key).unwrap(), &bytes[..10]).unwrap();
    let discarded = objects::discard_damaged(&replica, manifest.objects()).unwrap();
    assert_eq!(discarded, [first.key.clone(), second.key.clone()]);
    assert_eq!(restore(&pages, &replica).unwrap().objects, 2);
    for o in manifest.objects() {
        assert_eq!(replica.get(&o.key).unwrap(), local.get(&o.key).unwrap(), "{} whole again", o.key);
    }
    assert!(objects::discard_damaged(&replica, manifest.objects()).unwrap().is_empty());

    // A page damaged under a missing file: the error names the object.
    let victim = manifest.segments.iter().find_map(|s| s.insert_binlog.clone()).unwrap();
    std::fs::remove_file(replica.local_path(&victim.key).unwrap()).unwrap();
    pages.damage(victim.pages.unwrap(), 100, 0xff);
    let e = restore(&pages, &replica).unwrap_err();
    assert!(matches!(&e, CopyError::Damaged(d) if d.key == victim.key && d.what.contains("checksum")), "{e}");
    assert!(!replica.local_path(&victim.key).unwrap().exists(), "nothing half-written is published");
}

#[test]
fn a_replica_removes_its_copies_of_objects_the_primary_collected() {
    let (pages, local, _dir) = index_and_store();
    let elsewhere = tempfile::tempdir().unwrap();
    let replica = local_store(elsewhere.path());
    publish(&pages, &local, put_segment(&local, 1, 100));
    publish(&pages, &local, put_segment(&local, 2, 100));
    restore(&pages, &replica).unwrap();
    // The primary merges the first segment away and collects it; its
    // replica still has the files it restored.
    let (_, before) = manifest_chain::snapshot(&pages);
    let first = before.flushed_segments().next().unwrap().clone();
    manifest_chain::change(&pages, |m| m.drop_segments(&[first.meta.id], NOW).unwrap());
    let (_, dropped) = manifest_chain::snapshot(&pages);
    assert_eq!(objects::remove_unreferenced(&replica, "1/5/16384", &dropped).objects, 0, "dropped, not yet collected");
    manifest_chain::change(&pages, |m| m.forget_dropped(|_| true));
    let (_, after) = manifest_chain::snapshot(&pages);
    let staging = replica.local_path(&format!("{}#restore1", first.objects().next().unwrap().key)).unwrap();
    std::fs::write(&staging, b"cut short").unwrap();
    let kept = replica.local_path(&after.objects().next().unwrap().key).unwrap();
    let ongoing = kept.with_file_name(format!("{}#restore2", kept.file_name().unwrap().to_string_lossy()));
    std::fs::write(&ongoing, b"another backend's restore").unwrap();
    let removed = objects::remove_unreferenced(&replica, "1/5/16384", &after);
    assert_eq!(
        (removed.objects, removed.bytes),
        (3, 200 + 9),
        "both files and a staging file of the collected segment"
    );
    for o in first.objects() {
        assert!(!replica.local_path(&o.key).unwrap().exists(), "{}", o.key);
    }
    for o in after.objects() {
        assert_eq!(replica.get(&o.key).unwrap(), local.get(&o.key).unwrap(), "{} kept", o.key);
    }
    assert!(ongoing.exists(), "a staging file of a named object may be a restore in progress");
    assert_eq!(objects::remove_unreferenced(&replica, "1/5/16384", &after).objects, 0);
}

#[test]
fn a_segments_keys_in_pages_are_read_back_and_freed_with_it() {
    let (pages, local, _dir) = index_and_store();
    let mut flushed = put_segment(&local, 1, 100);
    let keys: Vec<u64> = (0..3 * manifest_bytes_per_page() as u64 / 8).map(|k| k * 7 + 1).collect();
    flushed.keys = Some(objects::write_keys(&pages, "keys of segment 1".into(), &keys));
    manifest_chain::change(&pages, |m| {
        let id = m.allocate_segment_id();
        m.publish_built(Flushed { segment: id, ..flushed }, NOW).unwrap()
    });
    let (_, m) = manifest_chain::snapshot(&pages);
    let segment = m.flushed_segments().next().unwrap();
    let (id, stored) = (segment.meta.id, segment.keys.clone().expect("published with the segment"));
    assert_eq!(objects::read_keys(&pages, &stored).unwrap(), keys);
    assert_eq!(object_pages(&pages), (3, 3), "its pages are published, not a sweep's to take");
    free::sweep(&pages, true);
    assert_eq!(objects::read_keys(&pages, &stored).unwrap(), keys);
    // Its tombstones: pending in the manifest, and a delta binlog whose
    // bytes are in pages too; VACUUM reads all of it there.
    let bytes = delta::encode(id, &[2, 5]);
    let mut written = ObjectRef::of("1/5/16384/1/delta-00000001", &bytes);
    objects::write_bytes(&pages, &mut written, &bytes);
    manifest_chain::change(&pages, |m| {
        m.settle_tombstones(id, written.clone(), &[])?;
        m.add_pending_tombstones(id, &[7])
    })
    .unwrap();
    let (_, m) = manifest_chain::snapshot(&pages);
    let objects::SegmentKeys { keys: read, mut deleted } =
        objects::segment_keys(&pages, m.segment(id).unwrap()).unwrap().unwrap();
    assert_eq!(read, keys);
    assert_eq!(
        {
            let mut d: Vec<u32> = deleted.drain().collect();
            d.sort();
            d
        },
        [2, 5, 7]
    );
    let mut only_in_store = m.segment(id).unwrap().clone();
    only_in_store.delta_binlogs[0].pages = None;
    assert!(objects::segment_keys(&pages, &only_in_store).is_none(), "a delta binlog only the store holds");
    // Dropped and forgotten: its chain goes with the segment's.
    manifest_chain::change(&pages, |m| m.drop_segments(&[id], NOW).unwrap());
    manifest_chain::change(&pages, |m| m.forget_dropped(|_| true));
    assert_eq!(object_pages(&pages), (0, 0), "keys and delta binlog freed");
    pages.damage(stored.pages.unwrap(), 0, 0xff);
    assert!(objects::read_keys(&pages, &stored).is_err(), "a freed chain is never read as the keys");
}

#[test]
fn a_missing_file_fails_the_write_and_names_the_object() {
    let (pages, local, _dir) = index_and_store();
    let mut gone = ObjectRef::of("1/5/16384/9/insert-00000001", b"never written");
    let e = objects::write_from_local(&pages, &local, &mut gone).unwrap_err();
    assert!(matches!(e, StorageError::NotFound { ref key, .. } if *key == gone.key), "{e}");
    assert_eq!(gone.pages, None);
}

/// Publish two segments, drop one and forget it (GC), sweep: the pages a
/// crash at each record leaves are then exactly the referenced objects'.
fn workload(pages: &MemoryPages, local: &Storage) {
    publish(pages, local, put_segment(local, 1, 4 * manifest_bytes_per_page()));
    publish(pages, local, put_segment(local, 2, 2 * manifest_bytes_per_page() + 1));
    manifest_chain::change(pages, |m| {
        let first = m.flushed_segments().next().expect("two flushed").meta.id;
        m.drop_segments(&[first], 0).unwrap()
    });
    manifest_chain::change(pages, |m| m.forget_dropped(|_| true));
}

#[test]
fn a_crash_at_any_record_leaks_no_object_page_and_frees_no_referenced_one() {
    std::panic::set_hook(Box::new(|info| {
        if info.payload().downcast_ref::<Crash>().is_none() {
            eprintln!("{info}");
        }
    }));
    let dir = tempfile::tempdir().unwrap();
    let local = local_store(dir.path());
    let total = {
        let pages = MemoryPages::new();
        create(&pages);
        let before = pages.records();
        workload(&pages, &local);
        pages.records() - before
    };
    assert!(total > 10, "{total} records");
    for n in 0..total {
        let pages = MemoryPages::new();
        create(&pages);
        pages.crash_after(pages.records() + n);
        let crashed = catch_unwind(AssertUnwindSafe(|| workload(&pages, &local)));
        assert!(crashed.is_err(), "crash after record {n}");
        pages.restart();
        // What the manifest references reads back whole.
        let (_, manifest) = manifest_chain::snapshot(&pages);
        for o in manifest.objects().filter(|o| o.pages.is_some()) {
            objects::read_all(&pages, o).unwrap_or_else(|e| panic!("crash after record {n}: {e}"));
        }
        // VACUUM's sweep, with no writer running, takes back the rest.
        free::sweep(&pages, true);
        let (in_relation, referenced) = object_pages(&pages);
        assert_eq!(in_relation, referenced, "crash after record {n}: object pages of no object left");
        // And the index goes on: the workload's end state is reachable.
        workload(&pages, &local);
        free::sweep(&pages, true);
        let (in_relation, referenced) = object_pages(&pages);
        assert_eq!(in_relation, referenced);
    }
}

#[test]
fn a_sweep_while_a_chain_is_written_leaves_object_pages_alone() {
    let (pages, local, _dir) = index_and_store();
    let mut flushed = put_segment(&local, 1, 2 * manifest_bytes_per_page());
    objects::write_from_local(&pages, &local, &mut flushed.insert_binlog).unwrap();
    // Not yet committed: a writer holds the lock, so the sweep is told not
    // to take object pages back.
    free::sweep(&pages, false);
    objects::read_all(&pages, &flushed.insert_binlog).unwrap();
}
