//! VACUUM: forget rows whose heap tuples are dead.
//!
//! Pass 1 (`ambulkdelete`): walk the growing segment's page chain; on each
//! page ask VACUUM's callback about every row's TID and delete the dead rows
//! from the page in one WAL record. After this pass no dead TID is left in
//! the index, so the heap may reuse it.
//! `amvacuumcleanup` reports how many rows the index holds.

use pgrx::prelude::*;

use super::page::{self, Xlog};

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
        let meta = page::read_meta(index);
        let dims = meta.dims as usize;
        let callback = callback.expect("VACUUM passes a callback");
        let mut block = meta.growing_head;
        let mut live = 0.0;
        while block != page::INVALID_BLOCK {
            pg_sys::vacuum_delay_point();
            let buffer = page::read_buffer(index, block);
            page::lock(buffer, true);
            let mut dead: Vec<pg_sys::OffsetNumber> = Vec::new();
            page::for_each_row(pg_sys::BufferGetPage(buffer), dims, |offset, key, _| {
                let mut tid = page::unpack_tid(key);
                if callback(&mut tid, callback_state) {
                    dead.push(offset);
                } else {
                    live += 1.0;
                }
            });
            if !dead.is_empty() {
                let mut xlog = Xlog::start(index);
                let p = xlog.register(buffer, false);
                pg_sys::PageIndexMultiDelete(p, dead.as_mut_ptr(), dead.len() as i32);
                xlog.finish();
                (*stats).tuples_removed += dead.len() as f64;
            }
            block = (*page::opaque(pg_sys::BufferGetPage(buffer))).next;
            pg_sys::UnlockReleaseBuffer(buffer);
        }
        (*stats).num_index_tuples = live;
        stats
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn amvacuumcleanup(
    info: *mut pg_sys::IndexVacuumInfo,
    stats: *mut pg_sys::IndexBulkDeleteResult,
) -> *mut pg_sys::IndexBulkDeleteResult {
    unsafe {
        if (*info).analyze_only || !stats.is_null() {
            return stats;
        }
        // No ambulkdelete ran (nothing to delete): count the rows.
        let stats = PgBox::<pg_sys::IndexBulkDeleteResult>::alloc0().into_pg();
        let index = (*info).index;
        let meta = page::read_meta(index);
        let dims = meta.dims as usize;
        let mut rows = 0.0;
        page::walk_chain(index, meta.growing_head, |_, p| page::for_each_row(p, dims, |_, _, _| rows += 1.0));
        (*stats).num_index_tuples = rows;
        (*stats).num_pages = pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM);
        stats
    }
}
