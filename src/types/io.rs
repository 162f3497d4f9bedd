//! The `vector` and `halfvec` types' I/O: text in/out, the `vector(n)` and
//! `halfvec(n)` modifiers, binary send/recv (pgvector's wire formats) and
//! the casts between them and from and to arrays.
//!
//! Parsing and checking live in `milvus_core::vector`; these functions only
//! move values between Postgres and the core, and apply the column's typmod.
//! Text output is Postgres' own: each element by the shortest round-trip
//! formatter `float4out` uses, as pgvector writes it.

use std::ffi::CStr;

use milvus_core::vector;
use pgrx::AnyNumeric;
use pgrx::callconv::{BoxRet, FcInfo};
use pgrx::datum::{Internal, UnboxDatum};
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::prelude::*;

use super::{PgHalfvec, PgVector};
use crate::error::{OrRaise, raise_error};

/// The declared dimensions of a typmod, `None` for a bare `vector`.
pub(super) fn declared_dims(typmod: i32) -> Option<usize> {
    (typmod > 0).then_some(typmod as usize)
}

/// Checks `values` and builds the datum, enforcing the typmod.
fn build(values: &[f32], typmod: i32) -> PgVector {
    vector::check_elements(values).or_raise();
    vector::check_typmod(declared_dims(typmod), values.len()).or_raise();
    PgVector::from_slice(values)
}

/// The text of an input function's argument.
pub(super) fn input_text<'a>(type_name: &'static str, input: &'a CStr) -> &'a str {
    input.to_str().unwrap_or_else(|_| {
        raise_error(&vector::VectorError::Syntax {
            type_name,
            input: input.to_string_lossy().into_owned(),
            detail: "Input is not valid UTF-8.".into(),
        })
    })
}

/// The bytes a receive function reads: the rest of the buffer, consumed.
pub(super) fn received(buf: Internal) -> &'static [u8] {
    // SAFETY: Postgres passes a StringInfo positioned at this value's
    // bytes, which live for the call.
    unsafe {
        let buf = buf.unwrap().expect("recv gets a buffer").cast_mut_ptr::<pg_sys::StringInfoData>();
        let start = (*buf).cursor as usize;
        let len = (*buf).len as usize - start;
        let bytes = std::slice::from_raw_parts((*buf).data.add(start).cast::<u8>(), len);
        (*buf).cursor = (*buf).len;
        bytes
    }
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_shell"])]
fn vector_in(input: &CStr, _typioparam: pg_sys::Oid, typmod: i32) -> PgVector {
    build(&vector::parse(input_text("vector", input)).or_raise(), typmod)
}

unsafe extern "C-unwind" {
    /// Postgres' shortest text that reads back to `f` (`common/shortest_dec.h`,
    /// Ryu), laid out as `float4out` lays it out (`1e+06`, `1.5e-07`):
    /// writes at most [`FLOAT_SHORTEST_DECIMAL_LEN`] bytes at `result`, no
    /// NUL, and returns how many.
    fn float_to_shortest_decimal_bufn(f: f32, result: *mut std::ffi::c_char) -> std::ffi::c_int;
}

/// The most bytes one element's text takes (`-1.1754944e-38` and its sign).
pub(super) const FLOAT_SHORTEST_DECIMAL_LEN: usize = 16;

/// `[e1,e2,...]`, each element as `float4out` writes it, in one buffer
/// sized for the widest text up front (pgvector's `vector_out`).
fn format(values: impl ExactSizeIterator<Item = f32>) -> OutputText {
    let mut out = OutputText::with_room(values.len() * (FLOAT_SHORTEST_DECIMAL_LEN + 1) + 2);
    out.push(b"[");
    for (i, v) in values.enumerate() {
        if i > 0 {
            out.push(b",");
        }
        out.push_float(v);
    }
    out.push(b"]");
    out
}

/// A type's text, written into palloc'd memory sized up front and returned
/// to Postgres as it is: pgrx returns a `CString` by copying it into
/// palloc'd memory, a second pass over every row's text (3% of reading
/// 768-d rows as text, `perf`; docs/benchmarks.md, "Profiles"). Every
/// write checks the room left, so a wrong size is an error, never a write
/// past the buffer.
pub(super) struct OutputText {
    buffer: std::ptr::NonNull<u8>,
    len: usize,
    /// Bytes at `buffer`, the NUL's included.
    room: usize,
}

impl OutputText {
    /// An empty text with room for `text` bytes.
    pub(super) fn with_room(text: usize) -> OutputText {
        let room = text + 1;
        // SAFETY: palloc in the current memory context, the caller's (it
        // raises an ERROR rather than return NULL); Postgres takes the text
        // as the function's result.
        let buffer = unsafe { pg_sys::palloc(room) }.cast::<u8>();
        OutputText { buffer: std::ptr::NonNull::new(buffer).expect("palloc returns memory or raises"), len: 0, room }
    }

    /// Bytes left before the NUL's.
    fn left(&self) -> usize {
        self.room - 1 - self.len
    }

    pub(super) fn push(&mut self, bytes: &[u8]) {
        assert!(bytes.len() <= self.left(), "text output sized too small");
        // SAFETY: `bytes` fits the room left after `len`, checked above;
        // the buffer is Postgres memory no Rust reference aliases.
        unsafe { self.buffer.as_ptr().add(self.len).copy_from_nonoverlapping(bytes.as_ptr(), bytes.len()) };
        self.len += bytes.len();
    }

    /// Appends `v` as `float4out` writes it.
    pub(super) fn push_float(&mut self, v: f32) {
        assert!(FLOAT_SHORTEST_DECIMAL_LEN <= self.left(), "text output sized too small");
        // SAFETY: FLOAT_SHORTEST_DECIMAL_LEN bytes are left after `len`,
        // checked above, the most the function writes; it only reads `v`.
        self.len += unsafe { float_to_shortest_decimal_bufn(v, self.buffer.as_ptr().add(self.len).cast()) } as usize;
    }
}

impl std::fmt::Write for OutputText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.push(s.as_bytes());
        Ok(())
    }
}

// SAFETY: the text is terminated here and lies in Postgres memory, which
// Postgres takes as the `cstring` result.
unsafe impl BoxRet for OutputText {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> pgrx::datum::Datum<'fcx> {
        // SAFETY: `room` keeps a byte after the text for its NUL; `fcinfo`
        // is this call's (the caller's).
        unsafe {
            self.buffer.as_ptr().add(self.len).write(0);
            fcinfo.return_raw_datum(pg_sys::Datum::from(self.buffer.as_ptr()))
        }
    }
}

// SAFETY: returned as Postgres' `cstring`, which it is.
unsafe impl SqlTranslatable for OutputText {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(OutputText);
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::External;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal("cstring"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> = Ok(ReturnsRef::One(SqlMappingRef::literal("cstring")));
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_shell"])]
fn vector_out(vector: PgVector) -> OutputText {
    format(vector.as_slice().iter().copied())
}

#[pg_extern(immutable, strict, parallel_safe)]
fn vector_typmod_in(list: Array<&CStr>) -> i32 {
    vector::typmod_in("vector", &typmod_items(&list)).or_raise() as i32
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_shell"])]
fn vector_recv(buf: Internal, _typioparam: pg_sys::Oid, typmod: i32) -> PgVector {
    build(&vector::decode_binary(received(buf)).or_raise(), typmod)
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_shell"])]
fn vector_send(vector: PgVector) -> Vec<u8> {
    vector::encode_binary(vector.as_slice())
}

/// The typmod coercion, `'[1,2]'::vector(2)` and assignment to `vector(n)`.
#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_shell"])]
fn vector(vector: PgVector, typmod: i32, _explicit: bool) -> PgVector {
    vector::check_typmod(declared_dims(typmod), vector.dims()).or_raise();
    vector
}

/// Collects array elements, refusing NULLs with the element named.
fn collect_array(items: impl Iterator<Item = Option<f32>>) -> Vec<f32> {
    items
        .enumerate()
        .map(|(i, item)| {
            item.unwrap_or_else(|| {
                ereport!(
                    ERROR,
                    PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
                    "array must not contain nulls",
                    format!("Element {} is NULL.", i + 1)
                );
            })
        })
        .collect()
}

/// The array, refused unless it has one dimension (or none: `'{}'`, which
/// `build` refuses for its length), as pgvector refuses `{{1,2},{3,4}}`
/// rather than flatten it.
fn one_dimensional<T: UnboxDatum>(array: Array<'_, T>) -> Array<'_, T> {
    let ptr = array.into_array_type();
    // SAFETY: a detoasted array argument; rewrapped as it was.
    unsafe {
        if (*ptr).ndim > 1 {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_DATA_EXCEPTION,
                "array must be 1-D",
                format!("The array has {} dimensions.", (*ptr).ndim)
            );
        }
        Array::from_datum(pg_sys::Datum::from(ptr), false).expect("a non-NULL array")
    }
}

/// The elements of the arrays the casts take, as f32. A numeric beyond
/// f32's range becomes an infinity, which `build` and `build_half` refuse
/// with the element named.
pub(super) fn reals(array: Array<f32>) -> Vec<f32> {
    collect_array(one_dimensional(array).iter())
}

pub(super) fn doubles(array: Array<f64>) -> Vec<f32> {
    collect_array(one_dimensional(array).iter().map(|v| v.map(|v| v as f32)))
}

pub(super) fn integers(array: Array<i32>) -> Vec<f32> {
    collect_array(one_dimensional(array).iter().map(|v| v.map(|v| v as f32)))
}

pub(super) fn numerics(array: Array<AnyNumeric>) -> Vec<f32> {
    collect_array(one_dimensional(array).iter().map(|v| v.map(|v| f32::try_from(v).unwrap_or(f32::INFINITY))))
}

#[pg_extern(name = "array_to_vector", immutable, strict, parallel_safe, requires = ["vector_shell"])]
fn array_to_vector_real(array: Array<f32>, typmod: i32, _explicit: bool) -> PgVector {
    build(&reals(array), typmod)
}

#[pg_extern(name = "array_to_vector", immutable, strict, parallel_safe, requires = ["vector_shell"])]
fn array_to_vector_double(array: Array<f64>, typmod: i32, _explicit: bool) -> PgVector {
    build(&doubles(array), typmod)
}

#[pg_extern(name = "array_to_vector", immutable, strict, parallel_safe, requires = ["vector_shell"])]
fn array_to_vector_integer(array: Array<i32>, typmod: i32, _explicit: bool) -> PgVector {
    build(&integers(array), typmod)
}

#[pg_extern(name = "array_to_vector", immutable, strict, parallel_safe, requires = ["vector_shell"])]
fn array_to_vector_numeric(array: Array<AnyNumeric>, typmod: i32, _explicit: bool) -> PgVector {
    build(&numerics(array), typmod)
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_shell"])]
fn vector_to_float4(vector: PgVector, _typmod: i32, _explicit: bool) -> Vec<f32> {
    vector.as_slice().to_vec()
}

/// The items of a type modifier list (`vector(3)`: `["3"]`).
pub(super) fn typmod_items<'a>(list: &'a Array<&CStr>) -> Vec<&'a str> {
    list.iter().map(|item| item.and_then(|c| c.to_str().ok()).unwrap_or("")).collect()
}

// ----------------------------------------------------------------- halfvec

/// Checks `values` for a halfvec (finite, within half's range) and builds
/// the datum, enforcing the typmod.
fn build_half(values: &[f32], typmod: i32) -> PgHalfvec {
    let half = vector::to_half(values).or_raise_half();
    vector::check_typmod(declared_dims(typmod), values.len()).or_raise_half();
    PgHalfvec::from_slice(&half)
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_shell"])]
fn halfvec_in(input: &CStr, _typioparam: pg_sys::Oid, typmod: i32) -> PgHalfvec {
    build_half(&vector::parse_as("halfvec", input_text("halfvec", input)).or_raise_half(), typmod)
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_shell"])]
fn halfvec_out(halfvec: PgHalfvec) -> OutputText {
    format(halfvec.as_slice().iter().map(|h| h.to_f32()))
}

#[pg_extern(immutable, strict, parallel_safe)]
fn halfvec_typmod_in(list: Array<&CStr>) -> i32 {
    vector::typmod_in("halfvec", &typmod_items(&list)).or_raise_half() as i32
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_shell"])]
fn halfvec_recv(buf: Internal, _typioparam: pg_sys::Oid, typmod: i32) -> PgHalfvec {
    build_half(&vector::decode_half_binary(received(buf)).or_raise_half(), typmod)
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_shell"])]
fn halfvec_send(halfvec: PgHalfvec) -> Vec<u8> {
    vector::encode_half_binary(halfvec.as_slice())
}

/// The typmod coercion, `'[1,2]'::halfvec(2)` and assignment to `halfvec(n)`.
#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_shell"])]
fn halfvec(halfvec: PgHalfvec, typmod: i32, _explicit: bool) -> PgHalfvec {
    vector::check_typmod(declared_dims(typmod), halfvec.dims()).or_raise_half();
    halfvec
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_shell", "vector_shell"])]
fn halfvec_to_vector(halfvec: PgHalfvec, typmod: i32, _explicit: bool) -> PgVector {
    build(&halfvec.to_f32(), typmod)
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_shell", "vector_shell"])]
fn vector_to_halfvec(vector: PgVector, typmod: i32, _explicit: bool) -> PgHalfvec {
    build_half(vector.as_slice(), typmod)
}

#[pg_extern(name = "array_to_halfvec", immutable, strict, parallel_safe, requires = ["halfvec_shell"])]
fn array_to_halfvec_real(array: Array<f32>, typmod: i32, _explicit: bool) -> PgHalfvec {
    build_half(&reals(array), typmod)
}

#[pg_extern(name = "array_to_halfvec", immutable, strict, parallel_safe, requires = ["halfvec_shell"])]
fn array_to_halfvec_double(array: Array<f64>, typmod: i32, _explicit: bool) -> PgHalfvec {
    build_half(&doubles(array), typmod)
}

#[pg_extern(name = "array_to_halfvec", immutable, strict, parallel_safe, requires = ["halfvec_shell"])]
fn array_to_halfvec_integer(array: Array<i32>, typmod: i32, _explicit: bool) -> PgHalfvec {
    build_half(&integers(array), typmod)
}

#[pg_extern(name = "array_to_halfvec", immutable, strict, parallel_safe, requires = ["halfvec_shell"])]
fn array_to_halfvec_numeric(array: Array<AnyNumeric>, typmod: i32, _explicit: bool) -> PgHalfvec {
    build_half(&numerics(array), typmod)
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_shell"])]
fn halfvec_to_float4(halfvec: PgHalfvec, _typmod: i32, _explicit: bool) -> Vec<f32> {
    halfvec.to_f32()
}

extension_sql_file!(
    "../../sql/halfvec_type.sql",
    name = "halfvec_type",
    requires = [
        "vector_type",
        halfvec_in,
        halfvec_out,
        halfvec_typmod_in,
        halfvec_recv,
        halfvec_send,
        halfvec,
        halfvec_to_vector,
        vector_to_halfvec,
        array_to_halfvec_real,
        array_to_halfvec_double,
        array_to_halfvec_integer,
        array_to_halfvec_numeric,
        halfvec_to_float4
    ]
);

extension_sql_file!(
    "../../sql/vector_type.sql",
    name = "vector_type",
    requires = [
        vector_in,
        vector_out,
        vector_typmod_in,
        vector_recv,
        vector_send,
        vector,
        array_to_vector_real,
        array_to_vector_double,
        array_to_vector_integer,
        array_to_vector_numeric,
        vector_to_float4
    ]
);
