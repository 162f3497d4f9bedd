//! One row's filter values as the growing segment's pages keep them: after
//! the row's vector, in the same item, so a row and its values are written
//! by one WAL record and never part.
//!
//! Each value is a tag byte and its payload, little-endian: 0 NULL; 1 an
//! integer, i64; 2 a uuid, u128; 3 text, u32 length and UTF-8 bytes; 4 an
//! integer array, u32 count and i64 each; 5 a text array, u32 count and
//! each as text. Self-describing, so a page is read without the catalog.

use super::Bounded;
use crate::filter::Value;

const NULL: u8 = 0;
const INT: u8 = 1;
const UUID: u8 = 2;
const TEXT: u8 = 3;
const INTS: u8 = 4;
const TEXTS: u8 = 5;

/// The bytes of a row's filter values, in the index's column order.
pub fn encode(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    let text = |out: &mut Vec<u8>, s: &str| {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    };
    for value in values {
        match value {
            Value::Null => out.push(NULL),
            Value::Int(i) => {
                out.push(INT);
                out.extend_from_slice(&i.to_le_bytes());
            }
            Value::Uuid(u) => {
                out.push(UUID);
                out.extend_from_slice(&u.to_le_bytes());
            }
            Value::Text(s) => {
                out.push(TEXT);
                text(&mut out, s);
            }
            Value::Ints(items) => {
                out.push(INTS);
                out.extend_from_slice(&(items.len() as u32).to_le_bytes());
                items.iter().for_each(|i| out.extend_from_slice(&i.to_le_bytes()));
            }
            Value::Texts(items) => {
                out.push(TEXTS);
                out.extend_from_slice(&(items.len() as u32).to_le_bytes());
                items.iter().for_each(|s| text(&mut out, s));
            }
        }
    }
    out
}

/// The values [`encode`] wrote; an error naming what does not parse.
pub fn decode(bytes: &[u8]) -> Result<Vec<Value>, String> {
    let mut r = Bounded::new(bytes);
    let mut values = Vec::new();
    while r.left() > 0 {
        values.push(match r.u8()? {
            NULL => Value::Null,
            INT => Value::Int(r.i64()?),
            UUID => Value::Uuid(r.u128()?),
            TEXT => Value::Text(r.text()?),
            INTS => {
                let n = r.u32()?;
                Value::Ints((0..n).map(|_| r.i64()).collect::<Result<_, _>>()?)
            }
            TEXTS => {
                let n = r.u32()?;
                Value::Texts((0..n).map(|_| r.text()).collect::<Result<_, _>>()?)
            }
            other => return Err(format!("value tag {other}")),
        });
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(Value::Int),
            any::<u128>().prop_map(Value::Uuid),
            ".{0,5}".prop_map(Value::Text),
            prop::collection::vec(any::<i64>(), 0..4).prop_map(Value::Ints),
            prop::collection::vec(".{0,3}", 0..4).prop_map(Value::Texts),
        ]
    }

    proptest! {
        #[test]
        fn values_round_trip(values in prop::collection::vec(value(), 0..6)) {
            prop_assert_eq!(decode(&encode(&values)).unwrap(), values);
        }

        #[test]
        fn decoder_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(&bytes);
        }
    }

    #[test]
    fn damage_is_an_error() {
        let bytes = encode(&[Value::Text("tenant".into()), Value::Int(3)]);
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode(&[9]).unwrap_err().contains("tag 9"));
    }
}
