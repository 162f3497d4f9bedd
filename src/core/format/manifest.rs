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

use serde::{Deserialize, Serialize};

use super::{FormatError, FormatErrorKind, Reader, Writer, check_body, check_header, finish_header};
use crate::segment::{SegmentId, SegmentMeta, SegmentState};

pub const MAGIC: &[u8; 8] = b"PGMVMAN\0";
pub const VERSION: u16 = 1;
pub const HEADER_LEN: usize = 64;

/// An object in storage, as the manifest references it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    /// Key relative to the storage root.
    pub key: String,
    pub size: u64,
    /// CRC-32C of the whole object, checked after download.
    pub crc32c: u32,
}

impl ObjectRef {
    pub fn of(key: impl Into<String>, bytes: &[u8]) -> Self {
        ObjectRef { key: key.into(), size: bytes.len() as u64, crc32c: crc32c::crc32c(bytes) }
    }
}

/// One segment: its metadata and the objects that hold it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentEntry {
    pub meta: SegmentMeta,
    pub insert_binlog: Option<ObjectRef>,
    pub index_file: Option<ObjectRef>,
    pub delta_binlogs: Vec<ObjectRef>,
}

impl SegmentEntry {
    /// Every object this entry references.
    pub fn objects(&self) -> impl Iterator<Item = &ObjectRef> {
        self.insert_binlog.iter().chain(self.index_file.iter()).chain(self.delta_binlogs.iter())
    }
}

/// The current manifest (format version 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Increases by one with every change; caches compare it to reload.
    pub generation: u64,
    /// The next segment id to hand out: ids are never reused.
    pub next_segment_id: u64,
    pub dims: u32,
    pub metric: u8,
    pub segments: Vec<SegmentEntry>,
}

impl Manifest {
    pub fn new(dims: u32, metric: crate::Metric) -> Self {
        Manifest { generation: 0, next_segment_id: 1, dims, metric: metric.code(), segments: Vec::new() }
    }

    /// Segments searches must read (everything not dropped).
    pub fn live_segments(&self) -> impl Iterator<Item = &SegmentEntry> {
        self.segments.iter().filter(|s| s.meta.state.is_searchable())
    }

    pub fn segment(&self, id: SegmentId) -> Option<&SegmentEntry> {
        self.segments.iter().find(|s| s.meta.id == id)
    }

    /// Every object key a non-dropped segment references: what GC must keep.
    pub fn referenced_keys(&self) -> impl Iterator<Item = &str> {
        self.segments
            .iter()
            .filter(|s| s.meta.state != SegmentState::Dropped)
            .flat_map(|s| s.objects())
            .map(|o| o.key.as_str())
    }

    pub fn encode(&self) -> Vec<u8> {
        let body = bincode::serde::encode_to_vec(self, bincode::config::standard())
            .expect("a manifest always serializes");
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
        check_body(object, body, body_len, body_crc)?;
        let invalid = |e: bincode::error::DecodeError| FormatError::new(object, FormatErrorKind::Invalid(format!("manifest body: {e}")));
        match version {
            1 => {
                let (m, used): (Manifest, usize) =
                    bincode::serde::decode_from_slice(body, bincode::config::standard()).map_err(invalid)?;
                if used != body.len() {
                    return Err(FormatError::new(object, FormatErrorKind::Invalid(format!("{} bytes after the manifest body", body.len() - used))));
                }
                Ok(m)
            }
            _ => unreachable!("check_header refuses versions above {VERSION}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::testing::*;
    use crate::segment::{IndexState, SealReason};
    use proptest::prelude::*;

    fn sample() -> Manifest {
        let mut m = Manifest::new(128, crate::Metric::L2);
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
        });
        m.segments.push(SegmentEntry {
            meta: SegmentMeta::growing(SegmentId(2), 12),
            insert_binlog: None,
            index_file: None,
            delta_binlogs: vec![],
        });
        m.next_segment_id = 3;
        m.generation = 7;
        m
    }

    #[test]
    fn round_trip() {
        let m = sample();
        assert_eq!(Manifest::decode("o", &m.encode()).unwrap(), m);
        assert_eq!(m.referenced_keys().collect::<Vec<_>>(), ["i/1/seg/1/insert", "i/1/seg/1/delta-1"]);
        assert_eq!(m.live_segments().count(), 2);
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
