//! The index file: one segment's HNSW graph and its rows' codes, searched
//! in place.
//!
//! **Version 3** (written since 0.2) holds the graph as flat arrays, laid
//! out so that a reader borrows them straight from a memory-mapped file: no
//! parse, no per-node allocation, one copy per server in the OS page cache
//! whatever the number of backends searching it; then, for an index with
//! `quantization = sq8`, the rows' 8-bit codes, which the search walks the
//! graph by ([`crate::quant`]), or with `quantization = rabitq` their
//! RaBitQ codes. The vectors are not repeated here: the search reads them
//! in place from the segment's insert binlog ([`super::insert`]), mapped
//! the same way, to re-rank what it found.
//!
//! ```text
//! offset size  field
//!      0    8  magic "PGMVHNS\0"
//!      8    2  format version (3)
//!     10    1  metric code (1 = L2, 2 = inner product, 3 = cosine, 4 = L1,
//!              5 = Hamming, 6 = Jaccard)
//!     11    1  flags: bit 0 set when a merge may keep the graph and
//!              insert into it (built by insertion with the heuristic,
//!              `crate::graph::build`); 0 in files of earlier builders
//!     12    8  segment id
//!     20    8  rows (nodes; node i is row i of the insert binlog)
//!     28    4  entry node (on the top layer)
//!     32    2  m0: neighbour slots per node on layer 0
//!     34    2  m: neighbour slots per node on each upper layer
//!     36    8  upper slots (u32 entries of the upper-layer array)
//!     44    4  CRC-32C of the body
//!     48    1  codes: 0 none, 1 scalar 8-bit (sq8), 2 RaBitQ
//!     49    3  reserved, 0
//!     52    4  code dimensions d (0 without codes)
//!     56    4  reserved, 0
//!     60    4  CRC-32C of bytes 0..60
//!     64       body:
//!              levels       u8  x rows, then zeros to a multiple of 8
//!              layer0       u32 x rows * m0  (node i's list at i * m0)
//!              upper_start  u32 x rows       (u32::MAX: layer 0 only)
//!              upper        u32 x upper slots (node i's layer l >= 1 list
//!                                              at upper_start[i] + (l-1) * m)
//!              with sq8 codes:
//!              low          f32 x d          (each dimension's least value)
//!              step         f32 x d          (and the step of a level)
//!              records      rows x (d rounded up to a multiple of 4, + 4):
//!                           row i's code, a byte a dimension, zeros to the
//!                           multiple of 4, then |decoded row|² as an f32
//!              with RaBitQ codes (p: d rounded up to a multiple of 64):
//!              seed         u64              (of the rotation)
//!              centroid     f32 x d          (the rows' mean)
//!              records      rows x (p / 2 + 12): row i's code, 4 bits a
//!                           dimension in the kernel's layout, then three
//!                           f32 factors (crate::quant::rabitq)
//! ```
//!
//! **Version 2** (0.2 before codes) is version 3 with bytes 48..60 zero and
//! no codes; it is still read, and searched on its rows.
//!
//! Lists shorter than their stride are padded with `u32::MAX`. Every array
//! starts 4-aligned (8-aligned for layer0) relative to the object, so over a
//! page-aligned mapping they are borrowed in place; over an unaligned
//! buffer they are copied once.
//!
//! **Version 1** (0.1) carried hnsw_rs' two dump files (`<base>.hnsw.graph`,
//! `<base>.hnsw.data`) with one checksum:
//!
//! ```text
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
//!
//! It is still read (hnsw_rs reloads the dump, and the graph is turned into
//! a version 2 file in the local cache: `crate::jobs::load`), so an index
//! flushed by 0.1 needs no REINDEX; its next compaction rewrites it.

use std::borrow::Cow;

use super::{
    Check, FormatError, FormatErrorKind, Reader, Writer, bytes_of, check_body, check_header, column, finish_header,
};
use crate::distance::Metric;
use crate::graph::{FlatGraph, GraphParts};
use crate::quant::{Codes, RaBitQ, Sq8, rabitq, sq8};
use crate::segment::SegmentId;

pub const MAGIC: &[u8; 8] = b"PGMVHNS\0";
pub const VERSION: u16 = 3;
/// The version before codes.
pub const VERSION_FLAT: u16 = 2;
/// Codes kind: scalar 8-bit.
const CODES_SQ8: u8 = 1;
/// Codes kind: RaBitQ.
const CODES_RABITQ: u8 = 2;
pub const HEADER_LEN: usize = 64;
/// Header flag: a merge may keep the graph (see the layout).
const FLAG_REUSABLE: u8 = 1;
/// The version that carried hnsw_rs' dump.
pub const VERSION_HNSW_DUMP: u16 = 1;

/// A decoded index file, borrowing the object's bytes where aligned.
#[derive(Debug, Clone, PartialEq)]
pub enum IndexFile<'a> {
    /// Versions 2 and 3: the graph and the rows' codes, if any, ready to
    /// search.
    Flat { segment: SegmentId, metric: Metric, graph: FlatGraph<'a>, codes: Option<Codes<'a>> },
    /// Version 1: hnsw_rs' dump, to be reloaded by hnsw_rs.
    HnswDump { segment: SegmentId, rows: u64, graph: &'a [u8], data: &'a [u8] },
}

/// Encodes a segment's graph, and its rows' codes if any, as an index file
/// of the current version.
pub fn encode(segment: SegmentId, metric: Metric, graph: &FlatGraph<'_>, codes: Option<&Codes<'_>>) -> Vec<u8> {
    encode_version(VERSION, segment, metric, graph, codes)
}

/// Encodes an index file of `version` (2 without codes, or 3): tests write
/// the files of 0.2 before codes with it.
pub fn encode_version(
    version: u16,
    segment: SegmentId,
    metric: Metric,
    graph: &FlatGraph<'_>,
    codes: Option<&Codes<'_>>,
) -> Vec<u8> {
    assert!(version == VERSION || (version == VERSION_FLAT && codes.is_none()), "version 2 has no codes");
    let p = graph.parts();
    let mut out = vec![0u8; HEADER_LEN];
    out.reserve_exact(p.levels.len() + 8 + 4 * (p.layer0.len() + p.upper_start.len() + p.upper.len()));
    out.extend_from_slice(&p.levels);
    out.resize(HEADER_LEN + p.levels.len().next_multiple_of(8), 0);
    out.extend_from_slice(bytes_of(&p.layer0));
    out.extend_from_slice(bytes_of(&p.upper_start));
    out.extend_from_slice(bytes_of(&p.upper));
    match codes {
        Some(Codes::Sq8(codes)) => {
            out.extend_from_slice(bytes_of(codes.low()));
            out.extend_from_slice(bytes_of(codes.step()));
            out.extend_from_slice(codes.records());
        }
        Some(Codes::RaBitQ(codes)) => {
            out.extend_from_slice(&codes.seed().to_le_bytes());
            out.extend_from_slice(bytes_of(codes.centroid()));
            out.extend_from_slice(codes.records());
        }
        None => {}
    }
    let mut w = Writer(Vec::with_capacity(HEADER_LEN));
    w.bytes(MAGIC)
        .u16(version)
        .u8(metric.code())
        .u8(p.reusable as u8 * FLAG_REUSABLE)
        .u64(segment.0)
        .u64(p.rows as u64)
        .u32(p.entry);
    w.u16(p.m0 as u16).u16(p.m as u16).u64(p.upper.len() as u64).u32(crc32c::crc32c(&out[HEADER_LEN..]));
    let (kind, dims) = match codes {
        Some(Codes::Sq8(c)) => (CODES_SQ8, c.dims()),
        Some(Codes::RaBitQ(c)) => (CODES_RABITQ, c.dims()),
        None => (0, 0),
    };
    w.u8(kind).bytes(&[0; 3]).u32(dims as u32);
    out[..HEADER_LEN].copy_from_slice(&finish_header(w, HEADER_LEN));
    out
}

/// Encodes hnsw_rs' dump files as a version 1 index file: what 0.1 wrote.
/// Kept so that tests (and `milvus.debug_index_format`) can write the files
/// an upgraded server must still read.
pub fn encode_hnsw_dump(segment: SegmentId, rows: u64, graph: &[u8], data: &[u8]) -> Vec<u8> {
    let mut crc = crc32c::crc32c(graph);
    crc = crc32c::crc32c_append(crc, data);
    let mut w = Writer(Vec::with_capacity(HEADER_LEN + graph.len() + data.len()));
    w.bytes(MAGIC).u16(VERSION_HNSW_DUMP).u16(0).u64(segment.0).u64(rows);
    w.u64(graph.len() as u64).u64(data.len() as u64).u32(crc);
    let mut out = finish_header(w, HEADER_LEN);
    out.extend_from_slice(graph);
    out.extend_from_slice(data);
    out
}

impl<'a> IndexFile<'a> {
    /// Verifies and decodes an index file of either version; `object`
    /// names it in errors.
    pub fn decode(object: &str, bytes: &'a [u8], check: Check) -> Result<Self, FormatError> {
        let version = check_header(object, bytes, HEADER_LEN, MAGIC, "index file", VERSION)?;
        let invalid = |msg: String| FormatError::new(object, FormatErrorKind::Invalid(msg));
        let body = &bytes[HEADER_LEN..];
        if version == VERSION_HNSW_DUMP {
            let mut r = Reader::new(&bytes[12..]);
            let (segment, rows, graph_len, data_len, body_crc) =
                (SegmentId(r.u64()), r.u64(), r.u64(), r.u64(), r.u32());
            let body_len =
                graph_len.checked_add(data_len).ok_or_else(|| invalid("graph and data lengths overflow".into()))?;
            check_body(object, body, body_len, body_crc, check)?;
            let (graph, data) = body.split_at(graph_len as usize);
            return Ok(IndexFile::HnswDump { segment, rows, graph, data });
        }
        let mut r = Reader::new(&bytes[10..]);
        let metric_code = r.u8();
        let flags = r.u8();
        let segment = SegmentId(r.u64());
        let (rows, entry, m0, m, upper) = (r.u64(), r.u32(), r.u16(), r.u16(), r.u64());
        let body_crc = r.u32();
        let codes_kind = r.u8();
        let _reserved = (r.u8(), r.u16());
        let code_dims = r.u32() as u64;
        let metric =
            Metric::from_code(metric_code).ok_or_else(|| invalid(format!("unknown metric code {metric_code}")))?;
        match (version, codes_kind) {
            (VERSION_FLAT, 0) | (VERSION, 0 | CODES_SQ8 | CODES_RABITQ) => {}
            _ => return Err(invalid(format!("unknown codes kind {codes_kind} in version {version}"))),
        }
        if (codes_kind == 0) != (code_dims == 0) || code_dims > crate::vector::MAX_DIM as u64 {
            return Err(invalid(format!("codes kind {codes_kind} of {code_dims} dimensions")));
        }
        let too_big = || invalid(format!("{rows} rows with {m0} and {m} neighbours, {upper} upper slots overflow"));
        if rows >= u32::MAX as u64 {
            return Err(too_big());
        }
        let levels_len = rows.next_multiple_of(8);
        let layer0_len = rows.checked_mul(m0 as u64).and_then(|n| n.checked_mul(4)).ok_or_else(too_big)?;
        let upper_len = upper.checked_mul(4).ok_or_else(too_big)?;
        // The codes' parts before their records, and one record's bytes.
        let (codes_head, record) = match codes_kind {
            CODES_SQ8 => (8 * code_dims, sq8::record_bytes(code_dims as usize)),
            CODES_RABITQ => (8 + 4 * code_dims, rabitq::record_bytes(code_dims as usize)),
            _ => (0, 0),
        };
        let codes_len = rows.checked_mul(record as u64).ok_or_else(too_big)?;
        let body_len = [layer0_len, rows * 4, upper_len, codes_head, codes_len]
            .into_iter()
            .try_fold(levels_len, u64::checked_add)
            .ok_or_else(too_big)?;
        check_body(object, body, body_len, body_crc, check)?;
        let (levels, rest) = body.split_at(levels_len as usize);
        let (layer0, rest) = rest.split_at(layer0_len as usize);
        let (upper_start, rest) = rest.split_at(rows as usize * 4);
        let (upper_slots, rest) = rest.split_at(upper_len as usize);
        let u32s = |b: &'a [u8]| column(b, |c| u32::from_le_bytes(c.try_into().expect("chunk of 4")));
        let f32s = |b: &'a [u8]| column(b, |c| f32::from_le_bytes(c.try_into().expect("chunk of 4")));
        let d = code_dims as usize;
        let codes = match codes_kind {
            CODES_SQ8 => {
                let (low, rest) = rest.split_at(4 * d);
                let (step, records) = rest.split_at(4 * d);
                Some(Sq8::from_parts(metric, d, f32s(low), f32s(step), Cow::Borrowed(records)).map(Codes::Sq8))
            }
            CODES_RABITQ => {
                let (seed, rest) = rest.split_at(8);
                let seed = u64::from_le_bytes(seed.try_into().expect("8 bytes"));
                let (centroid, records) = rest.split_at(4 * d);
                Some(RaBitQ::from_parts(metric, d, seed, f32s(centroid), Cow::Borrowed(records)).map(Codes::RaBitQ))
            }
            _ => None,
        }
        .transpose()
        .map_err(invalid)?;
        let parts = GraphParts {
            rows: rows as usize,
            entry,
            m0: m0 as usize,
            m: m as usize,
            levels: Cow::Borrowed(&levels[..rows as usize]),
            layer0: u32s(layer0),
            upper_start: u32s(upper_start),
            upper: u32s(upper_slots),
            reusable: flags & FLAG_REUSABLE != 0,
        };
        let graph = FlatGraph::from_parts(parts).map_err(invalid)?;
        Ok(IndexFile::Flat { segment, metric, graph, codes })
    }

    pub fn segment(&self) -> SegmentId {
        match self {
            IndexFile::Flat { segment, .. } | IndexFile::HnswDump { segment, .. } => *segment,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::Row;
    use crate::format::testing::*;
    use crate::quant::Quantization;
    use proptest::prelude::*;
    use std::sync::atomic::AtomicBool;

    fn sample() -> FlatGraph<'static> {
        // 0 - 1 - 2 - 3 on layer 0, 1 and 3 on layer 1, 3 the entry.
        let nodes =
            vec![vec![vec![1]], vec![vec![0, 2], vec![3]], vec![vec![1, 3]], vec![vec![2], vec![1]], vec![vec![4]]];
        FlatGraph::from_nodes(&nodes, 3)
    }

    /// Codes of five rows of 6 dimensions: 8-bit (a record padded to 8
    /// bytes + 4) or RaBitQ (32 bytes + 12).
    fn sample_codes(quantization: Quantization, metric: Metric) -> Codes<'static> {
        let rows: Vec<f32> = (0..30).map(|i| (i * 7 % 11) as f32 - 5.0).collect();
        let rows = crate::element::Vectors::F32(Cow::Owned(rows));
        Codes::encode(quantization, metric, 6, &rows, &AtomicBool::new(false))
            .unwrap()
            .expect("L2 and cosine have codes")
    }

    #[test]
    fn round_trip_borrows_when_aligned() {
        let graph = sample();
        let (sq8, rabitq) =
            (sample_codes(Quantization::Sq8, Metric::Cosine), sample_codes(Quantization::RaBitQ, Metric::Cosine));
        for with in [None, Some(&sq8), Some(&rabitq)] {
            let bytes = encode(SegmentId(4), Metric::Cosine, &graph, with);
            let storage = Aligned::of(&bytes);
            let view = storage.bytes();
            for check in [Check::Full, Check::Header] {
                let IndexFile::Flat { segment, metric, graph: decoded, codes: decoded_codes } =
                    IndexFile::decode("o", view, check).unwrap()
                else {
                    panic!("version 3 decodes as a flat graph")
                };
                assert_eq!((segment, metric), (SegmentId(4), Metric::Cosine));
                assert!(decoded.is_borrowed(), "read in place");
                assert_eq!(decoded, graph);
                assert_eq!(decoded_codes.as_ref(), with);
                assert!(decoded_codes.is_none_or(|c| c.is_borrowed()));
            }
            let mut shifted = vec![0u8];
            shifted.extend_from_slice(&bytes);
            let IndexFile::Flat { graph: copied, codes: copied_codes, .. } =
                IndexFile::decode("o", &shifted[1..], Check::Full).unwrap()
            else {
                panic!()
            };
            assert_eq!(copied, graph, "an unaligned buffer is copied, same graph");
            assert_eq!(copied_codes.as_ref(), with);
        }
    }

    #[test]
    fn corruption_is_refused_and_the_header_check_skips_only_the_body_checksum() {
        for quantization in [Quantization::Sq8, Quantization::RaBitQ] {
            corruption_is_refused(&encode(
                SegmentId(4),
                Metric::L2,
                &sample(),
                Some(&sample_codes(quantization, Metric::L2)),
            ));
        }
    }

    fn corruption_is_refused(bytes: &[u8]) {
        let bytes = bytes.to_vec();
        every_bit_flip_is_refused(&bytes, |b| IndexFile::decode("o", b, Check::Full).map(drop));
        every_truncation_is_refused(&bytes, |b| IndexFile::decode("o", b, Check::Full).map(drop));
        every_truncation_is_refused(&bytes, |b| IndexFile::decode("o", b, Check::Header).map(drop));
        for i in 0..HEADER_LEN {
            let mut copy = bytes.clone();
            copy[i] ^= 0x10;
            assert!(IndexFile::decode("o", &copy, Check::Header).is_err(), "header byte {i}");
        }
        let mut body = bytes.clone();
        *body.last_mut().unwrap() ^= 1;
        let e = IndexFile::decode("db/1/seg/3/index-1.hnsw", &body, Check::Full).unwrap_err().to_string();
        assert!(e.starts_with("object db/1/seg/3/index-1.hnsw: body checksum mismatch"), "{e}");
        assert!(IndexFile::decode("o", &body, Check::Header).is_ok(), "the body is verified when it enters the cache");
    }

    #[test]
    fn version_2_files_still_decode_without_codes() {
        let graph = sample();
        let bytes = encode_version(VERSION_FLAT, SegmentId(4), Metric::L2, &graph, None);
        assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 2);
        let IndexFile::Flat { graph: decoded, codes, .. } = IndexFile::decode("o", &bytes, Check::Full).unwrap() else {
            panic!()
        };
        assert_eq!((decoded, codes), (graph, None));
        every_bit_flip_is_refused(&bytes, |b| IndexFile::decode("o", b, Check::Full).map(drop));
    }

    #[test]
    fn codes_for_a_metric_without_them_are_refused() {
        // An L1 file claiming codes (its header's metric byte rewritten).
        for quantization in [Quantization::Sq8, Quantization::RaBitQ] {
            let mut bad = encode(SegmentId(4), Metric::L2, &sample(), Some(&sample_codes(quantization, Metric::L2)));
            bad[10] = Metric::L1.code();
            let crc = crc32c::crc32c(&bad[..60]);
            bad[60..64].copy_from_slice(&crc.to_le_bytes());
            let e = IndexFile::decode("o", &bad, Check::Full).unwrap_err();
            assert_eq!(e.kind, FormatErrorKind::Invalid("codes for L1, which has none".into()));
        }
    }

    #[test]
    fn version_1_files_still_decode() {
        let bytes = encode_hnsw_dump(SegmentId(4), 10, b"graph bytes", b"data");
        let f = IndexFile::decode("o", &bytes, Check::Full).unwrap();
        assert_eq!(f, IndexFile::HnswDump { segment: SegmentId(4), rows: 10, graph: b"graph bytes", data: b"data" });
        every_bit_flip_is_refused(&bytes, |b| IndexFile::decode("o", b, Check::Full).map(drop));
        every_truncation_is_refused(&bytes, |b| IndexFile::decode("o", b, Check::Full).map(drop));
    }

    #[test]
    fn shapes_that_do_not_add_up_are_refused() {
        let graph = sample();
        let bytes = encode(SegmentId(4), Metric::L2, &graph, None);
        // An entry past the rows, with the header's checksum made right.
        let mut bad = bytes.clone();
        bad[28..32].copy_from_slice(&9u32.to_le_bytes());
        let crc = crc32c::crc32c(&bad[..60]);
        bad[60..64].copy_from_slice(&crc.to_le_bytes());
        let e = IndexFile::decode("o", &bad, Check::Full).unwrap_err();
        assert_eq!(e.kind, FormatErrorKind::Invalid("entry 9 of 5 rows".into()));
    }

    proptest! {
        #[test]
        fn decoder_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = IndexFile::decode("o", &bytes, Check::Full);
        }

        #[test]
        fn decoder_never_panics_on_valid_header_and_random_body(
            rows in 0u64..100, entry in 0u32..120, m0 in 0u16..8, m in 0u16..4, upper in 0u64..50, code_dims in 0u32..6,
            kind in 1u8..3,
            body in prop::collection::vec(any::<u8>(), 0..400),
        ) {
            let mut w = Writer(Vec::new());
            w.bytes(MAGIC).u16(VERSION).u8(1).u8(0).u64(1).u64(rows).u32(entry);
            w.u16(m0).u16(m).u64(upper).u32(crc32c::crc32c(&body));
            w.u8(if code_dims > 0 { kind } else { 0 }).bytes(&[0; 3]).u32(code_dims);
            let mut bytes = finish_header(w, HEADER_LEN);
            bytes.extend_from_slice(&body);
            // Whatever decodes can be searched without a panic: damage in
            // the arrays is skipped, never followed.
            if let Ok(IndexFile::Flat { graph, codes, .. }) = IndexFile::decode("o", &bytes, Check::Full) {
                if let Some(codes) = codes {
                    let prepared = codes.prepare(Row::F32(&[0.5; 5]));
                    (0..codes.rows() as u32).for_each(|r| { codes.distance(&prepared, r); });
                }
                let _ = graph.search(Metric::L2, Row::F32(&[0.5]), &|_| Row::F32(&[1.0]), 3, 8, &|r| r % 3 == 0);
            }
        }
    }
}
