//! Row pages, read in place: Postgres' slotted page layout as the index's
//! row pages use it (docs/format.md, "Index pages"), so that the scan over
//! the growing segment is plain Rust over the page's bytes, measured and
//! tested without a server.
//!
//! A row page is an 8 kB Postgres page: the 24-byte page header, an array
//! of 4-byte line pointers from byte 24 (`pd_lower` ends it), items placed
//! from the end of the page down (`pd_upper` starts them), and the 16-byte
//! special space of a chain page at `pd_special`. An item is a row: the heap
//! TID packed in a `u64`, then `dims` elements (`f32`; `f16` for a halfvec
//! index; bits, in whole bytes, for a bit index: [`Shape`]), at a
//! MAXALIGNed offset. A line pointer is `lp_off:15, lp_flags:2, lp_len:15`
//! from the low bit up (the bit-field layout of GCC on little-endian
//! hosts); a live row has `lp_flags` 1 (`LP_NORMAL`).
//!
//! A row of more dimensions than one page holds ([`max_dims_per_page`], up
//! to the type's 16,000) is stored in [`Chunks`]: `count` items of about
//! equal size, each the only item of its page, on consecutive pages of the
//! chain, each `[key u64][seq u16][count u16][unused u32][element × n]`. An
//! insert writes them in several WAL records; a crash between two leaves an
//! incomplete row of a transaction that never committed, which
//! [`RowAssembler`] drops (and VACUUM removes: its TID is dead).
//!
//! [`RowPage::new`] checks what it reads (a damaged page is an error, never
//! a read out of bounds); [`RowPageBuilder`] lays out a page exactly as
//! `PageInit` and `PageAddItem` do (a `#[pg_test]` compares the two), for
//! the tests and benches of the scan.

use crate::distance::Metric;
use crate::element::{Element, Row, Shape, Vectors, cast};
use crate::format::meta::Block;

/// Postgres' block size (`BLCKSZ`), which this build of pg_milvus assumes.
pub const PAGE_SIZE: usize = 8192;
/// `SizeOfPageHeaderData`.
pub const HEADER_SIZE: usize = 24;
/// `sizeof(ItemIdData)`.
pub const LINE_POINTER_SIZE: usize = 4;
/// The special space of a chain page ([`ChainOpaque`]), MAXALIGNed.
pub const SPECIAL_SIZE: usize = 16;
/// `PG_PAGE_LAYOUT_VERSION`, in the low byte of `pd_pagesize_version`.
const LAYOUT_VERSION: u16 = 4;
const LP_NORMAL: u32 = 1;
const MAXALIGN: usize = 8;

/// The special space of a chain page, row page or manifest page alike: the
/// next page of its chain, what kind of page it is, and the segment a row
/// page belongs to. The skin maps it onto `PageGetSpecialPointer`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainOpaque {
    pub next: Block,
    /// `'M'` in the high byte, the page's kind in the low one, so a stray
    /// page is recognised: [`ROW_PAGE_ID`] or [`MANIFEST_PAGE_ID`].
    pub page_id: u16,
    pub _reserved: u16,
    /// The segment of a row page; 0 for a manifest page.
    pub segment: u64,
}

/// The page id of a row page: `'M'`, `'R'`.
pub const ROW_PAGE_ID: u16 = 0x4d52;
/// The page id of a manifest page: `'M'`, `'M'`.
pub const MANIFEST_PAGE_ID: u16 = 0x4d4d;

const _: () = assert!(std::mem::size_of::<ChainOpaque>() == SPECIAL_SIZE);

/// Bytes of one row item.
pub fn row_item_size(shape: Shape) -> usize {
    8 + shape.bytes()
}

/// Rows one page holds: every row of an index has the same size.
pub fn rows_per_page(shape: Shape) -> usize {
    (PAGE_SIZE - HEADER_SIZE - SPECIAL_SIZE) / (maxalign(row_item_size(shape)) + LINE_POINTER_SIZE)
}

/// The largest item a page holds: one item, MAXALIGNed.
fn item_room() -> usize {
    (PAGE_SIZE - HEADER_SIZE - SPECIAL_SIZE - LINE_POINTER_SIZE) / MAXALIGN * MAXALIGN
}

/// The largest vector of `element`s a row page holds as one item.
pub fn max_dims_per_page(element: Element) -> usize {
    element.dims_in(item_room() - 8)
}

/// Rows held in index pages as a search sees them: each row's key and its
/// distance to the query, computed once, as the pages are read. The vectors
/// are never copied out of the pages: a scan holds 12 bytes per row instead
/// of the row. (It is not faster: reading the rows costs the same whether a
/// copy or the distance kernel reads them first; docs/benchmarks.md.)
#[derive(Debug, Clone, Default)]
pub struct PageHits {
    keys: Vec<u64>,
    distances: Vec<f32>,
}

impl PageHits {
    pub fn push(&mut self, key: u64, distance: f32) {
        self.keys.push(key);
        self.distances.push(distance);
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key of the row pushed `row`-th.
    pub fn key(&self, row: usize) -> u64 {
        self.keys[row]
    }

    /// The distance of the row pushed `row`-th.
    pub fn distance(&self, row: usize) -> f32 {
        self.distances[row]
    }

    /// `(key, distance)` of every row, in the order pushed.
    pub fn iter(&self) -> impl Iterator<Item = (u64, f32)> + '_ {
        self.keys.iter().copied().zip(self.distances.iter().copied())
    }
}

/// Bytes before a chunk's elements: key, seq, count, unused.
pub const CHUNK_HEADER: usize = 16;

/// How rows that do not fit a page are cut: `count` chunks of `per_chunk`
/// elements (the last one shorter), each more than half a page, so one a
/// page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunks {
    pub shape: Shape,
    pub count: usize,
    pub per_chunk: usize,
}

impl Chunks {
    /// `None` when a row of `shape` fits one item, and for bits: an index
    /// of bits takes at most the 65,088 one page holds ([`Element::max_dims`]: CREATE INDEX
    /// refuses more; pgvector's HNSW takes 64,000).
    pub fn of(shape: Shape) -> Option<Chunks> {
        if shape.dims <= max_dims_per_page(shape.element) || shape.element == Element::Bit {
            return None;
        }
        let most = shape.element.dims_in(item_room() - CHUNK_HEADER);
        let count = shape.dims.div_ceil(most);
        Some(Chunks { shape, count, per_chunk: shape.dims.div_ceil(count) })
    }

    /// The elements of chunk `seq`.
    pub fn range(&self, seq: usize) -> std::ops::Range<usize> {
        let dims = self.shape.dims;
        (seq * self.per_chunk).min(dims)..((seq + 1) * self.per_chunk).min(dims)
    }

    /// The item of chunk `seq` of the row `key`.
    pub fn item(&self, key: u64, seq: usize, vector: Row<'_>) -> Vec<u8> {
        let elements = vector.slice(self.range(seq)).bytes();
        let mut item = Vec::with_capacity(CHUNK_HEADER + elements.len());
        item.extend_from_slice(&key.to_le_bytes());
        item.extend_from_slice(&(seq as u16).to_le_bytes());
        item.extend_from_slice(&(self.count as u16).to_le_bytes());
        item.extend_from_slice(&0u32.to_le_bytes());
        item.extend_from_slice(elements);
        item
    }
}

/// One chunk of a row, as read from a page.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Chunk<'a> {
    pub key: u64,
    pub seq: usize,
    pub count: usize,
    pub elements: Row<'a>,
}

/// Puts rows together from their chunks, read in chain order: a row is
/// complete when chunks `0..count` of one key came one after the other. A
/// chunk out of that order (the rest of a row an insert never finished)
/// drops the row it would have continued.
#[derive(Debug)]
pub struct RowAssembler {
    chunks: Chunks,
    key: Option<u64>,
    next: usize,
    row: Vectors<'static>,
}

impl RowAssembler {
    pub fn new(chunks: Chunks) -> Self {
        RowAssembler { chunks, key: None, next: 0, row: Vectors::new(chunks.shape.element) }
    }

    /// Takes the next chunk of the chain; returns the row it completes.
    pub fn push(&mut self, chunk: Chunk) -> Option<(u64, Row<'_>)> {
        let continues = self.key == Some(chunk.key) && chunk.seq == self.next;
        if chunk.seq == 0 {
            self.key = Some(chunk.key);
            self.row.clear();
        } else if !continues || chunk.count != self.chunks.count {
            self.key = None;
            return None;
        }
        self.row.push(chunk.elements);
        self.next = chunk.seq + 1;
        if self.next == self.chunks.count {
            let key = self.key.take().expect("a row being put together");
            return Some((key, self.row.all()));
        }
        None
    }
}

fn maxalign(n: usize) -> usize {
    n.div_ceil(MAXALIGN) * MAXALIGN
}

/// Why a page's bytes are not a row page of the expected dimensions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a row page of {dims} dimensions: {what}")]
pub struct PageError {
    pub dims: usize,
    pub what: String,
}

/// A row page of rows of one shape, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct RowPage<'a> {
    bytes: &'a [u8],
    shape: Shape,
    /// Line pointers, from `HEADER_SIZE` to `pd_lower`.
    items: usize,
}

impl<'a> RowPage<'a> {
    /// Checks the header of `bytes` (a whole page, 8-byte aligned as every
    /// Postgres buffer is) and returns the page.
    pub fn new(bytes: &'a [u8], shape: Shape) -> Result<Self, PageError> {
        let bad = |what: String| Err(PageError { dims: shape.dims, what });
        if bytes.len() != PAGE_SIZE {
            return bad(format!("{} bytes", bytes.len()));
        }
        if !(bytes.as_ptr() as usize).is_multiple_of(4) {
            return bad("a page not aligned for its elements".into());
        }
        let field = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]) as usize;
        let (lower, upper, special) = (field(12), field(14), field(16));
        let ordered = HEADER_SIZE <= lower && lower <= upper && upper <= special && special <= PAGE_SIZE;
        if !ordered || !(lower - HEADER_SIZE).is_multiple_of(LINE_POINTER_SIZE) {
            return bad(format!("pd_lower {lower}, pd_upper {upper}, pd_special {special}"));
        }
        Ok(RowPage { bytes, shape, items: (lower - HEADER_SIZE) / LINE_POINTER_SIZE })
    }

    /// Line pointers on the page, live or not (`PageGetMaxOffsetNumber`).
    pub fn max_offset(&self) -> usize {
        self.items
    }

    /// The item at line pointer `offset` (1-based), `what` naming it in
    /// errors: `None` if it is not live; an error if the pointer leads
    /// outside the page or to an item that is not `fits` its length.
    fn item(&self, offset: usize, what: &str, fits: impl Fn(usize) -> bool) -> Result<Option<&'a [u8]>, PageError> {
        let at = HEADER_SIZE + (offset - 1) * LINE_POINTER_SIZE;
        let lp = u32::from_le_bytes(self.bytes[at..at + 4].try_into().expect("4 bytes"));
        if (lp >> 15) & 0b11 != LP_NORMAL {
            return Ok(None);
        }
        let (off, len) = ((lp & 0x7fff) as usize, (lp >> 17) as usize);
        if !fits(len) || !off.is_multiple_of(MAXALIGN) || off + len > PAGE_SIZE {
            return Err(PageError { dims: self.shape.dims, what: format!("{what} {offset}: {len} bytes at {off}") });
        }
        Ok(Some(&self.bytes[off..off + len]))
    }

    /// The row at line pointer `offset` (1-based): `None` if it is not a
    /// live row; an error if the pointer leads outside the page or to an
    /// item of another size.
    pub fn row(&self, offset: usize) -> Result<Option<(u64, Row<'a>)>, PageError> {
        let Some(item) = self.item(offset, "item", |len| len == row_item_size(self.shape))? else { return Ok(None) };
        Ok(Some((item_key(item), self.elements(&item[8..]))))
    }

    /// The chunk at line pointer `offset` (1-based) of a page of rows cut
    /// as `chunks` says: `None` if it is not live; an error if the pointer
    /// leads outside the page or its size or numbers do not fit `chunks`.
    pub fn chunk(&self, offset: usize, chunks: &Chunks) -> Result<Option<Chunk<'a>>, PageError> {
        let Some(item) = self.item(offset, "chunk", |len| len >= CHUNK_HEADER)? else { return Ok(None) };
        let seq = u16::from_le_bytes([item[8], item[9]]) as usize;
        let count = u16::from_le_bytes([item[10], item[11]]) as usize;
        let len = item.len();
        let element = self.shape.element;
        let shape = Shape::new(chunks.range(seq).len(), element);
        if count != chunks.count || seq >= count || len - CHUNK_HEADER != shape.bytes() {
            let what = format!("chunk {offset}: chunk {seq} of {count}, {len} bytes");
            return Err(PageError { dims: self.shape.dims, what });
        }
        Ok(Some(Chunk { key: item_key(item), seq, count, elements: Row::from_bytes(shape, &item[CHUNK_HEADER..]) }))
    }

    /// Calls `f(offset, chunk)` for every live chunk of a page of rows cut
    /// as `chunks` says.
    pub fn for_each_chunk(&self, chunks: &Chunks, mut f: impl FnMut(u16, Chunk<'a>)) -> Result<(), PageError> {
        for offset in 1..=self.items {
            if let Some(chunk) = self.chunk(offset, chunks)? {
                f(offset as u16, chunk);
            }
        }
        Ok(())
    }

    /// Calls `f(offset, key, vector)` for every live row.
    pub fn for_each_row(&self, mut f: impl FnMut(u16, u64, Row<'a>)) -> Result<(), PageError> {
        for offset in 1..=self.items {
            if let Some((key, vector)) = self.row(offset)? {
                f(offset as u16, key, vector);
            }
        }
        Ok(())
    }

    /// Adds the distance of every live row to `query` to `hits`: what a scan
    /// does with each page of the growing segment. The element type is
    /// matched once a page, not once a row: the loop over the rows reads
    /// each one's elements in place and calls its type's kernel (a `Row`
    /// built and matched a row cost 2.8x the whole scan of a 128-d page,
    /// docs/benchmark-runs.md).
    pub fn distances(&self, metric: Metric, query: Row<'_>, hits: &mut PageHits) -> Result<(), PageError> {
        if query.element() != self.shape.element {
            return self.for_each_row(|_, key, vector| hits.push(key, metric.between(query, vector)));
        }
        let mut push = |key, distance| hits.push(key, distance);
        match query {
            Row::F32(q) => self.for_each_item(|key, v| push(key, metric.distance(q, cast(v)))),
            Row::F16(q) => self.for_each_item(|key, v| push(key, metric.distance_f16(q, cast(v)))),
            Row::Bit { bits, .. } => self.for_each_item(|key, v| push(key, metric.distance_bits(bits, v))),
        }
    }

    /// Calls `f(key, elements)` for every live row, its elements as stored.
    #[inline]
    fn for_each_item(&self, mut f: impl FnMut(u64, &'a [u8])) -> Result<(), PageError> {
        let size = row_item_size(self.shape);
        for offset in 1..=self.items {
            if let Some(item) = self.item(offset, "item", |len| len == size)? {
                f(item_key(item), &item[8..]);
            }
        }
        Ok(())
    }

    /// The elements that fill the rest of a row's item, from an 8-byte
    /// boundary: the page is 4-byte aligned (checked in `RowPage::new`) and
    /// an item starts 8-byte aligned within it, its elements after an 8- or
    /// 16-byte header, so they are aligned.
    fn elements(&self, bytes: &'a [u8]) -> Row<'a> {
        Row::from_bytes(self.shape, bytes)
    }
}

/// The heap TID an item (row or chunk) starts with.
fn item_key(item: &[u8]) -> u64 {
    u64::from_le_bytes(item[..8].try_into().expect("8 bytes"))
}

/// The item of one row: its key (the heap TID), then its elements.
pub fn row_item(key: u64, vector: Row<'_>) -> Vec<u8> {
    let mut item = Vec::with_capacity(8 + vector.bytes().len());
    item.extend_from_slice(&key.to_le_bytes());
    item.extend_from_slice(vector.bytes());
    item
}

/// Lays out a row page as Postgres does (`PageInit`, then `PageAddItem` of
/// each row): for tests and benches.
pub struct RowPageBuilder {
    bytes: Box<AlignedPage>,
    shape: Shape,
}

#[repr(C, align(8))]
struct AlignedPage([u8; PAGE_SIZE]);

impl RowPageBuilder {
    /// An empty row page (`PageInit` with the chain page's special space).
    pub fn new(shape: Shape, special: [u8; SPECIAL_SIZE]) -> Self {
        let mut bytes = Box::new(AlignedPage([0; PAGE_SIZE]));
        let b = &mut bytes.0;
        let special_at = PAGE_SIZE - SPECIAL_SIZE;
        b[12..14].copy_from_slice(&(HEADER_SIZE as u16).to_le_bytes());
        b[14..16].copy_from_slice(&(special_at as u16).to_le_bytes());
        b[16..18].copy_from_slice(&(special_at as u16).to_le_bytes());
        b[18..20].copy_from_slice(&(PAGE_SIZE as u16 | LAYOUT_VERSION).to_le_bytes());
        b[special_at..].copy_from_slice(&special);
        RowPageBuilder { bytes, shape }
    }

    /// Adds a row; false when the page is full.
    pub fn add(&mut self, key: u64, vector: Row<'_>) -> bool {
        assert_eq!((vector.len(), vector.element()), (self.shape.dims, self.shape.element));
        self.add_item(&row_item(key, vector))
    }

    /// Adds an item (a row, or a chunk of one); false when the page is full.
    pub fn add_item(&mut self, item: &[u8]) -> bool {
        let b = &mut self.bytes.0;
        let field = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]) as usize;
        let (lower, upper) = (field(b, 12), field(b, 14));
        let len = item.len();
        if lower + LINE_POINTER_SIZE + maxalign(len) > upper {
            return false;
        }
        let off = upper - maxalign(len);
        b[off..off + len].copy_from_slice(item);
        let lp = off as u32 | LP_NORMAL << 15 | (len as u32) << 17;
        b[lower..lower + 4].copy_from_slice(&lp.to_le_bytes());
        b[12..14].copy_from_slice(&((lower + LINE_POINTER_SIZE) as u16).to_le_bytes());
        b[14..16].copy_from_slice(&(off as u16).to_le_bytes());
        true
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes.0
    }

    /// Marks the row at `offset` unused, as VACUUM's deletion leaves it to
    /// a reader (`ItemIdSetUnused`).
    pub fn kill(&mut self, offset: usize) {
        let at = HEADER_SIZE + (offset - 1) * LINE_POINTER_SIZE;
        self.bytes.0[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
    }
}

/// Pages holding `vectors` (of `shape` each), keyed 0, 1, 2...: the
/// growing segment a bench scans.
pub fn row_pages(shape: Shape, vectors: &Vectors<'_>) -> Vec<RowPageBuilder> {
    let mut pages = vec![RowPageBuilder::new(shape, [0; SPECIAL_SIZE])];
    for key in 0..vectors.bytes().len() / shape.bytes() {
        let v = vectors.row(key, shape.dims);
        if !pages.last_mut().expect("a page").add(key as u64, v) {
            pages.push(RowPageBuilder::new(shape, [0; SPECIAL_SIZE]));
            assert!(pages.last_mut().expect("a page").add(key as u64, v), "a row fits an empty page");
        }
    }
    pages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::Rng;

    const ELEMENTS: [Element; 3] = [Element::F32, Element::F16, Element::Bit];

    /// `n` random rows of `shape`, row-major.
    fn random_rows(shape: Shape, n: usize, seed: u64) -> Vectors<'static> {
        let floats = Rng::new(seed).vector(n * shape.dims);
        match shape.element {
            Element::F32 => Vectors::F32(floats.into()),
            Element::F16 => Vectors::F16(floats.iter().map(|x| crate::element::f16::from_f32(*x)).collect()),
            Element::Bit => {
                let set = |r: &[f32]| r.iter().map(|x| *x > 0.0).collect::<Vec<bool>>();
                let bytes: Vec<u8> =
                    floats.chunks(shape.dims).flat_map(|r| crate::element::pack_bits(&set(r))).collect();
                Vectors::Bit(bytes.into())
            }
        }
    }

    fn owned(row: Row<'_>) -> Vectors<'static> {
        Vectors::of(row)
    }

    #[test]
    fn reads_back_every_row_a_page_holds() {
        for element in ELEMENTS {
            for dims in [1, 128, 768, max_dims_per_page(element)] {
                let shape = Shape::new(dims, element);
                let vectors = random_rows(shape, 40, dims as u64);
                let pages = row_pages(shape, &vectors);
                let per_page = rows_per_page(shape);
                assert!(pages.iter().all(|p| RowPage::new(p.bytes(), shape).unwrap().max_offset() <= per_page));
                assert_eq!(pages.len(), 40usize.div_ceil(per_page), "{shape:?}: pages full but the last");
                let mut read = Vec::new();
                for p in &pages {
                    RowPage::new(p.bytes(), shape).unwrap().for_each_row(|_, k, v| read.push((k, owned(v)))).unwrap();
                }
                let want: Vec<(u64, Vectors)> = (0..40).map(|k| (k as u64, owned(vectors.row(k, dims)))).collect();
                assert_eq!(read, want);
            }
        }
    }

    #[test]
    fn the_largest_row_fits_and_one_more_dimension_does_not() {
        assert_eq!((max_dims_per_page(Element::F32), max_dims_per_page(Element::F16)), (2034, 4068));
        assert_eq!(max_dims_per_page(Element::Bit), Element::Bit.max_dims(), "a bit row is one item");
        for element in ELEMENTS {
            let max = max_dims_per_page(element);
            let (fits, wider) = (Shape::new(max, element), Shape::new(max + 1, element));
            assert_eq!((rows_per_page(fits), rows_per_page(wider)), (1, 0));
            assert!(RowPageBuilder::new(fits, [0; SPECIAL_SIZE]).add(1, random_rows(fits, 1, 1).row(0, max)));
            assert!(!RowPageBuilder::new(wider, [0; SPECIAL_SIZE]).add(1, random_rows(wider, 1, 1).row(0, max + 1)));
        }
    }

    /// Rows too wide for a page: cut in chunks of a page each, put together
    /// again in chain order; an unfinished row (a crash between the WAL
    /// records of its insert) is dropped, and the next row is whole.
    #[test]
    fn wide_rows_go_in_chunks_and_come_back_whole() {
        let cuts = [
            (Shape::f32(max_dims_per_page(Element::F32) + 1), 2),
            (Shape::f32(3072), 2),
            (Shape::f32(4096), 3),
            (Shape::f32(16_000), 8),
            (Shape::new(3072, Element::F16), 0),
            (Shape::new(max_dims_per_page(Element::F16) + 1, Element::F16), 2),
            (Shape::new(16_000, Element::F16), 4),
        ];
        for element in ELEMENTS {
            assert_eq!(Chunks::of(Shape::new(max_dims_per_page(element), element)), None);
        }
        for (shape, count) in cuts {
            let Some(chunks) = Chunks::of(shape) else {
                assert_eq!(count, 0, "{shape:?} fits a page");
                continue;
            };
            assert_eq!(chunks.count, count, "{shape:?}");
            let rows = random_rows(shape, 3, shape.dims as u64);
            // Row 0 whole, row 1 cut short after its first chunk, row 2 whole.
            let mut pages = Vec::new();
            for key in 0..3 {
                let row = rows.row(key, shape.dims);
                let written = if key == 1 { 1 } else { chunks.count };
                for seq in 0..written {
                    let mut page = RowPageBuilder::new(shape, [0; SPECIAL_SIZE]);
                    assert!(page.add_item(&chunks.item(key as u64, seq, row)), "a chunk fits an empty page");
                    assert!(!page.add_item(&chunks.item(key as u64, seq, row)), "and only one");
                    pages.push(page);
                }
            }
            let mut assembler = RowAssembler::new(chunks);
            let mut read = Vec::new();
            for p in &pages {
                RowPage::new(p.bytes(), shape)
                    .unwrap()
                    .for_each_chunk(&chunks, |_, c| {
                        if let Some((k, v)) = assembler.push(c) {
                            read.push((k, owned(v)));
                        }
                    })
                    .unwrap();
            }
            let want = vec![(0, owned(rows.row(0, shape.dims))), (2, owned(rows.row(2, shape.dims)))];
            assert_eq!(read, want, "{shape:?}");
        }
        // A chunk of another cut is damage, not a row.
        let (a, b) = (Chunks::of(Shape::f32(3072)).unwrap(), Chunks::of(Shape::f32(16_000)).unwrap());
        let mut page = RowPageBuilder::new(Shape::f32(3072), [0; SPECIAL_SIZE]);
        page.add_item(&b.item(1, 0, Row::F32(&vec![0.5; 16_000])));
        assert!(RowPage::new(page.bytes(), Shape::f32(3072)).unwrap().for_each_chunk(&a, |_, _| ()).is_err());
    }

    #[test]
    fn dead_rows_are_skipped_and_distances_match_the_kernel() {
        for element in ELEMENTS {
            let shape = Shape::new(16, element);
            let vectors = random_rows(shape, 10, 3);
            let mut page = row_pages(shape, &vectors).remove(0);
            page.kill(2);
            page.kill(7);
            let query = random_rows(shape, 1, 4);
            let mut hits = PageHits::default();
            RowPage::new(page.bytes(), shape).unwrap().distances(Metric::L2, query.all(), &mut hits).unwrap();
            let want: Vec<(u64, f32)> = (0..10u64)
                .filter(|k| ![1, 6].contains(k))
                .map(|k| (k, Metric::L2.between(query.all(), vectors.row(k as usize, 16))))
                .collect();
            assert_eq!(hits.iter().collect::<Vec<_>>(), want);
        }
        // A query of another element type (never an index's own) is compared
        // widened, not read as the page's type.
        let shape = Shape::f32(16);
        let page = row_pages(shape, &random_rows(shape, 3, 3)).remove(0);
        let half_query = random_rows(Shape::new(16, Element::F16), 1, 4);
        let mut hits = PageHits::default();
        RowPage::new(page.bytes(), shape).unwrap().distances(Metric::L1, half_query.all(), &mut hits).unwrap();
        let wide_query = half_query.all().to_f32();
        let rows = random_rows(shape, 3, 3);
        let want: Vec<(u64, f32)> =
            (0..3).map(|k| (k, Metric::L1.between(Row::F32(&wide_query), rows.row(k as usize, 16)))).collect();
        assert_eq!(hits.iter().collect::<Vec<_>>(), want);
    }

    #[test]
    fn damage_is_an_error_not_a_wild_read() {
        let shape = Shape::f32(8);
        let page = row_pages(shape, &Rng::new(5).vector(3 * 8).into()).remove(0);
        let other_dims = RowPage::new(page.bytes(), Shape::f32(9)).unwrap();
        assert!(other_dims.for_each_row(|_, _, _| ()).is_err(), "other dims");
        let other_element = RowPage::new(page.bytes(), Shape::new(8, Element::F16)).unwrap();
        assert!(other_element.for_each_row(|_, _, _| ()).is_err(), "another element type");
        assert!(RowPage::new(&page.bytes()[..100], shape).is_err(), "short");
        let mut bytes = page.bytes().to_vec();
        bytes[12..14].copy_from_slice(&9000u16.to_le_bytes());
        assert!(RowPage::new(&bytes, shape).is_err(), "pd_lower past the page");
        let mut bytes = page.bytes().to_vec();
        let lp = (8190u32) | LP_NORMAL << 15 | (row_item_size(shape) as u32) << 17;
        bytes[24..28].copy_from_slice(&lp.to_le_bytes());
        let err = RowPage::new(&bytes, shape).unwrap().for_each_row(|_, _, _| ());
        assert!(err.unwrap_err().what.contains("at 8190"), "an item past the end");
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_read_safely(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), PAGE_SIZE),
            dims in 1usize..64,
            half in proptest::prelude::any::<bool>(),
        ) {
            let mut page = Box::new(AlignedPage([0; PAGE_SIZE]));
            page.0.copy_from_slice(&bytes);
            let shape = Shape::new(dims, if half { Element::F16 } else { Element::F32 });
            if let Ok(p) = RowPage::new(&page.0, shape) {
                let _ = p.for_each_row(|_, _, v| assert_eq!((v.len(), v.element()), (dims, shape.element)));
            }
        }
    }
}
