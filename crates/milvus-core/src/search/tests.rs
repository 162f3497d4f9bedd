//! The cross-segment search's tests: order, offered-once, shares of `ef`,
//! widening, codes, element types.

use super::*;
use crate::distance::Metric;
use crate::element::{Row, Shape};
use crate::filter::{Cmp, Column, ColumnType, Key, Test, Value};
use crate::format::insert::{self, InsertBinlog};
use crate::graph::segment::HnswParams;
use crate::graph::segment::SegmentIndex;
use crate::segment::SegmentId;
use crate::synthetic::Rng;
use std::collections::HashSet;
use std::sync::atomic::AtomicBool;

const DIMS: usize = 8;

fn segment(id: u64, rows: usize, key_base: u64, with_index: bool, tombstones: Vec<u32>) -> LoadedSegment {
    let mut rng = Rng::new(id);
    let keys: Vec<u64> = (0..rows as u64).map(|i| key_base + i).collect();
    let bytes = insert::encode(SegmentId(id), Metric::L2, DIMS, &keys, &rng.vector(rows * DIMS));
    let binlog = InsertBinlog::decode("o", &bytes).unwrap().into_owned();
    let index =
        with_index.then(|| SegmentIndex::build(&binlog, HnswParams::default(), &AtomicBool::new(false)).unwrap());
    LoadedSegment::new(binlog, index, tombstones)
}

/// A halfvec index: rows stored as f16 in the segment (and its pages),
/// the query as f16, every metric. The search returns what the same
/// search over the rows widened to f32 returns, at the same distances.
#[test]
fn half_segments_search_as_their_widened_rows() {
    use crate::element::f16;
    let (rows, dims) = (3000, 16);
    let halves: Vec<f16> = Rng::new(11).vector(rows * dims).iter().map(|x| f16::from_f32(*x)).collect();
    let widened: Vec<f32> = halves.iter().map(|h| h.to_f32()).collect();
    let keys: Vec<u64> = (0..rows as u64).collect();
    for metric in Metric::ALL {
        let open = |vectors: Row<'_>| {
            let bytes = insert::encode(SegmentId(1), metric, dims, &keys, vectors);
            let binlog = InsertBinlog::decode("o", &bytes).unwrap().into_owned();
            let index = SegmentIndex::build(&binlog, HnswParams::default(), &AtomicBool::new(false)).unwrap();
            Arc::new(LoadedSegment::new(binlog, Some(index), vec![3, 5]))
        };
        let (half, full) = (open(Row::F16(&halves)), open(Row::F32(&widened)));
        assert_eq!(half.binlog().unwrap().element(), crate::element::Element::F16);
        let pages = PageRows { dims, keys: vec![10_000], vectors: halves[..dims].to_vec().into(), values: Vec::new() };
        let query: Vec<f16> = halves[7 * dims..8 * dims].to_vec();
        let wide_query: Vec<f32> = query.iter().map(|h| h.to_f32()).collect();
        let search = |segment: &Arc<LoadedSegment>, query: Vectors<'static>| {
            let hits = pages.hits(metric, query.all());
            Search::new(query, hits, vec![segment.clone()], SearchOptions::default())
                .map(Result::unwrap)
                .take(10)
                .map(|h| (h.key, h.distance))
                .collect::<Vec<_>>()
        };
        let (got, want) = (search(&half, query.into()), search(&full, wide_query.into()));
        assert_eq!(got.iter().map(|h| h.0).collect::<Vec<_>>(), want.iter().map(|h| h.0).collect::<Vec<_>>());
        for ((_, a), (_, b)) in got.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "{metric:?}: {a} against {b}");
        }
        assert!(got.iter().all(|h| h.0 != 3 && h.0 != 5), "tombstones hold");
    }
}

/// Under cosine, sq8 codes of near-parallel rows (10,000 rows of 3
/// dimensions in one octant, pgvector's recall test) rank them by the
/// codes' directions: the walk finds what the rows' walk finds. Rounding
/// each dimension moves a code's length by as much as its direction, and
/// measured by `<q, ô>` alone that error outweighed the angles between
/// neighbours (recall@10 0.75 at `ef` 40).
#[test]
fn sq8_codes_of_near_parallel_rows_keep_their_angles() {
    let (rows, dims) = (10_000, 3);
    let mut rng = Rng::new(5);
    let data: Vec<f32> = rng.vector(rows * dims).iter().map(|x| x.abs()).collect();
    let keys: Vec<u64> = (0..rows as u64).collect();
    let bytes = insert::encode(SegmentId(1), Metric::Cosine, dims, &keys, Row::F32(&data));
    let binlog = InsertBinlog::decode("o", &bytes).unwrap().into_owned();
    let params = HnswParams { quantization: crate::quant::Quantization::Sq8, ..HnswParams::default() };
    let index = SegmentIndex::build(&binlog, params, &AtomicBool::new(false)).unwrap();
    assert!(index.codes().is_some());
    let segment = LoadedSegment::new(binlog.clone(), Some(index), Vec::new());
    let (mut hits, queries) = (0, 100);
    for _ in 0..queries {
        let q: Vec<f32> = rng.vector(dims).iter().map(|x| x.abs()).collect();
        let mut exact: Vec<(f32, u32)> =
            (0..rows as u32).map(|r| (Metric::Cosine.between(Row::F32(&q), binlog.vector(r as usize)), r)).collect();
        exact.sort_by(|a, b| a.0.total_cmp(&b.0));
        let want: HashSet<u32> = exact[..10].iter().map(|e| e.1).collect();
        let got = segment.search(Row::F32(&q), 10, 40, &|_| false).unwrap();
        hits += got.iter().filter(|h| want.contains(&h.row)).count();
    }
    let recall = hits as f64 / (10 * queries) as f64;
    assert!(recall >= 0.99, "recall@10 at ef 40: {recall}");
}

/// A segment walked by its codes (8-bit, RaBitQ) finds what one walked
/// by its rows does, at the same `ef`: recall within 0.005, every hit
/// with its exact distance, nearest first, tombstones held, for each
/// metric with codes and for `vector` and `halfvec` rows.
#[test]
fn segments_with_codes_find_what_segments_without_do() {
    use crate::element::f16;
    use crate::quant::Quantization;
    let (rows, dims) = (5000, 48);
    let data = crate::synthetic::gaussian_mixture(rows, dims, 50, 0.3, 8);
    let halves: Vec<f16> = data.iter().map(|x| f16::from_f32(*x)).collect();
    let keys: Vec<u64> = (0..rows as u64).collect();
    let deleted: Vec<u32> = (0..rows as u32).step_by(7).collect();
    for (metric, quantization) in [Metric::L2, Metric::InnerProduct, Metric::Cosine]
        .into_iter()
        .flat_map(|m| [(m, Quantization::Sq8), (m, Quantization::RaBitQ)])
    {
        for vectors in [Row::F32(&data), Row::F16(&halves)] {
            let bytes = insert::encode(SegmentId(1), metric, dims, &keys, vectors);
            let binlog = InsertBinlog::decode("o", &bytes).unwrap().into_owned();
            let open = |quantization| {
                let params = HnswParams { quantization, ..HnswParams::default() };
                let index = SegmentIndex::build(&binlog, params, &AtomicBool::new(false)).unwrap();
                LoadedSegment::new(binlog.clone(), Some(index), deleted.clone())
            };
            let (coded, plain) = (open(quantization), open(Quantization::None));
            assert!(coded.codes().is_some() && plain.codes().is_none());
            let (mut coded_hits, mut plain_hits) = (0, 0);
            for q in (0..rows).step_by(53) {
                let query: Vec<f32> = data[q * dims..(q + 1) * dims].iter().map(|x| x + 0.05).collect();
                let mut exact: Vec<(f32, u64)> = (0..rows as u32)
                    .filter(|r| r % 7 != 0)
                    .map(|r| (metric.between(Row::F32(&query), binlog.vector(r as usize)), keys[r as usize]))
                    .collect();
                exact.sort_by(|a, b| a.0.total_cmp(&b.0));
                let truth: HashSet<u64> = exact[..10].iter().map(|e| e.1).collect();
                let got = coded.search(Row::F32(&query), 10, 40, &|_| false).unwrap();
                assert_eq!(got.len(), 10);
                assert!(got.windows(2).all(|w| w[0].distance <= w[1].distance), "nearest first");
                for hit in &got {
                    assert!(hit.row % 7 != 0, "a tombstone returned");
                    let d = metric.between(Row::F32(&query), binlog.vector(hit.row as usize));
                    assert_eq!(hit.distance, d, "exact distances");
                }
                coded_hits += got.iter().filter(|h| truth.contains(&h.key)).count();
                plain_hits += plain
                    .search(Row::F32(&query), 10, 40, &|_| false)
                    .unwrap()
                    .iter()
                    .filter(|h| truth.contains(&h.key))
                    .count();
            }
            let queries = rows.div_ceil(53) as f64 * 10.0;
            let (coded, plain) = (coded_hits as f64 / queries, plain_hits as f64 / queries);
            assert!(
                coded >= plain - 0.005,
                "{metric:?} {quantization:?} {:?}: {coded} with codes, {plain} without",
                vectors.element()
            );
        }
    }
}

/// A bit index (`bit_hamming_ops`, `bit_jaccard_ops`): binary-quantized
/// clustered rows, a graph built on the bits as stored. Distances are
/// integers for Hamming, so ties are many: a hit counts when its
/// distance is within the exact 10th nearest's.
#[test]
fn bit_segments_search_by_their_metric() {
    use crate::element::{Element, pack_bits};
    let (rows, dims) = (4000, 256);
    let floats = crate::synthetic::gaussian_mixture(rows, dims, 40, 0.3, 5);
    let quantize = |r: &[f32]| pack_bits(&r.iter().map(|x| *x > 0.0).collect::<Vec<_>>());
    let bits: Vec<u8> = floats.chunks(dims).flat_map(quantize).collect();
    let keys: Vec<u64> = (0..rows as u64).collect();
    for metric in Metric::BITS {
        let row = Row::Bit { bits: &bits, len: 8 * bits.len() };
        let bytes = insert::encode(SegmentId(1), metric, dims, &keys, row);
        let binlog = InsertBinlog::decode("o", &bytes).unwrap().into_owned();
        assert_eq!(binlog.element(), Element::Bit);
        let index = SegmentIndex::build(&binlog, HnswParams::default(), &AtomicBool::new(false)).unwrap();
        let segment = LoadedSegment::new(binlog, Some(index), vec![]);
        let mut within = 0;
        for q in (0..rows).step_by(97) {
            let query = segment.binlog().unwrap().vector(q);
            let mut exact: Vec<f32> =
                (0..rows).map(|r| metric.between(query, segment.binlog().unwrap().vector(r))).collect();
            exact.sort_by(f32::total_cmp);
            let got = segment.search(query, 10, 40, &|_| false).unwrap();
            assert_eq!(got.len(), 10);
            within += got.iter().filter(|h| h.distance <= exact[9]).count();
        }
        let recall = within as f64 / (10 * rows.div_ceil(97)) as f64;
        assert!(recall >= 0.95, "{metric:?}: {recall}");
    }
    // A bit metric over floats, or a float metric over bits, is no index.
    let row = Row::Bit { bits: &bits[..32], len: 256 };
    let bytes = insert::encode(SegmentId(1), Metric::L2, dims, &keys[..1], row);
    let binlog = InsertBinlog::decode("o", &bytes).unwrap();
    assert!(SegmentIndex::build(&binlog, HnswParams::default(), &AtomicBool::new(false)).is_err());
}

#[test]
fn ef_is_split_across_segments_by_their_rows() {
    assert_eq!(segment_ef(40, 100_000, 100_000, 10), 40, "one segment: the whole budget");
    assert_eq!(segment_ef(40, 50_000, 100_000, 10), 30, "half the rows: half, and the slack");
    assert_eq!(segment_ef(40, 12_500, 100_000, 10), 10, "an eighth: the floor");
    assert_eq!(segment_ef(200, 12_500, 100_000, 10), 38);
    assert_eq!(segment_ef(5, 100, 100, 10), 10, "never below the floor");
    assert_eq!(segment_ef(40, 0, 0, 10), 10);
    assert_eq!(segment_ef(40, 1_000, 100_000, 0), 1, "a floor of 0 is 1");
}

/// A segment of `rows` rows around `query` (keys from 100,000), with its
/// graph, and the keys of the query's ten nearest: all of them in it.
fn near_segment(rows: usize, query: &[f32], rng: &mut Rng) -> (Arc<LoadedSegment>, HashSet<u64>) {
    let near: Vec<f32> = (0..rows * DIMS).map(|i| query[i % DIMS] + 0.05 * rng.vector(1)[0]).collect();
    let keys: Vec<u64> = (100_000..100_000 + rows as u64).collect();
    let bytes = insert::encode(SegmentId(2), Metric::L2, DIMS, &keys, &near);
    let binlog = InsertBinlog::decode("o", &bytes).unwrap().into_owned();
    let index = SegmentIndex::build(&binlog, HnswParams::default(), &AtomicBool::new(false)).unwrap();
    let mut exact: Vec<(f32, u64)> =
        near.chunks_exact(DIMS).zip(&keys).map(|(v, k)| (Metric::L2.distance(query, v), *k)).collect();
    exact.sort_by(|a, b| a.0.total_cmp(&b.0));
    (Arc::new(LoadedSegment::new(binlog, Some(index), Vec::new())), exact[..10].iter().map(|e| e.1).collect())
}

/// How many of `want` a search over `segments` returns in its first ten,
/// with widening at `widen_rank` (0: none).
fn found(segments: &[Arc<LoadedSegment>], query: &[f32], want: &HashSet<u64>, widen_rank: usize) -> usize {
    let options = SearchOptions { first_k: 40, segment_widen_rank: widen_rank, ..SearchOptions::default() };
    let search = Search::new(query.to_vec().into(), PageHits::default(), segments.to_vec(), options);
    search.map(Result::unwrap).take(10).filter(|h| want.contains(&h.key)).count()
}

/// A query whose ten nearest rows are all in a small segment: its share
/// of `ef` finds a few of them, the widening finds them all.
#[test]
fn a_segment_holding_the_nearest_rows_is_searched_wider() {
    let big = Arc::new(segment(1, 6000, 0, true, Vec::new()));
    let mut rng = Rng::new(9);
    let query = rng.vector(DIMS);
    let (small, want) = near_segment(600, &query, &mut rng);
    assert!(small.by_graph());
    assert_eq!(segment_ef(40, 600, 6600, SEGMENT_EF_FLOOR), 6, "the small segment's share");
    let segments = [big, small];
    assert_eq!(found(&segments, &query, &want, SEGMENT_WIDEN_RANK), 10);
    assert!(found(&segments, &query, &want, 0) <= 6, "without widening, the share bounds what the small segment gives");
}

/// A segment searched by brute force reads every row anyway: it keeps
/// the whole `ef`, not its share, and needs no widening.
#[test]
fn a_segment_searched_by_brute_force_keeps_the_whole_ef() {
    let big = Arc::new(segment(1, 6000, 0, true, Vec::new()));
    let mut rng = Rng::new(9);
    let query = rng.vector(DIMS);
    let (small, want) = near_segment(400, &query, &mut rng);
    assert!(!small.by_graph());
    assert_eq!(segment_ef(40, 400, 6400, SEGMENT_EF_FLOOR), SEGMENT_EF_FLOOR, "its share would be the floor");
    assert_eq!(found(&[big, small], &query, &want, 0), 10);
}

#[test]
fn row_bits_count_each_row_once() {
    let mut set = RowBits::new(130);
    assert!(set.is_empty() && !set.contains(0) && !set.contains(500));
    for row in [0, 63, 64, 129, 64] {
        set.insert(row);
    }
    assert_eq!(set.len(), 4);
    assert!(set.contains(63) && set.contains(64) && set.contains(129) && !set.contains(1));
    // Tombstones repeated across delta binlogs, or past the rows, count once or not at all.
    let seg = segment(1, 100, 0, false, vec![5, 5, 7, 100, 4000]);
    assert_eq!((seg.deleted_rows(), seg.live_rows()), (2, 98));
}

#[test]
fn merge_is_a_k_way_merge_by_distance() {
    let h = |s: u64, row: u32, d: f32| Hit { source: Source::Segment(SegmentId(s)), row, key: row as u64, distance: d };
    let lists = vec![vec![h(1, 0, 0.1), h(1, 1, 0.5)], vec![], vec![h(2, 0, 0.2), h(2, 1, 0.3), h(2, 2, 0.9)]];
    let merged: Vec<f32> = merge(lists.clone(), 10).iter().map(|h| h.distance).collect();
    assert_eq!(merged, vec![0.1, 0.2, 0.3, 0.5, 0.9]);
    assert_eq!(merge(lists, 2).len(), 2);
}

#[test]
fn every_row_is_offered_once_in_order_and_tombstones_never() {
    let segs = vec![
        Arc::new(segment(1, 5000, 0, true, (0..5000).step_by(10).collect())),
        Arc::new(segment(2, 500, 10_000, false, vec![1, 2, 3])),
    ];
    let mut rng = Rng::new(5);
    let pages = PageRows {
        dims: DIMS,
        keys: (20_000..20_050).collect(),
        vectors: rng.vector(50 * DIMS).into(),
        values: Vec::new(),
    };
    let query = rng.vector(DIMS);
    let options = SearchOptions {
        ef_search: 40,
        first_k: 10,
        max_approximate: usize::MAX,
        iterative: IterativeScan::Relaxed,
        ..SearchOptions::default()
    };
    let all: Vec<Hit> = Search::new(query.clone().into(), pages.hits(Metric::L2, Row::F32(&query)), segs, options)
        .map(Result::unwrap)
        .collect();

    let live = 5000 - 500 + 500 - 3 + 50;
    assert_eq!(all.len(), live, "every live row offered exactly once");
    let keys: HashSet<u64> = all.iter().map(|h| h.key).collect();
    assert_eq!(keys.len(), live, "no row twice");
    assert!(all.iter().all(|h| !(h.key < 5000 && h.key % 10 == 0)), "tombstoned rows never offered");
    assert!(!keys.contains(&10_001) && keys.contains(&10_000));

    // The first 10 are the exact top 10 (brute force over everything).
    let mut exact: Vec<(f32, u64)> = all.iter().map(|h| (h.distance, h.key)).collect();
    exact.sort_by(|a, b| a.0.total_cmp(&b.0));
    let first: HashSet<u64> = all.iter().take(10).map(|h| h.key).collect();
    let truth: HashSet<u64> = exact.iter().take(10).map(|(_, k)| *k).collect();
    assert!(first.intersection(&truth).count() >= 9, "recall@10 of the first round");
    assert!(all.windows(2).take(9).all(|w| w[0].distance <= w[1].distance), "first round sorted");
}

/// The exact truth: every live row's key by distance, `keep` applied.
fn brute_force(
    segs: &[Arc<LoadedSegment>],
    pages: &PageRows,
    query: &[f32],
    keep: &dyn Fn(u64) -> bool,
) -> Vec<(f32, u64)> {
    let mut all: Vec<(f32, u64)> = Vec::new();
    for s in segs {
        for row in (0..s.rows() as u32).filter(|r| !s.is_deleted(*r)) {
            all.push((
                Metric::L2.between(Row::F32(query), s.binlog().unwrap().vector(row as usize)),
                s.binlog().unwrap().keys()[row as usize],
            ));
        }
    }
    for (i, key) in pages.keys.iter().enumerate() {
        all.push((Metric::L2.between(Row::F32(query), pages.vectors.row(i, pages.dims)), *key));
    }
    all.retain(|(_, k)| keep(*k));
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    all
}

fn options(first_k: usize, max_approximate: usize, iterative: IterativeScan) -> SearchOptions {
    SearchOptions { first_k, max_approximate, iterative, ..SearchOptions::default() }
}

#[test]
fn past_max_approximate_the_search_goes_on_exactly() {
    let segs = vec![Arc::new(segment(1, 100, 0, false, vec![]))];
    let query = vec![0.0; DIMS];
    let mut search =
        Search::new(query.clone().into(), PageHits::default(), segs.clone(), options(7, 30, IterativeScan::Relaxed));
    let all: Vec<Hit> = search.by_ref().map(Result::unwrap).collect();
    assert_eq!(all.len(), 100, "the bound ends the approximate rounds, never the search");
    assert!(search.stats().exact && search.stats().rounds >= 1);
    assert!(search.exhausted(), "the exact tail ran out of rows: what follows is NULL rows");
    let truth = brute_force(&segs, &PageRows::new(Shape::f32(DIMS)), &query, &|_| true);
    let offered: HashSet<u64> = all.iter().take(30).map(|h| h.key).collect();
    let tail: Vec<u64> = all[30..].iter().map(|h| h.key).collect();
    let expected: Vec<u64> = truth.iter().map(|(_, k)| *k).filter(|k| !offered.contains(k)).collect();
    assert_eq!(tail, expected, "the exact tail is every remaining row, nearest first");
}

/// The reproduction: a filter keeping 2% of the rows, all of
/// them the farthest from the query. An approximate search alone offers
/// none of them; the exact tail finds exactly the rows a sequential scan
/// returns.
#[test]
fn a_selective_filter_gets_the_rows_a_sequential_scan_gets() {
    let segs = vec![Arc::new(segment(1, 6000, 0, true, vec![])), Arc::new(segment(2, 3000, 10_000, false, vec![]))];
    let pages = PageRows {
        dims: DIMS,
        keys: (20_000..20_200).collect(),
        vectors: Rng::new(9).vector(200 * DIMS).into(),
        values: Vec::new(),
    };
    let far = |k: u64| k.is_multiple_of(50);
    let query = vec![30.0; DIMS];
    for iterative in [IterativeScan::Relaxed, IterativeScan::Strict] {
        let search = Search::new(
            query.clone().into(),
            pages.hits(Metric::L2, Row::F32(&query)),
            segs.clone(),
            options(40, 20_000, iterative),
        );
        let got: Vec<u64> = search.map(Result::unwrap).filter(|h| far(h.key)).take(10).map(|h| h.key).collect();
        let truth: Vec<u64> = brute_force(&segs, &pages, &query, &far).iter().take(10).map(|(_, k)| *k).collect();
        assert_eq!(got.len(), 10, "{iterative:?}: the LIMIT is filled");
        let got: HashSet<u64> = got.into_iter().collect();
        assert!(truth.iter().filter(|k| got.contains(k)).count() >= 9, "{iterative:?}: the sequential scan's rows");
    }
}

#[test]
fn off_stops_after_the_first_round() {
    let segs = vec![Arc::new(segment(1, 5000, 0, true, vec![]))];
    let query = Rng::new(3).vector(DIMS);
    let mut search = Search::new(query.into(), PageHits::default(), segs, options(40, 20_000, IterativeScan::Off));
    assert_eq!(search.by_ref().count(), 40);
    assert!(!search.stats().exact);
    assert_eq!(search.stats().rounds, 1);
    assert!(!search.exhausted(), "4,960 rows were never offered");
}

#[test]
fn strict_order_never_goes_back() {
    let segs = vec![Arc::new(segment(1, 5000, 0, true, vec![])), Arc::new(segment(2, 800, 10_000, false, vec![]))];
    let query = Rng::new(4).vector(DIMS);
    let mut search = Search::new(query.into(), PageHits::default(), segs, options(10, 20_000, IterativeScan::Strict));
    let all: Vec<Hit> = search.by_ref().map(Result::unwrap).collect();
    assert!(all.windows(2).all(|w| w[0].distance <= w[1].distance), "non-decreasing");
    assert_eq!(all.len() + search.stats().dropped, 5800, "every row offered or dropped for its order");
    assert!(search.exhausted());
}

#[test]
fn an_unselective_search_stays_approximate() {
    // A LIMIT 10 with no filter takes the first round; nobody pays for
    // the exact tail.
    let segs = vec![Arc::new(segment(1, 20_000, 0, true, vec![]))];
    let query = Rng::new(6).vector(DIMS);
    let mut search = Search::new(query.into(), PageHits::default(), segs, SearchOptions::default());
    assert_eq!(search.by_ref().take(10).count(), 10);
    // The segment has codes: the 40 rows its walk kept are re-ranked.
    let stats = SearchStats { rounds: 1, exact: false, offered: 10, dropped: 0, reranked: 40, ..Default::default() };
    assert_eq!(search.stats(), stats);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
    /// Any filter, any sizes: a filtered LIMIT gets as many rows as a
    /// sequential scan, every live row is offered exactly once, and once
    /// the approximate rounds are over the rows come in exact order.
    #[test]
    fn a_filtered_limit_is_filled_like_a_sequential_scan(
        rows in 1usize..6000, in_pages in 0usize..300, modulus in 1u64..400, limit in 1usize..50,
        seed in 0u64..1000,
    ) {
        let deleted = (0..rows as u32).step_by(7).collect();
        let segs = vec![Arc::new(segment(seed + 1, rows, 0, rows > BRUTE_FORCE_MAX_ROWS, deleted))];
        let keys = (100_000..100_000 + in_pages as u64).collect();
        let pages = PageRows { dims: DIMS, keys, vectors: Rng::new(seed).vector(in_pages * DIMS).into(), values: Vec::new() };
        let query = Rng::new(seed + 7).vector(DIMS);
        let keep = |k: u64| k.is_multiple_of(modulus);
        let truth = brute_force(&segs, &pages, &query, &keep);
        // The search is lazy: the prefix a LIMIT takes is the prefix of all of it.
        let options = options(40, 2_000, IterativeScan::Relaxed);
        let page_hits = pages.hits(Metric::L2, Row::F32(&query));
        let hits: Vec<Hit> =
            Search::new(query.clone().into(), page_hits, segs.clone(), options).map(Result::unwrap).collect();
        proptest::prop_assert_eq!(hits.iter().filter(|h| keep(h.key)).take(limit).count(), truth.len().min(limit));
        let live = brute_force(&segs, &pages, &query, &|_| true).len();
        proptest::prop_assert_eq!(hits.len(), live, "every live row offered");
        proptest::prop_assert_eq!(hits.iter().map(|h| h.key).collect::<HashSet<_>>().len(), live, "none twice");
    }
}

#[test]
fn nan_distances_sort_last() {
    let pages = PageRows {
        dims: 2,
        keys: vec![1, 2, 3],
        vectors: vec![0.0, 0.0, 1.0, 0.0, 0.0, 1.0].into(),
        values: Vec::new(),
    };
    let query = vec![1.0, 0.0];
    let hits: Vec<u64> = Search::new(
        query.clone().into(),
        pages.hits(Metric::Cosine, Row::F32(&query)),
        vec![],
        SearchOptions::default(),
    )
    .map(|h| h.unwrap().key)
    .collect();
    assert_eq!(hits, vec![2, 3, 1]);
}

/// Segments of a multicolumn index: a `tenant` column (the key modulo
/// `tenants`) and a `bucket` column (the key modulo 10, NULL for every
/// seventh key), the same rule for page rows.
fn tenant(key: u64, tenants: u64) -> Value {
    Value::Int((key % tenants) as i64)
}

fn bucket(key: u64) -> Value {
    if key.is_multiple_of(7) { Value::Null } else { Value::Int((key % 10) as i64) }
}

fn with_columns(segment: LoadedSegment, tenants: u64) -> Arc<LoadedSegment> {
    let keys = segment.keys().to_vec();
    let column = |f: &dyn Fn(u64) -> Value| {
        Column::build(ColumnType::Int, &keys.iter().map(|k| f(*k)).collect::<Vec<_>>()).unwrap()
    };
    Arc::new(segment.with_columns(vec![column(&|k| tenant(k, tenants)), column(&bucket)]).unwrap())
}

/// Row by row, what a sequential scan's WHERE clause says of a key.
fn passes(filter: &Filter, key: u64, tenants: u64) -> bool {
    let values = [tenant(key, tenants), bucket(key)];
    let columns: Vec<Column> =
        values.iter().map(|v| Column::build(ColumnType::Int, std::slice::from_ref(v)).unwrap()).collect();
    filter.matches(&columns, 1).contains(0)
}

fn filtered_search(
    segs: &[Arc<LoadedSegment>],
    pages: &PageRows,
    query: &[f32],
    filter: &Filter,
    tenants: u64,
) -> Search {
    let page_bits = Bitset::from_fn(pages.keys.len(), |i| passes(filter, pages.keys[i], tenants));
    Search::new(query.to_vec().into(), pages.hits(Metric::L2, Row::F32(query)), segs.to_vec(), SearchOptions::default())
        .filtered(filter, page_bits)
}

fn eq(column: usize, value: i64) -> Key {
    Key { column, test: Test::Cmp(Cmp::Eq, Value::Int(value)) }
}

/// A filter keeping 1% of the rows: every segment measures its passing
/// rows (7% or fewer of its rows), so the first ten are the sequential
/// scan's ten, at their distances; the search offers every passing row
/// once and nothing else, and ends there.
#[test]
fn a_one_percent_filter_is_exact_and_offers_only_passing_rows() {
    let segs = vec![
        with_columns(segment(1, 6000, 0, true, (0..6000).step_by(3).collect()), 100),
        with_columns(segment(2, 3000, 10_000, true, vec![]), 100),
        with_columns(segment(3, 300, 20_000, false, vec![]), 100),
    ];
    let mut rng = Rng::new(4);
    let pages = PageRows {
        dims: DIMS,
        keys: (30_000..30_400).collect(),
        vectors: rng.vector(400 * DIMS).into(),
        values: Vec::new(),
    };
    for q in 0..20 {
        let query = rng.vector(DIMS);
        let filter = Filter { keys: vec![eq(0, q * 5)] };
        let mut search = filtered_search(&segs, &pages, &query, &filter, 100);
        let all: Vec<Hit> = search.by_ref().map(Result::unwrap).collect();
        let truth = brute_force(&segs, &pages, &query, &|k| passes(&filter, k, 100));
        assert_eq!(all.len(), truth.len(), "every passing row, once");
        assert!(all.iter().all(|h| passes(&filter, h.key, 100)), "no row the filter rejects");
        let first: Vec<(f32, u64)> = all.iter().take(10).map(|h| (h.distance, h.key)).collect();
        assert_eq!(first, truth[..10].to_vec(), "the first ten are exact");
        let stats = search.stats();
        assert_eq!((stats.matched, stats.walked_segments), (truth.len(), 0), "{stats:?}");
        assert!(stats.exact_segments >= 3 && search.exhausted(), "{stats:?}");
    }
}

/// Keys AND together; `IS NULL` and a range; a filter that passes half the
/// rows is walked (the graph steps through rejected rows) and still
/// returns only passing rows, near the sequential scan's.
#[test]
fn an_unselective_filter_walks_the_graph_and_keeps_recall() {
    let segs = vec![
        with_columns(segment(1, 8000, 0, true, (0..8000).step_by(11).collect()), 2),
        with_columns(segment(2, 4000, 10_000, true, vec![]), 2),
    ];
    let mut rng = Rng::new(6);
    let pages = PageRows {
        dims: DIMS,
        keys: (20_000..20_100).collect(),
        vectors: rng.vector(100 * DIMS).into(),
        values: Vec::new(),
    };
    let (mut hits, mut walked) = (0, 0);
    for _ in 0..30 {
        let query = rng.vector(DIMS);
        let filter = Filter { keys: vec![eq(0, 1), Key { column: 1, test: Test::IsNotNull }] };
        let mut search = filtered_search(&segs, &pages, &query, &filter, 2);
        let got: Vec<Hit> = search.by_ref().take(10).map(Result::unwrap).collect();
        assert!(got.iter().all(|h| passes(&filter, h.key, 2)));
        let truth: HashSet<u64> =
            brute_force(&segs, &pages, &query, &|k| passes(&filter, k, 2)).iter().take(10).map(|e| e.1).collect();
        hits += got.iter().filter(|h| truth.contains(&h.key)).count();
        walked += search.stats().walked_segments;
    }
    assert!(hits as f64 / 300.0 >= 0.9, "recall {}", hits as f64 / 300.0);
    assert!(walked >= 60, "both segments walked in every search: {walked}");

    // A range and IS NULL, through to the last passing row.
    let query = rng.vector(DIMS);
    for filter in [
        Filter { keys: vec![Key { column: 1, test: Test::Cmp(Cmp::Ge, Value::Int(8)) }] },
        Filter { keys: vec![Key { column: 1, test: Test::IsNull }, eq(0, 0)] },
    ] {
        let all: Vec<u64> = filtered_search(&segs, &pages, &query, &filter, 2).map(|h| h.unwrap().key).collect();
        let truth = brute_force(&segs, &pages, &query, &|k| passes(&filter, k, 2));
        assert_eq!(all.iter().copied().collect::<HashSet<_>>(), truth.iter().map(|e| e.1).collect(), "{filter:?}");
        assert_eq!(all.len(), truth.len());
    }
}

/// A segment whose statistics exclude the filter is not searched; a
/// filter nothing passes ends the search at once.
#[test]
fn segments_the_statistics_exclude_cost_nothing() {
    let segs = vec![
        with_columns(segment(1, 2000, 0, true, vec![]), 1000),
        with_columns(segment(2, 2000, 10_000, true, vec![]), 1000),
    ];
    let pages = PageRows::new(Shape::f32(DIMS));
    let query = vec![0.5; DIMS];
    // Tenants 0..1000 in both: tenant 5000 is outside both segments' ranges.
    let filter = Filter { keys: vec![eq(0, 5000)] };
    let mut search = filtered_search(&segs, &pages, &query, &filter, 1000);
    assert!(search.next().is_none());
    let stats = search.stats();
    assert_eq!((stats.skipped, stats.matched, stats.exact_segments + stats.walked_segments), (2, 0, 0), "{stats:?}");
    // Tenant 7: both segments hold two rows of it.
    let filter = Filter { keys: vec![eq(0, 7)] };
    let got: Vec<u64> = filtered_search(&segs, &pages, &query, &filter, 1000).map(|h| h.unwrap().key).collect();
    assert_eq!(got.iter().copied().collect::<HashSet<_>>(), HashSet::from([7, 1007, 10_007, 11_007]));
}

/// A filter keeping all of one segment (as a clustered segment holds one
/// tenant's rows) but 1% of the rows searched is answered exactly.
#[test]
fn a_filter_keeping_one_percent_of_the_index_is_exact_where_it_keeps_a_whole_segment() {
    // Tenant = key: the segment holds keys 0..1000, the pages 100,000 more.
    let segs = vec![with_columns(segment(1, 1000, 0, true, vec![]), u64::MAX)];
    let mut rng = Rng::new(8);
    let pages = PageRows {
        dims: DIMS,
        keys: (100_000..200_000).collect(),
        vectors: rng.vector(100_000 * DIMS).into(),
        values: Vec::new(),
    };
    let query = rng.vector(DIMS);
    let filter = Filter { keys: vec![Key { column: 0, test: Test::Cmp(Cmp::Lt, Value::Int(1000)) }] };
    let mut search = filtered_search(&segs, &pages, &query, &filter, u64::MAX);
    let first: Vec<(f32, u64)> = search.by_ref().take(10).map(|h| h.unwrap()).map(|h| (h.distance, h.key)).collect();
    let truth = brute_force(&segs, &pages, &query, &|k| k < 1000);
    assert_eq!(first, truth[..10].to_vec());
    let stats = search.stats();
    assert_eq!((stats.matched, stats.exact_segments, stats.walked_segments), (1000, 1, 0), "{stats:?}");
}
