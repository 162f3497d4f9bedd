//! pg_milvus: Milvus' segment lifecycle as a PostgreSQL index.
//!
//! This crate is the Postgres skin; algorithms and formats live in the pure
//! core, `milvus_core` (crates/milvus-core), which never calls Postgres. Its modules
//! depend one way, in layers (docs/design.md, "Code: a pure core and a
//! thin skin"; `make lint` checks):
//!
//! - `api/`: every SQL function (maintenance, inspection, operators);
//! - `worker/`: the background launcher and workers;
//! - `am/`: the `milvus` index access method's callbacks, one file per
//!   phase;
//! - `lifecycle/`: the jobs that move segments through their life (seal,
//!   flush, compaction, tombstones, GC, adoption) that `am/`, `api/` and
//!   `worker/` run, and the segments a backend has loaded;
//! - `pages/`: the typed page layer (buffers, locks, WAL records, page
//!   chains, the manifest in pages);
//! - `catalog.rs`: what the catalogs say (which indexes are ours, owners);
//! - `shared/`: the shared memory backends and workers use (the job log,
//!   each index's and each database's state);
//! - `storage.rs`: object storage and the segment cache;
//! - `off_thread.rs`: the one way slow work (a job) runs off the main
//!   thread, interruptibly;
//! - `types/`: the SQL types; `gucs.rs`, `hooks.rs` (EXPLAIN and
//!   ALTER INDEX hooks), `pause.rs` (the crash tests' pause points), `error.rs`.

pub mod am;
mod api;
mod catalog;
mod error;
mod gucs;
mod hooks;
mod lifecycle;
mod off_thread;
mod pages;
mod pause;
mod shared;
mod storage;
pub mod types;
mod worker;

::pgrx::pg_module_magic!(name, version);

/// Called when the library is loaded: at server start when preloaded, or
/// by the first backend that uses the extension.
#[pgrx::pg_guard]
pub extern "C-unwind" fn _PG_init() {
    no_backtraces_in_messages();
    gucs::init();
    am::options::init();
    hooks::init();
    pause::init();
    // SAFETY: a postmaster global, true while shared_preload_libraries loads.
    if unsafe { pgrx::pg_sys::process_shared_preload_libraries_in_progress } {
        shared::init();
        worker::init();
    }
}

/// pgrx attaches a Rust backtrace to the DETAIL of every error this
/// library raises whenever the server's environment asks for backtraces
/// (`RUST_BACKTRACE=1` in a DBA's shell): 25 lines of our internals in a
/// client's message. `RUST_LIB_BACKTRACE=0` turns off the captures that
/// feed it (`std::backtrace::Backtrace::capture`, which pgrx's panic hook
/// calls), and only those: a panic's own report in the server log still
/// follows `RUST_BACKTRACE`.
fn no_backtraces_in_messages() {
    // SAFETY: _PG_init runs on the process' only thread (the postmaster
    // loading shared_preload_libraries, or a backend loading the library
    // before it starts any thread), so nothing reads the environment
    // meanwhile. Backends forked from the postmaster inherit it.
    unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
}

#[cfg(any(test, feature = "pg_test"))]
mod tests;

/// Required by `cargo pgrx test`: set-up and configuration of the test cluster.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    /// Preloaded, as in production, so the shared job log exists; without
    /// workers, whose timing would race the tests' own calls (the workers are
    /// tested end to end, tests/test_workers.py).
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["shared_preload_libraries = 'pg_milvus'", "milvus.max_workers = 0"]
    }
}
