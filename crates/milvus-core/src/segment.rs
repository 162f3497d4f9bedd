//! The segment lifecycle, as one state machine.
//!
//! Vocabulary (used the same way in code, SQL, docs and log lines):
//! - a **segment** is a set of rows of one index, with a unique, never reused
//!   [`SegmentId`];
//! - the **growing** segment takes new rows; a **seal** closes it at a barrier
//!   (every row appended before belongs to it, every row after to the next);
//! - a **flush** writes a sealed segment's rows as an insert **binlog** to
//!   object storage and publishes it in the **manifest**;
//! - **compaction** rewrites flushed segments without their **tombstones**;
//!   the segments it replaced are **dropped**, and their objects collected.
//!
//! Segment states follow Milvus' `SegmentState` and only move forward:
//!
//! ```text
//! growing -> sealed -> flushing -> flushed -> dropped
//! ```
//!
//! A flush that fails goes back from `flushing` to `sealed` to be retried:
//! that is the one backward edge, and it is explicit ([`SegmentState::Sealed`]
//! is reachable from `Flushing` only through [`SegmentMeta::flush_failed`]).
//! The index of a flushed segment has its own state: `none -> building -> ready`.

use std::fmt;

use crate::error::{SqlError, SqlState};
use serde::{Deserialize, Serialize};

/// A segment's id: unique within an index and never reused, so an object key
/// or a tombstone naming a segment can never be mistaken for another one's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SegmentId(pub u64);

impl fmt::Display for SegmentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Now, in Unix seconds: the clock of every timestamp in segment metadata.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Where a segment is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SegmentState {
    /// Takes new rows; lives in WAL-logged index pages. One per index.
    Growing,
    /// Closed to new rows, still in index pages, waiting to be flushed.
    Sealed,
    /// A flush job is writing its binlog and index file.
    Flushing,
    /// Its binlog is in object storage and published in the manifest; the
    /// index pages that held its rows are free.
    Flushed,
    /// Replaced by compaction (or its index was dropped); its objects are
    /// garbage once the grace period has passed.
    Dropped,
}

impl SegmentState {
    /// The name `milvus_segments()` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            SegmentState::Growing => "growing",
            SegmentState::Sealed => "sealed",
            SegmentState::Flushing => "flushing",
            SegmentState::Flushed => "flushed",
            SegmentState::Dropped => "dropped",
        }
    }

    /// Rows of this segment are answered by searches.
    pub fn is_searchable(self) -> bool {
        !matches!(self, SegmentState::Dropped)
    }

    /// Rows live in index pages (not yet in object storage).
    pub fn in_pages(self) -> bool {
        matches!(self, SegmentState::Growing | SegmentState::Sealed | SegmentState::Flushing)
    }

    /// Closed to new rows.
    pub fn is_sealed(self) -> bool {
        !matches!(self, SegmentState::Growing)
    }

    /// The transitions of the lifecycle, forward only (plus the retry of a
    /// failed flush, `flushing -> sealed`).
    pub fn can_become(self, next: SegmentState) -> bool {
        use SegmentState::*;
        matches!(
            (self, next),
            (Growing, Sealed) | (Sealed, Flushing) | (Flushing, Flushed) | (Flushing, Sealed) | (Flushed, Dropped)
        )
    }
}

impl fmt::Display for SegmentState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The state of a flushed segment's HNSW index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum IndexState {
    /// No index yet: searches of the segment are brute force.
    None,
    /// A build job is running.
    Building,
    /// The index file is in object storage and published.
    Ready,
}

impl IndexState {
    pub fn as_str(self) -> &'static str {
        match self {
            IndexState::None => "none",
            IndexState::Building => "building",
            IndexState::Ready => "ready",
        }
    }

    /// Forward only, plus the retry of a failed build (`building -> none`).
    pub fn can_become(self, next: IndexState) -> bool {
        use IndexState::*;
        matches!((self, next), (None, Building) | (Building, Ready) | (Building, None))
    }
}

impl fmt::Display for IndexState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a segment was sealed; kept with the segment and shown by
/// `milvus_segments()` and in log lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SealReason {
    /// Full: another page of rows would take it past its limit
    /// (`growing_max_rows`, at most `segment_max_rows`; sealed by the insert
    /// that found it so), or a worker found it at the limit.
    Rows { rows: u64, max_rows: u64 },
    /// Reached the byte budget of a segment.
    Bytes { bytes: u64, max_bytes: u64 },
    /// No insert for the idle time (`milvus.seal_idle_time`).
    Idle { idle_secs: u64 },
    /// Open longer than the lifetime.
    Lifetime { age_secs: u64 },
    /// `milvus_flush()` asked for it.
    Manual,
    /// Written sealed by `CREATE INDEX` on a populated table.
    Build,
    /// Written by compaction, replacing the segments it names.
    Compaction { inputs: Vec<SegmentId> },
    /// The growing chain's pages were full: `pages` pages, room for
    /// `capacity` rows, which `max_rows` allows no more of. The rule an
    /// insert applies, by pages, not by rows counted: rows of aborted
    /// inserts and rows VACUUM removed took room too, so the segment may
    /// hold far fewer (its `rows` says how many).
    Pages { pages: u64, capacity: u64, max_rows: u64 },
    /// Written by a clustering compaction (`cluster_by`), replacing the
    /// segments it names: its rows one range of the column's values, which
    /// no other segment of the same clustering shares.
    Clustering { inputs: Vec<SegmentId> },
}

impl fmt::Display for SealReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SealReason::Rows { rows, max_rows } => write!(f, "full at {rows} rows (limit {max_rows})"),
            SealReason::Pages { pages, capacity, max_rows } => {
                write!(f, "pages full: {pages} pages hold {capacity} rows (limit {max_rows})")
            }
            SealReason::Bytes { bytes, max_bytes } => write!(f, "bytes {bytes} >= {max_bytes}"),
            SealReason::Idle { idle_secs } => write!(f, "idle for {idle_secs}s"),
            SealReason::Lifetime { age_secs } => write!(f, "open for {age_secs}s"),
            SealReason::Manual => f.write_str("manual flush"),
            SealReason::Build => f.write_str("index build"),
            SealReason::Compaction { inputs } => {
                let ids: Vec<String> = inputs.iter().map(|s| s.to_string()).collect();
                write!(f, "compaction of [{}]", ids.join(", "))
            }
            SealReason::Clustering { inputs } => {
                let ids: Vec<String> = inputs.iter().map(|s| s.to_string()).collect();
                write!(f, "clustering of [{}]", ids.join(", "))
            }
        }
    }
}

/// An attempt to move a segment backwards or sideways.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LifecycleError {
    #[error("segment {segment}: illegal state change {from} -> {to}")]
    Segment { segment: SegmentId, from: SegmentState, to: SegmentState },
    #[error("segment {segment}: illegal index state change {from} -> {to}")]
    Index { segment: SegmentId, from: IndexState, to: IndexState },
}

/// A change the lifecycle forbids is a bug, never the user's doing.
impl SqlError for LifecycleError {
    fn sqlstate(&self) -> SqlState {
        SqlState::InternalError
    }
}

/// What the manifest knows of one segment, without its object keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentMeta {
    pub id: SegmentId,
    pub state: SegmentState,
    pub index_state: IndexState,
    pub rows: u64,
    pub deleted_rows: u64,
    pub bytes: u64,
    pub seal_reason: Option<SealReason>,
    /// Unix times in seconds; `None` until the event happened.
    pub created_at: u64,
    pub sealed_at: Option<u64>,
    pub flushed_at: Option<u64>,
    /// When a compaction dropped it: its objects stay for
    /// `milvus.gc_grace_period` from then.
    pub dropped_at: Option<u64>,
}

impl SegmentMeta {
    /// A new, empty growing segment.
    pub fn growing(id: SegmentId, now: u64) -> Self {
        SegmentMeta {
            id,
            state: SegmentState::Growing,
            index_state: IndexState::None,
            rows: 0,
            deleted_rows: 0,
            bytes: 0,
            seal_reason: None,
            created_at: now,
            sealed_at: None,
            flushed_at: None,
            dropped_at: None,
        }
    }

    fn become_(&mut self, next: SegmentState) -> Result<(), LifecycleError> {
        if !self.state.can_become(next) {
            return Err(LifecycleError::Segment { segment: self.id, from: self.state, to: next });
        }
        self.state = next;
        Ok(())
    }

    pub fn seal(&mut self, reason: SealReason, now: u64) -> Result<(), LifecycleError> {
        self.become_(SegmentState::Sealed)?;
        self.seal_reason = Some(reason);
        self.sealed_at = Some(now);
        Ok(())
    }

    pub fn start_flush(&mut self) -> Result<(), LifecycleError> {
        self.become_(SegmentState::Flushing)
    }

    /// The flush failed (storage down, disk full): back to sealed, to retry.
    pub fn flush_failed(&mut self) -> Result<(), LifecycleError> {
        if self.state != SegmentState::Flushing {
            return Err(LifecycleError::Segment { segment: self.id, from: self.state, to: SegmentState::Sealed });
        }
        self.become_(SegmentState::Sealed)
    }

    pub fn flushed(&mut self, bytes: u64, now: u64) -> Result<(), LifecycleError> {
        self.become_(SegmentState::Flushed)?;
        self.bytes = bytes;
        self.flushed_at = Some(now);
        Ok(())
    }

    pub fn drop_(&mut self, now: u64) -> Result<(), LifecycleError> {
        self.become_(SegmentState::Dropped)?;
        self.dropped_at = Some(now);
        Ok(())
    }

    pub fn set_index_state(&mut self, next: IndexState) -> Result<(), LifecycleError> {
        if !self.index_state.can_become(next) {
            return Err(LifecycleError::Index { segment: self.id, from: self.index_state, to: next });
        }
        self.index_state = next;
        Ok(())
    }

    /// Rows still alive.
    pub fn live_rows(&self) -> u64 {
        self.rows.saturating_sub(self.deleted_rows)
    }

    /// The fraction of rows that are tombstoned, 0 for an empty segment.
    pub fn deleted_ratio(&self) -> f64 {
        if self.rows == 0 { 0.0 } else { self.deleted_rows as f64 / self.rows as f64 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use SegmentState::*;

    const ALL: [SegmentState; 5] = [Growing, Sealed, Flushing, Flushed, Dropped];

    #[test]
    fn the_happy_path_moves_forward() {
        let mut s = SegmentMeta::growing(SegmentId(1), 100);
        s.seal(SealReason::Manual, 110).unwrap();
        s.start_flush().unwrap();
        s.flushed(4096, 120).unwrap();
        s.set_index_state(IndexState::Building).unwrap();
        s.set_index_state(IndexState::Ready).unwrap();
        s.drop_(130).unwrap();
        assert_eq!((s.state, s.sealed_at, s.flushed_at, s.bytes), (Dropped, Some(110), Some(120), 4096));
        assert_eq!(s.dropped_at, Some(130));
        assert_eq!(s.seal_reason, Some(SealReason::Manual));
    }

    #[test]
    fn a_failed_flush_returns_to_sealed_for_retry() {
        let mut s = SegmentMeta::growing(SegmentId(1), 0);
        s.seal(SealReason::Idle { idle_secs: 5 }, 1).unwrap();
        s.start_flush().unwrap();
        s.flush_failed().unwrap();
        assert_eq!(s.state, Sealed);
        s.start_flush().unwrap();
        s.flushed(1, 2).unwrap();
        assert_eq!(s.flush_failed().unwrap_err().to_string(), "segment 1: illegal state change flushed -> sealed");
    }

    #[test]
    fn every_other_transition_is_an_error_not_a_panic() {
        let legal =
            [(Growing, Sealed), (Sealed, Flushing), (Flushing, Flushed), (Flushing, Sealed), (Flushed, Dropped)];
        for from in ALL {
            for to in ALL {
                assert_eq!(from.can_become(to), legal.contains(&(from, to)), "{from} -> {to}");
            }
        }
        let mut s = SegmentMeta::growing(SegmentId(7), 0);
        assert_eq!(
            s.start_flush().unwrap_err(),
            LifecycleError::Segment { segment: SegmentId(7), from: Growing, to: Flushing }
        );
        assert_eq!(s.drop_(9).unwrap_err().to_string(), "segment 7: illegal state change growing -> dropped");
        assert_eq!(s.dropped_at, None, "an illegal change changes nothing");
        assert_eq!(
            s.set_index_state(IndexState::Ready).unwrap_err().to_string(),
            "segment 7: illegal index state change none -> ready"
        );
        assert_eq!(s.state, Growing, "a refused transition changes nothing");
    }

    #[test]
    fn predicates() {
        assert!(Growing.in_pages() && Sealed.in_pages() && Flushing.in_pages());
        assert!(!Flushed.in_pages() && !Dropped.in_pages());
        assert!(ALL.iter().filter(|s| s.is_searchable()).count() == 4 && !Dropped.is_searchable());
        assert!(!Growing.is_sealed() && Sealed.is_sealed());
    }

    #[test]
    fn deleted_ratio() {
        let mut s = SegmentMeta::growing(SegmentId(1), 0);
        assert_eq!(s.deleted_ratio(), 0.0);
        s.rows = 10;
        s.deleted_rows = 2;
        assert_eq!((s.deleted_ratio(), s.live_rows()), (0.2, 8));
    }
}
