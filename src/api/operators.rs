//! Operators, functions and aggregates on `vector`, pgvector's names and
//! semantics: distances (`<->`, `<#>`, `<=>`, `<+>`), arithmetic (`+`, `-`,
//! `*`, `||`), comparison (for the btree opclass), `sum` and `avg`, and
//! helpers (`subvector`, `binary_quantize`, ...), each checking that its
//! operands agree in dimensions before calling the core; and the distances
//! of Postgres' `bit` (`<~>`, `<%>`) that binary quantization searches by.

use milvus_core::distance::{self, Metric};
use milvus_core::vector;
use pgrx::array::RawArray;
use pgrx::prelude::*;

use crate::error::OrRaise;
use crate::types::PgVector;
use crate::types::bit::PgBit;

/// The two operands' elements, after checking they have the same dimensions.
fn pair<'a>(a: &'a PgVector, b: &'a PgVector) -> (&'a [f32], &'a [f32]) {
    vector::check_same_dims(a.dims(), b.dims()).or_raise();
    (a.as_slice(), b.as_slice())
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn l2_distance(a: PgVector, b: PgVector) -> f64 {
    let (a, b) = pair(&a, &b);
    Metric::L2.distance(a, b) as f64
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn inner_product(a: PgVector, b: PgVector) -> f64 {
    let (a, b) = pair(&a, &b);
    distance::inner_product(a, b) as f64
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_negative_inner_product(a: PgVector, b: PgVector) -> f64 {
    let (a, b) = pair(&a, &b);
    Metric::InnerProduct.distance(a, b) as f64
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn cosine_distance(a: PgVector, b: PgVector) -> f64 {
    let (a, b) = pair(&a, &b);
    Metric::Cosine.distance(a, b) as f64
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn l1_distance(a: PgVector, b: PgVector) -> f64 {
    let (a, b) = pair(&a, &b);
    distance::l1(a, b) as f64
}

/// The two bit strings, after checking they have the same length.
fn bits<'a>(a: &'a PgBit, b: &'a PgBit) -> (&'a [u8], &'a [u8]) {
    vector::check_same_bits(a.bit_len(), b.bit_len()).or_raise();
    (a.bytes(), b.bytes())
}

#[pg_extern(immutable, strict, parallel_safe)]
fn hamming_distance(a: PgBit, b: PgBit) -> f64 {
    let (a, b) = bits(&a, &b);
    distance::hamming(a, b) as f64
}

#[pg_extern(immutable, strict, parallel_safe)]
fn jaccard_distance(a: PgBit, b: PgBit) -> f64 {
    let (a, b) = bits(&a, &b);
    distance::jaccard(a, b)
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_dims(v: PgVector) -> i32 {
    v.dims() as i32
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_norm(v: PgVector) -> f64 {
    distance::norm(v.as_slice())
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn l2_normalize(v: PgVector) -> PgVector {
    PgVector::from_slice(&vector::l2_normalize(v.as_slice()))
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_add(a: PgVector, b: PgVector) -> PgVector {
    PgVector::from_slice(&vector::add(a.as_slice(), b.as_slice()).or_raise())
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_sub(a: PgVector, b: PgVector) -> PgVector {
    PgVector::from_slice(&vector::sub(a.as_slice(), b.as_slice()).or_raise())
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_mul(a: PgVector, b: PgVector) -> PgVector {
    PgVector::from_slice(&vector::mul(a.as_slice(), b.as_slice()).or_raise())
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_concat(a: PgVector, b: PgVector) -> PgVector {
    PgVector::from_slice(&vector::concat(a.as_slice(), b.as_slice()).or_raise())
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn subvector(v: PgVector, start: i32, count: i32) -> PgVector {
    PgVector::from_slice(&vector::subvector(v.as_slice(), start, count).or_raise())
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn binary_quantize(v: PgVector) -> PgBit {
    PgBit::new(&vector::binary_quantize(v.as_slice()), v.dims())
}

/// The state of `avg(vector)` and `avg(halfvec)`
/// (`milvus_core::vector::accumulate`): a one-dimensional `double
/// precision[]` of one element at least, without NULLs, as pgvector's
/// (whose message this is).
pub(super) fn avg_state(array: Array<f64>, caller: &str) -> Vec<f64> {
    // SAFETY: a detoasted array argument, read before the call returns.
    let raw = unsafe { RawArray::from_array(array) };
    match raw {
        // SAFETY: a one-dimensional float8 array without NULLs: its data
        // is `len` f64.
        Some(mut raw) if raw.dims().len() == 1 && raw.len() >= 1 && !unsafe { raw.any_nulls() } => {
            // SAFETY: as above: `len` f64 without NULLs, copied out here.
            unsafe { raw.data::<f64>().as_ref() }.to_vec()
        }
        _ => crate::error::raise(
            PgSqlErrorCode::ERRCODE_DATA_EXCEPTION,
            format!("{caller}: expected state array"),
            Some("The state is a one-dimensional float8 array without NULLs: the count, then the sums."),
            None,
        ),
    }
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_accum(state_array: Array<f64>, v: PgVector) -> Vec<f64> {
    vector::accumulate(&avg_state(state_array, "vector_accum"), v.as_slice()).or_raise()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_combine(a: Array<f64>, b: Array<f64>) -> Vec<f64> {
    vector::combine(&avg_state(a, "vector_combine"), &avg_state(b, "vector_combine")).or_raise()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_avg(state_array: Array<f64>) -> Option<PgVector> {
    vector::average(&avg_state(state_array, "vector_avg")).or_raise().map(|mean| PgVector::from_slice(&mean))
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_cmp(a: PgVector, b: PgVector) -> i32 {
    vector::compare(a.as_slice(), b.as_slice()) as i32
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_eq(a: PgVector, b: PgVector) -> bool {
    vector::compare(a.as_slice(), b.as_slice()).is_eq()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_ne(a: PgVector, b: PgVector) -> bool {
    vector::compare(a.as_slice(), b.as_slice()).is_ne()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_lt(a: PgVector, b: PgVector) -> bool {
    vector::compare(a.as_slice(), b.as_slice()).is_lt()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_le(a: PgVector, b: PgVector) -> bool {
    vector::compare(a.as_slice(), b.as_slice()).is_le()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_gt(a: PgVector, b: PgVector) -> bool {
    vector::compare(a.as_slice(), b.as_slice()).is_gt()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_ge(a: PgVector, b: PgVector) -> bool {
    vector::compare(a.as_slice(), b.as_slice()).is_ge()
}

extension_sql_file!(
    "../../sql/vector_operators.sql",
    name = "vector_operators",
    requires = [
        l2_distance,
        vector_negative_inner_product,
        cosine_distance,
        l1_distance,
        vector_add,
        vector_sub,
        vector_mul,
        vector_concat,
        vector_accum,
        vector_combine,
        vector_avg,
        hamming_distance,
        jaccard_distance,
        vector_cmp,
        vector_eq,
        vector_ne,
        vector_lt,
        vector_le,
        vector_gt,
        vector_ge
    ]
);
