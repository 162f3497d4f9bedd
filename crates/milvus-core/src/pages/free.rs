//! Free pages: taking back what nothing references (after a crash), offering
//! free pages for reuse, and packing the file so its free tail can be given
//! back.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::format::meta::ChainKind;
use crate::format::page::{MANIFEST_PAGE_ID, OBJECT_PAGE_ID, manifest_pages};

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

/// The tags of the chains the manifest names (objects', segments' keys):
/// an object page with another tag belongs to none ([`super::objects`]).
fn object_tags<S: PageStore>(meta: &MetaGuard<S>) -> HashSet<u64> {
    manifest_chain::read(meta).chains().map(|o| o.page_tag()).collect()
}

/// Frees chain pages the meta page does not reach; returns how many.
/// Candidates are found against a share-locked view (inserts go on); each
/// is then checked again under the exclusive lock, where no commit or page
/// extension is under way: a manifest page outside the current and
/// released chains, a row page of a segment neither growing nor sealed
/// and outside the released chains, or, if `objects` (no object's chain is
/// being written: the caller holds what writers hold), an object page of
/// no object the manifest references, belongs to nothing.
fn reclaim_unreferenced<S: PageStore>(store: S, objects: bool) -> u32 {
    let (seen, tags) = {
        let meta = MetaGuard::lock(store, Lock::Share);
        (reachable(store, &meta), object_tags(&meta))
    };
    let mut candidates = Vec::new();
    for block in (1..store.blocks()).filter(|b| !seen.contains(b)) {
        let opaque = store.read(block, Lock::Share).page().chain();
        if let Some(o) = opaque
            && (o.page_id != OBJECT_PAGE_ID || (objects && !tags.contains(&o.segment)))
        {
            candidates.push((block, o.segment));
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
    let tags = object_tags(&meta);
    let mut freed = 0;
    for (block, tag) in candidates.into_iter().filter(|(b, _)| !keep.contains(b)) {
        let mut buffer = store.read(block, Lock::Exclusive);
        let orphan = buffer.page().chain().is_some_and(|o| match o.page_id {
            MANIFEST_PAGE_ID => true,
            // The page seen as a candidate, still of no object.
            OBJECT_PAGE_ID => o.segment == tag && !tags.contains(&tag),
            _ => !meta.is_live_segment(o.segment),
        });
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
/// skipped. Object pages of no object are taken back only if `objects`:
/// the caller made sure no object's chain is being written.
pub fn sweep<S: PageStore>(store: S, objects: bool) -> Swept {
    drain_released(store);
    let reclaimed = reclaim_unreferenced(store, objects);
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
    let object_pages: usize = manifest_chain::read(&meta).chains().map(|o| manifest_pages(o.size as usize)).sum();
    let target = 1 + (reachable(store, &meta).len() + object_pages) as Block;
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
/// `sealed`, `released` (waiting to be emptied), `objects` (pages of the
/// objects the manifest references), `unpublished` (object pages of no
/// object: written before a commit that a crash or an error cut off, taken
/// back by VACUUM), `free`, and `unreferenced` (a chain page nothing points
/// at: a leak, which releasing chains through the meta page rules out,
/// crashes included).
pub fn census<S: PageStore>(store: S) -> Vec<(&'static str, i64)> {
    let meta = MetaGuard::lock(store, Lock::Share);
    let mut kind_of: HashMap<Block, ChainKind> = HashMap::new();
    for (kind, head) in meta.chains() {
        chain::walk(store, head, |block, _| _ = kind_of.insert(block, kind));
    }
    let tags = object_tags(&meta);
    let mut counts: BTreeMap<&'static str, i64> =
        ["meta", "manifest", "growing", "sealed", "released", "objects", "unpublished", "free", "unreferenced"]
            .map(|k| (k, 0))
            .into();
    *counts.entry("meta").or_default() += 1;
    for block in 1..store.blocks() {
        let kind = match kind_of.get(&block) {
            Some(kind) => kind.as_str(),
            None => {
                let buffer = store.read(block, Lock::Share);
                let page = buffer.page();
                match page.chain() {
                    _ if page.is_free() => "free",
                    Some(o) if o.page_id == OBJECT_PAGE_ID && tags.contains(&o.segment) => "objects",
                    Some(o) if o.page_id == OBJECT_PAGE_ID => "unpublished",
                    _ => "unreferenced",
                }
            }
        };
        *counts.entry(kind).or_default() += 1;
        store.check_for_interrupts();
    }
    counts.into_iter().collect()
}
