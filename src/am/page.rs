//! The index's pages: where the growing segment lives, WAL-logged.
//!
//! Every change to a page goes through [`Xlog`], a guard over Postgres'
//! generic WAL records (GenericXLog): pages are registered, changed in the
//! copy GenericXLog hands out, and the record is written when the guard
//! finishes (or abandoned when it is dropped unfinished, on error). Crash
//! recovery and physical standbys replay these records like any index's, so
//! the growing segment needs no log of its own (DESIGN.md: "the log is
//! Postgres' WAL").
//!
//! Layout (docs/format.md, "Index pages"):
//! - block 0, the **meta page**: format magic and version, dimensions,
//!   metric, the growing segment's id and its page chain (head, tail), the
//!   page chains of sealed segments not yet flushed, and where the
//!   **manifest** is;
//! - **manifest pages**: the encoded manifest (`milvus_core::format::manifest`,
//!   checksummed), written copy-on-write into new pages; switching the meta
//!   page to them is one WAL record, so a change of the manifest is atomic
//!   with the page-chain changes in the same record;
//! - **row pages**: standard slotted pages (line pointers) whose items are
//!   `[heap TID packed in u64][f32 × dims]`, chained by `next` in the page's
//!   special space, which also names the segment the page belongs to. A row
//!   deleted by VACUUM has its line pointer marked dead.

use std::mem::size_of;

use pgrx::pg_sys;

/// "MVMP": a pg_milvus meta page.
pub const META_MAGIC: u32 = 0x4d56_4d50;
pub const META_VERSION: u32 = 1;
pub const META_BLOCK: pg_sys::BlockNumber = 0;
pub const INVALID_BLOCK: pg_sys::BlockNumber = pg_sys::InvalidBlockNumber;
/// `P_NEW` of bufmgr.h: asks ReadBuffer for a new block at the end.
pub const P_NEW: pg_sys::BlockNumber = pg_sys::InvalidBlockNumber;

/// The meta page's contents.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Meta {
    pub magic: u32,
    pub version: u32,
    pub dims: u32,
    /// `milvus_core::Metric::code()`.
    pub metric: u8,
    pub _reserved: [u8; 3],
    pub growing_segment: u64,
    pub growing_head: pg_sys::BlockNumber,
    pub growing_tail: pg_sys::BlockNumber,
    /// First page of the manifest chain, and the manifest's length in bytes.
    pub manifest_head: pg_sys::BlockNumber,
    pub manifest_len: u32,
    /// Sealed segments whose rows are still in pages (not yet flushed).
    pub sealed_count: u32,
    pub _reserved2: u32,
    pub sealed: [SealedChain; MAX_SEALED],
    /// Heads of page chains a manifest commit stopped referencing and that
    /// are not emptied yet; [`NO_BLOCK`] for none. [`release_one`] empties a
    /// chain page by page, advancing its head here in the same WAL record, so
    /// a crash anywhere leaves each page either listed or free: none leaks.
    /// Appended after the first fields of format 1, whose meta pages had
    /// zeros here.
    pub released: [pg_sys::BlockNumber; MAX_RELEASED],
    /// Pages in the growing chain (all full but the tail: rows have one
    /// size), so an insert knows when the segment is at its size limit
    /// without walking it. 0 in meta pages older than the field: unknown
    /// until the next seal.
    pub growing_pages: u32,
}

/// Chains waiting to be emptied at once: a commit releases at most two (the
/// old manifest and a flushed segment's rows).
pub const MAX_RELEASED: usize = 4;

/// "No chain" in [`Meta::released`]: block 0 is the meta page, never part of
/// a chain.
pub const NO_BLOCK: pg_sys::BlockNumber = 0;

/// The page chain of a sealed, not yet flushed, segment.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SealedChain {
    pub segment: u64,
    pub head: pg_sys::BlockNumber,
    pub _reserved: u32,
}

/// Sealed segments that may wait for their flush at once; at the limit, the
/// growing segment does not seal until a flush succeeds.
pub const MAX_SEALED: usize = 64;

impl Meta {
    pub fn sealed(&self) -> &[SealedChain] {
        &self.sealed[..self.sealed_count as usize]
    }

    /// Heads of the released chains not yet emptied.
    pub fn released(&self) -> impl Iterator<Item = pg_sys::BlockNumber> + '_ {
        self.released.iter().copied().filter(|&b| b != NO_BLOCK)
    }

    /// Every chain the meta page reaches, head first, with its kind:
    /// `manifest`, `growing`, `sealed`, `released`.
    pub fn chains(&self) -> impl Iterator<Item = (&'static str, pg_sys::BlockNumber)> + '_ {
        [("manifest", self.manifest_head), ("growing", self.growing_head)]
            .into_iter()
            .chain(self.sealed().iter().map(|c| ("sealed", c.head)))
            .chain(self.released().map(|head| ("released", head)))
    }
}

/// The special space of a row page.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RowPageOpaque {
    pub next: pg_sys::BlockNumber,
    /// "MV" + page kind, so a stray page is recognised.
    pub page_id: u16,
    pub _reserved: u16,
    pub segment: u64,
}

pub const ROW_PAGE_ID: u16 = 0x4d52;
pub const MANIFEST_PAGE_ID: u16 = 0x4d4d;

/// Packs a heap TID into the u64 key the core stores: block << 16 | offset.
pub fn pack_tid(tid: &pg_sys::ItemPointerData) -> u64 {
    let block = ((tid.ip_blkid.bi_hi as u64) << 16) | tid.ip_blkid.bi_lo as u64;
    (block << 16) | tid.ip_posid as u64
}

pub fn unpack_tid(key: u64) -> pg_sys::ItemPointerData {
    let block = (key >> 16) as u32;
    pg_sys::ItemPointerData {
        ip_blkid: pg_sys::BlockIdData { bi_hi: (block >> 16) as u16, bi_lo: (block & 0xffff) as u16 },
        ip_posid: (key & 0xffff) as u16,
    }
}

/// The bytes of one row item.
pub fn row_item_size(dims: usize) -> usize {
    size_of::<u64>() + dims * size_of::<f32>()
}

/// Rows a row page holds: every row of an index has the same size, so every
/// page of a chain but its tail holds exactly this many.
pub fn rows_per_page(dims: usize) -> usize {
    let usable = pg_sys::BLCKSZ as usize - size_of::<pg_sys::PageHeaderData>() - maxalign(size_of::<RowPageOpaque>());
    usable / (maxalign(row_item_size(dims)) + size_of::<pg_sys::ItemIdData>())
}

/// Largest vector a row page holds (one row per page at the most).
pub fn max_dims_per_page() -> usize {
    let usable = pg_sys::BLCKSZ as usize
        - size_of::<pg_sys::PageHeaderData>()
        - size_of::<pg_sys::ItemIdData>()
        - maxalign(size_of::<RowPageOpaque>());
    (usable - size_of::<u64>()) / size_of::<f32>()
}

fn maxalign(n: usize) -> usize {
    let a = pg_sys::MAXIMUM_ALIGNOF as usize;
    n.div_ceil(a) * a
}

/// A GenericXLog record under construction; abandoned if dropped unfinished.
pub struct Xlog {
    state: *mut pg_sys::GenericXLogState,
}

impl Xlog {
    /// # Safety
    /// `index` is an open index relation.
    pub unsafe fn start(index: pg_sys::Relation) -> Self {
        // SAFETY: a valid, open index relation.
        Xlog { state: unsafe { pg_sys::GenericXLogStart(index) } }
    }

    /// Registers a locked buffer; returns the page to change. `fresh` for a
    /// page being (re)initialised, which is logged as a full image.
    /// # Safety
    /// `buffer` is pinned and exclusively locked by the caller.
    pub unsafe fn register(&mut self, buffer: pg_sys::Buffer, fresh: bool) -> pg_sys::Page {
        let flags = if fresh { pg_sys::GENERIC_XLOG_FULL_IMAGE as i32 } else { 0 };
        // SAFETY: the buffer is pinned and exclusively locked by the caller.
        unsafe { pg_sys::GenericXLogRegisterBuffer(self.state, buffer, flags) }
    }

    pub fn finish(mut self) {
        // SAFETY: started and not yet finished or aborted.
        unsafe { pg_sys::GenericXLogFinish(self.state) };
        self.state = std::ptr::null_mut();
    }
}

impl Drop for Xlog {
    fn drop(&mut self) {
        if !self.state.is_null() {
            // SAFETY: started, neither finished nor aborted.
            unsafe { pg_sys::GenericXLogAbort(self.state) };
        }
    }
}

/// Reads and pins a block.
pub(crate) unsafe fn read_buffer(index: pg_sys::Relation, block: pg_sys::BlockNumber) -> pg_sys::Buffer {
    unsafe {
        pg_sys::ReadBufferExtended(
            index,
            pg_sys::ForkNumber::MAIN_FORKNUM,
            block,
            pg_sys::ReadBufferMode::RBM_NORMAL,
            std::ptr::null_mut(),
        )
    }
}

pub(crate) unsafe fn lock(buffer: pg_sys::Buffer, exclusive: bool) {
    let mode = if exclusive { pg_sys::BUFFER_LOCK_EXCLUSIVE } else { pg_sys::BUFFER_LOCK_SHARE };
    unsafe { pg_sys::LockBuffer(buffer, mode as i32) }
}

/// A new page for the index, exclusively locked: a free one recorded in the
/// free space map, or a new block at the end of the relation.
pub(crate) unsafe fn new_buffer(index: pg_sys::Relation) -> pg_sys::Buffer {
    unsafe {
        loop {
            let free = pg_sys::GetFreeIndexPage(index);
            if free == INVALID_BLOCK {
                break;
            }
            let buffer = read_buffer(index, free);
            if pg_sys::ConditionalLockBuffer(buffer) {
                let page = pg_sys::BufferGetPage(buffer);
                if is_free(page) {
                    return buffer;
                }
                pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_UNLOCK as i32);
            }
            pg_sys::ReleaseBuffer(buffer);
        }
        pg_sys::LockRelationForExtension(index, pg_sys::ExclusiveLock as i32);
        let buffer = read_buffer(index, P_NEW);
        lock(buffer, true);
        pg_sys::UnlockRelationForExtension(index, pg_sys::ExclusiveLock as i32);
        buffer
    }
}

pub(crate) unsafe fn meta(page: pg_sys::Page) -> *mut Meta {
    unsafe { pg_sys::PageGetContents(page).cast::<Meta>() }
}

/// Initialises `page` as the meta page.
pub(crate) unsafe fn init_meta(page: pg_sys::Page, meta_value: Meta) {
    unsafe {
        pg_sys::PageInit(page, pg_sys::BLCKSZ as usize, 0);
        *meta(page) = meta_value;
        cover_meta(page);
    }
}

/// Makes the page header cover the whole [`Meta`], so that WAL records carry
/// every field (GenericXLog skips the hole between `pd_lower` and
/// `pd_upper`; a meta page written before [`Meta::released`] existed ended
/// earlier). Call on a registered meta page before changing it.
pub(crate) unsafe fn cover_meta(page: pg_sys::Page) {
    unsafe {
        let header = page.cast::<pg_sys::PageHeaderData>();
        (*header).pd_lower = (pg_sys::PageGetContents(page) as usize + size_of::<Meta>() - page as usize) as u16;
    }
}

/// Reads the meta page, checking it is one of ours.
pub(crate) unsafe fn read_meta(index: pg_sys::Relation) -> Meta {
    unsafe { with_meta_shared(index, |m| *m) }
}

/// Runs `f` on the (checked) meta page while holding it share-locked: no
/// seal, flush or other manifest commit can switch chains meanwhile, so `f`
/// may read the manifest and the page chains the meta page points at.
pub(crate) unsafe fn with_meta_shared<T>(index: pg_sys::Relation, f: impl FnOnce(&Meta) -> T) -> T {
    unsafe {
        let buffer = read_buffer(index, META_BLOCK);
        lock(buffer, false);
        let m = *meta(pg_sys::BufferGetPage(buffer));
        check_meta(index, &m);
        let out = f(&m);
        pg_sys::UnlockReleaseBuffer(buffer);
        out
    }
}

pub(crate) unsafe fn check_meta(index: pg_sys::Relation, m: &Meta) {
    if m.magic != META_MAGIC || m.version != META_VERSION {
        let name = unsafe { std::ffi::CStr::from_ptr((*(*index).rd_rel).relname.data.as_ptr()) };
        pgrx::ereport!(
            ERROR,
            pgrx::PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED,
            format!("index \"{}\" is not a pg_milvus index of this version", name.to_string_lossy()),
            format!("meta page magic {:#x}, version {}", m.magic, m.version)
        );
    }
}

pub(crate) unsafe fn opaque(page: pg_sys::Page) -> *mut RowPageOpaque {
    unsafe { pg_sys::PageGetSpecialPointer(page).cast::<RowPageOpaque>() }
}

/// Initialises `page` as an empty row page of `segment`.
pub(crate) unsafe fn init_row_page(page: pg_sys::Page, segment: u64) {
    unsafe {
        pg_sys::PageInit(page, pg_sys::BLCKSZ as usize, size_of::<RowPageOpaque>());
        *opaque(page) = RowPageOpaque { next: INVALID_BLOCK, page_id: ROW_PAGE_ID, _reserved: 0, segment };
    }
}

/// Adds a row to `page`; false when it does not fit.
pub(crate) unsafe fn add_row(page: pg_sys::Page, key: u64, vector: &[f32]) -> bool {
    let mut item = Vec::with_capacity(row_item_size(vector.len()));
    item.extend_from_slice(&key.to_ne_bytes());
    for v in vector {
        item.extend_from_slice(&v.to_ne_bytes());
    }
    unsafe {
        let offset = pg_sys::PageAddItemExtended(
            page,
            item.as_ptr().cast_mut().cast(),
            item.len(),
            pg_sys::InvalidOffsetNumber,
            0,
        );
        offset != pg_sys::InvalidOffsetNumber
    }
}

/// Calls `f(offset, key, vector)` for every live row of `page`.
pub(crate) unsafe fn for_each_row(
    page: pg_sys::Page,
    dims: usize,
    mut f: impl FnMut(pg_sys::OffsetNumber, u64, &[f32]),
) {
    unsafe {
        let max = pg_sys::PageGetMaxOffsetNumber(page);
        for offset in 1..=max {
            let item_id = pg_sys::PageGetItemId(page, offset);
            if (*item_id).lp_flags() != pg_sys::LP_NORMAL {
                continue;
            }
            let item = pg_sys::PageGetItem(page, item_id).cast::<u8>();
            let key = u64::from_ne_bytes(std::slice::from_raw_parts(item, 8).try_into().expect("8 bytes"));
            // Items are MAXALIGNed, so the floats after the 8-byte key are aligned.
            let vector = std::slice::from_raw_parts(item.add(8).cast::<f32>(), dims);
            f(offset, key, vector);
        }
    }
}

/// Bytes of manifest one page carries.
fn manifest_bytes_per_page() -> usize {
    pg_sys::BLCKSZ as usize - maxalign(size_of::<pg_sys::PageHeaderData>()) - maxalign(size_of::<RowPageOpaque>())
}

/// Writes `bytes` into a new chain of manifest pages (one WAL record per up
/// to three pages); returns its head. Unreachable until the meta page points
/// at it, so a crash before that leaves only pages for VACUUM to reclaim.
pub(crate) unsafe fn write_manifest_chain(index: pg_sys::Relation, bytes: &[u8]) -> pg_sys::BlockNumber {
    unsafe {
        let buffers: Vec<pg_sys::Buffer> = (0..manifest_pages(bytes.len())).map(|_| new_buffer(index)).collect();
        fill_manifest_pages(index, &buffers, bytes);
        let head = pg_sys::BufferGetBlockNumber(buffers[0]);
        for b in buffers {
            pg_sys::UnlockReleaseBuffer(b);
        }
        head
    }
}

/// Pages a manifest of `len` bytes needs.
pub fn manifest_pages(len: usize) -> usize {
    len.div_ceil(manifest_bytes_per_page()).max(1)
}

/// Writes `bytes` into `buffers` (new, exclusively locked) as a chain.
pub(crate) unsafe fn fill_manifest_pages(index: pg_sys::Relation, buffers: &[pg_sys::Buffer], bytes: &[u8]) {
    unsafe {
        let chunks: Vec<&[u8]> = bytes.chunks(manifest_bytes_per_page()).collect();
        let blocks: Vec<pg_sys::BlockNumber> = buffers.iter().map(|b| pg_sys::BufferGetBlockNumber(*b)).collect();
        for group in (0..chunks.len()).collect::<Vec<_>>().chunks(3) {
            let mut xlog = Xlog::start(index);
            for &i in group {
                let p = xlog.register(buffers[i], true);
                pg_sys::PageInit(p, pg_sys::BLCKSZ as usize, size_of::<RowPageOpaque>());
                let next = blocks.get(i + 1).copied().unwrap_or(INVALID_BLOCK);
                *opaque(p) = RowPageOpaque { next, page_id: MANIFEST_PAGE_ID, _reserved: 0, segment: 0 };
                let contents = pg_sys::PageGetContents(p).cast::<u8>();
                std::ptr::copy_nonoverlapping(chunks[i].as_ptr(), contents, chunks[i].len());
                let header = p.cast::<pg_sys::PageHeaderData>();
                (*header).pd_lower = (contents as usize + chunks[i].len() - p as usize) as u16;
            }
            xlog.finish();
        }
    }
}

/// Reads the meta page and the manifest it points at, under one share lock
/// (a commit frees the old manifest's pages once it has the lock).
pub(crate) unsafe fn read_meta_and_manifest(
    index: pg_sys::Relation,
) -> (Meta, milvus_core::format::manifest::Manifest) {
    unsafe { with_meta_shared(index, |m| (*m, read_manifest(index, m))) }
}

/// Reads the manifest the meta page points at. The caller holds the meta
/// page locked, so the chain cannot be freed while it is read.
pub(crate) unsafe fn read_manifest(index: pg_sys::Relation, meta: &Meta) -> milvus_core::format::manifest::Manifest {
    let mut bytes = Vec::with_capacity(meta.manifest_len as usize);
    unsafe {
        walk_chain(index, meta.manifest_head, |_, p| {
            let take = (meta.manifest_len as usize - bytes.len()).min(manifest_bytes_per_page());
            bytes.extend_from_slice(std::slice::from_raw_parts(pg_sys::PageGetContents(p).cast::<u8>(), take));
        });
    }
    let name = unsafe { super::relation_name(index) };
    milvus_core::format::manifest::Manifest::decode(&format!("manifest of index \"{name}\""), &bytes).unwrap_or_else(
        |e| {
            pgrx::ereport!(
                ERROR,
                pgrx::PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED,
                e.to_string(),
                "REINDEX rebuilds the index from the table."
            );
        },
    )
}

/// The blocks of a chain, in order.
pub(crate) unsafe fn chain_blocks(index: pg_sys::Relation, head: pg_sys::BlockNumber) -> Vec<pg_sys::BlockNumber> {
    let mut blocks = Vec::new();
    unsafe { walk_chain(index, head, |b, _| blocks.push(b)) };
    blocks
}

/// A page no chain uses: never initialised (a relation extension a crash
/// cut short) or emptied by [`release_one`], which leaves no special space.
/// An empty row page (a growing segment's first page before its first row)
/// has special space and is never taken for free, even when a free space map
/// that lost its latest changes in a crash still lists its block.
pub(crate) unsafe fn is_free(page: pg_sys::Page) -> bool {
    unsafe { pg_sys::PageIsNew(page) || (pg_sys::PageIsEmpty(page) && pg_sys::PageGetSpecialSize(page) == 0) }
}

fn is_chain_page(page: pg_sys::Page) -> bool {
    // SAFETY: a locked page of the index; its special space is only read
    // when it has the size of ours.
    unsafe {
        pg_sys::PageGetSpecialSize(page) as usize == maxalign(size_of::<RowPageOpaque>())
            && matches!((*opaque(page)).page_id, ROW_PAGE_ID | MANIFEST_PAGE_ID)
    }
}

/// Under the meta page's exclusive lock, in the WAL record that stops
/// referencing `head`'s chain: lists the chain as released. Returns false if
/// all slots are taken (empty them first with [`release_one`]).
pub(crate) fn add_released(meta: &mut Meta, head: pg_sys::BlockNumber) -> bool {
    if head == INVALID_BLOCK || head == NO_BLOCK {
        return true;
    }
    match meta.released.iter().position(|&b| b == NO_BLOCK) {
        Some(slot) => {
            meta.released[slot] = head;
            true
        }
        None => false,
    }
}

/// Whether `meta` has room for `n` more released chains.
pub(crate) fn has_release_room(meta: &Meta, n: usize) -> bool {
    meta.released().count() + n <= MAX_RELEASED
}

/// Under the meta page's exclusive lock (`meta_buffer`): empties the first
/// page of the first released chain and, in the same WAL record, makes the
/// chain start at the next page. Returns the emptied block, for the free
/// space map, or `None` when nothing is released.
pub(crate) unsafe fn release_one(index: pg_sys::Relation, meta_buffer: pg_sys::Buffer) -> Option<pg_sys::BlockNumber> {
    unsafe {
        let current = &*meta(pg_sys::BufferGetPage(meta_buffer));
        let slot = current.released.iter().position(|&b| b != NO_BLOCK)?;
        let block = current.released[slot];
        let buffer = read_buffer(index, block);
        lock(buffer, true);
        let page = pg_sys::BufferGetPage(buffer);
        // A listed page is always a chain page; anything else ends the chain.
        let next = if is_chain_page(page) { (*opaque(page)).next } else { INVALID_BLOCK };
        let mut xlog = Xlog::start(index);
        let meta_page = xlog.register(meta_buffer, false);
        let p = xlog.register(buffer, true);
        pg_sys::PageInit(p, pg_sys::BLCKSZ as usize, 0);
        cover_meta(meta_page);
        (*meta(meta_page)).released[slot] = if next == INVALID_BLOCK { NO_BLOCK } else { next };
        xlog.finish();
        pg_sys::UnlockReleaseBuffer(buffer);
        Some(block)
    }
}

/// Empties every released chain, one page per WAL record, taking the meta
/// lock for each page only (inserts go on meanwhile), and offers the pages
/// for reuse. Sessions draining at once share the work.
pub(crate) unsafe fn drain_released(index: pg_sys::Relation) {
    unsafe {
        let mut freed = 0;
        loop {
            let meta_buffer = read_buffer(index, META_BLOCK);
            lock(meta_buffer, true);
            let block = release_one(index, meta_buffer);
            pg_sys::UnlockReleaseBuffer(meta_buffer);
            let Some(block) = block else { break };
            pg_sys::RecordFreeIndexPage(index, block);
            freed += 1;
        }
        if freed > 0 {
            // Recording a page updates only the FSM's leaf; searches for a
            // free page start at the top, which this brings up to date.
            pg_sys::IndexFreeSpaceMapVacuum(index);
        }
    }
}

/// VACUUM's sweep: empties released chains, takes back chain pages nothing
/// references (a crash while a commit wrote its new manifest pages, before
/// the meta page pointed at them, leaves such pages), then offers every free
/// page to the free space map again (it is not crash-safe: a crash may lose
/// pages recorded since the last checkpoint). Pages locked by someone are
/// skipped. Returns how many free pages it offered.
pub(crate) unsafe fn sweep_free_pages(index: pg_sys::Relation) -> u32 {
    unsafe {
        drain_released(index);
        reclaim_unreferenced(index);
        let blocks = pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM);
        let mut offered = 0;
        for block in 1..blocks {
            let buffer = read_buffer(index, block);
            if pg_sys::ConditionalLockBuffer(buffer) {
                let free = is_free(pg_sys::BufferGetPage(buffer));
                pg_sys::UnlockReleaseBuffer(buffer);
                if free {
                    pg_sys::RecordFreeIndexPage(index, block);
                    offered += 1;
                }
            } else {
                pg_sys::ReleaseBuffer(buffer);
            }
            pgrx::check_for_interrupts!();
        }
        pg_sys::IndexFreeSpaceMapVacuum(index);
        offered
    }
}

/// Gives the file's free tail back to the file system, as VACUUM does for
/// a heap: after a build or a flush most pages of an index are free (the
/// rows went to object storage), and an index should not keep its largest
/// size for good. Called by CREATE INDEX, `milvus_flush()` and VACUUM (not
/// by the workers' flushes: see `worker/visit.rs`). Needs the index to
/// itself (a conditional AccessExclusiveLock: no insert or scan runs; if
/// one does, nothing happens and a later flush or VACUUM tries again). Chain pages in the way
/// are moved to the lowest free blocks first: the growing segment's page
/// when it holds no row (as after a seal), and the manifest (rewritten, as
/// any commit does). Returns how many pages were given back.
///
/// As for a heap, only when enough is free ([`worth_truncating`]): the
/// lock is logged for standbys, where it cancels queries on the index. Not
/// in parallel mode (a parallel VACUUM), where that logging, which needs a
/// transaction id, cannot run.
pub(crate) unsafe fn give_back_free_tail(index: pg_sys::Relation) -> u32 {
    unsafe { if worth_truncating(index) { truncate_free_tail(index) } else { 0 } }
}

/// [`give_back_free_tail`] for VACUUM, whose sweep has just counted the
/// free pages ([`sweep_free_pages`]): no second pass over the file.
pub(crate) unsafe fn give_back_swept_tail(index: pg_sys::Relation, free: u32) -> u32 {
    unsafe {
        let blocks = pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM);
        if free >= truncation_threshold(blocks) { truncate_free_tail(index) } else { 0 }
    }
}

/// Free pages worth a truncation: heap VACUUM's rule (`REL_TRUNCATE_MINIMUM`
/// 1000 pages, or a sixteenth of the file).
fn truncation_threshold(blocks: pg_sys::BlockNumber) -> u32 {
    (blocks / 16).clamp(1, 1000)
}

/// Moves what is in the way and truncates the free tail, if the index can
/// be had to ourselves (see [`give_back_free_tail`]).
unsafe fn truncate_free_tail(index: pg_sys::Relation) -> u32 {
    unsafe {
        if pg_sys::IsInParallelMode() || !pg_sys::ConditionalLockRelation(index, pg_sys::AccessExclusiveLock as i32) {
            return 0;
        }
        let before = pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM);
        let meta_buffer = read_buffer(index, META_BLOCK);
        lock(meta_buffer, true);
        let m = *meta(pg_sys::BufferGetPage(meta_buffer));
        let used = reachable(index, &m).len() as pg_sys::BlockNumber;
        // Where the file could end: the meta page and every chain page.
        let target = 1 + used;
        move_empty_growing_page(index, meta_buffer, target);
        move_manifest(index, meta_buffer, target);
        pg_sys::UnlockReleaseBuffer(meta_buffer);
        drain_released(index);
        let mut end = before;
        while end > target {
            let buffer = read_buffer(index, end - 1);
            lock(buffer, false);
            let free = is_free(pg_sys::BufferGetPage(buffer));
            pg_sys::UnlockReleaseBuffer(buffer);
            if !free {
                break;
            }
            end -= 1;
        }
        if end < before {
            // WAL-logged, and the free space map is cut to match.
            pg_sys::RelationTruncate(index, end);
            pg_sys::IndexFreeSpaceMapVacuum(index);
        }
        pg_sys::UnlockRelation(index, pg_sys::AccessExclusiveLock as i32);
        before - end
    }
}

/// Whether the free pages reach [`truncation_threshold`]. Pages are looked
/// at share-locked, one at a time, until they do: an estimate, rechecked
/// under the lock.
unsafe fn worth_truncating(index: pg_sys::Relation) -> bool {
    unsafe {
        let blocks = pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM);
        let needed = truncation_threshold(blocks);
        let mut free = 0;
        for block in 1..blocks {
            let buffer = read_buffer(index, block);
            lock(buffer, false);
            free += is_free(pg_sys::BufferGetPage(buffer)) as u32;
            pg_sys::UnlockReleaseBuffer(buffer);
            if free >= needed {
                return true;
            }
        }
        false
    }
}

/// The `n` lowest free blocks below `below`, exclusively locked, in one
/// pass (a block is locked once: a second pass would wait on itself); fewer
/// if there are not so many.
unsafe fn lowest_free_buffers(index: pg_sys::Relation, below: pg_sys::BlockNumber, n: usize) -> Vec<pg_sys::Buffer> {
    unsafe {
        let end = below.min(pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM));
        let mut found = Vec::with_capacity(n);
        for block in 1..end {
            if found.len() == n {
                break;
            }
            let buffer = read_buffer(index, block);
            lock(buffer, true);
            if is_free(pg_sys::BufferGetPage(buffer)) {
                found.push(buffer);
            } else {
                pg_sys::UnlockReleaseBuffer(buffer);
            }
        }
        found
    }
}

/// Under the meta page's exclusive lock: moves the growing segment to a
/// free block below `target` if it is one page, at or past `target`, with no
/// live row; the old page is emptied in the same WAL record.
unsafe fn move_empty_growing_page(index: pg_sys::Relation, meta_buffer: pg_sys::Buffer, target: pg_sys::BlockNumber) {
    unsafe {
        let m = *meta(pg_sys::BufferGetPage(meta_buffer));
        if m.growing_head < target || m.growing_head != m.growing_tail {
            return;
        }
        let old = read_buffer(index, m.growing_head);
        lock(old, true);
        let mut rows = 0;
        for_each_row(pg_sys::BufferGetPage(old), m.dims as usize, |_, _, _| rows += 1);
        // The growing page is at or past `target`: the search stops below it.
        let new = if rows == 0 { lowest_free_buffers(index, target, 1).pop() } else { None };
        if let Some(new) = new {
            let mut xlog = Xlog::start(index);
            let meta_page = xlog.register(meta_buffer, false);
            let new_page = xlog.register(new, true);
            let old_page = xlog.register(old, true);
            init_row_page(new_page, m.growing_segment);
            pg_sys::PageInit(old_page, pg_sys::BLCKSZ as usize, 0);
            cover_meta(meta_page);
            let meta = &mut *meta(meta_page);
            meta.growing_head = pg_sys::BufferGetBlockNumber(new);
            meta.growing_tail = meta.growing_head;
            meta.growing_pages = 1;
            xlog.finish();
            pg_sys::UnlockReleaseBuffer(new);
            pg_sys::RecordFreeIndexPage(index, m.growing_head);
        }
        pg_sys::UnlockReleaseBuffer(old);
    }
}

/// Under the meta page's exclusive lock: rewrites the manifest into the
/// lowest free blocks if any of its pages is at or past `target`; the old
/// chain is released in the same WAL record that switches the meta page.
unsafe fn move_manifest(index: pg_sys::Relation, meta_buffer: pg_sys::Buffer, target: pg_sys::BlockNumber) {
    unsafe {
        let m = *meta(pg_sys::BufferGetPage(meta_buffer));
        if chain_blocks(index, m.manifest_head).iter().all(|b| *b < target) || !has_release_room(&m, 1) {
            return;
        }
        let bytes = read_manifest(index, &m).encode();
        // Free blocks are none of the current manifest's: no lock taken twice.
        let buffers = lowest_free_buffers(index, target, manifest_pages(bytes.len()));
        if buffers.len() < manifest_pages(bytes.len()) {
            for b in buffers {
                pg_sys::UnlockReleaseBuffer(b);
            }
            return;
        }
        fill_manifest_pages(index, &buffers, &bytes);
        let head = pg_sys::BufferGetBlockNumber(buffers[0]);
        for b in buffers {
            pg_sys::UnlockReleaseBuffer(b);
        }
        let mut xlog = Xlog::start(index);
        let meta_page = xlog.register(meta_buffer, false);
        cover_meta(meta_page);
        assert!(switch_manifest(&mut *meta(meta_page), head, bytes.len()), "room checked above");
        xlog.finish();
    }
}

/// In the WAL record being built: points `meta` at the manifest chain at
/// `head` (`len` bytes) and lists the chain it pointed at as released.
/// False if no released slot is free (make room first).
pub(crate) fn switch_manifest(meta: &mut Meta, head: pg_sys::BlockNumber, len: usize) -> bool {
    let old = meta.manifest_head;
    meta.manifest_head = head;
    meta.manifest_len = len as u32;
    add_released(meta, old)
}

/// Every block the meta page reaches: the manifest, growing, sealed and
/// released chains. The caller holds the meta page locked.
unsafe fn reachable(index: pg_sys::Relation, m: &Meta) -> std::collections::HashSet<pg_sys::BlockNumber> {
    let mut blocks = std::collections::HashSet::new();
    for (_, head) in m.chains() {
        unsafe { walk_chain(index, head, |b, _| _ = blocks.insert(b)) };
    }
    blocks
}

/// Frees chain pages the meta page does not reach. Candidates are found
/// against a share-locked view (inserts go on); each is then checked again
/// under the exclusive lock, where no commit or page extension is under way:
/// a manifest page outside the current and released chains, or a row page
/// of a segment neither growing nor sealed and outside the released chains,
/// belongs to nothing.
unsafe fn reclaim_unreferenced(index: pg_sys::Relation) {
    unsafe {
        let seen = with_meta_shared(index, |m| reachable(index, m));
        let blocks = pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM);
        let mut candidates = Vec::new();
        for block in (1..blocks).filter(|b| !seen.contains(b)) {
            let buffer = read_buffer(index, block);
            lock(buffer, false);
            if is_chain_page(pg_sys::BufferGetPage(buffer)) {
                candidates.push(block);
            }
            pg_sys::UnlockReleaseBuffer(buffer);
            pgrx::check_for_interrupts!();
        }
        if candidates.is_empty() {
            return;
        }
        let meta_buffer = read_buffer(index, META_BLOCK);
        lock(meta_buffer, true);
        let m = *meta(pg_sys::BufferGetPage(meta_buffer));
        let mut keep: std::collections::HashSet<pg_sys::BlockNumber> = std::collections::HashSet::new();
        for head in std::iter::once(m.manifest_head).chain(m.released()) {
            walk_chain(index, head, |b, _| _ = keep.insert(b));
        }
        let live_segment = |s: u64| s == m.growing_segment || m.sealed().iter().any(|c| c.segment == s);
        let mut freed = Vec::new();
        for block in candidates.into_iter().filter(|b| !keep.contains(b)) {
            let buffer = read_buffer(index, block);
            lock(buffer, true);
            let page = pg_sys::BufferGetPage(buffer);
            let orphan = is_chain_page(page)
                && ((*opaque(page)).page_id == MANIFEST_PAGE_ID || !live_segment((*opaque(page)).segment));
            if orphan {
                let mut xlog = Xlog::start(index);
                let p = xlog.register(buffer, true);
                pg_sys::PageInit(p, pg_sys::BLCKSZ as usize, 0);
                xlog.finish();
                freed.push(block);
            }
            pg_sys::UnlockReleaseBuffer(buffer);
        }
        pg_sys::UnlockReleaseBuffer(meta_buffer);
        if !freed.is_empty() {
            pgrx::log!("index \"{}\": took back {} pages nothing referenced", super::relation_name(index), freed.len());
        }
    }
}

/// Walks a page chain from `head`, share-locking one page at a time, and
/// calls `f(block, page)` on each.
pub(crate) unsafe fn walk_chain(
    index: pg_sys::Relation,
    head: pg_sys::BlockNumber,
    mut f: impl FnMut(pg_sys::BlockNumber, pg_sys::Page),
) {
    let mut block = head;
    while block != INVALID_BLOCK {
        unsafe {
            let buffer = read_buffer(index, block);
            lock(buffer, false);
            let page = pg_sys::BufferGetPage(buffer);
            if !is_chain_page(page) {
                pg_sys::UnlockReleaseBuffer(buffer);
                pgrx::ereport!(
                    ERROR,
                    pgrx::PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED,
                    format!(
                        "index \"{}\": block {block} is not a page of a segment or manifest chain",
                        super::relation_name(index)
                    ),
                    "REINDEX rebuilds the index from the table."
                );
            }
            f(block, page);
            let next = (*opaque(page)).next;
            pg_sys::UnlockReleaseBuffer(buffer);
            block = next;
        }
        pgrx::check_for_interrupts!();
    }
}

/// What each block of a milvus index holds, counted: `meta`, `manifest`,
/// `growing`, `sealed`, `released` (waiting to be emptied), `free`, and
/// `unreferenced` (a chain page nothing points at: a leak, which releasing
/// chains through the meta page rules out, crashes included). Like
/// pgstatindex, for operators and tests.
#[pgrx::pg_extern(sql = "
CREATE FUNCTION milvus_index_pages(index regclass) RETURNS TABLE(kind text, pages bigint)
    VOLATILE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
COMMENT ON FUNCTION milvus_index_pages(regclass) IS 'the pages of a milvus index by what they hold';
")]
fn milvus_index_pages(
    index: pg_sys::Oid,
) -> pgrx::iter::TableIterator<'static, (pgrx::name!(kind, String), pgrx::name!(pages, i64))> {
    use std::collections::{BTreeMap, HashMap};
    // SAFETY: index_open checks the OID and locks the relation; pages are
    // read under the meta page's share lock, each page share-locked.
    let counts = unsafe {
        let rel = pg_sys::index_open(index, pg_sys::AccessShareLock as i32);
        super::flush::check_milvus_index(rel);
        let counts = with_meta_shared(rel, |m| {
            let mut kind_of: HashMap<pg_sys::BlockNumber, &str> = HashMap::new();
            for (kind, head) in m.chains() {
                for block in chain_blocks(rel, head) {
                    kind_of.insert(block, kind);
                }
            }
            let mut counts: BTreeMap<&str, i64> =
                ["meta", "manifest", "growing", "sealed", "released", "free", "unreferenced"]
                    .into_iter()
                    .map(|k| (k, 0))
                    .collect();
            *counts.get_mut("meta").expect("listed") += 1;
            let blocks = pg_sys::RelationGetNumberOfBlocksInFork(rel, pg_sys::ForkNumber::MAIN_FORKNUM);
            for block in 1..blocks {
                let kind = match kind_of.get(&block) {
                    Some(kind) => *kind,
                    None => {
                        let buffer = read_buffer(rel, block);
                        lock(buffer, false);
                        let free = is_free(pg_sys::BufferGetPage(buffer));
                        pg_sys::UnlockReleaseBuffer(buffer);
                        if free { "free" } else { "unreferenced" }
                    }
                };
                *counts.get_mut(kind).expect("listed") += 1;
                pgrx::check_for_interrupts!();
            }
            counts.into_iter().map(|(k, n)| (k.to_owned(), n)).collect::<Vec<_>>()
        });
        pg_sys::index_close(rel, pg_sys::AccessShareLock as i32);
        counts
    };
    pgrx::iter::TableIterator::new(counts)
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use super::*;
    use pgrx::prelude::*;

    #[pg_test]
    fn tids_pack_and_unpack() {
        for (block, offset) in [(0u32, 1u16), (1, 2), (0xdead_beef, 0xffff), (u32::MAX - 1, 291)] {
            let tid = pg_sys::ItemPointerData {
                ip_blkid: pg_sys::BlockIdData { bi_hi: (block >> 16) as u16, bi_lo: block as u16 },
                ip_posid: offset,
            };
            let back = unpack_tid(pack_tid(&tid));
            assert_eq!(
                (back.ip_blkid.bi_hi, back.ip_blkid.bi_lo, back.ip_posid),
                (tid.ip_blkid.bi_hi, tid.ip_blkid.bi_lo, offset)
            );
        }
        assert!(max_dims_per_page() >= 2000, "a 2000-d vector fits a page: {}", max_dims_per_page());
    }

    /// Inserts seal a segment by counting its pages: a page must take
    /// exactly `rows_per_page` rows.
    #[pg_test]
    fn rows_per_page_is_what_a_page_takes() {
        for dims in [1, 4, 64, 128, 768, max_dims_per_page()] {
            let mut block = vec![0u64; pg_sys::BLCKSZ as usize / 8]; // MAXALIGNed
            let page: pg_sys::Page = block.as_mut_ptr().cast();
            let vector = vec![0.5f32; dims];
            let mut rows = 0;
            // SAFETY: a private, aligned, block-sized buffer.
            unsafe {
                init_row_page(page, 1);
                while add_row(page, rows as u64, &vector) {
                    rows += 1;
                }
            }
            assert_eq!(rows, rows_per_page(dims), "{dims} dimensions");
        }
    }
}
