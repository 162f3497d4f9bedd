//! The manifest's bytes: the header, the body of the current version
//! written, and the body of every version read. An older version's body is
//! read by bincode into its own struct, as it was written, and converted
//! into the current [`Manifest`] (the changes of each version are told in
//! `mod.rs`).

use serde::Deserialize;

use super::*;
use crate::format::{Check, FormatError, FormatErrorKind, Writer, check_body, check_header, finish_header};

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

impl Manifest {
    /// The generation of the manifest whose encoding starts with `bytes`
    /// (its header and at least the first bytes of its body: the first page
    /// of its chain), without decoding or verifying the rest: what a cache
    /// of the decoded manifest compares. `None` for a manifest written
    /// before version 6 (whose body does not start with it) or bytes that do
    /// not start a manifest: read it whole.
    pub fn peek_generation(bytes: &[u8]) -> Option<u64> {
        let version = check_header("manifest", bytes, HEADER_LEN, MAGIC, "manifest", VERSION).ok()?;
        if version < 6 {
            return None;
        }
        let (generation, _): (u64, usize) =
            bincode::serde::decode_from_slice(&bytes[HEADER_LEN..], bincode::config::standard()).ok()?;
        Some(generation)
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
