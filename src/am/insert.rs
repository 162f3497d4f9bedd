//! INSERT: append `(heap TID, vector)` to the growing segment, with the
//! row's filter values in a multicolumn index (`filter_columns.rs`).
//!
//! The growing segment is a chain of row pages; the meta page names its
//! tail. An insert share-locks the meta page, exclusively locks the tail,
//! adds the row and logs the page change (GenericXLog): no object storage,
//! no index build, nothing longer than one page write (invariant 6).
//! Concurrent inserters share the meta lock and queue only on the tail page.
//!
//! When the tail is full, the inserter links a new page in one WAL record
//! with the meta page; when the segment is at its size limit,
//! `growing_max_rows`, it seals the segment first (a cheap metadata commit,
//! as Milvus' segment allocator closes a full segment), adds the row to the
//! new growing segment, and wakes the background workers to flush it:
//! growing segments never grow past their size limit, and the rows every
//! query reads from pages stay few. With 64 sealed segments already waiting
//! for their flush, it grows on. The page steps, and the lock order that
//! makes a seal a barrier, are `milvus_core::pages::growing`'s; this file
//! reads the datum, and seals through `lifecycle/flush.rs`.

use milvus_core::element::Shape;
use milvus_core::pages::growing::Full;
use milvus_core::segment::{SealReason, SegmentId};
use pgrx::prelude::*;

use super::options;
use crate::error::OrRaise;
use crate::gucs::PausePoint;
use crate::lifecycle::flush::{self, SealRequest, Sealed, WhenFull};
use crate::pages::rows::pack_tid;
use crate::pages::{Index, growing};
use crate::types::indexed::IndexVector;

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
    // SAFETY: the open index relation.
    let types = super::filter_columns::types(unsafe { Index::from_raw(index) });
    // NULL vectors are not indexed (as pgvector).
    // SAFETY: Postgres passes one value and one null flag per key column,
    // and the open index.
    unsafe {
        if *isnull {
            return false;
        }
        let index = Index::from_raw(index);
        let vector = IndexVector::from_datum(*values, index.element());
        let filter_values = if types.is_empty() {
            Vec::new()
        } else {
            milvus_core::format::values::encode(&super::filter_columns::row_values(&types, values, isnull))
        };
        // A full segment with no room to seal grows on until a flush makes
        // room (the workers, or milvus_flush()).
        let row = Row { key: pack_tid(&*heap_tid), vector: vector.row(), values: &filter_values };
        let max_rows = options::of(index).growing_rows(Shape::new(row.vector.len(), row.vector.element()));
        let sealed = insert_row(index, row, max_rows, None, None);
        if sealed.is_some() {
            // Small sealed segments are flushed within seconds: the workers
            // come now rather than at their next round.
            crate::shared::wake_launcher(crate::catalog::database());
        }
    }
    crate::pause::pause_at(PausePoint::Insert);
    false
}

/// One row of the growing segment.
#[derive(Clone, Copy)]
pub struct Row<'a> {
    pub key: u64,
    pub vector: milvus_core::element::Row<'a>,
    /// Its filter values (`milvus_core::format::values`), none in an index of
    /// a vector alone.
    pub values: &'a [u8],
}

/// Appends one row to the growing segment
/// (`milvus_core::pages::growing::insert_row`); if that segment is at its
/// size limit (`max_rows`: `growing_max_rows` for inserts,
/// `segment_max_rows` for CREATE INDEX), seals it first, for `reason` (by
/// default the size rule's, "full at N rows"), and returns the segment it
/// sealed. If [`milvus_core::format::meta::MAX_SEALED`] segments already
/// wait for their flush, `make_room` (if any) is called once to flush
/// them; otherwise, or if it could not, the full segment grows on.
pub fn insert_row(
    index: Index,
    row: Row,
    max_rows: u64,
    reason: Option<SealReason>,
    mut make_room: Option<&mut dyn FnMut()>,
) -> Option<SegmentId> {
    let seal = |segment, full| seal_full(index, segment, reason.clone().unwrap_or(full), &mut make_room);
    growing::insert_row(index, row.key, row.vector, row.values, max_rows, seal).or_raise_for(row.vector.element())
}

/// Seals `segment`, the growing segment found full, for `reason`, calling
/// `make_room` (once) when too many segments already wait for their flush.
fn seal_full(index: Index, segment: SegmentId, reason: SealReason, make_room: &mut Option<&mut dyn FnMut()>) -> Full {
    let request = SealRequest { reason, only: Some(segment), when_full: WhenFull::GrowOn };
    match flush::seal(index, request) {
        Sealed::Segment(segment) => Full::Sealed(segment),
        Sealed::NoRoom => match make_room.take() {
            Some(flush) => {
                flush();
                Full::Retry
            }
            None => Full::GrowOn,
        },
        Sealed::Empty | Sealed::Already => Full::Retry,
    }
}
