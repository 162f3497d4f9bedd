//! What both kinds of codes use: which metrics have codes, rows and
//! queries as the codes see them, the cancel flag's checks, and the
//! prefetch of a record.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::distance::{Metric, norm};
use crate::element::Row;
use crate::vector::l2_normalize;

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

/// A row as codes see it: widened to floats, normalised under cosine
/// (whose codes are of the normalised rows).
pub(super) fn coded_row(metric: Metric, row: Row<'_>) -> Vec<f32> {
    let v = row.to_f32().into_owned();
    if metric == Metric::Cosine { l2_normalize(&v) } else { v }
}

/// A query as codes see it: widened to `dims` floats (cut or padded with
/// zeros), normalised under cosine; and whether it has no direction (all
/// zeros, or not finite), to which a cosine distance is NaN.
pub(super) fn coded_query(metric: Metric, dims: usize, query: Row<'_>) -> (Vec<f32>, bool) {
    let mut q = query.to_f32().into_owned();
    q.resize(dims, 0.0);
    let n = norm(&q);
    let zero = n == 0.0 || !n.is_finite();
    (if metric == Metric::Cosine { l2_normalize(&q) } else { q }, zero)
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
