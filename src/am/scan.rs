//! ORDER BY embedding <-> $1: the ordered index scan.
//!
//! `amrescan` takes the query vector; the first `amgettuple` reads the rows
//! of the page-resident segments (share-locking one page at a time) and
//! starts a `milvus_core::search::Search`, which yields rows nearest first
//! with exact distances. Each further `amgettuple` returns the next row;
//! when a WHERE clause rejects rows the search widens by itself, up to
//! `milvus.max_scan_tuples`. The executor checks every returned TID against
//! the heap (MVCC), so rows of aborted or not-yet-visible transactions are
//! never returned.
//!
//! The scan's state lives in the scan's memory context and is dropped with
//! it, also when the query errors or is cancelled.

use milvus_core::search::{PageRows, Search, SearchOptions};
use pgrx::prelude::*;
use pgrx::{FromDatum, PgMemoryContexts};

use super::page::{self, Meta};
use crate::error::OrRaise;
use crate::gucs;
use crate::vector::PgVector;

struct ScanState {
    search: Option<Search>,
}

unsafe fn state<'a>(scan: pg_sys::IndexScanDesc) -> &'a mut ScanState {
    unsafe { &mut *(*scan).opaque.cast::<ScanState>() }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn ambeginscan(index: pg_sys::Relation, nkeys: i32, norderbys: i32) -> pg_sys::IndexScanDesc {
    unsafe {
        let scan = pg_sys::RelationGetIndexScan(index, nkeys, norderbys);
        let state = PgMemoryContexts::CurrentMemoryContext.leak_and_drop_on_delete(ScanState { search: None });
        (*scan).opaque = state.cast();
        scan
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn amrescan(
    scan: pg_sys::IndexScanDesc,
    keys: pg_sys::ScanKey,
    nkeys: i32,
    orderbys: pg_sys::ScanKey,
    norderbys: i32,
) {
    unsafe {
        if !keys.is_null() && nkeys > 0 {
            std::ptr::copy(keys, (*scan).keyData, nkeys as usize);
        }
        if !orderbys.is_null() && norderbys > 0 {
            std::ptr::copy(orderbys, (*scan).orderByData, norderbys as usize);
        }
        state(scan).search = None;
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn amgettuple(scan: pg_sys::IndexScanDesc, direction: pg_sys::ScanDirection::Type) -> bool {
    unsafe {
        if direction != pg_sys::ScanDirection::ForwardScanDirection {
            error!("milvus index scans only forward");
        }
        let state = state(scan);
        if state.search.is_none() {
            match start(scan) {
                Some(search) => state.search = Some(search),
                None => return false,
            }
        }
        let Some(hit) = state.search.as_mut().and_then(Iterator::next) else {
            return false;
        };
        (*scan).xs_heaptid = page::unpack_tid(hit.key);
        (*scan).xs_recheck = false;
        (*scan).xs_recheckorderby = false;
        true
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn amendscan(scan: pg_sys::IndexScanDesc) {
    // The state itself goes with the scan's memory context; free the
    // candidate rows now rather than at the end of the query.
    unsafe { state(scan).search = None }
}

/// Reads the query and the page-resident rows; `None` for a NULL query.
unsafe fn start(scan: pg_sys::IndexScanDesc) -> Option<Search> {
    unsafe {
        let index = (*scan).indexRelation;
        if (*scan).numberOfOrderBys != 1 {
            error!("a milvus index answers ORDER BY <distance> only, e.g. ORDER BY embedding <-> '[...]' LIMIT 10");
        }
        let key = &*(*scan).orderByData;
        if key.sk_flags & pg_sys::SK_ISNULL as i32 != 0 {
            return None;
        }
        let query = PgVector::from_datum(key.sk_argument, false).expect("not null");
        let meta: Meta = page::read_meta(index);
        milvus_core::vector::check_same_dims(meta.dims as usize, query.dims()).or_raise();
        let metric = milvus_core::Metric::from_code(meta.metric).expect("meta page checked");

        let dims = meta.dims as usize;
        let mut rows = PageRows::new(dims);
        page::walk_chain(index, meta.growing_head, |_, p| page::for_each_row(p, dims, |_, key, v| rows.push(key, v)));

        let ef_search = gucs::ef_search();
        let options = SearchOptions { ef_search, first_k: ef_search, max_candidates: gucs::max_scan_tuples() };
        Some(Search::new(metric, query.as_slice().to_vec(), rows, Vec::new(), options))
    }
}
