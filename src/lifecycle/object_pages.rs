//! The embedded store's objects in the index's pages, so that everything
//! Postgres does with its WAL (streaming standbys, archive recovery and
//! PITR, pg_basebackup, pg_rewind, CREATE DATABASE ... TEMPLATE) carries
//! the index without knowing it keeps objects.
//!
//! **Writing.** A job (flush, merge, CREATE INDEX, tombstones) puts its
//! objects in the directory `pg_milvus/objects` on its helper thread, as
//! before; then the main thread copies each into a chain of the index's
//! pages (`milvus_core::pages::objects`: full page images in the WAL, three
//! pages a record) and the manifest change that publishes it names the
//! chain. Data first, metadata last: a crash in between leaves pages of no
//! object, which VACUUM takes back. The writer holds the object-pages lock
//! (`segment_lock.rs`) until the commit, so VACUUM never takes back a chain
//! being written.
//!
//! **Reading.** Searches map the directory's files. A server that got the
//! index through the WAL lacks them: before any job reads an index's
//! objects ([`reading_store`]) the missing ones are copied from the pages
//! into the directory (under the meta page's share lock, checksummed, each
//! renamed into place whole). The directory is thus a copy any server
//! rebuilds; the pages are the truth. A file found damaged when its segment
//! loads is written again from the pages ([`heal`]).
//!
//! **Freeing.** The manifest change that stops referencing an object (GC
//! forgetting a dropped segment, past the grace period) frees its chain.
//!
//! Indexes on S3 or another `file://` location keep their objects there:
//! their store is shared, not carried. Their pages hold only what VACUUM
//! reads, so that it never needs the store nor the cache: each segment's
//! keys ([`keys_into_pages`], [`write_keys_after_flush`]) and its delta
//! binlogs ([`write_delta`]).

use std::sync::Arc;

use milvus_core::format::manifest::{Flushed, Manifest, ObjectRef, SegmentEntry};
use milvus_core::pages::objects;
use milvus_core::segment::SegmentId;
use milvus_core::storage::{Storage, StorageError};
use pgrx::prelude::*;

use super::segment_lock::SegmentLock;
use crate::error::{OrRaise, raise_error};
use crate::pages::{Index, Lock, manifest_chain};
use crate::storage;
use crate::{catalog, gucs};

/// Whether objects stored at `url` (a manifest's) live in the embedded
/// store, and so in pages too.
pub fn is_embedded(url: Option<&str>) -> bool {
    url.is_none_or(|u| u == gucs::default_storage_url())
}

/// Writes every object of `refs` that is not in pages yet into the
/// index's pages, if its manifest's store (`url`) is the embedded one.
/// Returns the lock to hold until the manifest change that references them
/// is committed (whatever the store: what else a job writes into pages
/// before that change, keys and delta binlogs, is written under it too), or
/// why a file could not be read.
pub fn write<'a>(
    index: Index,
    url: Option<&str>,
    refs: impl IntoIterator<Item = &'a mut ObjectRef>,
) -> Result<SegmentLock, StorageError> {
    let lock = SegmentLock::writing_objects(index);
    if is_embedded(url) {
        let local = storage::try_storage_at(url)?;
        for object in refs.into_iter().filter(|o| o.pages.is_none()) {
            objects::write_from_local(index, &local, object)?;
        }
    }
    Ok(lock)
}

/// On a shared store, writes the segment's rows' keys into the index's
/// pages, where VACUUM reads them instead of the store, and names them in
/// `flushed` for its publication: for a merge and CREATE INDEX. A flush
/// writes them after its publication, into the pages its rows leave
/// ([`write_keys_after_flush`]). The caller holds the lock [`write`]
/// returned.
pub fn keys_into_pages(index: Index, url: Option<&str>, flushed: &mut Flushed) {
    if !is_embedded(url) {
        flushed.keys =
            Some(objects::write_keys(index, format!("keys of segment {}", flushed.segment), &flushed.row_keys));
    }
}

/// For a flush on a shared store, after its publication: writes the
/// segment's keys into the pages its rows left and names them in the
/// manifest. The caller holds the segment's lock, so the segment is still
/// flushed. A crash in between leaves a segment without keys in pages,
/// which VACUUM loads instead.
pub fn write_keys_after_flush(index: Index, segment: SegmentId, keys: &[u64]) {
    let _writing = SegmentLock::writing_objects(index);
    let written = objects::write_keys(index, format!("keys of segment {segment}"), keys);
    manifest_chain::change(index, |m| m.set_keys(segment, written)).or_raise();
}

/// Writes a delta binlog (`bytes`, the object `delta` references) into the
/// index's pages, whatever its store: VACUUM reads a segment's tombstones
/// there. Returns the lock to hold until the change that publishes it.
pub fn write_delta(
    index: Index,
    url: Option<&str>,
    delta: &mut ObjectRef,
    bytes: &[u8],
) -> Result<SegmentLock, StorageError> {
    let lock = write(index, url, [&mut *delta])?;
    if delta.pages.is_none() {
        objects::write_bytes(index, delta, bytes);
    }
    Ok(lock)
}

/// The store of `manifest`, opened to read the index's objects: for the
/// embedded store, every object the index keeps in pages is first made
/// present in its directory ([`restore`]).
pub fn reading_store(index: Index, manifest: &Manifest) -> Result<Arc<Storage>, StorageError> {
    let store = storage::try_storage_at(manifest.storage_url.as_deref())?;
    if is_embedded(manifest.storage_url.as_deref()) {
        restore(index, &store);
    }
    Ok(store)
}

/// After a load of `entries` (of `manifest`) from `store` (the manifest's,
/// as [`reading_store`] opened it) failed: their files in the embedded
/// directory whose bytes are not their objects' (damaged on disk) are
/// removed and written again from the pages. Returns how many; 0 for an
/// index on another store, or when every file was whole (the failure is
/// then elsewhere: the pages themselves, the disk).
pub fn heal(index: Index, manifest: &Manifest, store: &Arc<Storage>, entries: &[SegmentEntry]) -> usize {
    if !is_embedded(manifest.storage_url.as_deref()) {
        return 0;
    }
    let objects: Vec<ObjectRef> = entries.iter().flat_map(|e| e.objects().cloned()).collect();
    let checked = Arc::clone(store);
    let discarded = crate::off_thread::run("heal", move |_| objects::discard_damaged(&checked, &objects))
        .unwrap_or_else(|e| raise_error(&e));
    if !discarded.is_empty() {
        restore(index, store);
        warning!(
            "pg_milvus: index \"{}\": {} damaged files in pg_milvus/objects written again from the index's pages",
            index.name(),
            discarded.len()
        );
    }
    discarded.len()
}

/// Copies the objects of the index's current manifest that its embedded
/// directory lacks from their pages; raises an error if a chain is damaged
/// or the directory cannot take a file (a full disk), naming the object.
///
/// On a standby, which runs no garbage collection, restoring is also when
/// the files of objects its primary has since collected go: those of the
/// index's own prefix its manifest no longer names.
pub fn restore(index: Index, local: &Storage) {
    crate::pause::arm();
    let meta = index.meta(Lock::Share);
    let manifest = manifest_chain::read(&meta);
    let restored = objects::restore_missing(&meta, &manifest, local).unwrap_or_else(|e| {
        drop(meta);
        raise_error(&milvus_core::error::Failed::new(
            format!("restore the objects of index \"{}\" from its pages", index.name()),
            e,
        ))
    });
    if restored.objects == 0 {
        return;
    }
    debug1!(
        "pg_milvus: index \"{}\": {} objects ({} bytes) restored from its pages into pg_milvus/objects",
        index.name(),
        restored.objects,
        restored.bytes
    );
    // SAFETY: reads shared state.
    if unsafe { pg_sys::RecoveryInProgress() } {
        let removed = objects::remove_unreferenced(local, &catalog::index_id(index).prefix(), &manifest);
        if removed.objects > 0 {
            debug1!(
                "pg_milvus: index \"{}\": {} files ({} bytes) of objects its primary collected removed",
                index.name(),
                removed.objects,
                removed.bytes
            );
        }
    }
}
