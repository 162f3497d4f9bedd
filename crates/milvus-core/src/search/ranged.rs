//! A flushed segment's rows read by range from storage, for a segment whose
//! insert binlog the local cache has no room for.
//!
//! The segment's graph and codes stay local (its index file, mapped from
//! the cache): a search walks the graph by the codes and reads only the
//! rows it re-ranks, a few dozen a query, each checked against the row
//! checksum of the binlog's read index (`crate::format::ranges`), which
//! was taken from the binlog's verified bytes. From a local directory store
//! each row is one `pread` of the binlog, opened once; from S3 near rows
//! are fetched in one request and far ones in parallel (object_store's
//! coalescing of ranges).

use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

use crate::cache::CacheError;
use crate::element::Vectors;
use crate::format::bytes_of_mut;
use crate::format::insert::InsertBinlog;
use crate::format::ranges::RowRanges;
use crate::storage::{LocalObject, Storage};

thread_local! {
    /// Where rows read by range land: one buffer a thread, kept between
    /// reads (a buffer allocated per query costs the faults of its fresh
    /// pages every time, the allocator handing them back to the kernel),
    /// of u64 so that rows of every element type are read in place.
    static SCRATCH: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// The most the scratch buffer keeps past a read: an exact tail reads a
/// whole segment, whose bytes are not held once it is done.
const SCRATCH_KEPT: usize = 4 << 20;

/// The rows of one binlog, in storage.
pub struct StoredRows {
    pub(super) ranges: RowRanges<'static>,
    storage: Arc<Storage>,
    key: String,
    /// The binlog opened once, for a `file://` store.
    local: OnceLock<LocalObject>,
}

/// What reading rows by range cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RangeReads {
    /// Rows read from storage.
    pub rows: usize,
    /// Their bytes.
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
        StoredRows { ranges, storage, key, local: OnceLock::new() }
    }

    /// The whole binlog, read from storage and verified in full.
    pub fn read_whole(&self) -> Result<InsertBinlog<'static>, CacheError> {
        let bytes = self.storage.get(&self.key)?;
        Ok(InsertBinlog::decode(&self.key, &bytes)?.into_owned())
    }

    /// Calls `f` with the vectors of `rows`, in that order, read from
    /// storage and each checked against its checksum. From a local
    /// directory each row is one `pread` of the binlog, opened once; from
    /// S3 one `get_ranges` reads them all.
    pub fn with_rows<R>(&self, rows: &[u32], f: impl FnOnce(&Vectors<'_>) -> R) -> Result<(R, RangeReads), CacheError> {
        let header = self.ranges.header;
        let size = header.row_bytes();
        SCRATCH.with_borrow_mut(|scratch| {
            let len = rows.len() * size;
            scratch.resize(len.div_ceil(8), 0);
            let bytes = &mut bytes_of_mut(scratch)[..len];
            if let Some(local) = self.local()? {
                for (&row, into) in rows.iter().zip(bytes.chunks_exact_mut(size)) {
                    local.read_at(self.ranges.range_of(row).start, into)?;
                }
            } else if !rows.is_empty() {
                let ranges: Vec<_> = rows.iter().map(|r| self.ranges.range_of(*r)).collect();
                let read = self.storage.get_ranges(&self.key, &ranges)?;
                for ((&row, got), into) in rows.iter().zip(&read).zip(bytes.chunks_exact_mut(size)) {
                    if got.len() != size {
                        return Err(self.corrupt(row, got.len()));
                    }
                    into.copy_from_slice(got);
                }
            }
            for (&row, got) in rows.iter().zip(bytes.chunks_exact(size)) {
                if !self.ranges.is_intact(row, got) {
                    return Err(self.corrupt(row, got.len()));
                }
            }
            let out = f(&Vectors::from_bytes(header.element, bytes));
            if scratch.len() * 8 > SCRATCH_KEPT {
                *scratch = Vec::new();
            }
            Ok((out, RangeReads { rows: rows.len(), bytes: len as u64 }))
        })
    }

    /// The binlog opened as a local file, for a `file://` store.
    fn local(&self) -> Result<Option<&LocalObject>, CacheError> {
        if let Some(local) = self.local.get() {
            return Ok(Some(local));
        }
        match self.storage.open_local(&self.key)? {
            Some(opened) => Ok(Some(self.local.get_or_init(|| opened))),
            None => Ok(None),
        }
    }

    fn corrupt(&self, row: u32, len: usize) -> CacheError {
        CacheError::Corrupt {
            key: self.key.clone(),
            reason: format!(
                "row {row} read by range ({len} bytes) does not match its checksum, taken when the object was verified"
            ),
        }
    }
}
