//! The index file: one segment's HNSW graph, packaged as one object.
//!
//! hnsw_rs dumps an index as two files, `<base>.hnsw.graph` and
//! `<base>.hnsw.data`; this container carries both with one checksum, so an
//! index in object storage is a single immutable object like the binlogs.
//!
//! ```text
//! offset size  field
//!      0    8  magic "PGMVHNS\0"
//!      8    2  format version (1)
//!     10    2  reserved, 0
//!     12    8  segment id
//!     20    8  rows indexed
//!     28    8  graph length
//!     36    8  data length
//!     44    4  CRC-32C of the body
//!     48   12  reserved, 0
//!     60    4  CRC-32C of bytes 0..60
//!     64       body: the graph file, then the data file
//! ```

use super::{FormatError, FormatErrorKind, Reader, Writer, check_body, check_header, finish_header};
use crate::segment::SegmentId;

pub const MAGIC: &[u8; 8] = b"PGMVHNS\0";
pub const VERSION: u16 = 1;
pub const HEADER_LEN: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexFile<'a> {
    pub segment: SegmentId,
    pub rows: u64,
    pub graph: &'a [u8],
    pub data: &'a [u8],
}

pub fn encode(segment: SegmentId, rows: u64, graph: &[u8], data: &[u8]) -> Vec<u8> {
    let mut crc = crc32c::crc32c(graph);
    crc = crc32c::crc32c_append(crc, data);
    let mut w = Writer(Vec::with_capacity(HEADER_LEN + graph.len() + data.len()));
    w.bytes(MAGIC).u16(VERSION).u16(0).u64(segment.0).u64(rows);
    w.u64(graph.len() as u64).u64(data.len() as u64).u32(crc);
    let mut out = finish_header(w, HEADER_LEN);
    out.extend_from_slice(graph);
    out.extend_from_slice(data);
    out
}

impl<'a> IndexFile<'a> {
    pub fn decode(object: &str, bytes: &'a [u8]) -> Result<Self, FormatError> {
        check_header(object, bytes, HEADER_LEN, MAGIC, "index file", VERSION)?;
        let mut r = Reader::new(&bytes[12..]);
        let segment = SegmentId(r.u64());
        let rows = r.u64();
        let graph_len = r.u64();
        let data_len = r.u64();
        let body_crc = r.u32();
        let body_len = graph_len.checked_add(data_len).ok_or_else(|| {
            FormatError::new(object, FormatErrorKind::Invalid("graph and data lengths overflow".into()))
        })?;
        let body = &bytes[HEADER_LEN..];
        check_body(object, body, body_len, body_crc)?;
        let (graph, data) = body.split_at(graph_len as usize);
        Ok(IndexFile { segment, rows, graph, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::testing::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_corruption() {
        let bytes = encode(SegmentId(4), 10, b"graph bytes", b"data");
        let f = IndexFile::decode("o", &bytes).unwrap();
        assert_eq!((f.segment, f.rows, f.graph, f.data), (SegmentId(4), 10, &b"graph bytes"[..], &b"data"[..]));
        every_bit_flip_is_refused(&bytes, |b| IndexFile::decode("o", b).map(drop));
        every_truncation_is_refused(&bytes, |b| IndexFile::decode("o", b).map(drop));
    }

    proptest! {
        #[test]
        fn decoder_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = IndexFile::decode("o", &bytes);
        }
    }
}
