//! The jobs that move segments through their life: Milvus' DataNode work.
//!
//! Each job writes its objects first and returns what the manifest should
//! record; the caller publishes that in one manifest change (data first,
//! metadata last). A job that fails or is abandoned midway leaves only
//! unreferenced objects, which garbage collection removes after the grace
//! period: never a manifest entry pointing at a missing object.
//!
//! - [`flush`]: a sealed segment's rows become an insert binlog and an index
//!   file, and its filter columns (a multicolumn index's) a scalar binlog;
//! - [`write_tombstones`]: deleted rows of a flushed segment become a delta
//!   binlog;
//! - [`load`]: a flushed segment is opened for search, its files mapped
//!   from the local cache (or, for an index larger than the cache, its rows
//!   read by range from storage: [`rows_by_range`]);
//! - [`compact`]: live rows of some flushed segments are rewritten as one new
//!   segment (the manifest then drops the inputs).

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::cache::{CacheError, ObjectBytes, SegmentCache};
use crate::distance::Metric;
use crate::element::Vectors;
use crate::error::{SqlError, SqlState};
use crate::filter::{Column, Value};
use crate::format::delta::{self, DeltaBinlog};
use crate::format::index::IndexFile;
use crate::format::insert::{self, InsertBinlog};
use crate::format::manifest::{Flushed, ObjectRef, SegmentEntry};
use crate::format::ranges;
use crate::format::scalar::{self, ScalarBinlog};
use crate::format::{Check, FormatError};
use crate::graph::build::{self, Seed};
use crate::graph::segment::{HnswParams, IndexError, SegmentIndex};
use crate::inverted::Inverted;
use crate::search::{BRUTE_FORCE_MAX_ROWS, LoadedSegment, OpenError, RowsFrom};
use crate::segment::SegmentId;
use crate::storage::{ObjectKey, ObjectKind, Storage, StorageError, new_nonce};

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("segment {0} has no insert binlog in the manifest")]
    NotFlushed(SegmentId),
}

impl SqlError for JobError {
    fn sqlstate(&self) -> SqlState {
        match self {
            JobError::Storage(e) => e.sqlstate(),
            JobError::Cache(e) => e.sqlstate(),
            JobError::Format(e) => e.sqlstate(),
            JobError::Index(e) => e.sqlstate(),
            JobError::Open(e) => e.sqlstate(),
            JobError::NotFlushed(_) => SqlState::InternalError,
        }
    }

    fn hint(&self) -> Option<&'static str> {
        match self {
            JobError::Storage(e) => e.hint(),
            JobError::Cache(e) => e.hint(),
            JobError::Format(e) => e.hint(),
            JobError::Index(e) => e.hint(),
            JobError::Open(e) => e.hint(),
            JobError::NotFlushed(_) => None,
        }
    }
}

/// What a running job shares with the thread that waits for it: the cancel
/// flag it watches, and the phase it is in, which the waiting thread shows
/// (a flush's segment is `flushing`, its index `building`, in
/// `milvus_segments()`).
#[derive(Debug, Default)]
pub struct JobControl {
    cancel: AtomicBool,
    phase: AtomicU8,
}

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading its input, encoding.
    Preparing = 0,
    /// Building an HNSW graph.
    Building = 1,
    /// Writing objects.
    Uploading = 2,
}

impl JobControl {
    /// Asks the job to stop at its next check.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// The flag long loops check (the HNSW build, GC).
    pub fn cancel_flag(&self) -> &AtomicBool {
        &self.cancel
    }

    pub fn set_phase(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::Relaxed);
    }

    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Relaxed) {
            1 => Phase::Building,
            2 => Phase::Uploading,
            _ => Phase::Preparing,
        }
    }
}

/// Which index a job works for: the numbers object keys are built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexId {
    /// The Postgres cluster's system identifier.
    pub cluster: u64,
    pub database: u32,
    pub index: u32,
}

impl IndexId {
    fn key(&self, segment: SegmentId, kind: ObjectKind) -> String {
        ObjectKey {
            cluster: self.cluster,
            database: self.database,
            index: self.index,
            segment,
            kind,
            nonce: new_nonce(),
        }
        .path()
    }

    /// The prefix of all this index's objects (for garbage collection).
    pub fn prefix(&self) -> String {
        ObjectKey::index_prefix(self.cluster, self.database, self.index)
    }
}

/// Copies every object of `objects` (segment, reference) under the index
/// `id`'s own prefix, in the same store: what an index copied with its
/// database or cluster does before it writes anything, so that nothing its
/// manifest references can be deleted by the instance it was copied from.
/// Returns each old key with its copy's key. A copy the manifest never
/// names (a crash before the change that adopts them) is garbage under the
/// index's own prefix, collected after the grace period.
pub fn adopt(
    storage: &Storage,
    id: IndexId,
    objects: &[(SegmentId, ObjectRef)],
    cancel: &AtomicBool,
) -> Result<Vec<(String, String)>, JobError> {
    let mut moved = Vec::with_capacity(objects.len());
    for (segment, object) in objects {
        if cancel.load(Ordering::Relaxed) {
            return Err(StorageError::Cancelled.into());
        }
        let kind = object_kind(&object.key);
        let to = id.key(*segment, kind);
        storage.copy(&object.key, &to)?;
        moved.push((object.key.clone(), to));
    }
    Ok(moved)
}

/// The kind of object a key names, from its file name (`insert-`, `index-`,
/// `delta-`, `scalar-`, in every key format so far).
fn object_kind(key: &str) -> ObjectKind {
    let name = key.rsplit('/').next().unwrap_or(key);
    if name.starts_with("index-") {
        ObjectKind::IndexFile
    } else if name.starts_with("delta-") {
        ObjectKind::DeltaBinlog
    } else if name.starts_with("scalar-") {
        ObjectKind::ScalarBinlog
    } else {
        ObjectKind::InsertBinlog
    }
}

/// Uploads an object and, if `cache` is given, caches it: the cache is a
/// convenience here, so a full cache disk costs a later download, never
/// the write.
fn put(
    storage: &Storage,
    cache: Option<&SegmentCache>,
    key: String,
    bytes: Vec<u8>,
) -> Result<ObjectRef, StorageError> {
    let object = ObjectRef::of(key, &bytes);
    let bytes = Bytes::from(bytes);
    storage.put(&object.key, bytes.clone())?;
    if let Some(cache) = cache {
        let _ = cache.insert(&object, &bytes);
    }
    Ok(object)
}

/// Where a job writes: the store, and the local cache that keeps a copy of
/// what it writes.
#[derive(Clone, Copy)]
pub struct Target<'a> {
    pub storage: &'a Storage,
    pub cache: &'a SegmentCache,
    pub index: IndexId,
}

/// The rows of a new segment, and how to write it.
pub struct NewSegment<'a> {
    pub segment: SegmentId,
    pub metric: Metric,
    pub dims: usize,
    pub keys: &'a [u64],
    /// A row for each key.
    pub vectors: Vectors<'a>,
    pub params: HnswParams,
    /// Up to this many rows, no graph: searched by brute force (never less
    /// than [`BRUTE_FORCE_MAX_ROWS`]; see [`FLUSH_GRAPH_MIN_ROWS`]).
    pub graph_min_rows: usize,
    /// A graph to start from (a merge's largest input), if any.
    pub seed: Option<Seed<'a>>,
    /// Its filter columns, a value for each key (a multicolumn index's;
    /// none for an index of a vector alone).
    pub columns: &'a [Column],
}

/// Writes a sealed segment: its insert binlog, its scalar binlog if it has
/// filter columns, then, past `graph_min_rows` rows, its HNSW index file (built on this thread,
/// cancellable between chunks), and puts both into the local
/// cache, so the first search maps them instead of downloading them.
/// Sparse rows get an inverted index file whatever their number
/// (`crate::inverted`: it answers exactly, and costs one pass to build),
/// under the metrics it answers; under L1 none: every row is read.
pub fn flush(to: Target, rows: &NewSegment, control: &JobControl) -> Result<Flushed, JobError> {
    let NewSegment { segment, metric, dims, keys, ref vectors, params, graph_min_rows, ref seed, columns } = *rows;
    let binlog_bytes = insert::encode_vectors(segment, metric, dims, keys, vectors);
    let binlog = InsertBinlog::decode("new insert binlog", &binlog_bytes)?;
    // Build before uploading anything: a cancelled build then leaves nothing.
    let building = || {
        control.set_phase(Phase::Building);
        crate::pause::reach(crate::pause::Point::Build, control.cancel_flag());
    };
    let index_bytes = match binlog.vectors() {
        Vectors::Sparse(rows) if crate::inverted::supports(metric) => {
            building();
            let index = Inverted::build(metric, (0..rows.len()).map(|i| crate::element::sparse_view(rows.row(i))));
            Some(crate::format::inverted::encode(segment, &index))
        }
        Vectors::Sparse(_) => None,
        _ if binlog.len() > graph_min_rows.max(BRUTE_FORCE_MAX_ROWS) => {
            building();
            Some(SegmentIndex::build_seeded(&binlog, params, seed.as_ref(), control.cancel_flag())?.to_index_file())
        }
        _ => None,
    };
    control.set_phase(Phase::Uploading);
    let key = |kind| to.index.key(segment, kind);
    let insert_binlog = put(to.storage, Some(to.cache), key(ObjectKind::InsertBinlog), binlog_bytes)?;
    let scalar_binlog = (!columns.is_empty())
        .then(|| {
            put(to.storage, Some(to.cache), key(ObjectKind::ScalarBinlog), scalar::encode(segment, keys.len(), columns))
        })
        .transpose()?;
    crate::pause::reach(crate::pause::Point::BinlogUploaded, control.cancel_flag());
    let index_file = index_bytes.map(|b| put(to.storage, Some(to.cache), key(ObjectKind::IndexFile), b)).transpose()?;
    let bytes = insert_binlog.size + index_file.iter().chain(&scalar_binlog).map(|o| o.size).sum::<u64>();
    Ok(Flushed {
        segment,
        rows: keys.len() as u64,
        insert_binlog,
        index_file,
        scalar_binlog,
        bytes,
        row_keys: keys.to_vec(),
        keys: None,
    })
}

/// Writes tombstones (row positions) of a flushed segment as a delta binlog.
pub fn write_tombstones(
    storage: &Storage,
    id: IndexId,
    segment: SegmentId,
    rows: &[u32],
) -> Result<ObjectRef, JobError> {
    Ok(put(storage, None, id.key(segment, ObjectKind::DeltaBinlog), delta::encode(segment, rows))?)
}

/// Whether the flushed segments of an index (all of them, `entries`) read
/// their rows by range from storage: when their files do not fit in the
/// local cache together. Then each segment keeps its index file (graph and
/// codes, a fraction of the rows' bytes) in the cache, and only the rows a
/// search re-ranks are read, instead of every segment's rows going through
/// the cache in turn, or into each backend's memory when pinned files fill
/// it. A segment without codes (`quantization = none`, bits), whose graph
/// walk reads full rows, still loads its binlog whole.
pub fn rows_by_range<'a>(cache: &SegmentCache, entries: impl IntoIterator<Item = &'a SegmentEntry>) -> bool {
    let bytes: u64 = entries.into_iter().flat_map(|e| e.segment_files()).map(|o| o.size).sum();
    bytes > cache.capacity()
}

/// [`load`] of several segments, on up to `threads` threads at once (one
/// segment's load is mostly one single-threaded graph reload, so an index
/// of many segments loads that many times faster); results in `entries`'
/// order.
pub fn load_all(
    storage: &Arc<Storage>,
    cache: &SegmentCache,
    entries: &[SegmentEntry],
    metric: Metric,
    threads: usize,
    by_range: bool,
) -> Vec<Result<LoadedSegment, JobError>> {
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::with_capacity(entries.len()));
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, entries.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(entry) = entries.get(i) else { break };
                    let loaded = load(storage, cache, entry, metric, by_range);
                    done.lock().unwrap_or_else(|e| e.into_inner()).push((i, loaded));
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, loaded)| loaded).collect()
}

/// Opens a flushed segment for search: its insert binlog and index file
/// mapped from the local cache (downloaded and verified in full first if
/// not cached), and its tombstones. With `by_range` ([`rows_by_range`]) a
/// segment with codes whose binlog is not cached maps the binlog's read
/// index instead (derived once per server: [`read_index`]), and reads its
/// rows by range. A cached file whose header fails its check is dropped
/// from the cache and fetched again, once.
pub fn load(
    storage: &Arc<Storage>,
    cache: &SegmentCache,
    entry: &SegmentEntry,
    metric: Metric,
    by_range: bool,
) -> Result<LoadedSegment, JobError> {
    let mut tombstones = Vec::new();
    for delta_ref in &entry.delta_binlogs {
        let bytes = cache.get(storage, delta_ref)?;
        tombstones.extend(DeltaBinlog::decode(&delta_ref.key, &bytes)?.rows);
    }
    tombstones.extend(entry.pending_tombstones.iter());
    match open(storage, cache, entry, metric, tombstones.clone(), by_range) {
        Err(JobError::Open(_) | JobError::Format(_)) => {
            for object in entry.segment_files() {
                cache.remove(&object.key);
                cache.remove(&read_index_name(object));
            }
            open(storage, cache, entry, metric, tombstones, by_range)
        }
        other => other,
    }
}

fn open(
    storage: &Arc<Storage>,
    cache: &SegmentCache,
    entry: &SegmentEntry,
    metric: Metric,
    tombstones: Vec<u32>,
    by_range: bool,
) -> Result<LoadedSegment, JobError> {
    let insert_ref = entry.insert_binlog.as_ref().ok_or(JobError::NotFlushed(entry.meta.id))?;
    // The index file first: it is what a segment read by range keeps local.
    let index = entry.index_file.as_ref().map(|r| map_index(storage, cache, r, metric)).transpose()?;
    let has_codes = index.as_ref().is_some_and(|(name, bytes)| {
        matches!(IndexFile::decode(name, bytes, Check::Header), Ok(IndexFile::Flat { codes: Some(_), .. }))
    });
    let name = read_index_name(insert_ref);
    let rows = if by_range && has_codes && !cache.contains(insert_ref) {
        let bytes = cache.map_derived(&name, || read_index(storage, insert_ref))?;
        RowsFrom::Stored { name: &name, bytes, storage: storage.clone(), key: insert_ref.key.clone() }
    } else {
        RowsFrom::Binlog(&insert_ref.key, cache.map(storage, insert_ref)?)
    };
    let segment = LoadedSegment::open(rows, index, tombstones, Check::Header)?;
    match &entry.scalar_binlog {
        // Small beside the rows, and copied into columns: read whole.
        Some(object) => {
            let columns = ScalarBinlog::decode(&object.key, &cache.get(storage, object)?)?;
            if columns.segment != entry.meta.id {
                return Err(OpenError::Mismatch {
                    object: object.key.clone(),
                    message: format!("segment {} against the manifest's {}", columns.segment, entry.meta.id),
                }
                .into());
            }
            Ok(segment.with_columns(columns.columns)?)
        }
        None => Ok(segment),
    }
}

/// The cache name of a binlog's read index.
fn read_index_name(binlog: &ObjectRef) -> String {
    format!("{}.ranges", binlog.key)
}

/// Bytes a read index's build reads from storage at a time.
const READ_PIECE: u64 = 8 << 20;

/// The read index of the binlog `object` (`crate::format::ranges`), from
/// one read of it in pieces, checked against the manifest's size and
/// checksum and against its own header's as it streams: memory stays a
/// piece, not the binlog.
pub fn read_index(storage: &Storage, object: &ObjectRef) -> Result<Vec<u8>, JobError> {
    let mut builder = ranges::Builder::new(&object.key);
    let (mut at, mut crc) = (0, 0);
    while at < object.size {
        let piece = at..(at + READ_PIECE).min(object.size);
        at = piece.end;
        for bytes in storage.get_ranges(&object.key, &[piece])? {
            crc = crc32c::crc32c_append(crc, &bytes);
            builder.feed(&bytes)?;
        }
    }
    let corrupt = |reason: String| CacheError::Corrupt { key: object.key.clone(), reason };
    if crc != object.crc32c {
        return Err(corrupt(format!("checksum {crc:08x}, the manifest says {:08x}", object.crc32c)).into());
    }
    if builder.binlog_size() != Some(object.size) {
        return Err(corrupt(format!("its header does not give the manifest's {} bytes", object.size)).into());
    }
    Ok(builder.finish()?)
}

/// The cache name of a version 1 index file converted to version 2.
fn converted_name(object: &ObjectRef) -> String {
    format!("{}.v2", object.key)
}

/// A segment's index file mapped, with the name it is cached under. A file
/// of version 1 (hnsw_rs' dump, written by 0.1) is reloaded with hnsw_rs
/// once per server and cached as version 2 beside it (`<key>.v2`).
fn map_index(
    storage: &Storage,
    cache: &SegmentCache,
    object: &ObjectRef,
    metric: Metric,
) -> Result<(String, ObjectBytes), JobError> {
    let bytes = cache.map(storage, object)?;
    let inverted = bytes.starts_with(crate::format::inverted::MAGIC);
    if inverted || !matches!(IndexFile::decode(&object.key, &bytes, Check::Header)?, IndexFile::HnswDump { .. }) {
        return Ok((object.key.clone(), bytes));
    }
    let name = converted_name(object);
    let converted = cache.map_derived(&name, || {
        let dir = cache.unpack_dir_of(&object.key);
        let index = SegmentIndex::from_hnsw_dump(&object.key, &bytes, metric, &dir);
        if index.is_err() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        Ok::<_, JobError>(index?.to_index_file())
    })?;
    Ok((name, converted))
}

/// Reads a flushed segment's cached files through and checks them in full
/// (what opening a mapped file skips: [`crate::cache`]); a damaged file is
/// dropped from the cache, to be fetched again by the next open. Returns
/// the files found damaged, each with what was wrong.
pub fn verify_cached(cache: &SegmentCache, entry: &SegmentEntry) -> Vec<String> {
    let mut damaged = Vec::new();
    for object in entry.segment_files() {
        if let Err(e) = cache.verify_entry(object) {
            damaged.push(e.to_string());
        }
    }
    if let Some(object) = &entry.index_file {
        let derived = converted_name(object);
        if let Ok(bytes) = std::fs::read(cache.path_of(&derived))
            && let Err(e) = IndexFile::decode(&derived, &bytes, Check::Full)
        {
            cache.remove(&derived);
            damaged.push(e.to_string());
        }
    }
    if let Some(object) = &entry.insert_binlog {
        let derived = read_index_name(object);
        if let Ok(bytes) = std::fs::read(cache.path_of(&derived))
            && let Err(e) = ranges::RowRanges::decode(&derived, &bytes, Check::Full)
        {
            cache.remove(&derived);
            damaged.push(e.to_string());
        }
    }
    damaged
}

/// What object storage holds of one object a manifest references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredObject {
    pub key: String,
    pub bytes: u64,
    /// Why the segment could not be rebuilt from it: gone, unreadable, or
    /// not the bytes the manifest recorded. `None` when it is whole.
    pub error: Option<String>,
}

/// Reads every object of a flushed segment from object storage (never the
/// cache) and checks each in full against the manifest's size and
/// checksum: whether the segment can still be rebuilt from its objects,
/// which a search served from the cache does not tell. Stops between two
/// objects once `cancel` is set.
pub fn verify_stored(storage: &Storage, entry: &SegmentEntry, cancel: &AtomicBool) -> Vec<StoredObject> {
    let objects = entry.objects();
    objects
        .take_while(|_| !cancel.load(Ordering::Relaxed))
        .map(|object| {
            let error = match storage.get(&object.key) {
                Ok(bytes) => crate::cache::verify(object, &bytes).err().map(|e| e.to_string()),
                Err(e) => Some(e.to_string()),
            };
            StoredObject { key: object.key.clone(), bytes: object.size, error }
        })
        .collect()
}

/// Up to this many rows, a flush that other sealed segments wait behind
/// writes no graph: the segment is searched by brute force until a merge
/// rewrites it with one. A bulk insert seals many small segments at once,
/// and building each one's graph at its flush kept a bulk load from being
/// all indexed for seconds after the last insert; a steady stream seals
/// one at a time, and there the graph pays in QPS (`make bench`, the time
/// to indexed and the streaming phase; docs/benchmarks.md, "Constants and
/// the measurements behind them").
pub const FLUSH_GRAPH_MIN_ROWS: usize = 4096;

/// What a compaction writes: the live rows of `inputs` as the new segments
/// `outputs`: one, or with `cluster_by` as many as the rows fill.
pub struct Merge<'a> {
    pub inputs: &'a [&'a LoadedSegment],
    pub outputs: &'a [SegmentId],
    /// Milvus' clustering compaction: rows ordered by this filter column
    /// (NULLs last) and cut into the outputs at changes of its value, so each
    /// output holds a narrow range of it and a filter on it skips the others
    /// by their statistics.
    pub cluster_by: Option<usize>,
    pub metric: Metric,
    pub dims: usize,
    pub params: HnswParams,
}

/// Where a merge puts each live row of its inputs: for each output, its
/// rows in order, each `(input, row)`.
pub type Layout = Vec<Vec<(usize, u32)>>;

/// What [`compact`] wrote: the new segments, and where each row went
/// ([`carried_tombstones`] reads it when the merge publishes).
pub struct Merged {
    pub segments: Vec<Flushed>,
    pub layout: Layout,
}

impl Merge<'_> {
    /// The outputs' rows. Without `cluster_by`, every live row of each
    /// input, input by input, row by row, all in the one output. With it,
    /// the same rows ordered by the column's value, each output about an
    /// equal share ([`cut`]).
    pub fn layout(&self) -> Layout {
        let live = self
            .inputs
            .iter()
            .enumerate()
            .flat_map(|(i, seg)| (0..seg.rows() as u32).filter(|r| !seg.is_deleted(*r)).map(move |r| (i, r)));
        let Some(column) = self.cluster_by else {
            assert_eq!(self.outputs.len(), 1, "a merge without cluster_by writes one segment");
            return vec![live.collect()];
        };
        let mut rows: Vec<((bool, Value), (usize, u32))> = live
            .map(|(i, r)| {
                let value = self.inputs[i].columns()[column].value(r as usize);
                ((value == Value::Null, value), (i, r))
            })
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        let ends = cut(&rows.iter().map(|(v, _)| v).collect::<Vec<_>>(), self.outputs.len());
        let mut start = 0;
        ends.into_iter()
            .map(|end| {
                let piece = rows[start..end].iter().map(|(_, at)| *at).collect();
                start = end;
                piece
            })
            .collect()
    }
}

/// Where to end each of `pieces` parts of the sorted `values`: at equal
/// shares, each end moved to the nearest change of value within a quarter
/// share of it, so a value's rows sit in one part unless it alone fills
/// more than that allows. No part is empty when there are at least as many
/// values as parts.
fn cut<T: PartialEq>(values: &[T], pieces: usize) -> Vec<usize> {
    let (n, pieces) = (values.len(), pieces.max(1));
    let slack = n / pieces / 4;
    let mut ends = Vec::with_capacity(pieces);
    let mut last = 0;
    for p in 1..pieces {
        let ideal = (p * n / pieces).clamp(last, n);
        let change = |at: usize| at > last && at < n && values[at - 1] != values[at];
        let nearest =
            (0..=slack).flat_map(|d| [ideal.checked_sub(d), Some(ideal + d)]).flatten().find(|at| change(*at));
        let end = nearest.unwrap_or(ideal);
        ends.push(end);
        last = end;
    }
    ends.push(n);
    ends
}

/// Rewrites the live rows of the inputs as the new segments. A plain
/// merge's graph starts from the graph of the input with the most live
/// rows, if that graph may seed a merge ([`crate::graph::FlatGraph::is_reusable`])
/// and few of its rows are deleted ([`build::worth_keeping`]): only the
/// other inputs' rows are inserted ([`crate::graph::build`]). A clustering
/// reorders every row: its graphs are built anew.
pub fn compact(to: Target, merge: &Merge, control: &JobControl) -> Result<Merged, JobError> {
    let Merge { inputs, outputs, cluster_by, metric, dims, params } = *merge;
    crate::pause::reach(crate::pause::Point::Merge, control.cancel_flag());
    let kept = match cluster_by {
        Some(_) => None,
        None => (0..inputs.len())
            .filter(|i| inputs[*i].graph().is_some_and(|g| g.is_reusable()))
            .filter(|i| build::worth_keeping(inputs[*i].rows(), inputs[*i].deleted_rows()))
            .max_by_key(|i| (inputs[*i].live_rows(), std::cmp::Reverse(*i))),
    };
    // Inputs whose rows are read by range are read whole here.
    let binlogs = inputs.iter().map(|s| s.whole_binlog()).collect::<Result<Vec<_>, _>>()?;
    let element = inputs.first().map_or_else(Default::default, |s| s.element());
    let filter_columns = inputs.first().map_or(0, |s| s.columns().len());
    let layout = merge.layout();
    let mut segments = Vec::with_capacity(outputs.len());
    for (segment, rows) in outputs.iter().zip(&layout) {
        let mut keys = Vec::with_capacity(rows.len());
        let mut vectors = Vectors::new(element);
        let mut positions = vec![None; kept.map_or(0, |i| inputs[i].rows())];
        for (position, (i, row)) in rows.iter().copied().enumerate() {
            let binlog = &binlogs[i];
            keys.push(binlog.keys()[row as usize]);
            vectors.push(binlog.vector(row as usize));
            if Some(i) == kept {
                positions[row as usize] = Some(position as u32);
            }
        }
        let seed = kept.and_then(|i| inputs[i].graph()).map(|graph| Seed { graph, positions: &positions });
        // Filter columns follow their rows, in the output's order.
        let columns: Vec<Column> = (0..filter_columns)
            .map(|c| {
                let parts: Vec<&Column> = inputs.iter().map(|s| &s.columns()[c]).collect();
                Column::gather(&parts, rows.iter().copied())
            })
            .collect();
        let new = NewSegment {
            segment: *segment,
            metric,
            dims,
            keys: &keys,
            vectors,
            params,
            // A merge's output is searched for long: a graph wherever one pays.
            graph_min_rows: BRUTE_FORCE_MAX_ROWS,
            seed,
            columns: &columns,
        };
        segments.push(flush(to, &new, control)?);
    }
    Ok(Merged { segments, layout })
}

/// The rows of a merge's outputs that died while it was built, for each
/// output. A merge reads its inputs (as [`compact`] was given them) and
/// writes for long without holding them; VACUUM may tombstone their rows
/// meanwhile. When it publishes, the inputs as they are now (`after`, the
/// same segments in the same order) say which rows died: returned as
/// positions in each output of `layout` (the merge's), to be its
/// tombstones from the start, so no dead row comes back.
pub fn carried_tombstones(layout: &Layout, after: &[&LoadedSegment]) -> Vec<Vec<u32>> {
    layout
        .iter()
        .map(|rows| {
            let died = rows.iter().enumerate().filter(|(_, (i, row))| after[*i].is_deleted(*row));
            died.map(|(position, _)| position as u32).collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::Rng;

    fn segment(id: u64, rows: usize, tombstones: Vec<u32>) -> LoadedSegment {
        let keys: Vec<u64> = (0..rows as u64).map(|r| id << 32 | r).collect();
        let bytes = insert::encode(SegmentId(id), Metric::L2, 4, &keys, &Rng::new(id).vector(rows * 4));
        LoadedSegment::new(InsertBinlog::decode("o", &bytes).unwrap().into_owned(), None, tombstones)
    }

    fn refs(s: &[LoadedSegment; 2]) -> [&LoadedSegment; 2] {
        [&s[0], &s[1]]
    }

    fn merge<'a>(inputs: &'a [&'a LoadedSegment], outputs: &'a [SegmentId]) -> Merge<'a> {
        Merge { inputs, outputs, cluster_by: None, metric: Metric::L2, dims: 4, params: HnswParams::default() }
    }

    fn store() -> (Storage, tempfile::TempDir, SegmentCache) {
        let storage = Storage::open("memory://", &Default::default(), Default::default()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cache = SegmentCache::new(dir.path(), 1 << 30).unwrap();
        (storage, dir, cache)
    }

    const INDEX: IndexId = IndexId { cluster: 1, database: 2, index: 3 };

    #[test]
    fn tombstones_written_during_a_merge_land_on_the_rows_it_wrote() {
        // Input 7: rows 0-4, row 1 dead before the merge; input 9: rows 0-2.
        let before = [segment(7, 5, vec![1]), segment(9, 3, vec![])];
        // Meanwhile VACUUM kills 7/3 and 9/0, and 7/1 again (already gone).
        let after = [segment(7, 5, vec![1, 3]), segment(9, 3, vec![0])];
        // The output: 7/0, 7/2, 7/3, 7/4, 9/0, 9/1, 9/2.
        let inputs = refs(&before);
        let merge = merge(&inputs, &[SegmentId(11)]);
        let (storage, _dir, cache) = store();
        let Merged { segments, layout } =
            compact(Target { storage: &storage, cache: &cache, index: INDEX }, &merge, &JobControl::default()).unwrap();
        assert_eq!(layout, merge.layout(), "the layout it wrote by");
        assert_eq!(carried_tombstones(&layout, &refs(&after)), vec![vec![2, 4]]);
        assert_eq!(
            carried_tombstones(&layout, &refs(&before)),
            vec![Vec::<u32>::new()],
            "nothing died: nothing carried"
        );

        // The positions name the rows the merge wrote, by key.
        let [flushed] = <[Flushed; 1]>::try_from(segments).unwrap();
        let key = &flushed.insert_binlog.key;
        let written = InsertBinlog::decode(key, &storage.get(key).unwrap()).unwrap().into_owned();
        let keys: Vec<u64> =
            carried_tombstones(&layout, &refs(&after))[0].iter().map(|p| written.keys()[*p as usize]).collect();
        assert_eq!(keys, vec![7 << 32 | 3, 9 << 32]);
    }

    #[test]
    fn cuts_fall_on_changes_of_value_near_equal_shares() {
        // 12 values in 3 parts: ideal ends 4 and 8, moved at most a quarter
        // share (1). A run of 2s covers 3 to 5: 4 stays; 8 sits on a change.
        assert_eq!(cut(&[1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3], 3), vec![4, 8, 12]);
        // A change one away from the ideal end is taken.
        assert_eq!(cut(&[1, 1, 1, 2, 2, 2, 3, 3, 4, 4, 4, 4], 3), vec![3, 8, 12]);
        // Within a quarter share (2 of 8): the change at 7 is taken for 8.
        let values: Vec<u32> = (0..24)
            .map(|i| {
                if i < 7 {
                    0
                } else if i < 17 {
                    1
                } else {
                    2
                }
            })
            .collect();
        assert_eq!(cut(&values, 3), vec![7, 17, 24]);
        // One value throughout: equal shares; more parts than values would
        // leave some empty, which the planner never asks for.
        assert_eq!(cut(&[5; 9], 3), vec![3, 6, 9]);
        assert_eq!(cut(&[1, 2, 3, 4, 5], 4), vec![1, 2, 3, 5]);
        assert_eq!(cut::<u8>(&[], 1), vec![0]);
    }

    #[test]
    fn a_clustering_merge_orders_rows_by_the_column_and_cuts_them_by_value() {
        use crate::filter::{Cmp, ColumnType, Filter, Key, Test};
        // Two inputs of 400 rows, tenants 0..40 interleaved, some NULL.
        let tenant =
            |id: u64, r: usize| if r % 50 == 7 { Value::Null } else { Value::Int(((r * 7 + id as usize) % 40) as i64) };
        let input = |id: u64, tombstones: Vec<u32>| {
            let values: Vec<Value> = (0..400).map(|r| tenant(id, r)).collect();
            segment(id, 400, tombstones).with_columns(vec![Column::build(ColumnType::Int, &values).unwrap()]).unwrap()
        };
        let before = [input(7, vec![3, 9]), input(9, vec![])];
        let inputs = refs(&before);
        let outputs = [SegmentId(11), SegmentId(12), SegmentId(13), SegmentId(14)];
        let merge = Merge { cluster_by: Some(0), ..merge(&inputs, &outputs) };
        let (storage, _dir, cache) = store();
        let control = JobControl::default();
        let Merged { segments: flushed, layout } =
            compact(Target { storage: &storage, cache: &cache, index: INDEX }, &merge, &control).unwrap();
        assert_eq!(flushed.iter().map(|f| f.segment).collect::<Vec<_>>(), outputs);
        assert_eq!(flushed.iter().map(|f| f.rows).sum::<u64>(), 798);
        // Each output a quarter of the rows, give or take a quarter share,
        // and no tenant in two outputs; NULLs in the last.
        let mut seen = std::collections::HashSet::new();
        for (n, f) in flushed.iter().enumerate() {
            assert!((150..=250).contains(&f.rows), "{n}: {} rows", f.rows);
            let object = f.scalar_binlog.as_ref().unwrap();
            let columns = ScalarBinlog::decode(&object.key, &storage.get(&object.key).unwrap()).unwrap().columns;
            let values: Vec<Value> = (0..f.rows as usize).map(|r| columns[0].value(r)).collect();
            assert!(values.is_sorted_by_key(|v| (*v == Value::Null, v.clone())), "{n}: rows in the column's order");
            let distinct: std::collections::HashSet<&Value> = values.iter().collect();
            assert!(distinct.iter().all(|v| seen.insert((*v).clone())), "{n}: a value already in an earlier output");
            assert_eq!(values.contains(&Value::Null), n == 3);
            // A filter on one tenant: every output but the one holding it
            // is excluded by its statistics.
            let one = Filter { keys: vec![Key { column: 0, test: Test::Cmp(Cmp::Eq, Value::Int(17)) }] };
            assert_eq!(!one.excludes(&[columns[0].stats()]), values.contains(&Value::Int(17)), "{n}");
        }
        // Rows that died meanwhile land on the output that holds them.
        let after = [input(7, vec![3, 9, 10]), input(9, vec![0])];
        let carried = carried_tombstones(&layout, &refs(&after));
        let mut died: Vec<(u64, u32)> = carried
            .iter()
            .enumerate()
            .flat_map(|(n, rows)| rows.iter().map(|p| layout[n][*p as usize]).collect::<Vec<_>>())
            .map(|(i, r)| ([7, 9][i], r))
            .collect();
        died.sort();
        assert_eq!(died, vec![(7, 10), (9, 0)]);
    }

    #[test]
    fn a_merge_keeps_the_graph_of_its_largest_input() {
        // Input 7: 200 rows, no graph; input 5: 3,000 rows with a graph,
        // every tenth deleted; input 6: 600 rows with a graph.
        let with_graph = |id: u64, rows: usize, tombstones: Vec<u32>| {
            let plain = segment(id, rows, tombstones.clone());
            let binlog = plain.binlog().unwrap();
            let index = SegmentIndex::build(binlog, HnswParams::default(), &AtomicBool::new(false)).unwrap();
            LoadedSegment::new(binlog.clone().into_owned(), Some(index), tombstones)
        };
        let dead: Vec<u32> = (0..3000).filter(|r| r % 10 == 0).collect();
        let inputs = [segment(7, 200, vec![]), with_graph(5, 3000, dead.clone()), with_graph(6, 600, vec![])];
        let refs: Vec<&LoadedSegment> = inputs.iter().collect();
        let outputs = [SegmentId(8)];
        let merge = merge(&refs, &outputs);
        let (storage, _dir, cache) = store();
        let index = INDEX;
        let flushed = compact(Target { storage: &storage, cache: &cache, index }, &merge, &JobControl::default())
            .unwrap()
            .segments
            .remove(0);
        let key = &flushed.index_file.unwrap().key;
        let bytes = storage.get(key).unwrap();
        let IndexFile::Flat { graph, .. } = IndexFile::decode(key, &bytes, Check::Full).unwrap() else { panic!() };
        assert!(graph.is_reusable() && graph.rows() == 200 + 2700 + 600);
        assert_eq!(graph.unreached(), 0);
        // Input 5's live rows follow input 7's 200 in the output, with the
        // levels its graph gave them: kept, not drawn again by a rebuild.
        let kept = inputs[1].graph().unwrap();
        let live = (0..3000u32).filter(|r| r % 10 != 0);
        let same = live.enumerate().filter(|(p, r)| graph.level(200 + *p as u32) == kept.level(*r)).count();
        assert_eq!(same, 2700);

        // With one row in five deleted, the graph is not kept: rebuilt.
        let dead: Vec<u32> = (0..3000).filter(|r| r % 5 == 0).collect();
        let inputs = [with_graph(5, 3000, dead), with_graph(6, 600, vec![])];
        let refs: Vec<&LoadedSegment> = inputs.iter().collect();
        let merge = Merge { inputs: &refs, ..merge };
        let flushed = compact(Target { storage: &storage, cache: &cache, index }, &merge, &JobControl::default())
            .unwrap()
            .segments
            .remove(0);
        let key = &flushed.index_file.unwrap().key;
        let bytes = storage.get(key).unwrap();
        let IndexFile::Flat { graph, .. } = IndexFile::decode(key, &bytes, Check::Full).unwrap() else { panic!() };
        let kept = inputs[0].graph().unwrap();
        let live = (0..3000u32).filter(|r| r % 5 != 0);
        let same = live.enumerate().filter(|(p, r)| graph.level(*p as u32) == kept.level(*r)).count();
        assert!(same < 2400 * 95 / 100, "levels drawn again: {same} of 2,400 the same");
    }
}
