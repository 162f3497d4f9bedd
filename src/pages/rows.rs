//! Row pages and manifest pages: the layout of chain pages
//! (docs/format.md, "Index pages").
//!
//! - **row pages**: standard slotted pages (line pointers) whose items are
//!   `[heap TID packed in u64][dims elements: f32, f16 for halfvec, or
//!   bits in whole bytes]`, chained by `next` in the page's
//!   special space, which also names the segment the page belongs to. A row
//!   deleted by VACUUM is removed from its page.
//! - **manifest pages**: the encoded manifest
//!   (`milvus_core::format::manifest`, checksummed) in page-sized pieces,
//!   chained the same way.

use std::mem::size_of;

use milvus_core::Metric;
use milvus_core::element::{Row, Shape};
use milvus_core::format::page::PageHits;
pub use milvus_core::format::page::rows_per_page;
use milvus_core::format::page::{self as layout, Chunk, Chunks, RowPage};
pub use milvus_core::format::page::{ChainOpaque, MANIFEST_PAGE_ID, ROW_PAGE_ID};
use pgrx::pg_sys;

use super::{Block, INVALID_BLOCK, Page, PageMut};

/// Packs a heap TID into the u64 key the core stores: block << 16 | offset.
pub fn pack_tid(tid: &pg_sys::ItemPointerData) -> u64 {
    let block = ((tid.ip_blkid.bi_hi as u64) << 16) | tid.ip_blkid.bi_lo as u64;
    (block << 16) | tid.ip_posid as u64
}

pub fn unpack_tid(key: u64) -> pg_sys::ItemPointerData {
    let block = (key >> 16) as u32;
    pg_sys::ItemPointerData {
        ip_blkid: pg_sys::BlockIdData { bi_hi: (block >> 16) as u16, bi_lo: (block & 0xffff) as u16 },
        ip_posid: (key & 0xffff) as u16,
    }
}

// The core reads row pages in place (`milvus_core::format::page`): its
// layout constants are this server's.
const _: () = {
    assert!(pg_sys::BLCKSZ as usize == layout::PAGE_SIZE);
    assert!(size_of::<pg_sys::PageHeaderData>() == layout::HEADER_SIZE);
    assert!(size_of::<pg_sys::ItemIdData>() == layout::LINE_POINTER_SIZE);
    assert!(size_of::<ChainOpaque>() == layout::SPECIAL_SIZE);
    assert!(pg_sys::MAXIMUM_ALIGNOF as usize == 8);
};

/// Bytes of manifest one page carries.
pub fn manifest_bytes_per_page() -> usize {
    pg_sys::BLCKSZ as usize - maxalign(size_of::<pg_sys::PageHeaderData>()) - maxalign(size_of::<ChainOpaque>())
}

/// Pages a manifest of `len` bytes needs.
pub fn manifest_pages(len: usize) -> usize {
    len.div_ceil(manifest_bytes_per_page()).max(1)
}

fn damaged(e: milvus_core::format::page::PageError) -> ! {
    crate::error::raise_corrupted(format!("milvus index page damaged: {e}"))
}

fn maxalign(n: usize) -> usize {
    let a = pg_sys::MAXIMUM_ALIGNOF as usize;
    n.div_ceil(a) * a
}

impl<'a> Page<'a> {
    /// The special space of a row or manifest page; `None` for any other.
    pub fn chain(self) -> Option<ChainOpaque> {
        // SAFETY: a locked page; its special space is read only when it has
        // the size of ours.
        unsafe {
            if pg_sys::PageGetSpecialSize(self.0) as usize != maxalign(size_of::<ChainOpaque>()) {
                return None;
            }
            let opaque = *pg_sys::PageGetSpecialPointer(self.0).cast::<ChainOpaque>();
            matches!(opaque.page_id, ROW_PAGE_ID | MANIFEST_PAGE_ID).then_some(opaque)
        }
    }

    /// Calls `f(offset, key, vector)` for every live row of a row page.
    pub fn for_each_row(self, shape: Shape, f: impl FnMut(pg_sys::OffsetNumber, u64, Row<'a>)) {
        self.rows(shape).for_each_row(f).unwrap_or_else(|e| damaged(e))
    }

    /// The distances of its live rows to `query`, added to `hits`.
    pub fn distances(self, shape: Shape, metric: Metric, query: Row<'_>, hits: &mut PageHits) {
        self.rows(shape).distances(metric, query, hits).unwrap_or_else(|e| damaged(e))
    }

    fn rows(self, shape: Shape) -> RowPage<'a> {
        // SAFETY: a locked page of BLCKSZ bytes, read while the lock is held.
        let bytes = unsafe { std::slice::from_raw_parts(self.0.cast::<u8>(), pg_sys::BLCKSZ as usize) };
        RowPage::new(bytes, shape).unwrap_or_else(|e| damaged(e))
    }

    /// Calls `f(offset, chunk)` for every live chunk of a page of rows cut
    /// in chunks.
    pub fn for_each_chunk(self, chunks: &Chunks, f: impl FnMut(pg_sys::OffsetNumber, Chunk<'a>)) {
        self.rows(chunks.shape).for_each_chunk(chunks, f).unwrap_or_else(|e| damaged(e))
    }

    /// Calls `f(offset, key, first)` for every live item of a row page,
    /// row or chunk (`first`: a row, or the first chunk of one).
    pub fn for_each_key(self, shape: Shape, mut f: impl FnMut(pg_sys::OffsetNumber, u64, bool)) {
        match Chunks::of(shape) {
            Some(chunks) => self.for_each_chunk(&chunks, |o, c| f(o, c.key, c.seq == 0)),
            None => self.for_each_row(shape, |o, key, _| f(o, key, true)),
        }
    }

    /// Whether a row page holds a live row (or chunk of one).
    pub fn has_rows(self, shape: Shape) -> bool {
        let mut any = false;
        self.for_each_key(shape, |_, _, _| any = true);
        any
    }

    /// The first `len` bytes a manifest page carries.
    pub fn manifest_bytes(&self, len: usize) -> &[u8] {
        // SAFETY: a locked manifest page; `len` is at most what it carries.
        unsafe {
            std::slice::from_raw_parts(pg_sys::PageGetContents(self.0).cast::<u8>(), len.min(manifest_bytes_per_page()))
        }
    }
}

impl PageMut<'_> {
    fn set_opaque(&mut self, opaque: ChainOpaque) {
        // SAFETY: a page initialised with our special space.
        unsafe { *pg_sys::PageGetSpecialPointer(self.0).cast::<ChainOpaque>() = opaque }
    }

    /// Initialises an empty row page of `segment`, the end of its chain.
    pub fn init_rows(&mut self, segment: u64) {
        // SAFETY: a registered page copy of BLCKSZ bytes.
        unsafe { pg_sys::PageInit(self.0, pg_sys::BLCKSZ as usize, size_of::<ChainOpaque>()) };
        self.set_opaque(ChainOpaque { next: INVALID_BLOCK, page_id: ROW_PAGE_ID, _reserved: 0, segment });
    }

    /// Links the next page of the chain.
    pub fn set_next(&mut self, next: Block) {
        let opaque = self.as_page().chain().expect("a chain page");
        debug_assert_eq!(opaque.next, INVALID_BLOCK, "only a chain's tail is linked");
        self.set_opaque(ChainOpaque { next, ..opaque });
    }

    /// Adds a row; false when it does not fit.
    pub fn add_row(&mut self, key: u64, vector: Row<'_>) -> bool {
        self.add_item(&layout::row_item(key, vector))
    }

    /// Adds an item, a row or a chunk of one
    /// ([`milvus_core::format::page::Chunks::item`]); false when it does
    /// not fit.
    pub fn add_item(&mut self, item: &[u8]) -> bool {
        // SAFETY: a registered row page; the item is copied in.
        let offset = unsafe {
            pg_sys::PageAddItemExtended(
                self.0,
                item.as_ptr().cast_mut().cast(),
                item.len(),
                pg_sys::InvalidOffsetNumber,
                0,
            )
        };
        offset != pg_sys::InvalidOffsetNumber
    }

    /// Removes the rows at `offsets` (and compacts the page).
    pub fn delete_rows(&mut self, offsets: &mut [pg_sys::OffsetNumber]) {
        // SAFETY: a registered row page; the offsets are its live items.
        unsafe { pg_sys::PageIndexMultiDelete(self.0, offsets.as_mut_ptr(), offsets.len() as i32) }
    }

    /// Writes a page of a manifest chain: `bytes` (at most
    /// [`manifest_bytes_per_page`]), then `next`.
    pub fn init_manifest(&mut self, bytes: &[u8], next: Block) {
        assert!(bytes.len() <= manifest_bytes_per_page());
        // SAFETY: a registered page copy of BLCKSZ bytes.
        unsafe {
            pg_sys::PageInit(self.0, pg_sys::BLCKSZ as usize, size_of::<ChainOpaque>());
            let contents = pg_sys::PageGetContents(self.0).cast::<u8>();
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), contents, bytes.len());
            let header = self.0.cast::<pg_sys::PageHeaderData>();
            (*header).pd_lower = (contents as usize + bytes.len() - self.0 as usize) as u16;
        }
        self.set_opaque(ChainOpaque { next, page_id: MANIFEST_PAGE_ID, _reserved: 0, segment: 0 });
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use super::*;
    use milvus_core::element::{Element, f16};
    use pgrx::prelude::*;

    #[pg_test]
    fn tids_pack_and_unpack() {
        for (block, offset) in [(0u32, 1u16), (1, 2), (0xdead_beef, 0xffff), (u32::MAX - 1, 291)] {
            let tid = pg_sys::ItemPointerData {
                ip_blkid: pg_sys::BlockIdData { bi_hi: (block >> 16) as u16, bi_lo: block as u16 },
                ip_posid: offset,
            };
            let back = unpack_tid(pack_tid(&tid));
            assert_eq!(
                (back.ip_blkid.bi_hi, back.ip_blkid.bi_lo, back.ip_posid),
                (tid.ip_blkid.bi_hi, tid.ip_blkid.bi_lo, offset)
            );
        }
        let max = layout::max_dims_per_page(Element::F32);
        assert!(max >= 2000, "a 2000-d vector fits a page: {max}");
    }

    /// Inserts seal a segment by counting its pages: a page must take
    /// exactly `rows_per_page` rows.
    #[pg_test]
    fn rows_per_page_is_what_a_page_takes() {
        let f32s = [1, 4, 64, 128, 768, layout::max_dims_per_page(Element::F32)];
        let f16s = [1, 3, 768, 1536, layout::max_dims_per_page(Element::F16)];
        let bits = [1, 9, 768, 3072, layout::max_dims_per_page(Element::Bit)];
        let shapes = f32s.map(Shape::f32).into_iter().chain(f16s.map(|d| Shape::new(d, Element::F16)));
        for shape in shapes.chain(bits.map(|d| Shape::new(d, Element::Bit))) {
            let mut block = vec![0u64; pg_sys::BLCKSZ as usize / 8]; // MAXALIGNed
            let mut page = PageMut(block.as_mut_ptr().cast(), std::marker::PhantomData);
            let (floats, halves) = (vec![0.5f32; shape.dims], vec![f16::from_f32(0.5); shape.dims]);
            let set = vec![0b1010_1010u8; shape.bytes()];
            let vector = match shape.element {
                Element::F32 => Row::F32(&floats),
                Element::F16 => Row::F16(&halves),
                Element::Bit => Row::Bit { bits: &set, len: shape.dims },
            };
            let mut rows = 0;
            page.init_rows(1);
            while page.add_row(rows as u64, vector) {
                rows += 1;
            }
            assert!(rows >= 1, "a row of {shape:?} fits a page");
            assert_eq!(rows, rows_per_page(shape), "{shape:?}");
            assert_eq!(page.as_page().chain().map(|o| (o.next, o.segment)), Some((INVALID_BLOCK, 1)));

            // The core lays out the same page byte for byte (its scan and
            // benches read pages as Postgres writes them).
            let opaque = page.as_page().chain().expect("a row page");
            // SAFETY: ChainOpaque is plain data of SPECIAL_SIZE bytes.
            let special: [u8; layout::SPECIAL_SIZE] = unsafe { std::mem::transmute(opaque) };
            let mut built = layout::RowPageBuilder::new(shape, special);
            for key in 0..rows {
                assert!(built.add(key as u64, vector));
            }
            // SAFETY: the page above, BLCKSZ bytes.
            let ours = unsafe { std::slice::from_raw_parts(block.as_ptr().cast::<u8>(), pg_sys::BLCKSZ as usize) };
            assert!(built.bytes() == ours, "{shape:?}: the core's page differs from Postgres'");
        }
    }
}
