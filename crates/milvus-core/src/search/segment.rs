//! A flushed segment as a search reads it: its rows and graph mapped in
//! place from the cache's files (or its rows read by range from storage:
//! [`super::ranged`]), its tombstones a bit a row. A segment of sparse rows
//! has an inverted index instead of a graph (`crate::inverted`), whose
//! answers are exact.

use std::borrow::Cow;
use std::sync::Arc;

use crate::cache::{CacheError, ObjectBytes};
use crate::distance::Metric;
use crate::element::{Element, Row, Vectors};
use crate::filter::{Column, ColumnStats};
use crate::format::index::IndexFile;
use crate::format::insert::InsertBinlog;
use crate::format::ranges::RowRanges;
use crate::format::{Check, FormatError};
use crate::graph::FlatGraph;
use crate::graph::segment::SegmentIndex;
use crate::inverted::Inverted;
use crate::quant::Codes;
use crate::segment::SegmentId;
use crate::storage::Storage;

use super::hits::{Hit, RowBits, Source, TopK};
use super::ranged::{RangeReads, StoredRows};
use crate::error::{SqlError, SqlState};

/// Up to this many rows a segment is searched by brute force, and flushed
/// without a graph. Measured at 128 dimensions (`crates/milvus-core/benches/segment.rs`, group
/// `one_query_top10`; docs/benchmarks.md, "Constants and the measurements
/// behind them"): the flat graph at ef 40 and brute force cost about the
/// same per top-10 query at 512 rows, and the graph far less from a few
/// thousand.
pub const BRUTE_FORCE_MAX_ROWS: usize = 512;

/// A flushed segment ready to search: its rows, graph and tombstones.
///
/// Rows and graph are read in place from the bytes the segment keeps
/// (`files`): its insert binlog and index file, memory-mapped from the
/// local cache and shared by every backend of the server, so opening a
/// segment costs two maps and two header checks, and a backend holds
/// nothing of it but its tombstones. A segment whose binlog the cache has
/// no room for keeps the binlog's read index there instead, and reads the
/// rows it needs by range from storage.
pub struct LoadedSegment {
    pub id: SegmentId,
    /// Borrow from `files`: declared before it, so dropped before it.
    rows: SegmentRows,
    graph: Option<FlatGraph<'static>>,
    codes: Option<Codes<'static>>,
    inverted: Option<Inverted<'static>>,
    tombstones: RowBits,
    /// The filter columns of a multicolumn index, row for row, and what
    /// their statistics say; none for an index of a vector alone.
    columns: Vec<Column>,
    stats: Vec<ColumnStats>,
    files: Vec<ObjectBytes>,
}

/// Where a segment's rows are read.
enum SegmentRows {
    /// The insert binlog, mapped or in memory.
    Binlog(InsertBinlog<'static>),
    /// Storage, by range.
    Stored(StoredRows),
}

/// A segment's rows as [`LoadedSegment::open`] takes them.
pub enum RowsFrom<'n> {
    /// The insert binlog `name`'s bytes.
    Binlog(&'n str, ObjectBytes),
    /// The read index (`crate::format::ranges`) of the binlog `key` in
    /// `storage`, cached as `name`: the rows are read by range.
    Stored { name: &'n str, bytes: ObjectBytes, storage: Arc<Storage>, key: String },
}

/// What searching a segment read beyond its mapped files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentReads {
    /// Rows re-ranked by their exact distances after a walk by the codes.
    pub reranked: usize,
    /// Rows read by range from storage.
    pub by_range: RangeReads,
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
    /// A segment over its rows (an insert binlog, or its read index) and
    /// its index file (version 2, an inverted index of sparse rows, or
    /// none), decoded in place as `check`
    /// says (`Check::Header` for files of the cache, verified when they
    /// entered it). `tombstones` may be unsorted and repeated (the union
    /// of delta binlogs); positions past the segment's rows are ignored.
    pub fn open(
        rows: RowsFrom<'_>,
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
        let (rows, rows_file) = match rows {
            RowsFrom::Binlog(name, bytes) => {
                (SegmentRows::Binlog(InsertBinlog::decode_checked(name, extend(&bytes), check)?), bytes)
            }
            RowsFrom::Stored { name, bytes, storage, key } => {
                let ranges = RowRanges::decode(name, extend(&bytes), check)?;
                (SegmentRows::Stored(StoredRows::new(ranges, storage, key)), bytes)
            }
        };
        let (id, metric, len, dims) = rows.describe();
        let mut files = vec![rows_file];
        let (graph, codes) = match index {
            Some((name, bytes)) if bytes.starts_with(crate::format::inverted::MAGIC) => {
                let (segment, inverted) = crate::format::inverted::decode(&name, extend(&bytes), check)?;
                if (segment, inverted.metric(), inverted.rows()) != (id, metric, len) {
                    return Err(OpenError::Mismatch {
                        object: name,
                        message: format!(
                            "segment {segment}, {:?}, {} rows against the binlog's segment {id}, {metric:?}, {len} rows",
                            inverted.metric(),
                            inverted.rows(),
                        ),
                    });
                }
                files.push(bytes);
                let mut segment = Self::with_parts(rows, None, None, tombstones, files);
                segment.inverted = Some(inverted);
                return Ok(segment);
            }
            Some((name, bytes)) => {
                let mismatch = |message: String| OpenError::Mismatch { object: name.clone(), message };
                let IndexFile::Flat { segment, metric: index_metric, graph, codes } =
                    IndexFile::decode(&name, extend(&bytes), check)?
                else {
                    return Err(mismatch("an hnsw_rs dump (version 1) must be converted before it is opened".into()));
                };
                if (segment, index_metric, graph.rows()) != (id, metric, len) {
                    return Err(mismatch(format!(
                        "segment {segment}, {index_metric:?}, {} rows against the binlog's segment {id}, \
                         {metric:?}, {len} rows",
                        graph.rows(),
                    )));
                }
                if let Some(codes) = codes.as_ref().filter(|c| (c.rows(), c.dims()) != (len, dims)) {
                    return Err(mismatch(format!(
                        "codes of {} rows of {} dimensions against the binlog's {len} rows of {dims}",
                        codes.rows(),
                        codes.dims(),
                    )));
                }
                files.push(bytes);
                (Some(graph), codes)
            }
            None => (None, None),
        };
        Ok(Self::with_parts(rows, graph, codes, tombstones, files))
    }

    /// A segment held in memory: a binlog, and the graph an index built
    /// (tests, benches, and compaction's inputs need no file).
    pub fn new(binlog: InsertBinlog<'static>, index: Option<SegmentIndex>, tombstones: Vec<u32>) -> Self {
        let (graph, codes) = index.map_or((None, None), |i| (Some(i.to_flat()), i.codes().cloned()));
        Self::with_parts(SegmentRows::Binlog(binlog), graph, codes, tombstones, Vec::new())
    }

    fn with_parts(
        rows: SegmentRows,
        graph: Option<FlatGraph<'static>>,
        codes: Option<Codes<'static>>,
        tombstones: Vec<u32>,
        files: Vec<ObjectBytes>,
    ) -> Self {
        let (id, _, len, _) = rows.describe();
        let mut set = RowBits::new(len);
        for row in tombstones.into_iter().filter(|r| (*r as usize) < len) {
            set.insert(row);
        }
        LoadedSegment {
            id,
            rows,
            graph,
            codes,
            inverted: None,
            tombstones: set,
            columns: Vec::new(),
            stats: Vec::new(),
            files,
        }
    }

    /// The segment with its filter columns (those of a multicolumn index,
    /// in the index's order), which must hold a value for each row.
    pub fn with_columns(mut self, columns: Vec<Column>) -> Result<Self, OpenError> {
        if let Some((i, c)) = columns.iter().enumerate().find(|(_, c)| c.rows() != self.rows()) {
            return Err(OpenError::Mismatch {
                object: format!("segment {}", self.id),
                message: format!(
                    "filter column {} holds {} rows against the binlog's {}",
                    i + 1,
                    c.rows(),
                    self.rows()
                ),
            });
        }
        self.stats = columns.iter().map(Column::stats).collect();
        self.columns = columns;
        Ok(self)
    }

    /// Its filter columns, one per filter column of the index.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Its filter columns' statistics.
    pub fn column_stats(&self) -> &[ColumnStats] {
        &self.stats
    }

    /// Whether rows and graph are read in place from mapped files (or the
    /// rows by range from storage, through a mapped read index).
    pub fn is_mapped(&self) -> bool {
        !self.files.is_empty()
            && self.files.iter().all(|f| matches!(f, ObjectBytes::Mapped { .. }))
            && match &self.rows {
                SegmentRows::Binlog(binlog) => binlog.is_borrowed(),
                SegmentRows::Stored(stored) => stored.ranges.is_borrowed(),
            }
    }

    /// Whether its rows are read by range from storage.
    pub fn reads_by_range(&self) -> bool {
        matches!(self.rows, SegmentRows::Stored(_))
    }

    pub fn is_deleted(&self, row: u32) -> bool {
        self.tombstones.contains(row)
    }

    pub fn rows(&self) -> usize {
        self.keys().len()
    }

    pub fn live_rows(&self) -> usize {
        self.rows() - self.tombstones.len()
    }

    /// Each row's key (its heap TID).
    pub fn keys(&self) -> &[u64] {
        match &self.rows {
            SegmentRows::Binlog(binlog) => binlog.keys(),
            SegmentRows::Stored(stored) => stored.ranges.keys(),
        }
    }

    /// The element type of its rows.
    pub fn element(&self) -> Element {
        match &self.rows {
            SegmentRows::Binlog(binlog) => binlog.element(),
            SegmentRows::Stored(stored) => stored.ranges.header.element,
        }
    }

    /// The insert binlog, when its bytes are local (not read by range).
    pub fn binlog(&self) -> Option<&InsertBinlog<'_>> {
        match &self.rows {
            SegmentRows::Binlog(binlog) => Some(binlog),
            SegmentRows::Stored(_) => None,
        }
    }

    /// The whole insert binlog: the local one, or for rows read by range,
    /// the object read from storage and verified (a merge's input).
    pub fn whole_binlog(&self) -> Result<Cow<'_, InsertBinlog<'static>>, CacheError> {
        match &self.rows {
            SegmentRows::Binlog(binlog) => Ok(Cow::Borrowed(binlog)),
            SegmentRows::Stored(stored) => stored.read_whole().map(Cow::Owned),
        }
    }

    /// The segment's graph, if it has one.
    pub fn graph(&self) -> Option<&FlatGraph<'_>> {
        self.graph.as_ref()
    }

    /// The segment's inverted index, if its rows are sparse and it has one.
    pub fn inverted(&self) -> Option<&Inverted<'_>> {
        self.inverted.as_ref()
    }

    /// Rows tombstoned.
    pub fn deleted_rows(&self) -> usize {
        self.tombstones.len()
    }

    /// Calls `f(row, distance to query)` for each of `rows`. The element
    /// type is matched once, not once a row (as the growing scan's pages
    /// are: a `Row` built and matched a row cost more than a 128-d
    /// distance). Rows read by range are read first, all at once.
    pub(super) fn distances(
        &self,
        query: Row<'_>,
        rows: impl Iterator<Item = u32>,
        mut f: impl FnMut(u32, f32),
    ) -> Result<RangeReads, CacheError> {
        let binlog = match &self.rows {
            SegmentRows::Binlog(binlog) => binlog,
            SegmentRows::Stored(stored) => {
                let rows: Vec<u32> = rows.collect();
                let (metric, dims) = (stored.ranges.header.metric, stored.ranges.header.dims);
                let ((), reads) = stored.with_rows(&rows, |vectors| {
                    for (i, &row) in rows.iter().enumerate() {
                        f(row, metric.between(query, vectors.row(i, dims)));
                    }
                })?;
                return Ok(reads);
            }
        };
        let (metric, dims) = (binlog.metric, binlog.dims);
        let at = |row: u32, stride: usize| row as usize * stride..(row as usize + 1) * stride;
        match (query, binlog.vectors()) {
            (Row::F32(q), Vectors::F32(v)) => rows.for_each(|r| f(r, metric.distance(q, &v[at(r, dims)]))),
            (Row::F16(q), Vectors::F16(v)) => rows.for_each(|r| f(r, metric.distance_f16(q, &v[at(r, dims)]))),
            (Row::Bit { bits, .. }, Vectors::Bit(v)) => {
                let stride = Element::Bit.bytes(dims);
                rows.for_each(|r| f(r, metric.distance_bits(bits, &v[at(r, stride)])))
            }
            (Row::Sparse(_), Vectors::Sparse(v)) => {
                let q = query.sparse();
                rows.for_each(|r| f(r, metric.sparse(q, crate::element::sparse_view(v.row(r as usize)))))
            }
            _ => rows.for_each(|r| f(r, metric.between(query, binlog.vector(r as usize)))),
        }
        Ok(RangeReads::default())
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
    /// codes, the graph is walked by the codes' estimates, and the rows it
    /// keeps (`ef`, twice that with RaBitQ codes: [`Codes::rows_kept`]) are
    /// re-ranked by their exact distances. Re-ranking more than `ef` with sq8
    /// (walking with `ef` at least 20, or adding the nearest rows the walk
    /// computed but did not keep) mends recall at `ef` 10 on one segment
    /// but cost a stream's layout, whose segments get small shares of `ef`,
    /// much of its QPS for no recall (`crates/milvus-core/benches/cross_segment.rs`).
    /// Fails only where rows are read by range: a read that fails, or a
    /// row that does not match its checksum.
    pub fn search(
        &self,
        query: Row<'_>,
        k: usize,
        ef_search: usize,
        skip: &dyn Fn(u32) -> bool,
    ) -> Result<Vec<Hit>, CacheError> {
        Ok(self.search_counted(query, k, ef_search, skip)?.0)
    }

    /// [`Self::search`], and what it read beyond the mapped files: the
    /// rows re-ranked after a walk by the codes, and the rows read by range.
    pub fn search_counted(
        &self,
        query: Row<'_>,
        k: usize,
        ef_search: usize,
        skip: &dyn Fn(u32) -> bool,
    ) -> Result<(Vec<Hit>, SegmentReads), CacheError> {
        let excluded = |row: u32| self.is_deleted(row) || skip(row);
        let mut reads = SegmentReads::default();
        let (source, keys) = (Source::Segment(self.id), self.keys());
        let graph = self.graph.as_ref().filter(|_| self.by_graph());
        if let Some(inverted) = &self.inverted {
            // Exact: the inverted walk finds the k nearest, and their
            // distances are computed again by the kernel the pages and the
            // exact tail use, so that a row has one distance wherever it is.
            let (found, _) = inverted.search(query.sparse(), k, excluded);
            let mut hits = Vec::with_capacity(found.len());
            self.distances(query, found.iter().map(|h| h.row), |row, distance| {
                hits.push(Hit { source, row, key: keys[row as usize], distance })
            })?;
            hits.sort_by(|a, b| a.distance.total_cmp(&b.distance).then(a.row.cmp(&b.row)));
            return Ok((hits, reads));
        }
        let found = match (graph, &self.codes, &self.rows) {
            (Some(graph), Some(codes), _) => {
                let prepared = codes.prepare(query);
                let estimate = |row: u32| codes.distance(&prepared, row);
                let kept = codes.rows_kept(ef_search);
                let pool = graph.search_with(&estimate, &|row| codes.prefetch(row), kept, kept, &excluded);
                if let SegmentRows::Binlog(binlog) = &self.rows {
                    pool.iter().for_each(|(_, row)| binlog.vector(*row as usize).prefetch());
                }
                let mut exact: Vec<(f32, u32)> = Vec::with_capacity(pool.len());
                reads.by_range =
                    self.distances(query, pool.iter().map(|(_, row)| *row), |row, d| exact.push((d, row)))?;
                reads.reranked = exact.len();
                exact.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                exact.truncate(k);
                exact
            }
            (Some(graph), None, SegmentRows::Binlog(binlog)) => {
                let vector = |row: u32| binlog.vector(row as usize);
                graph.search(binlog.metric, query, &vector, k, ef_search, &excluded)
            }
            // No graph to walk, or rows by range with no codes to walk it
            // by (a segment whose rows are read by range has codes: jobs::load).
            _ => Vec::new(),
        };
        // A graph filtered this hard can come back short while rows
        // remain; then brute force keeps the iteration complete.
        if found.len() >= k {
            let hits = found
                .into_iter()
                .map(|(distance, row)| Hit { source, row, key: keys[row as usize], distance })
                .collect();
            return Ok((hits, reads));
        }
        let (hits, read) = self.nearest_of(query, k, (0..self.rows() as u32).filter(|r| !excluded(*r)))?;
        reads.by_range.add(read);
        Ok((hits, reads))
    }

    /// The `k` nearest of `rows` by exact distance, nearest first: every
    /// one of them measured.
    pub(super) fn nearest_of(
        &self,
        query: Row<'_>,
        k: usize,
        rows: impl Iterator<Item = u32>,
    ) -> Result<(Vec<Hit>, RangeReads), CacheError> {
        let (source, keys) = (Source::Segment(self.id), self.keys());
        let mut top = TopK::new(k);
        let read = self
            .distances(query, rows, |row, distance| top.push(Hit { source, row, key: keys[row as usize], distance }))?;
        Ok((top.into_sorted(), read))
    }
}

impl SegmentRows {
    /// The segment's id, metric, rows and dimensions.
    fn describe(&self) -> (SegmentId, Metric, usize, usize) {
        match self {
            SegmentRows::Binlog(b) => (b.segment, b.metric, b.len(), b.dims),
            SegmentRows::Stored(s) => {
                let h = &s.ranges.header;
                (h.segment, h.metric, s.ranges.len(), h.dims)
            }
        }
    }
}
