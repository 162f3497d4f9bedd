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
//! new page, updates the meta page's tail and adds the row there.
//!
//! Lock order, everywhere: meta page, then row pages along the chain.
//! Holding the meta page (shared) across the row write is what makes a seal
//! a barrier: a seal takes it exclusively, so no insert is half in the old
//! growing segment.

use pgrx::prelude::*;
use pgrx::FromDatum;

use super::page::{self, INVALID_BLOCK, META_BLOCK, Xlog};
use crate::error::OrRaise;
use crate::gucs::PausePoint;
use crate::vector::PgVector;

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
        insert_row(index, page::pack_tid(&*heap_tid), vector.as_slice());
    }
    crate::debug::pause_at(PausePoint::Insert);
    false
}

/// Appends one row to the growing segment.
pub(crate) unsafe fn insert_row(index: pg_sys::Relation, key: u64, vector: &[f32]) {
    unsafe {
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
            (*page::meta(meta_page)).growing_tail = new_block;
            xlog.finish();
            pg_sys::UnlockReleaseBuffer(new_buffer);
            pg_sys::UnlockReleaseBuffer(tail_buffer);
            pg_sys::UnlockReleaseBuffer(meta_buffer);
            return;
        }
    }
}
