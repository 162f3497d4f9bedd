//! The formats of the objects pg_milvus writes to object storage, and of
//! the index's own pages: `page`, the row pages and the chain pages' special
//! space, read in place; `meta`, the meta page and its state machine.
//!
//! Every object in storage starts with a fixed header: an 8-byte magic naming its kind, a
//! format version, the fields a reader needs before the body, a CRC-32C of the
//! body and a CRC-32C of the header itself. All integers are little-endian.
//! Objects are immutable once written; a reader verifies both checksums before
//! it believes a single field, so a flipped bit, a truncated download or an
//! object of another kind is a [`FormatError`] naming the object, never a
//! panic and never a wrong answer (invariant 4).
//!
//! The byte layouts are documented in docs/format.md; keep the two in step.

pub mod delta;
pub mod index;
pub mod insert;
pub mod inverted;
pub mod manifest;
pub mod meta;
pub mod page;
pub mod ranges;
pub mod scalar;
pub mod values;

use crate::error::{SqlError, SqlState};
use std::borrow::Cow;

#[cfg(target_endian = "big")]
compile_error!("the binlog formats are little-endian and read in place; big-endian hosts are not supported");

/// Why an object could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("object {object}: {kind}")]
pub struct FormatError {
    /// The object's key (or a description, for bytes not from storage).
    pub object: String,
    pub kind: FormatErrorKind,
}

/// An object that fails its checks is damage, whatever the check.
impl SqlError for FormatError {
    fn sqlstate(&self) -> SqlState {
        SqlState::IndexCorrupted
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatErrorKind {
    #[error("truncated: {need} bytes needed, {have} present")]
    Truncated { need: u64, have: u64 },
    #[error("not a {expected} object (magic {found:02x?})")]
    BadMagic { expected: &'static str, found: [u8; 8] },
    #[error("format version {found} is not supported (this build reads up to {supported})")]
    UnsupportedVersion { found: u16, supported: u16 },
    #[error("{part} checksum mismatch: stored {stored:08x}, computed {computed:08x}")]
    ChecksumMismatch { part: &'static str, stored: u32, computed: u32 },
    #[error("{0}")]
    Invalid(String),
}

impl FormatError {
    pub(crate) fn new(object: &str, kind: FormatErrorKind) -> Self {
        FormatError { object: object.to_owned(), kind }
    }
}

/// A little-endian writer for headers.
pub(crate) struct Writer(pub Vec<u8>);

impl Writer {
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.0.extend_from_slice(v);
        self
    }
}

/// A bounds-checked little-endian reader over a header.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }
    fn take<const N: usize>(&mut self) -> [u8; N] {
        // Callers check the header length first; a short header is a bug here.
        let out: [u8; N] = self.bytes[self.at..self.at + N].try_into().expect("header length checked");
        self.at += N;
        out
    }
    pub fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
}

/// A reader of bytes whose lengths and counts come from the bytes
/// themselves (a body, a row's values): every read is bounds-checked, and
/// a short one is an error saying where.
pub(crate) struct Bounded<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Bounded<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Bounded { bytes, at: 0 }
    }

    /// Bytes not read yet.
    pub fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.bytes.len())
            .ok_or_else(|| format!("{n} bytes needed at {}, {} present", self.at, self.left()))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    /// `count` words of `N` bytes.
    pub fn words<const N: usize>(&mut self, count: usize) -> Result<Vec<[u8; N]>, String> {
        let bytes = self.take(count.checked_mul(N).ok_or("a count overflows")?)?;
        Ok(bytes.chunks_exact(N).map(|c| c.try_into().expect("chunks of N")).collect())
    }

    fn word<const N: usize>(&mut self) -> Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    pub fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    pub fn u32(&mut self) -> Result<u32, String> {
        self.word().map(u32::from_le_bytes)
    }

    pub fn i64(&mut self) -> Result<i64, String> {
        self.word().map(i64::from_le_bytes)
    }

    pub fn u128(&mut self) -> Result<u128, String> {
        self.word().map(u128::from_le_bytes)
    }

    pub fn u32s(&mut self, count: usize) -> Result<Vec<u32>, String> {
        Ok(self.words::<4>(count)?.into_iter().map(u32::from_le_bytes).collect())
    }

    pub fn u64s(&mut self, count: usize) -> Result<Vec<u64>, String> {
        Ok(self.words::<8>(count)?.into_iter().map(u64::from_le_bytes).collect())
    }

    pub fn i64s(&mut self, count: usize) -> Result<Vec<i64>, String> {
        Ok(self.words::<8>(count)?.into_iter().map(i64::from_le_bytes).collect())
    }

    /// A `u32` length and that many bytes of UTF-8.
    pub fn text(&mut self) -> Result<String, String> {
        let len = self.u32()? as usize;
        String::from_utf8(self.take(len)?.to_vec()).map_err(|_| "text that is not UTF-8".to_string())
    }
}

/// The checks every header shares: length, magic, version, header checksum.
/// `header` is the fixed-size header whose last 4 bytes are its own CRC-32C.
pub(crate) fn check_header(
    object: &str,
    bytes: &[u8],
    header_len: usize,
    magic: &[u8; 8],
    kind: &'static str,
    max_version: u16,
) -> Result<u16, FormatError> {
    let err = |k| FormatError::new(object, k);
    if bytes.len() < header_len {
        return Err(err(FormatErrorKind::Truncated { need: header_len as u64, have: bytes.len() as u64 }));
    }
    let found: [u8; 8] = bytes[..8].try_into().expect("length checked");
    if &found != magic {
        return Err(err(FormatErrorKind::BadMagic { expected: kind, found }));
    }
    let stored = u32::from_le_bytes(bytes[header_len - 4..header_len].try_into().expect("length checked"));
    let computed = crc32c::crc32c(&bytes[..header_len - 4]);
    if stored != computed {
        return Err(err(FormatErrorKind::ChecksumMismatch { part: "header", stored, computed }));
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if version == 0 || version > max_version {
        return Err(err(FormatErrorKind::UnsupportedVersion { found: version, supported: max_version }));
    }
    Ok(version)
}

/// How much of an object a decoder verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Everything: lengths, both checksums, every field read. For bytes
    /// from storage, from a writer, or of unknown provenance.
    Full,
    /// The header (its checksum, every field) and the lengths, but not the
    /// body's checksum: for a file of the local cache, whose body was
    /// verified in full when it entered the cache ([`crate::cache`]), opened
    /// in place without reading every page of it.
    Header,
}

/// Checks that the body has exactly `expected` bytes and, under
/// [`Check::Full`], the stored CRC.
pub(crate) fn check_body(
    object: &str,
    body: &[u8],
    expected: u64,
    stored_crc: u32,
    check: Check,
) -> Result<(), FormatError> {
    let err = |k| FormatError::new(object, k);
    if (body.len() as u64) < expected {
        return Err(err(FormatErrorKind::Truncated { need: expected, have: body.len() as u64 }));
    }
    if body.len() as u64 > expected {
        return Err(err(FormatErrorKind::Invalid(format!(
            "{} trailing bytes after a body of {expected}",
            body.len() as u64 - expected
        ))));
    }
    if check == Check::Header {
        return Ok(());
    }
    let computed = crc32c::crc32c(body);
    if computed != stored_crc {
        return Err(err(FormatErrorKind::ChecksumMismatch { part: "body", stored: stored_crc, computed }));
    }
    Ok(())
}

/// Borrows `bytes` as `[T]` when aligned, copies otherwise.
pub(crate) fn column<'a, T: Copy>(bytes: &'a [u8], from_le: impl Fn(&[u8]) -> T) -> Cow<'a, [T]> {
    let size = std::mem::size_of::<T>();
    // SAFETY: T is a plain number type here (u32, u64, f32), for which every
    // bit pattern is valid, and the formats are little-endian like every
    // supported host.
    let (head, mid, tail) = unsafe { bytes.align_to::<T>() };
    if head.is_empty() && tail.is_empty() {
        Cow::Borrowed(mid)
    } else {
        Cow::Owned(bytes.chunks_exact(size).map(from_le).collect())
    }
}

/// The bytes of a plain number slice, as the little-endian formats lay
/// them out.
pub(crate) fn bytes_of<T: Copy>(values: &[T]) -> &[u8] {
    // SAFETY: T is a plain number type without padding (u8, u32, u64, f32),
    // and the host is little-endian (a compile-time requirement above).
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values)) }
}

/// The bytes of a plain number slice, to write into (a buffer of u64 read
/// into as bytes, so that what lands in it is aligned for every element
/// type).
pub(crate) fn bytes_of_mut<T: Copy>(values: &mut [T]) -> &mut [u8] {
    // SAFETY: as `bytes_of`; and every bit pattern is a valid plain number,
    // so any bytes written through the view leave valid values.
    unsafe { std::slice::from_raw_parts_mut(values.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(values)) }
}

/// Seals a header: appends the CRC-32C of everything written so far, after
/// padding to `header_len - 4` bytes.
pub(crate) fn finish_header(mut w: Writer, header_len: usize) -> Vec<u8> {
    w.0.resize(header_len - 4, 0);
    let crc = crc32c::crc32c(&w.0);
    w.u32(crc);
    w.0
}

#[cfg(test)]
pub(crate) mod testing {
    //! Corruption helpers shared by the format tests.

    /// An 8-aligned copy of an object, as a page-aligned mapping gives: the
    /// decoders borrow its columns in place.
    pub struct Aligned {
        words: Vec<u64>,
        len: usize,
    }

    impl Aligned {
        pub fn of(bytes: &[u8]) -> Self {
            let mut words = vec![0u64; bytes.len().div_ceil(8)];
            // SAFETY: u64 storage viewed as bytes, within its length.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), words.as_mut_ptr().cast::<u8>(), bytes.len()) };
            Aligned { words, len: bytes.len() }
        }

        pub fn bytes(&self) -> &[u8] {
            // SAFETY: the first `len` bytes of `words` are the object.
            unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
        }
    }

    /// Every single-bit flip of `bytes` must be refused by `decode`.
    pub fn every_bit_flip_is_refused<E>(bytes: &[u8], decode: impl Fn(&[u8]) -> Result<(), E>) {
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut copy = bytes.to_vec();
                copy[i] ^= 1 << bit;
                assert!(decode(&copy).is_err(), "flip of bit {bit} in byte {i} was accepted");
            }
        }
    }

    /// Every truncation of `bytes` must be refused by `decode`.
    pub fn every_truncation_is_refused<E>(bytes: &[u8], decode: impl Fn(&[u8]) -> Result<(), E>) {
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "truncation to {len} bytes was accepted");
        }
    }
}
