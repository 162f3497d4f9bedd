//! Test hooks: named points where `milvus.debug_pause` holds a job, so crash
//! tests can kill the server exactly there (tests/test_crash.py). Both
//! settings are superuser-only, and with `milvus.debug_pause = 0` (the
//! default) every hook returns at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pgrx::pg_sys;

use crate::gucs::{self, PausePoint};

/// On the backend's own thread: if the settings name `point`, makes the WAL
/// written so far durable (what happened before the point survives a kill),
/// then waits, interruptibly, as a `PgSleep` wait event (tests find the
/// backend in `pg_stat_activity` by it).
pub fn pause_at(point: PausePoint) {
    let Some(pause) = gucs::debug_pause(point) else { return };
    // SAFETY: plain backend calls on the main thread: a WAL flush up to the
    // insert position, then the latch wait pg_sleep() does.
    unsafe {
        pg_sys::XLogFlush(pg_sys::GetXLogInsertRecPtr());
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

/// For a job thread (which must not call Postgres): read on the main thread
/// before the job starts; `hold(cancel)` in the thread waits at the point
/// until the pause ends or the job is cancelled.
#[derive(Clone, Copy)]
pub struct Hold(Option<Duration>);

impl Hold {
    pub fn at(point: PausePoint) -> Self {
        Hold(gucs::debug_pause(point))
    }

    pub fn hold(self, cancel: &AtomicBool) {
        let Some(pause) = self.0 else { return };
        let start = Instant::now();
        while start.elapsed() < pause && !cancel.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
