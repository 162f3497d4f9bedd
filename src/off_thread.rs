//! The one way slow work runs: off the main thread, interruptibly.
//!
//! Invariant 7 in code: a job (`milvus_core::jobs`: a flush's upload and
//! graph build, a merge, loading segments) runs on a helper thread started
//! with every signal blocked (threads it starts, such as a build's rayon
//! pool, inherit that), so Postgres' signal handlers only ever run on the
//! main thread. The main thread waits in slices with
//! `CHECK_FOR_INTERRUPTS()` between them, so a cancel or a shutdown is
//! served at once; the job is told to stop (its cancel flag) and whatever
//! it uploads after that is unreferenced, garbage for GC. Jobs that move
//! segments through their life also show their phase in the job log
//! (`shared::job_log`), through [`run_watched`]'s `on_phase`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use milvus_core::jobs::{JobControl, Phase};
use pgrx::prelude::*;

/// The threads a load of several segments may use: in a session, which
/// waits for it, the machine's cores, at most 4; in a background worker,
/// one: its work runs beside the queries, which must keep the other cores
/// (on two cores, merges on both took most of the queries' throughput:
/// docs/benchmarks.md, "Constants and the measurements behind them"). A
/// graph is built on one thread.
pub fn threads() -> usize {
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
pub fn run<T: Send + 'static>(name: &str, job: impl FnOnce(&JobControl) -> T + Send + 'static) -> T {
    run_watched(name, Priority::Backend, |_| {}, job)
}

/// [`run`] at `priority`, calling `on_phase` on this (the main) thread
/// whenever the job reports a new phase, e.g. to show it in shared memory.
pub fn run_watched<T: Send + 'static>(
    name: &str,
    priority: Priority,
    on_phase: impl FnMut(Phase),
    job: impl FnOnce(&JobControl) -> T + Send + 'static,
) -> T {
    run_meanwhile(name, priority, on_phase, &mut || {}, job)
}

/// Lowers the calling thread's priority to `nice` (Linux's nice values
/// are per thread). A failure leaves it as it was: the job runs anyway.
fn lower_priority(nice: i32) {
    // SAFETY: plain libc calls on this thread's own id.
    let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice) };
}

/// How often [`run_meanwhile`] gives the main thread to other work.
const MEANWHILE_EVERY: Duration = Duration::from_millis(100);

/// How a job's thread shares the CPU with the server's other work.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// As the backend: a query waits for it (loads, downloads).
    Backend,
    /// At `milvus.maintenance_nice`: flushes and merges, whose graph builds
    /// would otherwise take the CPU queries need ([`threads`]). Only
    /// the job's thread: the backend's own thread, which takes locks, keeps
    /// its priority, so no lock waits behind a niced holder.
    Maintenance,
}

/// [`run_watched`] at `priority`, also calling `meanwhile` on this
/// thread every [`MEANWHILE_EVERY`] while the job runs: a worker flushes
/// the segments sealed during a long merge (which holds no segment lock
/// meanwhile) rather than after it.
pub fn run_meanwhile<T: Send + 'static>(
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
    crate::pause::arm();
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
    handle.join().unwrap_or_else(|_| {
        crate::error::raise(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("the {name} job panicked"),
            Some("The server log has the panic's message."),
            None,
        )
    })
}
