//! Every SQL-callable function of the extension but the access method's
//! handler (`am/mod.rs`) and the vector types' own I/O (`types/`):
//!
//! - `maintenance.rs`: `milvus_flush`, `milvus_compact`, `milvus_gc`,
//!   `milvus_prewarm`, the jobs of `crate::am` run by hand;
//! - `inspect.rs`: `milvus_segments`, `milvus_index_pages`,
//!   `milvus_job_log` (and the `milvus_jobs` view), `milvus_cache_stats`;
//! - `operators.rs`: the `vector` type's distance functions, operators,
//!   aggregates and helpers, and the distances of `bit`;
//! - `halfvec.rs`: the same for `halfvec`;
//! - `sparsevec.rs`: the same for `sparsevec`;
//! - `recall.rs`: `milvus_recall`, a query's recall through the index.
//!
//! Each function is a thin layer: it checks its caller and arguments, runs
//! the work elsewhere, and turns the outcome into rows.

mod halfvec;
mod inspect;
mod maintenance;
pub mod operators;
mod recall;
mod sparsevec;
