//! The flushed segments a backend has loaded: each opened once (its files
//! mapped from the local segment cache, downloaded and verified first if
//! not cached) and kept while its tombstones do not change. Scans, VACUUM
//! and compaction read segments through here; scans read the manifest
//! through here too, decoded once per generation.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use milvus_core::Metric;
use milvus_core::error::Failed;
use milvus_core::format::manifest::{Manifest, SegmentEntry};
use milvus_core::jobs::{self, JobError};
use milvus_core::search::LoadedSegment;
use milvus_core::segment::SegmentId;
use milvus_core::storage::Storage;

use crate::am::explain;
use crate::error::raise_error;
use crate::pages::{Index, MetaGuard, manifest_chain};
use crate::{catalog, shared, storage};

/// A flushed segment as loaded, and its tombstones' version then
/// (`SegmentEntry::tombstone_version`).
type Loaded = ((usize, usize), Arc<LoadedSegment>);

thread_local! {
    /// Flushed segments this backend has loaded, by index and by the key of
    /// their insert binlog: unique per write, unlike segment ids, which start
    /// again at 1 when TRUNCATE or REINDEX rebuilds the index under the same
    /// OID. A segment is immutable but for its tombstones: reloaded when
    /// they change (a delta binlog, or pending tombstones, more or fewer),
    /// dropped when it leaves the manifest.
    static LOADED: RefCell<HashMap<(u32, String), Loaded>> = RefCell::new(HashMap::new());
}

/// A manifest as decoded, and the file number and generation it had.
type Decoded = ((u32, u64), Rc<Manifest>);

thread_local! {
    /// The manifest this backend's scans last read of each index, by OID.
    static MANIFESTS: RefCell<HashMap<u32, Decoded>> = RefCell::new(HashMap::new());
}

/// The manifest `meta` (held shared) points at: the one this backend read
/// last while the first page of its chain names the same generation
/// (`manifest_chain::generation`; every commit moves it on) of the same
/// file, read and decoded whole otherwise. A scan then reads one page of
/// the manifest, not every page, checksum and entry of it, and holds the
/// meta page for less of the time an insert extending the growing chain
/// waits for it.
pub fn manifest(index: Index, meta: &MetaGuard) -> Rc<Manifest> {
    let oid = index.oid().to_u32();
    let Some(generation) = manifest_chain::generation(meta) else {
        return Rc::new(manifest_chain::read(meta));
    };
    let key = (index.file_number(), generation);
    if let Some(cached) = MANIFESTS.with_borrow(|m| m.get(&oid).filter(|(k, _)| *k == key).map(|(_, m)| m.clone())) {
        return cached;
    }
    let manifest = Rc::new(manifest_chain::read(meta));
    MANIFESTS.with_borrow_mut(|m| m.insert(oid, (key, manifest.clone())));
    manifest
}

/// The cache key of a flushed segment.
fn loaded_key(oid: u32, entry: &SegmentEntry) -> (u32, String) {
    (oid, entry.insert_binlog.as_ref().map(|o| o.key.clone()).unwrap_or_default())
}

/// The flushed segments of `manifest`, from the backend's cache or loaded
/// (downloaded through the local cache, verified) off the main thread.
pub fn loaded(index: Index, manifest: &Manifest, metric: Metric) -> Vec<Arc<LoadedSegment>> {
    let oid = index.oid().to_u32();
    let flushed: Vec<&SegmentEntry> = manifest.flushed_segments().collect();
    let keys: Vec<(u32, String)> = flushed.iter().map(|e| loaded_key(oid, e)).collect();
    let missing: Vec<SegmentEntry> = LOADED.with_borrow_mut(|loaded| {
        // Segments of this index that left the manifest, and of indexes that
        // were dropped, go.
        let others: std::collections::HashSet<u32> = loaded.keys().map(|k| k.0).filter(|o| *o != oid).collect();
        let dropped: Vec<u32> = others.into_iter().filter(|o| !catalog::relation_exists(*o)).collect();
        loaded.retain(|k, _| (k.0 != oid || keys.contains(k)) && !dropped.contains(&k.0));
        MANIFESTS.with_borrow_mut(|m| m.retain(|o, _| !dropped.contains(o)));
        flushed
            .iter()
            .zip(&keys)
            .filter(|(e, k)| loaded.get(*k).is_none_or(|(version, _)| *version != e.tombstone_version()))
            .map(|(e, _)| (*e).clone())
            .collect()
    });
    if !missing.is_empty() {
        let store = super::object_pages::reading_store(index, manifest).unwrap_or_else(|e| {
            raise_error(&Failed::new(format!("open the storage of index \"{}\"", index.name()), e))
        });
        let mut results = load(oid, &store, manifest, missing, metric);
        // A file of the embedded directory damaged on disk: written again
        // from the index's pages, and loaded once more.
        let failed: Vec<SegmentEntry> = manifest
            .flushed_segments()
            .filter(|e| results.iter().any(|r| r.1 == e.meta.id && r.3.is_err()))
            .cloned()
            .collect();
        if !failed.is_empty() && super::object_pages::heal(index, manifest, &store, &failed) > 0 {
            results.retain(|r| r.3.is_ok());
            results.extend(load(oid, &store, manifest, failed, metric));
        }
        let database = catalog::database();
        for (key, id, version, result) in results {
            let segment = result.unwrap_or_else(|e| {
                // Shown by milvus_segments() until the segment loads again.
                shared::set_damage(database, oid, id.0, Some(&e.to_string()));
                let failed = Failed::new(format!("read segment {id} of index \"{}\"", index.name()), e);
                raise_error(&failed.with_detail("Queries need every flushed segment."));
            });
            shared::set_damage(database, oid, id.0, None);
            explain::count_load();
            LOADED.with_borrow_mut(|loaded| loaded.insert(key, (version, Arc::new(segment))));
        }
    }
    LOADED.with_borrow(|loaded| keys.iter().map(|k| loaded[k].1.clone()).collect())
}

/// A segment loaded off the main thread: its cache key, id, tombstones'
/// version, and the segment or why it could not be read.
type LoadResult = ((u32, String), SegmentId, (usize, usize), Result<LoadedSegment, JobError>);

/// Loads `entries` of `manifest` from `store`, through the local cache.
fn load(
    oid: u32,
    store: &Arc<Storage>,
    manifest: &Manifest,
    entries: Vec<SegmentEntry>,
    metric: Metric,
) -> Vec<LoadResult> {
    let store = Arc::clone(store);
    let cache = storage::cache();
    let by_range = jobs::rows_by_range(&cache, manifest.flushed_segments());
    let threads = crate::off_thread::threads();
    let results = crate::off_thread::run("load", move |_| {
        let loaded = jobs::load_all(&store, &cache, &entries, metric, threads, by_range);
        entries
            .iter()
            .zip(loaded)
            .map(|(e, l)| (loaded_key(oid, e), e.meta.id, e.tombstone_version(), l))
            .collect::<Vec<_>>()
    });
    storage::report_cache_use();
    results
}

/// Forgets what this backend loaded of the index `oid` (its mappings of
/// files found damaged go with them).
pub fn forget(oid: u32) {
    LOADED.with_borrow_mut(|loaded| loaded.retain(|k, _| k.0 != oid));
}
