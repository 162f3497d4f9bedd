//! What an index stores of each vector: 4-byte floats (`vector`), 2-byte
//! floats (`halfvec`, half the bytes in pages, segment files and the cache),
//! bits (Postgres' `bit(n)`, the type of pgvector's binary quantization:
//! one bit a dimension, most significant first, the last byte zero-padded),
//! or sparse rows (`sparsevec`).
//!
//! An index has one [`Element`], fixed at CREATE INDEX by its opclass; its
//! rows are read in place as a [`Row`] (a borrowed vector) from pages and
//! binlogs, and a [`Vectors`] column holds many, row-major. Distances
//! between two rows of one element type use that type's kernel
//! ([`crate::Metric::between`]): simsimd's f16 kernels widen as they go and
//! sum in f32, as pgvector's halfvec functions do, so a half index never
//! widens a row it reads. (Building a graph widens the segment once: the
//! builder works in f32.)
//!
//! Sparse rows are the one element of variable width: a row is its entries
//! as 4-byte words in pgvector's datum layout, less the varlena header
//! ([`sparse_words`]), so an insert and a query borrow the datum as it is.
//! Their segments are inverted indexes, not graphs (`crate::inverted`).

use std::borrow::Cow;

pub use half::f16;

/// The element type of an index's vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Element {
    #[default]
    F32,
    F16,
    Bit,
    /// Sparse rows, `sparsevec`.
    Sparse,
}

/// Most dimensions a vector or halfvec may have (pgvector's limit, so values
/// move freely between the two extensions).
pub const MAX_DIM: usize = 16_000;

/// Most dimensions a sparsevec may have (pgvector's limit).
pub const SPARSE_MAX_DIM: usize = 1_000_000_000;

/// A sparse vector's parts, borrowed from wherever they are stored
/// (`crate::sparse` has its rules and its text and binary forms).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sparse<'a> {
    pub dim: usize,
    pub indices: &'a [i32],
    pub values: &'a [f32],
}

impl Sparse<'_> {
    /// Every dimension's value, 0 where it has no entry.
    pub fn to_dense(self) -> Vec<f32> {
        let mut dense = vec![0.0; self.dim];
        self.indices.iter().zip(self.values).for_each(|(i, x)| dense[*i as usize] = *x);
        dense
    }
}

impl Element {
    /// Bytes of a vector of `dims` elements; of a sparse row, its fixed
    /// part (an empty row): each entry adds 8 bytes.
    pub const fn bytes(self, dims: usize) -> usize {
        match self {
            Element::F32 => 4 * dims,
            Element::F16 => 2 * dims,
            Element::Bit => dims.div_ceil(8),
            Element::Sparse => 4 * SPARSE_HEADER_WORDS,
        }
    }

    /// Elements `bytes` bytes hold (of sparse rows: entries).
    pub const fn dims_in(self, bytes: usize) -> usize {
        match self {
            Element::F32 => bytes / 4,
            Element::F16 => bytes / 2,
            Element::Bit => bytes * 8,
            Element::Sparse => bytes.saturating_sub(4 * SPARSE_HEADER_WORDS) / 8,
        }
    }

    /// Whether its rows all have one width.
    pub const fn is_fixed(self) -> bool {
        !matches!(self, Element::Sparse)
    }

    /// The widest row of these elements an index takes, one limit
    /// everywhere (the column check at CREATE INDEX, growing pages, binlogs,
    /// index files): the types' 16,000 for floats (rows wider than a page
    /// are stored in chunks), and for bits what one index page holds as
    /// one item, 65,088 (`format::page` checks the two agree).
    pub const fn max_dims(self) -> usize {
        match self {
            Element::F32 | Element::F16 => MAX_DIM,
            Element::Bit => 65_088,
            Element::Sparse => SPARSE_MAX_DIM,
        }
    }

    /// The byte that stands for it in the meta page and binlog headers: 0
    /// for f32, so that pages and files written before halfvec read as f32.
    pub const fn code(self) -> u8 {
        match self {
            Element::F32 => 0,
            Element::F16 => 1,
            Element::Bit => 2,
            Element::Sparse => 3,
        }
    }

    pub fn from_code(code: u8) -> Option<Element> {
        [Element::F32, Element::F16, Element::Bit, Element::Sparse].into_iter().find(|e| e.code() == code)
    }

    /// The SQL type whose values it stores.
    pub const fn type_name(self) -> &'static str {
        match self {
            Element::F32 => "vector",
            Element::F16 => "halfvec",
            Element::Bit => "bit",
            Element::Sparse => "sparsevec",
        }
    }
}

/// How an index lays out one vector: its dimensions and element type, and
/// whether a row in pages carries its filter values after the vector (an
/// index with filter columns: `crate::format::values`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    pub dims: usize,
    pub element: Element,
    pub values: bool,
}

impl Shape {
    pub const fn new(dims: usize, element: Element) -> Shape {
        Shape { dims, element, values: false }
    }

    /// A `vector(dims)`.
    pub const fn f32(dims: usize) -> Shape {
        Shape::new(dims, Element::F32)
    }

    /// The same vectors, with (or without) filter values in their rows.
    pub const fn with_values(self, values: bool) -> Shape {
        Shape { values, ..self }
    }

    /// Bytes of one vector.
    pub const fn bytes(self) -> usize {
        self.element.bytes(self.dims)
    }
}

/// One vector, borrowed, in its element type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Row<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
    /// `len` bits in `len.div_ceil(8)` bytes.
    Bit {
        bits: &'a [u8],
        len: usize,
    },
    /// A sparse row's words ([`sparse_words`]).
    Sparse(&'a [u32]),
}

/// Words before a sparse row's entries: its dimensions, its entry count,
/// and a zero (pgvector's `unused`).
pub const SPARSE_HEADER_WORDS: usize = 3;

/// Most entries a sparse row of an index has: one row page holds the row
/// as one item (pgvector's limit for its HNSW index on sparsevec too).
pub const SPARSE_MAX_NNZ: usize = 1000;

/// A sparse vector's words as an index stores them, pgvector's datum after
/// its varlena header: `dim`, `nnz`, 0, the indices (`i32`, ascending),
/// then the values (`f32` bits).
pub fn sparse_words(v: Sparse<'_>) -> Vec<u32> {
    let mut words = Vec::with_capacity(SPARSE_HEADER_WORDS + 2 * v.indices.len());
    words.extend([v.dim as u32, v.indices.len() as u32, 0]);
    words.extend(v.indices.iter().map(|i| *i as u32));
    words.extend(v.values.iter().map(|x| x.to_bits()));
    words
}

/// Whether `words` are as many as a sparse row's header says.
fn is_whole_sparse_row(words: &[u32]) -> bool {
    words.len() >= SPARSE_HEADER_WORDS && words.len() == SPARSE_HEADER_WORDS + 2 * words[1] as usize
}

/// Whether stored `words` are a sparse row of `dims` dimensions as far as
/// every read of it relies on: as many words as its header says. Its
/// entries are checked by [`sparse_row`], where a whole file is verified.
pub fn is_sparse_row_of(words: &[u32], dims: usize) -> bool {
    is_whole_sparse_row(words) && words[0] as usize == dims
}

/// The words of a sparse row in `words`, if they are one: `None` when the
/// header does not give their length, or an index or value breaks the
/// rules of `sparsevec` (what a damaged page or file would show).
pub fn sparse_row(words: &[u32]) -> Option<Sparse<'_>> {
    if !is_whole_sparse_row(words) || words[1] > words[0] || words[0] as usize > SPARSE_MAX_DIM {
        return None;
    }
    let dim = words[0];
    let v = sparse_view(words);
    let ascending = v.indices.windows(2).all(|w| w[0] < w[1]);
    let in_range = v.indices.iter().all(|i| *i >= 0 && (*i as i64) < dim as i64);
    (ascending && in_range && v.values.iter().all(|x| x.is_finite() && *x != 0.0)).then_some(v)
}

/// The sparse row of words known to be one (built here, or checked by
/// [`sparse_row`]).
#[inline]
pub fn sparse_view(words: &[u32]) -> Sparse<'_> {
    let nnz = words[1] as usize;
    let entries = &words[SPARSE_HEADER_WORDS..];
    // SAFETY: i32 and f32 have u32's size and alignment, and every bit
    // pattern is a value of each.
    let (indices, values) = unsafe {
        (
            std::slice::from_raw_parts(entries.as_ptr().cast::<i32>(), nnz),
            std::slice::from_raw_parts(entries[nnz..].as_ptr().cast::<f32>(), nnz),
        )
    };
    Sparse { dim: words[0] as usize, indices, values }
}

impl<'a> Row<'a> {
    pub fn element(self) -> Element {
        match self {
            Row::F32(_) => Element::F32,
            Row::F16(_) => Element::F16,
            Row::Bit { .. } => Element::Bit,
            Row::Sparse(_) => Element::Sparse,
        }
    }

    /// Its dimensions.
    pub fn len(self) -> usize {
        match self {
            Row::F32(v) => v.len(),
            Row::F16(v) => v.len(),
            Row::Bit { len, .. } => len,
            Row::Sparse(words) => words[0] as usize,
        }
    }

    /// A sparse row's entries.
    ///
    /// # Panics
    /// On a dense row.
    pub fn sparse(self) -> Sparse<'a> {
        match self {
            Row::Sparse(words) => sparse_view(words),
            other => panic!("a {:?} row is not sparse", other.element()),
        }
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// The elements in `range` (of bits: whole bytes of them, `range` a
    /// multiple of 8 but for its end). Sparse rows are never cut: one
    /// page holds each ([`SPARSE_MAX_NNZ`]).
    pub fn slice(self, range: std::ops::Range<usize>) -> Row<'a> {
        match self {
            Row::F32(v) => Row::F32(&v[range]),
            Row::F16(v) => Row::F16(&v[range]),
            Row::Bit { bits, .. } => {
                debug_assert!(range.start.is_multiple_of(8), "bits are sliced in whole bytes");
                Row::Bit { bits: &bits[range.start / 8..range.end.div_ceil(8)], len: range.len() }
            }
            Row::Sparse(_) => panic!("sparse rows are not cut"),
        }
    }

    /// The elements as f32: borrowed for f32, widened (exactly) for f16,
    /// 0 or 1 for bits, every dimension of a sparse row.
    pub fn to_f32(self) -> Cow<'a, [f32]> {
        match self {
            Row::F32(v) => Cow::Borrowed(v),
            Row::F16(v) => Cow::Owned(v.iter().map(|h| h.to_f32()).collect()),
            Row::Bit { bits, len } => {
                Cow::Owned((0..len).map(|i| f32::from((bits[i / 8] >> (7 - i % 8)) & 1)).collect())
            }
            Row::Sparse(words) => Cow::Owned(sparse_view(words).to_dense()),
        }
    }

    /// The elements' bytes, little-endian as stored.
    pub fn bytes(self) -> &'a [u8] {
        match self {
            Row::F32(v) => crate::format::bytes_of(v),
            Row::F16(v) => crate::format::bytes_of(v),
            Row::Bit { bits, .. } => bits,
            Row::Sparse(words) => crate::format::bytes_of(words),
        }
    }

    /// A row of `shape` over its stored bytes (aligned for the element
    /// type: pages and mapped files are).
    ///
    /// # Panics
    /// On bytes not aligned for the element type, or not of the shape's
    /// size (of a sparse row: not the size its header gives): the callers'
    /// layouts guarantee both, so this is a bug, never bad input.
    pub fn from_bytes(shape: Shape, bytes: &'a [u8]) -> Row<'a> {
        if shape.element == Element::Sparse {
            let words = cast::<u32>(bytes);
            assert!(is_whole_sparse_row(words), "a stored sparse row");
            return Row::Sparse(words);
        }
        assert_eq!(bytes.len(), shape.bytes(), "a stored row of {shape:?}");
        match shape.element {
            Element::F32 => Row::F32(cast(bytes)),
            Element::F16 => Row::F16(cast(bytes)),
            Element::Bit => Row::Bit { bits: bytes, len: shape.dims },
            Element::Sparse => unreachable!("read above"),
        }
    }

    /// Asks the CPU to start loading the row into cache, for a distance
    /// computed soon: its first 256 bytes (the hardware prefetcher follows
    /// a longer one by itself once its first lines are read).
    #[inline]
    pub fn prefetch(self) {
        #[cfg(target_arch = "x86_64")]
        for line in self.bytes().chunks(64).take(4) {
            // SAFETY: a prefetch is a hint; it never faults, whatever the address.
            unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(line.as_ptr().cast()) }
        }
    }
}

impl<'a> From<&'a [f32]> for Row<'a> {
    fn from(v: &'a [f32]) -> Row<'a> {
        Row::F32(v)
    }
}

impl<'a> From<&'a Vec<f32>> for Row<'a> {
    fn from(v: &'a Vec<f32>) -> Row<'a> {
        Row::F32(v)
    }
}

impl<'a> From<&'a [f16]> for Row<'a> {
    fn from(v: &'a [f16]) -> Row<'a> {
        Row::F16(v)
    }
}

impl From<Vec<f32>> for Vectors<'static> {
    fn from(v: Vec<f32>) -> Vectors<'static> {
        Vectors::F32(Cow::Owned(v))
    }
}

impl From<Vec<f16>> for Vectors<'static> {
    fn from(v: Vec<f16>) -> Vectors<'static> {
        Vectors::F16(Cow::Owned(v))
    }
}

/// Bits as Postgres' `bit` lays them out: most significant first, the last
/// byte zero-padded.
pub fn pack_bits(bits: &[bool]) -> Vec<u8> {
    bits.chunks(8)
        .map(|c| c.iter().enumerate().fold(0u8, |byte, (i, bit)| byte | (u8::from(*bit) << (7 - i))))
        .collect()
}

/// Views `bytes` as elements in place (f32, f16 or the u32 words of sparse
/// rows: aligned and whole, as pages and mapped files hold them).
#[inline]
pub(crate) fn cast<T: Copy>(bytes: &[u8]) -> &[T] {
    // SAFETY: T is f32, f16 or u32, for which every bit pattern is a value; the
    // host is little-endian like the formats (a compile-time requirement).
    let (head, mid, tail) = unsafe { bytes.align_to::<T>() };
    assert!(head.is_empty() && tail.is_empty(), "stored vectors are aligned and whole");
    mid
}

/// Vectors of one element type, row-major, borrowed from stored bytes or
/// owned: a segment's column, rows copied out of pages, or a query (one row).
/// Rows of bits take whole bytes each.
#[derive(Debug, Clone, PartialEq)]
pub enum Vectors<'a> {
    F32(Cow<'a, [f32]>),
    F16(Cow<'a, [f16]>),
    Bit(Cow<'a, [u8]>),
    Sparse(SparseRows<'a>),
}

/// Sparse rows one after the other: row `i` is
/// `words[starts[i]..starts[i + 1]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SparseRows<'a> {
    /// One more than the rows, from 0.
    pub starts: Cow<'a, [u64]>,
    pub words: Cow<'a, [u32]>,
}

impl SparseRows<'_> {
    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn row(&self, i: usize) -> &[u32] {
        &self.words[self.starts[i] as usize..self.starts[i + 1] as usize]
    }
}

impl<'a> Vectors<'a> {
    /// No vectors yet, of `element`.
    pub fn new(element: Element) -> Vectors<'static> {
        match element {
            Element::F32 => Vectors::F32(Cow::Owned(Vec::new())),
            Element::F16 => Vectors::F16(Cow::Owned(Vec::new())),
            Element::Bit => Vectors::Bit(Cow::Owned(Vec::new())),
            Element::Sparse => {
                Vectors::Sparse(SparseRows { starts: Cow::Owned(vec![0]), words: Cow::Owned(Vec::new()) })
            }
        }
    }

    /// One vector, owned.
    pub fn of(row: Row<'_>) -> Vectors<'static> {
        match row {
            Row::F32(v) => Vectors::F32(Cow::Owned(v.to_vec())),
            Row::F16(v) => Vectors::F16(Cow::Owned(v.to_vec())),
            Row::Bit { bits, .. } => Vectors::Bit(Cow::Owned(bits.to_vec())),
            Row::Sparse(words) => {
                let starts = Cow::Owned(vec![0, words.len() as u64]);
                Vectors::Sparse(SparseRows { starts, words: Cow::Owned(words.to_vec()) })
            }
        }
    }

    pub fn element(&self) -> Element {
        match self {
            Vectors::F32(_) => Element::F32,
            Vectors::F16(_) => Element::F16,
            Vectors::Bit(_) => Element::Bit,
            Vectors::Sparse(_) => Element::Sparse,
        }
    }

    /// The stored bytes of every row (of sparse rows, their words; the
    /// row starts are [`SparseRows::starts`]).
    pub fn bytes(&self) -> &[u8] {
        match self {
            Vectors::F32(v) => crate::format::bytes_of(v),
            Vectors::F16(v) => crate::format::bytes_of(v),
            Vectors::Bit(v) => v,
            Vectors::Sparse(v) => crate::format::bytes_of(&v.words),
        }
    }

    /// Rows of `dims` elements held.
    pub fn rows(&self, dims: usize) -> usize {
        match self {
            Vectors::Sparse(v) => v.len(),
            other => other.bytes().len() / other.element().bytes(dims).max(1),
        }
    }

    /// Every element as one row: the rows one after the other (of bits,
    /// each padded to whole bytes; a query's one row).
    ///
    /// # Panics
    /// On sparse rows but one, which are no one row together.
    pub fn all(&self) -> Row<'_> {
        match self {
            Vectors::F32(v) => Row::F32(v),
            Vectors::F16(v) => Row::F16(v),
            Vectors::Bit(v) => Row::Bit { bits: v, len: 8 * v.len() },
            Vectors::Sparse(v) if v.len() == 1 => Row::Sparse(v.row(0)),
            Vectors::Sparse(_) => panic!("sparse rows are no one row together"),
        }
    }

    /// Row `i` of `dims` elements.
    #[inline]
    pub fn row(&self, i: usize, dims: usize) -> Row<'_> {
        match self {
            Vectors::F32(v) => Row::F32(&v[i * dims..(i + 1) * dims]),
            Vectors::F16(v) => Row::F16(&v[i * dims..(i + 1) * dims]),
            Vectors::Bit(v) => {
                let stride = Element::Bit.bytes(dims);
                Row::Bit { bits: &v[i * stride..(i + 1) * stride], len: dims }
            }
            Vectors::Sparse(v) => Row::Sparse(v.row(i)),
        }
    }

    /// Appends a row of the same element type.
    ///
    /// # Panics
    /// On a row of another element type: an index has one.
    pub fn push(&mut self, row: Row<'_>) {
        match (self, row) {
            (Vectors::F32(v), Row::F32(r)) => v.to_mut().extend_from_slice(r),
            (Vectors::F16(v), Row::F16(r)) => v.to_mut().extend_from_slice(r),
            (Vectors::Bit(v), Row::Bit { bits, .. }) => v.to_mut().extend_from_slice(bits),
            (Vectors::Sparse(v), Row::Sparse(words)) => {
                v.words.to_mut().extend_from_slice(words);
                v.starts.to_mut().push(v.words.len() as u64);
            }
            (v, r) => panic!("a {:?} row pushed to {:?} vectors", r.element(), v.element()),
        }
    }

    /// Drops every row, keeping the element type (and an owned buffer).
    pub fn clear(&mut self) {
        match self {
            Vectors::F32(v) => v.to_mut().clear(),
            Vectors::F16(v) => v.to_mut().clear(),
            Vectors::Bit(v) => v.to_mut().clear(),
            Vectors::Sparse(v) => {
                v.words.to_mut().clear();
                *v.starts.to_mut() = vec![0];
            }
        }
    }

    /// Reads stored bytes as vectors of a fixed-width `element`: borrowed
    /// when aligned, copied otherwise (sparse rows are read with their
    /// starts: [`Vectors::from_sparse_bytes`]).
    pub fn from_bytes(element: Element, bytes: &'a [u8]) -> Vectors<'a> {
        use crate::format::column;
        match element {
            Element::F32 => Vectors::F32(column(bytes, |c| f32::from_le_bytes(c.try_into().expect("chunk of 4")))),
            Element::F16 => {
                Vectors::F16(column(bytes, |c| f16::from_bits(u16::from_le_bytes(c.try_into().expect("chunk of 2")))))
            }
            Element::Bit => Vectors::Bit(Cow::Borrowed(bytes)),
            Element::Sparse => panic!("sparse rows are read with their starts"),
        }
    }

    /// Reads stored sparse rows: their starts (u64 a row and one more) and
    /// their words, borrowed when aligned. The caller has checked that the
    /// starts ascend from 0 to the words' count.
    pub fn from_sparse_bytes(starts: &'a [u8], words: &'a [u8]) -> Vectors<'a> {
        use crate::format::column;
        Vectors::Sparse(SparseRows {
            starts: column(starts, |c| u64::from_le_bytes(c.try_into().expect("chunk of 8"))),
            words: column(words, |c| u32::from_le_bytes(c.try_into().expect("chunk of 4"))),
        })
    }

    /// The elements of float rows as f32: borrowed for f32, widened for f16
    /// (what a graph build works on); `None` for bits, which a graph is
    /// built on as they are.
    pub fn to_f32(&self) -> Option<Cow<'_, [f32]>> {
        match self {
            Vectors::F32(v) => Some(Cow::Borrowed(v)),
            Vectors::F16(v) => Some(Cow::Owned(v.iter().map(|h| h.to_f32()).collect())),
            Vectors::Bit(_) | Vectors::Sparse(_) => None,
        }
    }

    /// The same rows, borrowed.
    pub fn view(&self) -> Vectors<'_> {
        match self {
            Vectors::F32(v) => Vectors::F32(Cow::Borrowed(v)),
            Vectors::F16(v) => Vectors::F16(Cow::Borrowed(v)),
            Vectors::Bit(v) => Vectors::Bit(Cow::Borrowed(v)),
            Vectors::Sparse(v) => {
                Vectors::Sparse(SparseRows { starts: Cow::Borrowed(&v.starts), words: Cow::Borrowed(&v.words) })
            }
        }
    }

    pub fn into_owned(self) -> Vectors<'static> {
        match self {
            Vectors::F32(v) => Vectors::F32(Cow::Owned(v.into_owned())),
            Vectors::F16(v) => Vectors::F16(Cow::Owned(v.into_owned())),
            Vectors::Bit(v) => Vectors::Bit(Cow::Owned(v.into_owned())),
            Vectors::Sparse(v) => Vectors::Sparse(SparseRows {
                starts: Cow::Owned(v.starts.into_owned()),
                words: Cow::Owned(v.words.into_owned()),
            }),
        }
    }

    /// Whether the elements borrow their input (no copy was made).
    pub fn is_borrowed(&self) -> bool {
        match self {
            Vectors::F32(v) => matches!(v, Cow::Borrowed(_)),
            Vectors::F16(v) => matches!(v, Cow::Borrowed(_)),
            Vectors::Bit(v) => matches!(v, Cow::Borrowed(_)),
            Vectors::Sparse(v) => matches!((&v.starts, &v.words), (Cow::Borrowed(_), Cow::Borrowed(_))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_f32_is_zero() {
        for e in [Element::F32, Element::F16] {
            assert_eq!(Element::from_code(e.code()), Some(e));
        }
        assert_eq!(Element::F32.code(), 0, "pages and files older than halfvec have 0 here");
        assert_eq!(Element::from_code(3), Some(Element::Sparse));
        assert_eq!(Element::from_code(4), None);
        assert_eq!((Shape::new(3, Element::F16).bytes(), Shape::f32(3).bytes()), (6, 12));
        assert_eq!((Shape::new(9, Element::Bit).bytes(), Element::Bit.dims_in(2)), (2, 16));
    }

    #[test]
    fn rows_read_in_place_and_widen_exactly() {
        let halves: Vec<f16> = [1.0f32, -0.5, 65504.0].iter().map(|x| f16::from_f32(*x)).collect();
        let row = Row::from_bytes(Shape::new(3, Element::F16), Row::F16(&halves).bytes());
        assert_eq!(row, Row::F16(&halves));
        assert_eq!(row.to_f32().as_ref(), &[1.0, -0.5, 65504.0]);
        let mut column = Vectors::new(Element::F16);
        column.push(row);
        column.push(row);
        assert_eq!((column.bytes().len(), column.row(1, 3)), (12, row));
        let from_bytes = Vectors::from_bytes(Element::F16, column.all().bytes());
        assert_eq!(from_bytes, column);
    }

    #[test]
    fn bit_rows_take_whole_bytes() {
        let shape = Shape::new(10, Element::Bit);
        let row = Row::from_bytes(shape, &[0b1010_0000, 0b0100_0000]);
        assert_eq!((row.len(), row.element()), (10, Element::Bit));
        assert_eq!(row.to_f32().as_ref(), &[1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
        let mut column = Vectors::new(Element::Bit);
        column.push(row);
        column.push(Row::from_bytes(shape, &[0xff, 0xc0]));
        assert_eq!(column.bytes(), &[0b1010_0000, 0b0100_0000, 0xff, 0xc0]);
        assert_eq!(column.row(1, 10), Row::Bit { bits: &[0xff, 0xc0], len: 10 });
        assert_eq!(Vectors::from_bytes(Element::Bit, column.bytes()), column);
        assert_eq!(column.to_f32(), None, "a bit graph is built on the bits");
    }

    #[test]
    fn sparse_rows_are_words_in_pgvectors_layout_and_vary_in_width() {
        let v = crate::sparse::SparseVec { dim: 10, indices: vec![1, 7], values: vec![0.5, -2.0] };
        let words = sparse_words(v.view());
        assert_eq!(words, vec![10, 2, 0, 1, 7, 0.5f32.to_bits(), (-2.0f32).to_bits()]);
        let row = Row::from_bytes(Shape::new(10, Element::Sparse), crate::format::bytes_of(&words));
        assert_eq!((row.len(), row.element(), row.sparse().indices), (10, Element::Sparse, &[1, 7][..]));
        assert_eq!(row.to_f32().as_ref(), &[0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, -2.0, 0.0, 0.0]);
        let empty = sparse_words(crate::sparse::SparseVec { dim: 3, ..Default::default() }.view());
        let mut column = Vectors::new(Element::Sparse);
        column.push(row);
        column.push(Row::Sparse(&empty));
        assert_eq!((column.rows(10), column.row(0, 10), column.row(1, 10)), (2, row, Row::Sparse(&empty)));
        let Vectors::Sparse(rows) = &column else { unreachable!() };
        let back = Vectors::from_sparse_bytes(crate::format::bytes_of(&rows.starts), column.bytes());
        assert_eq!(back, column);
        assert_eq!(sparse_row(&words).map(|s| s.values.to_vec()), Some(vec![0.5, -2.0]));
        for bad in [&words[..6], &[10, 2, 0, 7, 1, 1, 1][..], &[10, 2, 0, 1, 10, 1, 1], &[10, 1, 0, 1, 0]] {
            assert!(sparse_row(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    #[should_panic(expected = "a F32 row pushed to F16 vectors")]
    fn one_element_type_a_column() {
        Vectors::new(Element::F16).push(Row::F32(&[1.0]));
    }
}
