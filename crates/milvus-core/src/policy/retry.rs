//! Retries of background work that failed: exponential backoff per index,
//! and "log once per failure streak".
//!
//! A flush that fails (storage down, disk full) leaves its rows sealed in
//! pages, safe; the workers try again later. Retrying at every visit would
//! hammer a broken store and flood the log, so each failure doubles the wait
//! (from the workers' naptime up to a ceiling), and only the first failure
//! of a streak, and the recovery that ends it, are worth a log line.

/// The retry state of one index's background work. Times are Unix seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backoff {
    /// Consecutive failures; 0 when the last attempt succeeded.
    pub failures: u32,
    /// No new attempt before this time.
    pub retry_at: u64,
}

/// What a caller should log after recording an outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streak {
    /// Nothing new: success after success, or a repeated failure.
    Quiet,
    /// The first failure after a success: log the cause.
    Started,
    /// The first success after `failures` failures: log the recovery.
    Ended { failures: u32 },
}

impl Backoff {
    /// Whether an attempt may run at `now`.
    pub fn ready(&self, now: u64) -> bool {
        now >= self.retry_at
    }

    /// Records a failure at `now`: the next attempt waits `base` seconds,
    /// doubled per earlier failure of the streak, at most `max` seconds.
    pub fn fail(&mut self, now: u64, base: u64, max: u64) -> Streak {
        let wait = base.max(1).saturating_mul(1u64 << self.failures.min(32)).min(max.max(1));
        self.failures = self.failures.saturating_add(1);
        self.retry_at = now.saturating_add(wait);
        if self.failures == 1 { Streak::Started } else { Streak::Quiet }
    }

    /// Records a success.
    pub fn succeed(&mut self) -> Streak {
        let failures = std::mem::take(&mut self.failures);
        self.retry_at = 0;
        if failures > 0 { Streak::Ended { failures } } else { Streak::Quiet }
    }
}

/// When the growing segment last changed, as seen by successive visits: the
/// basis of the idle-time seal rule, since inserts do not stamp a time (that
/// would make every insert write the meta page).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GrowingSeen {
    pub segment: u64,
    pub rows: u64,
    pub changed_at: u64,
}

impl GrowingSeen {
    /// The observation after seeing `segment` with `rows` rows at `now`: the
    /// change time moves only when the segment or its row count changed.
    /// A first sighting counts as a change (idle time is never overstated).
    pub fn observe(previous: Option<GrowingSeen>, segment: u64, rows: u64, now: u64) -> GrowingSeen {
        match previous {
            Some(p) if p.segment == segment && p.rows == rows => p,
            _ => GrowingSeen { segment, rows, changed_at: now },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_ceiling_and_only_streak_edges_are_reported() {
        let mut b = Backoff::default();
        assert!(b.ready(0));
        assert_eq!(b.fail(100, 10, 60), Streak::Started);
        assert_eq!(b.retry_at, 110);
        assert!(!b.ready(109) && b.ready(110));
        assert_eq!(b.fail(110, 10, 60), Streak::Quiet);
        assert_eq!(b.retry_at, 130);
        assert_eq!(b.fail(130, 10, 60), Streak::Quiet);
        assert_eq!(b.retry_at, 170);
        assert_eq!(b.fail(170, 10, 60), Streak::Quiet);
        assert_eq!(b.retry_at, 230, "capped at 60 s");
        for _ in 0..100 {
            b.fail(0, 10, 60);
        }
        assert_eq!(b.retry_at, 60, "no overflow after many failures");
        assert_eq!(b.succeed(), Streak::Ended { failures: 104 });
        assert!(b.ready(0));
        assert_eq!(b.succeed(), Streak::Quiet);
    }

    #[test]
    fn idle_time_counts_from_the_last_change_seen() {
        let first = GrowingSeen::observe(None, 3, 10, 100);
        assert_eq!(first.changed_at, 100);
        let same = GrowingSeen::observe(Some(first), 3, 10, 160);
        assert_eq!(same.changed_at, 100);
        let more = GrowingSeen::observe(Some(same), 3, 11, 170);
        assert_eq!(more.changed_at, 170);
        let resealed = GrowingSeen::observe(Some(more), 4, 11, 180);
        assert_eq!(resealed.changed_at, 180, "a new segment is new, whatever its count");
    }
}
