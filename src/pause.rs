//! Pause points: named points where `milvus.debug_pause` holds a job, so crash
//! tests can kill the server exactly there (tests/test_crash.py). Both
//! settings are superuser-only and exist in debug builds only (the test
//! tiers install one; `crate::gucs`); with `milvus.debug_pause = 0` (the
//! default), and always in a release build, every hook returns at once.
//! The core reaches its own points through the same hook
//! (`milvus_core::pause`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use milvus_core::pause;
use pgrx::pg_sys;

use crate::gucs::{self, PausePoint};

/// On the backend's own thread: if the settings name `point`, makes the WAL
/// written so far durable (what happened before the point survives a kill),
/// then waits, interruptibly, as a `PgSleep` wait event (tests find the
/// backend in `pg_stat_activity` by it).
pub fn pause_at(point: PausePoint) {
    let Some(pause) = gucs::debug_pause(point) else { return };
    // SAFETY: plain backend calls on the main thread: a flush of this
    // backend's WAL, then the latch wait pg_sleep() does.
    unsafe {
        flush_own_wal();
        let deadline = Instant::now() + pause;
        while let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) {
            pg_sys::WaitLatch(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
                left.min(Duration::from_millis(100)).as_millis() as i64,
                pg_sys::WaitEventTimeout::WAIT_EVENT_PG_SLEEP,
            );
            pg_sys::ResetLatch(pg_sys::MyLatch);
            pgrx::check_for_interrupts!();
        }
    }
}

/// Makes the WAL this backend wrote so far durable. Up to its last
/// record's end, not the insert position: at a page boundary that lies
/// past the next page's header, which nothing has written, and PostgreSQL
/// refuses a flush request beyond what was written.
///
/// # Safety
/// On the backend's own thread.
unsafe fn flush_own_wal() {
    // SAFETY: the caller's; a backend global.
    unsafe {
        if pg_sys::XactLastRecEnd != 0 {
            pg_sys::XLogFlush(pg_sys::XactLastRecEnd);
        }
    }
}

/// Installs the core's test hook (`milvus_core::pause`) in a debug build;
/// from `_PG_init`.
pub fn init() {
    if cfg!(debug_assertions) {
        pause::install(reached);
    }
}

/// The pauses of the points inside jobs, in milliseconds (0: none), as the
/// settings were when the running job started: a job's thread must not
/// read settings (only the main thread calls Postgres).
static BUILD_MS: AtomicU64 = AtomicU64::new(0);
static UPLOAD_MS: AtomicU64 = AtomicU64::new(0);
static GC_MS: AtomicU64 = AtomicU64::new(0);
static MERGE_MS: AtomicU64 = AtomicU64::new(0);
static RESTORE_MS: AtomicU64 = AtomicU64::new(0);
static FREE_MS: AtomicU64 = AtomicU64::new(0);

/// On the main thread, before a job starts (`crate::off_thread::run`), or before
/// core code that reaches a point on this thread (a restore from pages;
/// a manifest commit freeing chains follows GC's job): copies the settings
/// of the points the core reaches.
pub fn arm() {
    let ms = |point| gucs::debug_pause(point).map_or(0, |d| d.as_millis() as u64);
    BUILD_MS.store(ms(PausePoint::Build), Ordering::Relaxed);
    UPLOAD_MS.store(ms(PausePoint::Upload), Ordering::Relaxed);
    GC_MS.store(ms(PausePoint::Gc), Ordering::Relaxed);
    MERGE_MS.store(ms(PausePoint::Merge), Ordering::Relaxed);
    RESTORE_MS.store(ms(PausePoint::Restore), Ordering::Relaxed);
    FREE_MS.store(ms(PausePoint::Free), Ordering::Relaxed);
}

/// The hook, on a job's thread (or the backend's, for the points core code
/// reaches there): waits at `point` if armed there, until the pause ends or
/// the job is cancelled.
fn reached(point: pause::Point, cancel: &AtomicBool) {
    let ms = match point {
        pause::Point::Build => BUILD_MS.load(Ordering::Relaxed),
        pause::Point::BinlogUploaded => UPLOAD_MS.load(Ordering::Relaxed),
        pause::Point::GcDeleted => GC_MS.load(Ordering::Relaxed),
        pause::Point::Merge => MERGE_MS.load(Ordering::Relaxed),
        pause::Point::ObjectRestored => RESTORE_MS.load(Ordering::Relaxed),
        pause::Point::ChainPageFreed => FREE_MS.load(Ordering::Relaxed),
    };
    if ms > 0 && matches!(point, pause::Point::ObjectRestored | pause::Point::ChainPageFreed) {
        // SAFETY: these two are reached on the backend's own thread: as in
        // pause_at, what was logged before the point survives a kill.
        unsafe { flush_own_wal() };
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(ms) && !cancel.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
    }
}
