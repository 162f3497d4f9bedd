//! The inverted index file: one segment of sparse rows as posting lists
//! ([`crate::inverted`]), searched in place.
//!
//! ```text
//! offset size  field
//!      0    8  magic "PGMVSPX\0"
//!      8    2  format version (1)
//!     10    1  metric code (1 = L2, 2 = inner product, 3 = cosine)
//!     11    1  reserved, 0
//!     12    8  segment id
//!     20    8  rows n
//!     28    8  dimensions that occur, T
//!     36    8  postings P
//!     44    4  CRC-32C of the body
//!     48   12  reserved, 0
//!     60    4  CRC-32C of bytes 0..60
//!     64       body, every array 4-aligned:
//!              dims        u32 x T      the dimensions, ascending (0-based)
//!              starts      u32 x (T+1)  dims[t]'s postings: starts[t]..starts[t+1]
//!              list_max    f32 x T      each list's largest value
//!              list_min    f32 x T      and its least
//!              rows        u32 x P      postings' row numbers, ascending within a list
//!              values      f32 x P      and their values (under cosine, of the
//!                                       row normalised)
//!              norms       f32 x n      each row's |x|², as given
//!              by_norm     u32 x n      the rows by |x|² ascending, then by number
//! ```
//!
//! Row i is row i of the segment's insert binlog. Over a page-aligned
//! mapping the arrays are borrowed in place; over an unaligned buffer they
//! are copied once.

use super::{
    Check, FormatError, FormatErrorKind, Reader, Writer, bytes_of, check_body, check_header, column, finish_header,
};
use crate::distance::Metric;
use crate::inverted::{self, Inverted};
use crate::segment::SegmentId;

pub const MAGIC: &[u8; 8] = b"PGMVSPX\0";
pub const VERSION: u16 = 1;
pub const HEADER_LEN: usize = 64;

/// Encodes a segment's inverted index.
pub fn encode(segment: SegmentId, index: &Inverted<'_>) -> Vec<u8> {
    let parts: [&[u8]; 8] = [
        bytes_of(&index.dims),
        bytes_of(&index.starts),
        bytes_of(&index.list_max),
        bytes_of(&index.list_min),
        bytes_of(&index.posting_rows),
        bytes_of(&index.posting_values),
        bytes_of(&index.norms),
        bytes_of(&index.by_norm),
    ];
    let mut out = vec![0u8; HEADER_LEN];
    out.reserve_exact(parts.iter().map(|p| p.len()).sum());
    parts.iter().for_each(|p| out.extend_from_slice(p));
    let mut w = Writer(Vec::with_capacity(HEADER_LEN));
    w.bytes(MAGIC).u16(VERSION).u8(index.metric.code()).u8(0).u64(segment.0).u64(index.rows as u64);
    w.u64(index.dims.len() as u64).u64(index.posting_rows.len() as u64).u32(crc32c::crc32c(&out[HEADER_LEN..]));
    out[..HEADER_LEN].copy_from_slice(&finish_header(w, HEADER_LEN));
    out
}

/// Verifies and decodes an inverted index file; `object` names it in
/// errors. The arrays' shape is checked always; under [`Check::Full`]
/// every posting too (rows in range and ascending, values finite and not
/// zero, each list within its bounds, `by_norm` a permutation), so no
/// search of a decoded file can index out of range.
pub fn decode<'a>(object: &str, bytes: &'a [u8], check: Check) -> Result<(SegmentId, Inverted<'a>), FormatError> {
    check_header(object, bytes, HEADER_LEN, MAGIC, "inverted index file", VERSION)?;
    let invalid = |msg: String| FormatError::new(object, FormatErrorKind::Invalid(msg));
    let mut r = Reader::new(&bytes[10..]);
    let (metric_code, _reserved) = (r.u8(), r.u8());
    let (segment, rows, dims, postings, body_crc) = (SegmentId(r.u64()), r.u64(), r.u64(), r.u64(), r.u32());
    let metric = Metric::from_code(metric_code)
        .filter(|m| inverted::supports(*m))
        .ok_or_else(|| invalid(format!("metric code {metric_code} has no inverted index")))?;
    if rows >= u32::MAX as u64 || postings >= u32::MAX as u64 || dims > postings {
        return Err(invalid(format!("{rows} rows, {dims} dimensions and {postings} postings")));
    }
    // Every count is below 2^32, so the sum of 4-byte arrays fits a u64.
    let words = [dims, dims + 1, dims, dims, postings, postings, rows, rows];
    let body_len: u64 = words.iter().map(|w| 4 * w).sum();
    let body = &bytes[HEADER_LEN..];
    check_body(object, body, body_len, body_crc, check)?;
    let mut rest = body;
    let mut take = |n: u64| {
        let (head, tail) = rest.split_at(4 * n as usize);
        rest = tail;
        head
    };
    let u32s = |b| column(b, |c| u32::from_le_bytes(c.try_into().expect("chunk of 4")));
    let f32s = |b| column(b, |c| f32::from_le_bytes(c.try_into().expect("chunk of 4")));
    let index = Inverted {
        metric,
        rows: rows as usize,
        dims: u32s(take(dims)),
        starts: u32s(take(dims + 1)),
        list_max: f32s(take(dims)),
        list_min: f32s(take(dims)),
        posting_rows: u32s(take(postings)),
        posting_values: f32s(take(postings)),
        norms: f32s(take(rows)),
        by_norm: u32s(take(rows)),
    };
    if !index.dims.windows(2).all(|w| w[0] < w[1]) {
        return Err(invalid("dimensions not ascending".into()));
    }
    let starts = &index.starts;
    if starts[0] != 0 || starts[dims as usize] as u64 != postings || !starts.windows(2).all(|w| w[0] < w[1]) {
        return Err(invalid("list offsets not ascending from 0 to the postings".into()));
    }
    if check == Check::Full {
        verify_postings(&index).map_err(invalid)?;
    }
    Ok((segment, index))
}

/// The per-posting checks of [`decode`] under [`Check::Full`].
fn verify_postings(index: &Inverted<'_>) -> Result<(), String> {
    for t in 0..index.dims.len() {
        let span = index.starts[t] as usize..index.starts[t + 1] as usize;
        let (rows, values) = (&index.posting_rows[span.clone()], &index.posting_values[span]);
        if !rows.windows(2).all(|w| w[0] < w[1]) || rows.last().is_some_and(|&r| r as usize >= index.rows) {
            return Err(format!("list {t}: rows not ascending below {}", index.rows));
        }
        let (max, min) = (index.list_max[t], index.list_min[t]);
        if values.iter().any(|&x| !x.is_finite() || x == 0.0 || x > max || x < min) {
            return Err(format!("list {t}: a value not finite, zero, or outside [{min}, {max}]"));
        }
    }
    if index.norms.iter().any(|n| n.is_nan() || *n < 0.0) {
        return Err("a negative or NaN norm".into());
    }
    let mut seen = vec![false; index.rows];
    for &row in index.by_norm.iter() {
        match seen.get_mut(row as usize) {
            Some(s) if !*s => *s = true,
            _ => return Err(format!("rows by norm: row {row} out of range or repeated")),
        }
    }
    if !index.by_norm.windows(2).all(|w| index.norms[w[0] as usize] <= index.norms[w[1] as usize]) {
        return Err("rows by norm not ascending".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::testing::*;
    use crate::sparse::SparseVec;

    fn sample(metric: Metric) -> Inverted<'static> {
        let rows = [
            SparseVec { dim: 9, indices: vec![1, 4], values: vec![1.5, -2.0] },
            SparseVec { dim: 9, indices: vec![], values: vec![] },
            SparseVec { dim: 9, indices: vec![4, 8], values: vec![0.5, 3.0] },
        ];
        Inverted::build(metric, rows.iter().map(|r| r.view()))
    }

    #[test]
    fn round_trip_borrows_when_aligned() {
        for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
            let index = sample(metric);
            let bytes = encode(SegmentId(5), &index);
            let storage = Aligned::of(&bytes);
            for check in [Check::Full, Check::Header] {
                let (segment, decoded) = decode("o", storage.bytes(), check).unwrap();
                assert_eq!((segment, &decoded), (SegmentId(5), &index));
                assert!(matches!(decoded.posting_values, std::borrow::Cow::Borrowed(_)), "read in place");
            }
            let mut shifted = vec![0u8];
            shifted.extend_from_slice(&bytes);
            assert_eq!(decode("o", &shifted[1..], Check::Full).unwrap().1, index, "copied when unaligned");
        }
    }

    #[test]
    fn corruption_is_refused() {
        let bytes = encode(SegmentId(5), &sample(Metric::L2));
        every_bit_flip_is_refused(&bytes, |b| decode("o", b, Check::Full).map(drop));
        every_truncation_is_refused(&bytes, |b| decode("o", b, Check::Full).map(drop));
        every_truncation_is_refused(&bytes, |b| decode("o", b, Check::Header).map(drop));
    }

    #[test]
    fn damage_past_the_header_check_never_panics_a_search() {
        // What the fuzzer found: under the header check (a cached file), a
        // `by_norm` naming a row beyond the segment.
        let mut index = sample(Metric::L2);
        index.by_norm.to_mut()[0] = 196_852;
        index.posting_rows.to_mut()[1] = 9;
        let bytes = encode(SegmentId(5), &index);
        assert!(decode("o", &bytes, Check::Full).is_err());
        let (_, damaged) = decode("o", &bytes, Check::Header).unwrap();
        let query = crate::sparse::SparseVec { dim: 9, indices: vec![1, 4, 8], values: vec![1.0, 1.0, 1.0] };
        let (hits, _) = damaged.search(query.view(), 5, |_| false);
        assert!(hits.iter().all(|h| h.row < 3), "{hits:?}");
    }

    #[test]
    fn a_well_sealed_file_of_bad_postings_is_refused() {
        // Row 7 of 3: rewritten with fresh checksums, as a buggy writer would.
        let mut index = sample(Metric::InnerProduct);
        index.posting_rows.to_mut()[0] = 7;
        let e = decode("o", &encode(SegmentId(5), &index), Check::Full).unwrap_err().to_string();
        assert!(e.contains("rows not ascending below 3"), "{e}");
        let mut index = sample(Metric::InnerProduct);
        index.by_norm.to_mut()[0] = 2;
        assert!(decode("o", &encode(SegmentId(5), &index), Check::Full).is_err());
        let mut index = sample(Metric::InnerProduct);
        index.metric = Metric::L1;
        let e = decode("o", &encode(SegmentId(5), &index), Check::Header).unwrap_err().to_string();
        assert!(e.contains("metric code 4 has no inverted index"), "{e}");
    }
}
