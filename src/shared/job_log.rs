//! The job log in shared memory (the `milvus_jobs` view): every flush,
//! merge, seal and GC a process runs, while it runs and after, and which
//! segments running flushes and merges hold.

use std::collections::HashSet;

use milvus_core::jobs::Phase;
use pgrx::prelude::*;

use super::memory::{Job, JobKind, JobState, MAX_JOB_SEGMENTS, SHARED, enabled};

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
        shared.next_job += 1;
        let id = shared.next_job;
        // A long merge's running record keeps other plans off its inputs:
        // finished jobs make way first.
        let slot = shared.slot_for_new_job();
        *slot = Job::EMPTY;
        slot.id = id;
        slot.pid = my_pid();
        slot.kind = kind;
        slot.state = JobState::Running;
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

    fn end(&mut self, state: JobState, rows: u64, bytes: u64, error: &str) {
        let id = std::mem::take(&mut self.id);
        if id == 0 {
            return;
        }
        if let Some(slot) = SHARED.exclusive().job_mut(id) {
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
        if let Some(slot) = SHARED.exclusive().job_mut(self.id) {
            slot.phase = phase;
        }
    }

    /// Ends the job; `rows` are the rows written (for GC: objects deleted).
    pub fn done(mut self, rows: u64, bytes: u64) {
        self.end(JobState::Done, rows, bytes, "");
        log!(
            "pg_milvus: {} of {} done in {:.2} s: {rows} rows, {bytes} bytes (reason: {})",
            self.kind.name(),
            self.what,
            self.started.elapsed().as_secs_f64(),
            self.reason
        );
    }

    /// Forgets a job that found nothing to do (a GC with no garbage): the
    /// log keeps the jobs that did something.
    pub fn discard(mut self) {
        let id = std::mem::take(&mut self.id);
        if id != 0
            && let Some(slot) = SHARED.exclusive().job_mut(id)
        {
            *slot = Job::EMPTY;
        }
    }

    /// Ends the job as failed; the caller reports the error.
    pub fn failed(mut self, error: &str) {
        self.end(JobState::Failed, 0, 0, error);
    }
}

impl Drop for JobRecord {
    fn drop(&mut self) {
        self.end(JobState::Failed, 0, 0, "interrupted by an error or a cancel");
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
                JobState::Running if !process_alive(j.pid) => "abandoned",
                JobState::Running => "running",
                JobState::Done => "done",
                JobState::Failed | JobState::Free => "failed",
            };
            let finished = j.state != JobState::Running;
            JobView {
                id: j.id,
                pid: j.pid,
                kind: j.kind.name(),
                database: j.database,
                index: j.index,
                segments: j.segments[..j.segment_count as usize].to_vec(),
                state,
                reason: j.reason.get().to_owned(),
                started: j.started,
                finished: j.finished,
                written: (j.state == JobState::Done).then_some((j.rows, j.bytes)),
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
        .filter(|j| j.id != 0 && j.state == JobState::Running && j.kind == kind)
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
            let phase = if j.phase == Phase::Building { Phase::Building } else { Phase::Uploading };
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
