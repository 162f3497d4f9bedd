//! Scalar 8-bit codes (`quantization = sq8`).
//!
//! Each dimension `i` of a segment has its range `[low_i, low_i + 255 *
//! step_i]` (the least and greatest value its rows hold there), and a row
//! `o` is kept as one byte a dimension, `c_i = round((o_i - low_i) /
//! step_i)`: a quarter of a `vector` row's bytes, half of a `halfvec`
//! row's. The row the code stands for, `ô_i = low_i + step_i * c_i`, is
//! within half a step of `o` in every dimension.
//!
//! Every metric with codes comes down to one inner product with the code:
//! `<q, ô> = <q, low> + sum_i (q_i step_i) c_i`, the query's side
//! (`q_i step_i` and `<q, low>`) computed once a search, the sum a
//! byte-to-float kernel ([`dot_u8`]). Inner product is `-<q, ô>`; L2
//! is `sqrt(|q|² - 2 <q, ô> + |ô|²)`, `|ô|²` kept beside each code; cosine
//! codes the normalised rows and measures the angle to the code's own
//! direction, `1 - <q, ô> / (|q| |ô|)`.

use std::borrow::Cow;
use std::sync::atomic::AtomicBool;

use super::common::{Cancelled, check, coded_query, coded_row, prefetch_bytes, supports};
use crate::distance::{Metric, inner_product};
use crate::element::{Row, Vectors};

/// Levels of a code byte.
const LEVELS: f32 = 255.0;

/// One segment's codes: each dimension's range, and a record per row (its
/// code, padded to 4 bytes, then `|ô|²` as a little-endian `f32`), owned
/// when built, borrowed from an index file when read.
#[derive(Debug, Clone, PartialEq)]
pub struct Sq8<'a> {
    metric: Metric,
    dims: usize,
    /// Per dimension, the least value and the step of a level.
    low: Cow<'a, [f32]>,
    step: Cow<'a, [f32]>,
    /// `rows * record_bytes(dims)` bytes.
    records: Cow<'a, [u8]>,
}

/// Bytes of one row's record.
pub fn record_bytes(dims: usize) -> usize {
    dims.next_multiple_of(4) + 4
}

impl<'a> Sq8<'a> {
    /// The codes of the rows of `dims` elements (floats or halves) in
    /// `vectors` under `metric`, a metric with codes ([`supports`]);
    /// `Cancelled` once `cancel` is set.
    pub fn encode(
        metric: Metric,
        dims: usize,
        vectors: &Vectors<'_>,
        cancel: &AtomicBool,
    ) -> Result<Sq8<'static>, Cancelled> {
        debug_assert!(supports(metric) && dims > 0);
        let rows = vectors.rows(dims);
        let row = |r: usize| coded_row(metric, vectors.row(r, dims));
        let (mut low, mut high) = (vec![f32::INFINITY; dims], vec![f32::NEG_INFINITY; dims]);
        for r in 0..rows {
            for (i, x) in row(r).into_iter().enumerate().filter(|(_, x)| x.is_finite()) {
                (low[i], high[i]) = (low[i].min(x), high[i].max(x));
            }
        }
        let step: Vec<f32> = low
            .iter_mut()
            .zip(&high)
            .map(|(l, h)| {
                if !l.is_finite() {
                    *l = 0.0;
                }
                if h > l { (h - *l) / LEVELS } else { 1.0 }
            })
            .collect();
        let stride = record_bytes(dims);
        let mut records = vec![0u8; rows * stride];
        for (r, record) in records.chunks_exact_mut(stride).enumerate() {
            check(cancel, r)?;
            let mut decoded_sq = 0.0f32;
            for (i, x) in row(r).into_iter().enumerate() {
                let level = ((x - low[i]) / step[i]).round().clamp(0.0, LEVELS);
                record[i] = level as u8;
                let decoded = low[i] + step[i] * level;
                decoded_sq += decoded * decoded;
            }
            record[stride - 4..].copy_from_slice(&decoded_sq.to_le_bytes());
        }
        Ok(Sq8 { metric, dims, low: Cow::Owned(low), step: Cow::Owned(step), records: Cow::Owned(records) })
    }

    /// Codes over arrays read from an index file.
    pub fn from_parts(
        metric: Metric,
        dims: usize,
        low: Cow<'a, [f32]>,
        step: Cow<'a, [f32]>,
        records: Cow<'a, [u8]>,
    ) -> Result<Self, String> {
        if !supports(metric) {
            return Err(format!("codes for {metric:?}, which has none"));
        }
        if dims == 0 || low.len() != dims || step.len() != dims {
            return Err(format!("codes of {dims} dimensions with {} and {} ranges", low.len(), step.len()));
        }
        if !records.len().is_multiple_of(record_bytes(dims)) {
            return Err(format!("{} bytes of codes are not whole records of {}", records.len(), record_bytes(dims)));
        }
        Ok(Sq8 { metric, dims, low, step, records })
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    pub fn low(&self) -> &[f32] {
        &self.low
    }

    pub fn step(&self) -> &[f32] {
        &self.step
    }

    pub fn records(&self) -> &[u8] {
        &self.records
    }

    pub fn rows(&self) -> usize {
        self.records.len() / record_bytes(self.dims)
    }

    /// Bytes the codes take (what a search keeps resident).
    pub fn bytes(&self) -> usize {
        self.records.len() + 8 * self.dims
    }

    pub fn is_borrowed(&self) -> bool {
        matches!(self.records, Cow::Borrowed(_))
    }

    /// The query's side of the estimates.
    pub fn prepare(&self, query: Row<'_>) -> Prepared {
        let (q, zero) = coded_query(self.metric, self.dims, query);
        Prepared {
            scaled: q.iter().zip(self.step.iter()).map(|(x, s)| x * s).collect(),
            base: inner_product(&q, &self.low),
            norm_sq: inner_product(&q, &q),
            zero,
        }
    }

    fn record(&self, row: u32) -> &[u8] {
        let stride = record_bytes(self.dims);
        &self.records[row as usize * stride..(row as usize + 1) * stride]
    }

    /// The distance from the query to `row`'s code, under the metric.
    #[inline]
    pub fn distance(&self, query: &Prepared, row: u32) -> f32 {
        let record = self.record(row);
        let inner = query.base + dot_u8(&query.scaled, &record[..self.dims]);
        let decoded_sq = || f32::from_le_bytes(record[record.len() - 4..].try_into().expect("4 bytes"));
        match self.metric {
            Metric::InnerProduct => -inner,
            // A zero query has no direction: NaN, as the exact distance.
            Metric::Cosine if query.zero => f32::NAN,
            // The code of a normalised row is not of length 1: rounding
            // each dimension moves its length by about as much as its
            // direction, and where neighbours lie close (a few dimensions,
            // many rows) that error in length would outweigh the angles
            // between them. So the angle is taken from the code's own
            // direction.
            Metric::Cosine => 1.0 - inner / decoded_sq().sqrt(),
            _ => (query.norm_sq - 2.0 * inner + decoded_sq()).max(0.0).sqrt(),
        }
    }

    /// Asks the CPU for `row`'s record, for a distance computed soon: the
    /// whole of it, a quarter of a row's lines.
    #[inline]
    pub fn prefetch(&self, row: u32) {
        prefetch_bytes(self.record(row));
    }
}

/// The query's side of a segment's estimates ([`Sq8::prepare`]).
#[derive(Debug, Clone)]
pub struct Prepared {
    /// `q_i * step_i` (of the normalised query under cosine).
    scaled: Vec<f32>,
    /// `<q, low>`.
    base: f32,
    /// `|q|²`.
    norm_sq: f32,
    /// All zeros (or not finite): no direction for cosine.
    zero: bool,
}

/// `sum_i a_i * c_i` for floats `a` and bytes `c` of one length.
#[inline]
pub fn dot_u8(a: &[f32], c: &[u8]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if x86::usable() {
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { x86::dot_u8(a, c) };
    }
    dot_u8_portable(a, c)
}

fn dot_u8_portable(a: &[f32], c: &[u8]) -> f32 {
    a.iter().zip(c).map(|(x, c)| x * *c as f32).sum()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    pub fn usable() -> bool {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }

    /// Eight bytes of `c` from `i`, widened to floats.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn load(c: &[u8], i: usize) -> __m256 {
        // SAFETY: the caller reads within the slice (i + 8 <= len).
        unsafe { _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(c.as_ptr().add(i).cast()))) }
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_u8(a: &[f32], c: &[u8]) -> f32 {
        let n = a.len().min(c.len());
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut i = 0;
        // SAFETY: every load reads 8 or 16 elements below `n`, within both
        // slices.
        unsafe {
            while i + 16 <= n {
                acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a.as_ptr().add(i)), load(c, i), acc0);
                acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a.as_ptr().add(i + 8)), load(c, i + 8), acc1);
                i += 16;
            }
            if i + 8 <= n {
                acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a.as_ptr().add(i)), load(c, i), acc0);
                i += 8;
            }
        }
        let mut lanes = [0f32; 8];
        // SAFETY: eight floats into eight.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), _mm256_add_ps(acc0, acc1)) };
        let tail: f32 = a[i..n].iter().zip(&c[i..n]).map(|(x, c)| x * *c as f32).sum();
        lanes.iter().sum::<f32>() + tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{Rng, gaussian_mixture};

    fn encode(metric: Metric, dims: usize, vectors: &Vectors<'_>) -> Sq8<'static> {
        Sq8::encode(metric, dims, vectors, &AtomicBool::new(false)).expect("not cancelled")
    }

    #[test]
    fn the_kernel_agrees_with_the_loop() {
        let mut rng = Rng::new(1);
        for n in [0, 1, 7, 8, 15, 16, 17, 100, 768] {
            let a = rng.vector(n);
            let c: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            let (got, want) = (dot_u8(&a, &c), dot_u8_portable(&a, &c));
            assert!((got - want).abs() <= 1e-4 * want.abs().max(1.0), "{n}: {got} against {want}");
        }
    }

    /// The largest error of the estimated distances against the exact ones,
    /// relative to the distances' spread, over queries near rows.
    fn worst_error(metric: Metric, dims: usize) -> f32 {
        let rows = 2000;
        let data = gaussian_mixture(rows, dims, 20, 0.3, 5);
        let codes = encode(metric, dims, &Vectors::F32(Cow::Borrowed(&data)));
        assert_eq!(codes.rows(), rows);
        let mut rng = Rng::new(11);
        let mut worst = 0.0f32;
        for _ in 0..10 {
            let base = rng.next_u64() as usize % rows;
            let query: Vec<f32> =
                data[base * dims..(base + 1) * dims].iter().map(|x| x + 0.1 * rng.next_gaussian()).collect();
            let prepared = codes.prepare(Row::F32(&query));
            let exact: Vec<f32> = (0..rows).map(|r| metric.distance(&query, &data[r * dims..(r + 1) * dims])).collect();
            let (low, high) = exact.iter().fold((f32::MAX, f32::MIN), |(l, h), d| (l.min(*d), h.max(*d)));
            for (r, d) in exact.iter().enumerate() {
                worst = worst.max((codes.distance(&prepared, r as u32) - d).abs() / (high - low));
            }
        }
        worst
    }

    #[test]
    fn estimates_are_within_a_small_share_of_the_spread() {
        for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
            for dims in [16, 100, 768] {
                let error = worst_error(metric, dims);
                assert!(error < 0.01, "{metric:?} {dims}: error {error} of the spread");
            }
        }
    }

    #[test]
    fn half_rows_code_as_their_floats_do() {
        let data = gaussian_mixture(300, 32, 5, 0.3, 2);
        let halves: Vec<crate::element::f16> = data.iter().map(|x| crate::element::f16::from_f32(*x)).collect();
        let widened: Vec<f32> = halves.iter().map(|h| h.to_f32()).collect();
        let from_halves = encode(Metric::L2, 32, &Vectors::F16(Cow::Borrowed(&halves)));
        let from_floats = encode(Metric::L2, 32, &Vectors::F32(Cow::Borrowed(&widened)));
        assert_eq!(from_halves, from_floats);
    }

    #[test]
    fn constant_dimensions_and_zero_rows_are_coded() {
        // Dimension 0 holds one value; row 0 is all zeros (cosine: NaN).
        let data = [1.0, 0.0, 1.0, 0.5, 1.0, -2.0];
        let data_zero = [0.0, 0.0, 1.0, 0.5, 1.0, -2.0];
        let codes = encode(Metric::L2, 2, &Vectors::F32(Cow::Borrowed(&data)));
        let prepared = codes.prepare(Row::F32(&[1.0, 0.5]));
        assert!(codes.distance(&prepared, 1).abs() < 1e-6);
        assert!((codes.distance(&prepared, 2) - 2.5).abs() < 0.02);
        let cosine = encode(Metric::Cosine, 2, &Vectors::F32(Cow::Borrowed(&data_zero)));
        assert!(cosine.distance(&cosine.prepare(Row::F32(&[0.0, 0.0])), 1).is_nan(), "a zero query");
        assert!(cosine.distance(&cosine.prepare(Row::F32(&[1.0, 0.0])), 1).is_finite());
    }

    #[test]
    fn parts_that_do_not_add_up_are_refused() {
        let data = gaussian_mixture(10, 8, 2, 0.3, 2);
        let codes = encode(Metric::L2, 8, &Vectors::F32(Cow::Borrowed(&data)));
        let part = |low: &[f32], records: &[u8]| {
            Sq8::from_parts(
                Metric::L2,
                8,
                Cow::Owned(low.to_vec()),
                Cow::Owned(codes.step.to_vec()),
                Cow::Owned(records.to_vec()),
            )
        };
        assert_eq!(part(&codes.low, &codes.records).unwrap(), codes);
        assert!(part(&codes.low[..7], &codes.records).is_err());
        assert!(part(&codes.low, &codes.records[1..]).is_err());
        assert!(Sq8::from_parts(Metric::L1, 8, codes.low.clone(), codes.step.clone(), codes.records.clone()).is_err());
    }
}
