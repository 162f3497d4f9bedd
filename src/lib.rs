//! pg_milvus: Milvus' segment lifecycle as a PostgreSQL index.
//!
//! This crate is the Postgres skin: SQL types and functions, and (as the
//! project grows) the `milvus` index access method, its WAL-logged pages and
//! background workers. Algorithms and formats live in the pure core,
//! `milvus_core` (src/core), which never calls Postgres.

pub mod am;
mod debug;
mod error;
mod gucs;
mod hooks;
mod storage;
pub mod vector;
mod worker;

::pgrx::pg_module_magic!(name, version);

/// Called when the library is loaded: at server start when preloaded, or
/// by the first backend that uses the extension.
#[pgrx::pg_guard]
pub extern "C-unwind" fn _PG_init() {
    gucs::init();
    am::options::init();
    hooks::init();
    // SAFETY: a postmaster global, true while shared_preload_libraries loads.
    if unsafe { pgrx::pg_sys::process_shared_preload_libraries_in_progress } {
        worker::init();
    }
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
