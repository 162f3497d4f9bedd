//! The delta binlog: tombstones for one flushed segment.
//!
//! A tombstone is `(segment, row)`, where `row` is the row's position in the
//! segment's insert binlog: positions are stable for an immutable segment, so
//! a heap TID that VACUUM frees and a later INSERT reuses can never be hidden
//! by an old tombstone (the new row lives in another segment, or at another
//! position). Each VACUUM that deletes from a segment appends one delta
//! object; readers take the union.
//!
//! ```text
//! offset size  field
//!      0    8  magic "PGMVDEL\0"
//!      8    2  format version (1)
//!     10    2  reserved, 0
//!     12    8  segment id
//!     20    8  count
//!     28    4  CRC-32C of the body
//!     32   28  reserved, 0
//!     60    4  CRC-32C of bytes 0..60
//!     64       body: row positions, u32 x count, strictly increasing
//! ```

use super::{Check, FormatError, FormatErrorKind, Reader, Writer, check_body, check_header, finish_header};
use crate::segment::SegmentId;

pub const MAGIC: &[u8; 8] = b"PGMVDEL\0";
pub const VERSION: u16 = 1;
pub const HEADER_LEN: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeltaBinlog {
    pub segment: SegmentId,
    /// Row positions in the segment, strictly increasing.
    pub rows: Vec<u32>,
}

/// Encodes tombstones; `rows` is sorted and deduplicated here.
pub fn encode(segment: SegmentId, rows: &[u32]) -> Vec<u8> {
    let mut sorted = rows.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let body: Vec<u8> = sorted.iter().flat_map(|r| r.to_le_bytes()).collect();
    let mut w = Writer(Vec::with_capacity(HEADER_LEN + body.len()));
    w.bytes(MAGIC).u16(VERSION).u16(0).u64(segment.0).u64(sorted.len() as u64).u32(crc32c::crc32c(&body));
    let mut out = finish_header(w, HEADER_LEN);
    out.extend_from_slice(&body);
    out
}

impl DeltaBinlog {
    /// Verifies and decodes a delta binlog; `object` names it in errors.
    pub fn decode(object: &str, bytes: &[u8]) -> Result<Self, FormatError> {
        check_header(object, bytes, HEADER_LEN, MAGIC, "delta binlog", VERSION)?;
        let mut r = Reader::new(&bytes[12..]);
        let segment = SegmentId(r.u64());
        let count = r.u64();
        let body_crc = r.u32();
        let body_len = count
            .checked_mul(4)
            .ok_or_else(|| FormatError::new(object, FormatErrorKind::Invalid(format!("count {count} overflows"))))?;
        let body = &bytes[HEADER_LEN..];
        check_body(object, body, body_len, body_crc, Check::Full)?;
        let rows: Vec<u32> =
            body.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("chunk of 4"))).collect();
        if let Some(w) = rows.windows(2).find(|w| w[0] >= w[1]) {
            return Err(FormatError::new(
                object,
                FormatErrorKind::Invalid(format!("row positions not increasing: {} then {}", w[0], w[1])),
            ));
        }
        Ok(DeltaBinlog { segment, rows })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::Row;
    use crate::format::testing::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_sorts_and_dedups() {
        let bytes = encode(SegmentId(3), &[9, 1, 5, 1]);
        let d = DeltaBinlog::decode("o", &bytes).unwrap();
        assert_eq!(d, DeltaBinlog { segment: SegmentId(3), rows: vec![1, 5, 9] });
    }

    #[test]
    fn corruption_is_refused() {
        let bytes = encode(SegmentId(3), &[1, 2, 3]);
        every_bit_flip_is_refused(&bytes, |b| DeltaBinlog::decode("o", b).map(drop));
        every_truncation_is_refused(&bytes, |b| DeltaBinlog::decode("o", b).map(drop));
        let insert = crate::format::insert::encode(SegmentId(1), crate::Metric::L2, 1, &[1], Row::F32(&[1.0]));
        let e = DeltaBinlog::decode("o", &insert).unwrap_err();
        assert!(matches!(e.kind, FormatErrorKind::BadMagic { expected: "delta binlog", .. }), "{e}");
    }

    proptest! {
        #[test]
        fn decoder_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = DeltaBinlog::decode("o", &bytes);
        }

        #[test]
        fn any_tombstone_set_round_trips(rows in prop::collection::vec(any::<u32>(), 0..100)) {
            let d = DeltaBinlog::decode("o", &encode(SegmentId(1), &rows)).unwrap();
            let mut want = rows.clone();
            want.sort_unstable();
            want.dedup();
            prop_assert_eq!(d.rows, want);
        }
    }
}
