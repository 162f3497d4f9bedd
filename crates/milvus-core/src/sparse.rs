//! The `sparsevec` value: pgvector's sparse vector, its text and binary
//! forms, the checks every one passes, and its arithmetic.
//!
//! A sparse vector is a dimension count and its non-zero entries: indices
//! 0-based and strictly ascending, values finite and non-zero. The text
//! form is pgvector's, 1-based: `{1:0.5,7:1.2}/10000`. Distances merge the
//! two entry lists in index order and sum in `f32` in that order, as
//! pgvector does, so the same operands give the same bits here and there.

use std::cmp::Ordering;
use std::num::IntErrorKind;

pub use crate::distance::{
    sparse_cosine_distance as cosine_distance, sparse_inner_product as inner_product, sparse_l1 as l1,
    sparse_l2_squared as l2_squared,
};
pub use crate::element::Sparse;
pub use crate::vector::{SPARSE_MAX_DIM as MAX_DIM, SPARSE_MAX_NNZ as MAX_NNZ};
use crate::vector::{VectorError, check_elements, check_typmod};

/// A sparse vector built here (parsed, received, converted, computed).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SparseVec {
    pub dim: usize,
    pub indices: Vec<i32>,
    pub values: Vec<f32>,
}

impl SparseVec {
    pub fn view(&self) -> Sparse<'_> {
        Sparse { dim: self.dim, indices: &self.indices, values: &self.values }
    }
}

/// Checks a dimension count read from text or the wire: 1..=MAX_DIM.
pub fn check_dim(dim: i64) -> Result<usize, VectorError> {
    match dim {
        d if d < 1 => Err(VectorError::Empty),
        d if d > MAX_DIM as i64 => Err(VectorError::SparseTooManyDimensions),
        d => Ok(d as usize),
    }
}

/// Checks an entry count against the limit and the dimensions.
pub fn check_nnz(nnz: i64, dim: usize) -> Result<usize, VectorError> {
    if nnz < 0 {
        return Err(VectorError::NegativeNonZero);
    }
    if nnz > MAX_NNZ as i64 {
        return Err(VectorError::TooManyNonZero);
    }
    if nnz as usize > dim {
        return Err(VectorError::MoreElementsThanDimensions);
    }
    Ok(nnz as usize)
}

/// Checks the `i`th index against the dimensions and its predecessor.
fn check_index(indices: &[i32], i: usize, dim: usize) -> Result<(), VectorError> {
    let index = indices[i];
    if index < 0 || index as i64 >= dim as i64 {
        return Err(VectorError::IndexOutOfBounds);
    }
    if i > 0 {
        match index.cmp(&indices[i - 1]) {
            Ordering::Less => return Err(VectorError::IndicesNotAscending),
            Ordering::Equal => return Err(VectorError::DuplicateIndex),
            Ordering::Greater => {}
        }
    }
    Ok(())
}

/// A finite value, or the error naming it by its 1-based dimension.
fn check_value(value: f32, index: i32) -> Result<(), VectorError> {
    // An index below 1 is refused after the value (pgvector's order).
    let index = (index as i64 + 1).max(0) as usize;
    if value.is_nan() {
        return Err(VectorError::NaN { index });
    }
    if value.is_infinite() {
        return Err(VectorError::Infinite { index });
    }
    Ok(())
}

/// Postgres' white space in input functions (`scanner_isspace`).
fn is_pg_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c')
}

/// A signed decimal integer as `strtol` reads it, clamped to `[lo, hi]`
/// (out-of-range counts keep their sign, so the error that follows names
/// the right limit).
fn parse_clamped(token: &str, lo: i64, hi: i64) -> Option<i64> {
    match token.parse::<i64>() {
        Ok(v) => Some(v.clamp(lo, hi)),
        Err(e) => match e.kind() {
            IntErrorKind::PosOverflow => Some(hi),
            IntErrorKind::NegOverflow => Some(lo),
            _ => None,
        },
    }
}

/// One value as `strtof` reads it: `Err` with the token when the numeral is
/// beyond `f32` (overflow to infinity, or underflow to zero), `None` when it
/// is not a number. `inf`, `infinity` and `nan` read as themselves.
fn parse_value(token: &str) -> Option<Result<f32, VectorError>> {
    let value: f32 = token.parse().ok()?;
    let lower = token.to_ascii_lowercase();
    let spelled = lower.trim_start_matches(['+', '-']);
    let named = spelled.starts_with("inf") || spelled.starts_with("nan");
    let mantissa = spelled.split('e').next().unwrap_or("");
    let out_of_range =
        !named && (value.is_infinite() || (value == 0.0 && mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b))));
    Some(if out_of_range { Err(VectorError::SparseOutOfRange(token.to_owned())) } else { Ok(value) })
}

/// Parses pgvector's text form, `{1:0.5,7:1.2}/10000`, checking it against
/// the column's declared dimensions. Entries may come in any order and
/// zeros are dropped, as pgvector does; the checks run in pgvector's order,
/// so each input fails with pgvector's error.
pub fn parse(input: &str, declared: Option<usize>) -> Result<SparseVec, VectorError> {
    let syntax = |detail: &str| VectorError::Syntax {
        type_name: "sparsevec",
        input: input.to_owned(),
        detail: detail.to_owned(),
    };
    if input.bytes().filter(|&b| b == b',').count() + 1 > MAX_NNZ {
        return Err(VectorError::TooManyNonZero);
    }
    let bytes = input.as_bytes();
    let mut at = 0;
    let skip_spaces = |at: &mut usize| {
        while *at < bytes.len() && is_pg_space(bytes[*at]) {
            *at += 1;
        }
    };
    // A value's text: from `at` up to a separator or white space.
    let token = |at: &mut usize| {
        let start = *at;
        while *at < bytes.len() && !b",}/".contains(&bytes[*at]) && !is_pg_space(bytes[*at]) {
            *at += 1;
        }
        &input[start..*at]
    };
    // An integer as `strtol` reads it: a sign, then digits (at least one),
    // clamped to [lo, hi].
    let integer = |at: &mut usize, lo: i64, hi: i64| {
        let start = *at;
        if matches!(bytes.get(*at), Some(b'+' | b'-')) {
            *at += 1;
        }
        let digits = *at;
        while bytes.get(*at).is_some_and(u8::is_ascii_digit) {
            *at += 1;
        }
        if *at == digits { None } else { parse_clamped(&input[start..*at], lo, hi) }
    };

    skip_spaces(&mut at);
    if bytes.get(at) != Some(&b'{') {
        return Err(syntax("Vector contents must start with \"{\"."));
    }
    at += 1;
    skip_spaces(&mut at);
    let mut entries: Vec<(i32, f32)> = Vec::new();
    if bytes.get(at) == Some(&b'}') {
        at += 1;
    } else {
        loop {
            skip_spaces(&mut at);
            let index = integer(&mut at, i32::MIN as i64 + 1, i32::MAX as i64).ok_or_else(|| syntax(""))?;
            skip_spaces(&mut at);
            if bytes.get(at) != Some(&b':') {
                return Err(syntax(""));
            }
            at += 1;
            skip_spaces(&mut at);
            let value = parse_value(token(&mut at)).ok_or_else(|| syntax(""))??;
            // 1-based in text, 0-based stored.
            let index = (index - 1) as i32;
            check_value(value, index)?;
            if value != 0.0 {
                entries.push((index, value));
            }
            skip_spaces(&mut at);
            match bytes.get(at) {
                Some(b',') => at += 1,
                Some(b'}') => {
                    at += 1;
                    break;
                }
                _ => return Err(syntax("")),
            }
        }
    }
    skip_spaces(&mut at);
    if bytes.get(at) != Some(&b'/') {
        return Err(syntax("Unexpected end of input."));
    }
    at += 1;
    skip_spaces(&mut at);
    let dim = integer(&mut at, i32::MIN as i64, i32::MAX as i64).ok_or_else(|| syntax(""))?;
    skip_spaces(&mut at);
    if at != bytes.len() {
        return Err(syntax("Junk after closing."));
    }
    let dim = check_dim(dim)?;
    check_typmod(declared, dim)?;
    entries.sort_by_key(|e| e.0);
    let (indices, values): (Vec<i32>, Vec<f32>) = entries.into_iter().unzip();
    for i in 0..indices.len() {
        check_index(&indices, i, dim)?;
    }
    Ok(SparseVec { dim, indices, values })
}

/// Reads `n` big-endian 4-byte words at `at`, or says what is missing.
fn words(bytes: &[u8], at: usize, n: usize) -> Result<impl Iterator<Item = [u8; 4]> + '_, VectorError> {
    let end = at + 4 * n;
    let body = bytes
        .get(at..end)
        .ok_or_else(|| VectorError::Binary(format!("{} bytes, {n} entries need {end}", bytes.len())))?;
    Ok(body.chunks_exact(4).map(|c| [c[0], c[1], c[2], c[3]]))
}

/// Decodes pgvector's binary form (`sparsevec_recv`): int32 dimensions,
/// int32 entry count, int32 unused (0), the 0-based int32 indices, then the
/// float4 values, all big-endian. Zero values are refused here (the text
/// form drops them).
pub fn decode_binary(bytes: &[u8], declared: Option<usize>) -> Result<SparseVec, VectorError> {
    let mut header = words(bytes, 0, 3)?.map(i32::from_be_bytes);
    let (dim, nnz, unused) = (header.next().unwrap(), header.next().unwrap(), header.next().unwrap());
    let dim = check_dim(dim as i64)?;
    let nnz = check_nnz(nnz as i64, dim)?;
    check_typmod(declared, dim)?;
    if unused != 0 {
        return Err(VectorError::Binary(format!("expected unused to be 0, not {unused}")));
    }
    let indices: Vec<i32> = words(bytes, 12, nnz)?.map(i32::from_be_bytes).collect();
    for i in 0..nnz {
        check_index(&indices, i, dim)?;
    }
    let values: Vec<f32> = words(bytes, 12 + 4 * nnz, nnz)?.map(f32::from_be_bytes).collect();
    for (&value, &index) in values.iter().zip(&indices) {
        check_value(value, index)?;
        if value == 0.0 {
            return Err(VectorError::ZeroInBinary);
        }
    }
    let expected = 12 + 8 * nnz;
    if bytes.len() != expected {
        return Err(VectorError::Binary(format!("{} bytes, {nnz} entries take {expected}", bytes.len())));
    }
    Ok(SparseVec { dim, indices, values })
}

/// The binary form [`decode_binary`] reads.
pub fn encode_binary(v: Sparse) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + 8 * v.indices.len());
    out.extend_from_slice(&(v.dim as i32).to_be_bytes());
    out.extend_from_slice(&(v.indices.len() as i32).to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    for i in v.indices {
        out.extend_from_slice(&i.to_be_bytes());
    }
    for x in v.values {
        out.extend_from_slice(&x.to_be_bytes());
    }
    out
}

/// The non-zero elements of a dense vector (finite, checked by its type).
pub fn from_dense(values: &[f32], declared: Option<usize>) -> Result<SparseVec, VectorError> {
    let dim = check_dim(values.len() as i64)?;
    check_typmod(declared, dim)?;
    let (indices, values): (Vec<i32>, Vec<f32>) =
        values.iter().enumerate().filter(|(_, v)| **v != 0.0).map(|(i, v)| (i as i32, *v)).unzip();
    check_nnz(indices.len() as i64, dim)?;
    for (&value, &index) in values.iter().zip(&indices) {
        check_value(value, index)?;
    }
    Ok(SparseVec { dim, indices, values })
}

/// The dense vector of `v`'s dimensions, refused beyond `vector`'s limit.
pub fn to_dense(v: Sparse, declared: Option<usize>) -> Result<Vec<f32>, VectorError> {
    crate::vector::check_dims(v.dim)?;
    check_typmod(declared, v.dim)?;
    let dense = v.to_dense();
    check_elements(&dense)?;
    Ok(dense)
}

/// Checks that two operands have the same dimensions.
pub fn check_same_dims(a: Sparse, b: Sparse) -> Result<(), VectorError> {
    crate::vector::check_same_dims(a.dim, b.dim)
}

/// The Euclidean norm, summed in f64.
pub fn norm(v: Sparse) -> f64 {
    v.values.iter().fold(0.0f64, |s, &x| s + x as f64 * x as f64).sqrt()
}

/// `v / |v|`, in f64 as pgvector's `l2_normalize`, with entries that
/// become zero dropped; the zero vector stays itself.
pub fn l2_normalize(v: Sparse) -> Result<SparseVec, VectorError> {
    let n = norm(v);
    if n == 0.0 {
        return Ok(SparseVec { dim: v.dim, indices: v.indices.to_vec(), values: v.values.to_vec() });
    }
    let mut out = SparseVec { dim: v.dim, ..Default::default() };
    for (k, (&i, &x)) in v.indices.iter().zip(v.values).enumerate() {
        let q = (x as f64 / n) as f32;
        if q.is_infinite() {
            return Err(VectorError::Overflow { index: k + 1 });
        }
        if q != 0.0 {
            out.indices.push(i);
            out.values.push(q);
        }
    }
    Ok(out)
}

/// pgvector's total order for the btree opclass: as the dense vectors
/// compare element by element (absent entries are zeros), then by
/// dimensions.
pub fn compare(a: Sparse, b: Sparse) -> Ordering {
    let shared = a.indices.len().min(b.indices.len());
    let sign = |x: f32| if x < 0.0 { Ordering::Less } else { Ordering::Greater };
    for k in 0..shared {
        match a.indices[k].cmp(&b.indices[k]) {
            // `a` has a non-zero where `b` has a zero.
            Ordering::Less => return sign(a.values[k]),
            Ordering::Greater => return sign(b.values[k]).reverse(),
            Ordering::Equal => {}
        }
        match a.values[k].partial_cmp(&b.values[k]) {
            Some(Ordering::Equal) | None => {}
            Some(o) => return o,
        }
    }
    if a.indices.len() < b.indices.len() && (b.indices[shared] as i64) < a.dim as i64 {
        return sign(b.values[shared]).reverse();
    }
    if a.indices.len() > b.indices.len() && (a.indices[shared] as i64) < b.dim as i64 {
        return sign(a.values[shared]);
    }
    a.dim.cmp(&b.dim)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SqlError;
    use proptest::prelude::*;

    fn sv(text: &str) -> SparseVec {
        parse(text, None).unwrap()
    }

    fn dense(v: &SparseVec) -> Vec<f32> {
        to_dense(v.view(), None).unwrap()
    }

    #[test]
    fn parses_pgvector_text_in_any_order_dropping_zeros() {
        assert_eq!(sv("{1:1.5,3:-2}/5"), SparseVec { dim: 5, indices: vec![0, 2], values: vec![1.5, -2.0] });
        assert_eq!(
            sv(" { 3 : 2 , 1 : 1 , 2 : 0 } / 3 "),
            SparseVec { dim: 3, indices: vec![0, 2], values: vec![1.0, 2.0] }
        );
        assert_eq!(sv("{}/1"), SparseVec { dim: 1, ..Default::default() });
        // A zero is dropped before the bounds are checked, as in pgvector.
        assert_eq!(sv("{9:0}/3").indices, Vec::<i32>::new());
        assert_eq!(sv("{1:1e-45}/1").values, vec![1e-45]);
    }

    #[test]
    fn refuses_what_pgvector_refuses_with_its_errors() {
        let err = |text: &str| parse(text, None).unwrap_err().message_for("sparsevec");
        let syntax = "invalid input syntax for type sparsevec";
        for bad in
            ["", "[1,2]", "{1:1", "{1:1}", "{1:1}/", "{1:1}/3 x", "{a:1}/3", "{1:a}/3", "{1:1,}/3", "{1 1}/3", "{:1}/3"]
        {
            assert!(err(bad).starts_with(syntax), "{bad:?}: {}", err(bad));
        }
        assert_eq!(err("{1:1}/0"), "sparsevec must have at least 1 dimension");
        assert_eq!(err("{1:1}/1000000001"), "sparsevec cannot have more than 1000000000 dimensions");
        assert_eq!(err("{1:1}/99999999999999"), "sparsevec cannot have more than 1000000000 dimensions");
        assert_eq!(err("{0:1}/3"), "sparsevec index out of bounds");
        assert_eq!(err("{4:1}/3"), "sparsevec index out of bounds");
        assert_eq!(err("{-99999999999:1}/3"), "sparsevec index out of bounds");
        assert_eq!(err("{1:1,1:2}/3"), "sparsevec indices must not contain duplicates");
        assert!(err("{1:NaN}/3").starts_with("NaN not allowed in sparsevec"));
        assert!(err("{1:-inf}/3").starts_with("infinite value not allowed in sparsevec"));
        assert_eq!(err("{1:1e39}/3"), "\"1e39\" is out of range for type sparsevec");
        assert_eq!(err("{1:1e-50}/3"), "\"1e-50\" is out of range for type sparsevec");
        let many = format!("{{{}}}/20000", (1..=16001).map(|i| format!("{i}:1")).collect::<Vec<_>>().join(","));
        assert_eq!(err(&many), "sparsevec cannot have more than 16000 non-zero elements");
        assert_eq!(parse("{1:1}/3", Some(4)).unwrap_err().to_string(), "expected 4 dimensions, not 3");
    }

    #[test]
    fn binary_is_pgvector_wire_format() {
        let v = sv("{2:1.5,5:-3}/6");
        let bytes = encode_binary(v.view());
        assert_eq!(bytes[..12], [0, 0, 0, 6, 0, 0, 0, 2, 0, 0, 0, 0]);
        assert_eq!(bytes[12..20], [0, 0, 0, 1, 0, 0, 0, 4]);
        assert_eq!(decode_binary(&bytes, None).unwrap(), v);
        assert_eq!(decode_binary(&bytes, Some(7)).unwrap_err().to_string(), "expected 7 dimensions, not 6");
    }

    #[test]
    fn binary_decoder_refuses_bad_input() {
        let head =
            |dim: i32, nnz: i32, unused: i32| [dim.to_be_bytes(), nnz.to_be_bytes(), unused.to_be_bytes()].concat();
        let err = |bytes: &[u8]| decode_binary(bytes, None).unwrap_err().message_for("sparsevec");
        assert!(err(&[0, 0, 0]).starts_with("invalid binary sparsevec"));
        assert_eq!(err(&head(0, 0, 0)), "sparsevec must have at least 1 dimension");
        assert_eq!(err(&head(3, -1, 0)), "sparsevec cannot have negative number of elements");
        assert_eq!(err(&head(3, 4, 0)), "sparsevec cannot have more elements than dimensions");
        assert_eq!(err(&head(30000, 16001, 0)), "sparsevec cannot have more than 16000 non-zero elements");
        assert_eq!(err(&head(3, 0, 1)), "invalid binary sparsevec: expected unused to be 0, not 1");
        let entry = |i: i32, x: f32| [head(3, 1, 0), i.to_be_bytes().to_vec(), x.to_be_bytes().to_vec()].concat();
        assert_eq!(err(&entry(3, 1.0)), "sparsevec index out of bounds");
        assert_eq!(err(&entry(0, 0.0)), "binary representation of sparsevec cannot contain zero values");
        assert!(err(&entry(0, f32::NAN)).starts_with("NaN not allowed in sparsevec"));
        let two = [head(3, 2, 0), [2i32.to_be_bytes(), 1i32.to_be_bytes()].concat(), vec![0; 8]].concat();
        assert_eq!(err(&two), "sparsevec indices must be in ascending order");
        let mut trailing = entry(0, 1.0);
        trailing.push(0);
        assert!(err(&trailing).starts_with("invalid binary sparsevec"));
    }

    #[test]
    fn converts_to_and_from_dense() {
        let v = from_dense(&[0.0, 1.5, 0.0, -2.0], None).unwrap();
        assert_eq!(v, sv("{2:1.5,4:-2}/4"));
        assert_eq!(dense(&v), vec![0.0, 1.5, 0.0, -2.0]);
        assert_eq!(
            to_dense(sv("{1:1}/16001").view(), None).unwrap_err().to_string(),
            "vector cannot have more than 16000 dimensions, got 16001"
        );
        assert_eq!(from_dense(&[1.0, 2.0], Some(3)).unwrap_err().to_string(), "expected 3 dimensions, not 2");
    }

    #[test]
    fn distances_of_known_values() {
        let (a, b) = (sv("{1:1,2:2}/3"), sv("{2:4,3:4}/3"));
        assert_eq!(l2_squared(a.view(), b.view()), 1.0 + 4.0 + 16.0);
        assert_eq!(inner_product(a.view(), b.view()), 8.0);
        assert_eq!(l1(a.view(), b.view()), 1.0 + 2.0 + 4.0);
        assert!((cosine_distance(a.view(), a.view())).abs() < 1e-12);
        assert!(cosine_distance(a.view(), sv("{}/3").view()).is_nan());
        assert_eq!(norm(sv("{1:3,3:4}/3").view()), 5.0);
        assert_eq!(l2_normalize(sv("{1:3,3:4}/3").view()).unwrap(), sv("{1:0.6,3:0.8}/3"));
        assert_eq!(l2_normalize(sv("{}/3").view()).unwrap(), sv("{}/3"));
        // A quotient that underflows to zero is dropped.
        assert_eq!(l2_normalize(sv("{1:3e38,2:1e-45}/2").view()).unwrap(), sv("{1:1}/2"));
    }

    #[test]
    fn order_is_pgvectors() {
        let cmp = |a: &str, b: &str| compare(sv(a).view(), sv(b).view());
        assert_eq!(cmp("{1:1}/3", "{1:1}/3"), Ordering::Equal);
        assert_eq!(cmp("{1:1}/3", "{1:2}/3"), Ordering::Less);
        assert_eq!(cmp("{1:1}/3", "{2:1}/3"), Ordering::Greater);
        assert_eq!(cmp("{1:-1}/3", "{2:1}/3"), Ordering::Less);
        assert_eq!(cmp("{}/3", "{2:1}/3"), Ordering::Less);
        assert_eq!(cmp("{}/3", "{2:-1}/3"), Ordering::Greater);
        assert_eq!(cmp("{1:1}/2", "{1:1}/3"), Ordering::Less);
        assert_eq!(cmp("{1:1}/3", "{1:1,2:1}/2"), Ordering::Less);
        assert_eq!(cmp("{1:1}/3", "{1:1,2:-1}/2"), Ordering::Greater);
    }

    fn sparse_and_dense() -> impl Strategy<Value = (SparseVec, SparseVec)> {
        (1usize..40).prop_flat_map(|dim| {
            let entry = prop_oneof![3 => Just(0i8), 2 => -8i8..8i8].prop_map(|x| x as f32 * 0.5);
            (prop::collection::vec(entry.clone(), dim), prop::collection::vec(entry, dim))
                .prop_map(|(a, b)| (from_dense(&a, None).unwrap(), from_dense(&b, None).unwrap()))
        })
    }

    proptest! {
        #[test]
        fn distances_equal_the_dense_ones((a, b) in sparse_and_dense()) {
            let (da, db) = (dense(&a), dense(&b));
            // Halves of small integers: every sum is exact in either order.
            prop_assert_eq!(l2_squared(a.view(), b.view()), crate::distance::l2_squared(&da, &db));
            prop_assert_eq!(inner_product(a.view(), b.view()), crate::distance::inner_product(&da, &db));
            prop_assert_eq!(l1(a.view(), b.view()), crate::distance::l1(&da, &db));
            prop_assert_eq!(compare(a.view(), b.view()), crate::vector::compare(&da, &db));
        }

        #[test]
        fn text_and_binary_round_trip((a, _) in sparse_and_dense()) {
            let text = std::format!(
                "{{{}}}/{}",
                a.indices.iter().zip(&a.values).map(|(i, x)| std::format!("{}:{x}", i + 1)).collect::<Vec<_>>().join(","),
                a.dim
            );
            prop_assert_eq!(&parse(&text, None).unwrap(), &a);
            prop_assert_eq!(&decode_binary(&encode_binary(a.view()), None).unwrap(), &a);
        }

        #[test]
        fn parser_and_decoder_never_panic(s in ".{0,64}", bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse(&s, None);
            let _ = decode_binary(&bytes, None);
        }
    }
}
