//! The Postgres-free core of pg_milvus.
//!
//! Everything here is plain Rust and is tested with `cargo test -p milvus-core`
//! in seconds, without a database: the vector text format and its checks, the
//! distance kernels, and (as the project grows) segment states, seal and
//! compaction policies, binlog and manifest formats, object storage and HNSW.
//!
//! The Postgres skin (the crate one directory up) turns these into SQL types,
//! operators, an index access method and background workers. Nothing in this
//! crate may call into Postgres: no palloc, no elog, no locks. That is what lets
//! its work run on other threads of a backend (invariant 7 of docs/design.md).

pub mod cache;
pub mod distance;
pub mod element;
pub mod format;
pub mod graph;
pub mod hnsw;
pub mod hooks;
pub mod jobs;
pub mod meta;
pub mod policy;
pub mod search;
pub mod segment;
pub mod storage;
pub mod synthetic;
pub mod vector;

pub use distance::Metric;
pub use vector::{MAX_DIM, VectorError};
