//! Free pages in Postgres: VACUUM's sweep (`milvus_core::pages::free`),
//! and giving the file's free tail back, which needs the relation's locks.

pub use milvus_core::pages::free::census;
use milvus_core::pages::free::{pack, truncation_threshold, worth_truncating};
use pgrx::pg_sys;

use super::{Index, PageStore};

/// VACUUM's sweep (`milvus_core::pages::free::sweep`): empties released
/// chains, takes back chain pages nothing references (object pages only
/// if `objects`: no object's chain is being written), offers every free
/// page to the free space map. Returns how many free pages it offered.
pub fn sweep(index: Index, objects: bool) -> u32 {
    let swept = milvus_core::pages::free::sweep(index, objects);
    if swept.reclaimed > 0 {
        pgrx::log!("index \"{}\": took back {} pages nothing referenced", index.name(), swept.reclaimed);
    }
    swept.offered
}

/// Gives the file's free tail back to the file system, as VACUUM does for
/// a heap: after a build or a flush most pages of an index are free (the
/// rows went to object storage), and an index should not keep its largest
/// size for good. Called by CREATE INDEX, `milvus_flush()` and VACUUM (not
/// by the workers' flushes: see `worker/visit.rs`). Needs the index to
/// itself (a conditional AccessExclusiveLock: no insert or scan runs; if
/// one does, nothing happens and a later flush or VACUUM tries again).
/// Chain pages in the way are moved to the lowest free blocks first
/// (`milvus_core::pages::free::pack`). Returns how many pages were given
/// back.
///
/// As for a heap, only when enough is free (`truncation_threshold`): the
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

/// Packs the file and truncates its free tail, if the index can be had to
/// ourselves (see [`give_back_tail`]).
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
    let end = pack(index);
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
