//! Postgres' own `bit` type as a return value: what `binary_quantize`
//! builds (pgvector's quantization recipe: `binary_quantize(v)::bit(n)`, a
//! Hamming-distance search, a re-rank by the full vectors).
//!
//! ```text
//! int32 vl_len_   varlena header
//! int32 bit_len   number of bits
//! bits8 bits[]    the bits, most significant first, zero-padded
//! ```

use std::ptr::NonNull;

use pgrx::IntoDatum;
use pgrx::callconv::{BoxRet, FcInfo};
use pgrx::datum::Datum;
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::prelude::*;

/// A `bit` datum built in the current memory context.
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
}

impl IntoDatum for PgBit {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(pg_sys::Datum::from(self.ptr.as_ptr()))
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::BITOID
    }
}

unsafe impl SqlTranslatable for PgBit {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(PgBit);
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::External;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal("bit"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> = Ok(ReturnsRef::One(SqlMappingRef::literal("bit")));
}

unsafe impl BoxRet for PgBit {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
        unsafe { fcinfo.return_raw_datum(pg_sys::Datum::from(self.ptr.as_ptr())) }
    }
}
