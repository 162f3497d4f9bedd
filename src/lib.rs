//! pg_milvus: Milvus' segment lifecycle as a PostgreSQL index.
//!
//! This crate is the Postgres skin: SQL types and functions, and (as the
//! project grows) the `milvus` index access method, its WAL-logged pages and
//! background workers. Algorithms and formats live in the pure core,
//! `milvus_core` (src/core), which never calls Postgres.

pub mod am;
mod error;
mod gucs;
mod storage;
pub mod vector;

::pgrx::pg_module_magic!(name, version);

/// Called when the library is loaded: at server start when preloaded, or
/// by the first backend that uses the extension.
#[pgrx::pg_guard]
pub extern "C-unwind" fn _PG_init() {
    gucs::init();
    am::options::init();
}

#[cfg(any(test, feature = "pg_test"))]
mod tests;

/// Required by `cargo pgrx test`: set-up and configuration of the test cluster.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}
