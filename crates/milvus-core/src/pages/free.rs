//! Free pages: taking back what nothing references (after a crash), offering
//! free pages for reuse, and packing the file so its free tail can be given
//! back.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::format::meta::ChainKind;
use crate::format::page::{MANIFEST_PAGE_ID, manifest_pages};

use super::release::drain_released;
use super::{Block, Lock, LockedBuffer, Meta, MetaGuard, PageStore, Record, chain, manifest_chain};

/// Every block the meta page reaches: the manifest, growing, sealed and
/// released chains. The caller holds the meta page locked.
fn reachable<S: PageStore>(store: S, meta: &Meta) -> HashSet<Block> {
    let mut blocks = HashSet::new();
    for (_, head) in meta.chains() {
        chain::walk(store, head, |b, _| _ = blocks.insert(b));
    }
    blocks
}

/// Frees chain pages the meta page does not reach; returns how many.
/// Candidates are found against a share-locked view (inserts go on); each
/// is then checked again under the exclusive lock, where no commit or page
/// extension is under way: a manifest page outside the current and
/// released chains, or a row page of a segment neither growing nor sealed
/// and outside the released chains, belongs to nothing.
fn reclaim_unreferenced<S: PageStore>(store: S) -> u32 {
    let seen = reachable(store, &MetaGuard::lock(store, Lock::Share));
    let mut candidates = Vec::new();
    for block in (1..store.blocks()).filter(|b| !seen.contains(b)) {
        if store.read(block, Lock::Share).page().chain().is_some() {
            candidates.push(block);
        }
        store.check_for_interrupts();
    }
    if candidates.is_empty() {
        return 0;
    }
    let meta = MetaGuard::lock(store, Lock::Exclusive);
    let mut keep = HashSet::new();
    for head in std::iter::once(meta.manifest_head).chain(meta.released()) {
        chain::walk(store, head, |b, _| _ = keep.insert(b));
    }
    let mut freed = 0;
    for block in candidates.into_iter().filter(|b| !keep.contains(b)) {
        let mut buffer = store.read(block, Lock::Exclusive);
        let orphan =
            buffer.page().chain().is_some_and(|o| o.page_id == MANIFEST_PAGE_ID || !meta.is_live_segment(o.segment));
        if orphan {
            let mut record = Record::start(store);
            record.fresh_page(&mut buffer).clear();
            record.finish();
            freed += 1;
        }
    }
    freed
}

/// What VACUUM's sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Chain pages nothing referenced, taken back.
    pub reclaimed: u32,
    /// Free pages offered to the free space map.
    pub offered: u32,
}

/// VACUUM's sweep: empties released chains, takes back chain pages nothing
/// references (a crash while a commit wrote its new manifest pages, before
/// the meta page pointed at them, leaves such pages), then offers every free
/// page to the free space map again (it is not crash-safe: a crash may lose
/// pages recorded since the last checkpoint). Pages locked by someone are
/// skipped.
pub fn sweep<S: PageStore>(store: S) -> Swept {
    drain_released(store);
    let reclaimed = reclaim_unreferenced(store);
    let mut offered = 0;
    for block in 1..store.blocks() {
        if store.try_lock_exclusive(block).is_some_and(|b| b.page().is_free()) {
            store.record_free(block);
            offered += 1;
        }
        store.check_for_interrupts();
    }
    store.update_free_space_map();
    Swept { reclaimed, offered }
}

/// Free pages worth a truncation: heap VACUUM's rule (`REL_TRUNCATE_MINIMUM`
/// 1000 pages, or a sixteenth of the file).
pub fn truncation_threshold(blocks: Block) -> u32 {
    (blocks / 16).clamp(1, 1000)
}

/// Whether the free pages reach [`truncation_threshold`]. Pages are looked
/// at share-locked, one at a time, until they do: an estimate, rechecked
/// under the lock.
pub fn worth_truncating<S: PageStore>(store: S) -> bool {
    let blocks = store.blocks();
    let needed = truncation_threshold(blocks);
    let mut free = 0;
    for block in 1..blocks {
        free += store.read(block, Lock::Share).page().is_free() as u32;
        if free >= needed {
            return true;
        }
    }
    false
}

/// With the index to itself (no insert or scan runs): moves the chain pages
/// in the way of a truncation to the lowest free blocks (the growing
/// segment's page when it holds no row, as after a seal, and the manifest,
/// rewritten as any commit does), empties what that released, and returns
/// where the file can end: after its last page that is not free.
pub fn pack<S: PageStore>(store: S) -> Block {
    let before = store.blocks();
    let mut meta = MetaGuard::lock(store, Lock::Exclusive);
    // Where the file could end: the meta page and every chain page.
    let target = 1 + reachable(store, &meta).len() as Block;
    move_empty_growing_page(&mut meta, target);
    move_manifest(&mut meta, target);
    drop(meta);
    drain_released(store);
    let mut end = before;
    while end > target && store.read(end - 1, Lock::Share).page().is_free() {
        end -= 1;
    }
    end
}

/// The `n` lowest free blocks below `below`, exclusively locked, in one
/// pass (a block is locked once: a second pass would wait on itself); fewer
/// if there are not so many.
fn lowest_free_buffers<S: PageStore>(store: S, below: Block, n: usize) -> Vec<S::Buffer> {
    let end = below.min(store.blocks());
    let mut found = Vec::with_capacity(n);
    for block in 1..end {
        if found.len() == n {
            break;
        }
        let buffer = store.read(block, Lock::Exclusive);
        if buffer.page().is_free() {
            found.push(buffer);
        }
    }
    found
}

/// Under the meta page's exclusive lock: moves the growing segment to a
/// free block below `target` if it is one page, at or past `target`, with no
/// live row; the old page is emptied in the same WAL record.
fn move_empty_growing_page<S: PageStore>(meta: &mut MetaGuard<S>, target: Block) {
    let store = meta.store();
    let (head, shape, segment) = (meta.growing_head, meta.shape(), meta.growing_segment);
    if head < target || head != meta.growing_tail {
        return;
    }
    let mut old = store.read(head, Lock::Exclusive);
    if chain::has_rows(store, head, old.page(), shape) {
        return;
    }
    // The growing page is at or past `target`: the search stops below it.
    let Some(mut new) = lowest_free_buffers(store, target, 1).pop() else { return };
    let mut record = Record::start(store);
    record.meta(meta).move_growing(new.block());
    record.fresh_page(&mut new).init_rows(segment);
    record.fresh_page(&mut old).clear();
    record.finish();
    store.record_free(head);
}

/// Under the meta page's exclusive lock: rewrites the manifest into the
/// lowest free blocks if any of its pages is at or past `target`; the old
/// chain is released in the same WAL record that switches the meta page.
fn move_manifest<S: PageStore>(meta: &mut MetaGuard<S>, target: Block) {
    let store = meta.store();
    if chain::blocks(store, meta.manifest_head).iter().all(|b| *b < target) || !meta.has_release_room(1) {
        return;
    }
    let bytes = manifest_chain::read(meta).encode();
    // Free blocks are none of the current manifest's: no lock taken twice.
    let mut buffers = lowest_free_buffers(store, target, manifest_pages(bytes.len()));
    if buffers.len() < manifest_pages(bytes.len()) {
        return;
    }
    manifest_chain::fill_chain(store, &mut buffers, &bytes);
    let head = buffers[0].block();
    drop(buffers);
    let mut record = Record::start(store);
    record.meta(meta).switch_manifest(head, bytes.len() as u32).expect("room checked above");
    record.finish();
}

/// What each block holds, counted: `meta`, `manifest`, `growing`,
/// `sealed`, `released` (waiting to be emptied), `free`, and `unreferenced`
/// (a chain page nothing points at: a leak, which releasing chains through
/// the meta page rules out, crashes included).
pub fn census<S: PageStore>(store: S) -> Vec<(&'static str, i64)> {
    let meta = MetaGuard::lock(store, Lock::Share);
    let mut kind_of: HashMap<Block, ChainKind> = HashMap::new();
    for (kind, head) in meta.chains() {
        chain::walk(store, head, |block, _| _ = kind_of.insert(block, kind));
    }
    let mut counts: BTreeMap<&'static str, i64> =
        ["meta", "manifest", "growing", "sealed", "released", "free", "unreferenced"].map(|k| (k, 0)).into();
    *counts.entry("meta").or_default() += 1;
    for block in 1..store.blocks() {
        let kind = match kind_of.get(&block) {
            Some(kind) => kind.as_str(),
            None if store.read(block, Lock::Share).page().is_free() => "free",
            None => "unreferenced",
        };
        *counts.entry(kind).or_default() += 1;
        store.check_for_interrupts();
    }
    counts.into_iter().collect()
}
