//! Codes of a segment's rows: what a graph search traverses instead of the
//! rows, which it then reads only to re-rank what it found.
//!
//! Two kinds, chosen by the index's reloption `quantization`:
//! - [`sq8`]: scalar 8-bit codes, one byte a dimension over the segment's
//!   per-dimension range. 0.25 of a `vector` row's bytes.
//! - [`rabitq`]: extended RaBitQ, 4 bits a dimension of the rotated,
//!   centred row plus three factors, with an error bound on each estimate.
//!   0.13 of a `vector` row's bytes at 768 dimensions.
//!
//! Unset, it is RaBitQ from [`RABITQ_FROM_DIMS`] dimensions and sq8 below:
//! RaBitQ's error shrinks as dimensions grow (its bound goes as one over
//! their square root), and below some hundreds of them it costs recall
//! that sq8's does not (docs/benchmarks.md). Below [`CODES_FROM_DIMS`]
//! there are no codes: a row of a few floats is hardly more to read than
//! its code, and a level of a byte is wider than the gaps between
//! neighbours where many rows share a few dimensions (10,000 rows of 2
//! dimensions under cosine lie some 10⁻⁴ radians apart, a level is some
//! 4·10⁻³).
//!
//! A search walks the graph by the estimates and keeps its `ef` best;
//! their exact distances, from the rows read in place, order the answer
//! ([`crate::search::LoadedSegment::search`]). Only L2, inner product and
//! cosine have codes; rows of L1 (whose rank order the inner product does
//! not give) and of bits have none.

mod common;
pub mod rabitq;
pub mod sq8;

use std::sync::atomic::AtomicBool;

use crate::distance::Metric;
use crate::element::{Row, Vectors};
pub use common::{Cancelled, supports};
pub use rabitq::RaBitQ;
pub use sq8::Sq8;

/// How many times `ef` rows a walk by RaBitQ codes keeps and re-ranks.
pub const RABITQ_KEPT: usize = 2;

/// Dimensions from which an index without a `quantization` option keeps
/// RaBitQ codes rather than sq8 ones.
pub const RABITQ_FROM_DIMS: usize = 256;

/// Dimensions from which an index without a `quantization` option keeps
/// codes at all.
pub const CODES_FROM_DIMS: usize = 8;

/// What an index keeps beside its graphs (its reloption `quantization`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Quantization {
    /// The option unset: RaBitQ codes from [`RABITQ_FROM_DIMS`]
    /// dimensions, sq8 codes below, none below [`CODES_FROM_DIMS`].
    #[default]
    Auto,
    /// No codes: searches walk the graph on the rows.
    None,
    /// Scalar 8-bit codes ([`sq8`]).
    Sq8,
    /// Extended RaBitQ codes ([`rabitq`]).
    RaBitQ,
}

impl Quantization {
    /// The kind of codes rows of `dims` dimensions get: `Auto` resolved.
    pub fn resolve(self, dims: usize) -> Quantization {
        match self {
            Quantization::Auto if dims >= RABITQ_FROM_DIMS => Quantization::RaBitQ,
            Quantization::Auto if dims >= CODES_FROM_DIMS => Quantization::Sq8,
            Quantization::Auto => Quantization::None,
            chosen => chosen,
        }
    }
}

/// One segment's codes, owned when built, borrowed from an index file when
/// read.
#[derive(Debug, Clone, PartialEq)]
pub enum Codes<'a> {
    Sq8(Sq8<'a>),
    RaBitQ(RaBitQ<'a>),
}

/// The query's side of a segment's estimates ([`Codes::prepare`]).
#[derive(Debug, Clone)]
pub enum PreparedQuery {
    Sq8(sq8::Prepared),
    RaBitQ(rabitq::Prepared),
}

impl Codes<'_> {
    /// The codes of the rows of `dims` elements in `vectors` under
    /// `metric`, of the kind `quantization` names; `None` without codes:
    /// `quantization = none`, a metric without codes, bits, sparse rows.
    /// `Cancelled` once `cancel` is set (it is looked at every thousand
    /// rows or so).
    pub fn encode(
        quantization: Quantization,
        metric: Metric,
        dims: usize,
        vectors: &Vectors<'_>,
        cancel: &AtomicBool,
    ) -> Result<Option<Codes<'static>>, Cancelled> {
        if !supports(metric) || matches!(vectors, Vectors::Bit(_) | Vectors::Sparse(_)) || dims == 0 {
            return Ok(None);
        }
        Ok(match quantization.resolve(dims) {
            Quantization::Sq8 => Some(Codes::Sq8(Sq8::encode(metric, dims, vectors, cancel)?)),
            Quantization::RaBitQ => Some(Codes::RaBitQ(RaBitQ::encode(metric, dims, vectors, cancel)?)),
            Quantization::None | Quantization::Auto => None,
        })
    }

    pub fn dims(&self) -> usize {
        match self {
            Codes::Sq8(c) => c.dims(),
            Codes::RaBitQ(c) => c.dims(),
        }
    }

    pub fn rows(&self) -> usize {
        match self {
            Codes::Sq8(c) => c.rows(),
            Codes::RaBitQ(c) => c.rows(),
        }
    }

    /// Bytes the codes take (what a search keeps resident).
    pub fn bytes(&self) -> usize {
        match self {
            Codes::Sq8(c) => c.bytes(),
            Codes::RaBitQ(c) => c.bytes(),
        }
    }

    pub fn is_borrowed(&self) -> bool {
        match self {
            Codes::Sq8(c) => c.is_borrowed(),
            Codes::RaBitQ(c) => c.is_borrowed(),
        }
    }

    /// The query's side of the estimates, computed once a search.
    pub fn prepare(&self, query: Row<'_>) -> PreparedQuery {
        match self {
            Codes::Sq8(c) => PreparedQuery::Sq8(c.prepare(query)),
            Codes::RaBitQ(c) => PreparedQuery::RaBitQ(c.prepare(query)),
        }
    }

    /// The estimated distance from the query to `row`, under the metric.
    #[inline]
    pub fn distance(&self, query: &PreparedQuery, row: u32) -> f32 {
        match (self, query) {
            (Codes::Sq8(c), PreparedQuery::Sq8(q)) => c.distance(q, row),
            (Codes::RaBitQ(c), PreparedQuery::RaBitQ(q)) => c.distance(q, row),
            _ => unreachable!("a query prepared by other codes"),
        }
    }

    /// How many rows a walk by these codes keeps, to re-rank them exactly,
    /// for a search at `ef`: `ef` with 8-bit codes; with RaBitQ codes,
    /// whose estimates are noisier, [`RABITQ_KEPT`] times it, so that the
    /// answer's recall at `ef` is what a walk on the rows gives (on the
    /// curve of QPS against recall this moves `ef`, not the curve:
    /// docs/benchmarks.md).
    pub fn rows_kept(&self, ef: usize) -> usize {
        match self {
            Codes::Sq8(_) => ef,
            Codes::RaBitQ(_) => RABITQ_KEPT * ef,
        }
    }

    /// Asks the CPU for `row`'s record, for a distance computed soon.
    #[inline]
    pub fn prefetch(&self, row: u32) {
        match self {
            Codes::Sq8(c) => c.prefetch(row),
            Codes::RaBitQ(c) => c.prefetch(row),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    fn encode(
        quantization: Quantization,
        metric: Metric,
        dims: usize,
        vectors: &Vectors<'_>,
    ) -> Option<Codes<'static>> {
        Codes::encode(quantization, metric, dims, vectors, &AtomicBool::new(false)).expect("not cancelled")
    }

    #[test]
    fn each_kind_encodes_its_codes() {
        for dims in [RABITQ_FROM_DIMS - 1, RABITQ_FROM_DIMS] {
            let rows = vec![0.5f32; 3 * dims];
            let codes = |q| encode(q, Metric::L2, dims, &Vectors::F32(Cow::Borrowed(&rows)));
            assert!(matches!(codes(Quantization::Sq8), Some(Codes::Sq8(_))));
            assert!(matches!(codes(Quantization::RaBitQ), Some(Codes::RaBitQ(_))));
            assert!(codes(Quantization::None).is_none());
            match codes(Quantization::default()) {
                Some(Codes::RaBitQ(_)) => assert_eq!(dims, RABITQ_FROM_DIMS, "RaBitQ by default from 256 dimensions"),
                Some(Codes::Sq8(_)) => assert!(dims < RABITQ_FROM_DIMS, "sq8 by default below"),
                None => panic!("no codes by default"),
            }
        }
    }

    #[test]
    fn rows_of_a_few_dimensions_get_no_codes_by_default() {
        for dims in [1, 2, CODES_FROM_DIMS - 1, CODES_FROM_DIMS] {
            let rows = vec![0.5f32; 3 * dims];
            let codes = |q| encode(q, Metric::Cosine, dims, &Vectors::F32(Cow::Borrowed(&rows)));
            assert_eq!(codes(Quantization::Auto).is_some(), dims >= CODES_FROM_DIMS, "{dims} dimensions");
            assert!(matches!(codes(Quantization::Sq8), Some(Codes::Sq8(_))), "asked for, sq8 at {dims}");
        }
    }

    #[test]
    fn metrics_without_codes_get_none() {
        let data = [1.0f32; 8];
        for quantization in [Quantization::Auto, Quantization::Sq8, Quantization::RaBitQ] {
            for metric in [Metric::L1, Metric::Hamming, Metric::Jaccard] {
                assert!(encode(quantization, metric, 4, &Vectors::F32(Cow::Borrowed(&data))).is_none());
            }
            assert!(encode(quantization, Metric::L2, 8, &Vectors::Bit(Cow::Borrowed(&[1u8]))).is_none());
        }
    }

    #[test]
    fn a_cancelled_encoding_stops() {
        let rows = vec![0.5f32; 2000 * 300];
        let cancel = AtomicBool::new(true);
        for quantization in [Quantization::Sq8, Quantization::RaBitQ] {
            let codes = Codes::encode(quantization, Metric::L2, 300, &Vectors::F32(Cow::Borrowed(&rows)), &cancel);
            assert_eq!(codes.err(), Some(Cancelled), "{quantization:?}");
        }
    }
}
