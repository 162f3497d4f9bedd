//! A flushed segment's rows read by range from storage, for a segment whose
//! insert binlog the local cache has no room for.
//!
//! The segment's graph and codes stay local (its index file, mapped from
//! the cache): a search walks the graph by the codes and reads only the
//! rows it re-ranks, a few dozen a query, each checked against the row
//! checksum of the binlog's read index (`crate::format::ranges`), which
//! was taken from the binlog's verified bytes. Near rows are fetched in one
//! request and far ones in parallel (object_store's coalescing of ranges).

use std::sync::Arc;

use crate::cache::CacheError;
use crate::element::Vectors;
use crate::format::insert::InsertBinlog;
use crate::format::ranges::RowRanges;
use crate::storage::Storage;

/// The rows of one binlog, in storage.
pub struct StoredRows {
    pub(super) ranges: RowRanges<'static>,
    storage: Arc<Storage>,
    key: String,
}

/// What reading rows by range cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RangeReads {
    /// Rows read from storage.
    pub rows: usize,
    /// Bytes those reads returned.
    pub bytes: u64,
}

impl RangeReads {
    pub fn add(&mut self, other: RangeReads) {
        self.rows += other.rows;
        self.bytes += other.bytes;
    }
}

impl StoredRows {
    /// The rows of the binlog `key` in `storage`, as `ranges` indexes them.
    pub fn new(ranges: RowRanges<'static>, storage: Arc<Storage>, key: String) -> Self {
        StoredRows { ranges, storage, key }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// The whole binlog, read from storage and verified in full.
    pub fn read_whole(&self) -> Result<InsertBinlog<'static>, CacheError> {
        let bytes = self.storage.get(&self.key)?;
        Ok(InsertBinlog::decode(&self.key, &bytes)?.into_owned())
    }

    /// The vectors of `rows`, in that order, read from storage and each
    /// checked against its checksum.
    pub fn read(&self, rows: &[u32]) -> Result<(Vectors<'static>, RangeReads), CacheError> {
        let header = self.ranges.header;
        let mut vectors = Vectors::new(header.element);
        if rows.is_empty() {
            return Ok((vectors, RangeReads::default()));
        }
        let ranges: Vec<_> = rows.iter().map(|r| self.ranges.range_of(*r)).collect();
        let read = self.storage.get_ranges(&self.key, &ranges)?;
        let mut bytes = 0;
        for (&r, got) in rows.iter().zip(&read) {
            if !self.ranges.is_intact(r, got) {
                return Err(CacheError::Corrupt {
                    key: self.key.clone(),
                    reason: format!(
                        "row {r} read by range ({} bytes) does not match its checksum, taken when the object was verified",
                        got.len()
                    ),
                });
            }
            bytes += got.len() as u64;
            // Read in place when aligned, copied when not.
            vectors.push(Vectors::from_bytes(header.element, got).row(0, header.dims));
        }
        Ok((vectors, RangeReads { rows: rows.len(), bytes }))
    }
}
