//! A datum of the type an index stores, read as the core's borrowed row
//! (`milvus_core::element::Row`): what an insert, CREATE INDEX and a scan's
//! query hand to the core, in place.

use pgrx::FromDatum;
use pgrx::pg_sys;

use super::bit::PgBit;
use super::sparse::PgSparsevec;
use super::{PgHalfvec, PgVector};

/// A vector datum as an index stores it: `vector` for an index of f32
/// elements, `halfvec` for one of f16, `bit` for one of bits, `sparsevec`
/// for one of sparse rows (the opclass fixes which).
pub enum IndexVector {
    F32(PgVector),
    F16(PgHalfvec),
    Bit(PgBit),
    Sparse(PgSparsevec),
}

impl IndexVector {
    /// Reads a non-null datum of the index's column type.
    ///
    /// # Safety
    /// `datum` is a non-null value of the type `element` stands for (the
    /// type the index's opclass was created for).
    pub unsafe fn from_datum(datum: pg_sys::Datum, element: milvus_core::element::Element) -> Self {
        use milvus_core::element::Element as Stored;
        // SAFETY: the caller's promise.
        unsafe {
            match element {
                Stored::F32 => IndexVector::F32(PgVector::from_datum(datum, false).expect("not null")),
                Stored::F16 => IndexVector::F16(PgHalfvec::from_datum(datum, false).expect("not null")),
                Stored::Bit => IndexVector::Bit(PgBit::from_datum(datum, false).expect("not null")),
                Stored::Sparse => IndexVector::Sparse(PgSparsevec::from_datum(datum, false).expect("not null")),
            }
        }
    }

    pub fn row(&self) -> milvus_core::element::Row<'_> {
        use milvus_core::element::Row;
        match self {
            IndexVector::F32(v) => Row::F32(v.as_slice()),
            IndexVector::F16(v) => Row::F16(v.as_slice()),
            IndexVector::Bit(v) => Row::Bit { bits: v.bytes(), len: v.bit_len() },
            IndexVector::Sparse(v) => Row::Sparse(v.words()),
        }
    }
}
