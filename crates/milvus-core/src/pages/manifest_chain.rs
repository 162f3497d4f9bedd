//! The manifest in pages: read under the meta page's lock, written
//! copy-on-write into a new chain, and switched to by one WAL record.
//!
//! [`commit`] is the one way a change of the manifest is committed: it
//! writes the new chain, then builds the record that points the meta page
//! at it and releases the old chain. Whatever else the change does to the
//! meta page (a seal, a flush's sealed chain leaving) and to other pages is
//! registered in that same record, so the manifest and the page chains
//! change together or not at all. Objects kept in pages that the new
//! manifest no longer references have their chains freed right after
//! (`super::objects::free`), still under the meta page's lock.

use crate::format::manifest::{Manifest, ObjectRef};
use crate::format::page::{manifest_bytes_per_page, manifest_pages};

use super::{
    Block, INVALID_BLOCK, Lock, LockedBuffer, Meta, MetaGuard, PageStore, Record, chain, new_page, objects, release,
};

/// Reads the manifest the meta page points at; the guard keeps the chain
/// from being released meanwhile.
pub fn read<S: PageStore>(meta: &MetaGuard<S>) -> Manifest {
    let store = meta.store();
    let len = meta.manifest_len as usize;
    let mut bytes = Vec::with_capacity(len);
    chain::walk(store, meta.manifest_head, |_, p| {
        let take = len - bytes.len();
        bytes.extend_from_slice(p.manifest_bytes(take));
    });
    Manifest::decode(&format!("manifest of index \"{}\"", store.name()), &bytes)
        .unwrap_or_else(|e| store.corrupted(e.to_string(), None))
}

/// The generation of the manifest the meta page points at, from the first
/// page of its chain alone (`Manifest::peek_generation`): a backend that
/// read that generation before has it still. Every commit moves it on
/// ([`commit`]). `None`: read it whole.
pub fn generation<S: PageStore>(meta: &MetaGuard<S>) -> Option<u64> {
    let buffer = meta.store().read(meta.manifest_head, Lock::Share);
    Manifest::peek_generation(buffer.page().manifest_bytes(meta.manifest_len as usize))
}

/// The meta page and the manifest, read under one share lock.
pub fn snapshot<S: PageStore>(store: S) -> (Meta, Manifest) {
    let meta = MetaGuard::lock(store, Lock::Share);
    let manifest = read(&meta);
    (*meta, manifest)
}

/// Writes `bytes` into `buffers` (new, exclusively locked) as a chain, one
/// WAL record per up to three pages.
pub fn fill_chain<S: PageStore>(store: S, buffers: &mut [S::Buffer], bytes: &[u8]) {
    let blocks: Vec<Block> = buffers.iter().map(|b| b.block()).collect();
    let chunks: Vec<&[u8]> = bytes.chunks(manifest_bytes_per_page()).collect();
    for (g, group) in buffers.chunks_mut(3).enumerate() {
        let mut record = Record::start(store);
        for (j, buffer) in group.iter_mut().enumerate() {
            let i = g * 3 + j;
            let next = blocks.get(i + 1).copied().unwrap_or(INVALID_BLOCK);
            record.fresh_page(buffer).init_manifest(chunks.get(i).copied().unwrap_or_default(), next);
        }
        record.finish();
    }
}

/// Writes `bytes` into a new chain of manifest pages; returns its head.
/// Unreachable until the meta page points at it, so a crash before that
/// leaves only pages for VACUUM to reclaim.
fn write_chain<S: PageStore>(store: S, bytes: &[u8]) -> Block {
    let mut buffers: Vec<S::Buffer> = (0..manifest_pages(bytes.len())).map(|_| new_page(store)).collect();
    fill_chain(store, &mut buffers, bytes);
    buffers[0].block()
}

/// A manifest change being committed: one WAL record that will point the
/// meta page at the new manifest. Change the meta page through
/// [`Commit::meta`] and register other pages through [`Commit::record`];
/// [`Commit::finish`] writes it all. Dropped unfinished, nothing changes
/// (the new manifest's pages are left for VACUUM to reclaim).
pub struct Commit<'b, S: PageStore + 'b> {
    record: Option<Record<'b, S>>,
    store: S,
    head: Block,
    len: u32,
    /// Objects in pages the old manifest references and the new one does
    /// not: their chains are freed once the record is written.
    dropped: Vec<ObjectRef>,
}

/// The meta page's slot in a commit's record: registered first.
const META_SLOT: usize = 0;

/// Starts committing `manifest`, under the meta page's exclusive lock,
/// with room for the old manifest's chain and `releases` more chains
/// (normally there is; after a crash, or while another session drains,
/// some pages are emptied first). Once the meta page is unlocked, call
/// [`release::drain_released`] to empty what the commit released.
pub fn commit<'b, S: PageStore + 'b>(
    meta: &'b mut MetaGuard<S>,
    manifest: &Manifest,
    releases: usize,
) -> Commit<'b, S> {
    assert!(meta.is_exclusive(), "a manifest commit holds the meta page exclusively");
    let store = meta.store();
    while !meta.has_release_room(1 + releases) {
        let block = release::release_one(meta).expect("slots taken, so something is released");
        store.record_free(block);
    }
    let old = read(meta);
    let dropped = dropped_objects(&old, manifest);
    // Each commit a generation of its own, whatever the change did: caches
    // of the decoded manifest compare nothing else ([`generation`]).
    let bytes = if manifest.generation > old.generation {
        manifest.encode()
    } else {
        Manifest { generation: old.generation + 1, ..manifest.clone() }.encode()
    };
    let head = write_chain(store, &bytes);
    let mut record = Record::start(store);
    record.meta(meta);
    Commit { record: Some(record), store, head, len: bytes.len() as u32, dropped }
}

/// The chains of pages (objects', keys') `old` names and `new` does not.
fn dropped_objects(old: &Manifest, new: &Manifest) -> Vec<ObjectRef> {
    let kept: std::collections::HashSet<(Block, u64)> =
        new.chains().filter_map(|o| Some((o.pages?, o.page_tag()))).collect();
    old.chains().filter(|o| o.pages.is_some_and(|p| !kept.contains(&(p, o.page_tag())))).cloned().collect()
}

impl<'b, S: PageStore + 'b> Commit<'b, S> {
    /// The meta page in the record.
    pub fn meta(&mut self) -> &mut Meta {
        self.record().registered(META_SLOT).meta()
    }

    /// The record, to register the other pages the change writes.
    pub fn record(&mut self) -> &mut Record<'b, S> {
        self.record.as_mut().expect("an open commit")
    }

    /// Points the meta page at the new manifest, releasing the old one, and
    /// writes the record; then frees the chains of the objects it dropped.
    pub fn finish(mut self) {
        let (head, len) = (self.head, self.len);
        self.meta().switch_manifest(head, len).expect("room was made");
        self.record.take().expect("an open commit").finish();
        objects::free(self.store, &std::mem::take(&mut self.dropped));
    }
}

impl<S: PageStore> Drop for Commit<'_, S> {
    fn drop(&mut self) {
        if let Some(record) = self.record.take() {
            record.abort();
        }
    }
}

/// Applies `change` to the manifest under the meta page's exclusive lock
/// and commits it.
pub fn change<S: PageStore, T>(store: S, change: impl FnOnce(&mut Manifest) -> T) -> T {
    let mut meta = MetaGuard::lock(store, Lock::Exclusive);
    let mut manifest = read(&meta);
    let out = change(&mut manifest);
    commit(&mut meta, &manifest, 0).finish();
    drop(meta);
    release::drain_released(store);
    out
}
