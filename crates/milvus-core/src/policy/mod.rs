//! Policies: pure decisions over segment metadata, each giving a reason.
//!
//! A policy never does work; it looks at metadata and answers quickly, so it
//! can run under a lock, in a dry run, or in a test. The jobs that carry out
//! its answers (seal, flush, compaction) live elsewhere.

pub mod compaction;
pub mod cost;
pub mod retry;
pub mod schedule;
pub mod seal;
