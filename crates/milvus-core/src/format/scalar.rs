//! The scalar binlog: one sealed segment's filter columns (those of a
//! multicolumn index after its vector), row for row with its insert binlog,
//! as Milvus writes a binlog per scalar field beside the vector field's.
//!
//! ```text
//! offset size  field
//!      0    8  magic "PGMVSCL\0"
//!      8    2  format version (1)
//!     10    2  columns
//!     12    4  reserved, 0
//!     16    8  rows
//!     24    8  segment id
//!     32    8  body length
//!     40    4  CRC-32C of the body
//!     44   16  reserved, 0
//!     60    4  CRC-32C of bytes 0..60
//!     64       body: the columns in order, each
//!                u8 type (1 integer, 2 uuid, 3 text, 4 integer array,
//!                   5 text array)
//!                nulls  u64 x ceil(rows / 64), bit r of word r / 64 set
//!                       for a NULL row; no bit past the rows
//!              then by type:
//!                1: i64 x rows (0 for a NULL row)
//!                2: u128 x rows (the uuid's bytes read big-endian)
//!                3: dictionary; codes u32 x rows
//!                4: offsets u32 x (rows + 1), from 0, non-decreasing;
//!                   the elements i64 x offsets[rows]
//!                5: dictionary; offsets as 4; codes u32 x offsets[rows]
//!              a dictionary: u32 n, then offsets u32 x (n + 1), from 0,
//!              non-decreasing, then the strings' UTF-8 bytes, string i
//!              being bytes[offsets[i]..offsets[i + 1]]; strictly ascending
//!              by bytes; every code below n
//! ```
//!
//! Columns are small beside the rows (8 bytes a row for an integer, against
//! 512 for a 128-d vector), so a reader copies them into a
//! [`Column`] rather than reading them in place.

use super::{Bounded, Check, FormatError, FormatErrorKind, Reader, Writer, check_body, check_header, finish_header};
use crate::filter::{Bitset, Column};
use crate::segment::SegmentId;

pub const MAGIC: &[u8; 8] = b"PGMVSCL\0";
pub const VERSION: u16 = 1;
pub const HEADER_LEN: usize = 64;

const INT: u8 = 1;
const UUID: u8 = 2;
const TEXT: u8 = 3;
const INT_ARRAY: u8 = 4;
const TEXT_ARRAY: u8 = 5;

/// A decoded scalar binlog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalarBinlog {
    pub segment: SegmentId,
    pub columns: Vec<Column>,
}

/// Encodes a segment's filter columns, each of `rows` rows.
pub fn encode(segment: SegmentId, rows: usize, columns: &[Column]) -> Vec<u8> {
    let mut body = Writer(Vec::new());
    for column in columns {
        assert_eq!(column.rows(), rows, "a column of every row");
        let (code, nulls) = match column {
            Column::Int { nulls, .. } => (INT, nulls),
            Column::Uuid { nulls, .. } => (UUID, nulls),
            Column::Text { nulls, .. } => (TEXT, nulls),
            Column::IntArray { nulls, .. } => (INT_ARRAY, nulls),
            Column::TextArray { nulls, .. } => (TEXT_ARRAY, nulls),
        };
        body.u8(code);
        nulls.words().iter().for_each(|w| _ = body.u64(*w));
        match column {
            Column::Int { values, .. } => values.iter().for_each(|v| _ = body.u64(*v as u64)),
            Column::Uuid { values, .. } => values.iter().for_each(|v| _ = body.bytes(&v.to_le_bytes())),
            Column::Text { dict, codes, .. } => {
                dictionary(&mut body, dict);
                codes.iter().for_each(|c| _ = body.u32(*c));
            }
            Column::IntArray { offsets, values, .. } => {
                offsets.iter().for_each(|o| _ = body.u32(*o));
                values.iter().for_each(|v| _ = body.u64(*v as u64));
            }
            Column::TextArray { dict, offsets, codes, .. } => {
                dictionary(&mut body, dict);
                offsets.iter().for_each(|o| _ = body.u32(*o));
                codes.iter().for_each(|c| _ = body.u32(*c));
            }
        }
    }
    let body = body.0;
    let mut w = Writer(Vec::with_capacity(HEADER_LEN + body.len()));
    w.bytes(MAGIC).u16(VERSION).u16(columns.len() as u16).u32(0).u64(rows as u64).u64(segment.0);
    w.u64(body.len() as u64).u32(crc32c::crc32c(&body));
    let mut out = finish_header(w, HEADER_LEN);
    out.extend_from_slice(&body);
    out
}

fn dictionary(body: &mut Writer, dict: &[String]) {
    body.u32(dict.len() as u32);
    let mut at = 0u32;
    body.u32(0);
    for s in dict {
        at += s.len() as u32;
        body.u32(at);
    }
    dict.iter().for_each(|s| _ = body.bytes(s.as_bytes()));
}

impl ScalarBinlog {
    /// Verifies and decodes a scalar binlog; `object` names it in errors.
    pub fn decode(object: &str, bytes: &[u8]) -> Result<Self, FormatError> {
        check_header(object, bytes, HEADER_LEN, MAGIC, "scalar binlog", VERSION)?;
        let mut r = Reader::new(&bytes[10..]);
        let count = r.u16() as usize;
        r.u32();
        let rows = r.u64();
        let segment = SegmentId(r.u64());
        let body_len = r.u64();
        let body_crc = r.u32();
        let body = &bytes[HEADER_LEN..];
        check_body(object, body, body_len, body_crc, Check::Full)?;
        let invalid = |message: String| FormatError::new(object, FormatErrorKind::Invalid(message));
        // Each column has a bit a row at least: a row count the body
        // cannot hold is refused before anything is allocated for it.
        let rows = usize::try_from(rows)
            .ok()
            .filter(|r| count == 0 || *r <= body.len() * 8)
            .ok_or_else(|| invalid(format!("{rows} rows cannot fit in a body of {} bytes", body.len())))?;
        let mut body = Body(Bounded::new(body));
        let columns = (0..count)
            .map(|i| body.column(rows).map_err(|e| invalid(format!("column {}: {e}", i + 1))))
            .collect::<Result<Vec<_>, _>>()?;
        if body.0.left() > 0 {
            return Err(invalid(format!("{} bytes after the last column", body.0.left())));
        }
        Ok(ScalarBinlog { segment, columns })
    }
}

/// The body's reader, with the shapes of its columns.
struct Body<'a>(Bounded<'a>);

impl Body<'_> {
    fn offsets(&mut self, count: usize) -> Result<Vec<u32>, String> {
        let offsets = self.0.u32s(count + 1)?;
        if offsets[0] != 0 || offsets.windows(2).any(|w| w[0] > w[1]) {
            return Err("offsets not ascending from 0".into());
        }
        Ok(offsets)
    }

    fn dictionary(&mut self) -> Result<Vec<String>, String> {
        let n = self.0.u32()? as usize;
        let offsets = self.offsets(n)?;
        let bytes = self.0.take(offsets[n] as usize)?;
        let dict = offsets
            .windows(2)
            .map(|w| String::from_utf8(bytes[w[0] as usize..w[1] as usize].to_vec()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| "a dictionary string is not UTF-8")?;
        if dict.windows(2).any(|w| w[0] >= w[1]) {
            return Err("the dictionary is not strictly ascending".into());
        }
        Ok(dict)
    }

    fn column(&mut self, rows: usize) -> Result<Column, String> {
        let code = self.0.u8()?;
        let nulls = Bitset::from_words(self.0.u64s(rows.div_ceil(64))?, rows).ok_or("a NULL bit past the rows")?;
        let codes_below = |codes: &[u32], n: usize, present: &dyn Fn(usize) -> bool| match codes
            .iter()
            .enumerate()
            .find(|(i, c)| present(*i) && **c as usize >= n)
        {
            Some((_, c)) => Err(format!("code {c} outside a dictionary of {n}")),
            None => Ok(()),
        };
        Ok(match code {
            INT => Column::ints(self.0.i64s(rows)?, nulls),
            UUID => {
                let values = self.0.words::<16>(rows)?.into_iter().map(u128::from_le_bytes).collect();
                Column::Uuid { values, nulls }
            }
            TEXT => {
                let dict = self.dictionary()?;
                let codes = self.0.u32s(rows)?;
                codes_below(&codes, dict.len(), &|r| !nulls.contains(r))?;
                Column::Text { dict, codes, nulls }
            }
            INT_ARRAY => {
                let offsets = self.offsets(rows)?;
                let values = self.0.i64s(offsets[rows] as usize)?;
                Column::IntArray { offsets, values, nulls }
            }
            TEXT_ARRAY => {
                let dict = self.dictionary()?;
                let offsets = self.offsets(rows)?;
                let codes = self.0.u32s(offsets[rows] as usize)?;
                codes_below(&codes, dict.len(), &|_| true)?;
                Column::TextArray { dict, offsets, codes, nulls }
            }
            other => return Err(format!("unknown column type {other}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::{ColumnType, Value};
    use crate::format::testing::*;
    use proptest::prelude::*;

    fn columns() -> Vec<Column> {
        let build = |kind, values: Vec<Value>| Column::build(kind, &values).unwrap();
        let texts = |s: &[&str]| Value::Texts(s.iter().map(|s| s.to_string()).collect());
        vec![
            build(ColumnType::Int, vec![Value::Int(-5), Value::Null, Value::Int(i64::MAX)]),
            build(ColumnType::Uuid, vec![Value::Uuid(u128::MAX - 1), Value::Uuid(7), Value::Null]),
            build(ColumnType::Text, vec![Value::Text("b".into()), Value::Null, Value::Text("ä".into())]),
            build(ColumnType::IntArray, vec![Value::Ints(vec![1, 2]), Value::Ints(vec![]), Value::Null]),
            build(ColumnType::TextArray, vec![texts(&["x", "y"]), Value::Null, texts(&["y"])]),
        ]
    }

    #[test]
    fn every_column_type_round_trips() {
        let bytes = encode(SegmentId(9), 3, &columns());
        let decoded = ScalarBinlog::decode("o", &bytes).unwrap();
        assert_eq!(decoded, ScalarBinlog { segment: SegmentId(9), columns: columns() });
        let empty = ScalarBinlog::decode("o", &encode(SegmentId(1), 0, &[])).unwrap();
        assert!(empty.columns.is_empty());
    }

    #[test]
    fn corruption_is_refused() {
        let bytes = encode(SegmentId(9), 3, &columns());
        every_bit_flip_is_refused(&bytes, |b| ScalarBinlog::decode("o", b).map(drop));
        every_truncation_is_refused(&bytes, |b| ScalarBinlog::decode("o", b).map(drop));
    }

    /// A writer's mistake the checksums cannot see (the body checksummed
    /// after it) is refused by the field checks.
    #[test]
    fn inconsistent_fields_are_refused() {
        let rewrite = |column: Column| {
            let bytes = encode(SegmentId(1), column.rows(), &[column]);
            ScalarBinlog::decode("o", &bytes).unwrap_err().to_string()
        };
        let nulls = Bitset::none(2);
        let dict = vec!["b".to_string(), "a".to_string()];
        let e = rewrite(Column::Text { dict, codes: vec![0, 1], nulls: nulls.clone() });
        assert!(e.contains("not strictly ascending"), "{e}");
        let e = rewrite(Column::Text { dict: vec!["a".into()], codes: vec![0, 3], nulls: nulls.clone() });
        assert!(e.contains("code 3 outside a dictionary of 1"), "{e}");
        let e = rewrite(Column::IntArray { offsets: vec![0, 2, 1], values: vec![1, 2], nulls });
        assert!(e.contains("offsets not ascending"), "{e}");
    }

    fn value(kind: ColumnType) -> impl Strategy<Value = Value> {
        let text = "[a-c]{0,3}";
        let present = match kind {
            ColumnType::Int => any::<i64>().prop_map(Value::Int).boxed(),
            ColumnType::Uuid => any::<u128>().prop_map(Value::Uuid).boxed(),
            ColumnType::Text => text.prop_map(Value::Text).boxed(),
            ColumnType::IntArray => prop::collection::vec(any::<i64>(), 0..4).prop_map(Value::Ints).boxed(),
            ColumnType::TextArray => prop::collection::vec(text, 0..4).prop_map(Value::Texts).boxed(),
        };
        prop_oneof![1 => Just(Value::Null), 4 => present]
    }

    /// A column of `rows` rows of any type.
    fn column(rows: usize) -> impl Strategy<Value = Column> {
        prop_oneof![
            Just(ColumnType::Int),
            Just(ColumnType::Uuid),
            Just(ColumnType::Text),
            Just(ColumnType::IntArray),
            Just(ColumnType::TextArray),
        ]
        .prop_flat_map(move |kind| {
            prop::collection::vec(value(kind), rows).prop_map(move |values| Column::build(kind, &values).unwrap())
        })
    }

    proptest! {
        #[test]
        fn decoder_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let _ = ScalarBinlog::decode("o", &bytes);
        }

        #[test]
        fn any_columns_round_trip(
            (rows, columns) in (0usize..70).prop_flat_map(|rows| (Just(rows), prop::collection::vec(column(rows), 0..4)))
        ) {
            let decoded = ScalarBinlog::decode("o", &encode(SegmentId(2), rows, &columns)).unwrap();
            prop_assert_eq!(decoded.columns, columns);
        }
    }
}
