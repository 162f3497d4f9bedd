//! The growing segment's pages: a new index's first one ([`lay_out`]),
//! appending rows, sealing the segment, and a flush's commit, which
//! releases a sealed chain.
//!
//! An insert adds its row to the tail of the growing chain under the meta
//! page's share lock ([`add_to_tail`]); when the tail is full it takes the
//! meta page exclusively and links a new page holding the row, updating the
//! meta page in the same WAL record ([`append_page`]). Holding the meta
//! page across the row write is what makes a seal a barrier: a seal takes
//! it exclusively, so no insert is half in the old growing segment.

use crate::format::manifest::Manifest;
use crate::segment::SegmentId;

use super::{Lock, LockedBuffer, META_BLOCK, Meta, MetaGuard, PageStore, Record, chain, manifest_chain, new_page};

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
