//! The page protocol: how the index's pages change, generic over where the
//! pages live.
//!
//! An index keeps in its relation the meta page (block 0), the growing and
//! sealed segments' rows in chains of row pages, and the manifest in a
//! chain of manifest pages (docs/format.md, "Index pages"). Every change is
//! one WAL record over at most four pages, so a crash leaves the pages as
//! of some record boundary, and the protocol is what makes every such state
//! a sound one: chains released through the meta page (none leaks), the
//! manifest switched copy-on-write (a commit is whole or absent), a seal
//! that starts the next growing segment in the record that seals.
//!
//! The protocol is written once, against [`PageStore`]: a relation's
//! blocks, locked one at a time, changed only in a [`Record`]. The skin's
//! store is Postgres' buffer manager and GenericXLog (`src/pages/mod.rs`);
//! [`memory::MemoryPages`] keeps pages in memory and can crash at any
//! record boundary, so the crash matrix's sequences run as unit tests
//! (`tests/page_protocol.rs`), in seconds, with the kill -9 matrix of
//! `tests/test_crash.py` as the proof on a real server.
//!
//! The files: `chain.rs` (walking chains, their rows, VACUUM's deletion),
//! `release.rs` (emptying released chains), `manifest_chain.rs` (reading the
//! manifest, [`manifest_chain::commit`]), `growing.rs` (a new index's pages,
//! appending rows, sealing, a flush's commit), `free.rs` (free pages, orphans, the file's
//! tail), `memory.rs` (the in-memory store).
//!
//! Lock order, everywhere: the meta page, then pages along a chain.

pub mod chain;
pub mod free;
pub mod growing;
pub mod manifest_chain;
pub mod memory;
pub mod objects;
pub mod release;

use std::ops::Deref;

pub use crate::format::meta::{Block, INVALID_BLOCK, MetaPage as Meta};
pub use crate::format::page::{Page, PageMut};

/// The meta page's block.
pub const META_BLOCK: Block = 0;

/// How a buffer is locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    Share,
    Exclusive,
}

/// An index relation's pages: what the protocol needs of a store.
///
/// Errors are the store's to raise ([`PageStore::corrupted`] never
/// returns): in Postgres an ERROR, which releases every lock and abandons
/// the open record on its way out.
pub trait PageStore: Copy {
    /// A pinned, locked block; unlocked when dropped.
    type Buffer: LockedBuffer;
    /// One WAL record under construction ([`Record`] wraps it).
    type Record<'b>: RawRecord<'b, Self::Buffer>
    where
        Self: 'b;

    /// The index's name, for messages.
    fn name(self) -> String;
    /// Blocks in the relation.
    fn blocks(self) -> Block;
    /// Reads and locks `block`.
    fn read(self, block: Block, lock: Lock) -> Self::Buffer;
    /// Locks `block` exclusively if nobody holds it.
    fn try_lock_exclusive(self, block: Block) -> Option<Self::Buffer>;
    /// A new block at the end of the relation, exclusively locked.
    fn extend(self) -> Self::Buffer;
    /// A block the free space map offers, if any (it may be stale: check).
    fn free_candidate(self) -> Option<Block>;
    /// Offers `block` (free) to the free space map.
    fn record_free(self, block: Block);
    /// Brings the free space map's upper levels up to date.
    fn update_free_space_map(self);
    /// Starts a WAL record.
    fn start_record<'b>(self) -> Self::Record<'b>
    where
        Self: 'b;
    /// Where a long walk may be cancelled.
    fn check_for_interrupts(self);
    /// Raises the error of damaged index contents; never returns.
    fn corrupted(self, message: String, detail: Option<String>) -> !;
}

/// A locked block.
pub trait LockedBuffer {
    fn block(&self) -> Block;
    fn lock(&self) -> Lock;
    /// The page's bytes (one page, 8-byte aligned), read under the lock.
    fn bytes(&self) -> &[u8];

    fn page(&self) -> Page<'_> {
        Page::new(self.bytes())
    }
}

/// What a store's WAL record does; used through [`Record`].
pub trait RawRecord<'b, B: 'b> {
    /// Registers `buffer` (exclusively locked, and kept so until the record
    /// ends): logged as a delta, or as a whole image if `full_image`.
    /// Returns the slot of its copy.
    fn register(&mut self, buffer: &'b mut B, full_image: bool) -> usize;
    /// The copy of the page registered in `slot`, to change.
    fn page(&mut self, slot: usize) -> &mut [u8];
    /// Writes the copies to their pages and the WAL, as one record.
    fn finish(self);
    /// Abandons the record: the pages stay as they were.
    fn abort(self);
}

/// One WAL record under construction. Pages registered in it (at most
/// four, GenericXLog's limit) are changed in the copies it hands out;
/// [`Record::finish`], or the drop of an unfinished record, writes them to
/// the pages and the WAL in one record. Dropped while an error unwinds, it
/// is abandoned: the pages stay as they were.
///
/// The buffers it registers are borrowed for its whole life (`'b`): they
/// stay locked until the record is written.
pub struct Record<'b, S: PageStore + 'b> {
    raw: Option<S::Record<'b>>,
}

impl<'b, S: PageStore + 'b> Record<'b, S> {
    pub fn start(store: S) -> Record<'b, S> {
        Record { raw: Some(store.start_record()) }
    }

    fn raw(&mut self) -> &mut S::Record<'b> {
        self.raw.as_mut().expect("an open record")
    }

    fn register(&mut self, buffer: &'b mut S::Buffer, full_image: bool) -> usize {
        assert_eq!(buffer.lock(), Lock::Exclusive, "a page is changed under an exclusive lock");
        self.raw().register(buffer, full_image)
    }

    /// Registers a page to change in place (the record holds the delta).
    pub fn page(&mut self, buffer: &'b mut S::Buffer) -> PageMut<'_> {
        let slot = self.register(buffer, false);
        self.registered(slot)
    }

    /// Registers a page to (re)initialise: logged as a full image.
    pub fn fresh_page(&mut self, buffer: &'b mut S::Buffer) -> PageMut<'_> {
        let slot = self.register(buffer, true);
        self.registered(slot)
    }

    /// The page registered in `slot` (registrations count from 0).
    pub fn registered(&mut self, slot: usize) -> PageMut<'_> {
        PageMut::new(self.raw().page(slot))
    }

    /// Registers the meta page, exclusively locked, and returns its
    /// contents to change.
    pub fn meta(&mut self, meta: &'b mut MetaGuard<S>) -> &mut Meta {
        let slot = self.register(&mut meta.buffer, false);
        self.registered(slot).meta()
    }

    /// Writes `meta` into a new meta page `buffer` (CREATE INDEX).
    pub fn init_meta(&mut self, buffer: &'b mut S::Buffer, meta: Meta) {
        let slot = self.register(buffer, true);
        self.registered(slot).init_meta(meta);
    }

    /// Writes the record.
    pub fn finish(mut self) {
        self.raw.take().expect("an open record").finish();
    }

    /// Abandons the record: the registered pages stay as they were.
    pub fn abort(mut self) {
        self.raw.take().expect("an open record").abort();
    }
}

impl<S: PageStore> Drop for Record<'_, S> {
    fn drop(&mut self) {
        if let Some(raw) = self.raw.take() {
            if std::thread::panicking() { raw.abort() } else { raw.finish() }
        }
    }
}

/// The meta page, locked and checked; reads as the [`Meta`]. Changed only
/// in a [`Record`] ([`Record::meta`]).
pub struct MetaGuard<S: PageStore> {
    store: S,
    buffer: S::Buffer,
}

impl<S: PageStore> MetaGuard<S> {
    /// Locks the meta page and checks it is ours: an error otherwise.
    pub fn lock(store: S, lock: Lock) -> MetaGuard<S> {
        let guard = MetaGuard { store, buffer: store.read(META_BLOCK, lock) };
        if let Err(e) = guard.check() {
            let message = format!("index \"{}\" is not a pg_milvus index of this version", store.name());
            store.corrupted(message, Some(e.to_string()));
        }
        guard
    }

    pub fn store(&self) -> S {
        self.store
    }

    pub fn is_exclusive(&self) -> bool {
        self.buffer.lock() == Lock::Exclusive
    }
}

impl<S: PageStore> Deref for MetaGuard<S> {
    type Target = Meta;
    fn deref(&self) -> &Meta {
        Meta::view(self.buffer.bytes()).expect("an aligned page")
    }
}

/// A copy of the meta page, read under a share lock.
pub fn meta_copy<S: PageStore>(store: S) -> Meta {
    *MetaGuard::lock(store, Lock::Share)
}

/// A page for a chain, exclusively locked: a free one the free space map
/// offers, or a new block at the end of the relation.
pub fn new_page<S: PageStore>(store: S) -> S::Buffer {
    while let Some(block) = store.free_candidate() {
        if let Some(buffer) = store.try_lock_exclusive(block)
            && buffer.page().is_free()
        {
            return buffer;
        }
    }
    store.extend()
}

/// Raises the error of a damaged page.
fn damaged<S: PageStore>(store: S, block: Block, what: impl std::fmt::Display) -> ! {
    store.corrupted(format!("index \"{}\": block {block} is damaged: {what}", store.name()), None)
}
