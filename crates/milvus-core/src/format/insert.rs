//! The insert binlog: one sealed segment's rows, columnar, read in place.
//!
//! ```text
//! offset size  field
//!      0    8  magic "PGMVINS\0"
//!      8    2  format version (1: f32 rows; 2: any fixed-width element
//!              type; 3: sparse rows)
//!     10    1  metric code (1 = L2, 2 = inner product, 3 = cosine, 4 = L1,
//!              5 = Hamming, 6 = Jaccard)
//!     11    1  element code (0 = f32, 1 = f16, 2 = bit, 3 = sparse); 0 in
//!              version 1, 3 in version 3 and only there
//!     12    4  dims
//!     16    8  rows
//!     24    8  segment id
//!     32    4  CRC-32C of the body
//!     36    8  sparse rows: words of the rows; else 0
//!     44   16  reserved, 0
//!     60    4  CRC-32C of bytes 0..60
//!     64       body: keys   u64 x rows      (the row's heap TID, packed)
//!              then vectors f32 or f16 x rows*dims (row-major), or of
//!              bits: ceil(dims / 8) bytes a row;
//!              sparse rows: starts u64 x (rows + 1), from 0, ascending,
//!              the last the words' count; then the words u32 x words,
//!              row i being words[starts[i]..starts[i + 1]]: its dims,
//!              its entry count n, 0, n indices (i32, ascending), n values
//!              (f32, finite, not 0)
//! ```
//!
//! A binlog of f32 rows is written as version 1, as before halfvec; one of
//! f16 rows or bits as version 2, so that a build older than halfvec refuses
//! it ("format version 2 is not supported") instead of reading them as
//! floats; one of sparse rows as version 3, for the same reason.
//!
//! The body starts 64 bytes in and the keys are 8 bytes each, so both
//! columns are aligned whenever the object is (a page-aligned mmap, or an
//! aligned buffer): [`InsertBinlog::decode`] then borrows them without a copy.

use std::borrow::Cow;

use super::{
    Check, FormatError, FormatErrorKind, Reader, Writer, bytes_of, check_body, check_header, column, finish_header,
};
use crate::distance::Metric;
use crate::element::{Element, Row, Vectors};
use crate::segment::SegmentId;

pub const MAGIC: &[u8; 8] = b"PGMVINS\0";
pub const VERSION: u16 = 3;
/// The version of binlogs of f16 rows and bits.
pub const VERSION_FIXED: u16 = 2;
/// The version of binlogs of f32 rows, readable by every build.
pub const VERSION_F32: u16 = 1;
pub const HEADER_LEN: usize = 64;

/// A decoded insert binlog, borrowing the object's bytes where aligned.
#[derive(Debug, Clone, PartialEq)]
pub struct InsertBinlog<'a> {
    pub segment: SegmentId,
    pub metric: Metric,
    pub dims: usize,
    keys: Cow<'a, [u64]>,
    vectors: Vectors<'a>,
}

/// Encodes rows as an insert binlog. `vectors` holds them all, row-major,
/// `keys.len() * dims` elements of one type.
pub fn encode<'v>(
    segment: SegmentId,
    metric: Metric,
    dims: usize,
    keys: &[u64],
    vectors: impl Into<Row<'v>>,
) -> Vec<u8> {
    let vectors = vectors.into();
    let element = vectors.element();
    assert!(element.is_fixed(), "sparse rows are encoded with their starts (encode_vectors)");
    assert_eq!(vectors.bytes().len(), keys.len() * element.bytes(dims), "vectors must be keys x dims");
    let version = if element == Element::F32 { VERSION_F32 } else { VERSION_FIXED };
    write(segment, metric, element, dims, keys, version, 0, &[vectors.bytes()])
}

/// [`encode`] for a column of rows of any element type, sparse ones too.
pub fn encode_vectors(segment: SegmentId, metric: Metric, dims: usize, keys: &[u64], vectors: &Vectors) -> Vec<u8> {
    let Vectors::Sparse(rows) = vectors else { return encode(segment, metric, dims, keys, vectors.all()) };
    assert_eq!(rows.len(), keys.len(), "a start for each key");
    let words = rows.words.len() as u64;
    let body = [bytes_of(&rows.starts), bytes_of(&rows.words)];
    write(segment, metric, Element::Sparse, dims, keys, VERSION, words, &body)
}

/// Writes the header and the keys, then `columns`.
#[allow(clippy::too_many_arguments)]
fn write(
    segment: SegmentId,
    metric: Metric,
    element: Element,
    dims: usize,
    keys: &[u64],
    version: u16,
    words: u64,
    columns: &[&[u8]],
) -> Vec<u8> {
    // One buffer: the body is written in place after a header-sized gap,
    // then the header (which carries the body's checksum) fills the gap.
    let mut out = vec![0u8; HEADER_LEN];
    out.reserve_exact(std::mem::size_of_val(keys) + columns.iter().map(|c| c.len()).sum::<usize>());
    out.extend_from_slice(bytes_of(keys));
    columns.iter().for_each(|c| out.extend_from_slice(c));
    let mut w = Writer(Vec::with_capacity(HEADER_LEN));
    w.bytes(MAGIC).u16(version).u8(metric.code()).u8(element.code()).u32(dims as u32);
    w.u64(keys.len() as u64).u64(segment.0).u32(crc32c::crc32c(&out[HEADER_LEN..])).u64(words);
    out[..HEADER_LEN].copy_from_slice(&finish_header(w, HEADER_LEN));
    out
}

/// An insert binlog's header, checked: what a reader of its body by
/// ranges needs (`super::ranges`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub segment: SegmentId,
    pub metric: Metric,
    pub element: Element,
    pub dims: usize,
    pub rows: u64,
    pub body_crc: u32,
    /// Words of sparse rows; 0 for others.
    pub words: u64,
}

impl Header {
    /// Checks and decodes the header at the start of `bytes` (at least
    /// [`HEADER_LEN`] of them; the body is not looked at).
    pub fn decode(object: &str, bytes: &[u8]) -> Result<Header, FormatError> {
        let version = check_header(object, bytes, HEADER_LEN, MAGIC, "insert binlog", VERSION)?;
        let invalid = |msg: String| FormatError::new(object, FormatErrorKind::Invalid(msg));
        let mut r = Reader::new(&bytes[10..]);
        let metric_code = r.u8();
        let element_code = r.u8();
        let dims = r.u32() as usize;
        let rows = r.u64();
        let segment = SegmentId(r.u64());
        let body_crc = r.u32();
        let words = r.u64();
        let metric =
            Metric::from_code(metric_code).ok_or_else(|| invalid(format!("unknown metric code {metric_code}")))?;
        let element = Element::from_code(element_code)
            .filter(|e| match version {
                VERSION_F32 => *e == Element::F32,
                VERSION_FIXED => e.is_fixed(),
                _ => *e == Element::Sparse,
            })
            .ok_or_else(|| invalid(format!("unknown element code {element_code} in version {version}")))?;
        if element.is_fixed() && words != 0 {
            return Err(invalid(format!("{words} words of sparse rows in a binlog of {element:?} rows")));
        }
        let max = element.max_dims();
        if dims == 0 || dims > max {
            return Err(invalid(format!("dimensions {dims} out of range 1..={max} for {element:?} rows")));
        }
        let fixed = if element.is_fixed() { element.bytes(dims) as u64 } else { 8 };
        let sparse = words.checked_mul(4).and_then(|w| w.checked_add(8));
        if rows.checked_mul(8 + fixed).and_then(|b| b.checked_add(sparse?)).is_none() {
            return Err(invalid(format!("{rows} rows of {dims} dimensions overflow")));
        }
        Ok(Header { segment, metric, element, dims, rows, body_crc, words })
    }

    /// Bytes of the body: the keys, then the vectors (of sparse rows, their
    /// starts and words).
    pub fn body_len(&self) -> u64 {
        match self.element {
            Element::Sparse => self.rows * 16 + 8 + self.words * 4,
            _ => self.rows * (8 + self.row_bytes() as u64),
        }
    }

    /// Bytes of one row's vector (of a sparse row: of an empty one).
    pub fn row_bytes(&self) -> usize {
        self.element.bytes(self.dims)
    }

    /// Where the vector column starts in the object.
    pub fn vectors_offset(&self) -> u64 {
        HEADER_LEN as u64 + 8 * self.rows
    }
}

fn invalid(object: &str, message: String) -> FormatError {
    FormatError::new(object, FormatErrorKind::Invalid(message))
}

/// Checks the starts of sparse rows (from 0, ascending, to the words'
/// count) and that each row is as long as its header says and of `dims`
/// dimensions ([`crate::element::is_sparse_row_of`]), so no read of a row
/// goes out of bounds; under [`Check::Full`], every row entirely
/// ([`crate::element::sparse_row`]).
fn check_sparse_rows(vectors: &Vectors, dims: usize, check: Check) -> Result<(), String> {
    let Vectors::Sparse(rows) = vectors else { unreachable!("sparse rows") };
    let (starts, words) = (&rows.starts, rows.words.len() as u64);
    if starts.first() != Some(&0) || starts.last() != Some(&words) || starts.windows(2).any(|w| w[0] > w[1]) {
        return Err(format!("the starts of {} sparse rows do not run from 0 to {words}", rows.len()));
    }
    for i in 0..rows.len() {
        let row = rows.row(i);
        if !crate::element::is_sparse_row_of(row, dims)
            || (check == Check::Full && crate::element::sparse_row(row).is_none())
        {
            return Err(format!("row {i} is not a sparse row of {dims} dimensions"));
        }
    }
    Ok(())
}

impl<'a> InsertBinlog<'a> {
    /// Verifies and decodes an insert binlog; `object` names it in errors.
    pub fn decode(object: &str, bytes: &'a [u8]) -> Result<Self, FormatError> {
        Self::decode_checked(object, bytes, Check::Full)
    }

    /// [`Self::decode`], verifying as much as `check` says.
    pub fn decode_checked(object: &str, bytes: &'a [u8], check: Check) -> Result<Self, FormatError> {
        let header = Header::decode(object, bytes)?;
        let body = &bytes[HEADER_LEN..];
        check_body(object, body, header.body_len(), header.body_crc, check)?;
        let (keys, vectors) = body.split_at(header.rows as usize * 8);
        let vectors = match header.element {
            Element::Sparse => {
                let (starts, words) = vectors.split_at((header.rows as usize + 1) * 8);
                let vectors = Vectors::from_sparse_bytes(starts, words);
                check_sparse_rows(&vectors, header.dims, check).map_err(|m| invalid(object, m))?;
                vectors
            }
            element => Vectors::from_bytes(element, vectors),
        };
        Ok(InsertBinlog {
            segment: header.segment,
            metric: header.metric,
            dims: header.dims,
            keys: column(keys, |c| u64::from_le_bytes(c.try_into().expect("chunk of 8"))),
            vectors,
        })
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// The element type of its rows.
    pub fn element(&self) -> Element {
        self.vectors.element()
    }

    /// All vectors, row-major.
    pub fn vectors(&self) -> &Vectors<'a> {
        &self.vectors
    }

    /// Row `i`'s vector.
    #[inline]
    pub fn vector(&self, i: usize) -> Row<'_> {
        self.vectors.row(i, self.dims)
    }

    /// A copy that owns its columns, free of the input's lifetime.
    pub fn into_owned(self) -> InsertBinlog<'static> {
        InsertBinlog {
            segment: self.segment,
            metric: self.metric,
            dims: self.dims,
            keys: Cow::Owned(self.keys.into_owned()),
            vectors: self.vectors.into_owned(),
        }
    }

    /// Whether the columns borrow the input (no copy was made).
    pub fn is_borrowed(&self) -> bool {
        matches!(self.keys, Cow::Borrowed(_)) && self.vectors.is_borrowed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::testing::*;
    use crate::synthetic::Rng;
    use proptest::prelude::*;

    fn sample(rows: usize, dims: usize) -> (Vec<u64>, Vec<f32>) {
        let mut rng = Rng::new(rows as u64);
        ((0..rows as u64).map(|i| i * 7 + 1).collect(), rng.vector(rows * dims))
    }

    #[test]
    fn round_trip_borrows_when_aligned_and_copies_when_not() {
        let (keys, vectors) = sample(10, 3);
        let bytes = encode(SegmentId(42), Metric::Cosine, 3, &keys, &vectors);
        let storage = Aligned::of(&bytes);
        let view = storage.bytes();
        let b = InsertBinlog::decode("seg/42/insert", view).unwrap();
        assert!(b.is_borrowed());
        assert_eq!((b.segment, b.metric, b.dims, b.len()), (SegmentId(42), Metric::Cosine, 3, 10));
        assert_eq!(b.keys(), &keys[..]);
        assert_eq!(b.vector(9), Row::F32(&vectors[27..30]));

        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&bytes);
        let c = InsertBinlog::decode("x", &shifted[1..]).unwrap();
        assert!(!c.is_borrowed());
        assert_eq!((c.keys(), c.vectors().all()), (&keys[..], Row::F32(&vectors)));
    }

    #[test]
    fn half_rows_take_half_the_bytes_and_a_version_older_builds_refuse() {
        let (keys, vectors) = sample(10, 3);
        let halves = crate::vector::to_half(&vectors).unwrap();
        let bytes = encode(SegmentId(7), Metric::L2, 3, &keys, Row::F16(&halves));
        let floats = encode(SegmentId(7), Metric::L2, 3, &keys, &vectors);
        assert_eq!(bytes.len() - HEADER_LEN - 80, (floats.len() - HEADER_LEN - 80) / 2);
        assert_eq!((u16::from_le_bytes([bytes[8], bytes[9]]), bytes[11]), (2, 1), "version 2, element f16");
        assert_eq!((u16::from_le_bytes([floats[8], floats[9]]), floats[11]), (1, 0), "f32 rows: as before halfvec");
        let storage = Aligned::of(&bytes);
        let b = InsertBinlog::decode("o", storage.bytes()).unwrap();
        assert!(b.is_borrowed());
        assert_eq!((b.element(), b.vector(9)), (Element::F16, Row::F16(&halves[27..30])));
        let small = encode(SegmentId(7), Metric::L2, 3, &keys[..2], Row::F16(&halves[..6]));
        every_bit_flip_is_refused(&small, |b| InsertBinlog::decode("o", b).map(drop));

        // An f16 element code in a version 1 header is damage, not a halfvec.
        let mut v1 = floats.clone();
        v1[11] = 1;
        let crc = crc32c::crc32c(&v1[..60]);
        v1[60..64].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            InsertBinlog::decode("o", &v1).unwrap_err().kind,
            FormatErrorKind::Invalid("unknown element code 1 in version 1".into())
        );
    }

    #[test]
    fn corruption_is_refused_and_names_the_object() {
        let (keys, vectors) = sample(3, 2);
        let bytes = encode(SegmentId(1), Metric::L2, 2, &keys, &vectors);
        every_bit_flip_is_refused(&bytes, |b| InsertBinlog::decode("o", b).map(drop));
        every_truncation_is_refused(&bytes, |b| InsertBinlog::decode("o", b).map(drop));

        let mut body_flip = bytes.clone();
        *body_flip.last_mut().unwrap() ^= 1;
        let e = InsertBinlog::decode("db/1/idx/2/seg/1/insert", &body_flip).unwrap_err();
        assert!(e.to_string().starts_with("object db/1/idx/2/seg/1/insert: body checksum mismatch: stored "), "{e}");

        let mut trailing = bytes.clone();
        trailing.push(0);
        assert_eq!(
            InsertBinlog::decode("o", &trailing).unwrap_err().kind,
            FormatErrorKind::Invalid("1 trailing bytes after a body of 48".into())
        );
    }

    #[test]
    fn wrong_version_and_kind_are_named() {
        let (keys, vectors) = sample(1, 1);
        let mut bytes = encode(SegmentId(1), Metric::L2, 1, &keys, &vectors);
        bytes[8] = 4;
        let crc = crc32c::crc32c(&bytes[..60]);
        bytes[60..64].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            InsertBinlog::decode("o", &bytes).unwrap_err().to_string(),
            "object o: format version 4 is not supported (this build reads up to 3)"
        );
        let delta = crate::format::delta::encode(SegmentId(1), &[1, 2]);
        let e = InsertBinlog::decode("o", &delta).unwrap_err();
        assert!(matches!(e.kind, FormatErrorKind::BadMagic { expected: "insert binlog", .. }), "{e}");
    }

    #[test]
    fn every_width_an_index_takes_round_trips_and_no_wider() {
        use crate::element::{Element, f16};
        let keys = [7u64, 8];
        for element in [Element::F32, Element::F16, Element::Bit] {
            let max = element.max_dims();
            let (floats, halves, bits) = (vec![0.5f32; 2 * max], vec![f16::ONE; 2 * max], vec![0xa5u8; 2 * max / 8]);
            let (metric, rows) = match element {
                Element::Bit => (Metric::Hamming, Row::Bit { bits: &bits, len: 2 * max }),
                Element::F16 => (Metric::L2, Row::F16(&halves)),
                Element::F32 => (Metric::L2, Row::F32(&floats)),
                Element::Sparse => unreachable!("fixed widths"),
            };
            let bytes = encode(SegmentId(1), metric, max, &keys, rows);
            let b = InsertBinlog::decode("o", &bytes).unwrap();
            assert_eq!((b.dims, b.len(), b.element()), (max, 2, element));
            // A header naming one more (its checksum made good) is refused.
            let mut wider = bytes.clone();
            wider[MAGIC.len() + 4..MAGIC.len() + 8].copy_from_slice(&((max + 1) as u32).to_le_bytes());
            let crc = crc32c::crc32c(&wider[..HEADER_LEN - 4]);
            wider[HEADER_LEN - 4..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
            let e = InsertBinlog::decode("o", &wider).err().unwrap().to_string();
            assert!(e.contains(&format!("dimensions {} out of range 1..={max}", max + 1)), "{e}");
        }
    }

    fn sparse_sample() -> (Vec<u64>, Vectors<'static>) {
        use crate::sparse::SparseVec;
        let mut vectors = Vectors::new(Element::Sparse);
        let rows = [
            SparseVec { dim: 100, indices: vec![0, 5, 99], values: vec![1.0, -2.5, 0.25] },
            SparseVec { dim: 100, indices: vec![], values: vec![] },
            SparseVec { dim: 100, indices: vec![42], values: vec![3.0] },
        ];
        rows.iter().for_each(|v| vectors.push(Row::Sparse(&crate::element::sparse_words(v.view()))));
        (vec![11, 12, 13], vectors)
    }

    #[test]
    fn sparse_rows_round_trip_as_version_3_and_borrow_when_aligned() {
        let (keys, vectors) = sparse_sample();
        let bytes = encode_vectors(SegmentId(9), Metric::InnerProduct, 100, &keys, &vectors);
        assert_eq!((u16::from_le_bytes([bytes[8], bytes[9]]), bytes[11]), (3, 3), "version 3, element sparse");
        let storage = Aligned::of(&bytes);
        let b = InsertBinlog::decode("o", storage.bytes()).unwrap();
        assert!(b.is_borrowed());
        assert_eq!((b.element(), b.len(), b.keys(), b.vectors()), (Element::Sparse, 3, &keys[..], &vectors));
        assert_eq!(b.vector(0).sparse().values, &[1.0, -2.5, 0.25]);
        assert!(b.vector(1).sparse().indices.is_empty());
        every_bit_flip_is_refused(&bytes, |b| InsertBinlog::decode("o", b).map(drop));
        every_truncation_is_refused(&bytes, |b| InsertBinlog::decode("o", b).map(drop));
        let empty = encode_vectors(SegmentId(9), Metric::L2, 100, &[], &Vectors::new(Element::Sparse));
        assert!(InsertBinlog::decode("o", &empty).unwrap().is_empty());
    }

    #[test]
    fn sparse_rows_that_break_their_rules_are_refused_even_with_good_checksums() {
        let (keys, vectors) = sparse_sample();
        let reseal = |mut bytes: Vec<u8>| {
            let crc = crc32c::crc32c(&bytes[HEADER_LEN..]);
            bytes[32..36].copy_from_slice(&crc.to_le_bytes());
            let crc = crc32c::crc32c(&bytes[..60]);
            bytes[60..64].copy_from_slice(&crc.to_le_bytes());
            bytes
        };
        let bytes = encode_vectors(SegmentId(9), Metric::L2, 100, &keys, &vectors);
        let (starts, words) = (HEADER_LEN + 24, HEADER_LEN + 24 + 32);
        let message = |b: Vec<u8>| InsertBinlog::decode("o", &reseal(b)).unwrap_err().kind;
        // A start past its successor; a row whose header claims more
        // entries than its words hold; an index beyond the dimensions.
        let mut backwards = bytes.clone();
        backwards[starts + 8..starts + 16].copy_from_slice(&100u64.to_le_bytes());
        let mut long = bytes.clone();
        long[words + 4..words + 8].copy_from_slice(&4u32.to_le_bytes());
        let mut outside = bytes.clone();
        outside[words + 16..words + 20].copy_from_slice(&100u32.to_le_bytes());
        assert_eq!(
            message(backwards),
            FormatErrorKind::Invalid("the starts of 3 sparse rows do not run from 0 to 17".into())
        );
        for bad in [long, outside] {
            assert_eq!(message(bad), FormatErrorKind::Invalid("row 0 is not a sparse row of 100 dimensions".into()));
        }
        // A sparse element code needs version 3, and version 3 sparse rows.
        let mut dense = encode(SegmentId(1), Metric::L2, 2, &[1], Row::F32(&[1.0, 2.0]));
        dense[11] = 3;
        assert_eq!(message(dense), FormatErrorKind::Invalid("unknown element code 3 in version 1".into()));
    }

    #[test]
    fn an_empty_segment_round_trips() {
        let bytes = encode(SegmentId(5), Metric::L2, 4, &[], Row::F32(&[]));
        let b = InsertBinlog::decode("o", &bytes).unwrap();
        assert!(b.is_empty());
    }

    proptest! {
        #[test]
        fn decoder_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = InsertBinlog::decode("o", &bytes);
        }

        #[test]
        fn decoder_never_panics_on_valid_header_and_random_body(
            rows in 0u64..1000, dims in any::<u32>(), body in prop::collection::vec(any::<u8>(), 0..100),
        ) {
            let mut w = Writer(Vec::new());
            w.bytes(MAGIC).u16(VERSION).u8(1).u8(0).u32(dims).u64(rows).u64(1).u32(crc32c::crc32c(&body));
            let mut bytes = finish_header(w, HEADER_LEN);
            bytes.extend_from_slice(&body);
            let _ = InsertBinlog::decode("o", &bytes);
        }
    }
}
