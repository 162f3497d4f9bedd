//! Postgres values of a filter column as the core keeps them
//! (`milvus_core::filter::Value`): what a multicolumn index stores of
//! `tenant_id`, `created_at` or `labels` beside each vector, and what a
//! scan's key compares them with.
//!
//! The integer-like types keep their order as an `i64`: `int2`, `int4`,
//! `int8`, `bool` (0, 1), `date` (days) and `timestamptz` (microseconds,
//! Postgres' own representation, so time zones play no part); a `uuid` is
//! its 16 bytes read big-endian (Postgres orders uuids by memcmp); `text`
//! and `varchar` their UTF-8 bytes; arrays of `int2`, `int4`, `int8`,
//! `text` and `varchar` their elements, NULL elements left out (a NULL
//! element equals nothing, so `&&` and `@>` never match one).

use milvus_core::filter::{ColumnType, Value};
use pgrx::FromDatum;
use pgrx::pg_sys;

/// The filter-column type of a Postgres type, `None` if a filter column
/// cannot have it.
pub fn column_type(typid: pg_sys::Oid) -> Option<ColumnType> {
    Some(match typid {
        pg_sys::INT2OID
        | pg_sys::INT4OID
        | pg_sys::INT8OID
        | pg_sys::BOOLOID
        | pg_sys::DATEOID
        | pg_sys::TIMESTAMPTZOID => ColumnType::Int,
        pg_sys::UUIDOID => ColumnType::Uuid,
        pg_sys::TEXTOID | pg_sys::VARCHAROID => ColumnType::Text,
        pg_sys::INT2ARRAYOID | pg_sys::INT4ARRAYOID | pg_sys::INT8ARRAYOID => ColumnType::IntArray,
        pg_sys::TEXTARRAYOID | pg_sys::VARCHARARRAYOID => ColumnType::TextArray,
        _ => return None,
    })
}

/// The types a filter column may have, for the error that names them.
pub const SUPPORTED: &str = "smallint, integer, bigint, boolean, date, timestamptz, uuid, text, varchar, \
     and arrays of smallint, integer, bigint, text or varchar";

/// The value of a non-null datum of type `typid` (one [`column_type`]
/// accepts).
///
/// # Safety
/// `datum` is a non-null value of type `typid`, on the main thread.
pub unsafe fn value_of(typid: pg_sys::Oid, datum: pg_sys::Datum) -> Value {
    // SAFETY: the caller's; by-value types are read from the datum's
    // bits, by-reference ones through pgrx's readers (which detoast).
    unsafe {
        match typid {
            pg_sys::INT2OID => Value::Int(datum.value() as i16 as i64),
            pg_sys::INT4OID | pg_sys::DATEOID => Value::Int(datum.value() as i32 as i64),
            pg_sys::INT8OID | pg_sys::TIMESTAMPTZOID => Value::Int(datum.value() as i64),
            pg_sys::BOOLOID => Value::Int((datum.value() & 0xff != 0) as i64),
            pg_sys::UUIDOID => Value::Uuid(u128::from_be_bytes(*datum.cast_mut_ptr::<[u8; 16]>())),
            pg_sys::TEXTOID | pg_sys::VARCHAROID => Value::Text(String::from_datum(datum, false).expect("not null")),
            pg_sys::INT2ARRAYOID => Value::Ints(elements::<i16>(datum).map(i64::from).collect()),
            pg_sys::INT4ARRAYOID => Value::Ints(elements::<i32>(datum).map(i64::from).collect()),
            pg_sys::INT8ARRAYOID => Value::Ints(elements::<i64>(datum).collect()),
            pg_sys::TEXTARRAYOID | pg_sys::VARCHARARRAYOID => Value::Texts(elements::<String>(datum).collect()),
            other => unreachable!("type {other:?} is not a filter column's"),
        }
    }
}

/// The elements of an array datum of an element type `T` reads, NULLs
/// left out.
///
/// # Safety
/// `datum` is a non-null array of `T`'s type.
unsafe fn elements<T>(datum: pg_sys::Datum) -> impl Iterator<Item = T>
where
    for<'arr> T: pgrx::datum::UnboxDatum<As<'arr> = T> + 'arr,
{
    // SAFETY: the caller's.
    unsafe { Vec::<Option<T>>::from_datum(datum, false) }.expect("not null").into_iter().flatten()
}

/// The elements of a non-null array of `element` values (the right side
/// of `= ANY(...)`), each as [`value_of`] reads it, NULLs as `Value::Null`.
///
/// # Safety
/// `datum` is a non-null array whose elements have type `element`.
pub unsafe fn array_values(element: pg_sys::Oid, datum: pg_sys::Datum) -> Vec<Value> {
    // SAFETY: the caller's; deconstruct_array reads the array with the
    // element type's storage parameters, detoasted first.
    unsafe {
        let array = pg_sys::pg_detoast_datum(datum.cast_mut_ptr()).cast::<pg_sys::ArrayType>();
        let (mut len, mut by_value, mut align) = (0i16, false, 0 as std::ffi::c_char);
        pg_sys::get_typlenbyvalalign(element, &mut len, &mut by_value, &mut align);
        let (mut items, mut nulls, mut count) = (std::ptr::null_mut(), std::ptr::null_mut(), 0);
        pg_sys::deconstruct_array(array, element, len as i32, by_value, align, &mut items, &mut nulls, &mut count);
        (0..count as usize)
            .map(|i| if *nulls.add(i) { Value::Null } else { value_of(element, *items.add(i)) })
            .collect()
    }
}
