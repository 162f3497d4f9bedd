//! INSERT: append `(heap TID, vector)` to the growing segment.
//!
//! The growing segment is a chain of row pages; the meta page names its
//! tail. An insert share-locks the meta page, exclusively locks the tail,
//! adds the row and logs the page change (GenericXLog): no object storage,
//! no index build, nothing longer than one page write (invariant 6).
//! Concurrent inserters share the meta lock and queue only on the tail page.
//!
//! When the tail is full, the inserter takes the meta page exclusively,
//! checks nobody extended the chain meanwhile, and in one WAL record links a
//! new page, updates the meta page's tail and page count, and adds the row
//! there. If one more page would take the segment past `segment_max_rows`,
//! it seals the segment instead (a cheap metadata commit, as Milvus' segment
//! allocator closes a full segment) and adds the row to the new growing
//! segment: segments never grow past their size limit, workers or not. With
//! 64 sealed segments already waiting for their flush, it grows on.
//!
//! Lock order, everywhere: meta page, then row pages along the chain.
//! Holding the meta page (shared) across the row write is what makes a seal
//! a barrier: a seal takes it exclusively, so no insert is half in the old
//! growing segment.

use pgrx::FromDatum;
use pgrx::prelude::*;

use super::page::{self, INVALID_BLOCK, META_BLOCK, Xlog};
use milvus_core::segment::{SealReason, SegmentId};

use crate::error::OrRaise;
use crate::gucs::PausePoint;
use crate::vector::PgVector;

// The signature is Postgres' (amapi.h).
#[allow(clippy::too_many_arguments)]
#[pg_guard]
pub unsafe extern "C-unwind" fn aminsert(
    index: pg_sys::Relation,
    values: *mut pg_sys::Datum,
    isnull: *mut bool,
    heap_tid: pg_sys::ItemPointer,
    _heap: pg_sys::Relation,
    _check_unique: pg_sys::IndexUniqueCheck::Type,
    _index_unchanged: bool,
    _index_info: *mut pg_sys::IndexInfo,
) -> bool {
    // NULL vectors are not indexed (as pgvector).
    // SAFETY: Postgres passes one value and one null flag per key column.
    unsafe {
        if *isnull {
            return false;
        }
        let vector = PgVector::from_datum(*values, false).expect("not null");
        // A full segment with no room to seal grows on until a flush makes
        // room (the workers, or milvus_flush()).
        insert_row(
            index,
            page::pack_tid(&*heap_tid),
            vector.as_slice(),
            |rows, max_rows| SealReason::Rows { rows, max_rows },
            None,
        );
    }
    crate::debug::pause_at(PausePoint::Insert);
    false
}

/// Appends one row to the growing segment; if that segment is at its size
/// limit, seals it first, for `reason(rows, segment_max_rows)`. If
/// [`page::MAX_SEALED`] segments already wait for their flush, `make_room`
/// (if any) is called once to flush them; otherwise, or if it could not,
/// the full segment grows on.
pub(crate) unsafe fn insert_row(
    index: pg_sys::Relation,
    key: u64,
    vector: &[f32],
    reason: impl Fn(u64, u64) -> SealReason,
    mut make_room: Option<&mut dyn FnMut()>,
) {
    unsafe {
        let mut seal_at_limit = true;
        loop {
            let meta_buffer = page::read_buffer(index, META_BLOCK);
            page::lock(meta_buffer, false);
            let meta = *page::meta(pg_sys::BufferGetPage(meta_buffer));
            page::check_meta(index, &meta);
            milvus_core::vector::check_typmod(Some(meta.dims as usize), vector.len()).or_raise();

            // Fast path: the tail has room.
            let tail = meta.growing_tail;
            let tail_buffer = page::read_buffer(index, tail);
            page::lock(tail_buffer, true);
            let mut xlog = Xlog::start(index);
            let tail_page = xlog.register(tail_buffer, false);
            if page::add_row(tail_page, key, vector) {
                xlog.finish();
                pg_sys::UnlockReleaseBuffer(tail_buffer);
                pg_sys::UnlockReleaseBuffer(meta_buffer);
                return;
            }
            drop(xlog);
            pg_sys::UnlockReleaseBuffer(tail_buffer);

            // Slow path: extend the chain under the exclusive meta lock.
            pg_sys::LockBuffer(meta_buffer, pg_sys::BUFFER_LOCK_UNLOCK as i32);
            page::lock(meta_buffer, true);
            let meta = *page::meta(pg_sys::BufferGetPage(meta_buffer));
            if meta.growing_tail != tail {
                // Someone extended (or sealed) meanwhile: start over.
                pg_sys::UnlockReleaseBuffer(meta_buffer);
                continue;
            }
            let per_page = page::rows_per_page(meta.dims as usize) as u64;
            let max_rows = super::options::of(index).segment_max_rows as u64;
            // 0: a meta page older than the count; the workers seal it by rows.
            if seal_at_limit && meta.growing_pages > 0 && (meta.growing_pages as u64 + 1) * per_page > max_rows {
                pg_sys::UnlockReleaseBuffer(meta_buffer);
                let (segment, rows) = (SegmentId(meta.growing_segment), meta.growing_pages as u64 * per_page);
                let sealed_by_us =
                    super::flush::seal_with(index, reason(rows, max_rows), Some(segment), false).is_some();
                if !sealed_by_us && page::read_meta(index).growing_segment == segment.0 {
                    // No room: flush what waits and try again, or grow on.
                    match make_room.take() {
                        Some(flush) => flush(),
                        None => seal_at_limit = false,
                    }
                }
                continue;
            }
            let new_buffer = page::new_buffer(index);
            let new_block = pg_sys::BufferGetBlockNumber(new_buffer);
            let tail_buffer = page::read_buffer(index, tail);
            page::lock(tail_buffer, true);
            let mut xlog = Xlog::start(index);
            let meta_page = xlog.register(meta_buffer, false);
            let tail_page = xlog.register(tail_buffer, false);
            let new_page = xlog.register(new_buffer, true);
            page::init_row_page(new_page, meta.growing_segment);
            let added = page::add_row(new_page, key, vector);
            assert!(added, "a row always fits an empty page (dims checked at CREATE INDEX)");
            debug_assert_eq!((*page::opaque(tail_page)).next, INVALID_BLOCK);
            (*page::opaque(tail_page)).next = new_block;
            page::cover_meta(meta_page);
            (*page::meta(meta_page)).growing_tail = new_block;
            if meta.growing_pages > 0 {
                (*page::meta(meta_page)).growing_pages = meta.growing_pages + 1;
            }
            xlog.finish();
            pg_sys::UnlockReleaseBuffer(new_buffer);
            pg_sys::UnlockReleaseBuffer(tail_buffer);
            pg_sys::UnlockReleaseBuffer(meta_buffer);
            return;
        }
    }
}
