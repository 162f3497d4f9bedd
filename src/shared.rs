//! The extension's shared memory, which backends and background workers
//! both use: a log of recent jobs (the `milvus_jobs` view), each index's
//! retry and idle-time state and damaged segment, each database's
//! bookkeeping, the segment cache's counters, and the launcher's PID so
//! backends can wake it.
//!
//! It exists only when pg_milvus is in `shared_preload_libraries`; without
//! it every function here is a no-op and the view is empty (the jobs still
//! run, in the backends that call `milvus_flush()` or `milvus_compact()`).
//! The lock is held only to copy a few hundred bytes in or out.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use milvus_core::jobs::Phase;
use milvus_core::policy::retry::{Backoff, GrowingSeen, Streak};
use pgrx::prelude::*;
use pgrx::{PGRXSharedMemory, PgLwLock};

const MAX_JOBS: usize = 128;
const MAX_INDEXES: usize = 256;
const MAX_DATABASES: usize = 64;
/// A job records every segment it works on: a merge's inputs at the most.
const MAX_JOB_SEGMENTS: usize = milvus_core::policy::compaction::MAX_INPUTS;
/// Room for an error message: the start and the whole cause of all but the
/// longest (`Text`).
const ERROR_BYTES: usize = 1024;

/// A string in shared memory. One too long keeps its start and its end,
/// cut at character boundaries: an error's cause comes last in its chain
/// ("could not flush ...: ...: Permission denied (os error 13)"), and must
/// survive whole.
#[derive(Clone, Copy)]
struct Text<const N: usize> {
    len: u16,
    bytes: [u8; N],
}

impl<const N: usize> Text<N> {
    const GAP: &'static str = " ... ";

    fn set(&mut self, s: &str) {
        let kept = if s.len() <= N {
            s.to_owned()
        } else {
            let mut head = N / 4;
            while !s.is_char_boundary(head) {
                head -= 1;
            }
            let mut tail = s.len() - (N - head - Self::GAP.len());
            while !s.is_char_boundary(tail) {
                tail += 1;
            }
            format!("{}{}{}", &s[..head], Self::GAP, &s[tail..])
        };
        self.bytes[..kept.len()].copy_from_slice(kept.as_bytes());
        self.len = kept.len() as u16;
    }

    fn get(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("")
    }
}

/// What a job does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    Seal = 1,
    Flush = 2,
    Compact = 3,
    Gc = 4,
}

fn kind_name(code: u8) -> &'static str {
    match code {
        1 => "seal",
        2 => "flush",
        3 => "compact",
        4 => "gc",
        _ => "unknown",
    }
}

const RUNNING: u8 = 1;
const DONE: u8 = 2;
const FAILED: u8 = 3;

#[derive(Clone, Copy)]
struct Job {
    id: u64,
    pid: i32,
    kind: u8,
    state: u8,
    database: u32,
    index: u32,
    segment_count: u8,
    /// [`Phase`] of a running job, as its waiting thread last saw it.
    phase: u8,
    segments: [u64; MAX_JOB_SEGMENTS],
    /// Unix microseconds.
    started: i64,
    finished: i64,
    rows: i64,
    bytes: i64,
    reason: Text<96>,
    error: Text<ERROR_BYTES>,
}

#[derive(Clone, Copy)]
struct IndexSlot {
    database: u32,
    index: u32,
    seen: GrowingSeen,
    backoff: Backoff,
    /// The last failure of the current streak, for `milvus_segments()`.
    failed_segment: u64,
    error: Text<ERROR_BYTES>,
    /// A segment that could not be loaded for a search (corrupt or missing
    /// object), until it loads again or the index is rebuilt.
    damaged_segment: u64,
    damage: Text<ERROR_BYTES>,
}

#[derive(Clone, Copy)]
struct DatabaseSlot {
    database: u32,
    /// Unix seconds before which the launcher need not start a worker (the
    /// database had no milvus index at the last visit).
    idle_until: u64,
    last_gc: u64,
    /// A backend asked for a visit now (`milvus_flush(wait => false)`).
    wanted: bool,
}

/// The server's use of the local segment cache, summed over processes.
#[derive(Clone, Copy, Default)]
pub struct CacheCounters {
    pub hits: u64,
    pub misses: u64,
    pub bytes_downloaded: u64,
    pub evictions: u64,
}

#[derive(Clone, Copy)]
pub struct Shared {
    launcher_pid: i32,
    cache: CacheCounters,
    next_job: u64,
    jobs: [Job; MAX_JOBS],
    indexes: [IndexSlot; MAX_INDEXES],
    databases: [DatabaseSlot; MAX_DATABASES],
}

impl Default for Shared {
    fn default() -> Self {
        // SAFETY: every field is an integer, a bool or an array of them, for
        // which all-zero is a valid (empty) value.
        unsafe { std::mem::zeroed() }
    }
}

// SAFETY: plain old data, no pointers.
unsafe impl PGRXSharedMemory for Shared {}

// SAFETY: one lock of this name, initialised by pg_shmem_init! in _PG_init.
static SHARED: PgLwLock<Shared> = unsafe { PgLwLock::new(c"pg_milvus") };
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Requests the shared memory; from `_PG_init` while preloading only.
pub fn init() {
    pgrx::pg_shmem_init!(SHARED);
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether shared memory (and so the workers) exists in this server.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

fn unix_micros() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

fn my_pid() -> i32 {
    // SAFETY: a backend global set at start.
    unsafe { pg_sys::MyProcPid }
}

/// A job while it runs: in the shared log (when there is one), and a LOG
/// line with its reason and duration when it is done. Dropped unfinished
/// (an error or a cancel unwinding through it), it is logged as failed.
pub struct JobRecord {
    id: u64,
    kind: JobKind,
    what: String,
    reason: String,
    started: std::time::Instant,
}

impl JobRecord {
    /// A job of `kind` on `segments` of the index `index` of this database;
    /// `what` names it for the log ("segment 3 of index \"items_idx\"").
    pub fn start(kind: JobKind, index: u32, segments: &[u64], what: String, reason: String) -> JobRecord {
        let mut record = JobRecord { id: 0, kind, what, reason, started: std::time::Instant::now() };
        if !enabled() {
            return record;
        }
        // SAFETY: a backend global set at connection.
        let database = unsafe { pg_sys::MyDatabaseId.to_u32() };
        let mut shared = SHARED.exclusive();
        // The oldest slot, passing over jobs still running (a long merge's
        // record keeps other plans off its inputs), unless all are.
        let mut id = shared.next_job + 1;
        for _ in 0..MAX_JOBS {
            if shared.jobs[(id as usize) % MAX_JOBS].state != RUNNING {
                break;
            }
            id += 1;
        }
        shared.next_job = id;
        let slot = &mut shared.jobs[(id as usize) % MAX_JOBS];
        // SAFETY: all-zero is a valid Job (see Shared::default).
        *slot = unsafe { std::mem::zeroed() };
        slot.id = id;
        slot.pid = my_pid();
        slot.kind = kind as u8;
        slot.state = RUNNING;
        slot.database = database;
        slot.index = index;
        slot.segment_count = segments.len().min(MAX_JOB_SEGMENTS) as u8;
        for (to, from) in slot.segments.iter_mut().zip(segments) {
            *to = *from;
        }
        slot.started = unix_micros();
        slot.reason.set(&record.reason);
        record.id = id;
        record
    }

    fn end(&mut self, state: u8, rows: u64, bytes: u64, error: &str) {
        let id = std::mem::take(&mut self.id);
        if id == 0 {
            return;
        }
        let mut shared = SHARED.exclusive();
        let slot = &mut shared.jobs[(id as usize) % MAX_JOBS];
        if slot.id == id {
            slot.state = state;
            slot.finished = unix_micros();
            slot.rows = rows as i64;
            slot.bytes = bytes as i64;
            slot.error.set(error);
        }
    }

    /// Shows the phase the job is in.
    pub fn set_phase(&self, phase: Phase) {
        if self.id == 0 {
            return;
        }
        let mut shared = SHARED.exclusive();
        let slot = &mut shared.jobs[(self.id as usize) % MAX_JOBS];
        if slot.id == self.id {
            slot.phase = phase as u8;
        }
    }

    /// Ends the job; `rows` are the rows written (for GC: objects deleted).
    pub fn done(mut self, rows: u64, bytes: u64) {
        self.end(DONE, rows, bytes, "");
        log!(
            "pg_milvus: {} of {} done in {:.2} s: {rows} rows, {bytes} bytes (reason: {})",
            kind_name(self.kind as u8),
            self.what,
            self.started.elapsed().as_secs_f64(),
            self.reason
        );
    }

    /// Forgets a job that found nothing to do (a GC with no garbage): the
    /// log keeps the jobs that did something.
    pub fn discard(mut self) {
        let id = std::mem::take(&mut self.id);
        if id != 0 {
            let mut shared = SHARED.exclusive();
            let slot = &mut shared.jobs[(id as usize) % MAX_JOBS];
            if slot.id == id {
                slot.id = 0;
            }
        }
    }

    /// Ends the job as failed; the caller reports the error.
    pub fn failed(mut self, error: &str) {
        self.end(FAILED, 0, 0, error);
    }
}

impl Drop for JobRecord {
    fn drop(&mut self) {
        self.end(FAILED, 0, 0, "interrupted by an error or a cancel");
    }
}

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
            // SAFETY: all-zero is a valid slot.
            shared.indexes[at] = unsafe { std::mem::zeroed() };
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

/// Adds a process's cache use to the server's counters.
pub fn add_cache_counters(delta: CacheCounters) {
    if enabled() {
        let mut shared = SHARED.exclusive();
        shared.cache.hits += delta.hits;
        shared.cache.misses += delta.misses;
        shared.cache.bytes_downloaded += delta.bytes_downloaded;
        shared.cache.evictions += delta.evictions;
    }
}

/// The server's cache counters; `None` without shared memory.
pub fn cache_counters() -> Option<CacheCounters> {
    enabled().then(|| SHARED.share().cache)
}

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
            // SAFETY: all-zero is a valid slot.
            shared.databases[at] = unsafe { std::mem::zeroed() };
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

/// A job of the log, as `milvus_job_log()` shows it.
pub struct JobView {
    pub id: u64,
    pub pid: i32,
    pub kind: &'static str,
    pub database: u32,
    pub index: u32,
    pub segments: Vec<u64>,
    /// `running`, `abandoned` (running, its process gone: its upload, if
    /// any, was never published), `done` or `failed`.
    pub state: &'static str,
    pub reason: String,
    /// Unix microseconds; 0 for none.
    pub started: i64,
    pub finished: i64,
    /// Rows and bytes written, for a job done.
    pub written: Option<(i64, i64)>,
    pub error: Option<String>,
}

/// The job log, newest first.
pub fn jobs() -> Vec<JobView> {
    let mut jobs: Vec<Job> =
        if enabled() { SHARED.share().jobs.iter().filter(|j| j.id != 0).copied().collect() } else { Vec::new() };
    jobs.sort_by_key(|j| std::cmp::Reverse(j.id));
    jobs.into_iter()
        .map(|j| {
            let state = match j.state {
                RUNNING if !process_alive(j.pid) => "abandoned",
                RUNNING => "running",
                DONE => "done",
                _ => "failed",
            };
            let finished = j.state != RUNNING;
            JobView {
                id: j.id,
                pid: j.pid,
                kind: kind_name(j.kind),
                database: j.database,
                index: j.index,
                segments: j.segments[..j.segment_count as usize].to_vec(),
                state,
                reason: j.reason.get().to_owned(),
                started: j.started,
                finished: j.finished,
                written: (j.state == DONE).then_some((j.rows, j.bytes)),
                error: (finished && !j.error.get().is_empty()).then(|| j.error.get().to_owned()),
            }
        })
        .collect()
}

/// Whether the process `pid` still runs in this server.
fn process_alive(pid: i32) -> bool {
    // SAFETY: BackendPidGetProc takes ProcArrayLock itself.
    unsafe { !pg_sys::BackendPidGetProc(pid).is_null() }
}

/// The jobs of `kind` running now on an index (their processes alive).
fn running(kind: JobKind, database: u32, index: u32) -> Vec<Job> {
    if !enabled() {
        return Vec::new();
    }
    let running: Vec<Job> = SHARED
        .share()
        .jobs
        .iter()
        .filter(|j| j.id != 0 && j.state == RUNNING && j.kind == kind as u8)
        .filter(|j| j.database == database && j.index == index)
        .copied()
        .collect();
    running.into_iter().filter(|j| process_alive(j.pid)).collect()
}

/// The segments of an index a flush is working on now, with the flush's
/// phase: what `milvus_segments()` shows as `flushing` (and `building`).
pub fn flushing(database: u32, index: u32) -> Vec<(u64, Phase)> {
    running(JobKind::Flush, database, index)
        .into_iter()
        .flat_map(|j| {
            let phase = if j.phase == Phase::Building as u8 { Phase::Building } else { Phase::Uploading };
            j.segments[..j.segment_count as usize].iter().map(move |s| (*s, phase)).collect::<Vec<_>>()
        })
        .collect()
}

/// The segments of an index that running compactions are rewriting: no
/// other plan may take them.
pub fn compacting(database: u32, index: u32) -> HashSet<u64> {
    running(JobKind::Compact, database, index)
        .into_iter()
        .flat_map(|j| j.segments[..j.segment_count as usize].to_vec())
        .collect()
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use super::Text;
    use pgrx::prelude::*;

    #[pg_test]
    fn a_long_error_keeps_its_cause_whole() {
        let mut t: Text<64> = Text { len: 0, bytes: [0; 64] };
        t.set("short");
        assert_eq!(t.get(), "short");
        let long =
            format!("could not flush segment 1 of index \"{}\": Permission denied (os error 13)", "é".repeat(60));
        t.set(&long);
        assert!(t.get().len() <= 64, "{}", t.get());
        assert!(t.get().starts_with("could not"), "{}", t.get());
        assert!(t.get().ends_with("Permission denied (os error 13)"), "{}", t.get());
    }
}
