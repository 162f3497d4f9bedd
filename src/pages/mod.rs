//! The index's pages in Postgres: the only place that touches buffers,
//! page locks and GenericXLog.
//!
//! The page protocol itself (chains, their release, the manifest's commit,
//! seals, VACUUM's sweep) is the core's, generic over a page store
//! (`milvus_core::pages`), and tested there against pages in memory with a
//! crash at every record boundary. This module is the store it runs on
//! here: [`Index`] implements `PageStore` with the buffer manager (a
//! [`Buffer`] is a pinned, locked block, released when dropped, on return
//! and when an error unwinds through it) and GenericXLog (a [`PgRecord`]
//! under the core's `Record` is one generic WAL record, written when
//! finished or dropped, abandoned when an error unwinds through it: nothing
//! of it reaches the pages or the WAL). Crash recovery and physical standbys replay these records like
//! any index's, so the growing segment needs no log of its own (docs/design.md:
//! "the log is Postgres' WAL").
//!
//! [`OpenIndex`] is an index relation this code opened, closed on drop;
//! [`Index`] the borrowed handle every function takes. The files beside:
//! `rows.rs` (heap TIDs as keys, and the checks that the core's page layout
//! is this server's) and `free.rs` (VACUUM's sweep and giving the file's
//! tail back, which needs the relation's locks).

pub mod free;
pub mod rows;

use std::marker::PhantomData;
use std::ops::Deref;

pub use milvus_core::format::meta::Block;
use milvus_core::pages::RawRecord;
pub use milvus_core::pages::{INVALID_BLOCK, Lock, LockedBuffer, META_BLOCK, Meta, PageStore};
pub use milvus_core::pages::{chain, growing, manifest_chain, release};
use pgrx::pg_sys;

/// The meta page, locked and checked (`milvus_core::pages::MetaGuard`).
pub type MetaGuard = milvus_core::pages::MetaGuard<Index>;

/// `P_NEW` of bufmgr.h: asks ReadBuffer for a new block at the end.
const P_NEW: Block = pg_sys::InvalidBlockNumber;

/// An open index relation, borrowed: valid while whoever opened it keeps
/// it open (Postgres, for an AM callback; an [`OpenIndex`] otherwise).
#[derive(Clone, Copy)]
pub struct Index(pg_sys::Relation);

impl Index {
    /// # Safety
    /// `rel` is an open index relation, for as long as the handle is used.
    pub unsafe fn from_raw(rel: pg_sys::Relation) -> Index {
        Index(rel)
    }

    pub fn raw(self) -> pg_sys::Relation {
        self.0
    }

    pub fn oid(self) -> pg_sys::Oid {
        // SAFETY: an open relation (see `from_raw`).
        unsafe { (*self.0).rd_id }
    }

    /// The relation's file number: new at TRUNCATE and REINDEX, which write
    /// the index over again under the same OID.
    pub fn file_number(self) -> u32 {
        // SAFETY: an open relation.
        #[cfg(feature = "pg15")]
        let number = unsafe { (*self.0).rd_node.relNode };
        // SAFETY: the same; PostgreSQL 16 on call it a locator.
        #[cfg(feature = "pg18")]
        let number = unsafe { (*self.0).rd_locator.relNumber };
        number.to_u32()
    }

    /// The relation's name, for messages.
    pub fn name(self) -> String {
        // SAFETY: an open relation.
        unsafe { std::ffi::CStr::from_ptr((*(*self.0).rd_rel).relname.data.as_ptr()).to_string_lossy().into_owned() }
    }

    /// Whether the index has its pages yet. CREATE INDEX CONCURRENTLY lists
    /// the index in the catalog, visible to workers and GC, before its
    /// build writes its meta page (`am/build.rs` writes the segments first,
    /// into the blocks after block 0, which it leaves new until the end):
    /// until then there is no meta page to read, and nothing to do.
    pub fn has_pages(self) -> bool {
        self.blocks() > 0 && !self.read(META_BLOCK, Lock::Share).page().is_free()
    }

    /// Blocks in the main fork.
    pub fn blocks(self) -> Block {
        // SAFETY: an open relation.
        unsafe { pg_sys::RelationGetNumberOfBlocksInFork(self.0, pg_sys::ForkNumber::MAIN_FORKNUM) }
    }

    /// A new block at the end of `fork`, exclusively locked (CREATE INDEX,
    /// which also writes the init fork of an unlogged index).
    pub fn extend_fork(self, fork: pg_sys::ForkNumber::Type) -> Buffer {
        // SAFETY: an open relation; the caller has it to itself.
        let buffer = unsafe {
            pg_sys::ReadBufferExtended(self.0, fork, P_NEW, pg_sys::ReadBufferMode::RBM_NORMAL, std::ptr::null_mut())
        };
        Buffer::locked(buffer, Lock::Exclusive)
    }

    /// Reads and pins `block`, unlocked.
    fn pin(self, block: Block) -> pg_sys::Buffer {
        // SAFETY: an open relation; the buffer is released by `Buffer`'s
        // drop, or below if it is never locked.
        unsafe {
            pg_sys::ReadBufferExtended(
                self.0,
                pg_sys::ForkNumber::MAIN_FORKNUM,
                block,
                pg_sys::ReadBufferMode::RBM_NORMAL,
                std::ptr::null_mut(),
            )
        }
    }

    /// The meta page, locked and checked.
    pub fn meta(self, lock: Lock) -> MetaGuard {
        MetaGuard::lock(self, lock)
    }

    /// A copy of the meta page, read under a share lock.
    pub fn meta_copy(self) -> Meta {
        milvus_core::pages::meta_copy(self)
    }

    /// The element type of the index's vectors (fixed at CREATE INDEX by
    /// its opclass), so that an insert knows how to read its datum before
    /// it locks anything: read from the meta page once, then kept in the
    /// relcache entry (`rd_amcache`, which Postgres frees with the entry).
    pub fn element(self) -> milvus_core::element::Element {
        use milvus_core::element::Element;
        // SAFETY: an open index; `rd_amcache` is the AM's to use, and is
        // either null or the byte allocated here, in the entry's own
        // memory context.
        unsafe {
            let rel = self.0;
            if (*rel).rd_amcache.is_null() {
                let code = self.meta_copy().shape().element.code();
                let cached = pg_sys::MemoryContextAlloc((*rel).rd_indexcxt, 1).cast::<u8>();
                *cached = code;
                (*rel).rd_amcache = cached.cast();
            }
            Element::from_code(*(*rel).rd_amcache.cast::<u8>()).expect("a checked meta page's element")
        }
    }
}

impl PageStore for Index {
    type Buffer = Buffer;
    type Record<'b> = PgRecord<'b>;

    fn name(self) -> String {
        Index::name(self)
    }

    fn blocks(self) -> Block {
        Index::blocks(self)
    }

    fn read(self, block: Block, lock: Lock) -> Buffer {
        Buffer::locked(self.pin(block), lock)
    }

    fn try_lock_exclusive(self, block: Block) -> Option<Buffer> {
        let buffer = self.pin(block);
        // SAFETY: a buffer we pinned, not locked by us; released here if
        // the lock is not had.
        unsafe {
            if pg_sys::ConditionalLockBuffer(buffer) {
                Some(Buffer { buffer, lock: Lock::Exclusive })
            } else {
                pg_sys::ReleaseBuffer(buffer);
                None
            }
        }
    }

    fn extend(self) -> Buffer {
        // SAFETY: the extension lock is held across the extension only.
        unsafe {
            pg_sys::LockRelationForExtension(self.0, pg_sys::ExclusiveLock as i32);
            let buffer = self.read(P_NEW, Lock::Exclusive);
            pg_sys::UnlockRelationForExtension(self.0, pg_sys::ExclusiveLock as i32);
            buffer
        }
    }

    fn free_candidate(self) -> Option<Block> {
        // SAFETY: an open relation.
        let free = unsafe { pg_sys::GetFreeIndexPage(self.0) };
        (free != INVALID_BLOCK).then_some(free)
    }

    fn record_free(self, block: Block) {
        // SAFETY: an open relation.
        unsafe { pg_sys::RecordFreeIndexPage(self.0, block) }
    }

    fn update_free_space_map(self) {
        // SAFETY: an open relation.
        unsafe { pg_sys::IndexFreeSpaceMapVacuum(self.0) }
    }

    fn start_record<'b>(self) -> PgRecord<'b> {
        // SAFETY: an open index relation.
        PgRecord { state: unsafe { pg_sys::GenericXLogStart(self.0) }, pages: Vec::new(), _buffers: PhantomData }
    }

    fn check_for_interrupts(self) {
        pgrx::check_for_interrupts!();
    }

    fn corrupted(self, message: String, detail: Option<String>) -> ! {
        crate::error::raise_corrupted(message, detail)
    }
}

/// An index relation this code opened: closed when dropped, releasing the
/// lock it was opened with (or keeping it to the end of the transaction,
/// for [`OpenIndex::under_lock`]).
pub struct OpenIndex {
    index: Index,
    release: pg_sys::LOCKMODE,
}

impl OpenIndex {
    /// Opens the index `oid` under `lock` (raises an error if it does not
    /// exist, or is not an index).
    pub fn open(oid: pg_sys::Oid, lock: u32) -> OpenIndex {
        // SAFETY: index_open checks the OID and the relation's kind.
        let rel = unsafe { pg_sys::index_open(oid, lock as pg_sys::LOCKMODE) };
        OpenIndex { index: Index(rel), release: lock as pg_sys::LOCKMODE }
    }

    /// Opens an index whose lock the caller took (and keeps to the end of
    /// the transaction).
    pub fn under_lock(oid: pg_sys::Oid) -> OpenIndex {
        OpenIndex::open(oid, pg_sys::NoLock)
    }
}

impl Deref for OpenIndex {
    type Target = Index;
    fn deref(&self) -> &Index {
        &self.index
    }
}

impl Drop for OpenIndex {
    fn drop(&mut self) {
        // SAFETY: opened in `open`, closed once, here.
        unsafe { pg_sys::index_close(self.index.0, self.release) }
    }
}

/// A pinned, locked buffer; unlocked and unpinned when dropped.
pub struct Buffer {
    buffer: pg_sys::Buffer,
    lock: Lock,
}

impl Buffer {
    /// Locks `buffer`, pinned by us.
    fn locked(buffer: pg_sys::Buffer, lock: Lock) -> Buffer {
        let mode = match lock {
            Lock::Share => pg_sys::BUFFER_LOCK_SHARE,
            Lock::Exclusive => pg_sys::BUFFER_LOCK_EXCLUSIVE,
        };
        // SAFETY: a pinned buffer, not locked by us.
        unsafe { pg_sys::LockBuffer(buffer, mode as i32) };
        Buffer { buffer, lock }
    }

    /// Writes the whole page to the WAL (an unlogged index's init fork,
    /// which GenericXLog does not log).
    pub fn log_whole_page(&self) {
        // SAFETY: an exclusively locked buffer.
        unsafe { pg_sys::log_newpage_buffer(self.buffer, true) };
    }
}

impl LockedBuffer for Buffer {
    fn block(&self) -> Block {
        // SAFETY: a pinned buffer.
        unsafe { pg_sys::BufferGetBlockNumber(self.buffer) }
    }

    fn lock(&self) -> Lock {
        self.lock
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: a pinned, locked buffer of BLCKSZ bytes (MAXALIGNed, as
        // every buffer), read while the lock is held: for the borrow.
        unsafe { std::slice::from_raw_parts(pg_sys::BufferGetPage(self.buffer).cast::<u8>(), pg_sys::BLCKSZ as usize) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: pinned and locked by us.
        unsafe { pg_sys::UnlockReleaseBuffer(self.buffer) }
    }
}

/// A GenericXLog record: the page copies it hands out, written or
/// abandoned as a whole. The buffers it registers are borrowed for its
/// whole life (`'b`).
pub struct PgRecord<'b> {
    state: *mut pg_sys::GenericXLogState,
    pages: Vec<pg_sys::Page>,
    _buffers: PhantomData<&'b mut Buffer>,
}

impl<'b> RawRecord<'b, Buffer> for PgRecord<'b> {
    fn register(&mut self, buffer: &'b mut Buffer, full_image: bool) -> usize {
        let flags = if full_image { pg_sys::GENERIC_XLOG_FULL_IMAGE as i32 } else { 0 };
        // SAFETY: the record is open; the buffer is pinned and exclusively
        // locked (checked by the core's `Record`), for longer than the
        // record lives ('b). GenericXLog raises an error past four pages.
        let page = unsafe { pg_sys::GenericXLogRegisterBuffer(self.state, buffer.buffer, flags) };
        self.pages.push(page);
        self.pages.len() - 1
    }

    fn page(&mut self, slot: usize) -> &mut [u8] {
        // SAFETY: a registered page copy of BLCKSZ bytes, MAXALIGNed, alive
        // until the record ends; borrowed through `&mut self` only.
        unsafe { std::slice::from_raw_parts_mut(self.pages[slot].cast::<u8>(), pg_sys::BLCKSZ as usize) }
    }

    fn finish(mut self) {
        // SAFETY: started, neither finished nor aborted.
        unsafe { pg_sys::GenericXLogFinish(self.state) };
        self.state = std::ptr::null_mut();
    }

    fn abort(mut self) {
        // SAFETY: started, neither finished nor aborted.
        unsafe { pg_sys::GenericXLogAbort(self.state) };
        self.state = std::ptr::null_mut();
    }
}

impl Drop for PgRecord<'_> {
    /// The core's `Record` always finishes or aborts: a record dropped
    /// otherwise is abandoned.
    fn drop(&mut self) {
        if !self.state.is_null() {
            // SAFETY: started, neither finished nor aborted.
            unsafe { pg_sys::GenericXLogAbort(self.state) };
        }
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use super::*;
    use milvus_core::pages::Record;
    use pgrx::prelude::*;

    /// A record is written when finished or dropped, and abandoned when an
    /// error unwinds through it: the page keeps what it had.
    #[pg_test]
    fn a_record_an_error_unwinds_through_changes_nothing() {
        Spi::run("CREATE TABLE r (v vector(2))").unwrap();
        Spi::run("CREATE INDEX r_idx ON r USING milvus (v)").unwrap();
        let oid = Spi::get_one::<pg_sys::Oid>("SELECT 'r_idx'::regclass::oid").unwrap().unwrap();
        let index = OpenIndex::open(oid, pg_sys::RowExclusiveLock);
        let reserved = || index.meta_copy()._reserved2;
        assert_eq!(reserved(), 0);

        let failed = PgTryBuilder::new(|| {
            let mut meta = index.meta(Lock::Exclusive);
            let mut record = Record::start(*index);
            record.meta(&mut meta)._reserved2 = 7;
            error!("an error while the record is open");
        })
        .catch_others(|_| true)
        .execute();
        assert!(failed);
        assert_eq!(reserved(), 0, "abandoned: the meta page is as it was, and unlocked");

        {
            let mut meta = index.meta(Lock::Exclusive);
            let mut record = Record::start(*index);
            record.meta(&mut meta)._reserved2 = 7;
        }
        assert_eq!(reserved(), 7, "dropped unfinished, without an error: written");
        let mut meta = index.meta(Lock::Exclusive);
        let mut record = Record::start(*index);
        record.meta(&mut meta)._reserved2 = 0;
        record.finish();
        drop(meta);
        assert_eq!(reserved(), 0);
    }
}
