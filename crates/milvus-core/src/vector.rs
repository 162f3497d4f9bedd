//! The `vector` value: its text form and the checks every vector passes.
//!
//! The text form is pgvector's: `[1,2.5,-3e-2]`, elements separated by commas,
//! white space allowed around brackets, elements and commas. Output is
//! Postgres' own float4 text per element, written by the skin
//! (`vector_out`); any text that reads back to the same `f32` parses to it.
//!
//! Every constructor of a vector goes through [`check_elements`], so no vector
//! with NaN, an infinity, zero elements or more than [`MAX_DIM`] elements can
//! exist anywhere in the system: not in a heap tuple, not in a segment.

pub use half::f16;

pub use crate::element::MAX_DIM;
use crate::error::{SqlError, SqlState};

/// The most dimensions a sparsevec has (pgvector's `SPARSEVEC_MAX_DIM`).
pub use crate::element::SPARSE_MAX_DIM;
/// The most non-zero entries a sparsevec holds (`SPARSEVEC_MAX_NNZ`).
pub const SPARSE_MAX_NNZ: usize = 16_000;

/// Why a vector was refused. Each message names the offending part; the skin
/// turns these into Postgres errors with the matching SQLSTATE.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VectorError {
    #[error("invalid input syntax for type {type_name}: \"{input}\"")]
    Syntax {
        /// `vector` or `halfvec`.
        type_name: &'static str,
        input: String,
        /// What is wrong and where, for the error's DETAIL (none when empty).
        detail: String,
    },
    #[error("vector must have at least 1 dimension")]
    Empty,
    #[error("vector cannot have more than {MAX_DIM} dimensions, got {0}")]
    TooManyDimensions(usize),
    #[error("NaN not allowed in vector (element {index})")]
    NaN { index: usize },
    #[error("infinite value not allowed in vector (element {index})")]
    Infinite { index: usize },
    #[error("expected {expected} dimensions, not {actual}")]
    TypmodMismatch { expected: usize, actual: usize },
    #[error("different vector dimensions {0} and {1}")]
    DimensionMismatch(usize, usize),
    #[error("different bit lengths {0} and {1}")]
    BitLengthMismatch(usize, usize),
    #[error("{0}")]
    Typmod(String),
    /// A type modifier that is not an integer, in Postgres' own words for
    /// that (pgvector leaves it to `ArrayGetIntegerTypmods`).
    #[error("invalid input syntax for type integer: \"{0}\"")]
    TypmodSyntax(String),
    /// A numeral beyond f32's range, as written (`strtof`'s ERANGE).
    #[error("\"{0}\" is out of range for type vector")]
    OutOfRange(String),
    #[error("invalid binary vector: {0}")]
    Binary(String),
    #[error("value out of range: overflow (element {index})")]
    Overflow { index: usize },
    #[error("value out of range: underflow (element {index})")]
    Underflow { index: usize },
    #[error("\"{value}\" is out of range for type halfvec")]
    HalfOutOfRange { value: f32 },
    #[error("\"{0}\" is out of range for type sparsevec")]
    SparseOutOfRange(String),
    #[error("sparsevec cannot have more than {SPARSE_MAX_DIM} dimensions")]
    SparseTooManyDimensions,
    #[error("sparsevec cannot have more than {SPARSE_MAX_NNZ} non-zero elements")]
    TooManyNonZero,
    #[error("sparsevec cannot have negative number of elements")]
    NegativeNonZero,
    #[error("sparsevec cannot have more elements than dimensions")]
    MoreElementsThanDimensions,
    #[error("sparsevec index out of bounds")]
    IndexOutOfBounds,
    #[error("sparsevec indices must be in ascending order")]
    IndicesNotAscending,
    #[error("sparsevec indices must not contain duplicates")]
    DuplicateIndex,
    #[error("binary representation of sparsevec cannot contain zero values")]
    ZeroInBinary,
    /// A row an index takes whole into one page
    /// ([`crate::element::SPARSE_MAX_NNZ`]; pgvector's HNSW has the same).
    #[error("sparsevec cannot have more than {} non-zero elements for milvus index", crate::element::SPARSE_MAX_NNZ)]
    TooManyNonZeroForIndex,
}

impl SqlError for VectorError {
    /// The message as it reads for a value of `type_name` (`halfvec`):
    /// pgvector names the type an error concerns ("NaN not allowed in
    /// halfvec", "different halfvec dimensions 2 and 1").
    fn message_for(&self, type_name: &str) -> String {
        let message = self.to_string();
        match self {
            VectorError::Syntax { .. }
            | VectorError::Typmod(_)
            | VectorError::TypmodSyntax(_)
            | VectorError::HalfOutOfRange { .. }
            | VectorError::BitLengthMismatch(..)
            | VectorError::SparseOutOfRange(_)
            | VectorError::SparseTooManyDimensions
            | VectorError::TooManyNonZero
            | VectorError::NegativeNonZero
            | VectorError::MoreElementsThanDimensions
            | VectorError::IndexOutOfBounds
            | VectorError::IndicesNotAscending
            | VectorError::DuplicateIndex
            | VectorError::ZeroInBinary
            | VectorError::TooManyNonZeroForIndex => message,
            _ => message.replacen("vector", type_name, 1),
        }
    }

    fn detail(&self) -> Option<String> {
        match self {
            VectorError::Syntax { detail, .. } => Some(detail.clone()).filter(|d| !d.is_empty()),
            _ => None,
        }
    }

    /// pgvector's SQLSTATE for each refusal.
    fn sqlstate(&self) -> SqlState {
        match self {
            VectorError::Syntax { .. } | VectorError::TypmodSyntax(_) => SqlState::InvalidTextRepresentation,
            VectorError::TooManyDimensions(_)
            | VectorError::SparseTooManyDimensions
            | VectorError::TooManyNonZero
            | VectorError::TooManyNonZeroForIndex
            | VectorError::MoreElementsThanDimensions => SqlState::ProgramLimitExceeded,
            VectorError::NegativeNonZero
            | VectorError::IndexOutOfBounds
            | VectorError::IndicesNotAscending
            | VectorError::DuplicateIndex
            | VectorError::ZeroInBinary => SqlState::DataException,
            VectorError::Empty | VectorError::NaN { .. } | VectorError::Infinite { .. } => SqlState::DataException,
            VectorError::TypmodMismatch { .. }
            | VectorError::DimensionMismatch(..)
            | VectorError::BitLengthMismatch(..) => SqlState::DataException,
            VectorError::Typmod(_) => SqlState::InvalidParameterValue,
            VectorError::Binary(_) => SqlState::InvalidBinaryRepresentation,
            VectorError::Overflow { .. }
            | VectorError::Underflow { .. }
            | VectorError::OutOfRange(_)
            | VectorError::HalfOutOfRange { .. }
            | VectorError::SparseOutOfRange(_) => SqlState::NumericValueOutOfRange,
        }
    }
}

/// Checks the elements of a vector about to be built: 1..=MAX_DIM of them,
/// all finite.
pub fn check_elements(values: &[f32]) -> Result<(), VectorError> {
    check_dims(values.len())?;
    for (i, v) in values.iter().enumerate() {
        if v.is_nan() {
            return Err(VectorError::NaN { index: i + 1 });
        }
        if v.is_infinite() {
            return Err(VectorError::Infinite { index: i + 1 });
        }
    }
    Ok(())
}

/// Checks a dimension count: 1..=MAX_DIM.
pub fn check_dims(dims: usize) -> Result<(), VectorError> {
    match dims {
        0 => Err(VectorError::Empty),
        d if d > MAX_DIM => Err(VectorError::TooManyDimensions(d)),
        _ => Ok(()),
    }
}

/// Reads the type modifier of `vector(n)` (or `halfvec(n)`: `type_name`
/// says which, for the messages): exactly one integer, 1..=MAX_DIM.
pub fn typmod_in(type_name: &str, list: &[&str]) -> Result<usize, VectorError> {
    typmod_in_up_to(type_name, list, MAX_DIM)
}

/// [`typmod_in`] for a type of at most `max` dimensions (`sparsevec`).
pub fn typmod_in_up_to(type_name: &str, list: &[&str], max: usize) -> Result<usize, VectorError> {
    let [one] = list else {
        return Err(VectorError::Typmod(format!("invalid type modifier: {type_name} takes one dimension count")));
    };
    let dims: i64 = one.trim().parse().map_err(|_| VectorError::TypmodSyntax((*one).to_owned()))?;
    if dims < 1 {
        return Err(VectorError::Typmod(format!("dimensions for type {type_name} must be at least 1")));
    }
    if dims > max as i64 {
        return Err(VectorError::Typmod(format!("dimensions for type {type_name} cannot exceed {max}")));
    }
    Ok(dims as usize)
}

/// Elements as `halfvec` stores them (IEEE 754 binary16, rounded to
/// nearest), after [`check_elements`]; a finite value beyond half's range
/// (65,504) is an error, as in pgvector.
pub fn to_half(values: &[f32]) -> Result<Vec<f16>, VectorError> {
    check_elements(values)?;
    values
        .iter()
        .map(|v| {
            let h = f16::from_f32(*v);
            if h.is_infinite() { Err(VectorError::HalfOutOfRange { value: *v }) } else { Ok(h) }
        })
        .collect()
}

/// Half elements widened to f32 (exactly: every half is an f32).
pub fn from_half(values: &[f16]) -> Vec<f32> {
    values.iter().map(|h| h.to_f32()).collect()
}

/// Decodes pgvector's binary `halfvec` (int16 dimensions, int16 unused,
/// each element's 16 bits, all big-endian), refusing NaN and infinities.
pub fn decode_half_binary(bytes: &[u8]) -> Result<Vec<f32>, VectorError> {
    let body = binary_elements(bytes, 2)?;
    let values: Vec<f32> =
        body.chunks_exact(2).map(|b| f16::from_bits(u16::from_be_bytes([b[0], b[1]])).to_f32()).collect();
    check_elements(&values)?;
    Ok(values)
}

/// The binary form [`decode_half_binary`] reads.
pub fn encode_half_binary(values: &[f16]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + 2 * values.len());
    out.extend_from_slice(&(values.len() as i16).to_be_bytes());
    out.extend_from_slice(&0i16.to_be_bytes());
    for v in values {
        out.extend_from_slice(&v.to_bits().to_be_bytes());
    }
    out
}

/// Checks a vector against the dimensions a column declares (`vector(n)`);
/// `None` means the column declared none.
/// Checks a row an index is to store: its dimensions against the index's,
/// and a sparse row's entries against what one page holds.
pub fn check_row(dims: usize, row: crate::element::Row<'_>) -> Result<(), VectorError> {
    check_typmod(Some(dims), row.len())?;
    match row {
        crate::element::Row::Sparse(words) if words[1] as usize > crate::element::SPARSE_MAX_NNZ => {
            Err(VectorError::TooManyNonZeroForIndex)
        }
        _ => Ok(()),
    }
}

pub fn check_typmod(declared: Option<usize>, actual: usize) -> Result<(), VectorError> {
    match declared {
        Some(expected) if expected != actual => Err(VectorError::TypmodMismatch { expected, actual }),
        _ => Ok(()),
    }
}

/// Checks that two operands have the same dimensions.
pub fn check_same_dims(a: usize, b: usize) -> Result<(), VectorError> {
    if a == b { Ok(()) } else { Err(VectorError::DimensionMismatch(a, b)) }
}

/// [`check_same_dims`] for two bit strings (pgvector's message).
pub fn check_same_bits(a: usize, b: usize) -> Result<(), VectorError> {
    if a == b { Ok(()) } else { Err(VectorError::BitLengthMismatch(a, b)) }
}

/// Parses the text form `[1, 2.5, -3e-2]` into checked elements.
pub fn parse(input: &str) -> Result<Vec<f32>, VectorError> {
    parse_as("vector", input)
}

/// [`parse`], its errors naming the type `type_name` (`halfvec`).
pub fn parse_as(type_name: &'static str, input: &str) -> Result<Vec<f32>, VectorError> {
    let syntax = |detail: String| VectorError::Syntax { type_name, input: input.to_owned(), detail };
    let trimmed = input.trim_matches(is_pg_space);
    let body = trimmed.strip_prefix('[').ok_or_else(|| syntax("Vector contents must start with \"[\".".into()))?;
    let body = body.strip_suffix(']').ok_or_else(|| syntax("Vector contents must end with \"]\".".into()))?;
    if body.trim_matches(is_pg_space).is_empty() {
        return Err(VectorError::Empty);
    }
    let mut values = Vec::with_capacity(body.len() / 4 + 1);
    for (i, raw) in body.split(',').enumerate() {
        let element = raw.trim_matches(is_pg_space);
        if element.is_empty() {
            return Err(syntax(format!("Element {} is empty.", i + 1)));
        }
        if values.len() == MAX_DIM {
            return Err(VectorError::TooManyDimensions(body.split(',').count()));
        }
        let value = parse_element(element)
            .ok_or_else(|| syntax(format!("Element {} \"{element}\" is not a number.", i + 1)))?;
        if value.is_infinite() && !element.to_ascii_lowercase().contains("inf") {
            return Err(VectorError::OutOfRange(element.to_owned()));
        }
        values.push(value);
    }
    check_elements(&values)?;
    Ok(values)
}

/// One element. Rust's `f32` parser reads what `strtof` reads for decimal
/// input, and reads `nan`/`inf`/`infinity` (which [`check_elements`]
/// names) and out-of-range numerals such as `1e39` as infinity (which
/// [`parse_as`] refuses as out of range, as pgvector does).
fn parse_element(s: &str) -> Option<f32> {
    s.parse().ok()
}

/// Postgres' notion of white space in input functions (`scanner_isspace`).
fn is_pg_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
}

/// Decodes pgvector's binary form (`vector_recv`): int16 dimensions, int16
/// unused (must be 0), then the float4 elements, all in network byte order.
pub fn decode_binary(bytes: &[u8]) -> Result<Vec<f32>, VectorError> {
    let body = binary_elements(bytes, 4)?;
    let values: Vec<f32> = body.chunks_exact(4).map(|c| f32::from_be_bytes([c[0], c[1], c[2], c[3]])).collect();
    check_elements(&values)?;
    Ok(values)
}

/// The elements' bytes of a binary vector or halfvec (`size` bytes each),
/// after checking its header and its length.
fn binary_elements(bytes: &[u8], size: usize) -> Result<&[u8], VectorError> {
    let header: [u8; 4] = bytes
        .get(..4)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| VectorError::Binary(format!("{} bytes, header needs 4", bytes.len())))?;
    let dims = i16::from_be_bytes([header[0], header[1]]);
    let unused = i16::from_be_bytes([header[2], header[3]]);
    if dims < 0 {
        return Err(VectorError::Binary(format!("negative dimensions {dims}")));
    }
    check_dims(dims as usize)?;
    if unused != 0 {
        return Err(VectorError::Binary(format!("expected unused to be 0, not {unused}")));
    }
    let (dims, body) = (dims as usize, &bytes[4..]);
    if body.len() != dims * size {
        return Err(VectorError::Binary(format!(
            "{dims} dimensions need {} bytes of elements, got {}",
            dims * size,
            body.len()
        )));
    }
    Ok(body)
}

/// Encodes pgvector's binary form (`vector_send`).
pub fn encode_binary(values: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + values.len() * 4);
    out.extend_from_slice(&(values.len() as i16).to_be_bytes());
    out.extend_from_slice(&0i16.to_be_bytes());
    for v in values {
        out.extend_from_slice(&v.to_be_bytes());
    }
    out
}

/// Element-wise `a + b`, refusing an overflow to infinity.
pub fn add(a: &[f32], b: &[f32]) -> Result<Vec<f32>, VectorError> {
    elementwise(a, b, |x, y| x + y)
}

/// Element-wise `a - b`, refusing an overflow to infinity.
pub fn sub(a: &[f32], b: &[f32]) -> Result<Vec<f32>, VectorError> {
    elementwise(a, b, |x, y| x - y)
}

fn elementwise(a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) -> Result<Vec<f32>, VectorError> {
    check_same_dims(a.len(), b.len())?;
    let out: Vec<f32> = a.iter().zip(b).map(|(x, y)| f(*x, *y)).collect();
    match out.iter().position(|v| v.is_infinite()) {
        Some(i) => Err(VectorError::Overflow { index: i + 1 }),
        None => Ok(out),
    }
}

/// Element-wise `a * b` (pgvector's `*`), refusing an overflow to infinity
/// and an underflow to zero of two non-zero elements.
pub fn mul(a: &[f32], b: &[f32]) -> Result<Vec<f32>, VectorError> {
    let out = elementwise(a, b, |x, y| x * y)?;
    check_underflow(a, b, out.iter().copied())?;
    Ok(out)
}

/// [`mul`] for `halfvec`: the product in half, where a product half rounds
/// to zero is an underflow too.
pub fn mul_half(a: &[f32], b: &[f32]) -> Result<Vec<f16>, VectorError> {
    let out = to_half(&mul(a, b)?)?;
    check_underflow(a, b, out.iter().map(|h| h.to_f32()))?;
    Ok(out)
}

/// Refuses a zero `product` of two non-zero elements.
fn check_underflow(a: &[f32], b: &[f32], product: impl Iterator<Item = f32>) -> Result<(), VectorError> {
    match product.zip(a.iter().zip(b)).position(|(r, (x, y))| r == 0.0 && *x != 0.0 && *y != 0.0) {
        Some(i) => Err(VectorError::Underflow { index: i + 1 }),
        None => Ok(()),
    }
}

/// `a || b`: the elements of `a`, then those of `b`.
pub fn concat<T: Copy>(a: &[T], b: &[T]) -> Result<Vec<T>, VectorError> {
    check_dims(a.len() + b.len())?;
    Ok([a, b].concat())
}

/// `count` elements from the 1-based position `start`, as `substring`
/// counts (pgvector's `subvector`): a start before the first element
/// shortens the result, one past the end or a count below 1 is an error.
pub fn subvector(v: &[f32], start: i32, count: i32) -> Result<Vec<f32>, VectorError> {
    if count < 1 {
        return Err(VectorError::Empty);
    }
    let (start, count) = (start as i64, count as i64);
    let end = (start + count).min(v.len() as i64 + 1);
    if start > v.len() as i64 {
        return Err(VectorError::Empty);
    }
    let start = start.max(1);
    if end <= start {
        return Err(VectorError::Empty);
    }
    Ok(v[(start - 1) as usize..(end - 1) as usize].to_vec())
}

/// One bit per element, set where the element is positive, first element
/// in the most significant bit (Postgres' `bit` order): pgvector's
/// `binary_quantize`.
pub fn binary_quantize(v: &[f32]) -> Vec<u8> {
    let mut bits = vec![0u8; v.len().div_ceil(8)];
    for (i, x) in v.iter().enumerate() {
        if *x > 0.0 {
            bits[i / 8] |= 0x80 >> (i % 8);
        }
    }
    bits
}

/// The running state of `avg(vector)`, as pgvector keeps it: the count of
/// rows, then each element's sum in f64 (a `double precision[]`, `{0}`
/// before the first row). [`accumulate`] adds a row, [`combine`] merges two
/// parallel workers' states, [`average`] ends the aggregate.
pub fn accumulate(state: &[f64], v: &[f32]) -> Result<Vec<f64>, VectorError> {
    let n = state.first().copied().unwrap_or(0.0) + 1.0;
    let sums = &state[state.len().min(1)..];
    if sums.is_empty() {
        return Ok(std::iter::once(n).chain(v.iter().map(|x| *x as f64)).collect());
    }
    if sums.len() != v.len() {
        return Err(VectorError::TypmodMismatch { expected: sums.len(), actual: v.len() });
    }
    let mut out = Vec::with_capacity(state.len());
    out.push(n);
    for (i, (s, x)) in sums.iter().zip(v).enumerate() {
        let sum = s + *x as f64;
        if sum.is_infinite() {
            return Err(VectorError::Overflow { index: i + 1 });
        }
        out.push(sum);
    }
    Ok(out)
}

/// Two states of [`accumulate`] as one. As pgvector's `vector_combine`:
/// a state of no rows gives way to the other, whose sums must then be of
/// 1..=[`MAX_DIM`] dimensions, and two states of rows must agree on their
/// dimensions. Two states of no rows (`{0}`, what every parallel worker
/// that saw no row hands over) make `{0}`, where pgvector 0.8.6 refuses
/// them and so fails `avg()` of a parallel plan that matches no row.
pub fn combine(a: &[f64], b: &[f64]) -> Result<Vec<f64>, VectorError> {
    let (na, nb) = (a.first().copied().unwrap_or(0.0), b.first().copied().unwrap_or(0.0));
    let (sa, sb) = (&a[a.len().min(1)..], &b[b.len().min(1)..]);
    if na == 0.0 && nb == 0.0 && sa.is_empty() && sb.is_empty() {
        return Ok(vec![0.0]);
    }
    // The sums that stand: the other state's where one saw no row.
    let first = if na == 0.0 { sb } else { sa };
    check_dims(first.len())?;
    let sums: Vec<f64> = if na == 0.0 || nb == 0.0 {
        first.to_vec()
    } else if sa.len() != sb.len() {
        return Err(VectorError::TypmodMismatch { expected: sa.len(), actual: sb.len() });
    } else {
        let sums: Vec<f64> = sa.iter().zip(sb).map(|(x, y)| x + y).collect();
        if let Some(i) = sums.iter().position(|s| s.is_infinite()) {
            return Err(VectorError::Overflow { index: i + 1 });
        }
        sums
    };
    Ok(std::iter::once(na + nb).chain(sums).collect())
}

/// The mean of the rows a state of [`accumulate`] has seen; `None` for no
/// row (SQL's `avg` of nothing is NULL).
pub fn average(state: &[f64]) -> Result<Option<Vec<f32>>, VectorError> {
    let n = state.first().copied().unwrap_or(0.0);
    if n == 0.0 {
        return Ok(None);
    }
    let mean: Vec<f32> = state[1..].iter().map(|s| (s / n) as f32).collect();
    check_elements(&mean)?;
    Ok(Some(mean))
}

/// `a / |a|`, the norm and the quotients in f64 as pgvector's
/// `l2_normalize` (so `[3e38]` is `[1]`); the zero vector stays zero. No
/// quotient exceeds 1, so none overflows.
pub fn l2_normalize(a: &[f32]) -> Vec<f32> {
    let norm = crate::distance::norm(a);
    if norm == 0.0 {
        return a.to_vec();
    }
    a.iter().map(|x| (*x as f64 / norm) as f32).collect()
}

/// Total order for the btree opclass: element by element, then by length
/// (pgvector's `vector_cmp`).
pub fn compare(a: &[f32], b: &[f32]) -> std::cmp::Ordering {
    for (x, y) in a.iter().zip(b) {
        match x.partial_cmp(y) {
            Some(std::cmp::Ordering::Equal) | None => continue,
            Some(o) => return o,
        }
    }
    a.len().cmp(&b.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn half_elements_round_to_nearest_and_refuse_what_half_cannot_hold() {
        let h = to_half(&[1.0, 0.1, -65504.0, 1e-8]).unwrap();
        assert_eq!(from_half(&h), vec![1.0, 0.099975586, -65504.0, 0.0]);
        assert_eq!(to_half(&[1.0, 70000.0]), Err(VectorError::HalfOutOfRange { value: 70000.0 }));
        assert_eq!(to_half(&[1.0, 70000.0]).unwrap_err().to_string(), "\"70000\" is out of range for type halfvec");
        assert_eq!(to_half(&[f32::NAN]), Err(VectorError::NaN { index: 1 }));
        let bytes = encode_half_binary(&h);
        assert_eq!(bytes.len(), 4 + 2 * 4);
        assert_eq!(decode_half_binary(&bytes).unwrap(), from_half(&h));
        let inf = encode_half_binary(&[f16::INFINITY]);
        assert_eq!(decode_half_binary(&inf), Err(VectorError::Infinite { index: 1 }));
        assert!(decode_half_binary(&bytes[..7]).is_err());
        assert_eq!(
            typmod_in("halfvec", &["0"]).unwrap_err().to_string(),
            "dimensions for type halfvec must be at least 1"
        );
        assert_eq!(VectorError::NaN { index: 2 }.message_for("halfvec"), "NaN not allowed in halfvec (element 2)");
        assert_eq!(VectorError::DimensionMismatch(2, 1).message_for("halfvec"), "different halfvec dimensions 2 and 1");
        assert_eq!(VectorError::Empty.message_for("halfvec"), "halfvec must have at least 1 dimension");
        let syntax = parse_as("halfvec", "[1,a]").unwrap_err();
        assert_eq!(syntax.message_for("halfvec"), "invalid input syntax for type halfvec: \"[1,a]\"");
    }

    #[test]
    fn subvector_counts_as_substring_does() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(subvector(&v, 1, 3).unwrap(), vec![1.0, 2.0, 3.0]);
        assert_eq!(subvector(&v, 3, 2).unwrap(), vec![3.0, 4.0]);
        assert_eq!(subvector(&v, 4, 10).unwrap(), vec![4.0, 5.0], "past the end: cut");
        assert_eq!(subvector(&v, -1, 3).unwrap(), vec![1.0], "before the start: shortened");
        assert_eq!(subvector(&v, 5, i32::MAX).unwrap(), vec![5.0], "no overflow");
        for (start, count) in [(6, 1), (1, 0), (-3, 3), (2, -1)] {
            assert_eq!(subvector(&v, start, count), Err(VectorError::Empty), "{start}, {count}");
        }
    }

    #[test]
    fn mul_concat_and_quantize_as_pgvector() {
        assert_eq!(mul(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap(), vec![4.0, 10.0, 18.0]);
        assert_eq!(mul(&[1e38], &[1e38]), Err(VectorError::Overflow { index: 1 }));
        assert_eq!(mul(&[0.0, 1e-30], &[5.0, 1e-30]), Err(VectorError::Underflow { index: 2 }));
        assert_eq!(mul(&[1.0], &[1.0, 2.0]), Err(VectorError::DimensionMismatch(1, 2)));
        assert_eq!(mul_half(&[1e-4, 2.0], &[1.0, 3.0]).unwrap(), to_half(&[1e-4, 6.0]).unwrap());
        assert_eq!(mul_half(&[2.0, 1e-4], &[3.0, 1e-4]), Err(VectorError::Underflow { index: 2 }), "zero in half");
        assert_eq!(mul_half(&[300.0], &[300.0]), Err(VectorError::HalfOutOfRange { value: 90000.0 }));
        assert_eq!(concat(&[1.0], &[2.0, 3.0]).unwrap(), vec![1.0, 2.0, 3.0]);
        assert_eq!(concat(&[0.0; 10_000], &[0.0; 6_001]), Err(VectorError::TooManyDimensions(16_001)));
        // 1,0,1,1,0,0,0,0 | 1: 0xb0, 0x80
        assert_eq!(binary_quantize(&[1.0, -1.0, 0.5, 2.0, 0.0, -0.0, -3.0, 0.0, 9.0]), vec![0xb0, 0x80]);
    }

    #[test]
    fn avg_state_accumulates_combines_and_averages() {
        let a = accumulate(&[0.0], &[1.0, 2.0]).unwrap();
        let a = accumulate(&a, &[3.0, 4.0]).unwrap();
        assert_eq!(a, vec![2.0, 4.0, 6.0]);
        let b = accumulate(&[0.0], &[5.0, 6.0]).unwrap();
        let all = combine(&a, &b).unwrap();
        assert_eq!(average(&all).unwrap(), Some(vec![3.0, 4.0]));
        assert_eq!(combine(&[0.0], &b).unwrap(), b, "an empty worker's state");
        assert_eq!(combine(&a, &[0.0]).unwrap(), a);
        assert_eq!(average(&[0.0]).unwrap(), None, "no row: NULL");
        assert_eq!(accumulate(&a, &[1.0]), Err(VectorError::TypmodMismatch { expected: 2, actual: 1 }));
        assert_eq!(combine(&a, &[1.0, 1.0]), Err(VectorError::TypmodMismatch { expected: 2, actual: 1 }));
        // States no aggregate makes: no dimension, or more than a vector has.
        assert_eq!(combine(&[1.0], &[0.0]), Err(VectorError::Empty));
        assert_eq!(combine(&[0.0], &[0.0]), Ok(vec![0.0]), "two workers that saw no row");
        let wide = vec![1.0; MAX_DIM + 2];
        assert_eq!(combine(&wide, &[0.0]), Err(VectorError::TooManyDimensions(MAX_DIM + 1)));
        assert_eq!(combine(&wide, &wide), Err(VectorError::TooManyDimensions(MAX_DIM + 1)));
        assert_eq!(accumulate(&[1.0, f64::MAX], &[f32::MAX]).unwrap()[1], f64::MAX, "f64 sums hold");
        // Float rows whose sum passes f32 still average within it.
        let big = accumulate(&accumulate(&[0.0], &[3e38]).unwrap(), &[3e38]).unwrap();
        assert_eq!(average(&big).unwrap(), Some(vec![3e38]));
    }

    #[test]
    fn parses_with_whitespace_and_exponents() {
        assert_eq!(parse("[1,2.5,-3e-2]").unwrap(), vec![1.0, 2.5, -0.03]);
        assert_eq!(parse("  [ 1 , 2 ,3 ]\n").unwrap(), vec![1.0, 2.0, 3.0]);
        assert_eq!(parse("[+4]").unwrap(), vec![4.0]);
    }

    #[test]
    fn syntax_errors_name_the_offending_part() {
        let e = parse("[1,a,3]").unwrap_err();
        assert_eq!(e.to_string(), "invalid input syntax for type vector: \"[1,a,3]\"");
        assert_eq!(e.detail().as_deref(), Some("Element 2 \"a\" is not a number."));
        assert_eq!(parse("1,2]").unwrap_err().detail().as_deref(), Some("Vector contents must start with \"[\"."));
        assert_eq!(parse("[1,2").unwrap_err().detail().as_deref(), Some("Vector contents must end with \"]\"."));
        assert_eq!(parse("[1,,2]").unwrap_err().detail().as_deref(), Some("Element 2 is empty."));
        assert_eq!(parse("[1,2,]").unwrap_err().detail().as_deref(), Some("Element 3 is empty."));
        assert_eq!(parse("").unwrap_err().detail().as_deref(), Some("Vector contents must start with \"[\"."));
    }

    #[test]
    fn refuses_empty_nan_infinite_and_oversized() {
        assert_eq!(parse("[]"), Err(VectorError::Empty));
        assert_eq!(parse("[ ]"), Err(VectorError::Empty));
        assert_eq!(parse("[1,NaN]"), Err(VectorError::NaN { index: 2 }));
        assert_eq!(parse("[inf]"), Err(VectorError::Infinite { index: 1 }));
        assert_eq!(parse("[-Infinity]"), Err(VectorError::Infinite { index: 1 }));
        assert_eq!(parse("[1e39]"), Err(VectorError::OutOfRange("1e39".into())));
        assert_eq!(parse("[ -4e38 ]").unwrap_err().to_string(), "\"-4e38\" is out of range for type vector");
        assert_eq!(
            parse_as("halfvec", "[4e38]").unwrap_err().message_for("halfvec"),
            "\"4e38\" is out of range for type halfvec"
        );
        assert_eq!(parse("[1e39]").unwrap_err().sqlstate(), SqlState::NumericValueOutOfRange);
        assert_eq!(parse("[]").unwrap_err().sqlstate(), SqlState::DataException);
        let big = format!("[{}]", vec!["1"; MAX_DIM + 1].join(","));
        assert_eq!(parse(&big), Err(VectorError::TooManyDimensions(MAX_DIM + 1)));
        let max = format!("[{}]", vec!["1"; MAX_DIM].join(","));
        assert_eq!(parse(&max).unwrap().len(), MAX_DIM);
    }

    #[test]
    fn typmod_in_accepts_one_dimension_count() {
        assert_eq!(typmod_in("vector", &["3"]), Ok(3));
        let msg = |l: &[&str]| typmod_in("vector", l).unwrap_err().to_string();
        assert_eq!(msg(&["0"]), "dimensions for type vector must be at least 1");
        assert_eq!(msg(&["16001"]), "dimensions for type vector cannot exceed 16000");
        assert_eq!(msg(&["x"]), "invalid input syntax for type integer: \"x\"");
        assert_eq!(typmod_in("vector", &["x"]).unwrap_err().sqlstate(), SqlState::InvalidTextRepresentation);
        assert_eq!(msg(&["1", "2"]), "invalid type modifier: vector takes one dimension count");
    }

    #[test]
    fn typmod_and_operand_checks() {
        assert!(check_typmod(None, 3).is_ok());
        assert!(check_typmod(Some(3), 3).is_ok());
        assert_eq!(check_typmod(Some(3), 2).unwrap_err().to_string(), "expected 3 dimensions, not 2");
        assert_eq!(check_same_dims(3, 4).unwrap_err().to_string(), "different vector dimensions 3 and 4");
    }

    #[test]
    fn binary_is_pgvector_wire_format() {
        let bytes = encode_binary(&[1.0, -2.5]);
        assert_eq!(bytes, [0, 2, 0, 0, 0x3f, 0x80, 0, 0, 0xc0, 0x20, 0, 0]);
        assert_eq!(decode_binary(&bytes).unwrap(), vec![1.0, -2.5]);
    }

    #[test]
    fn binary_decoder_refuses_bad_input() {
        let msg = |b: &[u8]| decode_binary(b).unwrap_err().to_string();
        assert_eq!(msg(&[0, 1]), "invalid binary vector: 2 bytes, header needs 4");
        assert_eq!(msg(&[0, 0, 0, 0]), "vector must have at least 1 dimension");
        assert_eq!(msg(&[0xff, 0xff, 0, 0]), "invalid binary vector: negative dimensions -1");
        assert_eq!(msg(&[0, 1, 0, 1, 0, 0, 0, 0]), "invalid binary vector: expected unused to be 0, not 1");
        assert_eq!(
            msg(&[0, 2, 0, 0, 0, 0, 0, 0]),
            "invalid binary vector: 2 dimensions need 8 bytes of elements, got 4"
        );
        assert_eq!(msg(&[0, 1, 0, 0, 0x7f, 0xc0, 0, 0]), "NaN not allowed in vector (element 1)");
    }

    #[test]
    fn arithmetic_checks_dims_and_overflow() {
        assert_eq!(add(&[1.0, 2.0], &[3.0, 4.0]).unwrap(), vec![4.0, 6.0]);
        assert_eq!(sub(&[1.0, 2.0], &[3.0, 4.0]).unwrap(), vec![-2.0, -2.0]);
        assert_eq!(add(&[1.0], &[1.0, 2.0]), Err(VectorError::DimensionMismatch(1, 2)));
        assert_eq!(add(&[f32::MAX], &[f32::MAX]), Err(VectorError::Overflow { index: 1 }));
        assert_eq!(l2_normalize(&[3.0, 4.0]), vec![0.6, 0.8]);
        assert_eq!(l2_normalize(&[0.0, 0.0]), vec![0.0, 0.0]);
        assert_eq!(l2_normalize(&[3e38]), vec![1.0], "no f32 overflow");
        assert_eq!(l2_normalize(&[3e37, 4e37]), vec![0.6, 0.8]);
        assert!(compare(&[1.0, 2.0], &[1.0, 3.0]).is_lt());
        assert!(compare(&[1.0, 2.0], &[1.0]).is_gt());
        assert!(compare(&[1.0, 2.0], &[1.0, 2.0]).is_eq());
    }

    proptest! {
        #[test]
        fn binary_decoder_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_binary(&bytes);
        }

        #[test]
        fn shortest_text_parses_back_exactly(values in prop::collection::vec(
            any::<f32>().prop_filter("finite", |v| v.is_finite()), 1..64)) {
            let text = std::format!("[{}]", values.iter().map(f32::to_string).collect::<Vec<_>>().join(","));
            let back = parse(&text).unwrap();
            prop_assert_eq!(back.len(), values.len());
            for (a, b) in back.iter().zip(&values) {
                prop_assert_eq!(a.to_bits(), b.to_bits(), "{} in {}", b, text);
            }
        }

        #[test]
        fn parser_never_panics(s in ".{0,64}") {
            let _ = parse(&s);
        }
    }
}
