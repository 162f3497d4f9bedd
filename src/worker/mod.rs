//! Background workers: Milvus' DataCoord and DataNode inside Postgres.
//!
//! With pg_milvus in `shared_preload_libraries`, the postmaster starts one
//! **launcher** (`pg_milvus launcher`). It connects to no database; every
//! `milvus.naptime` it reads `pg_database` and starts a short-lived
//! **worker** (`pg_milvus worker`, a dynamic background worker) for each
//! database due a visit, at most `milvus.max_workers` at once, the database
//! that has waited longest first, as autovacuum does. A worker seals
//! growing segments by the seal policy, flushes sealed segments, compacts,
//! collects garbage (`visit.rs`), and exits. A database without milvus
//! indexes is visited again only after a while; a backend's
//! `milvus_flush(wait => false)` sets the launcher's latch for an immediate
//! visit.
//!
//! Signals: SIGHUP reloads the settings; SIGTERM (a fast shutdown) is
//! Postgres' `die`: served at the next `CHECK_FOR_INTERRUPTS()`, which the
//! wait for an upload or a build runs every 10 ms. The process then exits
//! with the job unpublished: the rows stay sealed in pages, the objects
//! already uploaded are garbage for GC, and the next visit starts over.
//!
//! Template databases are never visited: a connection to one would make
//! `CREATE DATABASE` fail.

mod signals;
mod visit;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use milvus_core::policy::schedule::VisitQueue;
use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BackgroundWorkerStatus, BgWorkerStartTime, DynamicBackgroundWorker,
};
use pgrx::prelude::*;

use milvus_core::segment::unix_now as now;

use self::signals::{attach_signals, nap};
use crate::shared;

/// How long a database that had no milvus index is left alone.
const IDLE_DATABASE_RECHECK: Duration = Duration::from_secs(60);

/// Registers the launcher (unless `milvus.max_workers` is 0, or the server
/// runs for `pg_upgrade`); from `_PG_init`, when preloading only.
pub fn init() {
    // SAFETY: a postmaster global, set from its `-b` option before it
    // loads shared_preload_libraries. pg_upgrade starts both clusters so:
    // the old one for its checks and dumps, the new one while it restores
    // the schema into empty tables; a worker's job on either would be work
    // done on relations about to be replaced.
    if crate::gucs::max_workers() == 0 || unsafe { pg_sys::IsBinaryUpgrade } {
        return;
    }
    BackgroundWorkerBuilder::new("pg_milvus launcher")
        .set_type("pg_milvus launcher")
        .set_library("pg_milvus")
        .set_function("milvus_launcher_main")
        .enable_spi_access()
        // Workers write WAL: not on a standby.
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(10)))
        .load();
}

/// The launcher's main loop: each full round queues the databases due a
/// visit (`milvus_core::policy::schedule`), and free worker slots take the
/// head of the queue whenever the latch wakes the launcher (a round, a
/// backend's request, a worker's exit).
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn milvus_launcher_main(_arg: pg_sys::Datum) {
    attach_signals();
    // No database: pg_database is a shared catalog.
    BackgroundWorker::connect_worker_to_spi(None, None);
    // SAFETY: a backend global.
    shared::set_launcher_pid(unsafe { pg_sys::MyProcPid });
    log!(
        "pg_milvus launcher started (max_workers {}, naptime {} s)",
        crate::gucs::max_workers(),
        crate::gucs::naptime().as_secs()
    );
    let mut launcher = Launcher::default();
    let mut next_round = Instant::now();
    loop {
        // Workers that have exited free their slot.
        launcher.running.retain(|(_, w)| {
            !matches!(w.pid(), Err(BackgroundWorkerStatus::Stopped | BackgroundWorkerStatus::PostmasterDied))
        });
        if Instant::now() >= next_round {
            launcher.queue_round();
            next_round = Instant::now() + crate::gucs::naptime();
        }
        for database in shared::take_wanted() {
            launcher.queue.add_urgent(database);
        }
        launcher.start_workers();
        nap(next_round.saturating_duration_since(Instant::now()).max(Duration::from_millis(100)));
    }
}

/// The launcher's state: the workers it started and the databases waiting.
#[derive(Default)]
struct Launcher {
    running: Vec<(u32, DynamicBackgroundWorker)>,
    queue: VisitQueue,
    /// Visits started so far, and the number of each database's last.
    visits: u64,
    last_visit: HashMap<u32, u64>,
    /// No process slot was free at the last try (logged once).
    short_of_slots: bool,
}

impl Launcher {
    fn running_databases(&self) -> Vec<u32> {
        self.running.iter().map(|(d, _)| *d).collect()
    }

    /// A full round: every database not recently found without milvus
    /// indexes joins the queue, the longest waiting first.
    fn queue_round(&mut self) {
        let now = now();
        let all = databases();
        let due: Vec<(u32, u64)> = all
            .iter()
            .filter(|d| !shared::idle(**d, now))
            .map(|d| (*d, self.last_visit.get(d).copied().unwrap_or(0)))
            .collect();
        self.queue.retain(|d| all.contains(&d));
        self.last_visit.retain(|d, _| all.contains(d));
        self.queue.add_round(&due, &self.running_databases());
    }

    /// Starts a worker for the head of the queue while slots are free. A
    /// lack of process slots is logged once until a worker starts again.
    fn start_workers(&mut self) {
        let free = crate::gucs::max_workers().saturating_sub(self.running.len());
        let taken = self.queue.take(free, &self.running_databases());
        for (at, &database) in taken.iter().enumerate() {
            let started = BackgroundWorkerBuilder::new("pg_milvus worker")
                .set_type("pg_milvus worker")
                .set_library("pg_milvus")
                .set_function("milvus_worker_main")
                .enable_spi_access()
                .set_argument(Some(pg_sys::Datum::from(database)))
                // SAFETY: a backend global; the postmaster then signals our
                // latch when the worker stops.
                .set_notify_pid(unsafe { pg_sys::MyProcPid })
                .set_restart_time(None)
                .load_dynamic();
            match started {
                Ok(worker) => {
                    self.running.push((database, worker));
                    self.visits += 1;
                    self.last_visit.insert(database, self.visits);
                    self.short_of_slots = false;
                }
                Err(_) => {
                    // Every slot of max_worker_processes is taken: this one
                    // and those taken after it are first in line next time.
                    self.queue.put_back(&taken[at..]);
                    if !std::mem::replace(&mut self.short_of_slots, true) {
                        warning!(
                            "pg_milvus could not start a background worker; raise max_worker_processes (it must cover \
                                milvus.max_workers + 1)"
                        );
                    }
                    break;
                }
            }
        }
    }
}

/// The databases a worker may connect to, templates excluded.
fn databases() -> Vec<u32> {
    let mut out = Vec::new();
    // SAFETY: a catalog scan of the shared pg_database in its own
    // transaction, as autovacuum's launcher does.
    unsafe {
        pg_sys::StartTransactionCommand();
        pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
        let rel = pg_sys::table_open(pg_sys::DatabaseRelationId, pg_sys::AccessShareLock as i32);
        let scan = pg_sys::table_beginscan_catalog(rel, 0, std::ptr::null_mut());
        loop {
            let tuple = pg_sys::heap_getnext(scan, pg_sys::ScanDirection::ForwardScanDirection);
            if tuple.is_null() {
                break;
            }
            let data = (*tuple).t_data;
            let form = data.cast::<u8>().add((*data).t_hoff as usize).cast::<pg_sys::FormData_pg_database>();
            if (*form).datallowconn && !(*form).datistemplate {
                out.push((*form).oid.to_u32());
            }
        }
        pg_sys::table_endscan(scan);
        pg_sys::table_close(rel, pg_sys::AccessShareLock as i32);
        pg_sys::PopActiveSnapshot();
        pg_sys::CommitTransactionCommand();
    }
    out
}

/// A worker: one visit of one database, then exit.
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn milvus_worker_main(arg: pg_sys::Datum) {
    attach_signals();
    let database = arg.value() as u32;
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(pg_sys::Oid::from(database)), None);
    if !visit::visit_database(database) {
        shared::set_idle_until(database, now() + IDLE_DATABASE_RECHECK.as_secs());
    }
}
