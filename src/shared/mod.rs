//! The extension's shared memory, which backends and background workers
//! both use: a log of recent jobs (the `milvus_jobs` view), each index's
//! retry and idle-time state and damaged segment, each database's
//! bookkeeping, the segment cache's counters, and the launcher's PID so
//! backends can wake it.
//!
//! It exists only when pg_milvus is in `shared_preload_libraries`; without
//! it every function here is a no-op and the view is empty (the jobs still
//! run, in the backends that call `milvus_flush()` or `milvus_compact()`).
//! The lock is held only to copy a few hundred bytes in or out.

mod databases;
mod indexes;
mod job_log;
mod memory;

pub use databases::{gc_due, idle, set_idle_until, set_launcher_pid, take_wanted, wake_launcher, workers_running};
pub use indexes::{observe_growing, ready, record_outcome, set_damage, trouble};
pub use job_log::{JobRecord, compacting, flushing, jobs};
pub use memory::{CacheCounters, JobKind, add_cache_counters, cache_counters, init};

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use super::memory::Text;
    use pgrx::prelude::*;

    #[pg_test]
    fn a_long_error_keeps_its_cause_whole() {
        let mut t: Text<64> = Text::EMPTY;
        t.set("short");
        assert_eq!(t.get(), "short");
        let long =
            format!("could not flush segment 1 of index \"{}\": Permission denied (os error 13)", "é".repeat(60));
        t.set(&long);
        assert!(t.get().len() <= 64, "{}", t.get());
        assert!(t.get().starts_with("could not"), "{}", t.get());
        assert!(t.get().ends_with("Permission denied (os error 13)"), "{}", t.get());
    }
}
