//! VACUUM: forget rows whose heap tuples are dead, in every kind of segment.
//!
//! After `ambulkdelete` returns, no dead TID may remain reachable through
//! the index, since the heap will reuse it. Each segment is handled under its
//! job lock (`flush::SegmentLock`), so a flush never uploads rows this pass
//! removed, and a flush that ran first has moved them where pass 2 finds them.
//!
//! Pass 1, rows in pages (the growing segment, sealed segments not yet
//! flushed): on each page, ask VACUUM's callback about every row's TID and
//! delete the dead rows from the page in one WAL record.
//!
//! Pass 2, flushed segments: load the segment (its keys are the TIDs), find
//! the positions of rows that just died, write them as a delta binlog to
//! object storage, and publish it in the manifest. A compaction running
//! meanwhile (it holds its inputs' locks, so this pass waits for it) builds
//! its output from rows read before: the pass goes on until it has seen
//! every flushed segment of the manifest, that output included. Searches skip tombstoned
//! positions; compaction drops them. If storage is unreachable, VACUUM fails
//! with the cause and the heap keeps its dead tuples (nothing is reused, so
//! nothing is wrong); the next VACUUM tries again.
//!
//! `amvacuumcleanup` empties the page chains commits released (after a crash
//! some may wait here), offers every free page to the free space map again,
//! gives the file's free tail back (`page::give_back_free_tail`, when no
//! other session uses the index), and reports how many rows the index holds.

use milvus_core::Metric;
use milvus_core::jobs;
use milvus_core::segment::{SegmentId, SegmentState};
use pgrx::prelude::*;

use super::flush::change_manifest;
use super::flush::{self, SegmentLock};
use super::page::{self, Xlog};
use super::scan::loaded_segments;

#[pg_guard]
pub unsafe extern "C-unwind" fn ambulkdelete(
    info: *mut pg_sys::IndexVacuumInfo,
    stats: *mut pg_sys::IndexBulkDeleteResult,
    callback: pg_sys::IndexBulkDeleteCallback,
    callback_state: *mut std::ffi::c_void,
) -> *mut pg_sys::IndexBulkDeleteResult {
    unsafe {
        let stats = if stats.is_null() { PgBox::<pg_sys::IndexBulkDeleteResult>::alloc0().into_pg() } else { stats };
        let index = (*info).index;
        let callback = callback.expect("VACUUM passes a callback");
        let is_dead = |key: u64| {
            let mut tid = page::unpack_tid(key);
            callback(&mut tid, callback_state)
        };

        // Pass 1: rows in pages.
        let meta = page::read_meta(index);
        let in_pages =
            std::iter::once(meta.growing_segment).chain(meta.sealed().iter().map(|c| c.segment)).collect::<Vec<_>>();
        let mut live = 0.0;
        for segment in in_pages {
            let _lock = SegmentLock::acquire(index, segment);
            let meta = page::read_meta(index);
            let head = if meta.growing_segment == segment {
                Some(meta.growing_head)
            } else {
                meta.sealed().iter().find(|c| c.segment == segment).map(|c| c.head)
            };
            if let Some(head) = head {
                let (removed, kept) = delete_from_chain(index, head, meta.dims as usize, &is_dead);
                (*stats).tuples_removed += removed as f64;
                live += kept as f64;
            }
        }

        // Pass 2: flushed segments, until every one in the manifest has been
        // seen: a compaction that finishes meanwhile publishes a segment
        // built from rows loaded before this pass, which must be seen too.
        let metric = Metric::from_code(meta.metric).expect("meta page checked");
        let mut seen = std::collections::HashSet::new();
        loop {
            let (_, manifest) = page::read_meta_and_manifest(index);
            let Some(next) =
                manifest.segments.iter().find(|e| e.meta.state == SegmentState::Flushed && !seen.contains(&e.meta.id))
            else {
                break;
            };
            let id = next.meta.id;
            seen.insert(id);
            let _lock = SegmentLock::acquire(index, id.0);
            let (_, manifest) = page::read_meta_and_manifest(index);
            let Some(current) = manifest.segment(id).filter(|e| e.meta.state == SegmentState::Flushed) else {
                continue;
            };
            let segment = loaded_segments(index, &manifest, metric)
                .into_iter()
                .find(|s| s.id == current.meta.id)
                .expect("loaded");
            let keys = segment.binlog().keys();
            let mut dead = Vec::new();
            for (row, key) in keys.iter().enumerate() {
                if segment.is_deleted(row as u32) {
                    continue;
                }
                if is_dead(*key) {
                    dead.push(row as u32);
                } else {
                    live += 1.0;
                }
            }
            if !dead.is_empty() {
                pg_sys::vacuum_delay_point();
                write_tombstones(index, manifest.storage_url.as_deref(), segment.id, &dead);
                (*stats).tuples_removed += dead.len() as f64;
            }
        }
        (*stats).num_index_tuples = live;
        stats
    }
}

/// Deletes the dead rows of a page chain; returns (removed, kept).
unsafe fn delete_from_chain(
    index: pg_sys::Relation,
    head: pg_sys::BlockNumber,
    dims: usize,
    is_dead: &dyn Fn(u64) -> bool,
) -> (usize, usize) {
    let (mut removed, mut kept) = (0, 0);
    let mut block = head;
    unsafe {
        while block != page::INVALID_BLOCK {
            pg_sys::vacuum_delay_point();
            let buffer = page::read_buffer(index, block);
            page::lock(buffer, true);
            let mut dead: Vec<pg_sys::OffsetNumber> = Vec::new();
            page::for_each_row(pg_sys::BufferGetPage(buffer), dims, |offset, key, _| {
                if is_dead(key) { dead.push(offset) } else { kept += 1 }
            });
            if !dead.is_empty() {
                let mut xlog = Xlog::start(index);
                let p = xlog.register(buffer, false);
                pg_sys::PageIndexMultiDelete(p, dead.as_mut_ptr(), dead.len() as i32);
                xlog.finish();
                removed += dead.len();
            }
            block = (*page::opaque(pg_sys::BufferGetPage(buffer))).next;
            pg_sys::UnlockReleaseBuffer(buffer);
        }
    }
    (removed, kept)
}

/// Writes tombstones to storage, then publishes them in the manifest.
unsafe fn write_tombstones(index: pg_sys::Relation, url: Option<&str>, segment: SegmentId, rows: &[u32]) {
    unsafe {
        let id = flush::index_id(index);
        let storage = crate::storage::storage_at(url);
        let rows_owned = rows.to_vec();
        let delta =
            crate::storage::run_job("tombstones", move |_| jobs::write_tombstones(&storage, id, segment, &rows_owned))
                .unwrap_or_else(|e| {
                    ereport!(
                        ERROR,
                        PgSqlErrorCode::ERRCODE_IO_ERROR,
                        format!(
                            "could not write tombstones of segment {segment} of index \"{}\": {e}",
                            super::relation_name(index)
                        ),
                        "VACUUM keeps the dead tuples until it can record them; run it again once storage is back."
                    );
                });
        change_manifest(index, |m| m.add_tombstones(segment, delta, rows.len() as u64))
            .unwrap_or_else(|e| error!("{e}"));
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn amvacuumcleanup(
    info: *mut pg_sys::IndexVacuumInfo,
    stats: *mut pg_sys::IndexBulkDeleteResult,
) -> *mut pg_sys::IndexBulkDeleteResult {
    unsafe {
        if (*info).analyze_only {
            return stats;
        }
        let index = (*info).index;
        let free = page::sweep_free_pages(index);
        page::give_back_swept_tail(index, free);
        if !stats.is_null() {
            (*stats).num_pages = pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM);
            return stats;
        }
        // No ambulkdelete ran (nothing to delete): count the rows.
        let stats = PgBox::<pg_sys::IndexBulkDeleteResult>::alloc0().into_pg();
        let (manifest, in_pages) = page::with_meta_shared(index, |meta| {
            let heads = std::iter::once(meta.growing_head).chain(meta.sealed().iter().map(|c| c.head));
            let in_pages: u64 = heads.map(|h| flush::count_rows(index, h, meta.dims as usize)).sum();
            (page::read_manifest(index, meta), in_pages)
        });
        let mut rows = in_pages as f64;
        rows += manifest
            .live_segments()
            .filter(|e| e.meta.state == SegmentState::Flushed)
            .map(|e| e.meta.live_rows() as f64)
            .sum::<f64>();
        (*stats).num_index_tuples = rows;
        (*stats).num_pages = pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM);
        stats
    }
}
