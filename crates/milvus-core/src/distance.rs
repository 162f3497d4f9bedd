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

use crate::element::{Row, Sparse, f16};

/// The metrics of the opclasses: of float vectors (`vector_l2_ops`,
/// `vector_ip_ops`, `vector_cosine_ops`, `vector_l1_ops` and their
/// `halfvec_` twins), and of bits (`bit_hamming_ops`, `bit_jaccard_ops`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    L2,
    InnerProduct,
    Cosine,
    L1,
    /// Bits that differ (`<~>`).
    Hamming,
    /// `1 - |a AND b| / |a OR b|` (`<%>`).
    Jaccard,
}

impl Metric {
    /// The metrics of float vectors.
    pub const ALL: [Metric; 4] = [Metric::L2, Metric::InnerProduct, Metric::Cosine, Metric::L1];
    /// The metrics of bits.
    pub const BITS: [Metric; 2] = [Metric::Hamming, Metric::Jaccard];

    /// Whether this metric measures vectors of `element`s: the bit
    /// metrics bits, the others floats.
    pub fn measures(self, element: crate::element::Element) -> bool {
        Metric::BITS.contains(&self) == (element == crate::element::Element::Bit)
    }

    /// The distance between `a` and `b` under this metric. Both must have the
    /// same length; callers check dimensions before they get here. (The bit
    /// metrics read a nonzero element as a set bit.)
    #[inline]
    pub fn distance(self, a: &[f32], b: &[f32]) -> f32 {
        match self {
            Metric::L2 => l2_squared(a, b).sqrt(),
            Metric::InnerProduct => -inner_product(a, b),
            Metric::Cosine => cosine_distance(a, b),
            Metric::L1 => l1(a, b),
            Metric::Hamming | Metric::Jaccard => {
                let set = |v: &[f32]| v.iter().map(|x| *x != 0.0).collect::<Vec<bool>>();
                self.of_sets(&set(a), &set(b))
            }
        }
    }

    /// A bit metric over sets given element by element.
    fn of_sets(self, a: &[bool], b: &[bool]) -> f32 {
        self.distance_bits(&crate::element::pack_bits(a), &crate::element::pack_bits(b))
    }

    /// [`Self::distance`] for rows of bits, as Postgres' `bit` holds them.
    /// The float metrics see each bit as 0 or 1.
    #[inline]
    pub fn distance_bits(self, a: &[u8], b: &[u8]) -> f32 {
        match self {
            Metric::Hamming => hamming(a, b) as f32,
            Metric::Jaccard => jaccard(a, b) as f32,
            _ => {
                let widen = |v: &[u8]| Row::Bit { bits: v, len: 8 * v.len() }.to_f32().into_owned();
                self.distance(&widen(a), &widen(b))
            }
        }
    }

    /// [`Self::distance`] for `halfvec` rows. The elements are widened as
    /// they are read and summed in f32, as pgvector's halfvec distances do
    /// ([`halves`]); simsimd's f16 kernels are not used: on CPUs with
    /// AVX-512 FP16 they sum in f16, which loses all but three digits of a
    /// 768-d distance and overflows past 65,504.
    #[inline]
    pub fn distance_f16(self, a: &[f16], b: &[f16]) -> f32 {
        debug_assert_eq!(a.len(), b.len());
        match self {
            Metric::L2 => halves::l2_squared(a, b).sqrt(),
            Metric::InnerProduct => -halves::dot(a, b),
            Metric::Cosine => {
                let (ab, aa, bb) = halves::dot_and_norms(a, b);
                if aa == 0.0 || bb == 0.0 {
                    return f32::NAN;
                }
                (1.0 - (ab as f64 / (aa as f64 * bb as f64).sqrt()) as f32).clamp(0.0, 2.0)
            }
            Metric::L1 => halves::l1(a, b),
            Metric::Hamming | Metric::Jaccard => {
                let set = |v: &[f16]| v.iter().map(|x| x.to_f32() != 0.0).collect::<Vec<bool>>();
                self.of_sets(&set(a), &set(b))
            }
        }
    }

    /// The distance between two stored rows of one element type, with that
    /// type's kernel. Rows of different types (never two rows of one index)
    /// are compared widened.
    #[inline]
    pub fn between(self, a: Row<'_>, b: Row<'_>) -> f32 {
        match (a, b) {
            (Row::F32(a), Row::F32(b)) => self.distance(a, b),
            (Row::F16(a), Row::F16(b)) => self.distance_f16(a, b),
            (Row::Bit { bits: a, .. }, Row::Bit { bits: b, .. }) => self.distance_bits(a, b),
            (Row::Sparse(_), Row::Sparse(_)) => self.sparse(a.sparse(), b.sparse()),
            (a, b) => self.distance(&a.to_f32(), &b.to_f32()),
        }
    }

    /// The distance between two sparse vectors, as pgvector's sparsevec
    /// operators compute it (bit metrics read a stored entry as a set bit).
    pub fn sparse(self, a: Sparse<'_>, b: Sparse<'_>) -> f32 {
        match self {
            Metric::L2 => sparse_l2_squared(a, b).sqrt(),
            Metric::InnerProduct => -sparse_inner_product(a, b),
            Metric::Cosine => sparse_cosine_distance(a, b) as f32,
            Metric::L1 => sparse_l1(a, b),
            Metric::Hamming | Metric::Jaccard => self.distance(&a.to_dense(), &b.to_dense()),
        }
    }

    /// The byte that stands for this metric in object headers.
    pub fn code(self) -> u8 {
        match self {
            Metric::L2 => 1,
            Metric::InnerProduct => 2,
            Metric::Cosine => 3,
            Metric::L1 => 4,
            Metric::Hamming => 5,
            Metric::Jaccard => 6,
        }
    }

    pub fn from_code(code: u8) -> Option<Metric> {
        Metric::ALL.into_iter().chain(Metric::BITS).find(|m| m.code() == code)
    }

    /// The SQL operator this metric orders by.
    pub fn operator(self) -> &'static str {
        match self {
            Metric::L2 => "<->",
            Metric::InnerProduct => "<#>",
            Metric::Cosine => "<=>",
            Metric::L1 => "<+>",
            Metric::Hamming => "<~>",
            Metric::Jaccard => "<%>",
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
///
/// simsimd's kernel divides by an approximate square root, which is off
/// by some 1e-8: a pair of parallel vectors comes out at 4e-9, not 0, and
/// pairs that nearly are get an order their distances do not have. So a
/// distance below [`NEAR_PARALLEL`] is computed again as pgvector does
/// (the three sums, then the quotient, clamped): parallel and
/// identical vectors are exactly 0 apart. It also answers for zero
/// vectors, which simsimd puts at 0 or 1.
#[inline]
pub fn cosine_distance(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let d = <f32 as SpatialSimilarity>::cos(a, b).expect("equal lengths") as f32;
    if d < NEAR_PARALLEL || d == 1.0 { cosine_distance_exact(a, b) } else { d }
}

/// Below this, [`cosine_distance`] computes the exact quotient.
const NEAR_PARALLEL: f32 = 1e-3;

/// [`cosine_distance`] as pgvector computes it (but summed in f64, so that
/// squares beyond f32 do not overflow): [`reference::cosine_distance`],
/// NaN for a zero vector. Its f64 rounding past 2 (opposite vectors) is far
/// below what the f32 result holds.
fn cosine_distance_exact(a: &[f32], b: &[f32]) -> f32 {
    reference::cosine_distance(a, b) as f32
}

/// The L1 (taxicab) distance, `sum |a_i - b_i|`, accumulated in f32 as
/// pgvector does (the compiler vectorises the loop; simsimd has no L1).
#[inline]
pub fn l1(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum()
}

// Sparse vectors (`sparsevec`): both entry lists walked in index order,
// summed in f32 in that order, as pgvector does, so the same operands give
// the same bits here and there.

/// Walks both entry lists in index order: `both` for an index in each,
/// `one` for an index in only one of them (with its value).
#[inline]
fn merge_sparse(a: Sparse, b: Sparse, mut both: impl FnMut(f32, f32), mut one: impl FnMut(f32)) {
    let (mut i, mut j) = (0, 0);
    while i < a.indices.len() && j < b.indices.len() {
        match a.indices[i].cmp(&b.indices[j]) {
            std::cmp::Ordering::Equal => {
                both(a.values[i], b.values[j]);
                i += 1;
                j += 1;
            }
            std::cmp::Ordering::Less => {
                one(a.values[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                one(b.values[j]);
                j += 1;
            }
        }
    }
    a.values[i..].iter().chain(&b.values[j..]).for_each(|&x| one(x));
}

/// Squared Euclidean distance, summed in f32 in index order.
pub fn sparse_l2_squared(a: Sparse, b: Sparse) -> f32 {
    let sum = std::cell::Cell::new(0.0f32);
    merge_sparse(a, b, |x, y| sum.set(sum.get() + (x - y) * (x - y)), |x| sum.set(sum.get() + x * x));
    sum.get()
}

/// Inner product over the indices both hold, summed in f32 in index order.
pub fn sparse_inner_product(a: Sparse, b: Sparse) -> f32 {
    let mut sum = 0.0f32;
    merge_sparse(a, b, |x, y| sum += x * y, |_| {});
    sum
}

/// Manhattan distance, summed in f32 in index order.
pub fn sparse_l1(a: Sparse, b: Sparse) -> f32 {
    let sum = std::cell::Cell::new(0.0f32);
    merge_sparse(a, b, |x, y| sum.set(sum.get() + (x - y).abs()), |x| sum.set(sum.get() + x.abs()));
    sum.get()
}

/// `1 - cos(a, b)`, pgvector's: the inner product and the squared norms in
/// f32, their quotient in f64, clamped to [-1, 1]; NaN when a norm is 0.
pub fn sparse_cosine_distance(a: Sparse, b: Sparse) -> f64 {
    let squares = |v: &[f32]| v.iter().fold(0.0f32, |s, x| s + x * x);
    let similarity = sparse_inner_product(a, b) as f64 / (squares(a.values) as f64 * squares(b.values) as f64).sqrt();
    if similarity.is_nan() {
        return f64::NAN;
    }
    1.0 - similarity.clamp(-1.0, 1.0)
}

/// The bits that differ between two bit strings of one length (pgvector's
/// `hamming_distance` on `bit`).
pub fn hamming(a: &[u8], b: &[u8]) -> u64 {
    debug_assert_eq!(a.len(), b.len());
    words(a, b).map(|(x, y)| (x ^ y).count_ones() as u64).sum()
}

/// Two bit strings eight bytes at a time (the tail zero-padded): counting
/// set bits a word at a time is what makes a bit index's scan cheap.
fn words<'a>(a: &'a [u8], b: &'a [u8]) -> impl Iterator<Item = (u64, u64)> + 'a {
    let ((a8, a_tail), (b8, b_tail)) = (a.as_chunks::<8>(), b.as_chunks::<8>());
    let tail = |c: &[u8]| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        u64::from_ne_bytes(w)
    };
    let whole = a8.iter().zip(b8).map(|(x, y)| (u64::from_ne_bytes(*x), u64::from_ne_bytes(*y)));
    whole.chain((!a_tail.is_empty()).then(|| (tail(a_tail), tail(b_tail))))
}

/// `1 - |a AND b| / |a OR b|` over the set bits; 1 when no bit is set in
/// both (pgvector's `jaccard_distance` on `bit`).
pub fn jaccard(a: &[u8], b: &[u8]) -> f64 {
    debug_assert_eq!(a.len(), b.len());
    let (mut both, mut ones_a, mut ones_b) = (0u64, 0u64, 0u64);
    for (x, y) in words(a, b) {
        both += (x & y).count_ones() as u64;
        ones_a += x.count_ones() as u64;
        ones_b += y.count_ones() as u64;
    }
    if both == 0 { 1.0 } else { 1.0 - both as f64 / (ones_a + ones_b - both) as f64 }
}

/// Euclidean norm, summed in f64 as pgvector's `vector_norm` sums: the
/// squares of finite f32 elements overflow an f32 sum (`[3e37,4e37]` is
/// 5e37, not infinity).
pub fn norm(a: &[f32]) -> f64 {
    a.iter().map(|x| *x as f64 * *x as f64).sum::<f64>().sqrt()
}

/// Distances over half floats, summed in f32: with F16C and FMA (x86-64
/// since Haswell) eight elements at a time, as pgvector's halfvec kernels
/// do; elsewhere a scalar loop the compiler vectorises.
mod halves {
    use crate::element::f16;

    pub fn l2_squared(a: &[f16], b: &[f16]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if x86::usable() {
            // SAFETY: the CPU has the features the function is compiled for.
            return unsafe { x86::l2_squared(a, b) };
        }
        a.iter().zip(b).map(|(x, y)| (x.to_f32() - y.to_f32()).powi(2)).sum()
    }

    pub fn dot(a: &[f16], b: &[f16]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if x86::usable() {
            // SAFETY: the CPU has the features the function is compiled for.
            return unsafe { x86::dot(a, b) };
        }
        a.iter().zip(b).map(|(x, y)| x.to_f32() * y.to_f32()).sum()
    }

    /// `(a·b, a·a, b·b)`.
    pub fn dot_and_norms(a: &[f16], b: &[f16]) -> (f32, f32, f32) {
        #[cfg(target_arch = "x86_64")]
        if x86::usable() {
            // SAFETY: the CPU has the features the function is compiled for.
            return unsafe { x86::dot_and_norms(a, b) };
        }
        a.iter().zip(b).fold((0.0, 0.0, 0.0), |(ab, aa, bb), (x, y)| {
            let (x, y) = (x.to_f32(), y.to_f32());
            (ab + x * y, aa + x * x, bb + y * y)
        })
    }

    pub fn l1(a: &[f16], b: &[f16]) -> f32 {
        a.iter().zip(b).map(|(x, y)| (x.to_f32() - y.to_f32()).abs()).sum()
    }

    #[cfg(target_arch = "x86_64")]
    mod x86 {
        use crate::element::f16;
        use std::arch::x86_64::*;

        pub fn usable() -> bool {
            is_x86_feature_detected!("f16c") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("avx")
        }

        /// Eight halves from `v[i..]`, widened.
        #[inline]
        #[target_feature(enable = "avx,f16c")]
        unsafe fn load(v: &[f16], i: usize) -> __m256 {
            // SAFETY: the caller reads within the slice (i + 8 <= len).
            unsafe { _mm256_cvtph_ps(_mm_loadu_si128(v.as_ptr().add(i).cast())) }
        }

        #[inline]
        #[target_feature(enable = "avx")]
        fn sum(v: __m256) -> f32 {
            let mut lanes = [0f32; 8];
            // SAFETY: eight floats into eight.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), v) };
            lanes.iter().sum()
        }

        #[target_feature(enable = "avx,f16c,fma")]
        pub unsafe fn l2_squared(a: &[f16], b: &[f16]) -> f32 {
            let n = a.len().min(b.len());
            let mut acc = _mm256_setzero_ps();
            let mut i = 0;
            while i + 8 <= n {
                // SAFETY: i + 8 <= n.
                let d = unsafe { _mm256_sub_ps(load(a, i), load(b, i)) };
                acc = _mm256_fmadd_ps(d, d, acc);
                i += 8;
            }
            sum(acc) + a[i..n].iter().zip(&b[i..n]).map(|(x, y)| (x.to_f32() - y.to_f32()).powi(2)).sum::<f32>()
        }

        #[target_feature(enable = "avx,f16c,fma")]
        pub unsafe fn dot(a: &[f16], b: &[f16]) -> f32 {
            let n = a.len().min(b.len());
            let mut acc = _mm256_setzero_ps();
            let mut i = 0;
            while i + 8 <= n {
                // SAFETY: i + 8 <= n.
                acc = unsafe { _mm256_fmadd_ps(load(a, i), load(b, i), acc) };
                i += 8;
            }
            sum(acc) + a[i..n].iter().zip(&b[i..n]).map(|(x, y)| x.to_f32() * y.to_f32()).sum::<f32>()
        }

        #[target_feature(enable = "avx,f16c,fma")]
        pub unsafe fn dot_and_norms(a: &[f16], b: &[f16]) -> (f32, f32, f32) {
            let n = a.len().min(b.len());
            let (mut ab, mut aa, mut bb) = (_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps());
            let mut i = 0;
            while i + 8 <= n {
                // SAFETY: i + 8 <= n.
                let (x, y) = unsafe { (load(a, i), load(b, i)) };
                ab = _mm256_fmadd_ps(x, y, ab);
                aa = _mm256_fmadd_ps(x, x, aa);
                bb = _mm256_fmadd_ps(y, y, bb);
                i += 8;
            }
            let (mut ab, mut aa, mut bb) = (sum(ab), sum(aa), sum(bb));
            for (x, y) in a[i..n].iter().zip(&b[i..n]) {
                let (x, y) = (x.to_f32(), y.to_f32());
                (ab, aa, bb) = (ab + x * y, aa + x * x, bb + y * y);
            }
            (ab, aa, bb)
        }
    }
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
            bits => bits.distance(a, b) as f64,
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
        close_to(metric, metric.distance(a, b), a, b)
    }

    /// Whether `fast` is `metric`'s distance between `a` and `b`.
    fn close_to(metric: Metric, fast: f32, a: &[f32], b: &[f32]) -> Result<(), String> {
        let fast = fast as f64;
        let slow = reference::distance(metric, a, b);
        let scale = match metric {
            Metric::L2 => (reference::l2_squared(a, b)).sqrt(),
            Metric::InnerProduct => (reference::inner_product(a, a) * reference::inner_product(b, b)).sqrt(),
            Metric::Cosine => 1.0,
            Metric::L1 | Metric::Hamming | Metric::Jaccard => slow,
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
        // As metrics of rows: over bits, and over floats read as bits.
        let (a, b) = (Row::Bit { bits: &[0b1110_0000], len: 3 }, Row::Bit { bits: &[0b1010_0000], len: 3 });
        let third = (1.0 - 2.0f64 / 3.0) as f32;
        assert_eq!((Metric::Hamming.between(a, b), Metric::Jaccard.between(a, b)), (1.0, third));
        assert_eq!(Metric::Hamming.distance(&[1.0, 1.0, 1.0], &[1.0, 0.0, 1.0]), 1.0);
        assert_eq!(Metric::Jaccard.distance(&[1.0, 1.0, 1.0], &[1.0, 0.0, 1.0]), third);
        assert_eq!(Metric::L1.between(a, b), 1.0, "a float metric sees bits as 0 and 1");
        for metric in Metric::ALL.into_iter().chain(Metric::BITS) {
            assert_eq!(Metric::from_code(metric.code()), Some(metric));
            assert!(metric.measures(crate::element::Element::Bit) == Metric::BITS.contains(&metric));
        }
    }

    fn vectors(dim: usize) -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
        let v = prop::collection::vec(-100.0f32..100.0, dim);
        (v.clone(), v)
    }

    fn halves(v: &[f32]) -> Vec<f16> {
        v.iter().map(|x| f16::from_f32(*x)).collect()
    }

    #[test]
    fn half_rows_sum_in_f32() {
        // 768 elements of 16: a sum in f16 would reach 196,608, past half's
        // largest value (65,504); in f32 it is exact.
        let (a, b) = (halves(&[16.0; 768]), halves(&[0.0; 768]));
        assert_eq!(Metric::L2.distance_f16(&a, &b), (768.0f32 * 256.0).sqrt());
        assert_eq!(Metric::InnerProduct.distance_f16(&a, &a), -196_608.0);
        assert_eq!(Metric::L1.distance_f16(&a, &b), 12_288.0);
        assert!(Metric::Cosine.distance_f16(&a, &b).is_nan(), "a zero vector: NaN, as pgvector");
        assert_eq!(Metric::Cosine.distance_f16(&a, &a), 0.0);
        assert_eq!(Metric::L2.between(Row::F16(&a), Row::F16(&b)), Metric::L2.distance(&[16.0; 768], &[0.0; 768]));
    }

    proptest! {
        /// A word at a time, with a tail of fewer than eight bytes: the
        /// same counts as a byte at a time.
        #[test]
        fn bit_metrics_count_as_bytes_do(pair in prop::collection::vec(any::<(u8, u8)>(), 0..40)) {
            let (a, b): (Vec<u8>, Vec<u8>) = pair.into_iter().unzip();
            let bytes = |f: fn(u8, u8) -> u8| a.iter().zip(&b).map(|(x, y)| f(*x, *y).count_ones() as u64).sum::<u64>();
            prop_assert_eq!(hamming(&a, &b), bytes(|x, y| x ^ y));
            let (both, any) = (bytes(|x, y| x & y), bytes(|x, y| x | y));
            let want = if both == 0 { 1.0 } else { 1.0 - both as f64 / any as f64 };
            prop_assert_eq!(jaccard(&a, &b), want);
        }

        #[test]
        fn half_kernels_match_reference(dim in 1usize..300, seed in any::<u64>()) {
            let (a, b) = pseudo_random_pair(dim, seed);
            let (ha, hb) = (halves(&a), halves(&b));
            let (wa, wb): (Vec<f32>, Vec<f32>) = (ha.iter().map(|h| h.to_f32()).collect(), hb.iter().map(|h| h.to_f32()).collect());
            for metric in Metric::ALL {
                let fast = metric.distance_f16(&ha, &hb);
                prop_assert!(close_to(metric, fast, &wa, &wb).is_ok(), "{:?}", close_to(metric, fast, &wa, &wb));
                prop_assert_eq!(metric.between(Row::F16(&ha), Row::F16(&hb)), fast);
            }
        }

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
        assert!((norm(&[3.0, 4.0]) - 5.0).abs() < 1e-12);
        assert_eq!(
            norm(&[3e37, 4e37]),
            ((3e37f32 as f64).powi(2) + (4e37f32 as f64).powi(2)).sqrt(),
            "no f32 overflow"
        );
    }

    #[test]
    fn cosine_with_zero_vector_is_nan_like_pgvector() {
        assert!(Metric::Cosine.distance(&[0.0, 0.0], &[1.0, 2.0]).is_nan());
        assert!(Metric::Cosine.distance(&[0.0, 0.0], &[0.0, 0.0]).is_nan());
        assert!(reference::cosine_distance(&[0.0], &[1.0]).is_nan());
        // Squares beyond f32 do not overflow the kernel (it sums f32 in
        // f64): a vector is at distance 0 from itself, where pgvector's f32
        // sums give inf / inf = NaN.
        assert_eq!(Metric::Cosine.distance(&[3e38], &[3e38]), 0.0);
        // Orthogonal vectors are distance 1, not NaN.
        assert_eq!(Metric::Cosine.distance(&[1.0, 0.0], &[0.0, 1.0]), 1.0);
    }

    #[test]
    fn cosine_of_parallel_vectors_is_exactly_zero_and_near_parallel_ones_keep_their_order() {
        assert_eq!(Metric::Cosine.distance(&[1.0, 2.0], &[2.0, 4.0]), 0.0);
        assert_eq!(Metric::Cosine.distance(&[1.0, 1.0], &[1.0, 1.0]), 0.0);
        assert_eq!(Metric::Cosine.distance(&[0.3, -7.0, 2.5], &[0.6, -14.0, 5.0]), 0.0);
        let at = |angle: f32| Metric::Cosine.distance(&[1.0, 0.0, 0.0], &[angle.cos(), angle.sin(), 0.0]);
        let distances: Vec<f32> = [0.01, 0.02, 0.03, 0.04].into_iter().map(at).collect();
        assert!(distances.windows(2).all(|w| w[0] < w[1]), "{distances:?}");
        for (d, angle) in distances.iter().zip([0.01f64, 0.02, 0.03, 0.04]) {
            assert!((*d as f64 - (1.0 - angle.cos())).abs() < 1e-7, "{d} at {angle}");
        }
    }
}
