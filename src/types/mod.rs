//! The `vector` and `halfvec` SQL types: varlenas laid out exactly as
//! pgvector's, so that dumps, binary COPY and client libraries move between
//! the two unchanged.
//!
//! ```text
//! int32 vl_len_   varlena header (4-byte form once detoasted)
//! int16 dim       number of elements
//! int16 unused    always 0
//! x[dim]          the elements, native byte order: float4 (vector) or
//!                 IEEE half (halfvec)
//! ```
//!
//! [`PgVector`] and [`PgHalfvec`] borrow a detoasted datum; everything that
//! computes on them takes `as_slice()` (or `to_f32()`) and calls the core.
//! `io.rs` holds the types' I/O and casts; their operators and functions
//! are `crate::api::operators` and `crate::api::halfvec`. `indexed.rs`
//! reads a datum of any of the indexed types (these, `bit` and `sparsevec`)
//! as the row an index stores.

pub mod bit;
pub mod indexed;
pub mod io;
pub mod scalar;
pub mod sparse;

use std::marker::PhantomData;
use std::ptr::NonNull;

use milvus_core::vector::f16;
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

/// The element of a packed vector type: `f32` for `vector`, `f16` for
/// `halfvec` (pgvector's two dense types share this layout).
pub trait Element: Copy + 'static {
    /// The SQL type's name.
    const SQL: &'static str;
}

impl Element for f32 {
    const SQL: &'static str = "vector";
}

impl Element for f16 {
    const SQL: &'static str = "halfvec";
}

/// A `vector` or `halfvec` datum, detoasted, in a Postgres memory context.
pub struct Packed<E> {
    ptr: NonNull<Header>,
    element: PhantomData<E>,
}

/// A `vector` datum.
pub type PgVector = Packed<f32>;
/// A `halfvec` datum.
pub type PgHalfvec = Packed<f16>;

impl<E: Element> Packed<E> {
    /// Builds a new datum in the current memory context. The elements must
    /// already have passed the core's checks (`milvus_core::vector`).
    pub fn from_slice(values: &[E]) -> Self {
        let size = HEADER_SIZE + std::mem::size_of_val(values);
        // SAFETY: a fresh palloc of `size` bytes, written within them.
        unsafe {
            let ptr = pg_sys::palloc0(size) as *mut Header;
            pgrx::set_varsize_4b(ptr.cast(), size as i32);
            (*ptr).dim = values.len() as i16;
            let data = ptr.cast::<u8>().add(HEADER_SIZE).cast::<E>();
            std::ptr::copy_nonoverlapping(values.as_ptr(), data, values.len());
            Packed { ptr: NonNull::new_unchecked(ptr), element: PhantomData }
        }
    }

    pub fn dims(&self) -> usize {
        // SAFETY: a detoasted datum of this layout.
        unsafe { (*self.ptr.as_ptr()).dim as usize }
    }

    pub fn as_slice(&self) -> &[E] {
        // SAFETY: `dims` elements follow the header; the header is 8 bytes,
        // so they are aligned for f32 and f16.
        unsafe {
            let data = self.ptr.as_ptr().cast::<u8>().add(HEADER_SIZE).cast::<E>();
            std::slice::from_raw_parts(data, self.dims())
        }
    }
}

impl PgHalfvec {
    /// The elements, widened to f32 (exactly).
    pub fn to_f32(&self) -> Vec<f32> {
        milvus_core::vector::from_half(self.as_slice())
    }
}

impl<E: Element> FromDatum for Packed<E> {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _typoid: pg_sys::Oid) -> Option<Self> {
        if is_null {
            return None;
        }
        // SAFETY: a non-null datum of this type is a varlena; detoasting
        // returns it as is when it is already plain.
        let ptr = unsafe { pg_sys::pg_detoast_datum(datum.cast_mut_ptr()) };
        NonNull::new(ptr.cast()).map(|ptr| Packed { ptr, element: PhantomData })
    }
}

impl<E: Element> IntoDatum for Packed<E> {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(pg_sys::Datum::from(self.ptr.as_ptr()))
    }

    /// The type's OID, looked up by the function calling convention only when
    /// a value is built into an array or a record.
    fn type_oid() -> pg_sys::Oid {
        type_oid(E::SQL)
    }
}

/// The OID of this extension's `vector` type.
pub fn vector_type_oid() -> pg_sys::Oid {
    type_oid("vector")
}

/// The OID of this extension's type `name`, wherever the extension was
/// created (its schema need not be on the search path). Operators are
/// schema-qualified, whatever the caller's search_path holds.
fn type_oid(name: &str) -> pg_sys::Oid {
    Spi::get_one_with_args::<pg_sys::Oid>(
        "SELECT t.oid FROM pg_catalog.pg_type t \
         JOIN pg_catalog.pg_extension e ON e.extnamespace OPERATOR(pg_catalog.=) t.typnamespace \
         WHERE e.extname OPERATOR(pg_catalog.=) 'pg_milvus' AND t.typname OPERATOR(pg_catalog.=) $1",
        &[name.into()],
    )
    .ok()
    .flatten()
    .unwrap_or(pg_sys::InvalidOid)
}

// SAFETY: the SQL type named is the one whose datums PgVector reads.
unsafe impl SqlTranslatable for PgVector {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(PgVector);
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::ThisExtension;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal("vector"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> = Ok(ReturnsRef::One(SqlMappingRef::literal("vector")));
}

// SAFETY: the SQL type named is the one whose datums PgHalfvec reads.
unsafe impl SqlTranslatable for PgHalfvec {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(PgHalfvec);
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::ThisExtension;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal("halfvec"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> = Ok(ReturnsRef::One(SqlMappingRef::literal("halfvec")));
}

/// A non-NULL argument of one of the extension's types, through its
/// FromDatum. The functions taking these types are STRICT, so Postgres
/// never passes a NULL; one that came anyway is refused, never read.
///
/// # Safety
/// `arg` is an argument of a function declared with type `T`.
unsafe fn unbox_not_null<'fcx, T: FromDatum>(arg: pgrx::callconv::Arg<'_, 'fcx>) -> T {
    let index = arg.index();
    // SAFETY: the caller's; FromDatum checks for NULL.
    unsafe { arg.unbox_arg_using_from_datum() }.unwrap_or_else(|| {
        crate::error::raise(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            format!("argument {index} must not be null"),
            None,
            None,
        )
    })
}

// SAFETY: the argument is unboxed through FromDatum, which checks for NULL.
unsafe impl<'fcx, E: Element> ArgAbi<'fcx> for Packed<E> {
    unsafe fn unbox_arg_unchecked(arg: pgrx::callconv::Arg<'_, 'fcx>) -> Self {
        // SAFETY: pgrx passes the argument of a function declared with
        // this type.
        unsafe { unbox_not_null(arg) }
    }
}

// SAFETY: the result is returned as the datum of its own type.
unsafe impl<E: Element> BoxRet for Packed<E> {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
        // SAFETY: a varlena of this type in Postgres memory (an argument's,
        // or palloc'd in the call), which Postgres takes as the result.
        unsafe { fcinfo.return_raw_datum(pg_sys::Datum::from(self.ptr.as_ptr())) }
    }
}

// The shell types, so the I/O functions can name them before they are complete.
extension_sql!(
    "CREATE TYPE vector; -- shell, completed in vector_type.sql\n",
    name = "vector_shell",
    creates = [Type(PgVector)]
);
extension_sql!(
    "CREATE TYPE halfvec; -- shell, completed in halfvec_type.sql\n",
    name = "halfvec_shell",
    creates = [Type(PgHalfvec)]
);
