//! Extended RaBitQ codes (`quantization = rabitq`), 4 bits a dimension:
//! Gao & Long, "RaBitQ: Quantizing High-Dimensional Vectors with a
//! Theoretical Error Bound for Approximate Nearest Neighbor Search" (SIGMOD
//! 2024), and Gao et al., "Practical and Asymptotically Optimal
//! Quantization of High-Dimensional Vectors in Euclidean Space" (SIGMOD
//! 2025), whose multi-bit codes these are.
//!
//! **Encoding a segment.** Its rows' centroid `c` is taken out of each row
//! (`o_r = o - c`), which is then zero-padded to `p` dimensions (a multiple
//! of 64) and turned by one orthogonal rotation `P` ([`Rotation`]): `r =
//! P o_r`, `u = r / |r|`. The code is the grid point `x` (each `x_i` one of
//! `-7.5, -6.5, ..., 7.5`, stored as the nibble `x_i + 7.5`) whose direction
//! is nearest `u`'s: `x_i = clamp(floor(t u_i), -8, 7) + 0.5` for the scale
//! `t` that maximises `<x, u> / |x|`, searched on a grid. Beside the code
//! go three factors: `|r|²`, `|r| / <x, u>`, and the error factor below.
//!
//! **Estimating.** For any vector `y`, `<r, y> ≈ |r| <x, y> / <x, u>`:
//! RaBitQ's estimator, unbiased over the rotation. With `y = P (q - c)`:
//! L2 is `sqrt(|r|² + |q - c|² - 2 <r, y>)`. With `y = P q`: inner product
//! is `-(<c, q> + <r, y>)`, and cosine (rows and query normalised) `1 -
//! (<c, q> + <r, y>)`. The query's side is rotated once a search and
//! quantised to signed bytes (`127` at its largest element), so `<x, y>` is
//! an integer kernel over nibbles and bytes ([`dot_u4_i8`]): 32 dimensions
//! an AVX2 multiply-add.
//!
//! **The bound.** `|<r, y>_est - <r, y>| <= eps0 * |r| * |y| *
//! sqrt(1 - cos²) / cos / sqrt(p - 1)`, `cos = <x, u> / |x|`, with
//! probability that grows with `eps0` (the papers take 1.9). The third
//! factor is `|r| sqrt(1 - cos²) / cos / sqrt(p - 1)`;
//! [`RaBitQ::error_scale`] multiplies it by `|y|`. The error is close to
//! normal with that scale (the tests measure it), so `eps0` 1.9 holds 94%
//! of estimates and 3 holds 99.7%. At 4 bits `cos` is about 0.995, so the
//! scale is about a tenth of 1-bit RaBitQ's.
//!
//! A record is `p / 2` bytes of nibbles, laid out for the kernel (byte `j`
//! of each 32-byte block holds dimension `64 b + j` in its low nibble and
//! `64 b + 32 + j` in its high one), then the three factors as
//! little-endian `f32`: at 768 dimensions 396 bytes, 0.13 of a `vector`
//! row's 3,072.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::atomic::AtomicBool;

use super::common::{Cancelled, check, coded_query, coded_row, prefetch_bytes, supports};
use crate::distance::{Metric, inner_product};
use crate::element::{Row, Vectors};

/// The seed of the rotation every segment is written with; a file records
/// its own, so another seed is a new file, not a new format.
pub const SEED: u64 = 0x7261_6269_7471_3031;
/// The papers' multiplier of the error's scale in their bound.
pub const EPSILON0: f32 = 1.9;
/// Dimensions a 32-byte block of nibbles holds.
const BLOCK: usize = 64;
/// Sign flips and Hadamard transforms of the rotation.
const ROUNDS: usize = 4;
/// Bytes of the three factors after a record's code.
const FACTORS: usize = 12;

/// Dimensions after padding: a whole number of kernel blocks.
pub fn padded(dims: usize) -> usize {
    dims.next_multiple_of(BLOCK).max(BLOCK)
}

/// Bytes of one row's record.
pub fn record_bytes(dims: usize) -> usize {
    padded(dims) / 2 + FACTORS
}

/// One segment's codes: the rotation's seed, the centroid, and a record
/// per row, owned when built, borrowed from an index file when read.
#[derive(Debug, Clone, PartialEq)]
pub struct RaBitQ<'a> {
    metric: Metric,
    dims: usize,
    seed: u64,
    /// The rows' mean (of the normalised rows under cosine).
    centroid: Cow<'a, [f32]>,
    /// `rows * record_bytes(dims)` bytes.
    records: Cow<'a, [u8]>,
    /// Derived from the seed; boxed, so that the codes stay as small as
    /// sq8's beside the index file's other parts.
    rotation: Box<Rotation>,
    /// `P c`, padded: what an L2 query's `P (q - c)` takes from `P q`.
    rotated_centroid: Box<[f32]>,
}

/// The last query rotated on this thread (`P q`, normalised first under
/// cosine), with the seed it was rotated by. The segments of an index
/// share their seed, so a search that visits many rotates its query once,
/// and each segment takes its own centroid's side from it.
struct RotatedQuery {
    seed: u64,
    query: Vec<f32>,
    rotated: Vec<f32>,
}

thread_local! {
    static LAST_ROTATED: RefCell<Option<RotatedQuery>> = const { RefCell::new(None) };
}

impl<'a> RaBitQ<'a> {
    /// The codes of the rows of `dims` elements (floats or halves) in
    /// `vectors` under `metric`, a metric with codes ([`supports`]);
    /// `Cancelled` once `cancel` is set.
    pub fn encode(
        metric: Metric,
        dims: usize,
        vectors: &Vectors<'_>,
        cancel: &AtomicBool,
    ) -> Result<RaBitQ<'static>, Cancelled> {
        debug_assert!(supports(metric));
        let rows = vectors.rows(dims);
        let row = |r: usize| coded_row(metric, vectors.row(r, dims));
        let mut sum = vec![0f64; dims];
        for r in 0..rows {
            for (s, x) in sum.iter_mut().zip(row(r)).filter(|(_, x)| x.is_finite()) {
                *s += x as f64;
            }
        }
        let centroid: Vec<f32> = sum.iter().map(|s| (s / rows.max(1) as f64) as f32).collect();
        let rotation = Box::new(Rotation::new(SEED, padded(dims)));
        let (stride, half) = (record_bytes(dims), padded(dims) / 2);
        let mut records = vec![0u8; rows * stride];
        let (mut rotated, mut code) = (vec![0f32; padded(dims)], vec![0u8; padded(dims)]);
        for (r, record) in records.chunks_exact_mut(stride).enumerate() {
            check(cancel, r)?;
            rotated.fill(0.0);
            for ((y, x), c) in rotated.iter_mut().zip(row(r)).zip(&centroid) {
                *y = x - c;
            }
            rotation.apply(&mut rotated);
            let factors = quantize(&rotated, &mut code);
            pack(&code, &mut record[..half]);
            for (out, f) in record[half..].chunks_exact_mut(4).zip(factors) {
                out.copy_from_slice(&f.to_le_bytes());
            }
        }
        let rotated_centroid = rotate(&rotation, &centroid);
        Ok(RaBitQ {
            metric,
            dims,
            seed: SEED,
            centroid: Cow::Owned(centroid),
            records: Cow::Owned(records),
            rotation,
            rotated_centroid,
        })
    }

    /// Codes over arrays read from an index file.
    pub fn from_parts(
        metric: Metric,
        dims: usize,
        seed: u64,
        centroid: Cow<'a, [f32]>,
        records: Cow<'a, [u8]>,
    ) -> Result<Self, String> {
        if !supports(metric) {
            return Err(format!("codes for {metric:?}, which has none"));
        }
        if dims == 0 || centroid.len() != dims {
            return Err(format!("codes of {dims} dimensions with a centroid of {}", centroid.len()));
        }
        if !records.len().is_multiple_of(record_bytes(dims)) {
            return Err(format!("{} bytes of codes are not whole records of {}", records.len(), record_bytes(dims)));
        }
        let rotation = Box::new(Rotation::new(seed, padded(dims)));
        let rotated_centroid = rotate(&rotation, &centroid);
        Ok(RaBitQ { metric, dims, seed, centroid, records, rotation, rotated_centroid })
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn centroid(&self) -> &[f32] {
        &self.centroid
    }

    pub fn records(&self) -> &[u8] {
        &self.records
    }

    pub fn rows(&self) -> usize {
        self.records.len() / record_bytes(self.dims)
    }

    /// Bytes the codes take (what a search keeps resident).
    pub fn bytes(&self) -> usize {
        self.records.len() + 4 * self.dims + 8
    }

    pub fn is_borrowed(&self) -> bool {
        matches!(self.records, Cow::Borrowed(_))
    }

    /// The query's side of the estimates: `y` rotated and quantised.
    pub fn prepare(&self, query: Row<'_>) -> Prepared {
        let (q, zero) = coded_query(self.metric, self.dims, query);
        let mut y = self.rotated(&q);
        let (base, norm_sq) = if self.metric == Metric::L2 {
            // P (q - c) = P q - P c; the rotation keeps |q - c|.
            y.iter_mut().zip(self.rotated_centroid.iter()).for_each(|(y, c)| *y -= c);
            (0.0, q.iter().zip(self.centroid.iter()).map(|(x, c)| (x - c) * (x - c)).sum())
        } else {
            (inner_product(&q, &self.centroid), inner_product(&q, &q))
        };
        let largest = y.iter().fold(0f32, |m, x| m.max(x.abs()));
        let scale = if largest > 0.0 && largest.is_finite() { 127.0 / largest } else { 1.0 };
        let bytes: Vec<i8> = y.iter().map(|x| round((x * scale).clamp(-127.0, 127.0)) as i8).collect();
        let sum: i32 = bytes.iter().map(|b| *b as i32).sum();
        Prepared { bytes, unscale: 1.0 / scale, offset: 7.5 * sum as f32, base, norm_sq, zero }
    }

    /// `P q`, padded, for `q` of `dims` elements: the last query's when it
    /// is the same query under the same seed ([`RotatedQuery`]).
    fn rotated(&self, q: &[f32]) -> Vec<f32> {
        LAST_ROTATED.with_borrow_mut(|last| {
            if let Some(last) = last.as_ref().filter(|last| last.seed == self.seed && last.query == q) {
                return last.rotated.clone();
            }
            let rotated = rotate(&self.rotation, q);
            *last = Some(RotatedQuery { seed: self.seed, query: q.to_vec(), rotated: rotated.to_vec() });
            rotated.into_vec()
        })
    }

    fn record(&self, row: u32) -> &[u8] {
        let stride = record_bytes(self.dims);
        &self.records[row as usize * stride..(row as usize + 1) * stride]
    }

    /// Factor `i` (0: `|r|²`, 1: `|r| / <x, u>`, 2: the error factor) of a
    /// record.
    #[inline]
    fn factor(record: &[u8], i: usize) -> f32 {
        let at = record.len() - FACTORS + 4 * i;
        f32::from_le_bytes(record[at..at + 4].try_into().expect("4 bytes"))
    }

    /// The estimate of `<r, y>` for `row` (see the module's notes).
    #[inline]
    fn inner(&self, query: &Prepared, record: &[u8]) -> f32 {
        let code = &record[..record.len() - FACTORS];
        let xy = (dot_u4_i8(code, &query.bytes) as f32 - query.offset) * query.unscale;
        Self::factor(record, 1) * xy
    }

    /// The estimated distance from the query to `row`, under the metric.
    #[inline]
    pub fn distance(&self, query: &Prepared, row: u32) -> f32 {
        let record = self.record(row);
        let inner = self.inner(query, record);
        match self.metric {
            Metric::InnerProduct => -(query.base + inner),
            // A zero query has no direction: NaN, as the exact distance.
            Metric::Cosine if query.zero => f32::NAN,
            Metric::Cosine => 1.0 - (query.base + inner),
            _ => (Self::factor(record, 0) + query.norm_sq - 2.0 * inner).max(0.0).sqrt(),
        }
    }

    /// The scale of the error of the estimated inner product behind
    /// `row`'s distance (`<r, y>`; an inner product's and a cosine's
    /// distance err by as much, a squared L2 distance by twice it): the
    /// estimate is within `eps0` times it with the probability the papers
    /// give, a normal's (94% at [`EPSILON0`], 99.7% at 3).
    pub fn error_scale(&self, query: &Prepared, row: u32) -> f32 {
        Self::factor(self.record(row), 2) * query.norm_sq.sqrt()
    }

    /// Asks the CPU for `row`'s record, for a distance computed soon.
    #[inline]
    pub fn prefetch(&self, row: u32) {
        prefetch_bytes(self.record(row));
    }
}

/// The query's side of a segment's estimates ([`RaBitQ::prepare`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// `y` rotated, times `127 / max |y_i|`, rounded.
    bytes: Vec<i8>,
    /// `max |y_i| / 127`.
    unscale: f32,
    /// `7.5 * sum(bytes)`: the nibbles' offset from the grid's points.
    offset: f32,
    /// `<c, q>` (inner product and cosine), 0 under L2.
    base: f32,
    /// `|y|²`.
    norm_sq: f32,
    /// All zeros (or not finite): no direction for cosine.
    zero: bool,
}

/// The grid code of `r` (rotated, padded; `code` as long) and its factors.
fn quantize(r: &[f32], code: &mut [u8]) -> [f32; 3] {
    let norm_sq: f64 = r.iter().map(|x| (*x as f64) * (*x as f64)).sum();
    let largest = r.iter().fold(0f32, |m, x| m.max(x.abs()));
    if norm_sq == 0.0 || !norm_sq.is_finite() {
        // The centroid itself: every estimate is the centroid's.
        code.fill(8);
        return [0.0; 3];
    }
    // At t = 8 / largest the largest element takes the top level; the best
    // t clips a few outliers, so the grid reaches past it.
    let top = 8.0 / largest;
    let coarse = |k: usize| top * (0.25 + 1.75 * k as f32 / 23.0);
    let mut best = (0..24).map(coarse).map(|t| (fit(r, t), t)).max_by(|a, b| a.0.total_cmp(&b.0)).expect("24 scales");
    let width = top * 1.75 / 23.0;
    for k in 0..16 {
        let t = best.1 - width + 2.0 * width * k as f32 / 15.0;
        let f = fit(r, t);
        if f > best.0 {
            best = (f, t);
        }
    }
    let t = best.1;
    let (mut xr, mut xx) = (0f64, 0f64);
    for (c, x) in code.iter_mut().zip(r) {
        let l = level(t, *x);
        xr += l as f64 * *x as f64;
        xx += l as f64 * l as f64;
        *c = (l + 7.5) as u8;
    }
    let r_norm = norm_sq.sqrt();
    let x_dot_u = xr / r_norm;
    let cos = x_dot_u / xx.sqrt();
    let error = r_norm * (1.0 - cos * cos).max(0.0).sqrt() / cos / ((r.len() - 1) as f64).sqrt();
    [norm_sq as f32, (r_norm / x_dot_u) as f32, error as f32]
}

/// The grid's level of `x` at scale `t`: `t x` rounded to the nearest of
/// `-7.5, -6.5, ..., 7.5`.
#[inline]
fn level(t: f32, x: f32) -> f32 {
    round((t * x + 7.5).clamp(0.0, 15.0)) - 7.5
}

/// `x` (of magnitude below 2^22) rounded to the nearest integer, ties to
/// even: 1.5 x 2^23 added and taken away (past 2^23 an `f32` holds only
/// integers), which compiles to vector instructions where `f32::round`,
/// `f32::floor` or a cast would call libm or saturate lane by lane.
#[inline]
fn round(x: f32) -> f32 {
    const ROUND: f32 = 12_582_912.0;
    (x + ROUND) - ROUND
}

/// `x` (up to `padded` elements, zeros after them) turned by `rotation`.
fn rotate(rotation: &Rotation, x: &[f32]) -> Box<[f32]> {
    let mut y = vec![0f32; rotation.padded];
    y[..x.len()].copy_from_slice(x);
    rotation.apply(&mut y);
    y.into_boxed_slice()
}

/// `<x(t), r> / |x(t)|` for the grid code `x(t)` at scale `t`: the cosine
/// between the code and `r`, times `|r|`, which the scale search
/// maximises. Summed in eight lanes (`r` is whole kernel blocks), so that
/// it vectorises.
fn fit(r: &[f32], t: f32) -> f32 {
    const LANES: usize = 8;
    let (mut xr, mut xx) = ([0f32; LANES], [0f32; LANES]);
    for chunk in r.chunks_exact(LANES) {
        for ((x, xr), xx) in chunk.iter().zip(&mut xr).zip(&mut xx) {
            let l = level(t, *x);
            *xr += l * x;
            *xx += l * l;
        }
    }
    xr.iter().sum::<f32>() / xx.iter().sum::<f32>().sqrt()
}

/// Packs nibbles (`code`, one a dimension) into the kernel's layout.
fn pack(code: &[u8], out: &mut [u8]) {
    for (block, bytes) in code.chunks_exact(BLOCK).zip(out.chunks_exact_mut(BLOCK / 2)) {
        let (low, high) = block.split_at(BLOCK / 2);
        for ((b, l), h) in bytes.iter_mut().zip(low).zip(high) {
            *b = l | (h << 4);
        }
    }
}

/// An orthogonal rotation of `padded` dimensions, fixed by a seed:
/// [`ROUNDS`] times, flip the sign of each element by a coin, then apply
/// the normalised Walsh-Hadamard transform to the largest power-of-two
/// block, alternately at the front and at the back (the same block when
/// `padded` is a power of two). Each step is orthogonal, so the rotation is;
/// its cost is `O(p log p)` against a dense matrix's `p²`.
///
/// The coins are the top bits of SplitMix64's outputs from the seed, one
/// output a coin, round by round, dimension by dimension.
#[derive(Debug, Clone, PartialEq)]
struct Rotation {
    padded: usize,
    block: usize,
    /// `ROUNDS * padded` signs, `±1`.
    signs: Vec<f32>,
}

impl Rotation {
    fn new(seed: u64, padded: usize) -> Self {
        let mut state = seed;
        let signs = (0..ROUNDS * padded).map(|_| if splitmix64(&mut state) >> 63 == 1 { -1.0 } else { 1.0 }).collect();
        Rotation { padded, block: 1 << padded.ilog2(), signs }
    }

    fn apply(&self, x: &mut [f32]) {
        debug_assert_eq!(x.len(), self.padded);
        let scale = 1.0 / (self.block as f32).sqrt();
        for (round, signs) in self.signs.chunks_exact(self.padded).enumerate() {
            x.iter_mut().zip(signs).for_each(|(v, s)| *v *= s);
            let start = if round % 2 == 0 { 0 } else { self.padded - self.block };
            let block = &mut x[start..start + self.block];
            walsh_hadamard(block);
            block.iter_mut().for_each(|v| *v *= scale);
        }
    }
}

/// The unnormalised fast Walsh-Hadamard transform, in place (a power of
/// two long).
fn walsh_hadamard(x: &mut [f32]) {
    let mut h = 1;
    while h < x.len() {
        for pair in x.chunks_exact_mut(2 * h) {
            let (a, b) = pair.split_at_mut(h);
            for (a, b) in a.iter_mut().zip(b) {
                (*a, *b) = (*a + *b, *a - *b);
            }
        }
        h *= 2;
    }
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `sum_i x_i q_i` for nibbles `x` in the packed layout (`code`, half as
/// many bytes as `q`, whole blocks) and signed bytes `q`.
#[inline]
pub fn dot_u4_i8(code: &[u8], q: &[i8]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    if x86::usable() {
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { x86::dot_u4_i8(code, q) };
    }
    dot_u4_i8_portable(code, q)
}

fn dot_u4_i8_portable(code: &[u8], q: &[i8]) -> i32 {
    let mut sum = 0i32;
    for (bytes, q) in code.chunks_exact(BLOCK / 2).zip(q.chunks_exact(BLOCK)) {
        let (low, high) = q.split_at(BLOCK / 2);
        for ((b, l), h) in bytes.iter().zip(low).zip(high) {
            sum += (b & 15) as i32 * *l as i32 + (b >> 4) as i32 * *h as i32;
        }
    }
    sum
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use crate::quant::rabitq::BLOCK;

    pub fn usable() -> bool {
        is_x86_feature_detected!("avx2")
    }

    #[target_feature(enable = "avx2")]
    pub unsafe fn dot_u4_i8(code: &[u8], q: &[i8]) -> i32 {
        let blocks = (code.len() / (BLOCK / 2)).min(q.len() / BLOCK);
        let (nibble, ones) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi16(1));
        let mut acc = _mm256_setzero_si256();
        // SAFETY: block b reads code[32b..32b + 32] and q[64b..64b + 64],
        // within both slices.
        unsafe {
            for b in 0..blocks {
                let c = _mm256_loadu_si256(code.as_ptr().add(b * BLOCK / 2).cast());
                let low = _mm256_and_si256(c, nibble);
                let high = _mm256_and_si256(_mm256_srli_epi16::<4>(c), nibble);
                let q_low = _mm256_loadu_si256(q.as_ptr().add(b * BLOCK).cast());
                let q_high = _mm256_loadu_si256(q.as_ptr().add(b * BLOCK + BLOCK / 2).cast());
                // Each 16-bit lane is at most 4 * 15 * 127: no saturation.
                let pairs = _mm256_add_epi16(_mm256_maddubs_epi16(low, q_low), _mm256_maddubs_epi16(high, q_high));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
            }
        }
        let mut lanes = [0i32; 8];
        // SAFETY: eight lanes into eight.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), acc) };
        lanes.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::synthetic::{Rng, gaussian_mixture};

    fn encode(metric: Metric, dims: usize, vectors: &Vectors<'_>) -> RaBitQ<'static> {
        RaBitQ::encode(metric, dims, vectors, &AtomicBool::new(false)).expect("not cancelled")
    }

    #[test]
    fn the_kernel_agrees_with_the_loop() {
        let mut rng = Rng::new(3);
        for blocks in [1, 2, 3, 12, 16] {
            let code: Vec<u8> = (0..blocks * 32).map(|_| rng.next_u64() as u8).collect();
            let q: Vec<i8> = (0..blocks * 64).map(|_| (rng.next_u64() % 255) as i8).collect();
            assert_eq!(dot_u4_i8(&code, &q), dot_u4_i8_portable(&code, &q), "{blocks} blocks");
        }
        // The extremes: every nibble 15, every byte -127 or 127.
        let code = vec![0xFF; 32];
        for b in [127i8, -127] {
            assert_eq!(dot_u4_i8(&code, &[b; 64]), 64 * 15 * b as i32);
        }
    }

    #[test]
    fn packing_puts_each_nibble_where_the_kernel_reads_it() {
        let code: Vec<u8> = (0..128).map(|i| (i % 16) as u8).collect();
        let mut packed = vec![0u8; 64];
        pack(&code, &mut packed);
        for i in 0..128 {
            let mut q = vec![0i8; 128];
            q[i] = 1;
            assert_eq!(dot_u4_i8(&packed, &q), code[i] as i32, "dimension {i}");
        }
    }

    #[test]
    fn the_rotation_keeps_lengths_and_angles() {
        let mut rng = Rng::new(5);
        for dims in [1, 64, 100, 128, 192, 768, 1000, 1536] {
            let rotation = Rotation::new(SEED, padded(dims));
            let (mut a, mut b) = (rng.vector(padded(dims)), rng.vector(padded(dims)));
            let (aa, ab) = (inner_product(&a, &a), inner_product(&a, &b));
            rotation.apply(&mut a);
            rotation.apply(&mut b);
            assert!((inner_product(&a, &a) - aa).abs() < 1e-4 * aa, "{dims}: length");
            assert!((inner_product(&a, &b) - ab).abs() < 1e-4 * aa, "{dims}: angle");
        }
    }

    #[test]
    fn the_rotation_spreads_a_spike() {
        // A row on one axis ends with no element holding most of it: what
        // makes one grid of levels fit every dimension.
        for dims in [100, 768, 1536] {
            let rotation = Rotation::new(SEED, padded(dims));
            for axis in [0, dims / 2, dims - 1] {
                let mut x = vec![0f32; padded(dims)];
                x[axis] = 1.0;
                rotation.apply(&mut x);
                let largest = x.iter().fold(0f32, |m, v| m.max(v.abs()));
                // A Gaussian's largest of p is near 3.5 / sqrt(p).
                assert!(largest < 5.0 / (padded(dims) as f32).sqrt(), "{dims}, axis {axis}: {largest}");
            }
        }
    }

    /// Rows of a Gaussian mixture and queries near them, with every exact
    /// inner product `<r, y>` beside its estimate and its error's scale.
    fn estimates(metric: Metric, dims: usize) -> Vec<(f32, f32, f32)> {
        let rows = 1000;
        let data = gaussian_mixture(rows, dims, 10, 0.3, 7);
        let codes = encode(metric, dims, &Vectors::F32(Cow::Borrowed(&data)));
        assert_eq!(codes.rows(), rows);
        let mut rng = Rng::new(13);
        let mut out = Vec::new();
        for _ in 0..20 {
            let base = rng.next_u64() as usize % rows;
            let query: Vec<f32> =
                data[base * dims..(base + 1) * dims].iter().map(|x| x + 0.3 * rng.next_gaussian()).collect();
            let prepared = codes.prepare(Row::F32(&query));
            for r in 0..rows {
                let row = &data[r * dims..(r + 1) * dims];
                let exact = metric.distance(&query, row);
                let estimate = codes.distance(&prepared, r as u32);
                // Back from the distance to the inner product behind it.
                let (exact_inner, estimated_inner) = match metric {
                    Metric::L2 => {
                        let add = RaBitQ::factor(codes.record(r as u32), 0) + prepared.norm_sq;
                        ((add - exact * exact) / 2.0, (add - estimate * estimate) / 2.0)
                    }
                    _ => (-exact, -estimate),
                };
                out.push((exact_inner, estimated_inner, codes.error_scale(&prepared, r as u32)));
            }
        }
        out
    }

    /// The share of estimates within `eps0` of their error's scale, and
    /// the mean error in that scale.
    fn within(all: &[(f32, f32, f32)], eps0: f32, slack: f32) -> f64 {
        let n = all.iter().filter(|(exact, est, sigma)| (exact - est).abs() <= eps0 * sigma + slack).count();
        n as f64 / all.len() as f64
    }

    #[test]
    fn estimates_err_as_the_bound_says() {
        // The error is near normal with the scale the factor gives: 94% of
        // estimates within 1.9 of it (the papers' eps0), 99.7% within 3,
        // and a mean of 0.8 of it (so the bound is not loose either).
        for (metric, dims) in [(Metric::InnerProduct, 64), (Metric::InnerProduct, 768), (Metric::Cosine, 256)] {
            let all = estimates(metric, dims);
            let (at_eps0, at_3) = (within(&all, EPSILON0, 0.0), within(&all, 3.0, 0.0));
            assert!(at_eps0 >= 0.92 && at_3 >= 0.995, "{metric:?} {dims}: {at_eps0} and {at_3} within");
            let mean =
                all.iter().map(|(e, est, sigma)| ((e - est) / sigma).abs() as f64).sum::<f64>() / all.len() as f64;
            assert!((0.6..1.0).contains(&mean), "{metric:?} {dims}: mean error {mean} of the scale");
        }
        // L2's inner product comes back through a square root, whose
        // rounding near zero distances the scale does not cover.
        let all = estimates(Metric::L2, 768);
        assert!(within(&all, 3.0, 1e-3) >= 0.995, "L2");
    }

    #[test]
    fn the_bound_is_tight_at_high_dimensions() {
        // The error's scale shrinks as 1 / sqrt(p): at 768 dimensions a
        // cosine estimate's is under 0.005.
        let all = estimates(Metric::Cosine, 768);
        let mean = all.iter().map(|e| e.2 as f64).sum::<f64>() / all.len() as f64;
        assert!(mean < 0.005, "mean scale {mean}");
    }

    #[test]
    fn half_rows_code_as_their_floats_do() {
        let data = gaussian_mixture(300, 96, 5, 0.3, 2);
        let halves: Vec<crate::element::f16> = data.iter().map(|x| crate::element::f16::from_f32(*x)).collect();
        let widened: Vec<f32> = halves.iter().map(|h| h.to_f32()).collect();
        let from_halves = encode(Metric::L2, 96, &Vectors::F16(Cow::Borrowed(&halves)));
        let from_floats = encode(Metric::L2, 96, &Vectors::F32(Cow::Borrowed(&widened)));
        assert_eq!(from_halves, from_floats);
    }

    #[test]
    fn segments_share_a_rotated_query() {
        let mut rng = Rng::new(21);
        for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
            let [a, b] =
                [5, 6].map(|seed| encode(metric, 96, &Vectors::F32(gaussian_mixture(50, 96, 3, 0.3, seed).into())));
            let (q, other) = (rng.vector(96), rng.vector(96));
            a.prepare(Row::F32(&other));
            let rotated_for_b = b.prepare(Row::F32(&q));
            a.prepare(Row::F32(&q));
            let reused_from_a = b.prepare(Row::F32(&q));
            assert_eq!(reused_from_a, rotated_for_b, "{metric:?}");
        }
    }

    #[test]
    fn rows_at_the_centroid_and_zero_queries() {
        // Every row equal: each is the centroid, its distance exact.
        let data = [1.0f32, 2.0, 1.0, 2.0];
        let codes = encode(Metric::L2, 2, &Vectors::F32(Cow::Borrowed(&data)));
        let prepared = codes.prepare(Row::F32(&[4.0, 6.0]));
        assert!((codes.distance(&prepared, 0) - 5.0).abs() < 1e-5);
        assert_eq!(codes.error_scale(&prepared, 1), 0.0);
        let cosine = encode(Metric::Cosine, 2, &Vectors::F32(Cow::Borrowed(&[0.0, 0.0, 1.0, 0.5])));
        assert!(cosine.distance(&cosine.prepare(Row::F32(&[0.0, 0.0])), 1).is_nan(), "a zero query");
        assert!(cosine.distance(&cosine.prepare(Row::F32(&[1.0, 0.0])), 0).is_finite(), "a zero row");
    }

    #[test]
    fn parts_that_do_not_add_up_are_refused() {
        let data = gaussian_mixture(10, 8, 2, 0.3, 2);
        let codes = encode(Metric::L2, 8, &Vectors::F32(Cow::Borrowed(&data)));
        let part = |metric, centroid: &[f32], records: &[u8]| {
            RaBitQ::from_parts(metric, 8, SEED, Cow::Owned(centroid.to_vec()), Cow::Owned(records.to_vec()))
        };
        assert_eq!(part(Metric::L2, &codes.centroid, &codes.records).unwrap(), codes);
        assert!(part(Metric::L2, &codes.centroid[..7], &codes.records).is_err());
        assert!(part(Metric::L2, &codes.centroid, &codes.records[1..]).is_err());
        assert!(part(Metric::L1, &codes.centroid, &codes.records).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Any rows code, and a row's estimated distance to itself is
        /// within the bound of zero; the codes read back from their parts
        /// are the same codes.
        #[test]
        fn any_rows_code_and_find_themselves(
            dims in 1usize..200,
            rows in 1usize..20,
            seed in any::<u64>(),
        ) {
            let mut rng = Rng::new(seed);
            let data: Vec<f32> = (0..rows * dims).map(|_| 10.0 * rng.next_gaussian()).collect();
            let codes = encode(Metric::L2, dims, &Vectors::F32(Cow::Borrowed(&data)));
            let again = RaBitQ::from_parts(Metric::L2, dims, codes.seed(), codes.centroid.clone(), codes.records.clone());
            prop_assert_eq!(&again.unwrap(), &codes);
            for r in 0..rows {
                let row = &data[r * dims..(r + 1) * dims];
                let prepared = codes.prepare(Row::F32(row));
                let d = codes.distance(&prepared, r as u32);
                prop_assert!(d.is_finite());
                // d² errs by twice the inner product's error, plus the
                // query's rounding.
                let slack = 2.0 * 4.0 * codes.error_scale(&prepared, r as u32) + 0.02 * prepared.norm_sq + 1e-3;
                prop_assert!(d * d <= slack, "row {} at {} with slack {}", r, d, slack);
            }
        }
    }
}
