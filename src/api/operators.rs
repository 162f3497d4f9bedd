//! Operators and functions on `vector`: distances (`<->`, `<#>`, `<=>`),
//! arithmetic, comparison (for the btree opclass) and helpers, each checking
//! that its operands agree in dimensions before calling the core kernels.

use milvus_core::distance::{self, Metric};
use milvus_core::vector as vector_core;
use pgrx::prelude::*;

use crate::error::OrRaise;
use crate::vector::PgVector;

/// The two operands' elements, after checking they have the same dimensions.
fn pair<'a>(a: &'a PgVector, b: &'a PgVector) -> (&'a [f32], &'a [f32]) {
    vector_core::check_same_dims(a.dims(), b.dims()).or_raise();
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
fn vector_dims(v: PgVector) -> i32 {
    v.dims() as i32
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_norm(v: PgVector) -> f64 {
    distance::norm(v.as_slice()) as f64
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn l2_normalize(v: PgVector) -> PgVector {
    PgVector::from_slice(&vector_core::l2_normalize(v.as_slice()))
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_add(a: PgVector, b: PgVector) -> PgVector {
    PgVector::from_slice(&vector_core::add(a.as_slice(), b.as_slice()).or_raise())
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_sub(a: PgVector, b: PgVector) -> PgVector {
    PgVector::from_slice(&vector_core::sub(a.as_slice(), b.as_slice()).or_raise())
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_cmp(a: PgVector, b: PgVector) -> i32 {
    vector_core::compare(a.as_slice(), b.as_slice()) as i32
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_eq(a: PgVector, b: PgVector) -> bool {
    vector_core::compare(a.as_slice(), b.as_slice()).is_eq()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_ne(a: PgVector, b: PgVector) -> bool {
    vector_core::compare(a.as_slice(), b.as_slice()).is_ne()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_lt(a: PgVector, b: PgVector) -> bool {
    vector_core::compare(a.as_slice(), b.as_slice()).is_lt()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_le(a: PgVector, b: PgVector) -> bool {
    vector_core::compare(a.as_slice(), b.as_slice()).is_le()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_gt(a: PgVector, b: PgVector) -> bool {
    vector_core::compare(a.as_slice(), b.as_slice()).is_gt()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["vector_type"])]
fn vector_ge(a: PgVector, b: PgVector) -> bool {
    vector_core::compare(a.as_slice(), b.as_slice()).is_ge()
}

extension_sql_file!(
    "../../sql/vector_operators.sql",
    name = "vector_operators",
    requires = [
        l2_distance,
        vector_negative_inner_product,
        cosine_distance,
        vector_add,
        vector_sub,
        vector_cmp,
        vector_eq,
        vector_ne,
        vector_lt,
        vector_le,
        vector_gt,
        vector_ge
    ]
);
