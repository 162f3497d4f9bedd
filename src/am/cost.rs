//! Planner costs: the index is for `ORDER BY distance LIMIT k` and nothing
//! else.
//!
//! Without an ORDER BY on the opclass' operator the cost is infinite, so the
//! planner never picks the index for other queries. With one, the work is
//! what the search does before its first row: read the page-resident rows
//! sequentially and compute one distance per row (an operator call each),
//! all of it start-up cost. A sequential scan plus a sort pays as much I/O,
//! a tuple cost per row and the sort on top, so with a LIMIT the index wins.

use pgrx::prelude::*;

// The signature is Postgres' (amapi.h).
#[allow(clippy::too_many_arguments)]
#[pg_guard]
pub unsafe extern "C-unwind" fn amcostestimate(
    root: *mut pg_sys::PlannerInfo,
    path: *mut pg_sys::IndexPath,
    loop_count: f64,
    startup_cost: *mut pg_sys::Cost,
    total_cost: *mut pg_sys::Cost,
    selectivity: *mut pg_sys::Selectivity,
    correlation: *mut f64,
    pages: *mut f64,
) {
    unsafe {
        if (*path).indexorderbys.is_null() {
            *startup_cost = f64::MAX;
            *total_cost = f64::MAX;
            *selectivity = 0.0;
            *correlation = 0.0;
            *pages = 0.0;
            return;
        }
        let mut costs = pg_sys::GenericCosts::default();
        pg_sys::genericcostestimate(root, path, loop_count, &mut costs);
        let search = costs.numIndexPages * pg_sys::seq_page_cost + costs.numIndexTuples * pg_sys::cpu_operator_cost;
        *startup_cost = search;
        *total_cost = search;
        *selectivity = costs.indexSelectivity;
        *correlation = 0.0;
        *pages = costs.numIndexPages;
    }
}
