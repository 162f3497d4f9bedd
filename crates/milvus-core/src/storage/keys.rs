//! Object keys. Every object has a typed [`ObjectKey`] whose path is built from numbers
//! only (the cluster's system identifier, database OID, index OID, segment
//! id, a nonce), never from a user's string, so no key can leave the
//! storage prefix:
//!
//! ```text
//! <prefix>/<cluster:016x>/<database>/<index>/<segment:x>/insert-<nonce:08x>.bin
//! <prefix>/<cluster:016x>/<database>/<index>/<segment:x>/index-<nonce:08x>.hnsw
//! <prefix>/<cluster:016x>/<database>/<index>/<segment:x>/delta-<nonce:08x>.bin
//! ```
//!
//! Names are short enough for every tool Postgres users run over the
//! embedded default store, which lives in the data directory: tar (and so
//! pg_basebackup, in tar and plain form) takes at most 99 characters, and
//! `pg_milvus/objects/` plus the longest key (every number at its widest)
//! plus an upload's staging suffix stays within that ([`MAX_KEY_LEN`]).
//! Keys of 0.2 and before (segment ids in 20 digits, 16-digit nonces) stay
//! valid where manifests name them.
//!
//! The cluster comes first because OIDs repeat across Postgres clusters: two
//! clusters sharing a bucket must never see, let alone collect, each other's
//! objects. A physical standby has its primary's identifier, and so reads the
//! same objects.
//!
//! The nonce makes every write a new object: a flush retried after a crash
//! between upload and manifest commit never overwrites what another attempt
//! wrote; the loser is an orphan for `Storage::collect_garbage`. Writes are
//! published only by the manifest (data first, metadata last), so a reader
//! never sees a partial object.

use std::time::SystemTime;

use crate::segment::SegmentId;

/// What kind of object a key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    InsertBinlog,
    IndexFile,
    DeltaBinlog,
    ScalarBinlog,
}

/// A typed object key: every path is derived from these numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    /// The Postgres cluster's system identifier.
    pub cluster: u64,
    pub database: u32,
    pub index: u32,
    pub segment: SegmentId,
    pub kind: ObjectKind,
    /// Unique per write attempt (see the module doc).
    pub nonce: u32,
}

/// The longest key [`ObjectKey::path`] makes: every number at its widest.
/// With `pg_milvus/objects/` (18) before it and a staging suffix (`#` and a
/// counter, 3) after it, a path in the data directory stays within tar's 99.
pub const MAX_KEY_LEN: usize = 75;

impl ObjectKey {
    /// The key relative to the storage prefix.
    pub fn path(&self) -> String {
        let (stem, ext) = match self.kind {
            ObjectKind::InsertBinlog => ("insert", "bin"),
            ObjectKind::IndexFile => ("index", "hnsw"),
            ObjectKind::DeltaBinlog => ("delta", "bin"),
            ObjectKind::ScalarBinlog => ("scalar", "bin"),
        };
        format!(
            "{}{:x}/{stem}-{:08x}.{ext}",
            Self::index_prefix(self.cluster, self.database, self.index),
            self.segment.0,
            self.nonce
        )
    }

    /// The prefix under which all of one index's objects live.
    pub fn index_prefix(cluster: u64, database: u32, index: u32) -> String {
        format!("{}{index}/", Self::database_prefix(cluster, database))
    }

    /// The prefix under which all of one database's objects live.
    pub fn database_prefix(cluster: u64, database: u32) -> String {
        format!("{}{database}/", Self::cluster_prefix(cluster))
    }

    /// The prefix under which all of one cluster's objects live.
    pub fn cluster_prefix(cluster: u64) -> String {
        format!("{cluster:016x}/")
    }
}

/// A fresh nonce: time and process id mixed, so that two attempts at one
/// segment's object (a retry after a crash, two backends at the same
/// instant) get different keys, with a chance of 2^-32 per pair otherwise.
pub fn new_nonce() -> u32 {
    let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let mut x = nanos ^ ((std::process::id() as u64) << 40);
    // splitmix64 finaliser, so close timestamps give unrelated nonces
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((x ^ (x >> 31)) >> 32) as u32
}
