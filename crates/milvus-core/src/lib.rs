//! The Postgres-free core of pg_milvus.
//!
//! Everything here is plain Rust and is tested with `cargo test -p milvus-core`
//! in seconds, without a database: the vector text format and its checks, the
//! distance kernels, segment states, seal and compaction policies, the binlog,
//! index-file and manifest formats, the page protocol of the index relation
//! (generic over its page store), object storage and the local cache, HNSW
//! graphs and their search, the search across segments and the jobs.
//!
//! The Postgres skin (the crate one directory up) turns these into SQL types,
//! operators, an index access method and background workers. Nothing in this
//! crate may call into Postgres: no palloc, no elog, no locks. That is what lets
//! its work run on other threads of a backend (invariant 7 of docs/design.md).
//!
//! `unsafe` is denied (Cargo.toml) but in the modules allowed it below, each
//! block with its SAFETY: `cache` maps cache files, `distance` calls SIMD
//! kernels, `element` prefetches rows and reads them in place, `format`
//! views aligned element slices as bytes, `quant` calls its byte kernel, `search` lends a segment's mapped
//! bytes to its graph.

#[allow(unsafe_code)]
pub mod cache;
#[allow(unsafe_code)]
pub mod distance;
#[allow(unsafe_code)]
pub mod element;
pub mod error;
pub mod filter;
#[allow(unsafe_code)]
pub mod format;
pub mod graph;
pub mod inverted;
pub mod jobs;
pub mod pages;
pub mod pause;
pub mod policy;
#[allow(unsafe_code)]
pub mod quant;
#[allow(unsafe_code)]
pub mod search;
pub mod segment;
pub mod sparse;
pub mod storage;
pub mod synthetic;
pub mod vector;

pub use distance::Metric;
pub use vector::{MAX_DIM, VectorError};
