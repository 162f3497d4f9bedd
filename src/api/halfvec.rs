//! Operators, functions and aggregates on `halfvec`, pgvector's names and
//! semantics. Distances read the halves in place with the kernels a halfvec
//! index uses (summed in f32); the rest widens its operands to f32
//! (exactly), computes as for `vector` in the core, and narrows a vector
//! result back to half, refusing what half cannot hold.

use milvus_core::distance::{self, Metric};
use milvus_core::vector;
use pgrx::prelude::*;

use super::operators::avg_state;
use crate::error::OrRaise;
use crate::types::PgHalfvec;
use crate::types::bit::PgBit;

/// `metric`'s distance between two halfvecs, with the kernel the index
/// uses (elements widened as read, summed in f32).
fn half_distance(metric: Metric, a: &PgHalfvec, b: &PgHalfvec) -> f64 {
    vector::check_same_dims(a.dims(), b.dims()).or_raise_half();
    metric.distance_f16(a.as_slice(), b.as_slice()) as f64
}

/// A halfvec of `values` (computed in f32).
fn half(values: &[f32]) -> PgHalfvec {
    PgHalfvec::from_slice(&vector::to_half(values).or_raise_half())
}

#[pg_extern(name = "l2_distance", immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_l2_distance(a: PgHalfvec, b: PgHalfvec) -> f64 {
    half_distance(Metric::L2, &a, &b)
}

#[pg_extern(name = "inner_product", immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_inner_product(a: PgHalfvec, b: PgHalfvec) -> f64 {
    -half_distance(Metric::InnerProduct, &a, &b)
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_negative_inner_product(a: PgHalfvec, b: PgHalfvec) -> f64 {
    half_distance(Metric::InnerProduct, &a, &b)
}

#[pg_extern(name = "cosine_distance", immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_cosine_distance(a: PgHalfvec, b: PgHalfvec) -> f64 {
    half_distance(Metric::Cosine, &a, &b)
}

#[pg_extern(name = "l1_distance", immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_l1_distance(a: PgHalfvec, b: PgHalfvec) -> f64 {
    half_distance(Metric::L1, &a, &b)
}

#[pg_extern(name = "vector_dims", immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_vector_dims(v: PgHalfvec) -> i32 {
    v.dims() as i32
}

#[pg_extern(name = "l2_norm", immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_l2_norm(v: PgHalfvec) -> f64 {
    distance::norm(&v.to_f32())
}

#[pg_extern(name = "l2_normalize", immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_l2_normalize(v: PgHalfvec) -> PgHalfvec {
    half(&vector::l2_normalize(&v.to_f32()))
}

#[pg_extern(name = "binary_quantize", immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_binary_quantize(v: PgHalfvec) -> PgBit {
    PgBit::new(&vector::binary_quantize(&v.to_f32()), v.dims())
}

#[pg_extern(name = "subvector", immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_subvector(v: PgHalfvec, start: i32, count: i32) -> PgHalfvec {
    half(&vector::subvector(&v.to_f32(), start, count).or_raise_half())
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_add(a: PgHalfvec, b: PgHalfvec) -> PgHalfvec {
    half(&vector::add(&a.to_f32(), &b.to_f32()).or_raise_half())
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_sub(a: PgHalfvec, b: PgHalfvec) -> PgHalfvec {
    half(&vector::sub(&a.to_f32(), &b.to_f32()).or_raise_half())
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_mul(a: PgHalfvec, b: PgHalfvec) -> PgHalfvec {
    PgHalfvec::from_slice(&vector::mul_half(&a.to_f32(), &b.to_f32()).or_raise_half())
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_concat(a: PgHalfvec, b: PgHalfvec) -> PgHalfvec {
    PgHalfvec::from_slice(&vector::concat(a.as_slice(), b.as_slice()).or_raise_half())
}

/// Element-wise order, then length: the btree opclass `halfvec_ops`.
fn compare(a: &PgHalfvec, b: &PgHalfvec) -> std::cmp::Ordering {
    vector::compare(&a.to_f32(), &b.to_f32())
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_cmp(a: PgHalfvec, b: PgHalfvec) -> i32 {
    compare(&a, &b) as i32
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_eq(a: PgHalfvec, b: PgHalfvec) -> bool {
    compare(&a, &b).is_eq()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_ne(a: PgHalfvec, b: PgHalfvec) -> bool {
    compare(&a, &b).is_ne()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_lt(a: PgHalfvec, b: PgHalfvec) -> bool {
    compare(&a, &b).is_lt()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_le(a: PgHalfvec, b: PgHalfvec) -> bool {
    compare(&a, &b).is_le()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_gt(a: PgHalfvec, b: PgHalfvec) -> bool {
    compare(&a, &b).is_gt()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_ge(a: PgHalfvec, b: PgHalfvec) -> bool {
    compare(&a, &b).is_ge()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_accum(state: Array<f64>, v: PgHalfvec) -> Vec<f64> {
    vector::accumulate(&avg_state(state, "halfvec_accum"), &v.to_f32()).or_raise_half()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_combine(a: Array<f64>, b: Array<f64>) -> Vec<f64> {
    vector::combine(&avg_state(a, "halfvec_combine"), &avg_state(b, "halfvec_combine")).or_raise_half()
}

#[pg_extern(immutable, strict, parallel_safe, requires = ["halfvec_type"])]
fn halfvec_avg(state: Array<f64>) -> Option<PgHalfvec> {
    vector::average(&avg_state(state, "halfvec_avg")).or_raise_half().map(|mean| half(&mean))
}

extension_sql_file!(
    "../../sql/halfvec_operators.sql",
    name = "halfvec_operators",
    requires = [
        halfvec_l2_distance,
        halfvec_negative_inner_product,
        halfvec_cosine_distance,
        halfvec_l1_distance,
        halfvec_add,
        halfvec_sub,
        halfvec_mul,
        halfvec_concat,
        halfvec_cmp,
        halfvec_eq,
        halfvec_ne,
        halfvec_lt,
        halfvec_le,
        halfvec_gt,
        halfvec_ge,
        halfvec_accum,
        halfvec_combine,
        halfvec_avg
    ]
);
