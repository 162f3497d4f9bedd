//! The `sparsevec` SQL type: a varlena laid out exactly as pgvector's, its
//! I/O (text, binary, the `sparsevec(n)` modifier) and its casts to and
//! from `vector`, `halfvec` and arrays.
//!
//! ```text
//! int32 vl_len_   varlena header (4-byte form once detoasted)
//! int32 dim       number of dimensions
//! int32 nnz       number of non-zero entries
//! int32 unused    always 0
//! int32 indices[nnz]   0-based, strictly ascending
//! float4 values[nnz]   finite, non-zero, native byte order
//! ```
//!
//! Parsing, checks and arithmetic live in `milvus_core::sparse`; the
//! operators and functions are `crate::api::sparsevec`.

use std::ffi::CStr;
use std::fmt::Write as _;
use std::ptr::NonNull;

use milvus_core::sparse::{self, Sparse, SparseVec};
use milvus_core::vector;
use pgrx::AnyNumeric;
use pgrx::callconv::{ArgAbi, BoxRet, FcInfo};
use pgrx::datum::{Datum, Internal};
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::prelude::*;
use pgrx::{FromDatum, IntoDatum};

use super::io::{
    FLOAT_SHORTEST_DECIMAL_LEN, OutputText, declared_dims, doubles, input_text, integers, numerics, reals, received,
    typmod_items,
};
use super::{PgHalfvec, PgVector};
use crate::error::OrRaise;

#[repr(C)]
struct Header {
    vl_len: u32,
    dim: i32,
    nnz: i32,
    unused: i32,
}

const HEADER_SIZE: usize = std::mem::size_of::<Header>();

/// A `sparsevec` datum, detoasted, in a Postgres memory context.
pub struct PgSparsevec {
    ptr: NonNull<Header>,
}

impl PgSparsevec {
    /// Builds a new datum in the current memory context from parts that
    /// passed the core's checks.
    pub fn new(v: Sparse) -> Self {
        let nnz = v.indices.len();
        let size = HEADER_SIZE + 8 * nnz;
        // SAFETY: a fresh palloc of `size` bytes, written within them; the
        // indices and values are 4-byte aligned after the 16-byte header.
        unsafe {
            let ptr = pg_sys::palloc0(size) as *mut Header;
            pgrx::set_varsize_4b(ptr.cast(), size as i32);
            (*ptr).dim = v.dim as i32;
            (*ptr).nnz = nnz as i32;
            let indices = ptr.cast::<u8>().add(HEADER_SIZE).cast::<i32>();
            std::ptr::copy_nonoverlapping(v.indices.as_ptr(), indices, nnz);
            std::ptr::copy_nonoverlapping(v.values.as_ptr(), indices.add(nnz).cast::<f32>(), nnz);
            PgSparsevec { ptr: NonNull::new_unchecked(ptr) }
        }
    }

    pub fn from_vec(v: &SparseVec) -> Self {
        Self::new(v.view())
    }

    /// The datum after its varlena header, as 4-byte words: what an index
    /// stores of it (`milvus_core::element::sparse_words`), in place.
    pub fn words(&self) -> &[u32] {
        // SAFETY: a detoasted datum of this layout: after `vl_len`, three
        // header words and `nnz` indices and `nnz` values, 4-byte aligned.
        unsafe {
            let nnz = (*self.ptr.as_ptr()).nnz.max(0) as usize;
            std::slice::from_raw_parts(self.ptr.as_ptr().cast::<u32>().add(1), 3 + 2 * nnz)
        }
    }

    /// Its parts, in place.
    pub fn view(&self) -> Sparse<'_> {
        // SAFETY: a detoasted datum of this layout: `nnz` indices, then
        // `nnz` values, after the header.
        unsafe {
            let header = &*self.ptr.as_ptr();
            let nnz = header.nnz.max(0) as usize;
            let indices = self.ptr.as_ptr().cast::<u8>().add(HEADER_SIZE).cast::<i32>();
            Sparse {
                dim: header.dim.max(0) as usize,
                indices: std::slice::from_raw_parts(indices, nnz),
                values: std::slice::from_raw_parts(indices.add(nnz).cast::<f32>(), nnz),
            }
        }
    }
}

impl FromDatum for PgSparsevec {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _typoid: pg_sys::Oid) -> Option<Self> {
        if is_null {
            return None;
        }
        // SAFETY: a non-null datum of this type is a varlena; detoasting
        // returns it as is when it is already plain.
        let ptr = unsafe { pg_sys::pg_detoast_datum(datum.cast_mut_ptr()) };
        NonNull::new(ptr.cast()).map(|ptr| PgSparsevec { ptr })
    }
}

impl IntoDatum for PgSparsevec {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(pg_sys::Datum::from(self.ptr.as_ptr()))
    }

    fn type_oid() -> pg_sys::Oid {
        super::type_oid("sparsevec")
    }
}

// SAFETY: the SQL type named is the one whose datums PgSparsevec reads.
unsafe impl SqlTranslatable for PgSparsevec {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(PgSparsevec);
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::ThisExtension;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal("sparsevec"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> = Ok(ReturnsRef::One(SqlMappingRef::literal("sparsevec")));
}

// SAFETY: the argument is unboxed through FromDatum, which checks for NULL.
unsafe impl<'fcx> ArgAbi<'fcx> for PgSparsevec {
    unsafe fn unbox_arg_unchecked(arg: pgrx::callconv::Arg<'_, 'fcx>) -> Self {
        // SAFETY: pgrx passes the argument of a function declared with
        // this type.
        unsafe { super::unbox_not_null(arg) }
    }
}

// SAFETY: the result is returned as the datum of its own type.
unsafe impl BoxRet for PgSparsevec {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
        // SAFETY: a varlena of this type in Postgres memory (an argument's,
        // or palloc'd in the call), which Postgres takes as the result.
        unsafe { fcinfo.return_raw_datum(pg_sys::Datum::from(self.ptr.as_ptr())) }
    }
}

extension_sql!(
    "CREATE TYPE sparsevec; -- shell, completed in sparsevec_type.sql\n",
    name = "sparsevec_shell",
    creates = [Type(PgSparsevec)]
);

#[pg_extern(immutable, strict, parallel_safe, requires = ["sparsevec_shell"])]
fn sparsevec_in(input: &CStr, _typioparam: pg_sys::Oid, typmod: i32) -> PgSparsevec {
    let text = input_text("sparsevec", input);
    PgSparsevec::from_vec(&sparse::parse(text, declared_dims(typmod)).or_raise_sparse())
}

/// `{i:x,...}/dim`, 1-based, each value as `float4out` writes it
/// (pgvector's `sparsevec_out`).
#[pg_extern(immutable, strict, parallel_safe, requires = ["sparsevec_shell"])]
fn sparsevec_out(sparsevec: PgSparsevec) -> OutputText {
    let v = sparsevec.view();
    // Each entry: a comma, an index of up to 10 digits and its colon, a
    // value; then the braces, the slash and up to 10 digits of dimensions.
    let mut out = OutputText::with_room(v.indices.len() * (12 + FLOAT_SHORTEST_DECIMAL_LEN) + 14);
    out.push(b"{");
    for (k, (&i, &x)) in v.indices.iter().zip(v.values).enumerate() {
        if k > 0 {
            out.push(b",");
        }
        write!(out, "{}:", i as i64 + 1).expect("sized for the widest index");
        out.push_float(x);
    }
    write!(out, "}}/{}", v.dim).expect("sized for the widest dimensions");
    out
}

#[pg_extern(immutable, strict, parallel_safe)]
fn sparsevec_typmod_in(list: Array<&CStr>) -> i32 {
    vector::typmod_in_up_to("sparsevec", &typmod_items(&list), sparse::MAX_DIM).or_raise_sparse() as i32
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["sparsevec_shell"])]
fn sparsevec_recv(buf: Internal, _typioparam: pg_sys::Oid, typmod: i32) -> PgSparsevec {
    PgSparsevec::from_vec(&sparse::decode_binary(received(buf), declared_dims(typmod)).or_raise_sparse())
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["sparsevec_shell"])]
fn sparsevec_send(sparsevec: PgSparsevec) -> Vec<u8> {
    sparse::encode_binary(sparsevec.view())
}

/// The typmod coercion, `'{1:1}/3'::sparsevec(3)` and assignment to
/// `sparsevec(n)`.
#[pg_extern(immutable, strict, parallel_safe, requires = ["sparsevec_shell"])]
fn sparsevec(sparsevec: PgSparsevec, typmod: i32, _explicit: bool) -> PgSparsevec {
    vector::check_typmod(declared_dims(typmod), sparsevec.view().dim).or_raise_sparse();
    sparsevec
}

/// The sparse vector of `values`' non-zero elements.
fn from_dense(values: &[f32], typmod: i32) -> PgSparsevec {
    PgSparsevec::from_vec(&sparse::from_dense(values, declared_dims(typmod)).or_raise_sparse())
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["sparsevec_shell", "vector_shell"])]
fn vector_to_sparsevec(vector: PgVector, typmod: i32, _explicit: bool) -> PgSparsevec {
    from_dense(vector.as_slice(), typmod)
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["sparsevec_shell", "halfvec_shell"])]
fn halfvec_to_sparsevec(halfvec: PgHalfvec, typmod: i32, _explicit: bool) -> PgSparsevec {
    from_dense(&halfvec.to_f32(), typmod)
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["sparsevec_shell", "vector_shell"])]
fn sparsevec_to_vector(sparsevec: PgSparsevec, typmod: i32, _explicit: bool) -> PgVector {
    PgVector::from_slice(&sparse::to_dense(sparsevec.view(), declared_dims(typmod)).or_raise())
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["sparsevec_shell", "halfvec_shell"])]
fn sparsevec_to_halfvec(sparsevec: PgSparsevec, typmod: i32, _explicit: bool) -> PgHalfvec {
    let dense = sparse::to_dense(sparsevec.view(), declared_dims(typmod)).or_raise_half();
    PgHalfvec::from_slice(&vector::to_half(&dense).or_raise_half())
}

#[pg_extern(name = "array_to_sparsevec", immutable, strict, parallel_safe, requires = ["sparsevec_shell"])]
fn array_to_sparsevec_real(array: Array<f32>, typmod: i32, _explicit: bool) -> PgSparsevec {
    from_dense(&reals(array), typmod)
}

#[pg_extern(name = "array_to_sparsevec", immutable, strict, parallel_safe, requires = ["sparsevec_shell"])]
fn array_to_sparsevec_double(array: Array<f64>, typmod: i32, _explicit: bool) -> PgSparsevec {
    from_dense(&doubles(array), typmod)
}

#[pg_extern(name = "array_to_sparsevec", immutable, strict, parallel_safe, requires = ["sparsevec_shell"])]
fn array_to_sparsevec_integer(array: Array<i32>, typmod: i32, _explicit: bool) -> PgSparsevec {
    from_dense(&integers(array), typmod)
}

#[pg_extern(name = "array_to_sparsevec", immutable, strict, parallel_safe, requires = ["sparsevec_shell"])]
fn array_to_sparsevec_numeric(array: Array<AnyNumeric>, typmod: i32, _explicit: bool) -> PgSparsevec {
    from_dense(&numerics(array), typmod)
}

extension_sql_file!(
    "../../sql/sparsevec_type.sql",
    name = "sparsevec_type",
    requires = [
        "halfvec_type",
        sparsevec_in,
        sparsevec_out,
        sparsevec_typmod_in,
        sparsevec_recv,
        sparsevec_send,
        sparsevec,
        vector_to_sparsevec,
        halfvec_to_sparsevec,
        sparsevec_to_vector,
        sparsevec_to_halfvec,
        array_to_sparsevec_real,
        array_to_sparsevec_double,
        array_to_sparsevec_integer,
        array_to_sparsevec_numeric
    ]
);
