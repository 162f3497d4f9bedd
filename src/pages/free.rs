//! Free pages: taking back what nothing references (after a crash), offering
//! free pages for reuse, and giving the file's free tail back.

use std::collections::{BTreeMap, HashMap, HashSet};

use milvus_core::format::meta::ChainKind;
use pgrx::pg_sys;

use super::release::drain_released;
use super::rows::{MANIFEST_PAGE_ID, manifest_pages};
use super::{Block, Buffer, Index, Lock, Meta, MetaGuard, Record, chain, manifest_chain};

/// Every block the meta page reaches: the manifest, growing, sealed and
/// released chains. The caller holds the meta page locked.
fn reachable(index: Index, meta: &Meta) -> HashSet<Block> {
    let mut blocks = HashSet::new();
    for (_, head) in meta.chains() {
        chain::walk(index, head, |b, _| _ = blocks.insert(b));
    }
    blocks
}

/// Frees chain pages the meta page does not reach. Candidates are found
/// against a share-locked view (inserts go on); each is then checked again
/// under the exclusive lock, where no commit or page extension is under way:
/// a manifest page outside the current and released chains, or a row page
/// of a segment neither growing nor sealed and outside the released chains,
/// belongs to nothing.
fn reclaim_unreferenced(index: Index) {
    let seen = reachable(index, &index.meta(Lock::Share));
    let mut candidates = Vec::new();
    for block in (1..index.blocks()).filter(|b| !seen.contains(b)) {
        if index.read(block, Lock::Share).page().chain().is_some() {
            candidates.push(block);
        }
        pgrx::check_for_interrupts!();
    }
    if candidates.is_empty() {
        return;
    }
    let meta = index.meta(Lock::Exclusive);
    let mut keep = HashSet::new();
    for head in std::iter::once(meta.manifest_head).chain(meta.released()) {
        chain::walk(index, head, |b, _| _ = keep.insert(b));
    }
    let mut freed = 0;
    for block in candidates.into_iter().filter(|b| !keep.contains(b)) {
        let mut buffer = index.read(block, Lock::Exclusive);
        let orphan =
            buffer.page().chain().is_some_and(|o| o.page_id == MANIFEST_PAGE_ID || !meta.is_live_segment(o.segment));
        if orphan {
            let mut record = Record::start(index);
            record.fresh_page(&mut buffer).clear();
            record.finish();
            freed += 1;
        }
    }
    drop(meta);
    if freed > 0 {
        pgrx::log!("index \"{}\": took back {freed} pages nothing referenced", index.name());
    }
}

/// VACUUM's sweep: empties released chains, takes back chain pages nothing
/// references (a crash while a commit wrote its new manifest pages, before
/// the meta page pointed at them, leaves such pages), then offers every free
/// page to the free space map again (it is not crash-safe: a crash may lose
/// pages recorded since the last checkpoint). Pages locked by someone are
/// skipped. Returns how many free pages it offered.
pub fn sweep(index: Index) -> u32 {
    drain_released(index);
    reclaim_unreferenced(index);
    let mut offered = 0;
    for block in 1..index.blocks() {
        let mut buffer = index.pin(block);
        if buffer.try_lock_exclusive() && buffer.page().is_free() {
            index.record_free(block);
            offered += 1;
        }
        pgrx::check_for_interrupts!();
    }
    index.update_free_space_map();
    offered
}

/// Gives the file's free tail back to the file system, as VACUUM does for
/// a heap: after a build or a flush most pages of an index are free (the
/// rows went to object storage), and an index should not keep its largest
/// size for good. Called by CREATE INDEX, `milvus_flush()` and VACUUM (not
/// by the workers' flushes: see `worker/visit.rs`). Needs the index to
/// itself (a conditional AccessExclusiveLock: no insert or scan runs; if
/// one does, nothing happens and a later flush or VACUUM tries again).
/// Chain pages in the way are moved to the lowest free blocks first: the
/// growing segment's page when it holds no row (as after a seal), and the
/// manifest (rewritten, as any commit does). Returns how many pages were
/// given back.
///
/// As for a heap, only when enough is free ([`truncation_threshold`]): the
/// lock is logged for standbys, where it cancels queries on the index. Not
/// in parallel mode (a parallel VACUUM), where that logging, which needs a
/// transaction id, cannot run.
pub fn give_back_tail(index: Index) -> u32 {
    if worth_truncating(index) { truncate_tail(index) } else { 0 }
}

/// [`give_back_tail`] for VACUUM, whose sweep has just counted the free
/// pages ([`sweep`]): no second pass over the file.
pub fn give_back_swept_tail(index: Index, free: u32) -> u32 {
    if free >= truncation_threshold(index.blocks()) { truncate_tail(index) } else { 0 }
}

/// Free pages worth a truncation: heap VACUUM's rule (`REL_TRUNCATE_MINIMUM`
/// 1000 pages, or a sixteenth of the file).
fn truncation_threshold(blocks: Block) -> u32 {
    (blocks / 16).clamp(1, 1000)
}

/// Whether the free pages reach [`truncation_threshold`]. Pages are looked
/// at share-locked, one at a time, until they do: an estimate, rechecked
/// under the lock.
fn worth_truncating(index: Index) -> bool {
    let blocks = index.blocks();
    let needed = truncation_threshold(blocks);
    let mut free = 0;
    for block in 1..blocks {
        free += index.read(block, Lock::Share).page().is_free() as u32;
        if free >= needed {
            return true;
        }
    }
    false
}

/// Moves what is in the way and truncates the free tail, if the index can
/// be had to ourselves (see [`give_back_tail`]).
fn truncate_tail(index: Index) -> u32 {
    // SAFETY: a lock on an open relation, released below on every path
    // that took it (an error releases it with the transaction).
    let locked = unsafe {
        !pg_sys::IsInParallelMode()
            && pg_sys::ConditionalLockRelation(index.raw(), pg_sys::AccessExclusiveLock as pg_sys::LOCKMODE)
    };
    if !locked {
        return 0;
    }
    let before = index.blocks();
    let mut meta = index.meta(Lock::Exclusive);
    // Where the file could end: the meta page and every chain page.
    let target = 1 + reachable(index, &meta).len() as Block;
    move_empty_growing_page(&mut meta, target);
    move_manifest(&mut meta, target);
    drop(meta);
    drain_released(index);
    let mut end = before;
    while end > target && index.read(end - 1, Lock::Share).page().is_free() {
        end -= 1;
    }
    // SAFETY: the relation is ours alone (AccessExclusiveLock).
    unsafe {
        if end < before {
            // WAL-logged, and the free space map is cut to match.
            pg_sys::RelationTruncate(index.raw(), end);
            index.update_free_space_map();
        }
        pg_sys::UnlockRelation(index.raw(), pg_sys::AccessExclusiveLock as pg_sys::LOCKMODE);
    }
    before - end
}

/// The `n` lowest free blocks below `below`, exclusively locked, in one
/// pass (a block is locked once: a second pass would wait on itself); fewer
/// if there are not so many.
fn lowest_free_buffers(index: Index, below: Block, n: usize) -> Vec<Buffer> {
    let end = below.min(index.blocks());
    let mut found = Vec::with_capacity(n);
    for block in 1..end {
        if found.len() == n {
            break;
        }
        let buffer = index.read(block, Lock::Exclusive);
        if buffer.page().is_free() {
            found.push(buffer);
        }
    }
    found
}

/// Under the meta page's exclusive lock: moves the growing segment to a
/// free block below `target` if it is one page, at or past `target`, with no
/// live row; the old page is emptied in the same WAL record.
fn move_empty_growing_page(meta: &mut MetaGuard, target: Block) {
    let index = meta.index();
    let (head, shape, segment) = (meta.growing_head, meta.shape(), meta.growing_segment);
    if head < target || head != meta.growing_tail {
        return;
    }
    let mut old = index.read(head, Lock::Exclusive);
    if old.page().has_rows(shape) {
        return;
    }
    // The growing page is at or past `target`: the search stops below it.
    let Some(mut new) = lowest_free_buffers(index, target, 1).pop() else { return };
    let mut record = Record::start(index);
    record.meta(meta).move_growing(new.block());
    record.fresh_page(&mut new).init_rows(segment);
    record.fresh_page(&mut old).clear();
    record.finish();
    index.record_free(head);
}

/// Under the meta page's exclusive lock: rewrites the manifest into the
/// lowest free blocks if any of its pages is at or past `target`; the old
/// chain is released in the same WAL record that switches the meta page.
fn move_manifest(meta: &mut MetaGuard, target: Block) {
    let index = meta.index();
    if chain::blocks(index, meta.manifest_head).iter().all(|b| *b < target) || !meta.has_release_room(1) {
        return;
    }
    let bytes = manifest_chain::read(meta).encode();
    // Free blocks are none of the current manifest's: no lock taken twice.
    let mut buffers = lowest_free_buffers(index, target, manifest_pages(bytes.len()));
    if buffers.len() < manifest_pages(bytes.len()) {
        return;
    }
    manifest_chain::fill_chain(index, &mut buffers, &bytes);
    let head = buffers[0].block();
    drop(buffers);
    let mut record = Record::start(index);
    record.meta(meta).switch_manifest(head, bytes.len() as u32).expect("room checked above");
    record.finish();
}

/// What each block holds, counted: `meta`, `manifest`, `growing`,
/// `sealed`, `released` (waiting to be emptied), `free`, and `unreferenced`
/// (a chain page nothing points at: a leak, which releasing chains through
/// the meta page rules out, crashes included).
pub fn census(index: Index) -> Vec<(&'static str, i64)> {
    let meta = index.meta(Lock::Share);
    let mut kind_of: HashMap<Block, ChainKind> = HashMap::new();
    for (kind, head) in meta.chains() {
        chain::walk(index, head, |block, _| _ = kind_of.insert(block, kind));
    }
    let mut counts: BTreeMap<&'static str, i64> =
        ["meta", "manifest", "growing", "sealed", "released", "free", "unreferenced"].map(|k| (k, 0)).into();
    *counts.entry("meta").or_default() += 1;
    for block in 1..index.blocks() {
        let kind = match kind_of.get(&block) {
            Some(kind) => kind.as_str(),
            None if index.read(block, Lock::Share).page().is_free() => "free",
            None => "unreferenced",
        };
        *counts.entry(kind).or_default() += 1;
        pgrx::check_for_interrupts!();
    }
    counts.into_iter().collect()
}
