//! The growing segment's pages: a new index's first one ([`lay_out`]),
//! appending rows, sealing the segment, and a flush's commit, which
//! releases a sealed chain.
//!
//! An insert ([`insert_row`]) adds its row to the tail of the growing
//! chain under the meta page's share lock ([`add_to_tail`]); when the tail
//! is full it takes the meta page exclusively and links a new page holding
//! the row, updating the meta page in the same WAL record
//! ([`append_page`]); when the segment is at its size limit
//! ([`size_rule`]) it has the caller seal it first. Holding the meta page
//! across the row write is what makes a seal a barrier: a seal takes it
//! exclusively, so no insert is half in the old growing segment.

use crate::element::{Element, Row, Shape};
use crate::format::manifest::Manifest;
use crate::format::page::{Chunks, row_item_with, rows_per_page};
use crate::policy::seal::SealPolicy;
use crate::segment::{SealReason, SegmentId};
use crate::vector::{VectorError, check_row};

use super::{Lock, LockedBuffer, META_BLOCK, Meta, MetaGuard, PageStore, Record, chain, manifest_chain, new_page};

/// The size rule of a growing segment of `shape`: `max_rows`, in whole
/// pages (the workers add the time rules). Sparse rows vary in width, so
/// pages of them count as [`SPARSE_GROWING_PAGES`]-ths of `max_rows`: an
/// insert seals at that many pages, the workers at `max_rows` rows counted.
pub fn size_rule(max_rows: u64, shape: Shape) -> SealPolicy {
    let (rows_per_page, pages_per_row) = match Chunks::of(shape) {
        Some(chunks) => (1, chunks.count as u64),
        None if shape.element == Element::Sparse => ((max_rows / SPARSE_GROWING_PAGES).max(1), 1),
        None => (rows_per_page(shape) as u64, 1),
    };
    SealPolicy { max_rows, rows_per_page, pages_per_row, max_bytes: u64::MAX, idle_secs: None, lifetime_secs: None }
}

/// Pages of a growing segment of sparse rows at which an insert seals it:
/// 1 MiB of pages, the bytes dense rows seal at by default
/// ([`crate::policy::seal::GROWING_BYTES`]).
pub const SPARSE_GROWING_PAGES: u64 = crate::policy::seal::GROWING_BYTES / crate::format::page::PAGE_SIZE as u64;

/// What the caller of [`insert_row`] did with a growing segment found full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// It sealed the segment: the row goes into the new growing one.
    Sealed(SegmentId),
    /// Another session sealed it meanwhile, or room was made: try again.
    Retry,
    /// No room to seal and nothing to make it: the segment grows on past
    /// its limit.
    GrowOn,
}

/// Appends the row `key` to the growing segment, with its filter values
/// (`crate::format::values`; none in an index without filter columns, whose
/// rows are never cut in chunks). If the segment is at its
/// size limit (`max_rows`, [`size_rule`]), calls `seal(segment, reason)`
/// first, and goes on as it says. Returns the last segment `seal` sealed,
/// or the error of a row whose dimensions are not the index's.
pub fn insert_row<S: PageStore>(
    store: S,
    key: u64,
    row: Row<'_>,
    values: &[u8],
    max_rows: u64,
    mut seal: impl FnMut(SegmentId, SealReason) -> Full,
) -> Result<Option<SegmentId>, VectorError> {
    let mut sealed = None;
    let mut seal_at_limit = true;
    let mut full = |segment, reason, seal_at_limit: &mut bool| match seal(segment, reason) {
        Full::Sealed(segment) => sealed = Some(segment),
        Full::Retry => {}
        Full::GrowOn => *seal_at_limit = false,
    };
    loop {
        let meta = MetaGuard::lock(store, Lock::Share);
        check_row(meta.dims(), row)?;
        if let Some(chunks) = Chunks::of(meta.shape()) {
            assert!(values.is_empty(), "rows in chunks carry no filter values");
            drop(meta);
            match insert_chunks(store, key, row, &chunks, max_rows, seal_at_limit) {
                Ok(()) => break,
                Err((reason, segment)) => {
                    full(segment, reason, &mut seal_at_limit);
                    continue;
                }
            }
        }

        // Fast path: the tail has room.
        let tail = meta.growing_tail;
        let item = row_item_with(key, row, values);
        if add_to_tail(&meta, &item) {
            break;
        }
        drop(meta);

        // Slow path: extend the chain under the exclusive meta lock.
        let mut meta = MetaGuard::lock(store, Lock::Exclusive);
        if meta.growing_tail != tail {
            // Someone extended (or sealed) meanwhile: start over.
            continue;
        }
        if let Some(reason) = meta.needs_seal(&size_rule(max_rows, meta.shape())).filter(|_| seal_at_limit) {
            let segment = meta.growing();
            drop(meta);
            full(segment, reason, &mut seal_at_limit);
            continue;
        }
        append_page(&mut meta, &item);
        break;
    }
    Ok(sealed)
}

/// Appends a row of more dimensions than a page holds, in chunks of a page
/// each (`crate::format::page::Chunks`): the first into the tail if it is
/// empty (a segment's first page), each other one into a new page linked
/// after it, one WAL record each, under the exclusive meta lock so the
/// chunks of two rows never interleave. A crash between two records leaves
/// an unfinished row of a transaction that never committed: readers leave
/// it out, VACUUM removes it. `Err` when the segment is full (and
/// `seal_at_limit`), with why and the segment: seal it, then try again.
fn insert_chunks<S: PageStore>(
    store: S,
    key: u64,
    row: Row<'_>,
    chunks: &Chunks,
    max_rows: u64,
    seal_at_limit: bool,
) -> Result<(), (SealReason, SegmentId)> {
    let mut meta = MetaGuard::lock(store, Lock::Exclusive);
    if let Some(reason) = meta.needs_seal(&size_rule(max_rows, meta.shape())).filter(|_| seal_at_limit) {
        return Err((reason, meta.growing()));
    }
    let first = add_to_empty_tail(&mut meta, &chunks.item(key, 0, row)) as usize;
    for seq in first..chunks.count {
        append_page(&mut meta, &chunks.item(key, seq, row));
    }
    Ok(())
}

/// Under the meta page's lock (shared suffices): adds `item` to the tail
/// page of the growing chain, in one WAL record. False when it does not
/// fit, and nothing changed: extend the chain ([`append_page`]).
pub fn add_to_tail<S: PageStore>(meta: &MetaGuard<S>, item: &[u8]) -> bool {
    let store = meta.store();
    let mut tail = store.read(meta.growing_tail, Lock::Exclusive);
    let mut record = Record::start(store);
    if record.page(&mut tail).add_item(item) {
        record.finish();
        true
    } else {
        record.abort();
        false
    }
}

/// Under the meta page's exclusive lock: adds `item` to the tail page if it
/// holds no row yet (a segment's first page), in one WAL record; false
/// otherwise.
pub fn add_to_empty_tail<S: PageStore>(meta: &mut MetaGuard<S>, item: &[u8]) -> bool {
    let store = meta.store();
    let block = meta.growing_tail;
    let mut tail = store.read(block, Lock::Exclusive);
    if chain::has_rows(store, block, tail.page(), meta.shape()) {
        return false;
    }
    let mut record = Record::start(store);
    assert!(record.page(&mut tail).add_item(item), "an item fits an empty page");
    record.finish();
    true
}

/// Under the meta page's exclusive lock: links a new page holding `item`
/// after the growing chain's tail, in one WAL record with the meta page. An
/// item always fits an empty page: dimensions are checked at CREATE INDEX,
/// wider rows cut in chunks.
pub fn append_page<S: PageStore>(meta: &mut MetaGuard<S>, item: &[u8]) {
    let store = meta.store();
    let segment = meta.growing_segment;
    let mut new = new_page(store);
    let mut tail = store.read(meta.growing_tail, Lock::Exclusive);
    let new_block = new.block();
    let mut record = Record::start(store);
    record.meta(meta).extend(new_block);
    record.page(&mut tail).set_next(new_block);
    let mut page = record.fresh_page(&mut new);
    page.init_rows(segment);
    assert!(page.add_item(item), "an item fits an empty page");
    record.finish();
}

/// Under the meta page's exclusive lock, with room for another sealed
/// chain: commits `manifest` (the growing segment sealed, `growing` the new
/// growing one), and in the same WAL record seals the growing chain and
/// starts `growing` in a new, empty page. Drain what the commit released
/// ([`super::release::drain_released`]) once the meta page is unlocked.
pub fn commit_seal<S: PageStore>(meta: &mut MetaGuard<S>, manifest: &Manifest, growing: SegmentId) {
    let store = meta.store();
    let mut first_page = new_page(store);
    let first_block = first_page.block();
    let mut commit = manifest_chain::commit(meta, manifest, 0);
    commit.record().fresh_page(&mut first_page).init_rows(growing.0);
    commit.meta().seal(growing, first_block).expect("room for a sealed chain, checked by the caller");
    commit.finish();
}

/// Under the meta page's exclusive lock: commits `manifest`, which lists
/// the flushed `segment`, and in the same WAL record releases its sealed
/// chain. Drain it once the meta page is unlocked.
pub fn commit_flush<S: PageStore>(meta: &mut MetaGuard<S>, manifest: &Manifest, segment: SegmentId) {
    let mut commit = manifest_chain::commit(meta, manifest, 1);
    commit.meta().finish_flush(segment).expect("a sealed chain, with room made for its release");
    commit.finish();
}

/// A new index's pages, in new, exclusively locked blocks: `meta_page`
/// (block 0), `row_page` (the first page of the growing segment `meta`
/// names) and `manifest_pages` (enough for `manifest`, which lists that
/// segment). `meta` is the new meta page (`MetaPage::new`); the heads of
/// its chains are set here, to the blocks given.
pub fn lay_out<S: PageStore>(
    store: S,
    meta_page: &mut S::Buffer,
    row_page: &mut S::Buffer,
    manifest_pages: &mut [S::Buffer],
    manifest: &[u8],
    meta: Meta,
) {
    assert_eq!(meta_page.block(), META_BLOCK);
    manifest_chain::fill_chain(store, manifest_pages, manifest);
    let growing = meta.growing_segment;
    let (row_block, manifest_head) = (row_page.block(), manifest_pages[0].block());
    let meta = Meta {
        growing_head: row_block,
        growing_tail: row_block,
        manifest_head,
        manifest_len: manifest.len() as u32,
        ..meta
    };
    let mut record = Record::start(store);
    record.init_meta(meta_page, meta);
    record.fresh_page(row_page).init_rows(growing);
    record.finish();
}
