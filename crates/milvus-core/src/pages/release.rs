//! Released chains: a commit that stops referencing a chain lists it as
//! released on the meta page (`crate::format::meta`); [`release_one`]
//! empties its first page and advances the listed head in one WAL record,
//! so a crash anywhere leaves each page either listed or free: none leaks.

use super::{Block, INVALID_BLOCK, Lock, LockedBuffer, MetaGuard, PageStore, Record};

/// Under the meta page's exclusive lock: empties the first page of the
/// first released chain and, in the same WAL record, makes the chain start
/// at the next page. Returns the emptied block, for the free space map, or
/// `None` when nothing is released.
pub fn release_one<S: PageStore>(meta: &mut MetaGuard<S>) -> Option<Block> {
    let store = meta.store();
    let (slot, block) = meta.first_released()?;
    let mut buffer = store.read(block, Lock::Exclusive);
    // A listed page is always a chain page; anything else ends the chain.
    let next = buffer.page().chain().map_or(INVALID_BLOCK, |o| o.next);
    let mut record = Record::start(store);
    record.meta(meta).advance_released(slot, next);
    record.fresh_page(&mut buffer).clear();
    record.finish();
    Some(block)
}

/// Empties every released chain, one page per WAL record, taking the meta
/// lock for each page only (inserts go on meanwhile), and offers the pages
/// for reuse. Sessions draining at once share the work.
pub fn drain_released<S: PageStore>(store: S) {
    let mut freed = 0;
    loop {
        let Some(block) = release_one(&mut MetaGuard::lock(store, Lock::Exclusive)) else { break };
        store.record_free(block);
        freed += 1;
    }
    if freed > 0 {
        store.update_free_space_map();
    }
}
