//! Each database's state in shared memory, for the launcher: whether it
//! holds no milvus index (so no worker need visit), when its garbage was
//! last collected, and whether a backend asked for a visit now; and the
//! launcher's process, which such a backend wakes.

use pgrx::prelude::*;

use super::memory::{DatabaseSlot, MAX_DATABASES, SHARED, enabled};

/// Runs `f` on the database's slot, made if missing.
fn with_database<T>(database: u32, f: impl FnOnce(&mut DatabaseSlot) -> T) -> Option<T> {
    if !enabled() {
        return None;
    }
    let mut shared = SHARED.exclusive();
    let at = match shared.databases.iter().position(|s| s.database == database) {
        Some(at) => at,
        None => {
            let at =
                shared.databases.iter().position(|s| s.database == 0).unwrap_or((database as usize) % MAX_DATABASES);
            shared.databases[at] = DatabaseSlot::EMPTY;
            shared.databases[at].database = database;
            at
        }
    };
    Some(f(&mut shared.databases[at]))
}

/// Marks a database as holding no milvus index until `until`.
pub fn set_idle_until(database: u32, until: u64) {
    with_database(database, |d| d.idle_until = until);
}

/// Whether the database is known to hold no milvus index (until the time
/// its last visit set).
pub fn idle(database: u32, now: u64) -> bool {
    enabled() && SHARED.share().databases.iter().any(|d| d.database == database && now < d.idle_until)
}

/// The databases a backend asked a visit of since the last call; clears
/// the requests.
pub fn take_wanted() -> Vec<u32> {
    if !enabled() || !SHARED.share().databases.iter().any(|d| d.wanted) {
        return Vec::new();
    }
    let mut shared = SHARED.exclusive();
    shared
        .databases
        .iter_mut()
        .filter(|d| d.wanted)
        .map(|d| {
            d.wanted = false;
            d.database
        })
        .collect()
}

/// Whether garbage collection of the database is due; if so, records that
/// it starts now.
pub fn gc_due(database: u32, now: u64, interval: u64) -> bool {
    with_database(database, |d| {
        let due = now >= d.last_gc.saturating_add(interval);
        if due {
            d.last_gc = now;
        }
        due
    })
    .unwrap_or(false)
}

pub fn set_launcher_pid(pid: i32) {
    if enabled() {
        SHARED.exclusive().launcher_pid = pid;
    }
}

/// The launcher's process, if it runs.
fn launcher() -> Option<*mut pg_sys::PGPROC> {
    if !enabled() || crate::gucs::max_workers() == 0 {
        return None;
    }
    let pid = SHARED.share().launcher_pid;
    // SAFETY: BackendPidGetProc takes ProcArrayLock itself.
    let proc = unsafe { pg_sys::BackendPidGetProc(pid) };
    (pid != 0 && !proc.is_null()).then_some(proc)
}

/// Whether background workers will pick up work.
pub fn workers_running() -> bool {
    launcher().is_some()
}

/// Asks the launcher to visit `database` now.
pub fn wake_launcher(database: u32) {
    with_database(database, |d| d.wanted = true);
    if let Some(proc) = launcher() {
        // SAFETY: a latch lives in shared memory; SetLatch may be called on
        // another process's latch.
        unsafe { pg_sys::SetLatch(&raw mut (*proc).procLatch) };
    }
}
