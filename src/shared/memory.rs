//! The layout of the shared memory: the job log's slots, each index's and
//! each database's slot, the cache counters, under one lock. All-empty is
//! what `_PG_init` puts there (`Shared::default`).

use std::sync::atomic::{AtomicBool, Ordering};

use milvus_core::jobs::Phase;
use milvus_core::policy::retry::{Backoff, GrowingSeen};
use pgrx::prelude::*;
use pgrx::{PGRXSharedMemory, PgLwLock};

pub(super) const MAX_JOBS: usize = 128;
const MAX_INDEXES: usize = 256;
pub(super) const MAX_DATABASES: usize = 64;
/// A job records every segment it works on: a merge's inputs at the most.
pub(super) const MAX_JOB_SEGMENTS: usize = milvus_core::policy::compaction::MAX_INPUTS;
/// Room for an error message: the start and the whole cause of all but the
/// longest (`Text`).
const ERROR_BYTES: usize = 1024;

/// What a job does.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    Seal = 1,
    Flush = 2,
    Compact = 3,
    Gc = 4,
}

impl JobKind {
    /// Its name in `milvus_jobs` and the server log.
    pub fn name(self) -> &'static str {
        match self {
            JobKind::Seal => "seal",
            JobKind::Flush => "flush",
            JobKind::Compact => "compact",
            JobKind::Gc => "gc",
        }
    }
}

/// Where a job of the log is.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum JobState {
    /// A slot no job holds.
    Free = 0,
    Running = 1,
    Done = 2,
    Failed = 3,
}

/// A job's slot in the log.
#[derive(Clone, Copy)]
pub(super) struct Job {
    /// 0 for a free slot.
    pub(super) id: u64,
    pub(super) pid: i32,
    /// Meaningless while the slot is free.
    pub(super) kind: JobKind,
    pub(super) state: JobState,
    pub(super) database: u32,
    pub(super) index: u32,
    pub(super) segment_count: u8,
    /// [`Phase`] of a running job, as its waiting thread last saw it.
    pub(super) phase: Phase,
    pub(super) segments: [u64; MAX_JOB_SEGMENTS],
    /// Unix microseconds.
    pub(super) started: i64,
    pub(super) finished: i64,
    pub(super) rows: i64,
    pub(super) bytes: i64,
    pub(super) reason: Text<96>,
    pub(super) error: Text<ERROR_BYTES>,
}

impl Job {
    pub(super) const EMPTY: Job = Job {
        id: 0,
        pid: 0,
        kind: JobKind::Seal,
        state: JobState::Free,
        database: 0,
        index: 0,
        segment_count: 0,
        phase: Phase::Preparing,
        segments: [0; MAX_JOB_SEGMENTS],
        started: 0,
        finished: 0,
        rows: 0,
        bytes: 0,
        reason: Text::EMPTY,
        error: Text::EMPTY,
    };
}

/// A string in shared memory. One too long keeps its start and its end,
/// cut at character boundaries: an error's cause comes last in its chain
/// ("could not flush ...: ...: Permission denied (os error 13)"), and must
/// survive whole.
#[derive(Clone, Copy)]
pub(super) struct Text<const N: usize> {
    len: u16,
    bytes: [u8; N],
}

impl<const N: usize> Text<N> {
    const GAP: &'static str = " ... ";
    pub(super) const EMPTY: Self = Text { len: 0, bytes: [0; N] };

    pub(super) fn set(&mut self, s: &str) {
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

    pub(super) fn get(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("")
    }
}

/// An index's slot.
#[derive(Clone, Copy)]
pub(super) struct IndexSlot {
    pub(super) database: u32,
    pub(super) index: u32,
    pub(super) seen: GrowingSeen,
    pub(super) backoff: Backoff,
    /// The last failure of the current streak, for `milvus_segments()`.
    pub(super) failed_segment: u64,
    pub(super) error: Text<ERROR_BYTES>,
    /// A segment that could not be loaded for a search (corrupt or missing
    /// object), until it loads again or the index is rebuilt.
    pub(super) damaged_segment: u64,
    pub(super) damage: Text<ERROR_BYTES>,
}

impl IndexSlot {
    pub(super) const EMPTY: IndexSlot = IndexSlot {
        database: 0,
        index: 0,
        seen: GrowingSeen { segment: 0, rows: 0, changed_at: 0 },
        backoff: Backoff { failures: 0, retry_at: 0 },
        failed_segment: 0,
        error: Text::EMPTY,
        damaged_segment: 0,
        damage: Text::EMPTY,
    };
}

/// A database's slot.
#[derive(Clone, Copy)]
pub(super) struct DatabaseSlot {
    pub(super) database: u32,
    /// Unix seconds before which the launcher need not start a worker (the
    /// database had no milvus index at the last visit).
    pub(super) idle_until: u64,
    pub(super) last_gc: u64,
    /// A backend asked for a visit now (`milvus_flush(wait => false)`).
    pub(super) wanted: bool,
}

impl DatabaseSlot {
    pub(super) const EMPTY: DatabaseSlot = DatabaseSlot { database: 0, idle_until: 0, last_gc: 0, wanted: false };
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
    pub(super) launcher_pid: i32,
    cache: CacheCounters,
    pub(super) next_job: u64,
    pub(super) jobs: [Job; MAX_JOBS],
    pub(super) indexes: [IndexSlot; MAX_INDEXES],
    pub(super) databases: [DatabaseSlot; MAX_DATABASES],
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            launcher_pid: 0,
            cache: CacheCounters::default(),
            next_job: 0,
            jobs: [Job::EMPTY; MAX_JOBS],
            indexes: [IndexSlot::EMPTY; MAX_INDEXES],
            databases: [DatabaseSlot::EMPTY; MAX_DATABASES],
        }
    }
}

impl Shared {
    /// The slot of job `id`, while the log still holds it.
    pub(super) fn job_mut(&mut self, id: u64) -> Option<&mut Job> {
        self.jobs.iter_mut().find(|j| j.id == id && id != 0)
    }

    /// The slot for a new job: a free one (never used, or a discarded
    /// job's), else the oldest finished job's, else (every job running) the
    /// oldest's. Ids keep counting up whichever slot is taken, so a
    /// discarded job costs the log nothing.
    pub(super) fn slot_for_new_job(&mut self) -> &mut Job {
        let age = |j: &Job| match (j.id, j.state) {
            (0, _) => (0, 0),
            (id, JobState::Running) => (2, id),
            (id, _) => (1, id),
        };
        self.jobs.iter_mut().min_by_key(|j| age(j)).expect("the job log has slots")
    }
}

// SAFETY: plain old data, no pointers.
unsafe impl PGRXSharedMemory for Shared {}

// SAFETY: one lock of this name, initialised by pg_shmem_init! in _PG_init.
pub(super) static SHARED: PgLwLock<Shared> = unsafe { PgLwLock::new(c"pg_milvus") };
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
