//! The jobs that move a segment through its life, Milvus' DataNode and
//! DataCoord work inside Postgres: the access method's callbacks
//! (`crate::am`), the SQL functions (`crate::api`) and the background
//! workers (`crate::worker`, which schedule them) all run them here.
//!
//! - `flush.rs`: seal (the growing segment's chain becomes a sealed one)
//!   and flush (binlog, graph, upload, publish; Milvus' Flush);
//! - `compact.rs`: compaction plans and their runs (purge, merge, cluster);
//! - `tombstones.rs`: VACUUM's pending tombstones written as delta binlogs;
//! - `gc.rs`: garbage collection of unreferenced objects;
//! - `adopt.rs`: an index copied with its database or cluster takes its
//!   objects under its own prefix;
//! - `object_pages.rs`: the embedded store's objects in the index's pages,
//!   so the WAL carries them;
//! - `open_segments.rs`: the flushed segments a backend has loaded, which
//!   scans, VACUUM and compaction read;
//! - `segment_lock.rs`: the job lock of (index, segment).
//!
//! Each job's slow part (uploads, graph builds) runs off the main thread
//! (`crate::off_thread`) and shows its phase in the job log
//! (`crate::shared::job_log`).

pub mod adopt;
pub mod compact;
pub mod flush;
pub mod gc;
pub mod object_pages;
pub mod open_segments;
pub mod segment_lock;
pub mod tombstones;
