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

use super::Reader;
use super::meta::Block;
use crate::error::{SqlError, SqlState};
use crate::segment::{IndexState, LifecycleError, SealReason, SegmentId, SegmentMeta, SegmentState};

mod encoding;

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
mod tests;
