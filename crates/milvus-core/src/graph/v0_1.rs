//! The reader of 0.1's index files (version 1): each holds hnsw_rs' dump
//! of the segment's graph, which hnsw_rs reloads once so that its links
//! are read off as flat arrays ([`SegmentIndex::from_hnsw_dump`]); the
//! segment then searches, merges and stores like any other. hnsw_rs is
//! kept for that alone, and to write such files in tests
//! ([`hnsw_rs_dump_file`]).
//!
//! 0.1 reduced inner product to L2 (row `x` indexed as `[x, sqrt(M² -
//! |x|²)]`): distances from a query to rows order the same, so those
//! graphs are searched as they were built.

use std::path::Path;

use hnsw_rs::api::AnnT;
use hnsw_rs::hnswio::{HnswIo, ReloadOptions};
use hnsw_rs::prelude::{Distance, Hnsw};

use super::segment::{HnswParams, IndexError, SegmentIndex, insertion_order};
use crate::distance::Metric;
use crate::format::Check;
use crate::format::index::{self, IndexFile};
use crate::format::insert::InsertBinlog;
use crate::graph::{FlatGraph, NodeLinks};
use crate::segment::SegmentId;

impl SegmentIndex {
    /// Converts the graph of a version 1 index file (hnsw_rs' dump): the
    /// dump is unpacked into `dir`, reloaded by hnsw_rs, read off as flat
    /// arrays (each row's neighbours on each of its layers, an entry on the
    /// top layer), and `dir` removed. Errors for a version 2 file, which
    /// needs no conversion.
    pub fn from_hnsw_dump(object: &str, bytes: &[u8], metric: Metric, dir: &Path) -> Result<Self, IndexError> {
        let IndexFile::HnswDump { segment, rows: file_rows, graph, data } =
            IndexFile::decode(object, bytes, Check::Full)?
        else {
            return Err(IndexError::Io { segment: SegmentId(0), message: format!("{object} is not an hnsw_rs dump") });
        };
        let io_err = |message: String| IndexError::Io { segment, message };
        std::fs::create_dir_all(dir).map_err(|e| io_err(format!("cannot create {}: {e}", dir.display())))?;
        let converted = (|| {
            for (ext, body) in [("graph", graph), ("data", data)] {
                let path = dir.join(format!("segment.hnsw.{ext}"));
                std::fs::write(&path, body).map_err(|e| io_err(format!("cannot write {}: {e}", path.display())))?;
            }
            let mut io = HnswIo::new_with_options(dir, "segment", ReloadOptions::new(true));
            let reloaded = match metric {
                Metric::L2 | Metric::InnerProduct => flat_of::<1>(&mut io),
                Metric::Cosine => flat_of::<3>(&mut io),
                Metric::L1 => flat_of::<4>(&mut io),
                // 0.1, which wrote these files, had no bit indexes.
                Metric::Hamming | Metric::Jaccard => Err(format!("0.1 wrote no {metric:?} graphs")),
            };
            reloaded.map_err(|e| io_err(format!("hnsw_rs could not reload it: {e}")))
        })();
        // The data file may still be mapped by the dropped loader's pages;
        // unlinking a mapped file is safe.
        let _ = std::fs::remove_dir_all(dir);
        let graph = converted?;
        if graph.rows() as u64 != file_rows {
            return Err(io_err(format!("header says {file_rows} rows, graph has {}", graph.rows())));
        }
        Ok(SegmentIndex { segment, metric, graph, codes: None })
    }
}

/// hnsw_rs' distance for 0.1's graphs, by metric code in the type (hnsw_rs
/// only memory-maps a reloaded graph's data for a distance that is
/// `Default`): 1 = L2 (0.1's inner-product graphs too, over augmented
/// rows), 3 = cosine, 4 = L1.
#[derive(Debug, Clone, Copy, Default)]
struct SimdDistance<const CODE: u8>;

impl<const CODE: u8> Distance<f32> for SimdDistance<CODE> {
    #[inline]
    fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
        let metric = const {
            match CODE {
                1 => Metric::L2,
                4 => Metric::L1,
                _ => Metric::Cosine,
            }
        };
        let d = metric.distance(a, b);
        if d.is_nan() { f32::MAX } else { d }
    }
}

/// Reloads a dumped graph with hnsw_rs and reads it off as flat arrays.
fn flat_of<const CODE: u8>(io: &mut HnswIo) -> Result<FlatGraph<'static>, String> {
    let hnsw: Hnsw<'_, f32, SimdDistance<CODE>> = io.load_hnsw().map_err(|e| e.to_string())?;
    Ok(flat_from_hnsw_rs(&hnsw))
}

/// An hnsw_rs graph as flat arrays: each row's neighbours on each of its
/// layers, and an entry on the top layer.
fn flat_from_hnsw_rs<D: Distance<f32> + Send + Sync>(h: &Hnsw<'_, f32, D>) -> FlatGraph<'static> {
    let rows = h.get_nb_point();
    let indexation = h.get_point_indexation();
    let top = indexation.get_max_level_observed();
    let mut nodes: Vec<NodeLinks> = vec![Vec::new(); rows];
    let mut entry = None;
    for point in indexation {
        let (row, level) = (point.get_origin_id(), point.get_point_id().0);
        if row >= rows {
            continue;
        }
        let layers = point.get_neighborhood_id().into_iter().take(level as usize + 1);
        nodes[row] = layers.map(|layer| layer.into_iter().map(|n| n.d_id as u32).collect()).collect();
        if level == top && entry.is_none() {
            entry = Some(row as u32);
        }
    }
    FlatGraph::from_nodes(&nodes, entry.unwrap_or(0))
}

/// A version 1 index file of `binlog`'s rows, as 0.1 wrote it: hnsw_rs'
/// graph (over augmented rows under L2 for inner product), dumped through
/// two files in `scratch` (removed afterwards). Only for tests and benches
/// of reading files an upgraded server finds in storage.
pub fn hnsw_rs_dump_file(binlog: &InsertBinlog<'_>, params: HnswParams, scratch: &Path) -> Result<Vec<u8>, IndexError> {
    let segment = binlog.segment;
    let io_err = |message: String| IndexError::Io { segment, message };
    let Some(rows) = binlog.vectors().to_f32() else {
        return Err(IndexError::Params("0.1 wrote no graphs of bits".into()));
    };
    let dir = tempfile::Builder::new()
        .prefix("milvus-dump-")
        .tempdir_in(scratch)
        .map_err(|e| io_err(format!("cannot create a scratch directory in {}: {e}", scratch.display())))?;
    let mut dims = binlog.dims;
    let rows = if binlog.metric == Metric::InnerProduct {
        dims += 1;
        augment_for_inner_product(binlog.dims, &rows)
    } else {
        rows.into_owned()
    };
    let base = match binlog.metric {
        Metric::L2 | Metric::InnerProduct => dump(&hnsw_rs_graph::<1>(dims, &rows, params), dir.path()),
        Metric::Cosine => dump(&hnsw_rs_graph::<3>(dims, &rows, params), dir.path()),
        Metric::L1 => dump(&hnsw_rs_graph::<4>(dims, &rows, params), dir.path()),
        Metric::Hamming | Metric::Jaccard => unreachable!("bits returned above"),
    }
    .map_err(|e| io_err(format!("dump failed: {e}")))?;
    let read = |ext: &str| {
        let path = dir.path().join(format!("{base}.hnsw.{ext}"));
        std::fs::read(&path).map_err(|e| io_err(format!("cannot read {}: {e}", path.display())))
    };
    Ok(index::encode_hnsw_dump(segment, binlog.len() as u64, &read("graph")?, &read("data")?))
}

/// hnsw_rs' graph of `rows` (row-major, `dims` each), inserted on one
/// thread in the shuffled order.
fn hnsw_rs_graph<const CODE: u8>(
    dims: usize,
    rows: &[f32],
    params: HnswParams,
) -> Hnsw<'static, f32, SimdDistance<CODE>> {
    let count = rows.len() / dims;
    let hnsw = Hnsw::new(params.m, count.max(1), 16, params.ef_construction, SimdDistance::<CODE>);
    for row in insertion_order(count) {
        let row = row as usize;
        hnsw.insert((&rows[row * dims..(row + 1) * dims], row));
    }
    hnsw
}

fn dump<D: Distance<f32> + Default + Send + Sync>(hnsw: &Hnsw<'static, f32, D>, dir: &Path) -> Result<String, String> {
    hnsw.file_dump(dir, "segment").map_err(|e| e.to_string())
}

/// `[x, sqrt(M² - |x|²)]` for every row `x` (row-major, `dims` each), with
/// `M` the largest norm: 0.1's inner-product-to-L2 reduction.
fn augment_for_inner_product(dims: usize, vectors: &[f32]) -> Vec<f32> {
    let norms2: Vec<f32> = vectors.chunks_exact(dims).map(|x| crate::distance::inner_product(x, x)).collect();
    let max2 = norms2.iter().copied().fold(0.0f32, f32::max);
    let mut out = Vec::with_capacity(vectors.len() + norms2.len());
    for (x, n2) in vectors.chunks_exact(dims).zip(norms2) {
        out.extend_from_slice(x);
        out.push((max2 - n2).max(0.0).sqrt());
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::element::Row;
    use crate::format::insert;
    use crate::graph::segment::tests::{binlog_bytes, recall};

    #[test]
    fn files_of_0_1_are_converted_to_flat_graphs() {
        for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine, Metric::L1] {
            let bytes = binlog_bytes(3000, 16, metric);
            let b = InsertBinlog::decode("o", &bytes).unwrap();
            let scratch = tempfile::tempdir().unwrap();
            let file = hnsw_rs_dump_file(&b, HnswParams::default(), scratch.path()).unwrap();
            assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0, "dump files cleaned up");
            let cache = tempfile::tempdir().unwrap();
            let loaded = SegmentIndex::from_hnsw_dump("seg/3/index", &file, metric, &cache.path().join("3")).unwrap();
            assert!(!cache.path().join("3").exists(), "the unpacked dump is removed once converted");
            assert_eq!((loaded.segment, loaded.rows()), (SegmentId(3), 3000));
            assert!(!loaded.to_flat().is_reusable(), "{metric:?}: hnsw_rs' graph is rebuilt by a merge");
            let r = recall(&loaded, &b, &|_| false);
            assert!(r >= 0.9, "{metric:?}: 0.1's graph searched with the metric: recall {r}");
        }
        let bits = insert::encode(SegmentId(3), Metric::Hamming, 64, &[1], Row::Bit { len: 64, bits: &[0; 8] });
        let b = InsertBinlog::decode("o", &bits).unwrap();
        assert!(hnsw_rs_dump_file(&b, HnswParams::default(), std::path::Path::new("/")).is_err(), "0.1 had no bits");
    }

    #[test]
    fn a_corrupt_or_new_format_file_is_not_reloaded_as_a_dump() {
        let bytes = binlog_bytes(100, 4, Metric::L2);
        let b = InsertBinlog::decode("o", &bytes).unwrap();
        let index = SegmentIndex::build(&b, HnswParams::default(), &AtomicBool::new(false)).unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let mut file = hnsw_rs_dump_file(&b, HnswParams::default(), scratch.path()).unwrap();
        let last = file.len() - 1;
        file[last] ^= 0x40;
        let e = SegmentIndex::from_hnsw_dump("db/1/seg/3/index-1.hnsw", &file, Metric::L2, &scratch.path().join("x"));
        let text = e.err().unwrap().to_string();
        assert!(text.starts_with("object db/1/seg/3/index-1.hnsw: body checksum mismatch"), "{text}");
        let e = SegmentIndex::from_hnsw_dump("v2", &index.to_index_file(), Metric::L2, &scratch.path().join("x"));
        assert_eq!(e.err().unwrap().to_string(), "index file of segment 0: v2 is not an hnsw_rs dump");
    }
}
