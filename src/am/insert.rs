//! INSERT: append `(heap TID, vector)` to the growing segment.
//!
//! The growing segment is a chain of row pages; the meta page names its
//! tail. An insert share-locks the meta page, exclusively locks the tail,
//! adds the row and logs the page change (GenericXLog): no object storage,
//! no index build, nothing longer than one page write (invariant 6).
//! Concurrent inserters share the meta lock and queue only on the tail page.
//!
//! When the tail is full, the inserter takes the meta page exclusively,
//! checks nobody extended the chain meanwhile, and in one WAL record links a
//! new page, updates the meta page's tail and page count, and adds the row
//! there. If the segment is at its size limit, `growing_max_rows` (the seal
//! rule the workers share, `milvus_core::format::meta::MetaPage::needs_seal`), it
//! seals the segment instead (a cheap metadata commit, as Milvus' segment
//! allocator closes a full segment), adds the row to the new growing
//! segment, and wakes the background workers to flush it: growing segments
//! never grow past their size limit, and the rows every query reads from
//! pages stay few. With 64 sealed segments already waiting for their flush,
//! it grows on.
//!
//! Lock order, everywhere: meta page, then row pages along the chain.
//! Holding the meta page (shared) across the row write is what makes a seal
//! a barrier: a seal takes it exclusively, so no insert is half in the old
//! growing segment.

use milvus_core::element::Shape;
use milvus_core::format::page::{Chunks, row_item};
use milvus_core::policy::seal::SealPolicy;
use milvus_core::segment::{SealReason, SegmentId};
use pgrx::prelude::*;

use super::flush::{self, SealRequest, Sealed, WhenFull};
use super::options;
use crate::error::OrRaise;
use crate::gucs::PausePoint;
use crate::pages::rows::{pack_tid, rows_per_page};
use crate::pages::{Index, Lock, growing};
use crate::types::IndexVector;

// The signature is Postgres' (amapi.h).
#[allow(clippy::too_many_arguments)]
#[pg_guard]
pub unsafe extern "C-unwind" fn aminsert(
    index: pg_sys::Relation,
    values: *mut pg_sys::Datum,
    isnull: *mut bool,
    heap_tid: pg_sys::ItemPointer,
    _heap: pg_sys::Relation,
    _check_unique: pg_sys::IndexUniqueCheck::Type,
    _index_unchanged: bool,
    _index_info: *mut pg_sys::IndexInfo,
) -> bool {
    // NULL vectors are not indexed (as pgvector).
    // SAFETY: Postgres passes one value and one null flag per key column,
    // and the open index.
    unsafe {
        if *isnull {
            return false;
        }
        let index = Index::from_raw(index);
        let vector = IndexVector::from_datum(*values, index.element());
        // A full segment with no room to seal grows on until a flush makes
        // room (the workers, or milvus_flush()).
        let row = Row { key: pack_tid(&*heap_tid), vector: vector.row() };
        let max_rows = options::of(index).growing_rows(Shape::new(row.vector.len(), row.vector.element()));
        let sealed = insert_row(index, row, max_rows, None, None);
        if sealed.is_some() {
            // Small sealed segments are flushed within seconds: the workers
            // come now rather than at their next round.
            crate::shared::wake_launcher(crate::catalog::database());
        }
    }
    crate::debug::pause_at(PausePoint::Insert);
    false
}

/// One row of the growing segment.
#[derive(Clone, Copy)]
pub struct Row<'a> {
    pub key: u64,
    pub vector: milvus_core::element::Row<'a>,
}

/// The size rule of a growing segment: `max_rows`, in whole pages (the
/// workers add the time rules, `gucs::seal_policy`).
pub fn size_rule(max_rows: u64, shape: Shape) -> SealPolicy {
    let (rows_per_page, pages_per_row) = match Chunks::of(shape) {
        Some(chunks) => (1, chunks.count as u64),
        None => (rows_per_page(shape) as u64, 1),
    };
    SealPolicy { max_rows, rows_per_page, pages_per_row, max_bytes: u64::MAX, idle_secs: None, lifetime_secs: None }
}

/// Appends one row to the growing segment; if that segment is at its size
/// limit (`max_rows`: `growing_max_rows` for inserts, `segment_max_rows`
/// for CREATE INDEX), seals it first, for `reason` (by default the size
/// rule's, "full at N rows"), and returns the segment it sealed. If [`milvus_core::format::meta::MAX_SEALED`]
/// segments already wait for their flush, `make_room` (if any) is called
/// once to flush them; otherwise, or if it could not, the full segment
/// grows on.
pub fn insert_row(
    index: Index,
    row: Row,
    max_rows: u64,
    reason: Option<SealReason>,
    mut make_room: Option<&mut dyn FnMut()>,
) -> Option<SegmentId> {
    let mut sealed = None;
    let mut seal_at_limit = true;
    loop {
        let meta = index.meta(Lock::Share);
        milvus_core::vector::check_typmod(Some(meta.dims()), row.vector.len()).or_raise_for(row.vector.element());
        if let Some(chunks) = Chunks::of(meta.shape()) {
            drop(meta);
            match insert_chunks(index, row, &chunks, max_rows, seal_at_limit) {
                Ok(()) => return sealed,
                Err((full, segment)) => {
                    match seal_full(index, segment, reason.clone().unwrap_or(full), &mut make_room) {
                        Full::Sealed(segment) => sealed = Some(segment),
                        Full::Retry => {}
                        Full::GrowOn => seal_at_limit = false,
                    }
                    continue;
                }
            }
        }

        // Fast path: the tail has room.
        let tail = meta.growing_tail;
        let item = row_item(row.key, row.vector);
        if growing::add_to_tail(&meta, &item) {
            return sealed;
        }
        drop(meta);

        // Slow path: extend the chain under the exclusive meta lock.
        let mut meta = index.meta(Lock::Exclusive);
        if meta.growing_tail != tail {
            // Someone extended (or sealed) meanwhile: start over.
            continue;
        }
        let rule = size_rule(max_rows, meta.shape());
        if let Some(full) = meta.needs_seal(&rule).filter(|_| seal_at_limit) {
            let segment = meta.growing();
            drop(meta);
            match seal_full(index, segment, reason.clone().unwrap_or(full), &mut make_room) {
                Full::Sealed(segment) => sealed = Some(segment),
                Full::Retry => {}
                Full::GrowOn => seal_at_limit = false,
            }
            continue;
        }
        growing::append_page(&mut meta, &item);
        return sealed;
    }
}

/// What an insert that found its growing segment full does next.
enum Full {
    /// It sealed the segment: the row goes into the new growing one.
    Sealed(SegmentId),
    /// Another session sealed it meanwhile, or room was made: try again.
    Retry,
    /// No room to seal and nothing to make it: the segment grows on past
    /// its limit.
    GrowOn,
}

/// Seals `segment`, the growing segment found full, for `reason`, calling
/// `make_room` (once) when too many segments already wait for their flush.
fn seal_full(index: Index, segment: SegmentId, reason: SealReason, make_room: &mut Option<&mut dyn FnMut()>) -> Full {
    let request = SealRequest { reason, only: Some(segment), when_full: WhenFull::GrowOn };
    match flush::seal(index, request) {
        Sealed::Sealed(segment) => Full::Sealed(segment),
        Sealed::NoRoom => match make_room.take() {
            Some(flush) => {
                flush();
                Full::Retry
            }
            None => Full::GrowOn,
        },
        Sealed::Empty | Sealed::AlreadySealed => Full::Retry,
    }
}

/// Appends a row of more dimensions than a page holds, in chunks of a page
/// each (`milvus_core::format::page::Chunks`): the first into the tail if
/// it is empty (a segment's first page), each other one into a new page
/// linked after it, one WAL record each, under the exclusive meta lock so
/// the chunks of two rows never interleave. A crash between two records
/// leaves an unfinished row of a transaction that never committed: readers
/// leave it out, VACUUM removes it. `Err(reason)` when the segment is full
/// (and `seal_at_limit`), with the segment: seal it, then try again.
fn insert_chunks(
    index: Index,
    row: Row,
    chunks: &Chunks,
    max_rows: u64,
    seal_at_limit: bool,
) -> Result<(), (SealReason, SegmentId)> {
    let mut meta = index.meta(Lock::Exclusive);
    if let Some(full) = meta.needs_seal(&size_rule(max_rows, meta.shape())).filter(|_| seal_at_limit) {
        return Err((full, meta.growing()));
    }
    let first = growing::add_to_empty_tail(&mut meta, &chunks.item(row.key, 0, row.vector)) as usize;
    for seq in first..chunks.count {
        growing::append_page(&mut meta, &chunks.item(row.key, seq, row.vector));
    }
    Ok(())
}
