//! Pause points: named points inside long jobs where a crash test holds a job
//! to kill the server exactly there (tests/test_crash.py, tests/test_gc.py).
//!
//! A registry, not a parameter: the jobs' signatures say what they do, and
//! the one process-wide hook (the skin's `debug::reached`, installed at
//! library load) decides whether to hold. With none installed, [`reach`]
//! returns at once.

use std::sync::OnceLock;
use std::sync::atomic::AtomicBool;

/// Where a job may be held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// A flush is about to build its segment's graph.
    Build,
    /// A flush uploaded its insert binlog, not yet its index file.
    BinlogUploaded,
    /// Garbage collection deleted an object, and goes on.
    GcDeleted,
    /// A compaction read its inputs and is about to write its output.
    Merge,
    /// A restore from the index's pages put one object's file in place, and
    /// goes on (on the backend's own thread).
    ObjectRestored,
    /// A manifest commit that dropped objects freed one page of their
    /// chains, and goes on (on the backend's own thread).
    ChainPageFreed,
}

/// What a hook is: called at `point` with the job's cancel flag, which it
/// must watch if it waits.
pub type Hook = fn(Point, &AtomicBool);

static HOOK: OnceLock<Hook> = OnceLock::new();

/// Installs the process's hook; a second call is ignored.
pub fn install(hook: Hook) {
    let _ = HOOK.set(hook);
}

/// Never set: the cancel flag of a point reached outside a job.
pub(crate) static NOT_CANCELLED: AtomicBool = AtomicBool::new(false);

/// Called by jobs at `point`.
pub(crate) fn reach(point: Point, cancel: &AtomicBool) {
    if let Some(hook) = HOOK.get() {
        hook(point, cancel);
    }
}
