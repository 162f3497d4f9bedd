//! Postgres' own `bit` type, read and built: what `binary_quantize` returns
//! and `hamming_distance`/`jaccard_distance` (`<~>`, `<%>`) take
//! (pgvector's quantization recipe: `binary_quantize(v)::bit(n)`, a Hamming
//! search, a re-rank by the full vectors).
//!
//! ```text
//! int32 vl_len_   varlena header
//! int32 bit_len   number of bits
//! bits8 bits[]    the bits, most significant first, zero-padded
//! ```

use std::ptr::NonNull;

use pgrx::callconv::{ArgAbi, BoxRet, FcInfo};
use pgrx::datum::Datum;
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::prelude::*;
use pgrx::{FromDatum, IntoDatum};

/// A `bit` datum: detoasted from an argument, or built in the current
/// memory context.
pub struct PgBit {
    ptr: NonNull<u8>,
}

impl PgBit {
    /// `len` bits from `bits` (most significant first, `len.div_ceil(8)` bytes).
    pub fn new(bits: &[u8], len: usize) -> Self {
        assert_eq!(bits.len(), len.div_ceil(8), "whole bytes of bits");
        let size = 2 * size_of::<i32>() + bits.len();
        // SAFETY: a fresh palloc of `size` bytes, written within them.
        unsafe {
            let ptr = pg_sys::palloc0(size).cast::<u8>();
            pgrx::set_varsize_4b(ptr.cast(), size as i32);
            ptr.add(size_of::<i32>()).cast::<i32>().write_unaligned(len as i32);
            std::ptr::copy_nonoverlapping(bits.as_ptr(), ptr.add(2 * size_of::<i32>()), bits.len());
            PgBit { ptr: NonNull::new_unchecked(ptr) }
        }
    }

    /// Its length in bits.
    pub fn bit_len(&self) -> usize {
        // SAFETY: a detoasted varbit: its bit length follows the header.
        unsafe { self.ptr.as_ptr().add(size_of::<i32>()).cast::<i32>().read_unaligned() as usize }
    }

    /// Its bits, most significant first, in whole bytes (the padding is 0).
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: a detoasted varbit holds `len.div_ceil(8)` bytes of bits
        // after its two int32 fields.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(2 * size_of::<i32>()), self.bit_len().div_ceil(8)) }
    }
}

impl FromDatum for PgBit {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _typoid: pg_sys::Oid) -> Option<Self> {
        if is_null {
            return None;
        }
        // SAFETY: a non-null bit datum is a varlena; detoasting returns it
        // as is when it is already plain.
        let ptr = unsafe { pg_sys::pg_detoast_datum(datum.cast_mut_ptr()) };
        NonNull::new(ptr.cast()).map(|ptr| PgBit { ptr })
    }
}

// SAFETY: the argument is unboxed through FromDatum, which checks for NULL.
unsafe impl<'fcx> ArgAbi<'fcx> for PgBit {
    unsafe fn unbox_arg_unchecked(arg: pgrx::callconv::Arg<'_, 'fcx>) -> Self {
        // SAFETY: pgrx passes the argument of a function declared with
        // this type.
        unsafe { super::unbox_not_null(arg) }
    }
}

impl IntoDatum for PgBit {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(pg_sys::Datum::from(self.ptr.as_ptr()))
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::BITOID
    }
}

// SAFETY: the SQL type named is the one whose datums PgBit reads.
unsafe impl SqlTranslatable for PgBit {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(PgBit);
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::External;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal("bit"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> = Ok(ReturnsRef::One(SqlMappingRef::literal("bit")));
}

// SAFETY: the result is returned as the datum of its own type.
unsafe impl BoxRet for PgBit {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
        // SAFETY: a varlena of this type in Postgres memory (an argument's,
        // or palloc'd in the call), which Postgres takes as the result.
        unsafe { fcinfo.return_raw_datum(pg_sys::Datum::from(self.ptr.as_ptr())) }
    }
}
