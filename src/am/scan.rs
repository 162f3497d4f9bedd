//! ORDER BY embedding <-> $1: the ordered index scan.
//!
//! `amrescan` takes the query vector; the first `amgettuple`, holding the
//! meta page shared (so no seal or flush switches the manifest under it),
//! reads the manifest (decoded once per generation and backend:
//! `open_segments::manifest`) and the distances of the page-resident rows (growing
//! segment, and sealed ones not yet flushed) to the query, computed as the
//! pages are read, then loads the flushed segments, each
//! once per backend and kept while its tombstones do not change, through the
//! local cache, off the main thread. A `milvus_core::search::Search` then
//! yields rows nearest first with exact distances: brute force on page rows,
//! HNSW on flushed segments, merged. Each further `amgettuple` returns the
//! next row; when a WHERE clause rejects rows the search widens by itself
//! and, past `milvus.max_scan_tuples` rows or once widening costs more than
//! brute force, goes on exactly over every remaining row
//! (`milvus.iterative_scan` says how; `off` stops after the first round).
//! The executor checks every returned TID against the heap (MVCC), so rows
//! of aborted or not-yet-visible transactions are never returned. Under
//! EXPLAIN (ANALYZE) each scan reports what it did (`explain.rs`).
//!
//! Rows whose vector is NULL come last, as their NULL distances sort, and
//! every row comes for a NULL query (`nulls.rs`).
//!
//! Keys on the filter columns of a multicolumn index (`filter_columns.rs`)
//! restrict the search to the rows that pass them: the page-resident rows
//! are tested as they are read, each flushed segment by its columns
//! (`milvus_core::search::Search::filtered`). The executor rechecks the
//! rows returned.
//!
//! The scan's state lives in the scan's memory context and is dropped with
//! it, also when the query errors or is cancelled.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use milvus_core::element::{Element, Vectors};
use milvus_core::error::Failed;
use milvus_core::search::{Search, SearchOptions};
use pgrx::PgMemoryContexts;
use pgrx::prelude::*;

use super::explain::{self, ScanReport};
use super::nulls;
use crate::error::{OrRaise, raise_error};
use crate::gucs;
use crate::lifecycle::open_segments;
use crate::pages::rows::unpack_tid;
use crate::pages::{Index, Lock, chain};
use crate::types::indexed::IndexVector;

thread_local! {
    /// Milvus index scans this backend has started (their first
    /// `amgettuple`): how `milvus_recall()` knows which plan answered.
    static SCANS_STARTED: Cell<u64> = const { Cell::new(0) };
}

/// [`SCANS_STARTED`]'s count.
pub fn scans_started() -> u64 {
    SCANS_STARTED.get()
}

struct ScanState {
    search: Option<Search>,
    /// Rows after the last distance (`nulls.rs`), once read.
    nulls: Option<std::vec::IntoIter<pg_sys::ItemPointerData>>,
    /// Where this scan reports to, while an EXPLAIN (ANALYZE) collects.
    report: Option<Rc<RefCell<ScanReport>>>,
}

impl ScanState {
    /// Ends the current search (a rescan, or the end of the scan), adding
    /// what it did to the report.
    fn end_search(&mut self) {
        self.nulls = None;
        if let (Some(search), Some(report)) = (self.search.take(), &self.report) {
            report.borrow_mut().add(&search.stats());
        }
    }
}

/// Runs `f` on the scan's state, which `ambeginscan` left in `opaque`; the
/// borrow cannot outlive the call.
///
/// # Safety
/// `scan` is a scan `ambeginscan` began and `amendscan` has not ended, on
/// the main thread.
unsafe fn with_state<R>(scan: pg_sys::IndexScanDesc, f: impl FnOnce(&mut ScanState) -> R) -> R {
    // SAFETY: `opaque` holds the ScanState ambeginscan allocated in the
    // scan's memory context, alive until the scan ends; it is a separate
    // allocation from the scan descriptor, which callers may still write.
    f(unsafe { &mut *(*scan).opaque.cast::<ScanState>() })
}

#[pg_guard]
pub unsafe extern "C-unwind" fn ambeginscan(
    index: pg_sys::Relation,
    nkeys: i32,
    norderbys: i32,
) -> pg_sys::IndexScanDesc {
    // SAFETY: Postgres calls this with an open index relation, on the main
    // thread; the descriptor it returns is ours to fill.
    unsafe {
        let scan = pg_sys::RelationGetIndexScan(index, nkeys, norderbys);
        let report = explain::report_for(Index::from_raw(index));
        let state = PgMemoryContexts::CurrentMemoryContext.leak_and_drop_on_delete(ScanState {
            search: None,
            nulls: None,
            report,
        });
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
    // SAFETY: a scan ambeginscan began, with room for `nkeys` keys and
    // `norderbys` order-bys (RelationGetIndexScan sized them); the keys
    // Postgres passes are that many.
    unsafe {
        if !keys.is_null() && nkeys > 0 {
            std::ptr::copy(keys, (*scan).keyData, nkeys as usize);
        }
        if !orderbys.is_null() && norderbys > 0 {
            std::ptr::copy(orderbys, (*scan).orderByData, norderbys as usize);
        }
        with_state(scan, ScanState::end_search);
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn amgettuple(
    scan: pg_sys::IndexScanDesc,
    direction: pg_sys::ScanDirection::Type,
) -> bool {
    if direction != pg_sys::ScanDirection::ForwardScanDirection {
        crate::error::raise(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            "a milvus index scans forward only".into(),
            None,
            Some("Order by the distance ascending, as ORDER BY embedding <-> $1 LIMIT 10 does."),
        );
    }
    // SAFETY: a scan ambeginscan began, on the main thread; Postgres reads
    // `xs_heaptid` and the recheck flags after this returns.
    unsafe {
        let next = with_state(scan, |state| next(scan, state));
        // Keys on the filter columns: the search applied them, the executor
        // checks again (also the NULL-vector rows, read from the table).
        (*scan).xs_recheck = (*scan).numberOfKeys > 0;
        (*scan).xs_recheckorderby = false;
        match next {
            Some(tid) => {
                (*scan).xs_heaptid = tid;
                true
            }
            None => false,
        }
    }
}

/// The scan's next row: the search's, then the rows of NULL vectors once
/// it has run out of rows (at once for a NULL query).
///
/// # Safety
/// As [`with_state`], `state` being the scan's.
unsafe fn next(scan: pg_sys::IndexScanDesc, state: &mut ScanState) -> Option<pg_sys::ItemPointerData> {
    // SAFETY: the caller's; `start` and `nulls::rows` read the scan's keys,
    // relations and snapshot, which Postgres set before the first call.
    unsafe {
        if state.search.is_none() && state.nulls.is_none() {
            let loads = explain::loads();
            match start(scan) {
                Some(search) => {
                    if let Some(report) = &state.report {
                        report.borrow_mut().started(&search, explain::loads() - loads);
                    }
                    state.search = Some(search);
                }
                // A NULL query: every distance is NULL, every row comes.
                None => state.nulls = Some(nulls::rows(scan, true).into_iter()),
            }
        }
        if state.nulls.is_none() {
            let hit = state.search.as_mut().and_then(Iterator::next).transpose().unwrap_or_else(|e| {
                // Rows read by range that failed: loaded anew by the next query.
                let index = Index::from_raw((*scan).indexRelation);
                open_segments::forget(index.oid().to_u32());
                raise_error(&Failed::new(format!("search index \"{}\"", index.name()), e))
            });
            if let (Some(report), Some(search)) = (&state.report, &state.search) {
                report.borrow_mut().current = search.stats();
            }
            match hit {
                Some(hit) => return Some(unpack_tid(hit.key)),
                // Past the last distance, the rows of NULL vectors, unless
                // the search stopped before it ran out of rows.
                None if state.search.as_ref().is_some_and(Search::exhausted) => {
                    state.nulls = Some(nulls::rows(scan, false).into_iter());
                }
                None => return None,
            }
        }
        state.nulls.as_mut().and_then(Iterator::next)
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn amendscan(scan: pg_sys::IndexScanDesc) {
    // The state itself goes with the scan's memory context; free the
    // candidate rows now rather than at the end of the query.
    // SAFETY: a scan ambeginscan began and this call ends.
    unsafe { with_state(scan, ScanState::end_search) }
}

/// Reads the query and the page-resident rows; `None` for a NULL query.
///
/// # Safety
/// `scan` is a scan Postgres began on a milvus index, its order-by key set,
/// on the main thread.
unsafe fn start(scan: pg_sys::IndexScanDesc) -> Option<Search> {
    // SAFETY: the caller's; `orderByData` holds `numberOfOrderBys` keys,
    // checked to be one before it is read.
    unsafe {
        let index = (*scan).indexRelation;
        if (*scan).numberOfOrderBys != 1 {
            crate::error::raise(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                "a milvus index answers ORDER BY <distance> only".into(),
                None,
                Some("Order by the distance to a query vector, e.g. ORDER BY embedding <-> '[...]' LIMIT 10."),
            );
        }
        count_index_scan(index);
        SCANS_STARTED.set(SCANS_STARTED.get() + 1);
        let key = &*(*scan).orderByData;
        if key.sk_flags & pg_sys::SK_ISNULL as i32 != 0 {
            return None;
        }
        let index = Index::from_raw(index);
        // The ORDER BY operator is the opclass': its right argument has the
        // type the index stores.
        let query = IndexVector::from_datum(key.sk_argument, index.element());
        let query = query.row();
        let meta = index.meta(Lock::Share);
        let same = match query.element() {
            Element::Bit => milvus_core::vector::check_same_bits(meta.dims(), query.len()),
            _ => milvus_core::vector::check_same_dims(meta.dims(), query.len()),
        };
        same.or_raise_for(query.element());
        let metric = meta.metric();
        let manifest = open_segments::manifest(index, &meta);
        // With keys on filter columns: which page rows pass, read with them.
        let (pages, filter) = match super::filter_columns::filter_of(scan) {
            Some(filter) => {
                let (pages, passing) = chain::page_hits_filtered(index, &meta, metric, query, &filter);
                (pages, Some((filter, passing)))
            }
            None => (chain::page_hits(index, &meta, metric, query), None),
        };
        drop(meta);
        let segments = open_segments::loaded(index, &manifest, metric);

        let ef_search = gucs::ef_search();
        let options = SearchOptions {
            ef_search,
            first_k: ef_search,
            max_approximate: gucs::max_scan_tuples(),
            iterative: gucs::iterative_scan(),
            ..SearchOptions::default()
        };
        let search = Search::new(Vectors::of(query), pages, segments, options);
        Some(match filter {
            Some((filter, passing)) => search.filtered(&filter, passing),
            None => search,
        })
    }
}

/// Counts the scan in `pg_stat_user_indexes.idx_scan`, as Postgres' own
/// AMs do when a scan starts (`pgstat_count_index_scan`, a macro bindgen
/// does not carry over).
///
/// # Safety
/// `index` is an open relation, on the main thread.
unsafe fn count_index_scan(index: pg_sys::Relation) {
    // SAFETY: the caller's; `pgstat_info` is the relation's own, set here
    // when statistics are enabled and it has none yet.
    unsafe {
        if (*index).pgstat_info.is_null() && (*index).pgstat_enabled {
            pg_sys::pgstat_assoc_relation(index);
        }
        if !(*index).pgstat_info.is_null() {
            #[cfg(feature = "pg15")]
            {
                (*(*index).pgstat_info).t_counts.t_numscans += 1;
            }
            #[cfg(feature = "pg18")]
            {
                (*(*index).pgstat_info).counts.numscans += 1;
            }
        }
    }
}
