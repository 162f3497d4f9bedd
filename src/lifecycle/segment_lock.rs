//! The job lock of (index, segment): held while one job (a flush, a
//! compaction, a VACUUM pass) works on the segment, so a flush never
//! publishes rows that VACUUM removed meanwhile, and two flushes never
//! upload the same segment.
//!
//! Released as soon as the job is done (dropped), not at commit: a flush
//! from a session then holds one lock at a time and never waits while
//! holding one, and compaction takes its inputs' locks in id order, so two
//! sessions and a worker cannot deadlock on them (they did, before: a worker
//! held a segment it had flushed while waiting for a compaction input
//! another session's flush still held). An error releases it with the
//! transaction's abort.
//!
//! One more lock of the same kind covers an index's object pages
//! (`object_pages.rs`): writers of a chain share it until the commit that
//! references their object; VACUUM takes back pages of no object only when
//! it can take it alone.

use pgrx::pg_sys;

use crate::pages::Index;

pub struct SegmentLock(pg_sys::LOCKTAG, pg_sys::LOCKMODE);

/// The lock tag of `field3` of `index`.
fn tag(index: Index, field3: u32) -> pg_sys::LOCKTAG {
    pg_sys::LOCKTAG {
        locktag_field1: crate::catalog::database(),
        locktag_field2: index.oid().to_u32(),
        locktag_field3: field3,
        // "MV" in the field SQL-level advisory locks set to 1 or 2, so
        // these never collide with a user's pg_advisory_lock.
        locktag_field4: 0x4d56,
        locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
        locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
    }
}

/// The third field of the lock of an index's object pages: no segment's.
const OBJECT_PAGES: u32 = u32::MAX;

impl SegmentLock {
    /// Waits for the lock of `segment` of `index`.
    pub fn acquire(index: Index, segment: u64) -> SegmentLock {
        let tag = tag(index, segment as u32);
        let mode = pg_sys::ExclusiveLock as pg_sys::LOCKMODE;
        // SAFETY: a heavyweight lock on a tag of ours, released in drop.
        unsafe { pg_sys::LockAcquire(&tag, mode, false, false) };
        SegmentLock(tag, mode)
    }

    /// Held by whoever writes an object's chain of pages, from its first
    /// page until the manifest change that references it: many at once.
    pub fn writing_objects(index: Index) -> SegmentLock {
        let tag = tag(index, OBJECT_PAGES);
        let mode = pg_sys::ShareLock as pg_sys::LOCKMODE;
        // SAFETY: as in `acquire`.
        unsafe { pg_sys::LockAcquire(&tag, mode, false, false) };
        SegmentLock(tag, mode)
    }

    /// VACUUM's sweep takes back object pages of no object only with this
    /// lock: no chain is being written. `None` if a writer holds it (the
    /// pages wait for the next VACUUM); never waits.
    pub fn no_object_writers(index: Index) -> Option<SegmentLock> {
        let tag = tag(index, OBJECT_PAGES);
        let mode = pg_sys::ExclusiveLock as pg_sys::LOCKMODE;
        // SAFETY: as in `acquire`, without waiting.
        let got = unsafe { pg_sys::LockAcquire(&tag, mode, false, true) };
        (got != pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL).then_some(SegmentLock(tag, mode))
    }

    /// The locks of several segments, taken in id order (see above).
    pub fn acquire_all(index: Index, segments: &[u64]) -> Vec<SegmentLock> {
        let mut ids = segments.to_vec();
        ids.sort_unstable();
        ids.into_iter().map(|s| SegmentLock::acquire(index, s)).collect()
    }
}

impl Drop for SegmentLock {
    fn drop(&mut self) {
        // SAFETY: releasing the lock acquired in `acquire`, held until now.
        unsafe { pg_sys::LockRelease(&self.0, self.1, false) };
    }
}
