//! The manifest: the list of an index's segments, their states and objects.
//!
//! It is what etcd is to Milvus. The access method stores it WAL-logged in the
//! index's meta pages, so it changes in the same transaction as the growing
//! segment's hand-off; this module only defines its bytes.
//!
//! ```text
//! offset size  field
//!      0    8  magic "PGMVMAN\0"
//!      8    2  format version
//!     10    2  reserved, 0
//!     12    8  body length
//!     20    4  CRC-32C of the body
//!     24   36  reserved, 0
//!     60    4  CRC-32C of bytes 0..60
//!     64       body: the manifest, bincode 2 (standard configuration)
//! ```
//!
//! bincode is not self-describing, so the body's shape is fixed per format
//! version. A build reads every version up to its own: version N has its own
//! struct (`ManifestV1`, ...) converted into the current [`Manifest`]. Writing
//! always uses the newest version.
//!
//! Version 2 added `storage_url`: where the index's objects live, fixed when
//! the index is built, so changing `milvus.storage_url` later moves new
//! indexes, never strands existing ones. A version 1 manifest reads as
//! `None`, the embedded default directory.
//!
//! Version 3 added each segment's `pending_tombstones`: rows VACUUM found
//! dead, recorded here (WAL-logged, with no object storage involved) until
//! a job writes them to a delta binlog, as Milvus keeps L0 deletes before
//! they are compacted into segments. Searches skip them from the moment
//! VACUUM records them. Version 3 also knows the seal reason `Pages`. Older
//! manifests read with none pending.
//!
//! Version 4 added each object's `pages`: the first block of the chain of
//! index pages that holds its bytes, for objects of the embedded store,
//! which travel with the WAL that way (`crate::pages::objects`). Older
//! manifests read with none: their objects are in the directory only until
//! the index's first job writes them to pages.
//!
//! Version 5 added each segment's `dropped_at`: when the change that
//! dropped it was made. Garbage collection keeps a dropped segment's objects
//! for `milvus.gc_grace_period` counted from then, not from the objects'
//! creation, so the grace period is a window a point-in-time restore or a
//! copy of the index can rely on. Segments dropped under an older version
//! read with none: their objects age from their creation, as they did.
//! Version 5 also added each segment's `keys`: the chain of pages holding
//! its rows' keys, for an index on a shared store (VACUUM reads them
//! there); older segments read with none.
//!
//! Version 6 added each segment's `scalar_binlog`: its filter columns, for a
//! multicolumn index (`crate::format::scalar`); older segments read with
//! none, as do the segments of an index of a vector alone.

use serde::{Deserialize, Serialize};

use super::meta::Block;
use super::{Check, FormatError, FormatErrorKind, Reader, Writer, check_body, check_header, finish_header};
use crate::error::{SqlError, SqlState};
use crate::segment::{IndexState, LifecycleError, SealReason, SegmentId, SegmentMeta, SegmentState};

pub const MAGIC: &[u8; 8] = b"PGMVMAN\0";
pub const VERSION: u16 = 7;
pub const HEADER_LEN: usize = 64;

/// An object in storage, as the manifest references it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    /// Key relative to the storage root.
    pub key: String,
    pub size: u64,
    /// CRC-32C of the whole object, checked after download.
    pub crc32c: u32,
    /// The first page of the chain of index pages holding the object's
    /// bytes (the embedded store's objects, WAL-logged); `None` for an
    /// object only its store holds (S3, a `file://` location, an embedded
    /// object of a manifest older than version 4).
    pub pages: Option<Block>,
}

impl ObjectRef {
    pub fn of(key: impl Into<String>, bytes: &[u8]) -> Self {
        ObjectRef { key: key.into(), size: bytes.len() as u64, crc32c: crc32c::crc32c(bytes), pages: None }
    }

    /// What every page of the object's chain carries in its special space,
    /// so a page that has since been freed and reused by another chain is
    /// never taken for one of this object's. Of the bytes, not the key: a
    /// copy adopted under another key keeps its pages.
    pub fn page_tag(&self) -> u64 {
        self.size.rotate_left(32) ^ u64::from(self.crc32c)
    }
}

/// An object reference as versions 1 to 3 stored it: no pages.
#[derive(Deserialize)]
struct ObjectRefV3 {
    key: String,
    size: u64,
    crc32c: u32,
}

impl From<ObjectRefV3> for ObjectRef {
    fn from(o: ObjectRefV3) -> Self {
        ObjectRef { key: o.key, size: o.size, crc32c: o.crc32c, pages: None }
    }
}

/// What a flush (or a compaction) wrote, for the manifest to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct Flushed {
    pub segment: SegmentId,
    pub rows: u64,
    pub insert_binlog: ObjectRef,
    /// None for segments small enough that brute force beats a graph.
    pub index_file: Option<ObjectRef>,
    /// The filter columns of a multicolumn index's segment.
    pub scalar_binlog: Option<ObjectRef>,
    /// Bytes written, every object.
    pub bytes: u64,
    /// The rows' keys, in their binlog order.
    pub row_keys: Vec<u64>,
    /// Where the index's pages hold `row_keys`, if they do (an index on a
    /// shared store: [`SegmentEntry::keys`]).
    pub keys: Option<ObjectRef>,
}

impl Flushed {
    /// The objects written, to change (their pages).
    pub fn objects_mut(&mut self) -> impl Iterator<Item = &mut ObjectRef> {
        std::iter::once(&mut self.insert_binlog).chain(self.index_file.iter_mut()).chain(self.scalar_binlog.iter_mut())
    }
}

/// A manifest change that does not fit the segments it names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("segment {0} is not in the manifest")]
    UnknownSegment(SegmentId),
    #[error(transparent)]
    Lifecycle(#[from] LifecycleError),
}

/// A change that does not fit the manifest is a bug, never the user's doing.
impl SqlError for ManifestError {
    fn sqlstate(&self) -> SqlState {
        SqlState::InternalError
    }
}

/// One segment: its metadata and the objects that hold it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentEntry {
    pub meta: SegmentMeta,
    pub insert_binlog: Option<ObjectRef>,
    pub index_file: Option<ObjectRef>,
    pub delta_binlogs: Vec<ObjectRef>,
    /// Row positions VACUUM found dead that no delta binlog holds yet.
    pub pending_tombstones: RowRuns,
    /// The segment's keys (heap TIDs, 8 bytes each, little-endian, in
    /// binlog order) in a chain of the index's pages, for an index on a
    /// shared store: with its delta binlogs also in pages, VACUUM then
    /// reads no object from the store nor the cache. Not an object of the
    /// store: `key` only names it in messages. `None` on the embedded store,
    /// whose objects are all in pages.
    pub keys: Option<ObjectRef>,
    /// Its filter columns (a multicolumn index's), row for row with the
    /// insert binlog.
    pub scalar_binlog: Option<ObjectRef>,
}

/// Row positions as sorted runs `(first, count)`, the form pending
/// tombstones take in the manifest: rows that die together are mostly
/// neighbours (rows of one range of ids, old rows), which take one run,
/// and the manifest is rewritten whole at every change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowRuns(Vec<(u32, u32)>);

impl RowRuns {
    /// The runs of `rows`, in any order, duplicates ignored.
    pub fn of(rows: impl IntoIterator<Item = u32>) -> Self {
        let mut sorted: Vec<u32> = rows.into_iter().collect();
        sorted.sort_unstable();
        sorted.dedup();
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for row in sorted {
            match runs.last_mut() {
                Some((first, count)) if *first as u64 + *count as u64 == row as u64 => *count += 1,
                _ => runs.push((row, 1)),
            }
        }
        RowRuns(runs)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        self.0.iter().map(|(_, count)| *count as usize).sum()
    }

    /// The rows, in order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().flat_map(|(first, count)| *first..=*first + (*count - 1))
    }

    /// How many runs: what the manifest stores.
    pub fn runs(&self) -> usize {
        self.0.len()
    }

    fn add(&mut self, rows: &[u32]) {
        *self = RowRuns::of(self.iter().chain(rows.iter().copied()));
    }

    fn remove(&mut self, rows: &[u32]) {
        let gone: std::collections::HashSet<u32> = rows.iter().copied().collect();
        *self = RowRuns::of(self.iter().filter(|r| !gone.contains(r)));
    }
}

impl SegmentEntry {
    fn new(meta: SegmentMeta) -> Self {
        SegmentEntry {
            meta,
            insert_binlog: None,
            index_file: None,
            delta_binlogs: vec![],
            pending_tombstones: RowRuns::default(),
            keys: None,
            scalar_binlog: None,
        }
    }

    /// The objects a search opens: the insert binlog, the index file and
    /// the scalar binlog (not the delta binlogs).
    pub fn segment_files(&self) -> impl Iterator<Item = &ObjectRef> {
        self.insert_binlog.iter().chain(self.index_file.iter()).chain(self.scalar_binlog.iter())
    }

    /// Every object this entry references.
    pub fn objects(&self) -> impl Iterator<Item = &ObjectRef> {
        self.segment_files().chain(self.delta_binlogs.iter())
    }

    /// The same, to change.
    pub fn objects_mut(&mut self) -> impl Iterator<Item = &mut ObjectRef> {
        self.insert_binlog
            .iter_mut()
            .chain(self.index_file.iter_mut())
            .chain(self.scalar_binlog.iter_mut())
            .chain(self.delta_binlogs.iter_mut())
    }

    /// Every chain of pages this entry names: its objects' and its keys'.
    pub fn chains(&self) -> impl Iterator<Item = &ObjectRef> {
        self.objects().chain(self.keys.iter()).filter(|o| o.pages.is_some())
    }

    /// What changes when the segment's tombstones do: a loaded copy of it
    /// is stale once this differs.
    pub fn tombstone_version(&self) -> (usize, usize) {
        (self.delta_binlogs.len(), self.pending_tombstones.len())
    }
}

/// A segment's metadata as versions 1 to 4 stored it: no drop time.
#[derive(Deserialize)]
struct SegmentMetaV4 {
    id: SegmentId,
    state: SegmentState,
    index_state: IndexState,
    rows: u64,
    deleted_rows: u64,
    bytes: u64,
    seal_reason: Option<SealReason>,
    created_at: u64,
    sealed_at: Option<u64>,
    flushed_at: Option<u64>,
}

impl From<SegmentMetaV4> for SegmentMeta {
    fn from(m: SegmentMetaV4) -> Self {
        SegmentMeta {
            id: m.id,
            state: m.state,
            index_state: m.index_state,
            rows: m.rows,
            deleted_rows: m.deleted_rows,
            bytes: m.bytes,
            seal_reason: m.seal_reason,
            created_at: m.created_at,
            sealed_at: m.sealed_at,
            flushed_at: m.flushed_at,
            dropped_at: None,
        }
    }
}

/// A segment as versions 1 and 2 stored it: no pending tombstones.
#[derive(Deserialize)]
struct SegmentEntryV2 {
    meta: SegmentMetaV4,
    insert_binlog: Option<ObjectRefV3>,
    index_file: Option<ObjectRefV3>,
    delta_binlogs: Vec<ObjectRefV3>,
}

impl From<SegmentEntryV2> for SegmentEntryV3 {
    fn from(e: SegmentEntryV2) -> Self {
        SegmentEntryV3 {
            meta: e.meta,
            insert_binlog: e.insert_binlog,
            index_file: e.index_file,
            delta_binlogs: e.delta_binlogs,
            pending_tombstones: RowRuns::default(),
        }
    }
}

/// A segment as version 3 stored it: objects without pages.
#[derive(Deserialize)]
struct SegmentEntryV3 {
    meta: SegmentMetaV4,
    insert_binlog: Option<ObjectRefV3>,
    index_file: Option<ObjectRefV3>,
    delta_binlogs: Vec<ObjectRefV3>,
    pending_tombstones: RowRuns,
}

impl From<SegmentEntryV3> for SegmentEntryV4 {
    fn from(e: SegmentEntryV3) -> Self {
        SegmentEntryV4 {
            meta: e.meta,
            insert_binlog: e.insert_binlog.map(ObjectRef::from),
            index_file: e.index_file.map(ObjectRef::from),
            delta_binlogs: e.delta_binlogs.into_iter().map(ObjectRef::from).collect(),
            pending_tombstones: e.pending_tombstones,
        }
    }
}

/// A segment as version 4 stored it: no drop time.
#[derive(Deserialize)]
struct SegmentEntryV4 {
    meta: SegmentMetaV4,
    insert_binlog: Option<ObjectRef>,
    index_file: Option<ObjectRef>,
    delta_binlogs: Vec<ObjectRef>,
    pending_tombstones: RowRuns,
}

impl From<SegmentEntryV4> for SegmentEntry {
    fn from(e: SegmentEntryV4) -> Self {
        SegmentEntry {
            meta: e.meta.into(),
            insert_binlog: e.insert_binlog,
            index_file: e.index_file,
            delta_binlogs: e.delta_binlogs,
            pending_tombstones: e.pending_tombstones,
            keys: None,
            scalar_binlog: None,
        }
    }
}

/// A segment as version 5 stored it: no filter columns.
#[derive(Deserialize)]
struct SegmentEntryV5 {
    meta: SegmentMeta,
    insert_binlog: Option<ObjectRef>,
    index_file: Option<ObjectRef>,
    delta_binlogs: Vec<ObjectRef>,
    pending_tombstones: RowRuns,
    keys: Option<ObjectRef>,
}

impl From<SegmentEntryV5> for SegmentEntry {
    fn from(e: SegmentEntryV5) -> Self {
        SegmentEntry {
            meta: e.meta,
            insert_binlog: e.insert_binlog,
            index_file: e.index_file,
            delta_binlogs: e.delta_binlogs,
            pending_tombstones: e.pending_tombstones,
            keys: e.keys,
            scalar_binlog: None,
        }
    }
}

/// The current manifest (format version [`VERSION`]; version 1 decodes too).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Increases by one with every change; caches compare it to reload.
    pub generation: u64,
    /// The next segment id to hand out: ids are never reused.
    pub next_segment_id: u64,
    pub dims: u32,
    pub metric: u8,
    pub segments: Vec<SegmentEntry>,
    /// Where the objects live (`s3://bucket/prefix`, `file:///dir`); `None`
    /// for the server's embedded default directory.
    pub storage_url: Option<String>,
}

/// The body of a version 1 manifest.
#[derive(Deserialize)]
struct ManifestV1 {
    generation: u64,
    next_segment_id: u64,
    dims: u32,
    metric: u8,
    segments: Vec<SegmentEntryV2>,
}

impl From<ManifestV1> for Manifest {
    fn from(m: ManifestV1) -> Self {
        ManifestV2 {
            generation: m.generation,
            next_segment_id: m.next_segment_id,
            dims: m.dims,
            metric: m.metric,
            segments: m.segments,
            storage_url: None,
        }
        .into()
    }
}

/// The body of a version 2 manifest.
#[derive(Deserialize)]
struct ManifestV2 {
    generation: u64,
    next_segment_id: u64,
    dims: u32,
    metric: u8,
    segments: Vec<SegmentEntryV2>,
    storage_url: Option<String>,
}

impl From<ManifestV2> for Manifest {
    fn from(m: ManifestV2) -> Self {
        ManifestV3 {
            generation: m.generation,
            next_segment_id: m.next_segment_id,
            dims: m.dims,
            metric: m.metric,
            segments: m.segments.into_iter().map(SegmentEntryV3::from).collect(),
            storage_url: m.storage_url,
        }
        .into()
    }
}

/// The body of a version 3 manifest.
#[derive(Deserialize)]
struct ManifestV3 {
    generation: u64,
    next_segment_id: u64,
    dims: u32,
    metric: u8,
    segments: Vec<SegmentEntryV3>,
    storage_url: Option<String>,
}

impl From<ManifestV3> for Manifest {
    fn from(m: ManifestV3) -> Self {
        ManifestV4 {
            generation: m.generation,
            next_segment_id: m.next_segment_id,
            dims: m.dims,
            metric: m.metric,
            segments: m.segments.into_iter().map(SegmentEntryV4::from).collect(),
            storage_url: m.storage_url,
        }
        .into()
    }
}

/// The body of a version 4 manifest.
#[derive(Deserialize)]
struct ManifestV4 {
    generation: u64,
    next_segment_id: u64,
    dims: u32,
    metric: u8,
    segments: Vec<SegmentEntryV4>,
    storage_url: Option<String>,
}

impl From<ManifestV4> for Manifest {
    fn from(m: ManifestV4) -> Self {
        Manifest {
            generation: m.generation,
            next_segment_id: m.next_segment_id,
            dims: m.dims,
            metric: m.metric,
            segments: m.segments.into_iter().map(SegmentEntry::from).collect(),
            storage_url: m.storage_url,
        }
    }
}

/// The body of a version 5 manifest.
#[derive(Deserialize)]
struct ManifestV5 {
    generation: u64,
    next_segment_id: u64,
    dims: u32,
    metric: u8,
    segments: Vec<SegmentEntryV5>,
    storage_url: Option<String>,
}

impl From<ManifestV5> for Manifest {
    fn from(m: ManifestV5) -> Self {
        Manifest {
            generation: m.generation,
            next_segment_id: m.next_segment_id,
            dims: m.dims,
            metric: m.metric,
            segments: m.segments.into_iter().map(SegmentEntry::from).collect(),
            storage_url: m.storage_url,
        }
    }
}

impl Manifest {
    pub fn new(dims: u32, metric: crate::Metric, storage_url: Option<String>) -> Self {
        Manifest { generation: 0, next_segment_id: 1, dims, metric: metric.code(), segments: Vec::new(), storage_url }
    }

    /// Segments searches must read (everything not dropped).
    pub fn live_segments(&self) -> impl Iterator<Item = &SegmentEntry> {
        self.segments.iter().filter(|s| s.meta.state.is_searchable())
    }

    /// Flushed segments: those whose objects searches, VACUUM and the
    /// maintenance functions read.
    pub fn flushed_segments(&self) -> impl Iterator<Item = &SegmentEntry> {
        self.segments.iter().filter(|s| s.meta.state == SegmentState::Flushed)
    }

    pub fn segment(&self, id: SegmentId) -> Option<&SegmentEntry> {
        self.segments.iter().find(|s| s.meta.id == id)
    }

    fn segment_mut(&mut self, id: SegmentId) -> Result<&mut SegmentEntry, ManifestError> {
        self.segments.iter_mut().find(|s| s.meta.id == id).ok_or(ManifestError::UnknownSegment(id))
    }

    fn allocate(&mut self) -> SegmentId {
        let id = SegmentId(self.next_segment_id);
        self.next_segment_id += 1;
        id
    }

    /// Adds a new, empty growing segment.
    pub fn add_growing(&mut self, now: u64) -> SegmentId {
        let id = self.allocate();
        self.segments.push(SegmentEntry::new(SegmentMeta::growing(id, now)));
        self.generation += 1;
        id
    }

    /// Seals a growing segment holding `rows` rows.
    pub fn seal(&mut self, id: SegmentId, rows: u64, reason: SealReason, now: u64) -> Result<(), ManifestError> {
        let entry = self.segment_mut(id)?;
        entry.meta.seal(reason, now)?;
        entry.meta.rows = rows;
        self.generation += 1;
        Ok(())
    }

    /// Publishes a flush of a sealed (or flushing) segment.
    pub fn publish_flush(&mut self, flushed: Flushed, now: u64) -> Result<(), ManifestError> {
        let entry = self.segment_mut(flushed.segment)?;
        if entry.meta.state == SegmentState::Sealed {
            entry.meta.start_flush()?;
        }
        publish(entry, flushed, now)?;
        self.generation += 1;
        Ok(())
    }

    /// Records a delta binlog of `count` new tombstones for a flushed segment.
    pub fn add_tombstones(&mut self, id: SegmentId, delta: ObjectRef, count: u64) -> Result<(), ManifestError> {
        let entry = self.segment_mut(id)?;
        entry.meta.deleted_rows = (entry.meta.deleted_rows + count).min(entry.meta.rows);
        entry.delta_binlogs.push(delta);
        self.generation += 1;
        Ok(())
    }

    /// Names the chain of pages holding a flushed segment's keys (an index
    /// on a shared store), written after its flush was published, into the
    /// pages its rows left.
    pub fn set_keys(&mut self, id: SegmentId, keys: ObjectRef) -> Result<(), ManifestError> {
        let entry = self.segment_mut(id)?;
        if entry.meta.state != SegmentState::Flushed {
            return Err(
                LifecycleError::Segment { segment: id, from: entry.meta.state, to: SegmentState::Flushed }.into()
            );
        }
        entry.keys = Some(keys);
        self.generation += 1;
        Ok(())
    }

    /// Records rows of a flushed segment that VACUUM found dead, in the
    /// manifest alone: searches skip them from this change on, and
    /// [`Manifest::settle_tombstones`] moves them to a delta binlog later.
    pub fn add_pending_tombstones(&mut self, id: SegmentId, rows: &[u32]) -> Result<(), ManifestError> {
        let entry = self.segment_mut(id)?;
        entry.meta.deleted_rows = (entry.meta.deleted_rows + rows.len() as u64).min(entry.meta.rows);
        entry.pending_tombstones.add(rows);
        self.generation += 1;
        Ok(())
    }

    /// Publishes a delta binlog holding `rows`, pending tombstones of the
    /// segment, which stop being pending (those recorded since stay). The
    /// deleted count does not change: they were counted when recorded.
    pub fn settle_tombstones(&mut self, id: SegmentId, delta: ObjectRef, rows: &[u32]) -> Result<(), ManifestError> {
        let entry = self.segment_mut(id)?;
        entry.pending_tombstones.remove(rows);
        entry.delta_binlogs.push(delta);
        self.generation += 1;
        Ok(())
    }

    /// Swaps compaction inputs for its outputs (one, or a clustering's
    /// several) in one change: the inputs become dropped at `now` (their
    /// objects garbage once the grace period has passed since).
    pub fn publish_compaction(
        &mut self,
        inputs: &[SegmentId],
        outputs: Vec<Flushed>,
        clustering: bool,
        now: u64,
    ) -> Result<(), ManifestError> {
        for id in inputs {
            self.segment_mut(*id)?.meta.drop_(now)?;
        }
        let inputs = inputs.to_vec();
        let reason = if clustering { SealReason::Clustering { inputs } } else { SealReason::Compaction { inputs } };
        for output in outputs {
            self.add_flushed(reason.clone(), output, now)?;
        }
        Ok(())
    }

    /// Publishes a segment CREATE INDEX wrote straight from the table's rows
    /// (its id from [`Manifest::allocate_segment_id`]): sealed by the build
    /// and flushed at once, its rows never in the index's pages.
    pub fn publish_built(&mut self, output: Flushed, now: u64) -> Result<(), ManifestError> {
        self.add_flushed(SealReason::Build, output, now)
    }

    /// A new segment, already flushed: a compaction's output or a build's.
    fn add_flushed(&mut self, reason: SealReason, output: Flushed, now: u64) -> Result<(), ManifestError> {
        let mut meta = SegmentMeta::growing(output.segment, now);
        meta.seal(reason, now)?;
        meta.start_flush()?;
        let mut entry = SegmentEntry::new(meta);
        publish(&mut entry, output, now)?;
        self.segments.push(entry);
        self.generation += 1;
        Ok(())
    }

    /// Drops segments without a replacement: compaction of segments whose
    /// every row is deleted.
    pub fn drop_segments(&mut self, ids: &[SegmentId], now: u64) -> Result<(), ManifestError> {
        for id in ids {
            self.segment_mut(*id)?.meta.drop_(now)?;
        }
        self.generation += 1;
        Ok(())
    }

    /// Forgets dropped segments whose objects are all gone (`gone(key)`),
    /// so the manifest does not grow forever; returns how many.
    pub fn forget_dropped(&mut self, gone: impl Fn(&str) -> bool) -> usize {
        let before = self.segments.len();
        self.segments.retain(|e| e.meta.state != SegmentState::Dropped || !e.objects().all(|o| gone(&o.key)));
        let forgotten = before - self.segments.len();
        if forgotten > 0 {
            self.generation += 1;
        }
        forgotten
    }

    /// A fresh id for a compaction's output (ids are never reused).
    pub fn allocate_segment_id(&mut self) -> SegmentId {
        let id = self.allocate();
        self.generation += 1;
        id
    }

    /// The objects of segments that are not dropped whose keys lie outside
    /// `prefix`: an index's own objects are all under its prefix, so these
    /// are another index instance's (the manifest was copied with a
    /// database or a cluster), which that instance may delete.
    pub fn foreign_objects(&self, prefix: &str) -> Vec<(SegmentId, ObjectRef)> {
        self.segments
            .iter()
            .filter(|s| s.meta.state != SegmentState::Dropped)
            .flat_map(|s| s.objects().map(move |o| (s.meta.id, o)))
            .filter(|(_, o)| !o.key.starts_with(prefix))
            .map(|(id, o)| (id, o.clone()))
            .collect()
    }

    /// Points every reference of a segment that is not dropped from an old
    /// key to its copy (`moved`: old key, new key); returns how many it
    /// changed. Dropped segments keep the old keys: they are nobody's to
    /// copy, and GC never deletes outside its own prefix.
    pub fn rehome(&mut self, moved: &std::collections::HashMap<String, String>) -> usize {
        let mut changed = 0;
        for s in self.segments.iter_mut().filter(|s| s.meta.state != SegmentState::Dropped) {
            for o in s.objects_mut() {
                if let Some(to) = moved.get(&o.key) {
                    o.key = to.clone();
                    changed += 1;
                }
            }
        }
        if changed > 0 {
            self.generation += 1;
        }
        changed
    }

    /// Every object of every segment, dropped ones included: what the
    /// manifest references, and so what its pages must keep.
    pub fn objects(&self) -> impl Iterator<Item = &ObjectRef> {
        self.segments.iter().flat_map(|s| s.objects())
    }

    /// The objects of segments that are not dropped without pages: an
    /// embedded index's manifest from before version 4 has them.
    pub fn unpaged_objects(&self) -> Vec<ObjectRef> {
        let live = self.segments.iter().filter(|s| s.meta.state != SegmentState::Dropped);
        live.flat_map(|s| s.objects()).filter(|o| o.pages.is_none()).cloned().collect()
    }

    /// Points objects without pages at the chains `paged` (key, first
    /// page) holds them in; returns how many it changed.
    pub fn set_pages(&mut self, paged: &std::collections::HashMap<String, Block>) -> usize {
        let mut changed = 0;
        for o in self.segments.iter_mut().flat_map(|s| s.objects_mut()).filter(|o| o.pages.is_none()) {
            if let Some(head) = paged.get(&o.key) {
                o.pages = Some(*head);
                changed += 1;
            }
        }
        if changed > 0 {
            self.generation += 1;
        }
        changed
    }

    /// Every chain of pages the manifest names (objects and keys).
    pub fn chains(&self) -> impl Iterator<Item = &ObjectRef> {
        self.segments.iter().flat_map(|s| s.chains())
    }

    /// Every object key a non-dropped segment references: what GC keeps
    /// with no grace period.
    pub fn referenced_keys(&self) -> impl Iterator<Item = &str> {
        self.kept_keys(0, std::time::Duration::ZERO)
    }

    /// What garbage collection keeps at `now` (Unix seconds): the objects
    /// of segments that are not dropped, and of segments dropped less than
    /// `grace` ago, which a query that started before the drop, a copy of
    /// the index or a point-in-time restore within the grace period may
    /// still read. A segment dropped under format version 4 or older has no
    /// drop time: its objects age from their creation, in storage.
    pub fn kept_keys(&self, now: u64, grace: std::time::Duration) -> impl Iterator<Item = &str> {
        self.segments
            .iter()
            .filter(move |s| match (s.meta.state, s.meta.dropped_at) {
                (SegmentState::Dropped, Some(at)) => now.saturating_sub(at) < grace.as_secs(),
                (SegmentState::Dropped, None) => false,
                _ => true,
            })
            .flat_map(|s| s.objects())
            .map(|o| o.key.as_str())
    }

    pub fn encode(&self) -> Vec<u8> {
        let body =
            bincode::serde::encode_to_vec(self, bincode::config::standard()).expect("a manifest always serializes");
        let mut w = Writer(Vec::with_capacity(HEADER_LEN + body.len()));
        w.bytes(MAGIC).u16(VERSION).u16(0).u64(body.len() as u64).u32(crc32c::crc32c(&body));
        let mut out = finish_header(w, HEADER_LEN);
        out.extend_from_slice(&body);
        out
    }

    /// Verifies and decodes a manifest of any version this build reads.
    pub fn decode(object: &str, bytes: &[u8]) -> Result<Self, FormatError> {
        let version = check_header(object, bytes, HEADER_LEN, MAGIC, "manifest", VERSION)?;
        let mut r = Reader::new(&bytes[12..]);
        let body_len = r.u64();
        let body_crc = r.u32();
        let body = &bytes[HEADER_LEN..];
        check_body(object, body, body_len, body_crc, Check::Full)?;
        match version {
            1 => decode_body::<ManifestV1>(object, body).map(Manifest::from),
            2 => decode_body::<ManifestV2>(object, body).map(Manifest::from),
            3 => decode_body::<ManifestV3>(object, body).map(Manifest::from),
            4 => decode_body::<ManifestV4>(object, body).map(Manifest::from),
            5 => decode_body::<ManifestV5>(object, body).map(Manifest::from),
            // 7 added a seal reason (clustering): 6's bodies read as 7's.
            6 | 7 => decode_body::<Manifest>(object, body),
            _ => unreachable!("check_header refuses versions above {VERSION}"),
        }
    }
}

/// A whole body, nothing after it.
fn decode_body<T: serde::de::DeserializeOwned>(object: &str, body: &[u8]) -> Result<T, FormatError> {
    let invalid = |e: bincode::error::DecodeError| {
        FormatError::new(object, FormatErrorKind::Invalid(format!("manifest body: {e}")))
    };
    let (m, used): (T, usize) =
        bincode::serde::decode_from_slice(body, bincode::config::standard()).map_err(invalid)?;
    if used != body.len() {
        return Err(FormatError::new(
            object,
            FormatErrorKind::Invalid(format!("{} bytes after the manifest body", body.len() - used)),
        ));
    }
    Ok(m)
}

/// Moves a flushing segment to flushed with the objects the job wrote.
fn publish(entry: &mut SegmentEntry, flushed: Flushed, now: u64) -> Result<(), LifecycleError> {
    entry.meta.rows = flushed.rows;
    entry.meta.flushed(flushed.bytes, now)?;
    if flushed.index_file.is_some() {
        entry.meta.set_index_state(IndexState::Building)?;
        entry.meta.set_index_state(IndexState::Ready)?;
    }
    entry.insert_binlog = Some(flushed.insert_binlog);
    entry.index_file = flushed.index_file;
    entry.scalar_binlog = flushed.scalar_binlog;
    entry.keys = flushed.keys.filter(|k| k.pages.is_some());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::testing::*;
    use proptest::prelude::*;

    fn sample() -> Manifest {
        let mut m = Manifest::new(128, crate::Metric::L2, Some("s3://bucket/prefix".into()));
        let mut flushed = SegmentMeta::growing(SegmentId(1), 10);
        flushed.rows = 1000;
        flushed.deleted_rows = 3;
        flushed.seal(SealReason::Rows { rows: 1000, max_rows: 1000 }, 11).unwrap();
        flushed.start_flush().unwrap();
        flushed.flushed(516_000, 12).unwrap();
        flushed.set_index_state(IndexState::Building).unwrap();
        m.segments.push(SegmentEntry {
            meta: flushed,
            insert_binlog: Some(ObjectRef::of("i/1/seg/1/insert", b"abc")),
            index_file: None,
            delta_binlogs: vec![ObjectRef::of("i/1/seg/1/delta-1", b"d")],
            pending_tombstones: RowRuns::default(),
            keys: None,
            scalar_binlog: None,
        });
        m.segments.push(SegmentEntry::new(SegmentMeta::growing(SegmentId(2), 12)));
        m.next_segment_id = 3;
        m.generation = 7;
        m
    }

    /// An object as versions 1 to 3 wrote it.
    #[derive(Serialize)]
    struct OldRef<'a> {
        key: &'a str,
        size: u64,
        crc32c: u32,
    }

    fn old_ref(o: &ObjectRef) -> OldRef<'_> {
        assert_eq!(o.pages, None, "older versions know no pages");
        OldRef { key: &o.key, size: o.size, crc32c: o.crc32c }
    }

    /// A segment's metadata as versions 1 to 4 wrote it: bincode writes a
    /// struct as its fields in order, so the current fields but the last.
    #[derive(Serialize)]
    struct OldMeta<'a> {
        id: SegmentId,
        state: SegmentState,
        index_state: IndexState,
        rows: u64,
        deleted_rows: u64,
        bytes: u64,
        seal_reason: &'a Option<SealReason>,
        created_at: u64,
        sealed_at: Option<u64>,
        flushed_at: Option<u64>,
    }

    fn old_meta(m: &SegmentMeta) -> OldMeta<'_> {
        assert_eq!(m.dropped_at, None, "older versions know no drop time");
        let SegmentMeta {
            id, state, index_state, rows, deleted_rows, bytes, created_at, sealed_at, flushed_at, ..
        } = *m;
        let seal_reason = &m.seal_reason;
        OldMeta { id, state, index_state, rows, deleted_rows, bytes, seal_reason, created_at, sealed_at, flushed_at }
    }

    /// A segment as versions 1 and 2 wrote it.
    #[derive(Serialize)]
    struct OldEntry<'a> {
        meta: OldMeta<'a>,
        insert_binlog: Option<OldRef<'a>>,
        index_file: Option<OldRef<'a>>,
        delta_binlogs: Vec<OldRef<'a>>,
    }

    fn old_entries(m: &Manifest) -> Vec<OldEntry<'_>> {
        m.segments
            .iter()
            .map(|e| OldEntry {
                meta: old_meta(&e.meta),
                insert_binlog: e.insert_binlog.as_ref().map(old_ref),
                index_file: e.index_file.as_ref().map(old_ref),
                delta_binlogs: e.delta_binlogs.iter().map(old_ref).collect(),
            })
            .collect()
    }

    fn with_header(version: u16, body: &[u8]) -> Vec<u8> {
        let mut w = Writer(Vec::new());
        w.bytes(MAGIC).u16(version).u16(0).u64(body.len() as u64).u32(crc32c::crc32c(body));
        let mut bytes = finish_header(w, HEADER_LEN);
        bytes.extend_from_slice(body);
        bytes
    }

    #[test]
    fn reads_version_1_as_the_default_storage() {
        // A version 1 body is a version 2 body without its last field.
        #[derive(Serialize)]
        struct V1<'a> {
            generation: u64,
            next_segment_id: u64,
            dims: u32,
            metric: u8,
            segments: Vec<OldEntry<'a>>,
        }
        let m = sample();
        let v1 = V1 {
            generation: m.generation,
            next_segment_id: m.next_segment_id,
            dims: m.dims,
            metric: m.metric,
            segments: old_entries(&m),
        };
        let body = bincode::serde::encode_to_vec(&v1, bincode::config::standard()).unwrap();
        assert_eq!(Manifest::decode("o", &with_header(1, &body)).unwrap(), Manifest { storage_url: None, ..m });
    }

    #[test]
    fn reads_version_2_with_nothing_pending() {
        #[derive(Serialize)]
        struct V2<'a> {
            generation: u64,
            next_segment_id: u64,
            dims: u32,
            metric: u8,
            segments: Vec<OldEntry<'a>>,
            storage_url: &'a Option<String>,
        }
        let m = sample();
        let v2 = V2 {
            generation: m.generation,
            next_segment_id: m.next_segment_id,
            dims: m.dims,
            metric: m.metric,
            segments: old_entries(&m),
            storage_url: &m.storage_url,
        };
        let body = bincode::serde::encode_to_vec(&v2, bincode::config::standard()).unwrap();
        assert_eq!(Manifest::decode("o", &with_header(2, &body)).unwrap(), m);
    }

    #[test]
    fn reads_version_3_with_no_object_in_pages() {
        #[derive(Serialize)]
        struct V3<'a> {
            generation: u64,
            next_segment_id: u64,
            dims: u32,
            metric: u8,
            segments: Vec<(OldEntry<'a>, &'a RowRuns)>,
            storage_url: &'a Option<String>,
        }
        let mut m = sample();
        m.add_pending_tombstones(SegmentId(1), &[4, 5]).unwrap();
        // bincode writes a struct as its fields in order, as it writes a
        // tuple: an old entry then its pending rows is a version 3 entry.
        let v3 = V3 {
            generation: m.generation,
            next_segment_id: m.next_segment_id,
            dims: m.dims,
            metric: m.metric,
            segments: old_entries(&m).into_iter().zip(m.segments.iter().map(|e| &e.pending_tombstones)).collect(),
            storage_url: &m.storage_url,
        };
        let body = bincode::serde::encode_to_vec(&v3, bincode::config::standard()).unwrap();
        assert_eq!(Manifest::decode("o", &with_header(3, &body)).unwrap(), m);
    }

    #[test]
    fn reads_version_4_with_no_drop_time() {
        #[derive(Serialize)]
        struct V4Entry<'a> {
            meta: OldMeta<'a>,
            insert_binlog: &'a Option<ObjectRef>,
            index_file: &'a Option<ObjectRef>,
            delta_binlogs: &'a Vec<ObjectRef>,
            pending_tombstones: &'a RowRuns,
        }
        #[derive(Serialize)]
        struct V4<'a> {
            generation: u64,
            next_segment_id: u64,
            dims: u32,
            metric: u8,
            segments: Vec<V4Entry<'a>>,
            storage_url: &'a Option<String>,
        }
        let mut m = sample();
        m.segments[0].insert_binlog.as_mut().unwrap().pages = Some(17);
        let v4 = V4 {
            generation: m.generation,
            next_segment_id: m.next_segment_id,
            dims: m.dims,
            metric: m.metric,
            segments: m
                .segments
                .iter()
                .map(|e| V4Entry {
                    meta: old_meta(&e.meta),
                    insert_binlog: &e.insert_binlog,
                    index_file: &e.index_file,
                    delta_binlogs: &e.delta_binlogs,
                    pending_tombstones: &e.pending_tombstones,
                })
                .collect(),
            storage_url: &m.storage_url,
        };
        let body = bincode::serde::encode_to_vec(&v4, bincode::config::standard()).unwrap();
        assert_eq!(Manifest::decode("o", &with_header(4, &body)).unwrap(), m);
    }

    #[test]
    fn reads_version_5_with_no_filter_columns() {
        #[derive(Serialize)]
        struct V5Entry<'a> {
            meta: &'a SegmentMeta,
            insert_binlog: &'a Option<ObjectRef>,
            index_file: &'a Option<ObjectRef>,
            delta_binlogs: &'a Vec<ObjectRef>,
            pending_tombstones: &'a RowRuns,
            keys: &'a Option<ObjectRef>,
        }
        #[derive(Serialize)]
        struct V5<'a> {
            generation: u64,
            next_segment_id: u64,
            dims: u32,
            metric: u8,
            segments: Vec<V5Entry<'a>>,
            storage_url: &'a Option<String>,
        }
        let mut m = sample();
        m.segments[0].keys = Some(ObjectRef::of("keys of 1", b"k"));
        let v5 = V5 {
            generation: m.generation,
            next_segment_id: m.next_segment_id,
            dims: m.dims,
            metric: m.metric,
            segments: m
                .segments
                .iter()
                .map(|e| V5Entry {
                    meta: &e.meta,
                    insert_binlog: &e.insert_binlog,
                    index_file: &e.index_file,
                    delta_binlogs: &e.delta_binlogs,
                    pending_tombstones: &e.pending_tombstones,
                    keys: &e.keys,
                })
                .collect(),
            storage_url: &m.storage_url,
        };
        let body = bincode::serde::encode_to_vec(&v5, bincode::config::standard()).unwrap();
        assert_eq!(Manifest::decode("o", &with_header(5, &body)).unwrap(), m);
        // Version 6 keeps a segment's scalar binlog, among its objects.
        m.segments[0].scalar_binlog = Some(ObjectRef::of("i/1/seg/1/scalar", b"s"));
        let decoded = Manifest::decode("o", &m.encode()).unwrap();
        assert_eq!(decoded, m);
        assert!(decoded.referenced_keys().any(|k| k == "i/1/seg/1/scalar"));
    }

    #[test]
    fn a_dropped_segment_is_kept_for_the_grace_period_from_its_drop() {
        let grace = std::time::Duration::from_secs(100);
        let mut m = sample();
        let (old, new) = (SegmentId(1), m.allocate_segment_id());
        let out = Flushed {
            segment: new,
            rows: 9,
            insert_binlog: ObjectRef::of("i/3", b"x"),
            index_file: None,
            bytes: 1,
            row_keys: vec![],
            keys: None,
            scalar_binlog: None,
        };
        // Objects made long ago, dropped at 1000: kept until 1100.
        m.publish_compaction(&[old], vec![out], false, 1000).unwrap();
        assert_eq!(m.segment(old).unwrap().meta.dropped_at, Some(1000));
        let all = ["i/1/seg/1/insert", "i/1/seg/1/delta-1", "i/3"];
        assert_eq!(m.kept_keys(1000, grace).collect::<Vec<_>>(), all);
        assert_eq!(m.kept_keys(1099, grace).collect::<Vec<_>>(), all);
        assert_eq!(m.kept_keys(1100, grace).collect::<Vec<_>>(), ["i/3"]);
        assert_eq!(m.kept_keys(1000, std::time::Duration::ZERO).collect::<Vec<_>>(), ["i/3"], "no grace");
        assert_eq!(m.kept_keys(900, grace).count(), 3, "a clock set back keeps, never loses");
        assert_eq!(Manifest::decode("o", &m.encode()).unwrap(), m, "the drop time round-trips");
        // Dropped under version 4 (no time): its objects age in storage.
        m.segments[0].meta.dropped_at = None;
        assert_eq!(m.kept_keys(1000, grace).collect::<Vec<_>>(), ["i/3"]);
    }

    #[test]
    fn a_segments_keys_in_pages_are_a_chain_not_an_object() {
        let mut m = sample();
        let mut keys = ObjectRef::of("keys of segment 1", &7u64.to_le_bytes());
        keys.pages = Some(30);
        let generation = m.generation;
        m.set_keys(SegmentId(1), keys.clone()).unwrap();
        assert_eq!((m.segments[0].keys.as_ref(), m.generation), (Some(&keys), generation + 1));
        assert!(m.set_keys(SegmentId(2), keys.clone()).is_err(), "a growing segment has no keys in pages");
        assert_eq!(Manifest::decode("o", &m.encode()).unwrap(), m, "round-trips");
        assert!(m.objects().all(|o| o.key != keys.key), "not the store's: never collected, verified or adopted");
        assert!(m.kept_keys(0, std::time::Duration::ZERO).all(|k| k != keys.key));
        assert_eq!(m.chains().filter_map(|c| c.pages).collect::<Vec<_>>(), [30], "but its pages are accounted");
    }

    #[test]
    fn objects_keep_their_pages_across_a_round_trip() {
        let mut m = sample();
        m.segments[0].insert_binlog.as_mut().unwrap().pages = Some(17);
        let back = Manifest::decode("o", &m.encode()).unwrap();
        assert_eq!(back.segments[0].insert_binlog.as_ref().unwrap().pages, Some(17));
        assert_eq!(back.segments[0].delta_binlogs[0].pages, None);
        let mut m = sample();
        let unpaged: Vec<String> = m.unpaged_objects().into_iter().map(|o| o.key).collect();
        assert_eq!(unpaged, ["i/1/seg/1/insert", "i/1/seg/1/delta-1"]);
        let paged = std::collections::HashMap::from([("i/1/seg/1/delta-1".to_owned(), 40)]);
        assert_eq!((m.set_pages(&paged), m.set_pages(&paged)), (1, 0), "set once");
        assert_eq!(m.segments[0].delta_binlogs[0].pages, Some(40));
        let (a, b) = (ObjectRef::of("k/1", b"same"), ObjectRef::of("k/2", b"same"));
        assert_eq!(a.page_tag(), b.page_tag(), "a copy under another key keeps its pages");
        assert_ne!(a.page_tag(), ObjectRef::of("k/1", b"other").page_tag());
    }

    #[test]
    fn pending_tombstones_are_counted_once_and_settle_into_a_delta_binlog() {
        let mut m = sample();
        let id = SegmentId(1);
        m.add_pending_tombstones(id, &[5, 9]).unwrap();
        m.add_pending_tombstones(id, &[11]).unwrap();
        let e = m.segment(id).unwrap();
        assert_eq!((e.meta.deleted_rows, e.tombstone_version()), (6, (1, 3)));
        assert_eq!(Manifest::decode("o", &m.encode()).unwrap(), m, "pending tombstones round-trip");
        // A job wrote 5 and 9; 11 came meanwhile and stays pending.
        m.settle_tombstones(id, ObjectRef::of("i/1/seg/1/delta-2", b"e"), &[5, 9]).unwrap();
        let e = m.segment(id).unwrap();
        let pending: Vec<u32> = e.pending_tombstones.iter().collect();
        assert_eq!((e.meta.deleted_rows, pending, e.tombstone_version()), (6, vec![11], (2, 1)));
        assert!(m.referenced_keys().any(|k| k == "i/1/seg/1/delta-2"));
    }

    #[test]
    fn neighbouring_rows_take_one_run() {
        let runs = RowRuns::of([7, 3, 4, 5, 5, 9, 8, 20]);
        assert_eq!((runs.len(), runs.runs()), (7, 3));
        assert_eq!(runs.iter().collect::<Vec<_>>(), [3, 4, 5, 7, 8, 9, 20]);
        let all = RowRuns::of(0..100_000);
        assert_eq!((all.len(), all.runs()), (100_000, 1));
        let mut r = RowRuns::of([1, 2, 3]);
        r.add(&[4, 10]);
        r.remove(&[2]);
        assert_eq!(r.iter().collect::<Vec<_>>(), [1, 3, 4, 10]);
        let last = RowRuns::of([u32::MAX - 1, u32::MAX]);
        assert_eq!((last.runs(), last.iter().collect::<Vec<_>>()), (1, vec![u32::MAX - 1, u32::MAX]));
    }

    #[test]
    fn round_trip() {
        let m = sample();
        assert_eq!(Manifest::decode("o", &m.encode()).unwrap(), m);
        assert_eq!(m.referenced_keys().collect::<Vec<_>>(), ["i/1/seg/1/insert", "i/1/seg/1/delta-1"]);
        assert_eq!(m.live_segments().count(), 2);
    }

    #[test]
    fn changes_follow_the_lifecycle_and_bump_the_generation() {
        let mut m = Manifest::new(4, crate::Metric::L2, None);
        let a = m.add_growing(1);
        m.seal(a, 10, SealReason::Manual, 2).unwrap();
        let flushed = |segment, rows| Flushed {
            segment,
            rows,
            insert_binlog: ObjectRef::of(format!("i/{segment}"), b"x"),
            index_file: Some(ObjectRef::of(format!("h/{segment}"), b"y")),
            bytes: 2,
            row_keys: vec![],
            keys: None,
            scalar_binlog: None,
        };
        m.publish_flush(flushed(a, 10), 3).unwrap();
        assert_eq!(
            (m.segment(a).unwrap().meta.state, m.segment(a).unwrap().meta.index_state),
            (SegmentState::Flushed, IndexState::Ready)
        );
        m.add_tombstones(a, ObjectRef::of("d/1", b"z"), 4).unwrap();
        let out = m.allocate_segment_id();
        m.publish_compaction(&[a], vec![flushed(out, 6)], false, 4).unwrap();
        assert_eq!(m.segment(a).unwrap().meta.state, SegmentState::Dropped);
        assert_eq!(m.segment(out).unwrap().meta.seal_reason.as_ref().unwrap().to_string(), "compaction of [1]");
        assert_eq!(m.referenced_keys().collect::<Vec<_>>(), [format!("i/{out}"), format!("h/{out}")]);
        assert_eq!(m.generation, 6);
        assert_eq!(
            m.publish_flush(flushed(a, 1), 5).unwrap_err().to_string(),
            "segment 1: illegal state change dropped -> flushed"
        );
        assert_eq!(
            m.seal(SegmentId(99), 1, SealReason::Manual, 5).unwrap_err(),
            ManifestError::UnknownSegment(SegmentId(99))
        );
        // A dropped segment leaves the manifest once all its objects are gone.
        assert_eq!(m.forget_dropped(|_| false), 0, "objects still there: kept");
        assert_eq!(m.forget_dropped(|k| k == format!("i/{a}")), 0, "one of three objects gone: kept");
        let gone = [format!("i/{a}"), format!("h/{a}"), "d/1".to_owned()];
        assert_eq!(m.forget_dropped(|k| gone.iter().any(|g| g == k)), 1);
        assert!(m.segment(a).is_none() && m.segment(out).is_some());
    }

    #[test]
    fn a_built_segment_is_flushed_beside_the_empty_growing_one() {
        let mut m = Manifest::new(4, crate::Metric::L2, None);
        let growing = m.add_growing(1);
        let built = m.allocate_segment_id();
        let insert_binlog = ObjectRef::of(format!("i/{built}"), b"x");
        let index_file = Some(ObjectRef::of(format!("h/{built}"), b"y"));
        let flushed = Flushed {
            segment: built,
            rows: 500,
            insert_binlog,
            index_file,
            bytes: 2,
            row_keys: vec![],
            keys: None,
            scalar_binlog: None,
        };
        m.publish_built(flushed, 2).unwrap();
        let entry = m.segment(built).unwrap();
        assert_eq!((entry.meta.state, entry.meta.index_state), (SegmentState::Flushed, IndexState::Ready));
        assert_eq!(
            (entry.meta.rows, entry.meta.seal_reason.as_ref().unwrap().to_string()),
            (500, "index build".into())
        );
        assert_eq!(m.segment(growing).unwrap().meta.state, SegmentState::Growing);
        assert_eq!(m.flushed_segments().map(|e| e.meta.id).collect::<Vec<_>>(), [built]);
        assert_eq!(m.referenced_keys().collect::<Vec<_>>(), [format!("i/{built}"), format!("h/{built}")]);
        assert_eq!(Manifest::decode("o", &m.encode()).unwrap(), m);
    }

    #[test]
    fn corruption_is_refused() {
        let bytes = sample().encode();
        every_bit_flip_is_refused(&bytes, |b| Manifest::decode("o", b).map(drop));
        every_truncation_is_refused(&bytes, |b| Manifest::decode("o", b).map(drop));
    }

    #[test]
    fn a_body_with_a_valid_checksum_but_garbage_is_an_error() {
        let garbage = vec![0xffu8; 16];
        let mut w = Writer(Vec::new());
        w.bytes(MAGIC).u16(VERSION).u16(0).u64(garbage.len() as u64).u32(crc32c::crc32c(&garbage));
        let mut bytes = finish_header(w, HEADER_LEN);
        bytes.extend_from_slice(&garbage);
        let e = Manifest::decode("meta", &bytes).unwrap_err();
        assert!(e.to_string().starts_with("object meta: manifest body: "), "{e}");
    }

    proptest! {
        #[test]
        fn decoder_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let _ = Manifest::decode("o", &bytes);
        }

        #[test]
        fn decoder_never_panics_on_checksummed_garbage(body in prop::collection::vec(any::<u8>(), 0..300)) {
            let mut w = Writer(Vec::new());
            w.bytes(MAGIC).u16(VERSION).u16(0).u64(body.len() as u64).u32(crc32c::crc32c(&body));
            let mut bytes = finish_header(w, HEADER_LEN);
            bytes.extend_from_slice(&body);
            let _ = Manifest::decode("o", &bytes);
        }
    }
}
