//! Planner costs: the index is for `ORDER BY distance LIMIT k` and nothing
//! else.
//!
//! Without an ORDER BY on the opclass' operator the cost is infinite, so the
//! planner never picks the index for other queries. With one, the work comes
//! from the core's model (`milvus_core::policy::cost`): the first round
//! (page-resident rows and one HNSW search per flushed segment) is start-up
//! cost; producing every row of the index is the total. The planner adds
//! the heap fetches and the other quals per row, and a `LIMIT` takes the
//! part of the total it needs by the rows it expects past those quals, so a
//! selective filter makes the index scan expensive (many rows read per row
//! kept) and a sequential scan wins where it is cheaper.
//!
//! The rows of the growing chain are priced as index tuples read from
//! shared buffers, not as pages read from disk: every insert writes that
//! chain and every scan reads it, so it stays cached. (Priced as sequential
//! page reads, a few thousand growing rows of 768 dimensions, 2 rows a
//! page, cost more before the first row than a sequential scan and sort,
//! which the planner prices without detoasting the vectors, and it chose
//! that plan at a fraction of the index's speed: `make bench-768`
//! measures it; docs/benchmarks.md, "Constants and the measurements
//! behind them".) Distances are one operator call
//! each, which is what the planner charges a sequential scan for the same
//! `ORDER BY` expression, and so are the comparisons of the exact tail's
//! heap, as a sort's are.
//!
//! Keys the planner pushes on a multicolumn index's filter columns
//! (`filter_columns.rs`) are weighed by their selectivity
//! (`clauselist_selectivity`, what a btree's would be): the scan then
//! produces only the rows that pass (`milvus_core::policy::cost::filtered_scan_work`),
//! so a btree on `tenant_id` and a sort win only where they are cheaper.

use milvus_core::policy::cost::{IndexShape, filtered_scan_work, scan_work};
use pgrx::prelude::*;

use super::options;
use crate::pages::OpenIndex;
use milvus_core::pages::growing::size_rule;

// The signature is Postgres' (amapi.h).
#[allow(clippy::too_many_arguments)]
#[pg_guard]
pub unsafe extern "C-unwind" fn amcostestimate(
    root: *mut pg_sys::PlannerInfo,
    path: *mut pg_sys::IndexPath,
    _loop_count: f64,
    startup_cost: *mut pg_sys::Cost,
    total_cost: *mut pg_sys::Cost,
    selectivity: *mut pg_sys::Selectivity,
    correlation: *mut f64,
    pages: *mut f64,
) {
    // SAFETY: the planner calls this on the main thread with a valid path
    // and the outputs to fill.
    unsafe {
        *correlation = 0.0;
        if (*path).indexorderbys.is_null() {
            *startup_cost = f64::INFINITY;
            *total_cost = f64::INFINITY;
            *selectivity = 0.0;
            *pages = 0.0;
            // PostgreSQL 18 compares how many nodes a path disables before
            // its cost: more than a sequential scan that enable_seqscan =
            // off disables, so this path still loses.
            #[cfg(feature = "pg18")]
            {
                (*path).path.disabled_nodes = 2;
            }
            return;
        }
        let info = (*path).indexinfo;
        // The planner holds a lock on the index already.
        let index = OpenIndex::under_lock((*info).indexoid);
        let meta = index.meta_copy();
        let o = options::of(*index);
        drop(index);
        let growing_pages = meta.growing_pages.max(1) as f64;
        let shape = IndexShape {
            rows: (*info).tuples.max(0.0),
            page_rows: size_rule(1, meta.shape()).rows_in_pages(meta.growing_pages.max(1) as u64) as f64,
            segment_rows: o.segment_max_rows as f64,
            m: o.m as usize,
        };
        let ef = crate::gucs::ef_search();
        // The keys on filter columns pass this share of the rows; without
        // any, every row comes out of an ordered scan and the quals filter them.
        let share = match (*path).indexclauses.is_null() {
            true => 1.0,
            false => pg_sys::clauselist_selectivity(
                root,
                pg_sys::get_quals_from_indexclauses((*path).indexclauses),
                (*(*info).rel).relid as i32,
                pg_sys::JoinType::JOIN_INNER,
                std::ptr::null_mut(),
            ),
        };
        let work = if share < 1.0 { filtered_scan_work(shape, ef, share) } else { scan_work(shape, ef) };
        let distance = pg_sys::cpu_operator_cost;
        *startup_cost = work.startup_page_rows * pg_sys::cpu_index_tuple_cost + work.startup_distances * distance;
        *total_cost = *startup_cost
            + (work.total_distances - work.startup_distances + work.total_comparisons) * distance
            + shape.rows * share * pg_sys::cpu_index_tuple_cost;
        *selectivity = share;
        *pages = growing_pages;
    }
}
