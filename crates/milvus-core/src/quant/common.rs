//! What both kinds of codes use: which metrics have codes, the cancel
//! flag's checks, and the prefetch of a record.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::distance::Metric;

/// Rows encoded between two looks at the cancel flag.
const CHECK_ROWS: usize = 1024;

/// An encoding stopped by its cancel flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

/// Before encoding row `row`: stops every [`CHECK_ROWS`] rows once
/// `cancel` is set.
#[inline]
pub(super) fn check(cancel: &AtomicBool, row: usize) -> Result<(), Cancelled> {
    if row.is_multiple_of(CHECK_ROWS) && cancel.load(Ordering::Relaxed) { Err(Cancelled) } else { Ok(()) }
}

/// Whether rows under `metric` get codes.
pub fn supports(metric: Metric) -> bool {
    matches!(metric, Metric::L2 | Metric::InnerProduct | Metric::Cosine)
}

/// Asks the CPU for the cache lines of `bytes`.
#[inline]
pub(super) fn prefetch_bytes(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64) {
        // SAFETY: a prefetch is a hint; it never faults, whatever the address.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(line.as_ptr().cast()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}
