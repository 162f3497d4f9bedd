//! The `vector` SQL type: a varlena laid out exactly as pgvector's, so that
//! dumps, binary COPY and client libraries move between the two unchanged.
//!
//! ```text
//! int32 vl_len_   varlena header (4-byte form once detoasted)
//! int16 dim       number of elements
//! int16 unused    always 0
//! float4 x[dim]   the elements, native byte order
//! ```
//!
//! [`PgVector`] borrows a detoasted datum; everything that computes on it
//! takes `as_slice()` and calls the core. `io.rs` holds the type's I/O and
//! casts; its operators and functions are `crate::api::operators`.

pub mod bit;
pub mod io;

use std::ptr::NonNull;

use pgrx::callconv::{ArgAbi, BoxRet, FcInfo};
use pgrx::datum::Datum;
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::prelude::*;
use pgrx::{FromDatum, IntoDatum};

#[repr(C)]
struct Header {
    vl_len: u32,
    dim: i16,
    unused: i16,
}

const HEADER_SIZE: usize = std::mem::size_of::<Header>();

/// A `vector` datum, detoasted, in a Postgres memory context.
pub struct PgVector {
    ptr: NonNull<Header>,
}

impl PgVector {
    /// Builds a new `vector` in the current memory context. The elements must
    /// already have passed `milvus_core::vector::check_elements`.
    pub fn from_slice(values: &[f32]) -> Self {
        debug_assert!(milvus_core::vector::check_elements(values).is_ok());
        let size = HEADER_SIZE + std::mem::size_of_val(values);
        unsafe {
            let ptr = pg_sys::palloc0(size) as *mut Header;
            pgrx::set_varsize_4b(ptr.cast(), size as i32);
            (*ptr).dim = values.len() as i16;
            let data = ptr.cast::<u8>().add(HEADER_SIZE).cast::<f32>();
            std::ptr::copy_nonoverlapping(values.as_ptr(), data, values.len());
            PgVector { ptr: NonNull::new_unchecked(ptr) }
        }
    }

    pub fn dims(&self) -> usize {
        unsafe { (*self.ptr.as_ptr()).dim as usize }
    }

    pub fn as_slice(&self) -> &[f32] {
        unsafe {
            let data = self.ptr.as_ptr().cast::<u8>().add(HEADER_SIZE).cast::<f32>();
            std::slice::from_raw_parts(data, self.dims())
        }
    }
}

impl FromDatum for PgVector {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _typoid: pg_sys::Oid) -> Option<Self> {
        if is_null {
            return None;
        }
        // SAFETY: a non-null datum of type vector is a varlena; detoasting
        // returns it as is when it is already plain.
        let ptr = unsafe { pg_sys::pg_detoast_datum(datum.cast_mut_ptr()) };
        NonNull::new(ptr.cast()).map(|ptr| PgVector { ptr })
    }
}

impl IntoDatum for PgVector {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(pg_sys::Datum::from(self.ptr.as_ptr()))
    }

    /// The type's OID, looked up by the function calling convention only when
    /// a vector is built into an array or a record.
    fn type_oid() -> pg_sys::Oid {
        vector_type_oid()
    }
}

/// The OID of this extension's `vector` type, wherever the extension was
/// created (its schema need not be on the search path). Operators are
/// schema-qualified, whatever the caller's search_path holds.
pub fn vector_type_oid() -> pg_sys::Oid {
    Spi::get_one::<pg_sys::Oid>(
        "SELECT t.oid FROM pg_catalog.pg_type t \
         JOIN pg_catalog.pg_extension e ON e.extnamespace OPERATOR(pg_catalog.=) t.typnamespace \
         WHERE e.extname OPERATOR(pg_catalog.=) 'pg_milvus' AND t.typname OPERATOR(pg_catalog.=) 'vector'",
    )
    .ok()
    .flatten()
    .unwrap_or(pg_sys::InvalidOid)
}

unsafe impl SqlTranslatable for PgVector {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(PgVector);
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::ThisExtension;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal("vector"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> = Ok(ReturnsRef::One(SqlMappingRef::literal("vector")));
}

unsafe impl<'fcx> ArgAbi<'fcx> for PgVector {
    unsafe fn unbox_arg_unchecked(arg: pgrx::callconv::Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        unsafe { arg.unbox_arg_using_from_datum().unwrap_or_else(|| panic!("argument {index} must not be null")) }
    }
}

unsafe impl BoxRet for PgVector {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
        unsafe { fcinfo.return_raw_datum(pg_sys::Datum::from(self.ptr.as_ptr())) }
    }
}

// The shell type, so the I/O functions can name `vector` before it is complete.
extension_sql!(
    "CREATE TYPE vector; -- shell, completed in vector_type.sql\n",
    name = "vector_shell",
    creates = [Type(PgVector)]
);
