//! When the growing segment seals.
//!
//! As in Milvus' `segment_allocation_policy.go`, each rule is a small named
//! function that answers `Some(reason)` when it fires; [`SealPolicy::check`]
//! asks them in order. An empty segment never seals: there is nothing to flush.

use crate::segment::SealReason;

/// What the seal rules look at: the growing segment's counters and times
/// (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrowingStats {
    pub rows: u64,
    pub bytes: u64,
    pub created_at: u64,
    pub last_insert_at: u64,
}

/// The thresholds, from the index's reloptions and GUCs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealPolicy {
    /// `segment_max_rows` (reloption).
    pub max_rows: u64,
    /// Rows one page of the growing chain holds (1: no pages). Segments
    /// grow by whole pages, so a segment is full at the most whole pages of
    /// rows `max_rows` allows ([`SealPolicy::row_capacity`]): the rule an
    /// insert applies before linking a page (`format::meta::MetaPage::needs_seal`)
    /// and the workers apply to counted rows are one.
    pub rows_per_page: u64,
    /// Pages one row takes (1, but for rows of more dimensions than a page
    /// holds, stored in chunks of a page each: `format::page::Chunks`).
    pub pages_per_row: u64,
    /// Byte budget of a segment's vectors.
    pub max_bytes: u64,
    /// `milvus.seal_idle_time`; `None` disables the rule.
    pub idle_secs: Option<u64>,
    /// Longest a segment stays growing; `None` disables the rule.
    pub lifetime_secs: Option<u64>,
}

impl Default for SealPolicy {
    fn default() -> Self {
        SealPolicy {
            max_rows: 100_000,
            rows_per_page: 1,
            pages_per_row: 1,
            max_bytes: 512 << 20,
            idle_secs: Some(60),
            lifetime_secs: Some(3600),
        }
    }
}

/// Most vector bytes the growing segment holds when the index leaves
/// `growing_max_rows` unset. Every query reads every growing row from
/// pages, and once rows are wide that read is bound by memory: at 768
/// dimensions (3 KiB a row) a growing row costs a query several times its
/// distance alone (docs/benchmarks.md, "Constants and the measurements
/// behind them"). 1 MiB is 2,048 rows of 128 dimensions.
pub const GROWING_BYTES: u64 = 1 << 20;
/// Most rows of the growing segment by default.
pub const GROWING_ROWS_MAX: u64 = 2048;
/// Fewest rows of the growing segment by default: every flush adds a
/// segment for queries to visit until it is merged, and at 768 dimensions
/// streaming with half the default's rows was no faster (docs/benchmarks.md,
/// "Constants and the measurements behind them").
pub const GROWING_ROWS_MIN: u64 = 256;

/// The rows at which the growing segment seals when `growing_max_rows` is
/// not set, for rows of `row_bytes` bytes: those that fill
/// [`GROWING_BYTES`], within [`GROWING_ROWS_MIN`] and [`GROWING_ROWS_MAX`].
pub fn default_growing_rows(row_bytes: usize) -> u64 {
    (GROWING_BYTES / row_bytes.max(1) as u64).clamp(GROWING_ROWS_MIN, GROWING_ROWS_MAX)
}

pub fn seal_by_rows(s: &GrowingStats, p: &SealPolicy) -> Option<SealReason> {
    (s.rows >= p.row_capacity()).then_some(SealReason::Rows { rows: s.rows, max_rows: p.max_rows })
}

pub fn seal_by_bytes(s: &GrowingStats, p: &SealPolicy) -> Option<SealReason> {
    (s.bytes >= p.max_bytes).then_some(SealReason::Bytes { bytes: s.bytes, max_bytes: p.max_bytes })
}

pub fn seal_by_lifetime(s: &GrowingStats, p: &SealPolicy, now: u64) -> Option<SealReason> {
    let age = now.saturating_sub(s.created_at);
    p.lifetime_secs.filter(|limit| age >= *limit).map(|_| SealReason::Lifetime { age_secs: age })
}

pub fn seal_by_idle_time(s: &GrowingStats, p: &SealPolicy, now: u64) -> Option<SealReason> {
    let idle = now.saturating_sub(s.last_insert_at);
    p.idle_secs.filter(|limit| idle >= *limit).map(|_| SealReason::Idle { idle_secs: idle })
}

impl SealPolicy {
    /// The rows at which a segment is full: `max_rows` rounded down to whole
    /// pages, one page at least.
    pub fn row_capacity(&self) -> u64 {
        let per_page = self.rows_per_page.max(1);
        (self.max_rows / per_page).max(1) * per_page
    }

    /// The rows `pages` full pages of the growing chain hold.
    pub fn rows_in_pages(&self, pages: u64) -> u64 {
        pages * self.rows_per_page / self.pages_per_row.max(1)
    }

    /// The first rule that fires, size rules before time rules.
    pub fn check(&self, s: &GrowingStats, now: u64) -> Option<SealReason> {
        if s.rows == 0 {
            return None;
        }
        seal_by_rows(s, self)
            .or_else(|| seal_by_bytes(s, self))
            .or_else(|| seal_by_lifetime(s, self, now))
            .or_else(|| seal_by_idle_time(s, self, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(rows: u64, bytes: u64, created_at: u64, last_insert_at: u64) -> GrowingStats {
        GrowingStats { rows, bytes, created_at, last_insert_at }
    }

    const P: SealPolicy = SealPolicy {
        max_rows: 100,
        rows_per_page: 1,
        pages_per_row: 1,
        max_bytes: 1000,
        idle_secs: Some(10),
        lifetime_secs: Some(60),
    };

    #[test]
    fn each_rule_fires_with_its_reason() {
        assert_eq!(P.check(&stats(100, 0, 0, 0), 0), Some(SealReason::Rows { rows: 100, max_rows: 100 }));
        assert_eq!(P.check(&stats(1, 1000, 0, 0), 0), Some(SealReason::Bytes { bytes: 1000, max_bytes: 1000 }));
        assert_eq!(P.check(&stats(1, 0, 0, 55), 60), Some(SealReason::Lifetime { age_secs: 60 }));
        assert_eq!(P.check(&stats(1, 0, 0, 5), 15), Some(SealReason::Idle { idle_secs: 10 }));
        assert_eq!(P.check(&stats(99, 999, 0, 5), 14), None);
    }

    #[test]
    fn empty_segments_never_seal_and_disabled_rules_never_fire() {
        assert_eq!(P.check(&stats(0, 0, 0, 0), 10_000), None);
        let off = SealPolicy { idle_secs: None, lifetime_secs: None, ..P };
        assert_eq!(off.check(&stats(1, 0, 0, 0), 10_000), None);
        assert_eq!(SealReason::Rows { rows: 100, max_rows: 100 }.to_string(), "full at 100 rows (limit 100)");
    }

    #[test]
    fn segments_are_full_at_whole_pages() {
        let paged = SealPolicy { rows_per_page: 30, ..P };
        assert_eq!(paged.row_capacity(), 90);
        assert_eq!(paged.check(&stats(89, 0, 0, 0), 0), None);
        assert_eq!(paged.check(&stats(90, 0, 0, 0), 0), Some(SealReason::Rows { rows: 90, max_rows: 100 }));
        assert_eq!(SealPolicy { rows_per_page: 500, ..P }.row_capacity(), 500, "one page at least");
    }

    #[test]
    fn growing_segments_hold_a_mebibyte_of_rows_by_default() {
        use crate::element::{Element, Shape};
        let rows = |dims, element| default_growing_rows(Shape::new(dims, element).bytes());
        assert_eq!(rows(128, Element::F32), 2048, "narrow rows: 2,048, as before");
        assert_eq!(rows(768, Element::F32), 341);
        assert_eq!(rows(768, Element::F16), 682);
        assert_eq!(rows(1536, Element::F32), GROWING_ROWS_MIN);
        assert_eq!(rows(1024, Element::Bit), GROWING_ROWS_MAX, "128-byte rows would be 8,192");
        assert_eq!(default_growing_rows(0), GROWING_ROWS_MAX);
    }

    #[test]
    fn clock_going_backwards_does_not_seal() {
        assert_eq!(P.check(&stats(1, 0, 100, 100), 50), None);
    }
}
