//! What an ordered index scan costs, in units the planner prices: pages
//! read and distances computed. A pure model, so the skin's
//! `amcostestimate` only multiplies by Postgres' cost settings.
//!
//! A scan pays up front (before its first row): reading the page-resident
//! rows (growing, and sealed not yet flushed) with one distance each, and
//! one HNSW search per flushed segment with its share of `ef_search`
//! (`search::segment_ef`; brute force below [`BRUTE_FORCE_MAX_ROWS`] rows). Every further row costs about
//! [`DISTANCES_PER_ROW`] distances: the widening rounds ask for twice the
//! rows each and run only while `k` times [`EXACT_SWITCH_FACTOR`] is below
//! the rows, which bounds their cost to about that of `2N` distances in a
//! sequential pass (the factor is set where they cost the same, measured);
//! the exact tail then computes one distance per row left: `3N` in all. The
//! tail keeps its rows in a heap, and each row out of it costs `log2 N`
//! comparisons.
//!
//! The model's total is the cost of the whole scan. The planner takes the
//! part of it a `LIMIT` needs, by the rows it expects past the query's other
//! quals: `startup + (total - startup) * limit / (rows * selectivity)`. A
//! selective filter so costs the index many rows (and their heap fetches),
//! and the planner prefers a sequential scan where that is cheaper; an
//! unselective one costs it the first round only.
//!
//! A filter pushed into the scan (a multicolumn index's keys,
//! [`filtered_scan_work`]) changes that: every row's values are tested
//! once (a bit a row, far cheaper than a distance: [`FILTER_TEST`]), and
//! the scan produces only the passing rows. Few of them are measured up
//! front, all of them (as a segment does when 7% or fewer pass,
//! `filter::Plan`); more are found by walks that step through rejected
//! rows, so visit about `1 / share` times the nodes of an unfiltered walk.

use crate::search::{BRUTE_FORCE_MAX_ROWS, EXACT_SWITCH_FACTOR, SEGMENT_EF_FLOOR, segment_ef};

/// Distances per row the scan produces past its first round (module doc).
pub const DISTANCES_PER_ROW: f64 = 3.0;

/// What the planner knows of an index.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IndexShape {
    /// Rows in the index (`reltuples`).
    pub rows: f64,
    /// Rows in pages (growing, sealed not yet flushed).
    pub page_rows: f64,
    /// Largest flushed segment (`segment_max_rows`).
    pub segment_rows: f64,
    /// HNSW `m` of the index.
    pub m: usize,
}

/// The model's answer, in pages and distances.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScanWork {
    /// Rows read from index pages before the first row.
    pub startup_page_rows: f64,
    pub startup_distances: f64,
    /// Distances to produce every row, startup's included.
    pub total_distances: f64,
    /// Comparisons to take every row out of the exact tail's heap.
    pub total_comparisons: f64,
}

/// Tuples an HNSW search of `ef` visits in a graph of `n` nodes: pgvector's
/// estimate (entry descent plus the part of layer 0's `2m * ef` neighbours
/// not seen before), capped at `n`.
pub fn hnsw_visits(n: f64, m: usize, ef: usize) -> f64 {
    if n <= BRUTE_FORCE_MAX_ROWS as f64 {
        return n;
    }
    let (m, ef) = (m.max(2) as f64, ef.max(1) as f64);
    let levels = (n.ln() / m.ln()).floor();
    let layer0 = 2.0 * m * ef * 0.55 * n.ln() / (m.ln() * (1.0 + ef.ln()));
    (levels * m + layer0).min(n)
}

/// The work of an ordered scan of `shape` at `ef_search`.
pub fn scan_work(shape: IndexShape, ef_search: usize) -> ScanWork {
    let rows = shape.rows.max(0.0);
    let page_rows = shape.page_rows.max(0.0);
    let flushed = (rows - page_rows).max(0.0);
    let segment_rows = shape.segment_rows.max(1.0);
    let full = (flushed / segment_rows).floor();
    let rest = flushed - full * segment_rows;
    // Each segment searches with its share of ef_search (`segment_ef`).
    let visits =
        |n: f64| hnsw_visits(n, shape.m, segment_ef(ef_search, n as usize, flushed as usize, SEGMENT_EF_FLOOR));
    let searches = full * visits(segment_rows) + visits(rest);
    let startup_distances = page_rows + searches;
    ScanWork {
        startup_page_rows: page_rows,
        startup_distances,
        total_distances: startup_distances.max(rows * DISTANCES_PER_ROW),
        total_comparisons: rows * rows.max(2.0).log2(),
    }
}

/// What testing one row against a pushed filter costs, in distances: a
/// bit of a bitset set by a comparison of integers (a distance of 128
/// dimensions is some 20 ns, a test about 1).
pub const FILTER_TEST: f64 = 0.05;

/// The share of the rows at or below which a segment measures every
/// passing row (`filter::Plan::choose`).
pub const EXACT_SHARE: f64 = 0.07;

/// The work of an ordered scan of `shape` at `ef_search` whose pushed keys
/// pass `share` of the rows (the planner's selectivity of them): only the
/// passing rows come out.
pub fn filtered_scan_work(shape: IndexShape, ef_search: usize, share: f64) -> ScanWork {
    let share = share.clamp(0.0, 1.0);
    let unfiltered = scan_work(shape, ef_search);
    let rows = shape.rows.max(0.0);
    let page_rows = shape.page_rows.max(0.0);
    let passing = rows * share;
    let tests = rows * FILTER_TEST;
    let found = if share <= EXACT_SHARE {
        passing
    } else {
        ((unfiltered.startup_distances - page_rows) / share.max(f64::MIN_POSITIVE)).min(rows)
    };
    let startup_distances = page_rows + tests + found;
    ScanWork {
        startup_page_rows: page_rows,
        startup_distances,
        total_distances: startup_distances.max(passing * DISTANCES_PER_ROW),
        total_comparisons: passing * passing.max(2.0).log2(),
    }
}

// The switch the model assumes is the one the search makes.
const _: () = assert!(EXACT_SWITCH_FACTOR == 512);

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(rows: f64, page_rows: f64) -> IndexShape {
        IndexShape { rows, page_rows, segment_rows: 100_000.0, m: 16 }
    }

    #[test]
    fn small_segments_are_brute_force() {
        assert_eq!(hnsw_visits(500.0, 16, 40), 500.0);
        assert!(hnsw_visits(3000.0, 16, 40) < 3000.0, "a graph past BRUTE_FORCE_MAX_ROWS");
        let v = hnsw_visits(100_000.0, 16, 40);
        assert!((400.0..2000.0).contains(&v), "{v}");
        assert!(hnsw_visits(100_000.0, 16, 200) > v, "a larger ef visits more");
    }

    #[test]
    fn startup_is_the_first_round_and_total_every_row() {
        let w = scan_work(shape(100_000.0, 0.0), 40);
        assert!(w.startup_distances < 2000.0);
        assert_eq!(w.total_distances, 300_000.0);
        assert!((w.total_comparisons - 100_000.0 * 100_000f64.log2()).abs() < 1.0);
        // Growing rows are paid up front, one distance each.
        let g = scan_work(shape(100_000.0, 10_000.0), 40);
        assert!(g.startup_distances > 10_000.0 && g.startup_page_rows == 10_000.0);
    }

    #[test]
    fn many_segments_cost_more_up_front() {
        let one = scan_work(shape(400_000.0, 0.0), 40);
        let many = scan_work(IndexShape { segment_rows: 10_000.0, ..shape(400_000.0, 0.0) }, 40);
        // 40 segments, each searched with the least ef (10): more than one
        // search of 400k rows, less than 40 full ones.
        assert!(many.startup_distances > 2.0 * one.startup_distances, "{many:?} against {one:?}");
    }

    /// A selective filter inside the scan costs less up front than the
    /// rows it passes measured one by one would suggest it saves: far less
    /// than a sequential pass; a filter passing half the rows costs about
    /// two first rounds; every filter ends with fewer rows than none.
    #[test]
    fn filters_inside_the_scan_cost_their_passing_rows() {
        let rows = shape(100_000.0, 1_000.0);
        let plain = scan_work(rows, 40);
        let one = filtered_scan_work(rows, 40, 0.01);
        assert!(one.startup_distances < 0.1 * rows.rows, "{one:?}");
        assert!(one.startup_distances > 1_000.0 + 1_000.0, "the pages and the passing rows: {one:?}");
        let half = filtered_scan_work(rows, 40, 0.5);
        let walks = plain.startup_distances - 1_000.0;
        assert!((half.startup_distances - 1_000.0 - 5_000.0 - 2.0 * walks).abs() < 1.0, "{half:?}");
        for share in [0.001, 0.01, 0.1, 0.5] {
            let w = filtered_scan_work(rows, 40, share);
            assert!(w.total_distances <= plain.total_distances, "{share}: {w:?}");
        }
        assert_eq!(filtered_scan_work(rows, 40, 1.0).total_distances, plain.total_distances);
    }

    #[test]
    fn an_empty_index_costs_nothing() {
        let w = scan_work(shape(0.0, 0.0), 40);
        assert_eq!((w.startup_distances, w.total_distances), (0.0, 0.0));
    }
}
