//! The report: every figure of a run, written as `report.json`
//! (`serde`), rendered as `report.md` (`markdown.rs`) and as the
//! recall-QPS plot `recall_qps.svg` (`svg.rs`).

pub(crate) mod markdown;
pub(crate) mod svg;

use postgres::Client;
use serde::Serialize;

#[derive(Serialize, Default)]
pub(crate) struct Machine {
    pub(crate) cpu: String,
    pub(crate) cores: usize,
    pub(crate) memory_gb: f64,
    pub(crate) postgres: String,
    pub(crate) date: String,
}

#[derive(Serialize)]
pub(crate) struct QueryRun {
    pub(crate) label: String,
    pub(crate) ef_search: usize,
    pub(crate) clients: usize,
    pub(crate) recall_at_10: f64,
    /// Median over the repeats, with the range.
    pub(crate) qps: f64,
    pub(crate) qps_min: f64,
    pub(crate) qps_max: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
}

/// What each of `connections` backends holds after 20 searches each, from
/// `/proc/PID/smaps_rollup` (means over the backends, MB). `private` is
/// Private_Clean + Private_Dirty: pages no other process maps (file pages
/// of a mapped segment count there while one backend alone maps them);
/// `anonymous` is the backend's own heap and stack; `pss` shares every
/// page among the processes mapping it.
#[derive(Serialize)]
pub(crate) struct MemoryRun {
    pub(crate) connections: usize,
    pub(crate) private_mb: f64,
    pub(crate) anonymous_mb: f64,
    pub(crate) pss_mb: f64,
    pub(crate) rss_mb: f64,
}

#[derive(Serialize, Default)]
pub(crate) struct TargetReport {
    pub(crate) target: String,
    pub(crate) copy_rows_per_s: Option<f64>,
    pub(crate) insert_batch_rows_per_s: Option<f64>,
    pub(crate) insert_single_rows_per_s: Option<f64>,
    /// pg_milvus: from the moment every row is indexed until its workers'
    /// merges are done, nothing else running (after `time_to_indexed_s`).
    pub(crate) merges_settled_s: Option<f64>,
    /// pg_milvus: last insert until every row is in an indexed segment;
    /// pgvector: CREATE INDEX on the loaded table.
    pub(crate) time_to_indexed_s: Option<f64>,
    /// WAL bytes CREATE INDEX on the loaded table wrote (pgvector; both in
    /// `--recall-only`): what a standby replays and archives keep.
    pub(crate) create_index_wal_bytes: Option<i64>,
    pub(crate) delete_vacuum_s: Option<f64>,
    /// `SELECT sum(length(embedding::text))` over the table: the type's
    /// text output, what psql and text-protocol clients pay (median of 3).
    pub(crate) text_output_rows_per_s: Option<f64>,
    pub(crate) compaction_s: Option<f64>,
    /// The first query of a new connection (all sealed).
    pub(crate) cold_query_ms: Option<f64>,
    pub(crate) table_bytes: Option<i64>,
    pub(crate) index_bytes: Option<i64>,
    pub(crate) object_store_bytes: Option<i64>,
    pub(crate) cache_bytes: Option<i64>,
    pub(crate) queries: Vec<QueryRun>,
    pub(crate) memory: Vec<MemoryRun>,
    pub(crate) stream: Option<StreamRun>,
    pub(crate) crowds: Vec<CrowdRun>,
    pub(crate) notes: Vec<String>,
}

/// One point of the crowd sweep (after the streaming phase, on its
/// table): `connections` searching without pause (ef_search 40) for
/// `CROWD_SECONDS`, alone (`target_rows_per_s` 0) or while one session
/// inserts at `CROWD_RATE` (what it achieves is `insert_rows_per_s`).
/// Memory per backend is read from `/proc/PID/smaps_rollup` at the end, as
/// in [`MemoryRun`]; `errors` counts connections refused and queries that
/// failed.
#[derive(Serialize, Default)]
pub(crate) struct CrowdRun {
    pub(crate) connections: usize,
    pub(crate) target_rows_per_s: f64,
    pub(crate) insert_rows_per_s: f64,
    pub(crate) queries: usize,
    pub(crate) qps: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) errors: usize,
    pub(crate) private_mb: Option<f64>,
    pub(crate) pss_mb: Option<f64>,
}

/// The streaming phase (VectorDBBench's streaming case): half the rows
/// loaded and indexed, the other half inserted at a fixed rate in
/// statements of `BATCH` rows while one client searches without pause.
#[derive(Serialize, Default)]
pub(crate) struct StreamRun {
    pub(crate) rows_before: usize,
    pub(crate) rows_streamed: usize,
    pub(crate) target_rows_per_s: f64,
    /// What the inserting session achieved (the target, if it kept up).
    pub(crate) insert_rows_per_s: f64,
    pub(crate) queries: usize,
    pub(crate) qps: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    /// Against the exact top-10 of the rows committed when each query
    /// started (a sample of the queries).
    pub(crate) recall_at_10: f64,
    /// From the last insert until every row is indexed (pgvector indexes
    /// each row as it is inserted: 0).
    pub(crate) lag_s: f64,
}

#[derive(Serialize)]
pub(crate) struct Report {
    pub(crate) machine: Machine,
    pub(crate) dataset: String,
    pub(crate) metric: String,
    pub(crate) rows: usize,
    pub(crate) dim: usize,
    pub(crate) queries: usize,
    pub(crate) m: usize,
    pub(crate) ef_construction: usize,
    /// The milvus index's `quantization`; `None` unset.
    pub(crate) quantization: Option<String>,
    pub(crate) clients: usize,
    pub(crate) repeats: usize,
    /// The merge policy's write amplification under a long steady ingest
    /// at the index's defaults (the core's simulation).
    pub(crate) merges: MergeReport,
    pub(crate) targets: Vec<TargetReport>,
}

#[derive(Serialize)]
pub(crate) struct MergeReport {
    pub(crate) growing_max_rows: u64,
    pub(crate) segment_max_rows: u64,
    pub(crate) fan_in: u64,
    pub(crate) rewrites_per_row: f64,
    pub(crate) bound: f64,
}

/// Simulates 50 x segment_max_rows rows ingested at the defaults.
pub(crate) fn merge_report() -> MergeReport {
    use milvus_core::policy::compaction::{CompactionPolicy, FAN_IN, simulate_ingest};
    let (growing, target) = (2048, 100_000);
    let policy = CompactionPolicy {
        min_rows: growing,
        target_rows: target,
        fan_in: FAN_IN,
        delete_ratio: 0.2,
        clustering: false,
    };
    let sim = simulate_ingest(&policy, 50 * target / growing);
    MergeReport {
        growing_max_rows: growing,
        segment_max_rows: target,
        fan_in: FAN_IN,
        rewrites_per_row: sim.rewrites_per_row,
        bound: sim.bound,
    }
}

pub(crate) fn machine(c: &mut Client) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |text: &str, key: &str| {
        text.lines().find(|l| l.starts_with(key)).and_then(|l| l.split(':').nth(1)).map(|v| v.trim().to_owned())
    };
    Machine {
        cpu: field(&cpuinfo, "model name").unwrap_or_else(|| "unknown".into()),
        cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        memory_gb: field(&meminfo, "MemTotal")
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
            / 1024.0,
        postgres: c.query_one("SELECT version()", &[]).unwrap().get(0),
        date: c.query_one("SELECT now()::text", &[]).unwrap().get(0),
    }
}
