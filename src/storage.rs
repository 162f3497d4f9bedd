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
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use milvus_core::cache::SegmentCache;
use milvus_core::jobs::{JobControl, Phase};
use milvus_core::storage::{RetryPolicy, S3Options, Storage, StorageError, location};
use pgrx::prelude::*;

use crate::gucs;

type StorageKey = (String, S3Options, Duration);
/// The cache directory and its bound.
type CacheKey = (String, u64);

thread_local! {
    /// The stores this backend opened, by URL and settings: a few at most
    /// (the default, and each `storage_url` indexes were built with).
    static STORAGES: RefCell<Vec<(StorageKey, Arc<Storage>)>> = const { RefCell::new(Vec::new()) };
    static CACHE: RefCell<Option<(CacheKey, Arc<SegmentCache>)>> = const { RefCell::new(None) };
}

/// Refuses a storage URL that the current user may not choose for an index
/// (its `storage_url` option, checked at CREATE INDEX and ALTER INDEX):
/// inside the data directory for anyone; for a user who is not a superuser,
/// anything but the embedded default or a location under
/// `milvus.allowed_storage_urls`.
pub fn check_index_location(url: &str) {
    if let Err((message, detail)) = gucs::check_outside_data_dir(url) {
        ereport!(ERROR, PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, message, detail);
    }
    // SAFETY: a catalog check of the current user.
    if url == gucs::default_storage_url() || unsafe { pgrx::pg_sys::superuser() } {
        return;
    }
    let allowed = gucs::allowed_storage_urls();
    if !location::is_allowed(url, &allowed) {
        let detail = if allowed.is_empty() {
            "Only superusers choose where an index is stored; milvus.allowed_storage_urls lists no location for other \
                users."
                .to_owned()
        } else {
            format!(
                "Only superusers choose where an index is stored; other users may name a location under \
                    milvus.allowed_storage_urls ({allowed})."
            )
        };
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("permission denied to store an index at \"{url}\""),
            detail
        );
    }
}

/// The store at `url`, `None` meaning the embedded default directory: an
/// index's objects live where its manifest says, whatever
/// `milvus.storage_url` says today. The failure to open is a value: jobs
/// report failures as their own (a flush leaves its segment sealed and says
/// why). An index's objects are read through `am::object_pages::reading_store`.
pub fn try_storage_at(url: Option<&str>) -> Result<Arc<Storage>, StorageError> {
    let url = url.map(str::to_owned).unwrap_or_else(gucs::default_storage_url);
    let key: StorageKey = (url, gucs::s3_options(), gucs::storage_timeout());
    STORAGES.with_borrow_mut(|opened| {
        if let Some((_, storage)) = opened.iter().find(|(k, _)| *k == key) {
            return Ok(storage.clone());
        }
        let retry = RetryPolicy { request_timeout: key.2, ..RetryPolicy::default() };
        let mut storage = Storage::open(&key.0, &key.1, retry)?;
        // The embedded default is named as Postgres names its files: relative
        // to the data directory, whose path only superusers may see.
        if key.0 == gucs::default_storage_url() {
            storage = storage.labelled("pg_milvus/objects");
        }
        let storage = Arc::new(storage);
        // Settings changed or many URLs: keep the few most recent.
        if opened.len() >= 8 {
            opened.remove(0);
        }
        opened.push((key, storage.clone()));
        Ok(storage)
    })
}

/// Records `url` among the locations GC searches, once. Lines are appended
/// with one write each (O_APPEND), so concurrent builds cannot interleave
/// them; a duplicate line from a race is harmless.
pub fn remember_location(url: &str) {
    if remembered_locations().iter().any(|u| u == url) {
        return;
    }
    let path = std::path::PathBuf::from(gucs::locations_file());
    let written = std::fs::create_dir_all(path.parent().expect("inside the data directory")).and_then(|_| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path)?;
        f.write_all(format!("{url}\n").as_bytes())?;
        f.sync_all()
    });
    if let Err(e) = written {
        crate::error::raise(
            PgSqlErrorCode::ERRCODE_IO_ERROR,
            format!("cannot record storage location in {}: {e}", path.display()),
            None,
            None,
        );
    }
}

thread_local! {
    /// The writer id this backend read, with the timeline it holds for.
    static WRITER: std::cell::Cell<Option<(u32, u64)>> = const { std::cell::Cell::new(None) };
}

/// The number this cluster's object keys begin with: the system identifier
/// on the timeline where pg_milvus first wrote, and a new random number
/// from the first write on any later timeline. A timeline changes when a
/// standby or a restored backup is promoted: that server is a clone of the
/// one it came from (the system identifier is the same), which may still be
/// running and sharing the store, so from then on it writes, and collects
/// garbage, under a prefix of its own, and its indexes adopt what they
/// reference (`am/adopt.rs`). Kept in `pg_milvus/writer` ("<id hex>
/// <timeline>"), written once per timeline under a lock file.
pub fn writer_id() -> u64 {
    // SAFETY: reads of shared state and a backend global.
    let (system, in_recovery) = unsafe { (pg_sys::GetSystemIdentifier(), pg_sys::RecoveryInProgress()) };
    let path = std::path::PathBuf::from(format!("{}/pg_milvus/writer", gucs::data_dir()));
    let recorded = || -> Option<(u64, u32)> {
        let text = std::fs::read_to_string(&path).ok()?;
        let mut words = text.split_whitespace();
        Some((u64::from_str_radix(words.next()?, 16).ok()?, words.next()?.parse().ok()?))
    };
    if in_recovery {
        // A standby writes nothing: the id it reads keys under is its
        // primary's, carried by the base backup.
        return recorded().map_or(system, |(id, _)| id);
    }
    // SAFETY: valid once recovery is over.
    let timeline = unsafe { pg_sys::GetWALInsertionTimeLine() };
    if let Some((t, id)) = WRITER.get()
        && t == timeline
    {
        return id;
    }
    let decided = (|| -> std::io::Result<u64> {
        std::fs::create_dir_all(path.parent().expect("inside the data directory"))?;
        let lock = std::fs::File::create(path.with_extension("lock"))?;
        lock.lock()?;
        let id = match recorded() {
            Some((id, t)) if t == timeline => return Ok(id),
            // Another timeline: a promoted clone, a new writer.
            Some(_) => {
                use std::hash::BuildHasher;
                std::collections::hash_map::RandomState::new().hash_one((system, timeline, std::process::id()))
            }
            // The first write of this cluster.
            None => system,
        };
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, format!("{id:016x} {timeline}\n"))?;
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        Ok(id)
    })();
    let id = decided.unwrap_or_else(|e| {
        crate::error::raise(
            PgSqlErrorCode::ERRCODE_IO_ERROR,
            format!("cannot record the writer id in pg_milvus/writer: {e}"),
            None,
            None,
        )
    });
    WRITER.set(Some((timeline, id)));
    id
}

/// Every URL [`remember_location`] recorded.
pub fn remembered_locations() -> Vec<String> {
    std::fs::read_to_string(gucs::locations_file())
        .map(|s| s.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The backend's view of the shared segment cache.
pub fn cache() -> Arc<SegmentCache> {
    let (dir, label) = gucs::cache_dir();
    let key = (dir, gucs::cache_size_bytes());
    CACHE.with_borrow_mut(|slot| {
        if let Some((_, cache)) = slot.as_ref().filter(|(k, _)| *k == key) {
            return cache.clone();
        }
        if label.is_some() {
            remove_old_default_cache();
        }
        let opened = SegmentCache::new(&key.0, key.1).map(|c| match label {
            Some(label) => c.labelled(label),
            None => c,
        });
        let cache = Arc::new(opened.unwrap_or_else(|e| {
            let message = match label {
                Some(label) => format!("cannot create the segment cache directory {label}"),
                None => e.to_string(),
            };
            ereport!(ERROR, PgSqlErrorCode::ERRCODE_IO_ERROR, message, "Check milvus.cache_dir.");
        }));
        *slot = Some((key, cache.clone()));
        cache
    })
}

/// Removes the cache directory 0.2 and before used by default (only copies
/// of objects, in base backups with names tar refuses), if it is there.
/// Backends racing to do it are harmless; one that still maps a file from
/// it keeps its pages until it unmaps them.
fn remove_old_default_cache() {
    let old = std::path::Path::new(&gucs::data_dir()).join(gucs::OLD_DEFAULT_CACHE_DIR);
    if old.exists()
        && let Err(e) = std::fs::remove_dir_all(&old)
    {
        debug1!("pg_milvus: could not remove the old cache directory {}: {e}", gucs::OLD_DEFAULT_CACHE_DIR);
    }
}

thread_local! {
    /// This backend's cache (by address) and its counters as last added to
    /// the server's.
    static REPORTED: std::cell::Cell<(usize, [u64; 4])> = const { std::cell::Cell::new((0, [0; 4])) };
}

/// Adds what this backend's cache did since the last call to the server's
/// counters (shared memory; only the main thread may touch it, so this is
/// called after the job, not by it).
pub fn report_cache_use() {
    let Some(cache) = CACHE.with_borrow(|slot| slot.as_ref().map(|(_, c)| c.clone())) else {
        return;
    };
    let s = &cache.stats;
    let now = [&s.hits, &s.misses, &s.bytes_downloaded, &s.evictions].map(|c| c.load(Ordering::Relaxed));
    let id = Arc::as_ptr(&cache) as usize;
    let (reported_id, before) = REPORTED.replace((id, now));
    // A new cache (the settings changed) counts from zero.
    let d = |i: usize| now[i] - if reported_id == id { before[i] } else { 0 };
    crate::shared::add_cache_counters(crate::shared::CacheCounters {
        hits: d(0),
        misses: d(1),
        bytes_downloaded: d(2),
        evictions: d(3),
    });
}

/// The threads a load of several segments may use: in a session, which
/// waits for it, the machine's cores, at most 4; in a background worker,
/// one: its work runs beside the queries, which must keep the other cores
/// (on two cores, merges on both took queries from 1,500 to 140 a second:
/// docs/benchmark-runs.md, "Seal small"). A graph is built on one thread.
pub fn job_threads() -> usize {
    // SAFETY: a process global, set when the process starts.
    #[cfg(feature = "pg15")]
    let worker = unsafe { pg_sys::IsBackgroundWorker };
    // SAFETY: the same, as PostgreSQL 17 on keep it.
    #[cfg(feature = "pg18")]
    let worker = unsafe { pg_sys::MyBackendType == pg_sys::BackendType::B_BG_WORKER };
    if worker {
        return 1;
    }
    std::thread::available_parallelism().map(|n| n.get().min(4)).unwrap_or(1)
}

/// Cancels the job when dropped: on normal return (it is over anyway), and
/// when `CHECK_FOR_INTERRUPTS()` raises an error and unwinds through the
/// wait.
struct CancelOnDrop(Arc<JobControl>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Runs `job` on a helper thread with all signals blocked and waits for it
/// interruptibly (interrupts are checked at least every 10 ms). The job
/// gets its [`JobControl`]: the cancel flag, set if the wait is
/// interrupted, and the phase it reports.
pub fn run_job<T: Send + 'static>(name: &str, job: impl FnOnce(&JobControl) -> T + Send + 'static) -> T {
    run_job_watched(name, Priority::Backend, |_| {}, job)
}

/// [`run_job`] at `priority`, calling `on_phase` on this (the main) thread
/// whenever the job reports a new phase, e.g. to show it in shared memory.
pub fn run_job_watched<T: Send + 'static>(
    name: &str,
    priority: Priority,
    on_phase: impl FnMut(Phase),
    job: impl FnOnce(&JobControl) -> T + Send + 'static,
) -> T {
    run_job_meanwhile(name, priority, on_phase, &mut || {}, job)
}

/// Lowers the calling thread's priority to `nice` (Linux's nice values
/// are per thread). A failure leaves it as it was: the job runs anyway.
fn lower_priority(nice: i32) {
    // SAFETY: plain libc calls on this thread's own id.
    let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice) };
}

/// How often [`run_job_meanwhile`] gives the main thread to other work.
const MEANWHILE_EVERY: Duration = Duration::from_millis(100);

/// How a job's thread shares the CPU with the server's other work.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// As the backend: a query waits for it (loads, downloads).
    Backend,
    /// At `milvus.maintenance_nice`: flushes and merges, whose graph builds
    /// would otherwise take the CPU queries need ([`job_threads`]). Only
    /// the job's thread: the backend's own thread, which takes locks, keeps
    /// its priority, so no lock waits behind a niced holder.
    Maintenance,
}

/// [`run_job_watched`] at `priority`, also calling `meanwhile` on this
/// thread every [`MEANWHILE_EVERY`] while the job runs: a worker flushes
/// the segments sealed during a long merge (which holds no segment lock
/// meanwhile) rather than after it.
pub fn run_job_meanwhile<T: Send + 'static>(
    name: &str,
    priority: Priority,
    mut on_phase: impl FnMut(Phase),
    meanwhile: &mut dyn FnMut(),
    job: impl FnOnce(&JobControl) -> T + Send + 'static,
) -> T {
    let nice = match priority {
        Priority::Backend => 0,
        Priority::Maintenance => crate::gucs::maintenance_nice(),
    };
    let control = Arc::new(JobControl::default());
    let _guard = CancelOnDrop(control.clone());
    let for_job = control.clone();
    crate::debug::arm();
    // SAFETY: plain libc signal-mask calls on this thread; the old mask is
    // restored right after the spawn.
    let handle = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        let spawned = std::thread::Builder::new().name(format!("milvus-{name}")).spawn(move || {
            if nice > 0 {
                lower_priority(nice);
            }
            job(&for_job)
        });
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        spawned.unwrap_or_else(|e| {
            crate::error::raise(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_RESOURCES,
                format!("cannot start a thread for {name}: {e}"),
                None,
                None,
            )
        })
    };
    // Catalog lookups take a fresh snapshot when needed: holding one through
    // an upload or a build would hold back VACUUM's horizon for nothing.
    // SAFETY: the catalog snapshot is an unregistered cache, dropped here.
    unsafe { pg_sys::InvalidateCatalogSnapshot() };
    // Short jobs (opening cached segments takes some 100 us) end within the
    // first naps; long ones (uploads, builds) are looked at every 10 ms. A
    // fixed 10 ms nap was most of a new connection's first query.
    let mut nap = Duration::from_micros(50);
    let mut phase = Phase::Preparing;
    let mut last_meanwhile = Instant::now();
    while !handle.is_finished() {
        pgrx::check_for_interrupts!();
        if control.phase() != phase {
            phase = control.phase();
            on_phase(phase);
        }
        if last_meanwhile.elapsed() >= MEANWHILE_EVERY {
            meanwhile();
            last_meanwhile = Instant::now();
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(10));
    }
    handle.join().unwrap_or_else(|_| error!("the {name} job panicked; see the server log"))
}
