//! Row pages as this server stores them: heap TIDs as the rows' keys, and
//! the checks that the core's page layout (`milvus_core::format::page`,
//! docs/format.md "Index pages") is this server's, byte for byte.

use std::mem::size_of;

pub use milvus_core::format::page::manifest_pages;
use milvus_core::format::page::{self as layout, ChainOpaque};
use pgrx::pg_sys;

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

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use super::*;
    use milvus_core::element::{Element, Row, Shape, f16};
    use milvus_core::format::page::rows_per_page;
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

    /// The core changes pages itself (`milvus_core::format::page::PageMut`),
    /// and Postgres reads them: it must do what `PageInit`, `PageAddItem`
    /// and `PageIndexMultiDelete` do, byte for byte; inserts seal a segment
    /// by counting its pages, so a page takes exactly `rows_per_page` rows.
    #[pg_test]
    fn the_core_changes_pages_as_postgres_does() {
        use milvus_core::format::page::{AlignedPage, HEADER_SIZE, PAGE_SIZE, PageMut, row_item};
        let f32s = [1, 4, 64, 128, 768, layout::max_dims_per_page(Element::F32)];
        let f16s = [1, 3, 768, 1536, layout::max_dims_per_page(Element::F16)];
        let bits = [1, 9, 768, 3072, layout::max_dims_per_page(Element::Bit)];
        // Sparse rows of 30,000 dimensions by their entries: every one a
        // page holds, up to the most an index takes.
        let sparse =
            [0, 1, 120, milvus_core::element::SPARSE_MAX_NNZ].map(|nnz| (Shape::new(30_000, Element::Sparse), nnz));
        let shapes = f32s.map(Shape::f32).into_iter().chain(f16s.map(|d| Shape::new(d, Element::F16)));
        let shapes = shapes.chain(bits.map(|d| Shape::new(d, Element::Bit))).map(|s| (s, 0));
        for (shape, nnz) in shapes.chain(sparse) {
            let (floats, halves) = (vec![0.5f32; shape.dims], vec![f16::from_f32(0.5); shape.dims]);
            let set = vec![0b1010_1010u8; shape.bytes()];
            let entries = milvus_core::sparse::SparseVec {
                dim: shape.dims,
                indices: (0..nnz as i32).map(|i| i * 29).collect(),
                values: vec![0.5; nnz],
            };
            let words = milvus_core::element::sparse_words(entries.view());
            let vector = match shape.element {
                Element::F32 => Row::F32(&floats),
                Element::F16 => Row::F16(&halves),
                Element::Bit => Row::Bit { bits: &set, len: shape.dims },
                Element::Sparse => Row::Sparse(&words),
            };
            for deleted in [vec![1u16], vec![1, 2], vec![1, 3, 4, 7, 9, 12, 40]] {
                let (mut theirs, mut ours) = (AlignedPage::zeroed(), AlignedPage::zeroed());
                let postgres = theirs.0.as_mut_ptr().cast::<std::ffi::c_char>();
                let mut page = PageMut::new(&mut ours.0);
                page.init_rows(1);
                // SAFETY: a MAXALIGNed page of BLCKSZ bytes; items are copied in.
                unsafe { pg_sys::PageInit(postgres, pg_sys::BLCKSZ as usize, layout::SPECIAL_SIZE) };
                let mut rows = 0;
                loop {
                    let item = row_item(rows, vector);
                    // SAFETY: as above.
                    let added = unsafe {
                        pg_sys::PageAddItemExtended(postgres, item.as_ptr().cast_mut().cast(), item.len(), 0, 0)
                    } != pg_sys::InvalidOffsetNumber;
                    assert_eq!(page.add_item(&item), added, "{shape:?}, row {rows}");
                    if !added {
                        break;
                    }
                    rows += 1;
                }
                if shape.element.is_fixed() {
                    assert_eq!(rows as usize, rows_per_page(shape), "{shape:?}");
                }
                let special = PAGE_SIZE - layout::SPECIAL_SIZE;
                theirs.0[special..].copy_from_slice(&page.as_page().bytes()[special..]);
                assert!(theirs.0 == *page.as_page().bytes(), "{shape:?}: the core's page differs from Postgres'");

                let mut dead: Vec<u16> = deleted.into_iter().filter(|o| *o as u64 <= rows).collect();
                page.delete_items(&dead);
                // SAFETY: live offsets of the page, ascending.
                unsafe { pg_sys::PageIndexMultiDelete(postgres, dead.as_mut_ptr(), dead.len() as i32) };
                // What a reader sees: the header's bounds, the line
                // pointers, the items (the hole between holds leftovers).
                let bytes = page.as_page().bytes();
                let field = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]) as usize;
                let (lower, upper) = (field(bytes, 12), field(bytes, 14));
                assert_eq!(&theirs.0[12..20], &bytes[12..20], "{shape:?}: header after deleting {dead:?}");
                assert_eq!(&theirs.0[HEADER_SIZE..lower], &bytes[HEADER_SIZE..lower], "{shape:?}: line pointers");
                assert_eq!(&theirs.0[upper..], &bytes[upper..], "{shape:?}: items");
            }
        }
    }
}
