//! EXPLAIN (ANALYZE) of milvus scans: what each index's scans did in the
//! statement, for the `Milvus Scan` lines `crate::hooks` prints.
//!
//! While an EXPLAIN (ANALYZE) runs, a collector (`start_collecting`) gathers: each scan begun
//! meanwhile gets a [`ScanReport`] (`report_for`), shared with the
//! collector so it outlives the scan (the plan is printed before the
//! executor ends its scans). A scan counts each (re)start's segments, page
//! rows and loads, and its search's rounds, exact tails and rows offered;
//! a filtered scan also what its filter did (`filter_columns.rs`).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::pages::Index;
use milvus_core::search::{Search, SearchStats};

/// What the scans of one index did in a statement under EXPLAIN (ANALYZE),
/// shown by `crate::hooks` as a `Milvus Scan` line.
#[derive(Debug, Default)]
pub(crate) struct ScanReport {
    index: String,
    scans: usize,
    segments: usize,
    loaded: usize,
    page_rows: usize,
    rounds: usize,
    exact: usize,
    offered: usize,
    reranked: usize,
    read_rows: usize,
    read_bytes: u64,
    /// Scans with keys on the filter columns; segments the filter excluded
    /// (by statistics or columns), rows it passed, and segment searches
    /// that measured the passing rows or walked the graph.
    filtered: usize,
    skipped: usize,
    matched: usize,
    measured: usize,
    walked: usize,
    /// The running search's counters, not yet added.
    pub(crate) current: SearchStats,
}

impl ScanReport {
    /// A search started: its segments and page rows, and the segments this
    /// backend loaded for it.
    pub(crate) fn started(&mut self, search: &Search, loaded: usize) {
        self.scans += 1;
        self.filtered += usize::from(search.is_filtered());
        self.segments += search.segments();
        self.page_rows += search.page_rows();
        self.loaded += loaded;
    }

    /// A search's counters, added once it ends (or as it stands).
    pub(crate) fn add(&mut self, stats: &SearchStats) {
        self.rounds += stats.rounds;
        self.exact += usize::from(stats.exact);
        self.offered += stats.offered;
        self.reranked += stats.reranked;
        self.read_rows += stats.read_rows;
        self.read_bytes += stats.read_bytes;
        self.skipped += stats.skipped;
        self.matched += stats.matched;
        self.measured += stats.exact_segments;
        self.walked += stats.walked_segments;
        self.current = SearchStats::default();
    }

    /// The line; rows read by range from storage are shown when there were
    /// some (an index larger than the local cache).
    fn line(&self) -> String {
        let c = &self.current;
        let mut line = format!(
            "{}: scans={} segments={} loaded={} page_rows={} rounds={} exact={} offered={} reranked={}",
            self.index,
            self.scans,
            self.segments,
            self.loaded,
            self.page_rows,
            self.rounds + c.rounds,
            self.exact + usize::from(c.exact),
            self.offered + c.offered,
            self.reranked + c.reranked
        );
        let (rows, bytes) = (self.read_rows + c.read_rows, self.read_bytes + c.read_bytes);
        if rows > 0 {
            line.push_str(&format!(" read_by_range={rows} read_bytes={bytes}"));
        }
        if self.filtered > 0 {
            line.push_str(&format!(
                " filtered={} skipped={} matched={} measured={} walked={}",
                self.filtered,
                self.skipped + c.skipped,
                self.matched + c.matched,
                self.measured + c.exact_segments,
                self.walked + c.walked_segments
            ));
        }
        line
    }
}

thread_local! {
    /// The reports of the scans begun while an EXPLAIN (ANALYZE) runs, or
    /// `None` when none does.
    static EXPLAINING: RefCell<Option<Vec<Rc<RefCell<ScanReport>>>>> = const { RefCell::new(None) };
    /// Flushed segments loaded by this backend so far (for the reports).
    static LOADS: Cell<usize> = const { Cell::new(0) };
}

/// A report for a scan of `index` begun now, if an EXPLAIN (ANALYZE) runs.
pub(crate) fn report_for(index: Index) -> Option<Rc<RefCell<ScanReport>>> {
    EXPLAINING.with_borrow_mut(|e| {
        e.as_mut().filter(|reports| reports.len() < MAX_REPORTS).map(|reports| {
            let index = index.name();
            let report = Rc::new(RefCell::new(ScanReport { index, ..ScanReport::default() }));
            reports.push(report.clone());
            report
        })
    })
}

/// Flushed segments this backend has loaded so far.
pub(crate) fn loads() -> usize {
    LOADS.get()
}

/// Counts a segment loaded.
pub(crate) fn count_load() {
    LOADS.set(LOADS.get() + 1);
}

/// Reports a collector holds at most: an EXPLAIN cut short by an error
/// leaves its collector in place until the next EXPLAIN (an error passes
/// over the hook without running any code of ours), and the scans of the
/// session's other statements must not pile up in it meanwhile.
const MAX_REPORTS: usize = 1000;

/// Starts collecting the reports of the scans to come if `analyze` (a
/// plain EXPLAIN scans nothing), dropping whatever an EXPLAIN cut short by
/// an error left. One level: an EXPLAIN run inside an EXPLAIN (ANALYZE), by
/// a function, ends the outer one's collection.
pub(crate) fn start_collecting(analyze: bool) {
    EXPLAINING.with_borrow_mut(|e| *e = analyze.then(Vec::new));
}

/// Stops collecting; the lines of the scans' reports, one per index
/// (several scans of one index, as in a self-join, are summed).
pub(crate) fn finish_collecting() -> Vec<String> {
    let mut sums: Vec<ScanReport> = Vec::new();
    for report in EXPLAINING.with_borrow_mut(Option::take).unwrap_or_default() {
        let r = report.borrow();
        let sum = match sums.iter_mut().position(|s| s.index == r.index) {
            Some(at) => &mut sums[at],
            None => {
                sums.push(ScanReport { index: r.index.clone(), ..ScanReport::default() });
                sums.last_mut().expect("just pushed")
            }
        };
        sum.scans += r.scans;
        sum.filtered += r.filtered;
        sum.skipped += r.skipped;
        sum.matched += r.matched;
        sum.measured += r.measured;
        sum.walked += r.walked;
        sum.segments += r.segments;
        sum.loaded += r.loaded;
        sum.page_rows += r.page_rows;
        sum.add(&r.current);
        sum.rounds += r.rounds;
        sum.exact += r.exact;
        sum.offered += r.offered;
        sum.reranked += r.reranked;
        sum.read_rows += r.read_rows;
        sum.read_bytes += r.read_bytes;
    }
    sums.iter().map(ScanReport::line).collect()
}
