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
            let bytes: Vec<u8> = floats.chunks(shape.dims).flat_map(|r| crate::element::pack_bits(&set(r))).collect();
            Vectors::Bit(bytes.into())
        }
        Element::Sparse => {
            let mut rows = Vectors::new(Element::Sparse);
            for r in floats.chunks(shape.dims) {
                let (indices, values) =
                    r.iter().enumerate().filter(|(_, x)| x.abs() > 0.9).map(|(i, x)| (i as i32, *x)).unzip();
                let v = crate::sparse::SparseVec { dim: shape.dims, indices, values };
                rows.push(Row::Sparse(&crate::element::sparse_words(v.view())));
            }
            rows
        }
    }
}

#[test]
fn sparse_rows_of_any_width_share_pages_and_read_back() {
    let shape = Shape::new(600, Element::Sparse);
    let vectors = random_rows(shape, 40, 3);
    let pages = row_pages(shape, &vectors);
    assert!(pages.len() > 1, "rows of {} words fill more than a page", vectors.bytes().len() / 4);
    let mut read = Vectors::new(Element::Sparse);
    let mut keys = Vec::new();
    for p in &pages {
        RowPage::new(p.bytes(), shape)
            .unwrap()
            .for_each_row(|_, k, v| {
                keys.push(k);
                read.push(v);
            })
            .unwrap();
    }
    assert_eq!((keys, &read), ((0..40).collect::<Vec<u64>>(), &vectors));
    let query = vectors.row(7, 600);
    let mut hits = Vec::new();
    for p in &pages {
        RowPage::new(p.bytes(), shape)
            .unwrap()
            .distances(Metric::InnerProduct, query, |k, d| hits.push((k, d)))
            .unwrap();
    }
    let expected: Vec<(u64, f32)> =
        (0..40).map(|k| (k, Metric::InnerProduct.between(query, vectors.row(k as usize, 600)))).collect();
    assert_eq!(hits, expected);
    // An item whose words are not one row of these dimensions is damage.
    let other = Shape::new(601, Element::Sparse);
    let e = RowPage::new(pages[0].bytes(), other).unwrap().for_each_row(|_, _, _| {}).unwrap_err();
    assert_eq!(e.what, "item 1: not a sparse row of 601 dimensions");
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
        let mut hits = Vec::new();
        RowPage::new(page.bytes(), shape)
            .unwrap()
            .distances(Metric::L2, query.all(), |k, d| hits.push((k, d)))
            .unwrap();
        let want: Vec<(u64, f32)> = (0..10u64)
            .filter(|k| ![1, 6].contains(k))
            .map(|k| (k, Metric::L2.between(query.all(), vectors.row(k as usize, 16))))
            .collect();
        assert_eq!(hits, want);
    }
    // A query of another element type (never an index's own) is compared
    // widened, not read as the page's type.
    let shape = Shape::f32(16);
    let page = row_pages(shape, &random_rows(shape, 3, 3)).remove(0);
    let half_query = random_rows(Shape::new(16, Element::F16), 1, 4);
    let mut hits = Vec::new();
    RowPage::new(page.bytes(), shape)
        .unwrap()
        .distances(Metric::L1, half_query.all(), |k, d| hits.push((k, d)))
        .unwrap();
    let wide_query = half_query.all().to_f32();
    let rows = random_rows(shape, 3, 3);
    let want: Vec<(u64, f32)> =
        (0..3).map(|k| (k, Metric::L1.between(Row::F32(&wide_query), rows.row(k as usize, 16)))).collect();
    assert_eq!(hits, want);
}

/// Rows of an index with filter columns carry their values after the
/// vector: read back with each row, paired with each distance; a page
/// read as an index without them refuses the longer items.
#[test]
fn rows_carry_their_filter_values() {
    use crate::filter::Value;
    use crate::format::values;
    let shape = Shape::f32(8).with_values(true);
    let vectors = random_rows(shape, 5, 2);
    let values_of = |k: u64| values::encode(&[Value::Int(k as i64 * 10), Value::Text("t".repeat(k as usize))]);
    let mut bytes = AlignedPage::zeroed();
    let mut page = PageMut::new(&mut bytes.0);
    page.init_rows(1);
    for k in 0..5u64 {
        assert!(page.add_item(&row_item_with(k, vectors.row(k as usize, 8), &values_of(k))));
    }
    let rows = RowPage::new(&bytes.0, shape).unwrap();
    let mut read = Vec::new();
    rows.for_each_row_values(|_, key, v, vals| read.push((key, v.to_f32(), vals.to_vec()))).unwrap();
    let want: Vec<_> = (0..5u64).map(|k| (k, vectors.row(k as usize, 8).to_f32(), values_of(k))).collect();
    assert_eq!(read, want);
    let (mut hits, mut seen) = (Vec::new(), Vec::new());
    let query = random_rows(shape, 1, 9);
    rows.distances_and_values(Metric::L2, query.all(), |k, d| hits.push((k, d)), |v| seen.push(v.to_vec())).unwrap();
    assert_eq!(seen, (0..5).map(values_of).collect::<Vec<_>>());
    assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    let plain = RowPage::new(&bytes.0, Shape::f32(8)).unwrap();
    assert!(plain.for_each_row(|_, _, _| ()).is_err(), "an index without filter columns has no longer rows");
}

/// A page changed by `PageMut` reads back as what was done to it:
/// deleted rows gone and the rest in order, packed so the room they
/// left takes new rows; emptied pages free; manifest pages carrying
/// their bytes.
#[test]
fn pages_read_back_what_was_done_to_them() {
    let shape = Shape::f32(100);
    let vectors = random_rows(shape, rows_per_page(shape), 5);
    let mut bytes = AlignedPage::zeroed();
    let mut page = PageMut::new(&mut bytes.0);
    assert!(page.as_page().is_free(), "a page of zeros is a new page");
    page.init_rows(7);
    assert!(!page.as_page().is_free(), "an empty row page is not free");
    assert_eq!(page.as_page().chain().map(|o| (o.next, o.segment)), Some((INVALID_BLOCK, 7)));
    for key in 0..rows_per_page(shape) {
        assert!(page.add_row(key as u64, vectors.row(key, shape.dims)));
    }
    assert!(!page.add_row(99, vectors.row(0, shape.dims)), "the page is full");
    page.delete_items(&[1, 4, 5, rows_per_page(shape) as u16]);
    let mut kept = Vec::new();
    let read = page.as_page().rows(shape).unwrap().for_each_row(|_, key, v| {
        assert_eq!(v, vectors.row(key as usize, shape.dims));
        kept.push(key)
    });
    read.unwrap();
    let expected: Vec<u64> = (0..rows_per_page(shape) as u64).filter(|k| ![0, 3, 4].contains(k)).collect();
    assert_eq!(kept, expected[..expected.len() - 1]);
    for key in 100..104 {
        assert!(page.add_row(key, vectors.row(0, shape.dims)), "the room deleted rows left is reused");
    }
    assert!(!page.add_row(104, vectors.row(0, shape.dims)));
    page.set_next(42);
    assert_eq!(page.as_page().chain().map(|o| o.next), Some(42));
    page.clear();
    assert!(page.as_page().is_free() && page.as_page().chain().is_none());

    let manifest: Vec<u8> = (0..manifest_bytes_per_page()).map(|i| i as u8).collect();
    page.init_manifest(&manifest, 3);
    let opaque = page.as_page().chain().expect("a manifest page");
    assert_eq!((opaque.page_id, opaque.next), (MANIFEST_PAGE_ID, 3));
    assert_eq!(page.as_page().manifest_bytes(usize::MAX), &manifest[..]);
    assert_eq!(manifest_pages(manifest.len() + 1), 2);

    page.init_object(&manifest[..100], 8, 0xfeed);
    let opaque = page.as_page().chain().expect("an object page");
    assert_eq!((opaque.page_id, opaque.next, opaque.segment), (OBJECT_PAGE_ID, 8, 0xfeed));
    assert_eq!(page.as_page().manifest_bytes(100), &manifest[..100]);
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
