//! The embedded store's objects in the index's own pages, so that they
//! travel with the WAL: a standby, a restored base backup, PITR and
//! pg_rewind get them with the relation, as they get a B-tree's pages.
//!
//! An object is a chain of object pages (a manifest page's layout, tagged
//! with the object's [`ObjectRef::page_tag`]), written page after page
//! before the manifest change that references it (data first, metadata
//! last), three pages to a WAL record as full images. Until that commit the
//! chain is unreachable: a crash leaves pages [`crate::pages::free::sweep`]
//! takes back, which it does only while no chain is being written (the
//! skin's writers hold a lock the sweep must get). The manifest entry's
//! `pages` names the chain's first page; readers walk it under the meta
//! page's share lock, with the manifest that references it, so no commit
//! can free it meanwhile. A manifest commit that stops referencing an
//! object frees its chain in the same breath (`manifest_chain::Commit`),
//! each page checked against the tag, so a page freed twice (a crash
//! between the two) is never another chain's.
//!
//! The local directory (`pg_milvus/objects`) stays what searches map; it
//! is a copy any server rebuilds from these pages.

use std::collections::HashSet;
use std::io::{Read, Write};

use crate::error::{SqlError, SqlState};
use crate::format::delta::DeltaBinlog;
use crate::format::manifest::{Manifest, ObjectRef, SegmentEntry};
use crate::format::page::{OBJECT_PAGE_ID, manifest_bytes_per_page};
use crate::storage::{Storage, StorageError};

use super::{Block, INVALID_BLOCK, Lock, LockedBuffer, MetaGuard, PageStore, Record, new_page};

/// Pages of one WAL record: GenericXLog takes four, the chain's next page
/// is held locked beside them.
const PAGES_PER_RECORD: usize = 3;

/// Writes one object's bytes, as they come, into a new chain of object
/// pages; [`ChainWriter::finish`] returns its first page.
pub struct ChainWriter<S: PageStore> {
    store: S,
    tag: u64,
    head: Option<Block>,
    /// The page the chain goes on at: allocated (and locked) before the
    /// record that points at it is written.
    next: Option<S::Buffer>,
    pending: Vec<u8>,
}

impl<S: PageStore> ChainWriter<S> {
    pub fn new(store: S, object: &ObjectRef) -> Self {
        ChainWriter {
            store,
            tag: object.page_tag(),
            head: None,
            next: None,
            pending: Vec::with_capacity(PAGES_PER_RECORD * manifest_bytes_per_page() * 2),
        }
    }

    /// Takes the next piece of the object; writes every whole record's
    /// worth that is not the object's last.
    pub fn write(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        let record = PAGES_PER_RECORD * manifest_bytes_per_page();
        let mut at = 0;
        while self.pending.len() - at > record {
            let lookahead = new_page(self.store);
            self.write_pages(at..at + record, Some(lookahead));
            at += record;
            self.store.check_for_interrupts();
        }
        self.pending.drain(..at);
    }

    /// Writes what is left; returns the chain's first page.
    pub fn finish(mut self) -> Block {
        let per_page = manifest_bytes_per_page();
        let len = self.pending.len();
        let mut at = 0;
        loop {
            let rest = len - at;
            let take = rest.min(PAGES_PER_RECORD * per_page);
            let last = take == rest;
            let lookahead = (!last).then(|| new_page(self.store));
            self.write_pages(at..at + take, lookahead);
            at += take;
            if last {
                break;
            }
        }
        self.head.expect("a chain has a page")
    }

    /// One record: the pages `bytes` of `pending` fill (at least one), the
    /// last pointing at `then` (which becomes the next record's first).
    fn write_pages(&mut self, bytes: std::ops::Range<usize>, then: Option<S::Buffer>) {
        let per_page = manifest_bytes_per_page();
        let pages = bytes.len().div_ceil(per_page).max(1);
        let mut buffers: Vec<S::Buffer> = Vec::with_capacity(pages);
        buffers.push(self.next.take().unwrap_or_else(|| new_page(self.store)));
        while buffers.len() < pages {
            buffers.push(new_page(self.store));
        }
        self.head.get_or_insert(buffers[0].block());
        let after = then.as_ref().map_or(INVALID_BLOCK, |b| b.block());
        let blocks: Vec<Block> = buffers.iter().map(|b| b.block()).skip(1).chain([after]).collect();
        let data = &self.pending[bytes];
        let mut record = Record::start(self.store);
        for (i, buffer) in buffers.iter_mut().enumerate() {
            let piece = data.chunks(per_page).nth(i).unwrap_or_default();
            record.fresh_page(buffer).init_object(piece, blocks[i], self.tag);
        }
        record.finish();
        self.next = then;
    }
}

/// Why an object could not be read back from its pages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the pages of object {key} are damaged: {what}")]
pub struct DamagedObject {
    pub key: String,
    pub what: String,
}

impl SqlError for DamagedObject {
    fn sqlstate(&self) -> SqlState {
        SqlState::IndexCorrupted
    }

    fn hint(&self) -> Option<&'static str> {
        Some("REINDEX the index to rebuild it from the table.")
    }
}

/// Reads `object` from its chain, piece by piece into `sink`, checking its
/// length and checksum. The caller holds the meta page locked with a
/// manifest that references the object, so its chain is not freed
/// meanwhile.
pub fn read<S: PageStore>(store: S, object: &ObjectRef, mut sink: impl FnMut(&[u8])) -> Result<(), DamagedObject> {
    let damaged = |what: String| DamagedObject { key: object.key.clone(), what };
    let Some(head) = object.pages else { return Err(damaged("it has no pages".into())) };
    let (tag, mut left, mut crc) = (object.page_tag(), object.size, 0u32);
    let mut block = head;
    while left > 0 {
        if block == INVALID_BLOCK || block >= store.blocks() {
            return Err(damaged(format!("the chain ends with {left} bytes unread")));
        }
        let buffer = store.read(block, Lock::Share);
        let page = buffer.page();
        let opaque = page.chain().filter(|o| o.page_id == OBJECT_PAGE_ID && o.segment == tag);
        let Some(opaque) = opaque else {
            return Err(damaged(format!("block {block} is not one of its pages")));
        };
        let piece = page.manifest_bytes(left.min(manifest_bytes_per_page() as u64) as usize);
        crc = crc32c::crc32c_append(crc, piece);
        sink(piece);
        left -= piece.len() as u64;
        block = opaque.next;
        drop(buffer);
        store.check_for_interrupts();
    }
    if crc != object.crc32c {
        return Err(damaged(format!("checksum mismatch: stored {:08x}, computed {crc:08x}", object.crc32c)));
    }
    Ok(())
}

/// The whole of `object`, read from its chain ([`read`]).
pub fn read_all<S: PageStore>(store: S, object: &ObjectRef) -> Result<Vec<u8>, DamagedObject> {
    let mut bytes = Vec::with_capacity(object.size as usize);
    read(store, object, |piece| bytes.extend_from_slice(piece))?;
    Ok(bytes)
}

/// Why objects could not be copied between a local store and pages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CopyError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Damaged(#[from] DamagedObject),
}

impl SqlError for CopyError {
    fn sqlstate(&self) -> SqlState {
        match self {
            CopyError::Storage(e) => e.sqlstate(),
            CopyError::Damaged(e) => e.sqlstate(),
        }
    }

    fn hint(&self) -> Option<&'static str> {
        match self {
            CopyError::Storage(e) => e.hint(),
            CopyError::Damaged(e) => e.hint(),
        }
    }
}

/// Bytes read from a local file at a time while its object is written to
/// pages.
const READ_PIECE: usize = 1 << 20;

/// Writes `object`, which the `file://` store `local` holds, into a new
/// chain of pages and points `object.pages` at it. The chain is unreachable
/// until a manifest commit references the object.
pub fn write_from_local<S: PageStore>(store: S, local: &Storage, object: &mut ObjectRef) -> Result<(), StorageError> {
    let path = local.local_path(&object.key).expect("a file:// store");
    let mut file = std::fs::File::open(&path).map_err(|e| local.local_failure("open", &object.key, &e))?;
    let mut writer = ChainWriter::new(store, object);
    let mut piece = vec![0u8; READ_PIECE];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut piece).map_err(|e| local.local_failure("read", &object.key, &e))?;
        if n == 0 {
            break;
        }
        writer.write(&piece[..n]);
        total += n as u64;
    }
    if total != object.size {
        let e = std::io::Error::other(format!("{total} bytes where the object has {}", object.size));
        return Err(local.local_failure("read", &object.key, &e));
    }
    object.pages = Some(writer.finish());
    Ok(())
}

/// Writes a segment's `keys` (in binlog order, 8 bytes each,
/// little-endian) into a new chain of pages, as an index on a shared store
/// keeps them for VACUUM; returns the reference, `name` naming it in
/// messages. Unreachable until a manifest commit names it.
pub fn write_keys<S: PageStore>(store: S, name: String, keys: &[u64]) -> ObjectRef {
    let bytes: Vec<u8> = keys.iter().flat_map(|k| k.to_le_bytes()).collect();
    let mut object = ObjectRef::of(name, &bytes);
    write_bytes(store, &mut object, &bytes);
    object
}

/// Writes `object`, whose bytes are `bytes`, into a new chain of pages and
/// points `object.pages` at it (an object of a shared store that VACUUM
/// reads: a delta binlog).
pub fn write_bytes<S: PageStore>(store: S, object: &mut ObjectRef, bytes: &[u8]) {
    assert_eq!((bytes.len() as u64, crc32c::crc32c(bytes)), (object.size, object.crc32c), "the object's bytes");
    let mut writer = ChainWriter::new(store, object);
    writer.write(bytes);
    object.pages = Some(writer.finish());
}

/// Reads the keys [`write_keys`] wrote, checked as any object's bytes.
pub fn read_keys<S: PageStore>(store: S, keys: &ObjectRef) -> Result<Vec<u64>, DamagedObject> {
    let bytes = read_all(store, keys)?;
    Ok(bytes.chunks_exact(8).map(|k| u64::from_le_bytes(k.try_into().expect("8 bytes"))).collect())
}

/// A flushed segment's keys and the row positions its tombstones name
/// (delta binlogs and pending), read from pages alone: `None` unless the
/// pages hold its keys and every delta binlog (an index on a shared store,
/// since manifest version 5), so that VACUUM needs neither the store nor
/// the cache.
pub fn segment_keys<S: PageStore>(store: S, entry: &SegmentEntry) -> Option<Result<SegmentKeys, DamagedObject>> {
    let keys = entry.keys.as_ref()?;
    if entry.delta_binlogs.iter().any(|d| d.pages.is_none()) {
        return None;
    }
    let read = || {
        let keys = read_keys(store, keys)?;
        let mut deleted: HashSet<u32> = entry.pending_tombstones.iter().collect();
        for object in &entry.delta_binlogs {
            let bytes = read_all(store, object)?;
            let delta = DeltaBinlog::decode(&object.key, &bytes)
                .map_err(|e| DamagedObject { key: object.key.clone(), what: e.to_string() })?;
            deleted.extend(delta.rows);
        }
        Ok(SegmentKeys { keys, deleted })
    };
    Some(read())
}

/// What [`segment_keys`] reads: a flushed segment's keys in binlog order,
/// and the positions its tombstones name.
#[derive(Debug)]
pub struct SegmentKeys {
    pub keys: Vec<u64>,
    pub deleted: HashSet<u32>,
}

/// What [`restore_missing`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Restored {
    pub objects: usize,
    pub bytes: u64,
}

/// Copies every object of `manifest` that is in pages but missing from
/// the `file://` store `local` into it, from its pages: what a server that
/// got the index by WAL (a standby, a restored backup) does before it reads
/// the objects. The caller holds the meta page locked (`meta`) and read
/// `manifest` under that lock, so no chain is freed meanwhile. Each file is
/// written under a staging name (`#` in it: GC removes one a crash left)
/// and renamed into place, so a reader never sees part of one.
pub fn restore_missing<S: PageStore>(
    meta: &MetaGuard<S>,
    manifest: &Manifest,
    local: &Storage,
) -> Result<Restored, CopyError> {
    let store = meta.store();
    let mut restored = Restored::default();
    for object in manifest.objects().filter(|o| o.pages.is_some()) {
        let path = local.local_path(&object.key).expect("a file:// store");
        if path.exists() {
            continue;
        }
        let fail = |op, e: std::io::Error| CopyError::Storage(local.local_failure(op, &object.key, &e));
        let staging = path.with_file_name(format!(
            "{}#restore{}",
            path.file_name().expect("a key names a file").to_string_lossy(),
            std::process::id()
        ));
        std::fs::create_dir_all(path.parent().expect("a key is under a directory")).map_err(|e| fail("restore", e))?;
        let mut file = std::io::BufWriter::with_capacity(
            READ_PIECE,
            std::fs::File::create(&staging).map_err(|e| fail("restore", e))?,
        );
        let mut written = Ok(());
        let read = read(store, object, |piece| {
            if written.is_ok() {
                written = file.write_all(piece);
            }
        });
        let finished = written.and_then(|_| file.into_inner().map_err(|e| e.into_error())).and_then(|f| f.sync_all());
        if let Err(e) = read.map_err(CopyError::from).and(finished.map_err(|e| fail("restore", e))) {
            let _ = std::fs::remove_file(&staging);
            return Err(e);
        }
        std::fs::rename(&staging, &path).map_err(|e| fail("restore", e))?;
        restored.objects += 1;
        restored.bytes += object.size;
        crate::pause::reach(crate::pause::Point::ObjectRestored, &crate::pause::NOT_CANCELLED);
    }
    Ok(restored)
}

/// Removes the files under `prefix` (an index's) of the `file://` store
/// `local` that `manifest` does not name: a replica's copies of objects its
/// primary has since collected, which no garbage collection runs on a
/// replica to take. Staging files of names the manifest holds may be
/// another backend's restore in progress, and stay. Only for a server that
/// writes no objects of its own (a standby): elsewhere an upload waiting
/// for its commit is unnamed too. Returns what it removed.
pub fn remove_unreferenced(local: &Storage, prefix: &str, manifest: &Manifest) -> Restored {
    let named: HashSet<&str> = manifest.objects().map(|o| o.key.as_str()).collect();
    let mut removed = Restored::default();
    for file in local.local_files(prefix) {
        if !named.contains(file.key.split('#').next().unwrap_or_default()) && std::fs::remove_file(&file.path).is_ok() {
            removed.objects += 1;
            removed.bytes += file.meta.len();
        }
    }
    removed
}

/// Removes the files of `objects` (those in pages) that the `file://` store
/// `local` holds with bytes that are not the object's (another size, another
/// checksum): a directory file damaged on disk, which [`restore_missing`]
/// then writes again from the pages. A reader that has the old file mapped
/// keeps its mapping; the next one maps the restored file. Returns the keys
/// removed.
pub fn discard_damaged<'a>(
    local: &Storage,
    objects: impl IntoIterator<Item = &'a ObjectRef>,
) -> Result<Vec<String>, StorageError> {
    let mut discarded = Vec::new();
    for object in objects.into_iter().filter(|o| o.pages.is_some()) {
        let path = local.local_path(&object.key).expect("a file:// store");
        let Ok(mut file) = std::fs::File::open(&path) else { continue };
        let (mut crc, mut size, mut piece) = (0u32, 0u64, vec![0u8; READ_PIECE]);
        loop {
            let n = file.read(&mut piece).map_err(|e| local.local_failure("read", &object.key, &e))?;
            if n == 0 {
                break;
            }
            crc = crc32c::crc32c_append(crc, &piece[..n]);
            size += n as u64;
        }
        if (size, crc) != (object.size, object.crc32c) {
            std::fs::remove_file(&path).map_err(|e| local.local_failure("remove", &object.key, &e))?;
            discarded.push(object.key.clone());
        }
    }
    Ok(discarded)
}

/// Empties the chains of `objects`, which no manifest references any more:
/// each page still tagged as the object's, one WAL record a page, offered
/// to the free space map. A page tagged otherwise ends the walk: it was
/// freed before (a crash cut a walk short) and may be another chain's.
/// Returns how many pages it freed.
pub fn free<'a, S: PageStore>(store: S, objects: impl IntoIterator<Item = &'a ObjectRef>) -> u32 {
    let mut freed = 0;
    for object in objects {
        let (tag, mut block) = (object.page_tag(), object.pages.unwrap_or(INVALID_BLOCK));
        while block != INVALID_BLOCK && block < store.blocks() {
            let mut buffer = store.read(block, Lock::Exclusive);
            let Some(opaque) = buffer.page().chain().filter(|o| o.page_id == OBJECT_PAGE_ID && o.segment == tag) else {
                break;
            };
            let mut record = Record::start(store);
            record.fresh_page(&mut buffer).clear();
            record.finish();
            drop(buffer);
            store.record_free(block);
            freed += 1;
            crate::pause::reach(crate::pause::Point::ChainPageFreed, &crate::pause::NOT_CANCELLED);
            block = opaque.next;
        }
    }
    if freed > 0 {
        store.update_free_space_map();
    }
    freed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::manifest::ObjectRef;
    use crate::pages::memory::MemoryPages;

    /// Writes `bytes` as an object's chain; returns its first page.
    fn write<S: PageStore>(store: S, object: &ObjectRef, bytes: &[u8]) -> Block {
        let mut writer = ChainWriter::new(store, object);
        writer.write(bytes);
        writer.finish()
    }

    /// A relation with its block 0 taken, as the meta page takes it.
    fn relation() -> MemoryPages {
        let pages = MemoryPages::new();
        drop((&pages).extend());
        pages
    }

    fn object(len: usize, seed: u8) -> (ObjectRef, Vec<u8>) {
        let bytes: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect();
        (ObjectRef::of(format!("1/2/3/{seed}/insert-0"), &bytes), bytes)
    }

    #[test]
    fn objects_of_every_length_read_back_whole() {
        let per_page = manifest_bytes_per_page();
        for len in [1, per_page - 1, per_page, per_page + 1, 3 * per_page, 3 * per_page + 1, 10 * per_page + 7] {
            let pages = relation();
            let store = &pages;
            let (mut o, bytes) = object(len, 1);
            // Pieces of odd sizes, as a file is read.
            let mut writer = ChainWriter::new(store, &o);
            for piece in bytes.chunks(1000) {
                writer.write(piece);
            }
            o.pages = Some(writer.finish());
            assert_eq!(read_all(store, &o).unwrap(), bytes, "{len} bytes");
            assert_eq!(store.blocks() as usize, 1 + len.div_ceil(per_page), "one page a page's worth, no more");
        }
    }

    #[test]
    fn damage_and_reuse_are_errors_never_other_bytes() {
        let pages = relation();
        let store = &pages;
        let (mut a, bytes) = object(5 * manifest_bytes_per_page(), 2);
        a.pages = Some(write(store, &a, &bytes));
        let mut wrong = a.clone();
        wrong.crc32c ^= 1;
        let e = read_all(store, &wrong).unwrap_err();
        assert!(e.what.contains("is not one of its pages"), "the tag covers the checksum: {e}");
        // Freed, then a page reused by another object: the old reference
        // finds a page that is not its own.
        assert_eq!(free(store, [&a]), 5);
        assert_eq!(free(store, [&a]), 0, "freeing twice frees nothing");
        let (mut b, other) = object(100, 3);
        b.pages = Some(write(store, &b, &other));
        assert!(read_all(store, &a).is_err());
        assert_eq!(read_all(store, &b).unwrap(), other);
        let e = read_all(store, &ObjectRef { pages: None, ..b.clone() }).unwrap_err();
        assert_eq!(e.to_string(), format!("the pages of object {} are damaged: it has no pages", b.key));
    }
}
