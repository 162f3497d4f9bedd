//! Object storage and the segment cache, as a backend sees them, and the one
//! way slow work runs: off the main thread, interruptibly.
//!
//! A backend opens its `Storage` (from `milvus.storage_url`) and its
//! `SegmentCache` (`milvus.cache_dir`, `milvus.cache_size`) on first use and
//! keeps them while the settings do not change.
//!
//! [`run_job`] is invariant 7 in code: object storage I/O and HNSW builds run
//! on a helper thread started with every signal blocked (threads it starts,
//! such as the build's rayon pool, inherit that), so Postgres' signal
//! handlers only ever run on the main thread. The main thread waits in 10 ms
//! slices with `CHECK_FOR_INTERRUPTS()` between them, so a cancel or a
//! shutdown is served at once; the job is told to stop (its cancel flag) and
//! whatever it uploads after that is unreferenced, garbage for GC.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use milvus_core::cache::SegmentCache;
use milvus_core::storage::{RetryPolicy, S3Options, Storage};
use pgrx::prelude::*;

use crate::gucs;

thread_local! {
    static STORAGE: RefCell<Option<((String, S3Options), Arc<Storage>)>> = const { RefCell::new(None) };
    static CACHE: RefCell<Option<((String, u64), Arc<SegmentCache>)>> = const { RefCell::new(None) };
}

/// The backend's storage, opened from the current settings.
pub fn storage() -> Arc<Storage> {
    try_storage().unwrap_or_else(|message| {
        ereport!(ERROR, PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, message, "Check milvus.storage_url and the milvus.s3_* settings.");
    })
}

/// The same, the failure to open as a value: for jobs that report failures
/// as their own (a flush leaves its segment sealed and says why).
pub fn try_storage() -> Result<Arc<Storage>, String> {
    let key = (gucs::storage_url(), gucs::s3_options());
    STORAGE.with_borrow_mut(|slot| {
        if let Some((_, storage)) = slot.as_ref().filter(|(k, _)| *k == key) {
            return Ok(storage.clone());
        }
        let storage = Arc::new(Storage::open(&key.0, &key.1, RetryPolicy::default()).map_err(|e| e.to_string())?);
        *slot = Some((key, storage.clone()));
        Ok(storage)
    })
}

/// The backend's view of the shared segment cache.
pub fn cache() -> Arc<SegmentCache> {
    let key = (gucs::cache_dir(), gucs::cache_size_bytes());
    CACHE.with_borrow_mut(|slot| {
        if let Some((_, cache)) = slot.as_ref().filter(|(k, _)| *k == key) {
            return cache.clone();
        }
        let cache = Arc::new(SegmentCache::new(&key.0, key.1).unwrap_or_else(|e| {
            ereport!(ERROR, PgSqlErrorCode::ERRCODE_IO_ERROR, e.to_string(), "Check milvus.cache_dir.");
        }));
        *slot = Some((key, cache.clone()));
        cache
    })
}

/// Sets the cancel flag when dropped: on normal return, and when
/// `CHECK_FOR_INTERRUPTS()` raises an error and unwinds through `run_job`.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs `job` on a helper thread with all signals blocked and waits for it
/// interruptibly. `job` gets a cancel flag, set if the wait is interrupted.
pub fn run_job<T: Send + 'static>(name: &str, job: impl FnOnce(&AtomicBool) -> T + Send + 'static) -> T {
    let cancel = Arc::new(AtomicBool::new(false));
    let _guard = CancelOnDrop(cancel.clone());
    let flag = cancel.clone();
    // SAFETY: plain libc signal-mask calls on this thread; the old mask is
    // restored right after the spawn.
    let handle = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        let spawned = std::thread::Builder::new().name(format!("milvus-{name}")).spawn(move || job(&flag));
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        spawned.unwrap_or_else(|e| error!("cannot start a thread for {name}: {e}"))
    };
    // Catalog lookups take a fresh snapshot when needed: holding one through
    // an upload or a build would hold back VACUUM's horizon for nothing.
    // SAFETY: the catalog snapshot is an unregistered cache, dropped here.
    unsafe { pg_sys::InvalidateCatalogSnapshot() };
    while !handle.is_finished() {
        pgrx::check_for_interrupts!();
        std::thread::sleep(Duration::from_millis(10));
    }
    handle.join().unwrap_or_else(|_| error!("the {name} job panicked; see the server log"))
}
