//! Row pages, read in place: Postgres' slotted page layout as the index's
//! row pages use it (docs/format.md, "Index pages"), so that the scan over
//! the growing segment is plain Rust over the page's bytes, measured and
//! tested without a server.
//!
//! A row page is an 8 kB Postgres page: the 24-byte page header, an array
//! of 4-byte line pointers from byte 24 (`pd_lower` ends it), items placed
//! from the end of the page down (`pd_upper` starts them), and the 16-byte
//! special space of a chain page at `pd_special`. An item is a row: the heap
//! TID packed in a `u64`, then `dims` `f32`, at a MAXALIGNed offset. A line
//! pointer is `lp_off:15, lp_flags:2, lp_len:15` from the low bit up (the
//! bit-field layout of GCC on little-endian hosts); a live row has
//! `lp_flags` 1 (`LP_NORMAL`).
//!
//! A row of more dimensions than one page holds ([`max_dims_per_page`], up
//! to the type's 16,000) is stored in [`Chunks`]: `count` items of about
//! equal size, each the only item of its page, on consecutive pages of the
//! chain, each `[key u64][seq u16][count u16][unused u32][f32 × n]`. An
//! insert writes them in several WAL records; a crash between two leaves an
//! incomplete row of a transaction that never committed, which
//! [`RowAssembler`] drops (and VACUUM removes: its TID is dead).
//!
//! [`RowPage::new`] checks what it reads (a damaged page is an error, never
//! a read out of bounds); [`RowPageBuilder`] lays out a page exactly as
//! `PageInit` and `PageAddItem` do (a `#[pg_test]` compares the two), for
//! the tests and benches of the scan.

use crate::distance::Metric;
use crate::search::PageHits;

/// Postgres' block size (`BLCKSZ`), which this build of pg_milvus assumes.
pub const PAGE_SIZE: usize = 8192;
/// `SizeOfPageHeaderData`.
pub const HEADER_SIZE: usize = 24;
/// `sizeof(ItemIdData)`.
pub const LINE_POINTER_SIZE: usize = 4;
/// The special space of a chain page (next block, page id, segment), MAXALIGNed.
pub const SPECIAL_SIZE: usize = 16;
/// `PG_PAGE_LAYOUT_VERSION`, in the low byte of `pd_pagesize_version`.
const LAYOUT_VERSION: u16 = 4;
const LP_NORMAL: u32 = 1;
const MAXALIGN: usize = 8;

/// Bytes of one row item of `dims` dimensions.
pub fn row_item_size(dims: usize) -> usize {
    8 + 4 * dims
}

/// Rows one page holds: every row of an index has the same size.
pub fn rows_per_page(dims: usize) -> usize {
    (PAGE_SIZE - HEADER_SIZE - SPECIAL_SIZE) / (maxalign(row_item_size(dims)) + LINE_POINTER_SIZE)
}

/// The largest item a page holds: one item, MAXALIGNed.
fn item_room() -> usize {
    (PAGE_SIZE - HEADER_SIZE - SPECIAL_SIZE - LINE_POINTER_SIZE) / MAXALIGN * MAXALIGN
}

/// The largest vector a row page holds as one item.
pub fn max_dims_per_page() -> usize {
    (item_room() - 8) / 4
}

/// Bytes before a chunk's floats: key, seq, count, unused.
pub const CHUNK_HEADER: usize = 16;

/// How rows of `dims` dimensions that do not fit a page are cut: `count`
/// chunks of `per_chunk` floats (the last one shorter), each more than half
/// a page, so one a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunks {
    pub dims: usize,
    pub count: usize,
    pub per_chunk: usize,
}

impl Chunks {
    /// `None` when a row of `dims` fits one item.
    pub fn of(dims: usize) -> Option<Chunks> {
        if dims <= max_dims_per_page() {
            return None;
        }
        let most = (item_room() - CHUNK_HEADER) / 4;
        let count = dims.div_ceil(most);
        Some(Chunks { dims, count, per_chunk: dims.div_ceil(count) })
    }

    /// The floats of chunk `seq`.
    pub fn range(&self, seq: usize) -> std::ops::Range<usize> {
        (seq * self.per_chunk).min(self.dims)..((seq + 1) * self.per_chunk).min(self.dims)
    }

    /// The item of chunk `seq` of the row `key`.
    pub fn item(&self, key: u64, seq: usize, vector: &[f32]) -> Vec<u8> {
        let floats = &vector[self.range(seq)];
        let mut item = Vec::with_capacity(CHUNK_HEADER + 4 * floats.len());
        item.extend_from_slice(&key.to_le_bytes());
        item.extend_from_slice(&(seq as u16).to_le_bytes());
        item.extend_from_slice(&(self.count as u16).to_le_bytes());
        item.extend_from_slice(&0u32.to_le_bytes());
        for f in floats {
            item.extend_from_slice(&f.to_le_bytes());
        }
        item
    }
}

/// One chunk of a row, as read from a page.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Chunk<'a> {
    pub key: u64,
    pub seq: usize,
    pub count: usize,
    pub floats: &'a [f32],
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
    row: Vec<f32>,
}

impl RowAssembler {
    pub fn new(chunks: Chunks) -> Self {
        RowAssembler { chunks, key: None, next: 0, row: Vec::with_capacity(chunks.dims) }
    }

    /// Takes the next chunk of the chain; returns the row it completes.
    pub fn push(&mut self, chunk: Chunk) -> Option<(u64, &[f32])> {
        let continues = self.key == Some(chunk.key) && chunk.seq == self.next;
        if chunk.seq == 0 {
            self.key = Some(chunk.key);
            self.row.clear();
        } else if !continues || chunk.count != self.chunks.count {
            self.key = None;
            return None;
        }
        self.row.extend_from_slice(chunk.floats);
        self.next = chunk.seq + 1;
        if self.next == self.chunks.count {
            let key = self.key.take().expect("a row being put together");
            return Some((key, &self.row));
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

/// A row page of `dims` dimensions, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct RowPage<'a> {
    bytes: &'a [u8],
    dims: usize,
    /// Line pointers, from `HEADER_SIZE` to `pd_lower`.
    items: usize,
}

impl<'a> RowPage<'a> {
    /// Checks the header of `bytes` (a whole page, 8-byte aligned as every
    /// Postgres buffer is) and returns the page.
    pub fn new(bytes: &'a [u8], dims: usize) -> Result<Self, PageError> {
        let bad = |what: String| Err(PageError { dims, what });
        if bytes.len() != PAGE_SIZE {
            return bad(format!("{} bytes", bytes.len()));
        }
        if !(bytes.as_ptr() as usize).is_multiple_of(4) {
            return bad("a page not aligned for its floats".into());
        }
        let field = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]) as usize;
        let (lower, upper, special) = (field(12), field(14), field(16));
        let ordered = HEADER_SIZE <= lower && lower <= upper && upper <= special && special <= PAGE_SIZE;
        if !ordered || !(lower - HEADER_SIZE).is_multiple_of(LINE_POINTER_SIZE) {
            return bad(format!("pd_lower {lower}, pd_upper {upper}, pd_special {special}"));
        }
        Ok(RowPage { bytes, dims, items: (lower - HEADER_SIZE) / LINE_POINTER_SIZE })
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
            return Err(PageError { dims: self.dims, what: format!("{what} {offset}: {len} bytes at {off}") });
        }
        Ok(Some(&self.bytes[off..off + len]))
    }

    /// The row at line pointer `offset` (1-based): `None` if it is not a
    /// live row; an error if the pointer leads outside the page or to an
    /// item of another size.
    pub fn row(&self, offset: usize) -> Result<Option<(u64, &'a [f32])>, PageError> {
        let Some(item) = self.item(offset, "item", |len| len == row_item_size(self.dims))? else { return Ok(None) };
        Ok(Some((item_key(item), item_floats(&item[8..]))))
    }

    /// The chunk at line pointer `offset` (1-based) of a page of rows cut
    /// as `chunks` says: `None` if it is not live; an error if the pointer
    /// leads outside the page or its size or numbers do not fit `chunks`.
    pub fn chunk(&self, offset: usize, chunks: &Chunks) -> Result<Option<Chunk<'a>>, PageError> {
        let Some(item) = self.item(offset, "chunk", |len| len >= CHUNK_HEADER)? else { return Ok(None) };
        let seq = u16::from_le_bytes([item[8], item[9]]) as usize;
        let count = u16::from_le_bytes([item[10], item[11]]) as usize;
        let len = item.len();
        if count != chunks.count || seq >= count || len - CHUNK_HEADER != 4 * chunks.range(seq).len() {
            let what = format!("chunk {offset}: chunk {seq} of {count}, {len} bytes");
            return Err(PageError { dims: self.dims, what });
        }
        Ok(Some(Chunk { key: item_key(item), seq, count, floats: item_floats(&item[CHUNK_HEADER..]) }))
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
    pub fn for_each_row(&self, mut f: impl FnMut(u16, u64, &'a [f32])) -> Result<(), PageError> {
        for offset in 1..=self.items {
            if let Some((key, vector)) = self.row(offset)? {
                f(offset as u16, key, vector);
            }
        }
        Ok(())
    }

    /// Adds the distance of every live row to `query` to `hits`: what a scan
    /// does with each page of the growing segment.
    pub fn distances(&self, metric: Metric, query: &[f32], hits: &mut PageHits) -> Result<(), PageError> {
        self.for_each_row(|_, key, vector| hits.push(key, metric.distance(query, vector)))
    }
}

/// The heap TID an item (row or chunk) starts with.
fn item_key(item: &[u8]) -> u64 {
    u64::from_le_bytes(item[..8].try_into().expect("8 bytes"))
}

/// The floats that fill the rest of an item, from an 8-byte boundary.
fn item_floats(bytes: &[u8]) -> &[f32] {
    // SAFETY: the page is 4-byte aligned (checked in `RowPage::new`) and an
    // item starts 8-byte aligned within it, its floats after an 8- or
    // 16-byte header, so they are aligned; the slice lies within the page;
    // every bit pattern is an f32.
    unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<f32>(), bytes.len() / 4) }
}

/// The item of one row: its key (the heap TID), then its elements.
pub fn row_item(key: u64, vector: &[f32]) -> Vec<u8> {
    let mut item = Vec::with_capacity(row_item_size(vector.len()));
    item.extend_from_slice(&key.to_le_bytes());
    vector.iter().for_each(|v| item.extend_from_slice(&v.to_le_bytes()));
    item
}

/// Lays out a row page as Postgres does (`PageInit`, then `PageAddItem` of
/// each row): for tests and benches.
pub struct RowPageBuilder {
    bytes: Box<AlignedPage>,
    dims: usize,
}

#[repr(C, align(8))]
struct AlignedPage([u8; PAGE_SIZE]);

impl RowPageBuilder {
    /// An empty row page (`PageInit` with the chain page's special space).
    pub fn new(dims: usize, special: [u8; SPECIAL_SIZE]) -> Self {
        let mut bytes = Box::new(AlignedPage([0; PAGE_SIZE]));
        let b = &mut bytes.0;
        let special_at = PAGE_SIZE - SPECIAL_SIZE;
        b[12..14].copy_from_slice(&(HEADER_SIZE as u16).to_le_bytes());
        b[14..16].copy_from_slice(&(special_at as u16).to_le_bytes());
        b[16..18].copy_from_slice(&(special_at as u16).to_le_bytes());
        b[18..20].copy_from_slice(&(PAGE_SIZE as u16 | LAYOUT_VERSION).to_le_bytes());
        b[special_at..].copy_from_slice(&special);
        RowPageBuilder { bytes, dims }
    }

    /// Adds a row; false when the page is full.
    pub fn add(&mut self, key: u64, vector: &[f32]) -> bool {
        assert_eq!(vector.len(), self.dims);
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

/// Pages holding `vectors` (`dims` each), keyed 0, 1, 2...: the growing
/// segment a bench scans.
pub fn row_pages(dims: usize, vectors: &[f32]) -> Vec<RowPageBuilder> {
    let mut pages = vec![RowPageBuilder::new(dims, [0; SPECIAL_SIZE])];
    for (key, v) in vectors.chunks_exact(dims).enumerate() {
        if !pages.last_mut().expect("a page").add(key as u64, v) {
            pages.push(RowPageBuilder::new(dims, [0; SPECIAL_SIZE]));
            assert!(pages.last_mut().expect("a page").add(key as u64, v), "a row fits an empty page");
        }
    }
    pages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::Rng;

    #[test]
    fn reads_back_every_row_a_page_holds() {
        for dims in [1, 128, 768, max_dims_per_page()] {
            let vectors = Rng::new(dims as u64).vector(40 * dims);
            let pages = row_pages(dims, &vectors);
            assert!(pages.iter().all(|p| RowPage::new(p.bytes(), dims).unwrap().max_offset() <= rows_per_page(dims)));
            assert_eq!(pages.len(), 40usize.div_ceil(rows_per_page(dims)), "{dims} dims: pages full but the last");
            let mut read = Vec::new();
            for p in &pages {
                RowPage::new(p.bytes(), dims).unwrap().for_each_row(|_, k, v| read.push((k, v.to_vec()))).unwrap();
            }
            let want: Vec<(u64, Vec<f32>)> =
                vectors.chunks_exact(dims).enumerate().map(|(k, v)| (k as u64, v.to_vec())).collect();
            assert_eq!(read, want);
        }
    }

    #[test]
    fn the_largest_row_fits_and_one_more_dimension_does_not() {
        let max = max_dims_per_page();
        assert_eq!((max, rows_per_page(max), rows_per_page(max + 1)), (2034, 1, 0));
        assert!(RowPageBuilder::new(max, [0; SPECIAL_SIZE]).add(1, &vec![0.5; max]));
        assert!(!RowPageBuilder::new(max + 1, [0; SPECIAL_SIZE]).add(1, &vec![0.5; max + 1]));
    }

    /// Rows too wide for a page: cut in chunks of a page each, put together
    /// again in chain order; an unfinished row (a crash between the WAL
    /// records of its insert) is dropped, and the next row is whole.
    #[test]
    fn wide_rows_go_in_chunks_and_come_back_whole() {
        assert_eq!(Chunks::of(max_dims_per_page()), None);
        for (dims, count) in [(max_dims_per_page() + 1, 2), (3072, 2), (4096, 3), (16_000, 8)] {
            let chunks = Chunks::of(dims).unwrap();
            assert_eq!(chunks.count, count, "{dims} dims");
            let rng_rows = Rng::new(dims as u64).vector(3 * dims);
            let rows: Vec<&[f32]> = rng_rows.chunks_exact(dims).collect();
            // Row 0 whole, row 1 cut short after its first chunk, row 2 whole.
            let mut pages = Vec::new();
            for (key, row) in rows.iter().enumerate() {
                let written = if key == 1 { 1 } else { chunks.count };
                for seq in 0..written {
                    let mut page = RowPageBuilder::new(dims, [0; SPECIAL_SIZE]);
                    assert!(page.add_item(&chunks.item(key as u64, seq, row)), "a chunk fits an empty page");
                    assert!(!page.add_item(&chunks.item(key as u64, seq, row)), "and only one");
                    pages.push(page);
                }
            }
            let mut assembler = RowAssembler::new(chunks);
            let mut read = Vec::new();
            for p in &pages {
                RowPage::new(p.bytes(), dims)
                    .unwrap()
                    .for_each_chunk(&chunks, |_, c| {
                        if let Some((k, v)) = assembler.push(c) {
                            read.push((k, v.to_vec()));
                        }
                    })
                    .unwrap();
            }
            assert_eq!(read, vec![(0, rows[0].to_vec()), (2, rows[2].to_vec())], "{dims} dims");
        }
        // A chunk of another cut is damage, not a row.
        let (a, b) = (Chunks::of(3072).unwrap(), Chunks::of(16_000).unwrap());
        let mut page = RowPageBuilder::new(3072, [0; SPECIAL_SIZE]);
        page.add_item(&b.item(1, 0, &vec![0.5; 16_000]));
        assert!(RowPage::new(page.bytes(), 3072).unwrap().for_each_chunk(&a, |_, _| ()).is_err());
    }

    #[test]
    fn dead_rows_are_skipped_and_distances_match_the_kernel() {
        let dims = 16;
        let vectors = Rng::new(3).vector(10 * dims);
        let mut page = row_pages(dims, &vectors).remove(0);
        page.kill(2);
        page.kill(7);
        let query = Rng::new(4).vector(dims);
        let mut hits = PageHits::default();
        RowPage::new(page.bytes(), dims).unwrap().distances(Metric::L2, &query, &mut hits).unwrap();
        let want: Vec<(u64, f32)> = (0..10u64)
            .filter(|k| ![1, 6].contains(k))
            .map(|k| (k, Metric::L2.distance(&query, &vectors[k as usize * dims..][..dims])))
            .collect();
        assert_eq!(hits.iter().collect::<Vec<_>>(), want);
    }

    #[test]
    fn damage_is_an_error_not_a_wild_read() {
        let dims = 8;
        let page = row_pages(dims, &Rng::new(5).vector(3 * dims)).remove(0);
        assert!(RowPage::new(page.bytes(), dims + 1).unwrap().for_each_row(|_, _, _| ()).is_err(), "other dims");
        assert!(RowPage::new(&page.bytes()[..100], dims).is_err(), "short");
        let mut bytes = page.bytes().to_vec();
        bytes[12..14].copy_from_slice(&9000u16.to_le_bytes());
        assert!(RowPage::new(&bytes, dims).is_err(), "pd_lower past the page");
        let mut bytes = page.bytes().to_vec();
        let lp = (8190u32) | LP_NORMAL << 15 | (row_item_size(dims) as u32) << 17;
        bytes[24..28].copy_from_slice(&lp.to_le_bytes());
        let err = RowPage::new(&bytes, dims).unwrap().for_each_row(|_, _, _| ());
        assert!(err.unwrap_err().what.contains("at 8190"), "an item past the end");
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_read_safely(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), PAGE_SIZE), dims in 1usize..64) {
            let mut page = Box::new(AlignedPage([0; PAGE_SIZE]));
            page.0.copy_from_slice(&bytes);
            if let Ok(p) = RowPage::new(&page.0, dims) {
                let _ = p.for_each_row(|_, _, v| assert_eq!(v.len(), dims));
            }
        }
    }
}
