//! The index's pages, typed: the only place that touches buffers, page
//! locks and GenericXLog.
//!
//! Everything the access method keeps in its relation goes through these
//! guards, each releasing what it holds when dropped (on return, and when an
//! error unwinds through it), so no path can forget an unlock:
//!
//! - [`OpenIndex`]: an index relation we opened, closed on drop; [`Index`]
//!   is the borrowed handle every function takes (from an AM callback or an
//!   `OpenIndex`);
//! - [`Buffer`]: a pinned, locked block;
//! - [`MetaGuard`]: the meta page locked shared or exclusive, read as
//!   `&Meta` (checked when taken);
//! - [`Record`]: one GenericXLog record. Buffers are registered into it and
//!   changed through the copies it hands out ([`PageMut`], and `&mut Meta`
//!   for the meta page, which it makes the page header cover); the record is
//!   written when finished or dropped, abandoned when an error unwinds
//!   through it (nothing of it reaches the pages or the WAL). Crash recovery
//!   and physical standbys replay these records like any index's, so the
//!   growing segment needs no log of its own (DESIGN.md: "the log is
//!   Postgres' WAL").
//!
//! What the pages mean lives in the core: the meta page's state machine is
//! `milvus_core::format::meta`, the manifest's encoding `milvus_core::format`. The
//! files here: `rows.rs` (row and manifest page layout), `chain.rs`
//! (walking page chains), `manifest_chain.rs` (reading the manifest, and
//! [`manifest_chain::commit`], the one way a change of it is committed),
//! `release.rs` (emptying the chains commits released), `free.rs` (free
//! pages, orphans, giving the file's tail back).
//!
//! Lock order, everywhere: the meta page, then pages along a chain.

pub mod chain;
pub mod free;
pub mod manifest_chain;
pub mod release;
pub mod rows;

use std::marker::PhantomData;
use std::mem::size_of;
use std::ops::Deref;

pub use milvus_core::format::meta::{Block, INVALID_BLOCK, MetaPage as Meta};
use pgrx::pg_sys;
use pgrx::{PgSqlErrorCode, ereport};

/// The meta page's block.
pub const META_BLOCK: Block = 0;
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

    /// The relation's name, for messages.
    pub fn name(self) -> String {
        // SAFETY: an open relation.
        unsafe { std::ffi::CStr::from_ptr((*(*self.0).rd_rel).relname.data.as_ptr()).to_string_lossy().into_owned() }
    }

    /// Whether the index has its pages yet. CREATE INDEX CONCURRENTLY lists
    /// the index in the catalog, visible to workers and GC, before its
    /// build writes any (`am/build.rs` writes the segments first): until
    /// then there is no meta page to read, and nothing to do.
    pub fn has_pages(self) -> bool {
        self.blocks() > 0
    }

    /// Blocks in the main fork.
    pub fn blocks(self) -> Block {
        // SAFETY: an open relation.
        unsafe { pg_sys::RelationGetNumberOfBlocksInFork(self.0, pg_sys::ForkNumber::MAIN_FORKNUM) }
    }

    /// Reads, pins and locks `block`.
    pub fn read(self, block: Block, lock: Lock) -> Buffer {
        let mut buffer = self.pin(block);
        buffer.lock(lock);
        buffer
    }

    /// A new block at the end of `fork`, exclusively locked (CREATE INDEX,
    /// which also writes the init fork of an unlogged index).
    pub fn extend(self, fork: pg_sys::ForkNumber::Type) -> Buffer {
        // SAFETY: an open relation; the caller has it to itself.
        let buffer = unsafe {
            pg_sys::ReadBufferExtended(self.0, fork, P_NEW, pg_sys::ReadBufferMode::RBM_NORMAL, std::ptr::null_mut())
        };
        let mut buffer = Buffer { buffer, locked: None };
        buffer.lock(Lock::Exclusive);
        buffer
    }

    /// Reads and pins `block`, unlocked (locked with [`Buffer::lock`] or
    /// [`Buffer::try_lock_exclusive`]).
    pub fn pin(self, block: Block) -> Buffer {
        // SAFETY: an open relation; the buffer is released by `Buffer`'s drop.
        let buffer = unsafe {
            pg_sys::ReadBufferExtended(
                self.0,
                pg_sys::ForkNumber::MAIN_FORKNUM,
                block,
                pg_sys::ReadBufferMode::RBM_NORMAL,
                std::ptr::null_mut(),
            )
        };
        Buffer { buffer, locked: None }
    }

    /// A page for a chain, exclusively locked: a free one recorded in the
    /// free space map, or a new block at the end of the relation.
    pub fn new_page(self) -> Buffer {
        loop {
            // SAFETY: an open relation.
            let free = unsafe { pg_sys::GetFreeIndexPage(self.0) };
            if free == INVALID_BLOCK {
                break;
            }
            let mut buffer = self.pin(free);
            if buffer.try_lock_exclusive() && buffer.page().is_free() {
                return buffer;
            }
        }
        // SAFETY: the extension lock is held across the extension only.
        unsafe {
            pg_sys::LockRelationForExtension(self.0, pg_sys::ExclusiveLock as i32);
            let buffer = self.read(P_NEW, Lock::Exclusive);
            pg_sys::UnlockRelationForExtension(self.0, pg_sys::ExclusiveLock as i32);
            buffer
        }
    }

    /// Offers `block` (free) to the free space map.
    pub fn record_free(self, block: Block) {
        // SAFETY: an open relation.
        unsafe { pg_sys::RecordFreeIndexPage(self.0, block) }
    }

    /// Brings the free space map's upper levels up to date (recording a
    /// page updates only its leaf; searches start at the top).
    pub fn update_free_space_map(self) {
        // SAFETY: an open relation.
        unsafe { pg_sys::IndexFreeSpaceMapVacuum(self.0) }
    }

    /// The meta page, locked and checked.
    pub fn meta(self, lock: Lock) -> MetaGuard {
        let guard = MetaGuard { index: self, buffer: self.read(META_BLOCK, lock) };
        if let Err(e) = guard.check() {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED,
                format!("index \"{}\" is not a pg_milvus index of this version", self.name()),
                e.to_string()
            );
        }
        guard
    }

    /// A copy of the meta page, read under a share lock.
    pub fn meta_copy(self) -> Meta {
        *self.meta(Lock::Share)
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

    /// Raises the error of damaged index contents.
    fn corrupted(self, what: String) -> ! {
        crate::error::raise_corrupted(format!("index \"{}\": {what}", self.name()))
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

/// How a buffer is locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    Share,
    Exclusive,
}

/// A pinned buffer, locked or not; unlocked and unpinned when dropped.
pub struct Buffer {
    buffer: pg_sys::Buffer,
    locked: Option<Lock>,
}

impl Buffer {
    fn lock(&mut self, lock: Lock) {
        let mode = match lock {
            Lock::Share => pg_sys::BUFFER_LOCK_SHARE,
            Lock::Exclusive => pg_sys::BUFFER_LOCK_EXCLUSIVE,
        };
        // SAFETY: a pinned buffer, not locked by us.
        unsafe { pg_sys::LockBuffer(self.buffer, mode as i32) };
        self.locked = Some(lock);
    }

    /// Locks exclusively if nobody holds the buffer; false otherwise.
    pub fn try_lock_exclusive(&mut self) -> bool {
        // SAFETY: a pinned buffer, not locked by us.
        let got = unsafe { pg_sys::ConditionalLockBuffer(self.buffer) };
        if got {
            self.locked = Some(Lock::Exclusive);
        }
        got
    }

    pub fn block(&self) -> Block {
        // SAFETY: a pinned buffer.
        unsafe { pg_sys::BufferGetBlockNumber(self.buffer) }
    }

    /// The page, to read; the buffer is locked.
    pub fn page(&self) -> Page<'_> {
        assert!(self.locked.is_some(), "a page is read under its buffer's lock");
        // SAFETY: a pinned, locked buffer.
        Page(unsafe { pg_sys::BufferGetPage(self.buffer) }, PhantomData)
    }

    /// Writes the whole page to the WAL (an unlogged index's init fork,
    /// which GenericXLog does not log).
    pub fn log_whole_page(&self) {
        // SAFETY: an exclusively locked buffer.
        unsafe { pg_sys::log_newpage_buffer(self.buffer, true) };
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: pinned by us, and locked by us if `locked`.
        unsafe {
            if self.locked.is_some() {
                pg_sys::UnlockReleaseBuffer(self.buffer)
            } else {
                pg_sys::ReleaseBuffer(self.buffer)
            }
        }
    }
}

/// A locked page, to read.
#[derive(Clone, Copy)]
pub struct Page<'a>(pg_sys::Page, PhantomData<&'a Buffer>);

impl Page<'_> {
    /// A page no chain uses: never initialised (a relation extension a
    /// crash cut short) or emptied by [`free`], which leaves no special
    /// space. An empty row page (a growing segment's first page before its
    /// first row) has special space and is never taken for free, even when
    /// a free space map that lost its latest changes in a crash still lists
    /// its block.
    pub fn is_free(self) -> bool {
        // SAFETY: a locked page.
        unsafe { pg_sys::PageIsNew(self.0) || (pg_sys::PageIsEmpty(self.0) && pg_sys::PageGetSpecialSize(self.0) == 0) }
    }
}

/// A page registered in a [`Record`]: the copy the record writes at its
/// end.
pub struct PageMut<'r>(pg_sys::Page, PhantomData<&'r ()>);

impl PageMut<'_> {
    /// Empties the page: free for any chain ([`Page::is_free`]).
    pub fn clear(&mut self) {
        // SAFETY: a registered page copy of BLCKSZ bytes.
        unsafe { pg_sys::PageInit(self.0, pg_sys::BLCKSZ as usize, 0) }
    }

    pub fn as_page(&self) -> Page<'_> {
        Page(self.0, PhantomData)
    }
}

/// The meta page, locked; reads as the (checked) [`Meta`]. Changed only
/// in a [`Record`] ([`Record::meta`]).
pub struct MetaGuard {
    index: Index,
    buffer: Buffer,
}

impl MetaGuard {
    pub fn index(&self) -> Index {
        self.index
    }

    pub fn is_exclusive(&self) -> bool {
        self.buffer.locked == Some(Lock::Exclusive)
    }
}

impl Deref for MetaGuard {
    type Target = Meta;
    fn deref(&self) -> &Meta {
        // SAFETY: the meta page is locked while the guard lives; its contents
        // start with a `Meta` (written by `Record::init_meta`).
        unsafe { &*pg_sys::PageGetContents(self.buffer.page().0).cast::<Meta>() }
    }
}

/// One GenericXLog record under construction. Pages registered in it
/// (at most four, GenericXLog's limit) are changed in the copies it hands
/// out; [`Record::finish`], or the drop of an unfinished record, writes
/// them to the pages and the WAL in one record. Dropped while an error
/// unwinds, it is abandoned: the pages stay as they were.
///
/// The buffers it registers are borrowed for its whole life (`'b`): they
/// stay locked until the record is written.
pub struct Record<'b> {
    state: *mut pg_sys::GenericXLogState,
    _buffers: PhantomData<&'b mut Buffer>,
}

impl<'b> Record<'b> {
    pub fn start(index: Index) -> Record<'b> {
        // SAFETY: an open index relation.
        Record { state: unsafe { pg_sys::GenericXLogStart(index.0) }, _buffers: PhantomData }
    }

    fn register(&mut self, buffer: &'b mut Buffer, full_image: bool) -> pg_sys::Page {
        assert_eq!(buffer.locked, Some(Lock::Exclusive), "a page is changed under an exclusive lock");
        let flags = if full_image { pg_sys::GENERIC_XLOG_FULL_IMAGE as i32 } else { 0 };
        // SAFETY: the record is open; the buffer is pinned and exclusively
        // locked, for longer than the record lives ('b).
        unsafe { pg_sys::GenericXLogRegisterBuffer(self.state, buffer.buffer, flags) }
    }

    /// Registers a page to change in place (the record holds the delta).
    pub fn page(&mut self, buffer: &'b mut Buffer) -> PageMut<'_> {
        PageMut(self.register(buffer, false), PhantomData)
    }

    /// Registers a page to (re)initialise: logged as a full image.
    pub fn fresh_page(&mut self, buffer: &'b mut Buffer) -> PageMut<'_> {
        PageMut(self.register(buffer, true), PhantomData)
    }

    /// Registers the meta page, exclusively locked, and returns its
    /// contents to change. The page header is made to cover the whole
    /// [`Meta`] so the record carries every field (GenericXLog skips the
    /// hole between `pd_lower` and `pd_upper`; a meta page written before
    /// `released` existed ended earlier).
    pub fn meta(&mut self, meta: &'b mut MetaGuard) -> &mut Meta {
        let page = self.register(&mut meta.buffer, false);
        // SAFETY: the registered copy of the meta page.
        unsafe {
            cover_meta(page);
            &mut *pg_sys::PageGetContents(page).cast::<Meta>()
        }
    }

    /// Writes `meta` into a new meta page `buffer` (CREATE INDEX).
    pub fn init_meta(&mut self, buffer: &'b mut Buffer, meta: Meta) {
        let page = self.register(buffer, true);
        // SAFETY: the registered copy of a new page.
        unsafe {
            pg_sys::PageInit(page, pg_sys::BLCKSZ as usize, 0);
            *pg_sys::PageGetContents(page).cast::<Meta>() = meta;
            cover_meta(page);
        }
    }

    /// Writes the record.
    pub fn finish(mut self) {
        self.write();
    }

    /// Abandons the record: the registered pages stay as they were.
    pub fn abort(mut self) {
        // SAFETY: started, neither finished nor aborted.
        unsafe { pg_sys::GenericXLogAbort(self.state) };
        self.state = std::ptr::null_mut();
    }

    fn write(&mut self) {
        // SAFETY: started, neither finished nor aborted.
        unsafe { pg_sys::GenericXLogFinish(self.state) };
        self.state = std::ptr::null_mut();
    }
}

impl Drop for Record<'_> {
    fn drop(&mut self) {
        if self.state.is_null() {
            return;
        }
        if std::thread::panicking() {
            // SAFETY: started, neither finished nor aborted.
            unsafe { pg_sys::GenericXLogAbort(self.state) };
        } else {
            self.write();
        }
    }
}

/// Makes the page header of a meta page cover the whole [`Meta`].
unsafe fn cover_meta(page: pg_sys::Page) {
    // SAFETY: a meta page's copy, BLCKSZ bytes.
    unsafe {
        let header = page.cast::<pg_sys::PageHeaderData>();
        (*header).pd_lower = (pg_sys::PageGetContents(page) as usize + size_of::<Meta>() - page as usize) as u16;
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use super::*;
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
