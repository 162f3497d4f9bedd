//! The read index of an insert binlog: what reading its rows by range
//! needs, kept in the local cache in place of the binlog.
//!
//! A segment whose rows the cache has no room for keeps only its index
//! file (graph and codes) local, and reads the rows its search re-ranks by
//! range from storage (`crate::search::segment`). To do that it needs the
//! binlog's header and keys, and a way to trust a row read on its own: the
//! binlog's one body checksum covers every row at once. This file holds
//! the binlog's header, its keys, and a CRC-32C of each row's vector. It is
//! derived from one streamed read of the whole binlog ([`Builder`]), which
//! checks the binlog's own body checksum as it goes, so every row checksum
//! comes from verified bytes; it is never written to storage.
//!
//! ```text
//! offset size  field
//!      0    8  magic "PGMVRNG\0"
//!      8    2  format version (1)
//!     10    2  reserved, 0
//!     12    8  size of the binlog object, bytes
//!     20    4  CRC-32C of the body
//!     24   36  reserved, 0
//!     60    4  CRC-32C of bytes 0..60
//!     64   64  the binlog's header, as in the binlog (its own CRC included)
//!    128       keys   u64 x rows (the binlog's)
//!              then   u32 x rows: CRC-32C of each row's vector bytes
//! ```

use std::borrow::Cow;
use std::ops::Range;

use super::insert::{self, Header};
use super::{Check, FormatError, FormatErrorKind, Reader, Writer, check_body, check_header, column, finish_header};

pub const MAGIC: &[u8; 8] = b"PGMVRNG\0";
pub const VERSION: u16 = 1;
pub const HEADER_LEN: usize = 64;

/// A decoded read index, borrowing the file's bytes where aligned.
#[derive(Debug, Clone, PartialEq)]
pub struct RowRanges<'a> {
    pub header: Header,
    keys: Cow<'a, [u64]>,
    crcs: Cow<'a, [u32]>,
}

impl<'a> RowRanges<'a> {
    /// Checks and decodes a read index; `object` names it in errors.
    pub fn decode(object: &str, bytes: &'a [u8], check: Check) -> Result<Self, FormatError> {
        check_header(object, bytes, HEADER_LEN, MAGIC, "read index", VERSION)?;
        let mut r = Reader::new(&bytes[12..]);
        let binlog_size = r.u64();
        let body_crc = r.u32();
        let invalid = |msg: String| FormatError::new(object, FormatErrorKind::Invalid(msg));
        let header = Header::decode(object, bytes.get(HEADER_LEN..).unwrap_or_default())?;
        if binlog_size != insert::HEADER_LEN as u64 + header.body_len() {
            return Err(invalid(format!(
                "a binlog of {binlog_size} bytes cannot hold {} rows of {} dimensions",
                header.rows, header.dims
            )));
        }
        let body_len = insert::HEADER_LEN as u64 + 12 * header.rows;
        let body = &bytes[HEADER_LEN..];
        check_body(object, body, body_len, body_crc, check)?;
        let (keys, crcs) = body[insert::HEADER_LEN..].split_at(8 * header.rows as usize);
        Ok(RowRanges {
            header,
            keys: column(keys, |c| u64::from_le_bytes(c.try_into().expect("chunk of 8"))),
            crcs: column(crcs, |c| u32::from_le_bytes(c.try_into().expect("chunk of 4"))),
        })
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether the columns borrow the input (no copy was made).
    pub fn is_borrowed(&self) -> bool {
        matches!((&self.keys, &self.crcs), (Cow::Borrowed(_), Cow::Borrowed(_)))
    }

    /// The binlog's keys.
    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// Where row `row`'s vector lies in the binlog object.
    pub fn range_of(&self, row: u32) -> Range<u64> {
        let bytes = self.header.row_bytes() as u64;
        let start = self.header.vectors_offset() + row as u64 * bytes;
        start..start + bytes
    }

    /// Whether `bytes`, read at [`Self::range_of`] `row`, are the row's.
    pub fn is_intact(&self, row: u32, bytes: &[u8]) -> bool {
        bytes.len() == self.header.row_bytes() && crc32c::crc32c(bytes) == self.crcs[row as usize]
    }
}

/// Derives a read index from a binlog fed to it in order, in pieces of any
/// size, checking the binlog's body checksum as it goes.
#[derive(Debug)]
pub struct Builder {
    object: String,
    /// The binlog's header, once its bytes are in.
    header: Option<Header>,
    /// Bytes fed so far, and those still held back (the header's, and the
    /// part of a row not yet whole).
    fed: u64,
    pending: Vec<u8>,
    body_crc: u32,
    out_header: Vec<u8>,
    keys: Vec<u8>,
    crcs: Vec<u8>,
}

impl Builder {
    /// A builder for the binlog `object`.
    pub fn new(object: &str) -> Self {
        Builder {
            object: object.to_owned(),
            header: None,
            fed: 0,
            pending: Vec::new(),
            body_crc: 0,
            out_header: Vec::new(),
            keys: Vec::new(),
            crcs: Vec::new(),
        }
    }

    /// The binlog's size once its header is in.
    pub fn binlog_size(&self) -> Option<u64> {
        self.header.map(|h| insert::HEADER_LEN as u64 + h.body_len())
    }

    /// Takes the binlog's next bytes.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Result<(), FormatError> {
        self.fed += bytes.len() as u64;
        let header = match self.header {
            Some(header) => header,
            None => {
                let need = insert::HEADER_LEN - self.pending.len();
                let (head, rest) = bytes.split_at(need.min(bytes.len()));
                self.pending.extend_from_slice(head);
                bytes = rest;
                if self.pending.len() < insert::HEADER_LEN {
                    return Ok(());
                }
                let header = Header::decode(&self.object, &self.pending)?;
                self.out_header = std::mem::take(&mut self.pending);
                self.header = Some(header);
                header
            }
        };
        if let Some(size) = self.binlog_size().filter(|size| self.fed > *size) {
            return Err(self.err(FormatErrorKind::Invalid(format!("more than the {size} bytes its header gives"))));
        }
        self.body_crc = crc32c::crc32c_append(self.body_crc, bytes);
        let keys_len = 8 * header.rows as usize;
        let take = (keys_len - self.keys.len()).min(bytes.len());
        self.keys.extend_from_slice(&bytes[..take]);
        bytes = &bytes[take..];
        let row = header.row_bytes();
        if !self.pending.is_empty() {
            let take = (row - self.pending.len()).min(bytes.len());
            self.pending.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.pending.len() == row {
                self.crcs.extend_from_slice(&crc32c::crc32c(&self.pending).to_le_bytes());
                self.pending.clear();
            }
        }
        let mut whole = bytes.chunks_exact(row);
        for vector in whole.by_ref() {
            self.crcs.extend_from_slice(&crc32c::crc32c(vector).to_le_bytes());
        }
        self.pending.extend_from_slice(whole.remainder());
        Ok(())
    }

    /// The read index, once the whole binlog was fed and its checksum
    /// matches its header's.
    pub fn finish(self) -> Result<Vec<u8>, FormatError> {
        let (Some(header), Some(size)) = (self.header, self.binlog_size()) else {
            return Err(self.err(FormatErrorKind::Truncated { need: insert::HEADER_LEN as u64, have: self.fed }));
        };
        if self.fed < size {
            return Err(self.err(FormatErrorKind::Truncated { need: size, have: self.fed }));
        }
        if self.body_crc != header.body_crc {
            let (stored, computed) = (header.body_crc, self.body_crc);
            return Err(self.err(FormatErrorKind::ChecksumMismatch { part: "body", stored, computed }));
        }
        let mut body = self.out_header;
        body.extend_from_slice(&self.keys);
        body.extend_from_slice(&self.crcs);
        let mut w = Writer(Vec::with_capacity(HEADER_LEN));
        w.bytes(MAGIC).u16(VERSION).u16(0).u64(size).u32(crc32c::crc32c(&body));
        let mut out = finish_header(w, HEADER_LEN);
        out.extend_from_slice(&body);
        Ok(out)
    }

    fn err(&self, kind: FormatErrorKind) -> FormatError {
        FormatError::new(&self.object, kind)
    }
}

/// The read index of a whole binlog in memory.
pub fn encode(object: &str, binlog: &[u8]) -> Result<Vec<u8>, FormatError> {
    let mut builder = Builder::new(object);
    builder.feed(binlog)?;
    builder.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distance::Metric;
    use crate::element::{Row, f16};
    use crate::format::testing::*;
    use crate::segment::SegmentId;
    use crate::synthetic::Rng;
    use proptest::prelude::*;

    fn binlog(rows: usize, dims: usize) -> Vec<u8> {
        let keys: Vec<u64> = (0..rows as u64).map(|i| i * 3 + 1).collect();
        insert::encode(SegmentId(4), Metric::L2, dims, &keys, &Rng::new(rows as u64).vector(rows * dims))
    }

    #[test]
    fn every_row_read_by_its_range_checks_out() {
        let bytes = binlog(50, 7);
        let index = encode("b", &bytes).unwrap();
        let ranges = RowRanges::decode("r", &index, Check::Full).unwrap();
        let whole = insert::InsertBinlog::decode("b", &bytes).unwrap();
        assert_eq!((ranges.keys(), ranges.len()), (whole.keys(), 50));
        for row in 0..50u32 {
            let range = ranges.range_of(row);
            let read = &bytes[range.start as usize..range.end as usize];
            assert_eq!(read, whole.vector(row as usize).bytes());
            assert!(ranges.is_intact(row, read));
            let mut damaged = read.to_vec();
            damaged[row as usize % read.len()] ^= 0x10;
            assert!(!ranges.is_intact(row, &damaged) && !ranges.is_intact(row, &read[1..]));
        }
    }

    #[test]
    fn half_rows_and_pieces_of_any_size_give_one_index() {
        let halves: Vec<f16> = Rng::new(2).vector(30 * 5).iter().map(|v| f16::from_f32(*v)).collect();
        let keys: Vec<u64> = (0..30).collect();
        let bytes = insert::encode(SegmentId(9), Metric::Cosine, 5, &keys, Row::F16(&halves));
        let whole = encode("b", &bytes).unwrap();
        for piece in [1, 3, 7, 64, 65, 1000] {
            let mut builder = Builder::new("b");
            for chunk in bytes.chunks(piece) {
                builder.feed(chunk).unwrap();
            }
            assert_eq!(builder.finish().unwrap(), whole, "pieces of {piece}");
        }
        let ranges = RowRanges::decode("r", &whole, Check::Full).unwrap();
        assert_eq!(ranges.range_of(29).end, bytes.len() as u64);
    }

    #[test]
    fn a_damaged_or_cut_binlog_makes_no_index() {
        let bytes = binlog(10, 4);
        let mut flipped = bytes.clone();
        flipped[200] ^= 1;
        let e = encode("b", &flipped).unwrap_err();
        assert!(matches!(e.kind, FormatErrorKind::ChecksumMismatch { part: "body", .. }), "{e}");
        let e = encode("b", &bytes[..bytes.len() - 1]).unwrap_err();
        assert!(matches!(e.kind, FormatErrorKind::Truncated { .. }), "{e}");
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(encode("b", &longer).is_err());
        assert!(encode("b", &bytes[..10]).is_err());
    }

    #[test]
    fn corruption_of_the_index_is_refused() {
        let index = encode("b", &binlog(6, 3)).unwrap();
        every_bit_flip_is_refused(&index, |b| RowRanges::decode("r", b, Check::Full).map(drop));
        every_truncation_is_refused(&index, |b| RowRanges::decode("r", b, Check::Full).map(drop));
    }

    proptest! {
        #[test]
        fn decoder_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let _ = RowRanges::decode("r", &bytes, Check::Full);
            let _ = encode("b", &bytes);
        }
    }
}
