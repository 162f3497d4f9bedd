//! ORDER BY embedding <-> $1: the ordered index scan.
//!
//! `amrescan` takes the query vector; the first `amgettuple`, holding the
//! meta page shared (so no seal or flush switches the manifest under it),
//! reads the manifest and the distances of the page-resident rows (growing
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
//! The scan's state lives in the scan's memory context and is dropped with
//! it, also when the query errors or is cancelled.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use milvus_core::Metric;
use milvus_core::format::manifest::{Manifest, SegmentEntry};
use milvus_core::jobs;
use milvus_core::search::{LoadedSegment, Search, SearchOptions};
use milvus_core::segment::SegmentState;
use pgrx::prelude::*;
use pgrx::{FromDatum, PgMemoryContexts};

use super::explain::{self, ScanReport};
use super::flush;
use super::page;
use crate::error::OrRaise;
use crate::gucs;
use crate::vector::PgVector;

struct ScanState {
    search: Option<Search>,
    /// Where this scan reports to, while an EXPLAIN (ANALYZE) collects.
    report: Option<Rc<RefCell<ScanReport>>>,
}

impl ScanState {
    /// Ends the current search (a rescan, or the end of the scan), adding
    /// what it did to the report.
    fn end_search(&mut self) {
        if let (Some(search), Some(report)) = (self.search.take(), &self.report) {
            report.borrow_mut().add(&search.stats());
        }
    }
}

unsafe fn state<'a>(scan: pg_sys::IndexScanDesc) -> &'a mut ScanState {
    unsafe { &mut *(*scan).opaque.cast::<ScanState>() }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn ambeginscan(
    index: pg_sys::Relation,
    nkeys: i32,
    norderbys: i32,
) -> pg_sys::IndexScanDesc {
    unsafe {
        let scan = pg_sys::RelationGetIndexScan(index, nkeys, norderbys);
        let report = explain::report_for(index);
        let state = PgMemoryContexts::CurrentMemoryContext.leak_and_drop_on_delete(ScanState { search: None, report });
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
        state(scan).end_search();
    }
}

#[pg_guard]
pub unsafe extern "C-unwind" fn amgettuple(
    scan: pg_sys::IndexScanDesc,
    direction: pg_sys::ScanDirection::Type,
) -> bool {
    unsafe {
        if direction != pg_sys::ScanDirection::ForwardScanDirection {
            error!("milvus index scans only forward");
        }
        let state = state(scan);
        if state.search.is_none() {
            let loads = explain::loads();
            match start(scan) {
                Some(search) => {
                    if let Some(report) = &state.report {
                        report.borrow_mut().started(&search, explain::loads() - loads);
                    }
                    state.search = Some(search);
                }
                None => return false,
            }
        }
        let hit = state.search.as_mut().and_then(Iterator::next);
        if let (Some(report), Some(search)) = (&state.report, &state.search) {
            report.borrow_mut().current = search.stats();
        }
        let Some(hit) = hit else {
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
    unsafe { state(scan).end_search() }
}

/// Reads the query and the page-resident rows; `None` for a NULL query.
unsafe fn start(scan: pg_sys::IndexScanDesc) -> Option<Search> {
    unsafe {
        let index = (*scan).indexRelation;
        if (*scan).numberOfOrderBys != 1 {
            error!("a milvus index answers ORDER BY <distance> only, e.g. ORDER BY embedding <-> '[...]' LIMIT 10");
        }
        count_index_scan(index);
        let key = &*(*scan).orderByData;
        if key.sk_flags & pg_sys::SK_ISNULL as i32 != 0 {
            return None;
        }
        let query = PgVector::from_datum(key.sk_argument, false).expect("not null");
        let query = query.as_slice();
        let (metric, manifest, pages) = page::with_meta_shared(index, |meta| {
            milvus_core::vector::check_same_dims(meta.dims as usize, query.len()).or_raise();
            let metric = Metric::from_code(meta.metric).expect("meta page checked");
            (metric, page::read_manifest(index, meta), flush::page_hits(index, meta, metric, query))
        });
        let segments = loaded_segments(index, &manifest, metric);

        let ef_search = gucs::ef_search();
        let options = SearchOptions {
            ef_search,
            first_k: ef_search,
            max_approximate: gucs::max_scan_tuples(),
            iterative: gucs::iterative_scan(),
        };
        Some(Search::new(query.to_vec(), pages, segments, options))
    }
}

/// Counts the scan in `pg_stat_user_indexes.idx_scan`, as Postgres' own
/// AMs do when a scan starts (`pgstat_count_index_scan`, a macro bindgen
/// does not carry over).
unsafe fn count_index_scan(index: pg_sys::Relation) {
    unsafe {
        if (*index).pgstat_info.is_null() && (*index).pgstat_enabled {
            pg_sys::pgstat_assoc_relation(index);
        }
        if !(*index).pgstat_info.is_null() {
            (*(*index).pgstat_info).t_counts.t_numscans += 1;
        }
    }
}

/// A flushed segment as loaded, and how many delta binlogs it had then.
type Loaded = (usize, Arc<LoadedSegment>);

thread_local! {
    /// Flushed segments this backend has loaded, by index and by the key of
    /// their insert binlog: unique per write, unlike segment ids, which start
    /// again at 1 when TRUNCATE or REINDEX rebuilds the index under the same
    /// OID. A segment is immutable but for its tombstones: reloaded when its
    /// count of delta binlogs changes, dropped when it leaves the manifest.
    static LOADED: RefCell<HashMap<(u32, String), Loaded>> = RefCell::new(HashMap::new());
}

/// The cache key of a flushed segment.
fn loaded_key(oid: u32, entry: &SegmentEntry) -> (u32, String) {
    (oid, entry.insert_binlog.as_ref().map(|o| o.key.clone()).unwrap_or_default())
}

/// The flushed segments of `manifest`, from the backend's cache or loaded
/// (downloaded through the local cache, verified) off the main thread.
pub(crate) unsafe fn loaded_segments(
    index: pg_sys::Relation,
    manifest: &Manifest,
    metric: Metric,
) -> Vec<Arc<LoadedSegment>> {
    let oid = unsafe { (*index).rd_id.to_u32() };
    let flushed: Vec<&SegmentEntry> =
        manifest.segments.iter().filter(|e| e.meta.state == SegmentState::Flushed).collect();
    let keys: Vec<(u32, String)> = flushed.iter().map(|e| loaded_key(oid, e)).collect();
    let missing: Vec<SegmentEntry> = LOADED.with_borrow_mut(|loaded| {
        // Segments of this index that left the manifest, and of indexes that
        // were dropped, go.
        let others: std::collections::HashSet<u32> = loaded.keys().map(|k| k.0).filter(|o| *o != oid).collect();
        let dropped: Vec<u32> = others.into_iter().filter(|o| !super::relation_exists(*o)).collect();
        loaded.retain(|k, _| (k.0 != oid || keys.contains(k)) && !dropped.contains(&k.0));
        flushed
            .iter()
            .zip(&keys)
            .filter(|(e, k)| loaded.get(*k).is_none_or(|(deltas, _)| *deltas != e.delta_binlogs.len()))
            .map(|(e, _)| (*e).clone())
            .collect()
    });
    if !missing.is_empty() {
        let storage = crate::storage::storage_at(manifest.storage_url.as_deref());
        let cache = crate::storage::cache();
        let threads = super::flush::build_threads();
        let results = crate::storage::run_job("load", move |_| {
            let loaded = jobs::load_all(&storage, &cache, &missing, metric, threads);
            missing
                .iter()
                .zip(loaded)
                .map(|(e, l)| (loaded_key(oid, e), e.meta.id, e.delta_binlogs.len(), l))
                .collect::<Vec<_>>()
        });
        crate::storage::report_cache_use();
        // SAFETY: a backend global.
        let database = unsafe { pg_sys::MyDatabaseId.to_u32() };
        for (key, id, deltas, result) in results {
            let segment = result.unwrap_or_else(|e| {
                // Shown by milvus_segments() until the segment loads again.
                crate::worker::shared::set_damage(database, oid, id.0, Some(&e.to_string()));
                ereport!(
                    ERROR,
                    PgSqlErrorCode::ERRCODE_IO_ERROR,
                    format!("could not read segment {id} of index \"{}\": {e}", unsafe { super::relation_name(index) }),
                    "Queries need every flushed segment; REINDEX rebuilds the index from the table if an object is \
                        lost."
                );
            });
            crate::worker::shared::set_damage(database, oid, id.0, None);
            explain::count_load();
            LOADED.with_borrow_mut(|loaded| loaded.insert(key, (deltas, Arc::new(segment))));
        }
    }
    LOADED.with_borrow(|loaded| keys.iter().map(|k| loaded[k].1.clone()).collect())
}

/// Brings every flushed segment of `index` (of each partition's index, for
/// a partitioned one) into the local cache and opens it, so the first
/// queries do not pay for a download; returns how many segments and bytes
/// the objects hold. Files already cached are read through and checked in
/// full (opening a mapped file checks only its header): a damaged one gets
/// a WARNING naming it, and is fetched again. Fails like a search would,
/// naming a segment that cannot be read. Owner or superuser, as the other
/// maintenance functions.
#[pg_extern(sql = "
CREATE FUNCTION milvus_prewarm(index regclass)
    RETURNS TABLE(segments integer, bytes bigint)
    VOLATILE PARALLEL UNSAFE STRICT LANGUAGE c AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
COMMENT ON FUNCTION milvus_prewarm(regclass) IS 'load the flushed segments of a milvus index into the local cache';
")]
fn milvus_prewarm(index: pg_sys::Oid) -> TableIterator<'static, (name!(segments, i32), name!(bytes, i64))> {
    let (mut segments, mut bytes) = (0, 0);
    for oid in flush::leaf_indexes(index) {
        // SAFETY: index_open checks the OID and locks the relation.
        unsafe {
            let rel = pg_sys::index_open(oid, pg_sys::AccessShareLock as i32);
            flush::check_milvus_index(rel);
            flush::check_owner(rel);
            let (meta, manifest) = page::read_meta_and_manifest(rel);
            let metric = Metric::from_code(meta.metric).expect("meta page checked");
            let flushed: Vec<SegmentEntry> =
                manifest.segments.iter().filter(|e| e.meta.state == SegmentState::Flushed).cloned().collect();
            let cache = crate::storage::cache();
            let damaged = crate::storage::run_job("verify", move |_| {
                flushed.iter().flat_map(|e| jobs::verify_cached(&cache, e)).collect::<Vec<_>>()
            });
            if !damaged.is_empty() {
                for what in &damaged {
                    warning!("damaged file in the segment cache, fetched again: {what}");
                }
                // This backend's mappings of the damaged files go too.
                LOADED.with_borrow_mut(|loaded| loaded.retain(|k, _| k.0 != oid.to_u32()));
            }
            segments += loaded_segments(rel, &manifest, metric).len() as i32;
            bytes += manifest
                .segments
                .iter()
                .filter(|e| e.meta.state == SegmentState::Flushed)
                .map(|e| e.meta.bytes as i64)
                .sum::<i64>();
            pg_sys::index_close(rel, pg_sys::AccessShareLock as i32);
        }
    }
    TableIterator::once((segments, bytes))
}
