//! Each index's state in shared memory: when its growing segment last
//! changed (for sealing by idle time), its background work's failure
//! streak and backoff, and a segment searches could not load.

use milvus_core::policy::retry::{GrowingSeen, Streak};

use super::memory::{IndexSlot, SHARED, enabled};

/// Runs `f` on the slot of (database, index), made if missing (replacing
/// the least recently changed one when full).
fn with_index<T>(database: u32, index: u32, f: impl FnOnce(&mut IndexSlot) -> T) -> Option<T> {
    if !enabled() {
        return None;
    }
    let mut shared = SHARED.exclusive();
    let at = match shared.indexes.iter().position(|s| s.database == database && s.index == index) {
        Some(at) => at,
        None => {
            let at = shared
                .indexes
                .iter()
                .position(|s| s.index == 0)
                .or_else(|| shared.indexes.iter().enumerate().min_by_key(|(_, s)| s.seen.changed_at).map(|(i, _)| i))
                .expect("MAX_INDEXES > 0");
            shared.indexes[at] = IndexSlot::EMPTY;
            shared.indexes[at].database = database;
            shared.indexes[at].index = index;
            at
        }
    };
    Some(f(&mut shared.indexes[at]))
}

/// Records the growing segment as seen now; returns since when it has not
/// changed (Unix seconds).
pub fn observe_growing(database: u32, index: u32, segment: u64, rows: u64, now: u64) -> u64 {
    with_index(database, index, |slot| {
        let previous = (slot.seen.changed_at != 0).then_some(slot.seen);
        slot.seen = GrowingSeen::observe(previous, segment, rows, now);
        slot.seen.changed_at
    })
    .unwrap_or(now)
}

/// Whether background work on the index may be attempted now.
pub fn ready(database: u32, index: u32, now: u64) -> bool {
    with_index(database, index, |slot| slot.backoff.ready(now)).unwrap_or(true)
}

/// Records the outcome of background work on an index; returns what to log.
pub fn record_outcome(database: u32, index: u32, now: u64, outcome: Result<(), (u64, &str)>) -> Streak {
    with_index(database, index, |slot| match outcome {
        Ok(()) => {
            slot.error.set("");
            slot.failed_segment = 0;
            slot.backoff.succeed()
        }
        Err((segment, error)) => {
            slot.failed_segment = segment;
            slot.error.set(error);
            let base = crate::gucs::naptime().as_secs();
            slot.backoff.fail(now, base, 600)
        }
    })
    .unwrap_or(Streak::Quiet)
}

/// What is wrong with an index's segments, for `milvus_segments()`: the
/// background workers' current failure streak (segment, error, attempts),
/// and a segment searches could not load (segment, error).
pub struct IndexTrouble {
    pub failure: Option<(u64, String, u32)>,
    pub damage: Option<(u64, String)>,
}

pub fn trouble(database: u32, index: u32) -> IndexTrouble {
    let none = IndexTrouble { failure: None, damage: None };
    if !enabled() {
        return none;
    }
    let shared = SHARED.share();
    let Some(slot) = shared.indexes.iter().find(|s| s.database == database && s.index == index) else {
        return none;
    };
    IndexTrouble {
        failure: (slot.backoff.failures > 0)
            .then(|| (slot.failed_segment, slot.error.get().to_owned(), slot.backoff.failures)),
        damage: (slot.damaged_segment != 0).then(|| (slot.damaged_segment, slot.damage.get().to_owned())),
    }
}

/// Records that `segment` of an index could not be loaded (`Some(error)`),
/// or that it loaded (`None`: clears a damage recorded for it; segment 0
/// clears any, for a rebuilt index).
pub fn set_damage(database: u32, index: u32, segment: u64, error: Option<&str>) {
    if !enabled() {
        return;
    }
    // Look before making a slot: a healthy load must not claim one.
    if error.is_none()
        && !SHARED.share().indexes.iter().any(|s| s.database == database && s.index == index && s.damaged_segment != 0)
    {
        return;
    }
    with_index(database, index, |slot| match error {
        Some(e) => {
            slot.damaged_segment = segment;
            slot.damage.set(e);
        }
        None if segment == 0 || slot.damaged_segment == segment => {
            slot.damaged_segment = 0;
            slot.damage.set("");
        }
        None => {}
    });
}
