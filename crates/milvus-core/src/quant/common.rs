//! What both kinds of codes use: which metrics have codes, and the
//! prefetch of a record.

use crate::distance::Metric;

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
