//! A flushed segment as a search reads it: its rows and graph mapped in
//! place from the cache's files, its tombstones a bit a row.

use crate::cache::ObjectBytes;
use crate::element::{Row, Vectors};
use crate::format::index::IndexFile;
use crate::format::insert::InsertBinlog;
use crate::format::{Check, FormatError};
use crate::graph::FlatGraph;
use crate::hnsw::SegmentIndex;
use crate::quant::Codes;
use crate::segment::SegmentId;

use super::hits::{Hit, RowBits, Source, TopK};
use crate::error::{SqlError, SqlState};

/// Up to this many rows a segment is searched by brute force, and flushed
/// without a graph. Measured at 128 dimensions (`crates/milvus-core/benches/segment.rs`, group
/// `one_query_top10`, docs/benchmarks.md): the flat graph at ef 40 and
/// brute force cost about the same per top-10 query at 512 rows (9 and
/// 11 µs), the graph 8 times less at 4,096 (16 and 124 µs). (Against
/// hnsw_rs' own search the crossover was 4,096.)
pub const BRUTE_FORCE_MAX_ROWS: usize = 512;

/// A flushed segment ready to search: its rows, graph and tombstones.
///
/// Rows and graph are read in place from the bytes the segment keeps
/// (`files`): its insert binlog and index file, memory-mapped from the
/// local cache and shared by every backend of the server, so opening a
/// segment costs two maps and two header checks, and a backend holds
/// nothing of it but its tombstones.
pub struct LoadedSegment {
    pub id: SegmentId,
    /// Borrow from `files`: declared before it, so dropped before it.
    binlog: InsertBinlog<'static>,
    graph: Option<FlatGraph<'static>>,
    codes: Option<Codes<'static>>,
    tombstones: RowBits,
    files: Vec<ObjectBytes>,
}

/// Why a segment's files do not make a segment.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error("index file {object} does not match its segment: {message}")]
    Mismatch { object: String, message: String },
}

/// Files that do not make a segment are damage.
impl SqlError for OpenError {
    fn sqlstate(&self) -> SqlState {
        SqlState::IndexCorrupted
    }
}

impl LoadedSegment {
    /// A segment over its insert binlog and its index file (version 2,
    /// or none), decoded in place as `check` says (`Check::Header` for
    /// files of the cache, verified when they entered it). `tombstones`
    /// may be unsorted and repeated (the union of delta binlogs);
    /// positions past the segment's rows are ignored.
    pub fn open(
        (binlog_name, binlog_bytes): (&str, ObjectBytes),
        index: Option<(String, ObjectBytes)>,
        tombstones: Vec<u32>,
        check: Check,
    ) -> Result<Self, OpenError> {
        // SAFETY: what is decoded from these slices lives in the returned
        // segment, beside the bytes it borrows, which the segment owns and
        // never changes; their heap buffers or mappings stay where they are
        // when the segment moves, and go only after the borrowers (field
        // order). No method hands out a borrow longer than `&self`.
        let extend =
            |bytes: &ObjectBytes| unsafe { std::slice::from_raw_parts::<'static, u8>(bytes.as_ptr(), bytes.len()) };
        let binlog = InsertBinlog::decode_checked(binlog_name, extend(&binlog_bytes), check)?;
        let mut files = vec![binlog_bytes];
        let (graph, codes) = match index {
            Some((name, bytes)) => {
                let mismatch = |message: String| OpenError::Mismatch { object: name.clone(), message };
                let IndexFile::Flat { segment, metric, graph, codes } =
                    IndexFile::decode(&name, extend(&bytes), check)?
                else {
                    return Err(mismatch("an hnsw_rs dump (version 1) must be converted before it is opened".into()));
                };
                if (segment, metric, graph.rows()) != (binlog.segment, binlog.metric, binlog.len()) {
                    return Err(mismatch(format!(
                        "segment {segment}, {metric:?}, {} rows against the binlog's segment {}, {:?}, {} rows",
                        graph.rows(),
                        binlog.segment,
                        binlog.metric,
                        binlog.len()
                    )));
                }
                if let Some(codes) = codes.as_ref().filter(|c| (c.rows(), c.dims()) != (binlog.len(), binlog.dims)) {
                    return Err(mismatch(format!(
                        "codes of {} rows of {} dimensions against the binlog's {} rows of {}",
                        codes.rows(),
                        codes.dims(),
                        binlog.len(),
                        binlog.dims
                    )));
                }
                files.push(bytes);
                (Some(graph), codes)
            }
            None => (None, None),
        };
        Ok(Self::with_parts(binlog, graph, codes, tombstones, files))
    }

    /// A segment held in memory: a binlog, and the graph an index built
    /// (tests, benches, and compaction's inputs need no file).
    pub fn new(binlog: InsertBinlog<'static>, index: Option<SegmentIndex>, tombstones: Vec<u32>) -> Self {
        let (graph, codes) = index.map_or((None, None), |i| (Some(i.to_flat()), i.codes().cloned()));
        Self::with_parts(binlog, graph, codes, tombstones, Vec::new())
    }

    fn with_parts(
        binlog: InsertBinlog<'static>,
        graph: Option<FlatGraph<'static>>,
        codes: Option<Codes<'static>>,
        tombstones: Vec<u32>,
        files: Vec<ObjectBytes>,
    ) -> Self {
        let mut set = RowBits::new(binlog.len());
        for row in tombstones.into_iter().filter(|r| (*r as usize) < binlog.len()) {
            set.insert(row);
        }
        LoadedSegment { id: binlog.segment, binlog, graph, codes, tombstones: set, files }
    }

    /// Whether rows and graph are read in place from mapped files.
    pub fn is_mapped(&self) -> bool {
        !self.files.is_empty()
            && self.files.iter().all(|f| matches!(f, ObjectBytes::Mapped { .. }))
            && self.binlog.is_borrowed()
    }

    pub fn is_deleted(&self, row: u32) -> bool {
        self.tombstones.contains(row)
    }

    pub fn rows(&self) -> usize {
        self.binlog.len()
    }

    pub fn live_rows(&self) -> usize {
        self.binlog.len() - self.tombstones.len()
    }

    pub fn binlog(&self) -> &InsertBinlog<'_> {
        &self.binlog
    }

    /// The segment's graph, if it has one.
    pub fn graph(&self) -> Option<&FlatGraph<'_>> {
        self.graph.as_ref()
    }

    /// Rows tombstoned.
    pub fn deleted_rows(&self) -> usize {
        self.tombstones.len()
    }

    /// Calls `f(row, distance to query)` for each of `rows`. The element
    /// type is matched once, not once a row (as the growing scan's pages
    /// are: a `Row` built and matched a row cost more than a 128-d
    /// distance).
    pub(super) fn distances(&self, query: Row<'_>, rows: impl Iterator<Item = u32>, mut f: impl FnMut(u32, f32)) {
        let (metric, dims) = (self.binlog.metric, self.binlog.dims);
        let at = |row: u32, stride: usize| row as usize * stride..(row as usize + 1) * stride;
        match (query, self.binlog.vectors()) {
            (Row::F32(q), Vectors::F32(v)) => rows.for_each(|r| f(r, metric.distance(q, &v[at(r, dims)]))),
            (Row::F16(q), Vectors::F16(v)) => rows.for_each(|r| f(r, metric.distance_f16(q, &v[at(r, dims)]))),
            (Row::Bit { bits, .. }, Vectors::Bit(v)) => {
                let stride = crate::element::Element::Bit.bytes(dims);
                rows.for_each(|r| f(r, metric.distance_bits(bits, &v[at(r, stride)])))
            }
            _ => rows.for_each(|r| f(r, metric.between(query, self.binlog.vector(r as usize)))),
        }
    }

    /// Whether [`search`](Self::search) walks the graph; if not, it reads
    /// every row, and its cost does not depend on `ef`.
    pub fn by_graph(&self) -> bool {
        self.graph.is_some() && self.rows() > BRUTE_FORCE_MAX_ROWS
    }

    /// The segment's codes, if its index file has them.
    pub fn codes(&self) -> Option<&Codes<'_>> {
        self.codes.as_ref()
    }

    /// The `k` nearest live rows not skipped, by exact distance. With
    /// codes, the graph is walked by the codes' estimates, and the `ef`
    /// rows it keeps are re-ranked by their exact distances. Re-ranking more
    /// (walking with `ef` at least 20, or adding the nearest rows the walk
    /// computed but did not keep) mends recall at `ef` 10 on one segment
    /// but cost a stream's layout, whose segments get small shares of `ef`,
    /// 15-50% of its QPS for no recall (`crates/milvus-core/benches/cross_segment.rs`).
    pub fn search(&self, query: Row<'_>, k: usize, ef_search: usize, skip: &dyn Fn(u32) -> bool) -> Vec<Hit> {
        self.search_counted(query, k, ef_search, skip).0
    }

    /// [`Self::search`], and the rows re-ranked by their exact distances
    /// after a walk by the codes (0 without codes).
    pub fn search_counted(
        &self,
        query: Row<'_>,
        k: usize,
        ef_search: usize,
        skip: &dyn Fn(u32) -> bool,
    ) -> (Vec<Hit>, usize) {
        let excluded = |row: u32| self.is_deleted(row) || skip(row);
        let mut reranked = 0;
        if let Some(graph) = self.graph.as_ref().filter(|_| self.by_graph()) {
            let found = match &self.codes {
                Some(codes) => {
                    let prepared = codes.prepare(query);
                    let estimate = |row: u32| codes.distance(&prepared, row);
                    let pool =
                        graph.search_with(&estimate, &|row| codes.prefetch(row), ef_search, ef_search, &excluded);
                    let mut exact: Vec<(f32, u32)> = Vec::with_capacity(pool.len());
                    pool.iter().for_each(|(_, row)| self.binlog.vector(*row as usize).prefetch());
                    self.distances(query, pool.iter().map(|(_, row)| *row), |row, d| exact.push((d, row)));
                    reranked = exact.len();
                    exact.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                    exact.truncate(k);
                    exact
                }
                None => {
                    let vector = |row: u32| self.binlog.vector(row as usize);
                    graph.search(self.binlog.metric, query, &vector, k, ef_search, &excluded)
                }
            };
            // A graph filtered this hard can come back short while rows
            // remain; then brute force keeps the iteration complete.
            if found.len() >= k {
                let source = Source::Segment(self.id);
                let hits = found
                    .into_iter()
                    .map(|(distance, row)| Hit { source, row, key: self.binlog.keys()[row as usize], distance })
                    .collect();
                return (hits, reranked);
            }
        }
        let (mut top, source, keys) = (TopK::new(k), Source::Segment(self.id), self.binlog.keys());
        let rows = (0..self.rows() as u32).filter(|r| !excluded(*r));
        self.distances(query, rows, |row, distance| top.push(Hit { source, row, key: keys[row as usize], distance }));
        (top.into_sorted(), reranked)
    }
}
