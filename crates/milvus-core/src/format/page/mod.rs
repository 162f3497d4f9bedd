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
//! MAXALIGNed offset; in an index with filter columns (`Shape::values`),
//! the row's filter values follow the elements in the same item
//! (`crate::format::values`). A line pointer is `lp_off:15, lp_flags:2, lp_len:15`
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
//! Manifest pages carry the encoded manifest (`format::manifest`) in
//! page-sized pieces after the header, with the same special space.
//!
//! [`Page`] reads any page but the meta page (is it free, which chain is
//! it in), [`RowPage::new`] checks a row page before reading it (a damaged
//! page is an error, never a read out of bounds), and [`PageMut`] changes
//! pages exactly as `PageInit`, `PageAddItem` and `PageIndexMultiDelete`
//! do (a `#[pg_test]` of the skin compares them with Postgres' own): the
//! server's pages are written by this code, through GenericXLog's copies.
//! [`RowPageBuilder`] fills pages for the tests and benches of the scan.

use crate::distance::Metric;
use crate::element::{Element, Row, Shape, Vectors, cast};
use crate::format::meta::{Block, INVALID_BLOCK, META_OFFSET, MetaPage};

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
    /// page is recognised: [`ROW_PAGE_ID`], [`MANIFEST_PAGE_ID`] or
    /// [`OBJECT_PAGE_ID`].
    pub page_id: u16,
    pub _reserved: u16,
    /// The segment of a row page; 0 for a manifest page; the object's tag
    /// (`ObjectRef::page_tag`) for an object page.
    pub segment: u64,
}

/// The page id of a row page: `'M'`, `'R'`.
pub const ROW_PAGE_ID: u16 = 0x4d52;
/// The page id of a manifest page: `'M'`, `'M'`.
pub const MANIFEST_PAGE_ID: u16 = 0x4d4d;
/// The page id of a page of an object of the embedded store: `'M'`, `'O'`.
pub const OBJECT_PAGE_ID: u16 = 0x4d4f;

const _: () = assert!(std::mem::size_of::<ChainOpaque>() == SPECIAL_SIZE);

/// Bytes of one row item (of a sparse row: of an empty one; of a row with
/// filter values: before them).
pub fn row_item_size(shape: Shape) -> usize {
    8 + shape.bytes()
}

/// Whether an item of `len` bytes may be a row of `shape`: of the row size
/// (at least, when filter values follow), or for sparse rows, words after
/// the key (their header then says how many: [`RowPage::row`]).
fn fits_row(shape: Shape, len: usize) -> bool {
    match shape.element {
        Element::Sparse => len >= row_item_size(shape) && (len - 8).is_multiple_of(4),
        _ if shape.values => len >= row_item_size(shape),
        _ => len == row_item_size(shape),
    }
}

/// Rows one page holds when every row of an index has the same size (of
/// sparse rows: the empty ones; they vary).
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
    /// `None` when a row of `shape` fits one item, and for sparse rows
    /// (at most [`crate::element::SPARSE_MAX_NNZ`] entries) and bits: an index
    /// of bits takes at most the 65,088 one page holds ([`Element::max_dims`]: CREATE INDEX
    /// refuses more; pgvector's HNSW takes 64,000).
    pub fn of(shape: Shape) -> Option<Chunks> {
        let floats = matches!(shape.element, Element::F32 | Element::F16);
        if !floats || shape.dims <= max_dims_per_page(shape.element) {
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

    /// Whether line pointer `offset` (1-based) is a live item.
    pub fn is_live(&self, offset: usize) -> bool {
        (line_pointer(self.bytes, offset) >> 15) & 0b11 == LP_NORMAL
    }

    /// The item at line pointer `offset` (1-based), `what` naming it in
    /// errors: `None` if it is not live; an error if the pointer leads
    /// outside the page or to an item that is not `fits` its length.
    fn item(&self, offset: usize, what: &str, fits: impl Fn(usize) -> bool) -> Result<Option<&'a [u8]>, PageError> {
        let lp = line_pointer(self.bytes, offset);
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
        Ok(self.row_values(offset)?.map(|(key, row, _)| (key, row)))
    }

    /// [`Self::row`], and the bytes of its filter values (none in an index
    /// without filter columns).
    pub fn row_values(&self, offset: usize) -> Result<Option<RowWithValues<'a>>, PageError> {
        let Some(item) = self.item(offset, "item", |len| fits_row(self.shape, len))? else { return Ok(None) };
        let (elements, values) = self.split(item);
        Ok(Some((item_key(item), self.elements(offset, elements)?, values)))
    }

    /// A row item's elements and its filter values.
    fn split(&self, item: &'a [u8]) -> (&'a [u8], &'a [u8]) {
        match self.shape.element {
            Element::Sparse => (&item[8..], &[]),
            _ => item[8..].split_at(self.shape.bytes()),
        }
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
        self.for_each_row_values(|offset, key, vector, _| f(offset, key, vector))
    }

    /// Calls `f(offset, key, vector, filter values)` for every live row.
    pub fn for_each_row_values(&self, mut f: impl FnMut(u16, u64, Row<'a>, &'a [u8])) -> Result<(), PageError> {
        for offset in 1..=self.items {
            if let Some((key, vector, values)) = self.row_values(offset)? {
                f(offset as u16, key, vector, values);
            }
        }
        Ok(())
    }

    /// Calls `push(key, distance to query)` for every live row: what a
    /// scan does with each page of the growing segment. The element type is
    /// matched once a page, not once a row: the loop over the rows reads
    /// each one's elements in place and calls its type's kernel (a `Row`
    /// built and matched a row cost more than the rest of a 128-d page's
    /// scan: `--bench growing_scan`).
    pub fn distances(&self, metric: Metric, query: Row<'_>, push: impl FnMut(u64, f32)) -> Result<(), PageError> {
        self.distances_and_values(metric, query, push, |_| {})
    }

    /// [`Self::distances`], calling `values(filter values)` for each row
    /// as its distance is pushed: a filtered scan's test of the row.
    pub fn distances_and_values(
        &self,
        metric: Metric,
        query: Row<'_>,
        mut push: impl FnMut(u64, f32),
        mut values: impl FnMut(&'a [u8]),
    ) -> Result<(), PageError> {
        let mut push = |key, distance, v| {
            push(key, distance);
            values(v)
        };
        if query.element() != self.shape.element {
            return self.for_each_row_values(|_, key, vector, v| push(key, metric.between(query, vector), v));
        }
        match query {
            Row::F32(q) => self.for_each_item(|key, e, v| push(key, metric.distance(q, cast(e)), v)),
            Row::F16(q) => self.for_each_item(|key, e, v| push(key, metric.distance_f16(q, cast(e)), v)),
            Row::Bit { bits, .. } => self.for_each_item(|key, e, v| push(key, metric.distance_bits(bits, e), v)),
            Row::Sparse(_) => self.for_each_row_values(|_, key, vector, v| push(key, metric.between(query, vector), v)),
        }
    }

    /// Calls `f(key, elements, filter values)` for every live row of a
    /// fixed width, its elements as stored.
    #[inline]
    fn for_each_item(&self, mut f: impl FnMut(u64, &'a [u8], &'a [u8])) -> Result<(), PageError> {
        let shape = self.shape;
        for offset in 1..=self.items {
            if let Some(item) = self.item(offset, "item", |len| fits_row(shape, len))? {
                let (elements, values) = self.split(item);
                f(item_key(item), elements, values);
            }
        }
        Ok(())
    }

    /// The elements that fill the rest of a row's item, from an 8-byte
    /// boundary: the page is 4-byte aligned (checked in `RowPage::new`) and
    /// an item starts 8-byte aligned within it, its elements after an 8- or
    /// 16-byte header, so they are aligned. A sparse row's words are
    /// checked to be as many as its header says, of the index's dimensions
    /// (what every read of it relies on; the entries themselves were
    /// checked when the row was inserted, and the page is WAL-logged).
    fn elements(&self, offset: usize, bytes: &'a [u8]) -> Result<Row<'a>, PageError> {
        if self.shape.element == Element::Sparse && !crate::element::is_sparse_row_of(cast(bytes), self.shape.dims) {
            let what = format!("item {offset}: not a sparse row of {} dimensions", self.shape.dims);
            return Err(PageError { dims: self.shape.dims, what });
        }
        Ok(Row::from_bytes(self.shape, bytes))
    }
}

/// A row read from a page: its key, vector and filter values' bytes.
pub type RowWithValues<'a> = (u64, Row<'a>, &'a [u8]);

/// The heap TID an item (row or chunk) starts with.
fn item_key(item: &[u8]) -> u64 {
    u64::from_le_bytes(item[..8].try_into().expect("8 bytes"))
}

/// The item of one row: its key (the heap TID), then its elements.
pub fn row_item(key: u64, vector: Row<'_>) -> Vec<u8> {
    row_item_with(key, vector, &[])
}

/// The item of one row with its filter values (`crate::format::values`).
pub fn row_item_with(key: u64, vector: Row<'_>, values: &[u8]) -> Vec<u8> {
    let mut item = Vec::with_capacity(8 + vector.bytes().len() + values.len());
    item.extend_from_slice(&key.to_le_bytes());
    item.extend_from_slice(vector.bytes());
    item.extend_from_slice(values);
    item
}

/// A whole page in memory, aligned as a Postgres buffer is (MAXALIGN).
#[repr(C, align(8))]
#[derive(Clone)]
pub struct AlignedPage(pub [u8; PAGE_SIZE]);

impl AlignedPage {
    /// A page of zeros: a block a relation extension added and nothing
    /// wrote (`PageIsNew`).
    pub fn zeroed() -> Box<AlignedPage> {
        Box::new(AlignedPage([0; PAGE_SIZE]))
    }
}

/// The page header's fields this layer uses, by byte offset.
const PD_LOWER: usize = 12;
const PD_UPPER: usize = 14;
const PD_SPECIAL: usize = 16;
const PD_PAGESIZE_VERSION: usize = 18;

fn get16(bytes: &[u8], at: usize) -> usize {
    u16::from_le_bytes([bytes[at], bytes[at + 1]]) as usize
}

fn set16(bytes: &mut [u8], at: usize, value: usize) {
    bytes[at..at + 2].copy_from_slice(&(value as u16).to_le_bytes());
}

/// Bytes one manifest page or object page carries.
pub const fn manifest_bytes_per_page() -> usize {
    PAGE_SIZE - HEADER_SIZE - SPECIAL_SIZE
}

/// Pages a manifest of `len` bytes needs.
pub fn manifest_pages(len: usize) -> usize {
    len.div_ceil(manifest_bytes_per_page()).max(1)
}

/// A page of the index other than the meta page, to read: a chain page
/// (rows or manifest) or a free one.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a>(&'a [u8]);

impl<'a> Page<'a> {
    /// `bytes`: one whole page.
    pub fn new(bytes: &'a [u8]) -> Page<'a> {
        assert_eq!(bytes.len(), PAGE_SIZE, "a page is {PAGE_SIZE} bytes");
        Page(bytes)
    }

    pub fn bytes(self) -> &'a [u8] {
        self.0
    }

    /// Bytes of special space (`PageGetSpecialSize`); `None` for a header
    /// that points outside the page.
    fn special_size(self) -> Option<usize> {
        PAGE_SIZE.checked_sub(get16(self.0, PD_SPECIAL))
    }

    /// A page no chain uses: never initialised (a relation extension a
    /// crash cut short) or emptied by [`PageMut::clear`], which leaves no
    /// special space. An empty row page (a growing segment's first page
    /// before its first row) has special space and is never taken for
    /// free, even when a free space map that lost its latest changes in a
    /// crash still lists its block.
    pub fn is_free(self) -> bool {
        let is_new = get16(self.0, PD_UPPER) == 0;
        is_new || (get16(self.0, PD_LOWER) <= HEADER_SIZE && self.special_size() == Some(0))
    }

    /// The special space of a row or manifest page; `None` for any other.
    pub fn chain(self) -> Option<ChainOpaque> {
        if self.special_size() != Some(SPECIAL_SIZE) {
            return None;
        }
        let o = &self.0[PAGE_SIZE - SPECIAL_SIZE..];
        let opaque = ChainOpaque {
            next: u32::from_le_bytes(o[0..4].try_into().expect("4 bytes")),
            page_id: u16::from_le_bytes([o[4], o[5]]),
            _reserved: u16::from_le_bytes([o[6], o[7]]),
            segment: u64::from_le_bytes(o[8..16].try_into().expect("8 bytes")),
        };
        matches!(opaque.page_id, ROW_PAGE_ID | MANIFEST_PAGE_ID | OBJECT_PAGE_ID).then_some(opaque)
    }

    /// The page read as a row page of `shape` (checked).
    pub fn rows(self, shape: Shape) -> Result<RowPage<'a>, PageError> {
        RowPage::new(self.0, shape)
    }

    /// Whether a row page holds a live row (or chunk of one).
    pub fn has_rows(self, shape: Shape) -> Result<bool, PageError> {
        let rows = self.rows(shape)?;
        for offset in 1..=rows.max_offset() {
            if rows.is_live(offset) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The first `len` bytes a manifest or object page carries (at most
    /// [`manifest_bytes_per_page`]).
    pub fn manifest_bytes(self, len: usize) -> &'a [u8] {
        &self.0[HEADER_SIZE..HEADER_SIZE + len.min(manifest_bytes_per_page())]
    }
}

/// A page to change: what `PageInit`, `PageAddItem` and
/// `PageIndexMultiDelete` do, byte for byte (a `#[pg_test]` of the skin
/// compares them with Postgres' own), so one layout serves the server and
/// the core's tests of the page protocol.
pub struct PageMut<'a>(&'a mut [u8]);

impl<'a> PageMut<'a> {
    /// `bytes`: one whole page, 8-byte aligned as every buffer is.
    pub fn new(bytes: &'a mut [u8]) -> PageMut<'a> {
        assert_eq!(bytes.len(), PAGE_SIZE, "a page is {PAGE_SIZE} bytes");
        PageMut(bytes)
    }

    pub fn as_page(&self) -> Page<'_> {
        Page(self.0)
    }

    /// `PageInit`: zeros, an empty line pointer array and `special` bytes
    /// of special space (MAXALIGNed).
    fn init(&mut self, special: usize) {
        let special_at = PAGE_SIZE - maxalign(special);
        self.0.fill(0);
        set16(self.0, PD_LOWER, HEADER_SIZE);
        set16(self.0, PD_UPPER, special_at);
        set16(self.0, PD_SPECIAL, special_at);
        set16(self.0, PD_PAGESIZE_VERSION, PAGE_SIZE | LAYOUT_VERSION as usize);
    }

    /// Empties the page: free for any chain ([`Page::is_free`]).
    pub fn clear(&mut self) {
        self.init(0);
    }

    fn set_opaque(&mut self, opaque: ChainOpaque) {
        let o = &mut self.0[PAGE_SIZE - SPECIAL_SIZE..];
        o[0..4].copy_from_slice(&opaque.next.to_le_bytes());
        o[4..6].copy_from_slice(&opaque.page_id.to_le_bytes());
        o[6..8].copy_from_slice(&opaque._reserved.to_le_bytes());
        o[8..16].copy_from_slice(&opaque.segment.to_le_bytes());
    }

    /// Initialises an empty row page of `segment`, the end of its chain.
    pub fn init_rows(&mut self, segment: u64) {
        self.init(SPECIAL_SIZE);
        self.set_opaque(ChainOpaque { next: INVALID_BLOCK, page_id: ROW_PAGE_ID, _reserved: 0, segment });
    }

    /// Links the next page of the chain (only a chain's tail is linked).
    pub fn set_next(&mut self, next: Block) {
        let opaque = self.as_page().chain().expect("a chain page");
        debug_assert_eq!(opaque.next, INVALID_BLOCK, "only a chain's tail is linked");
        self.set_opaque(ChainOpaque { next, ..opaque });
    }

    /// Adds a row; false when it does not fit.
    pub fn add_row(&mut self, key: u64, vector: Row<'_>) -> bool {
        self.add_item(&row_item(key, vector))
    }

    /// Adds an item (a row, or a chunk of one: [`Chunks::item`]) after
    /// the last line pointer; false when it does not fit.
    pub fn add_item(&mut self, item: &[u8]) -> bool {
        let (lower, upper) = (get16(self.0, PD_LOWER), get16(self.0, PD_UPPER));
        let len = item.len();
        if lower + LINE_POINTER_SIZE + maxalign(len) > upper {
            return false;
        }
        let off = upper - maxalign(len);
        self.0[off..off + len].copy_from_slice(item);
        set_line_pointer(self.0, lower, off, len);
        set16(self.0, PD_LOWER, lower + LINE_POINTER_SIZE);
        set16(self.0, PD_UPPER, off);
        true
    }

    /// Removes the items at `offsets` (1-based, each a live item of the
    /// page) and packs the others against the special space, keeping their
    /// order: what `PageIndexMultiDelete` leaves.
    pub fn delete_items(&mut self, offsets: &[u16]) {
        let count = (get16(self.0, PD_LOWER) - HEADER_SIZE) / LINE_POINTER_SIZE;
        let mut kept: Vec<(usize, usize)> = (1..=count)
            .filter(|o| !offsets.contains(&(*o as u16)))
            .map(|o| {
                let lp = line_pointer(self.0, o);
                ((lp & 0x7fff) as usize, (lp >> 17) as usize)
            })
            .collect();
        // Highest first: each item moves up (or stays), past nothing not
        // yet moved.
        let mut order: Vec<usize> = (0..kept.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(kept[i].0));
        let mut upper = get16(self.0, PD_SPECIAL);
        for i in order {
            let (off, len) = kept[i];
            upper -= maxalign(len);
            self.0.copy_within(off..off + len, upper);
            kept[i].0 = upper;
        }
        for (i, (off, len)) in kept.iter().enumerate() {
            set_line_pointer(self.0, HEADER_SIZE + i * LINE_POINTER_SIZE, *off, *len);
        }
        set16(self.0, PD_LOWER, HEADER_SIZE + kept.len() * LINE_POINTER_SIZE);
        set16(self.0, PD_UPPER, upper);
    }

    /// Marks the item at `offset` unused without moving anything
    /// (`ItemIdSetUnused`): for the tests of readers.
    pub fn kill(&mut self, offset: usize) {
        let at = HEADER_SIZE + (offset - 1) * LINE_POINTER_SIZE;
        self.0[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
    }

    /// Writes a page of a manifest chain: `bytes` (at most
    /// [`manifest_bytes_per_page`]), then `next`.
    pub fn init_manifest(&mut self, bytes: &[u8], next: Block) {
        assert!(bytes.len() <= manifest_bytes_per_page());
        self.init(SPECIAL_SIZE);
        self.0[HEADER_SIZE..HEADER_SIZE + bytes.len()].copy_from_slice(bytes);
        set16(self.0, PD_LOWER, HEADER_SIZE + bytes.len());
        self.set_opaque(ChainOpaque { next, page_id: MANIFEST_PAGE_ID, _reserved: 0, segment: 0 });
    }

    /// Writes a page of an object's chain: `bytes` (at most
    /// [`manifest_bytes_per_page`]), then `next`, tagged with the object's
    /// `tag`. The layout is a manifest page's.
    pub fn init_object(&mut self, bytes: &[u8], next: Block, tag: u64) {
        self.init_manifest(bytes, next);
        self.set_opaque(ChainOpaque { next, page_id: OBJECT_PAGE_ID, _reserved: 0, segment: tag });
    }

    /// Writes `meta` into the page, a new meta page.
    pub fn init_meta(self, meta: MetaPage) {
        let mut page = self;
        page.init(0);
        *page.meta() = meta;
    }

    /// The meta page the page holds, to change. The page header is made to
    /// cover the whole [`MetaPage`] so a WAL record of the page carries every
    /// field (GenericXLog skips the hole between `pd_lower` and `pd_upper`;
    /// a meta page written before `released` existed ended earlier).
    pub fn meta(self) -> &'a mut MetaPage {
        set16(self.0, PD_LOWER, META_OFFSET + std::mem::size_of::<MetaPage>());
        MetaPage::view_mut(self.0).expect("an aligned page")
    }
}

fn line_pointer(bytes: &[u8], offset: usize) -> u32 {
    let at = HEADER_SIZE + (offset - 1) * LINE_POINTER_SIZE;
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn set_line_pointer(bytes: &mut [u8], at: usize, off: usize, len: usize) {
    let lp = off as u32 | LP_NORMAL << 15 | (len as u32) << 17;
    bytes[at..at + 4].copy_from_slice(&lp.to_le_bytes());
}

/// Lays out a row page as Postgres does (`PageInit`, then `PageAddItem` of
/// each row): for tests and benches.
pub struct RowPageBuilder {
    bytes: Box<AlignedPage>,
    shape: Shape,
}

impl RowPageBuilder {
    /// An empty row page (`PageInit` with the chain page's special space).
    pub fn new(shape: Shape, special: [u8; SPECIAL_SIZE]) -> Self {
        let mut bytes = AlignedPage::zeroed();
        let mut page = PageMut::new(&mut bytes.0);
        page.init(SPECIAL_SIZE);
        bytes.0[PAGE_SIZE - SPECIAL_SIZE..].copy_from_slice(&special);
        RowPageBuilder { bytes, shape }
    }

    /// Adds a row; false when the page is full.
    pub fn add(&mut self, key: u64, vector: Row<'_>) -> bool {
        assert_eq!((vector.len(), vector.element()), (self.shape.dims, self.shape.element));
        self.add_item(&row_item(key, vector))
    }

    /// Adds an item (a row, or a chunk of one); false when the page is full.
    pub fn add_item(&mut self, item: &[u8]) -> bool {
        PageMut::new(&mut self.bytes.0).add_item(item)
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes.0
    }

    /// Marks the row at `offset` unused, as a reader may find it
    /// (`ItemIdSetUnused`).
    pub fn kill(&mut self, offset: usize) {
        PageMut::new(&mut self.bytes.0).kill(offset)
    }
}

/// Pages holding `vectors` (of `shape` each), keyed 0, 1, 2...: the
/// growing segment a bench scans.
pub fn row_pages(shape: Shape, vectors: &Vectors<'_>) -> Vec<RowPageBuilder> {
    let mut pages = vec![RowPageBuilder::new(shape, [0; SPECIAL_SIZE])];
    for key in 0..vectors.rows(shape.dims) {
        let v = vectors.row(key, shape.dims);
        if !pages.last_mut().expect("a page").add(key as u64, v) {
            pages.push(RowPageBuilder::new(shape, [0; SPECIAL_SIZE]));
            assert!(pages.last_mut().expect("a page").add(key as u64, v), "a row fits an empty page");
        }
    }
    pages
}

#[cfg(test)]
mod tests;
