//! The jobs that move segments through their life: Milvus' DataNode work.
//!
//! Each job writes its objects first and returns what the manifest should
//! record; the caller publishes that in one manifest change (data first,
//! metadata last). A job that fails or is abandoned midway leaves only
//! unreferenced objects, which garbage collection removes after the grace
//! period: never a manifest entry pointing at a missing object.
//!
//! - [`flush`]: a sealed segment's rows become an insert binlog and an index
//!   file;
//! - [`write_tombstones`]: deleted rows of a flushed segment become a delta
//!   binlog;
//! - [`load`]: a flushed segment is read back (through the cache) for search;
//! - [`compact`]: live rows of some flushed segments are rewritten as one new
//!   segment (the manifest then drops the inputs).

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bytes::Bytes;

use crate::cache::{CacheError, SegmentCache};
use crate::distance::Metric;
use crate::format::delta::{self, DeltaBinlog};
use crate::format::insert::{self, InsertBinlog};
use crate::format::manifest::{Flushed, ObjectRef, SegmentEntry};
use crate::format::FormatError;
use crate::hnsw::{HnswParams, IndexError, SegmentIndex};
use crate::search::{BRUTE_FORCE_MAX_ROWS, LoadedSegment};
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
    #[error("segment {0} has no insert binlog in the manifest")]
    NotFlushed(SegmentId),
}

impl JobError {
    /// Worth retrying later: the storage may come back.
    pub fn is_transient(&self) -> bool {
        match self {
            JobError::Storage(e) | JobError::Cache(CacheError::Storage(e)) => e.is_transient(),
            _ => false,
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
        ObjectKey { cluster: self.cluster, database: self.database, index: self.index, segment, kind, nonce: new_nonce() }.path()
    }

    /// The prefix of all this index's objects (for garbage collection).
    pub fn prefix(&self) -> String {
        ObjectKey::index_prefix(self.cluster, self.database, self.index)
    }
}

fn put(storage: &Storage, key: String, bytes: Vec<u8>) -> Result<ObjectRef, StorageError> {
    let object = ObjectRef::of(key, &bytes);
    storage.put(&object.key, Bytes::from(bytes))?;
    Ok(object)
}

/// Writes a sealed segment: its insert binlog, then its HNSW index file
/// (built on `params.threads` threads, cancellable between chunks).
#[allow(clippy::too_many_arguments)]
pub fn flush(
    storage: &Storage,
    id: IndexId,
    segment: SegmentId,
    metric: Metric,
    dims: usize,
    keys: &[u64],
    vectors: &[f32],
    params: HnswParams,
    scratch: &Path,
    cancel: &AtomicBool,
    binlog_uploaded: &dyn Fn(),
) -> Result<Flushed, JobError> {
    let binlog_bytes = insert::encode(segment, metric, dims, keys, vectors);
    let binlog = InsertBinlog::decode("new insert binlog", &binlog_bytes)?;
    // Build before uploading anything: a cancelled build then leaves nothing.
    let index_bytes = if binlog.len() > BRUTE_FORCE_MAX_ROWS {
        Some(SegmentIndex::build(&binlog, params, cancel)?.to_index_file(scratch)?)
    } else {
        None
    };
    let insert_binlog = put(storage, id.key(segment, ObjectKind::InsertBinlog), binlog_bytes)?;
    binlog_uploaded();
    let index_file = index_bytes.map(|b| put(storage, id.key(segment, ObjectKind::IndexFile), b)).transpose()?;
    let bytes = insert_binlog.size + index_file.as_ref().map_or(0, |o| o.size);
    Ok(Flushed { segment, rows: keys.len() as u64, insert_binlog, index_file, bytes })
}

/// Writes tombstones (row positions) of a flushed segment as a delta binlog.
pub fn write_tombstones(storage: &Storage, id: IndexId, segment: SegmentId, rows: &[u32]) -> Result<ObjectRef, JobError> {
    Ok(put(storage, id.key(segment, ObjectKind::DeltaBinlog), delta::encode(segment, rows))?)
}

/// [`load`] of several segments, on up to `threads` threads at once (one
/// segment's load is mostly one single-threaded graph reload, so an index
/// of many segments loads that many times faster); results in `entries`'
/// order.
pub fn load_all(
    storage: &Storage,
    cache: &SegmentCache,
    entries: &[SegmentEntry],
    metric: Metric,
    threads: usize,
) -> Vec<Result<LoadedSegment, JobError>> {
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::with_capacity(entries.len()));
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, entries.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(entry) = entries.get(i) else { break };
                    let loaded = load(storage, cache, entry, metric);
                    done.lock().unwrap_or_else(|e| e.into_inner()).push((i, loaded));
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, loaded)| loaded).collect()
}

/// Reads a flushed segment back for search: binlog, graph and tombstones,
/// each verified against the manifest and its own checksums.
pub fn load(storage: &Storage, cache: &SegmentCache, entry: &SegmentEntry, metric: Metric) -> Result<LoadedSegment, JobError> {
    let insert_ref = entry.insert_binlog.as_ref().ok_or(JobError::NotFlushed(entry.meta.id))?;
    let bytes = cache.get(storage, insert_ref)?;
    let binlog = InsertBinlog::decode(&insert_ref.key, &bytes)?.into_owned();
    let index = match &entry.index_file {
        Some(index_ref) => {
            let bytes = cache.get(storage, index_ref)?;
            let dir = cache.unpack_dir_of(&index_ref.key);
            let loaded = SegmentIndex::from_index_file(&index_ref.key, &bytes, metric, &dir);
            if loaded.is_err() {
                let _ = std::fs::remove_dir_all(&dir);
            }
            Some(loaded?)
        }
        None => None,
    };
    let mut tombstones = Vec::new();
    for delta_ref in &entry.delta_binlogs {
        let bytes = cache.get(storage, delta_ref)?;
        tombstones.extend(DeltaBinlog::decode(&delta_ref.key, &bytes)?.rows);
    }
    Ok(LoadedSegment::new(binlog, index, tombstones))
}

/// Rewrites the live rows of `inputs` as the new segment `output`.
#[allow(clippy::too_many_arguments)]
pub fn compact(
    storage: &Storage,
    id: IndexId,
    inputs: &[&LoadedSegment],
    output: SegmentId,
    metric: Metric,
    dims: usize,
    params: HnswParams,
    scratch: &Path,
    cancel: &AtomicBool,
) -> Result<Flushed, JobError> {
    let mut keys = Vec::new();
    let mut vectors = Vec::new();
    for seg in inputs {
        let binlog = seg.binlog();
        for row in 0..binlog.len() {
            if !seg.is_deleted(row as u32) {
                keys.push(binlog.keys()[row]);
                vectors.extend_from_slice(binlog.vector(row));
            }
        }
    }
    flush(storage, id, output, metric, dims, &keys, &vectors, params, scratch, cancel, &|| {})
}
