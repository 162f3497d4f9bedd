//! VACUUM: forget rows whose heap tuples are dead, in every kind of segment.
//!
//! After `ambulkdelete` returns, no dead TID may remain reachable through
//! the index, since the heap will reuse it. Each segment is handled under its
//! job lock (`segment_lock.rs`), so a flush never uploads rows this pass
//! removed, and a flush that ran first has moved them where pass 2 finds them.
//!
//! Pass 1, rows in pages (the growing segment, sealed segments not yet
//! flushed): on each page, ask VACUUM's callback about every row's TID and
//! delete the dead rows from the page in one WAL record.
//!
//! Pass 2, flushed segments: load the segment (its keys are the TIDs), find
//! the positions of rows that just died, and record them in the manifest as
//! the segment's pending tombstones: WAL-logged, and written to object
//! storage by nobody here, so VACUUM (and the heap's, and anti-wraparound
//! VACUUM) never waits for the store nor fails with it. A job moves them
//! into a delta binlog later (`crate::lifecycle::tombstones`: the workers after
//! their merges, and `milvus_flush()`), as Milvus' L0 deletes reach
//! segments. A compaction running meanwhile holds its inputs' locks only to
//! read them and to publish: it carries the tombstones this pass records in
//! between over to its output, and the pass goes on until it has seen every
//! flushed segment of the manifest, an output published meanwhile included.
//! Searches skip tombstoned positions, pending or written; compaction drops
//! them. A segment's keys and tombstones are read from the index's pages:
//! on the embedded store its objects are there; on a shared store, its
//! keys and delta binlogs are (manifest version 5 on), so VACUUM needs
//! neither the store nor the cache. A shared store's segment written
//! before that is loaded, from the local cache, and from the store only if
//! the cache lost it: then, with the store unreachable too, VACUUM fails
//! with the cause and the heap keeps its dead tuples (nothing is reused, so
//! nothing is wrong); its next merge writes its output's keys to pages.
//!
//! `amvacuumcleanup` empties the page chains commits released (after a crash
//! some may wait here), offers every free page to the free space map again,
//! gives the file's free tail back (`pages::free::give_back_tail`, when no
//! other session uses the index), and reports how many rows the index holds.

use milvus_core::pages::objects;
use milvus_core::segment::{SegmentId, SegmentState};
use pgrx::prelude::*;

use crate::error::{OrRaise, raise_error};
use crate::lifecycle::open_segments;
use crate::lifecycle::segment_lock::SegmentLock;
use crate::pages::rows::unpack_tid;
use crate::pages::{Index, Lock, chain, free, manifest_chain};

/// VACUUM's cost-based delay (PostgreSQL 18's says it is not ANALYZE's).
///
/// # Safety
/// In VACUUM, on the main thread.
unsafe fn vacuum_delay_point() {
    // SAFETY: the caller's.
    #[cfg(feature = "pg15")]
    unsafe {
        pg_sys::vacuum_delay_point()
    }
    // SAFETY: the caller's.
    #[cfg(feature = "pg18")]
    unsafe {
        pg_sys::vacuum_delay_point(false)
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn ambulkdelete(
    info: *mut pg_sys::IndexVacuumInfo,
    stats: *mut pg_sys::IndexBulkDeleteResult,
    callback: pg_sys::IndexBulkDeleteCallback,
    callback_state: *mut std::ffi::c_void,
) -> *mut pg_sys::IndexBulkDeleteResult {
    // SAFETY: Postgres passes VACUUM's state, the open index, and a callback
    // to call with its state.
    let (stats, index, is_dead) = unsafe {
        let stats = if stats.is_null() { PgBox::<pg_sys::IndexBulkDeleteResult>::alloc0().into_pg() } else { stats };
        let callback = callback.expect("VACUUM passes a callback");
        let is_dead = move |key: u64| {
            let mut tid = unpack_tid(key);
            callback(&mut tid, callback_state)
        };
        (&mut *stats, Index::from_raw((*info).index), is_dead)
    };

    // Pass 1: rows in pages.
    let in_pages: Vec<SegmentId> = index.meta_copy().in_pages().map(|(s, _)| s).collect();
    let mut live = 0.0;
    for segment in in_pages {
        let _lock = SegmentLock::acquire(index, segment.0);
        let meta = index.meta_copy();
        if let Some((_, head)) = meta.in_pages().find(|(s, _)| *s == segment) {
            // SAFETY: VACUUM's cost-based delay, between pages.
            let delay = || unsafe { vacuum_delay_point() };
            let (removed, kept) = chain::delete_rows(index, head, meta.shape(), &is_dead, delay);
            stats.tuples_removed += removed as f64;
            live += kept as f64;
        }
    }

    // Pass 2: flushed segments, until every one in the manifest has been
    // seen: a compaction that finishes meanwhile publishes a segment
    // built from rows loaded before this pass, which must be seen too.
    let mut seen = std::collections::HashSet::new();
    loop {
        let (_, manifest) = manifest_chain::snapshot(index);
        let next =
            manifest.segments.iter().find(|e| e.meta.state == SegmentState::Flushed && !seen.contains(&e.meta.id));
        let Some(id) = next.map(|e| e.meta.id) else { break };
        seen.insert(id);
        let _lock = SegmentLock::acquire(index, id.0);
        let (meta, manifest) = manifest_chain::snapshot(index);
        let Some(entry) = manifest.segment(id).filter(|e| e.meta.state == SegmentState::Flushed) else {
            continue;
        };
        let mut dead = Vec::new();
        let mut visit = |row: usize, key: u64| {
            if is_dead(key) {
                dead.push(row as u32);
            } else {
                live += 1.0;
            }
        };
        // A shared store's segment: its keys and tombstones from the pages.
        let in_pages = {
            let _reading = index.meta(Lock::Share);
            objects::segment_keys(index, entry)
        };
        if let Some(read) = in_pages {
            let objects::SegmentKeys { keys, deleted } = read.unwrap_or_else(|e| raise_error(&e));
            keys.iter()
                .enumerate()
                .filter(|(row, _)| !deleted.contains(&(*row as u32)))
                .for_each(|(r, k)| visit(r, *k));
        } else {
            let loaded = open_segments::loaded(index, &manifest, meta.metric());
            let segment = loaded.into_iter().find(|s| s.id == id).expect("loaded");
            for (row, key) in segment.keys().iter().enumerate() {
                if !segment.is_deleted(row as u32) {
                    visit(row, *key);
                }
            }
        }
        if !dead.is_empty() {
            // SAFETY: VACUUM's cost-based delay, between segments.
            unsafe { vacuum_delay_point() };
            manifest_chain::change(index, |m| m.add_pending_tombstones(id, &dead)).or_raise();
            stats.tuples_removed += dead.len() as f64;
        }
    }
    stats.num_index_tuples = live;
    stats
}

#[pg_guard]
pub unsafe extern "C-unwind" fn amvacuumcleanup(
    info: *mut pg_sys::IndexVacuumInfo,
    stats: *mut pg_sys::IndexBulkDeleteResult,
) -> *mut pg_sys::IndexBulkDeleteResult {
    // SAFETY: Postgres passes VACUUM's state and the open index.
    let (analyze_only, index) = unsafe { ((*info).analyze_only, Index::from_raw((*info).index)) };
    if analyze_only {
        return stats;
    }
    let free_pages = {
        // Object pages of no object are taken back only while no chain is
        // being written (`object_pages.rs`).
        let no_writers = SegmentLock::no_object_writers(index);
        free::sweep(index, no_writers.is_some())
    };
    free::give_back_swept_tail(index, free_pages);
    let stats = if stats.is_null() {
        // No ambulkdelete ran (nothing to delete): count the rows.
        // SAFETY: palloc'd in the current memory context, handed to Postgres.
        let stats = unsafe { PgBox::<pg_sys::IndexBulkDeleteResult>::alloc0() }.into_pg();
        let meta = index.meta(Lock::Share);
        let in_pages: u64 = meta.in_pages().map(|(_, head)| chain::count_rows(index, head, meta.shape())).sum();
        let manifest = manifest_chain::read(&meta);
        let flushed = manifest.live_segments().filter(|e| e.meta.state == SegmentState::Flushed);
        // SAFETY: palloc'd just above.
        unsafe {
            (*stats).num_index_tuples = in_pages as f64 + flushed.map(|e| e.meta.live_rows() as f64).sum::<f64>()
        };
        stats
    } else {
        stats
    };
    // SAFETY: a valid stats struct.
    unsafe { (*stats).num_pages = index.blocks() };
    stats
}
