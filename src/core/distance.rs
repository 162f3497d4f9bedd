//! Distance kernels: simsimd for speed, a scalar reference for truth.
//!
//! Every distance the product computes (SQL operators, growing-segment brute
//! force, HNSW) goes through [`Metric::distance`], which uses simsimd's SIMD
//! kernels. The `reference` module computes the same quantities in plain
//! `f64` loops; tests hold the two to 1e-5 relative agreement.
//!
//! Distances follow pgvector's operators, smaller is nearer for all three:
//! - `L2`: Euclidean distance, `<->`;
//! - `InnerProduct`: the negative inner product, `<#>`;
//! - `Cosine`: `1 - cos(a, b)`, `<=>`; NaN when either vector is all zeros,
//!   as in pgvector.

use simsimd::SpatialSimilarity;

/// The four metrics of the opclasses `vector_l2_ops`, `vector_ip_ops`,
/// `vector_cosine_ops` and `vector_l1_ops`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    L2,
    InnerProduct,
    Cosine,
    L1,
}

impl Metric {
    pub const ALL: [Metric; 4] = [Metric::L2, Metric::InnerProduct, Metric::Cosine, Metric::L1];

    /// The distance between `a` and `b` under this metric. Both must have the
    /// same length; callers check dimensions before they get here.
    #[inline]
    pub fn distance(self, a: &[f32], b: &[f32]) -> f32 {
        match self {
            Metric::L2 => l2_squared(a, b).sqrt(),
            Metric::InnerProduct => -inner_product(a, b),
            Metric::Cosine => cosine_distance(a, b),
            Metric::L1 => l1(a, b),
        }
    }

    /// The byte that stands for this metric in object headers.
    pub fn code(self) -> u8 {
        match self {
            Metric::L2 => 1,
            Metric::InnerProduct => 2,
            Metric::Cosine => 3,
            Metric::L1 => 4,
        }
    }

    pub fn from_code(code: u8) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.code() == code)
    }

    /// The SQL operator this metric orders by.
    pub fn operator(self) -> &'static str {
        match self {
            Metric::L2 => "<->",
            Metric::InnerProduct => "<#>",
            Metric::Cosine => "<=>",
            Metric::L1 => "<+>",
        }
    }
}

/// Squared Euclidean distance.
#[inline]
pub fn l2_squared(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    <f32 as SpatialSimilarity>::l2sq(a, b).expect("equal lengths") as f32
}

/// Inner product.
#[inline]
pub fn inner_product(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    <f32 as SpatialSimilarity>::dot(a, b).expect("equal lengths") as f32
}

/// Cosine distance `1 - cos(a, b)`, NaN when either vector is all zeros.
#[inline]
pub fn cosine_distance(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let d = <f32 as SpatialSimilarity>::cos(a, b).expect("equal lengths") as f32;
    // simsimd answers 0 or 1 for zero vectors instead of NaN; only those two
    // exact values need the (rare, linear) check.
    if (d == 0.0 || d == 1.0) && (is_zero(a) || is_zero(b)) {
        return f32::NAN;
    }
    d.max(0.0)
}

/// Euclidean norm.
#[inline]
/// The L1 (taxicab) distance, `sum |a_i - b_i|`, accumulated in f32 as
/// pgvector does (the compiler vectorises the loop; simsimd has no L1).
pub fn l1(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum()
}

/// The bits that differ between two bit strings of one length (pgvector's
/// `hamming_distance` on `bit`).
pub fn hamming(a: &[u8], b: &[u8]) -> u64 {
    debug_assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones() as u64).sum()
}

/// `1 - |a AND b| / |a OR b|` over the set bits; 1 when no bit is set in
/// both (pgvector's `jaccard_distance` on `bit`).
pub fn jaccard(a: &[u8], b: &[u8]) -> f64 {
    debug_assert_eq!(a.len(), b.len());
    let (mut both, mut ones_a, mut ones_b) = (0u64, 0u64, 0u64);
    for (x, y) in a.iter().zip(b) {
        both += (x & y).count_ones() as u64;
        ones_a += x.count_ones() as u64;
        ones_b += y.count_ones() as u64;
    }
    if both == 0 { 1.0 } else { 1.0 - both as f64 / (ones_a + ones_b - both) as f64 }
}

pub fn norm(a: &[f32]) -> f32 {
    inner_product(a, a).sqrt()
}

/// Asks the CPU to start loading `v` into cache, for a distance computed
/// soon: the first 256 bytes (a 64-d vector; the hardware prefetcher
/// follows a longer one by itself once its first lines are read).
#[inline]
pub fn prefetch(v: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    for line in v.chunks(16).take(4) {
        // SAFETY: a prefetch is a hint; it never faults, whatever the address.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(line.as_ptr().cast()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = v;
}

fn is_zero(a: &[f32]) -> bool {
    a.iter().all(|x| *x == 0.0)
}

/// Scalar `f64` implementations: slow, obviously right, the yardstick for the
/// SIMD kernels in tests and benchmarks.
pub mod reference {
    pub fn l2_squared(a: &[f32], b: &[f32]) -> f64 {
        a.iter()
            .zip(b)
            .map(|(x, y)| {
                let d = *x as f64 - *y as f64;
                d * d
            })
            .sum()
    }

    pub fn inner_product(a: &[f32], b: &[f32]) -> f64 {
        a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum()
    }

    pub fn cosine_distance(a: &[f32], b: &[f32]) -> f64 {
        let denom = (inner_product(a, a) * inner_product(b, b)).sqrt();
        if denom == 0.0 {
            return f64::NAN;
        }
        (1.0 - inner_product(a, b) / denom).max(0.0)
    }

    pub fn distance(metric: super::Metric, a: &[f32], b: &[f32]) -> f64 {
        match metric {
            super::Metric::L2 => l2_squared(a, b).sqrt(),
            super::Metric::InnerProduct => -inner_product(a, b),
            super::Metric::Cosine => cosine_distance(a, b),
            super::Metric::L1 => a.iter().zip(b).map(|(x, y)| (*x as f64 - *y as f64).abs()).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Agreement within 1e-5 relative. Near zero a relative bound means
    /// nothing (cancellation in `1 - cos`, `x - y`), so the bound is taken
    /// relative to the magnitudes the kernel summed, not to the result alone.
    fn close(metric: Metric, a: &[f32], b: &[f32]) -> Result<(), String> {
        let fast = metric.distance(a, b) as f64;
        let slow = reference::distance(metric, a, b);
        let scale = match metric {
            Metric::L2 => (reference::l2_squared(a, b)).sqrt(),
            Metric::InnerProduct => (reference::inner_product(a, a) * reference::inner_product(b, b)).sqrt(),
            Metric::Cosine => 1.0,
            Metric::L1 => slow,
        }
        .max(slow.abs())
        .max(f64::MIN_POSITIVE);
        if slow.is_nan() && fast.is_nan() || (fast - slow).abs() <= 1e-5 * scale {
            Ok(())
        } else {
            Err(format!("{metric:?}: simsimd {fast} vs reference {slow}"))
        }
    }

    #[test]
    fn l1_hamming_and_jaccard_as_pgvector() {
        assert_eq!(l1(&[0.0, 0.0], &[3.0, 4.0]), 7.0);
        assert_eq!(l1(&[3e38], &[-3e38]), f32::INFINITY, "accumulated in f32, as pgvector");
        // 111 against 101, 000: one and three bits differ.
        assert_eq!(hamming(&[0b1110_0000], &[0b1010_0000]), 1);
        assert_eq!(hamming(&[0xff, 0x0f], &[0x00, 0x0f]), 8);
        assert_eq!(jaccard(&[0b1110_0000], &[0b1010_0000]), 1.0 - 2.0 / 3.0);
        assert_eq!(jaccard(&[0b1110_0000], &[0b1110_0000]), 0.0);
        assert_eq!(jaccard(&[0], &[0]), 1.0, "no bit in both: 1");
        assert_eq!(jaccard(&[0b1000_0000], &[0b0100_0000]), 1.0);
    }

    fn vectors(dim: usize) -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
        let v = prop::collection::vec(-100.0f32..100.0, dim);
        (v.clone(), v)
    }

    proptest! {
        #[test]
        fn simd_matches_reference(dim in 1usize..300, seed in any::<u64>()) {
            let (a, b) = pseudo_random_pair(dim, seed);
            for metric in Metric::ALL {
                prop_assert!(close(metric, &a, &b).is_ok(), "{:?}", close(metric, &a, &b));
            }
        }

        #[test]
        fn simd_matches_reference_at_product_dims((a, b) in vectors(1536)) {
            for metric in Metric::ALL {
                prop_assert!(close(metric, &a, &b).is_ok(), "{:?}", close(metric, &a, &b));
            }
        }
    }

    fn pseudo_random_pair(dim: usize, seed: u64) -> (Vec<f32>, Vec<f32>) {
        let mut rng = crate::synthetic::Rng::new(seed);
        (rng.vector(dim), rng.vector(dim))
    }

    #[test]
    fn known_values() {
        let a = [1.0, 2.0, 3.0];
        let b = [4.0, 5.0, 6.0];
        assert!((Metric::L2.distance(&a, &b) - 27f32.sqrt()).abs() < 1e-6);
        assert_eq!(Metric::InnerProduct.distance(&a, &b), -32.0);
        assert!((Metric::Cosine.distance(&a, &b) - 0.025_368_154).abs() < 1e-6);
        assert!(Metric::Cosine.distance(&a, &a).abs() < 1e-6);
        assert!((norm(&[3.0, 4.0]) - 5.0).abs() < 1e-6);
    }

    #[test]
    fn cosine_with_zero_vector_is_nan_like_pgvector() {
        assert!(Metric::Cosine.distance(&[0.0, 0.0], &[1.0, 2.0]).is_nan());
        assert!(Metric::Cosine.distance(&[0.0, 0.0], &[0.0, 0.0]).is_nan());
        assert!(reference::cosine_distance(&[0.0], &[1.0]).is_nan());
        // Orthogonal vectors are distance 1, not NaN.
        assert_eq!(Metric::Cosine.distance(&[1.0, 0.0], &[0.0, 1.0]), 1.0);
    }
}
