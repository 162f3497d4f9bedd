//! Vectors on the wire: a query vector as a binary parameter of the
//! column's type (as pgvector's clients send them), and the text form
//! COPY takes.

use std::fmt::Write as _;

use bytes::{BufMut, BytesMut};
use milvus_core::element::f16;
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};

pub(crate) fn text(v: &[f32]) -> String {
    let mut s = String::with_capacity(v.len() * 10);
    s.push('[');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        write!(s, "{x}").unwrap();
    }
    s.push(']');
    s
}

/// A query vector as a parameter of the column's type, sent in the
/// binary form `vector_recv` and `halfvec_recv` read (int16 dimensions,
/// int16 unused, the elements in network byte order), as pgvector's
/// clients send it: parsed once at bind. A text parameter cast in SQL
/// (`CAST($1::text AS vector)`) is parsed again for every row a generic
/// plan returns, because the distance in the ORDER BY is also projected.
pub(crate) struct QueryVector<'a>(pub(crate) &'a [f32]);

impl std::fmt::Debug for QueryVector<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-d query vector", self.0.len())
    }
}

impl ToSql for QueryVector<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.put_i16(i16::try_from(self.0.len())?);
        out.put_i16(0);
        match ty.name() {
            "halfvec" => self.0.iter().for_each(|x| out.put_u16(f16::from_f32(*x).to_bits())),
            _ => self.0.iter().for_each(|x| out.put_f32(*x)),
        }
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        matches!(ty.name(), "vector" | "halfvec")
    }

    to_sql_checked!();
}

// ---------------------------------------------------------------- targets
