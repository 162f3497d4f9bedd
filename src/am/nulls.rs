//! The rows an index scan owes after its last distance: those whose indexed
//! value is NULL.
//!
//! `ORDER BY embedding <-> q` sorts NULL distances last, and a NULL query
//! makes every distance NULL. The index holds no NULL vectors (there is
//! nothing to place in a segment), so once a scan has returned every row of
//! the index, or at once for a NULL query, it reads them from the table: a
//! sequential scan under the index scan's own snapshot, the index's
//! expression and predicate evaluated per row as CREATE INDEX evaluates
//! them. So `LIMIT k` returns k rows whenever a sequential scan would, at
//! the cost of a sequential scan only when the index runs out of vectors.

use pgrx::pg_sys;

/// The TIDs of the table's rows visible to the scan's snapshot that the
/// index's predicate admits, and whose indexed value is NULL (`all`:
/// whatever their value), in table order.
///
/// # Safety
/// `scan` is an index scan Postgres began (its heap relation and MVCC
/// snapshot set), on the main thread.
pub unsafe fn rows(scan: pg_sys::IndexScanDesc, all: bool) -> Vec<pg_sys::ItemPointerData> {
    // SAFETY: the caller's; the executor state, slot and table scan made
    // here are ended here, and an error on the way frees them with the
    // query's memory context and resource owner.
    unsafe {
        let (heap, index) = ((*scan).heapRelation, (*scan).indexRelation);
        let info = pg_sys::BuildIndexInfo(index);
        let estate = pg_sys::CreateExecutorState();
        let econtext = pg_sys::MakePerTupleExprContext(estate);
        let predicate = pg_sys::ExecPrepareQual((*info).ii_Predicate, estate);
        let slot = pg_sys::table_slot_create(heap, std::ptr::null_mut());
        (*econtext).ecxt_scantuple = slot;
        let table = pg_sys::table_beginscan(heap, (*scan).xs_snapshot, 0, std::ptr::null_mut());
        let mut values = [pg_sys::Datum::from(0); pg_sys::INDEX_MAX_KEYS as usize];
        let mut isnull = [false; pg_sys::INDEX_MAX_KEYS as usize];
        let mut found = Vec::new();
        while pg_sys::table_scan_getnextslot(table, pg_sys::ScanDirection::ForwardScanDirection, slot) {
            pgrx::check_for_interrupts!();
            pg_sys::MemoryContextReset((*econtext).ecxt_per_tuple_memory);
            if !predicate.is_null() && !pg_sys::ExecQual(predicate, econtext) {
                continue;
            }
            if !all {
                pg_sys::FormIndexDatum(info, slot, estate, values.as_mut_ptr(), isnull.as_mut_ptr());
                if !isnull[0] {
                    continue;
                }
            }
            found.push((*slot).tts_tid);
        }
        pg_sys::table_endscan(table);
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        pg_sys::FreeExecutorState(estate);
        found
    }
}
