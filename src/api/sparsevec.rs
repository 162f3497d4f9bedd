//! Operators and functions on `sparsevec`, pgvector's names and semantics:
//! the distances merge the two entry lists in place and sum as pgvector
//! does (`milvus_core::sparse`), so results match it bit for bit.

use std::cmp::Ordering;

use milvus_core::sparse::{self, Sparse};
use pgrx::prelude::*;

use crate::error::OrRaise;
use crate::types::sparse::PgSparsevec;

/// The operands' parts, refused unless their dimensions agree.
fn operands<'a>(a: &'a PgSparsevec, b: &'a PgSparsevec) -> (Sparse<'a>, Sparse<'a>) {
    let (a, b) = (a.view(), b.view());
    sparse::check_same_dims(a, b).or_raise_sparse();
    (a, b)
}

#[pg_extern(name = "l2_distance", immutable, strict, parallel_safe, requires = ["sparsevec_type"])]
fn sparsevec_l2_distance(a: PgSparsevec, b: PgSparsevec) -> f64 {
    let (a, b) = operands(&a, &b);
    (sparse::l2_squared(a, b) as f64).sqrt()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["sparsevec_type"])]
fn sparsevec_l2_squared_distance(a: PgSparsevec, b: PgSparsevec) -> f64 {
    let (a, b) = operands(&a, &b);
    sparse::l2_squared(a, b) as f64
}

#[pg_extern(name = "inner_product", immutable, strict, parallel_safe, requires = ["sparsevec_type"])]
fn sparsevec_inner_product(a: PgSparsevec, b: PgSparsevec) -> f64 {
    let (a, b) = operands(&a, &b);
    sparse::inner_product(a, b) as f64
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["sparsevec_type"])]
fn sparsevec_negative_inner_product(a: PgSparsevec, b: PgSparsevec) -> f64 {
    let (a, b) = operands(&a, &b);
    -sparse::inner_product(a, b) as f64
}

#[pg_extern(name = "cosine_distance", immutable, strict, parallel_safe, requires = ["sparsevec_type"])]
fn sparsevec_cosine_distance(a: PgSparsevec, b: PgSparsevec) -> f64 {
    let (a, b) = operands(&a, &b);
    sparse::cosine_distance(a, b)
}

#[pg_extern(name = "l1_distance", immutable, strict, parallel_safe, requires = ["sparsevec_type"])]
fn sparsevec_l1_distance(a: PgSparsevec, b: PgSparsevec) -> f64 {
    let (a, b) = operands(&a, &b);
    sparse::l1(a, b) as f64
}

#[pg_extern(name = "l2_norm", immutable, strict, parallel_safe, requires = ["sparsevec_type"])]
fn sparsevec_l2_norm(v: PgSparsevec) -> f64 {
    sparse::norm(v.view())
}

#[pg_extern(name = "l2_normalize", immutable, strict, parallel_safe, requires = ["sparsevec_type"])]
fn sparsevec_l2_normalize(v: PgSparsevec) -> PgSparsevec {
    PgSparsevec::from_vec(&sparse::l2_normalize(v.view()).or_raise_sparse())
}

fn compare(a: &PgSparsevec, b: &PgSparsevec) -> Ordering {
    sparse::compare(a.view(), b.view())
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["sparsevec_type"])]
fn sparsevec_cmp(a: PgSparsevec, b: PgSparsevec) -> i32 {
    compare(&a, &b) as i32
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["sparsevec_type"])]
fn sparsevec_eq(a: PgSparsevec, b: PgSparsevec) -> bool {
    compare(&a, &b).is_eq()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["sparsevec_type"])]
fn sparsevec_ne(a: PgSparsevec, b: PgSparsevec) -> bool {
    compare(&a, &b).is_ne()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["sparsevec_type"])]
fn sparsevec_lt(a: PgSparsevec, b: PgSparsevec) -> bool {
    compare(&a, &b).is_lt()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["sparsevec_type"])]
fn sparsevec_le(a: PgSparsevec, b: PgSparsevec) -> bool {
    compare(&a, &b).is_le()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["sparsevec_type"])]
fn sparsevec_gt(a: PgSparsevec, b: PgSparsevec) -> bool {
    compare(&a, &b).is_gt()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["sparsevec_type"])]
fn sparsevec_ge(a: PgSparsevec, b: PgSparsevec) -> bool {
    compare(&a, &b).is_ge()
}

extension_sql_file!(
    "../../sql/sparsevec_operators.sql",
    name = "sparsevec_operators",
    requires = [
        sparsevec_l2_distance,
        sparsevec_negative_inner_product,
        sparsevec_cosine_distance,
        sparsevec_l1_distance,
        sparsevec_cmp,
        sparsevec_eq,
        sparsevec_ne,
        sparsevec_lt,
        sparsevec_le,
        sparsevec_gt,
        sparsevec_ge
    ]
);
