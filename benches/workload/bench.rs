//! A target's run against the cluster: the three targets (pg_milvus,
//! pgvector's HNSW, a plain table), the bench database, connections,
//! tables and indexes, and the waits for pg_milvus' background work. The
//! phases are the `impl Bench` blocks of the files beside this one.

use std::time::Duration;

use milvus_core::Metric;
use postgres::{Client, NoTls};

use crate::args::{Args, ColumnType};
use crate::data::Dataset;
use crate::progress::{die, done, rate, step};
use crate::report::TargetReport;

pub(crate) const DB: &str = "milvus_bench";

/// A phase measured in seconds, with its progress line.
/// The server's WAL insert position, to measure what a statement writes.
pub(crate) fn wal_position(c: &mut Client) -> String {
    c.query_one("SELECT pg_current_wal_insert_lsn()::text", &[]).unwrap().get(0)
}

/// WAL bytes written since `lsn` (by this statement and anything else the
/// server did meanwhile: on a quiet machine, the statement).
pub(crate) fn wal_since(c: &mut Client, lsn: &str) -> i64 {
    let bytes: i64 =
        c.query_one("SELECT (pg_current_wal_insert_lsn() - $1::text::pg_lsn)::bigint", &[&lsn]).unwrap().get(0);
    step("its WAL");
    done(&format!("{:.1} kB", bytes as f64 / 1024.0));
    bytes
}

/// The `p` quantile of sorted latencies (0 for none).
/// The mean over `rollups` (each a `/proc/PID/smaps_rollup`) of the sum
/// of `fields`, in MB.
pub(crate) fn mean_mb(rollups: &[String], fields: &[&str]) -> f64 {
    let kb: f64 = rollups
        .iter()
        .flat_map(|text| text.lines())
        .filter(|l| fields.iter().any(|f| l.starts_with(&format!("{f}:"))))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .sum();
    kb / 1024.0 / rollups.len() as f64
}

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted.get(((sorted.len() as f64 * p) as usize).min(sorted.len().saturating_sub(1))).copied().unwrap_or(0.0)
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Milvus,
    Pgvector,
    Plain,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Milvus => "pg_milvus",
            Kind::Pgvector => "pgvector hnsw",
            Kind::Plain => "no index",
        }
    }
    pub(crate) fn table(self) -> &'static str {
        match self {
            Kind::Milvus => "items_milvus",
            Kind::Pgvector => "items_pgvector",
            Kind::Plain => "items_plain",
        }
    }
    /// The column type of the target's extension, and its distance operator.
    pub(crate) fn vector_type(self, ty: ColumnType, dim: usize) -> String {
        format!("{}({dim})", self.cast(ty))
    }
    pub(crate) fn op(self, metric: Metric) -> String {
        let schema = if self == Kind::Pgvector { "pgv" } else { "public" };
        format!("OPERATOR({schema}.{})", metric.operator())
    }
    pub(crate) fn cast(self, ty: ColumnType) -> String {
        let schema = if self == Kind::Pgvector { "pgv" } else { "public" };
        format!("{schema}.{}", ty.name())
    }
    pub(crate) fn ef_setting(self) -> Option<&'static str> {
        match self {
            Kind::Milvus => Some("milvus.ef_search"),
            Kind::Pgvector => Some("hnsw.ef_search"),
            Kind::Plain => None,
        }
    }
}

pub(crate) struct Bench<'a> {
    pub(crate) a: &'a Args,
    pub(crate) d: &'a Dataset,
    pub(crate) truth: Vec<Vec<u32>>,
    /// The exact top-10 under each filter of `FILTER_MODULI`.
    pub(crate) filtered_truth: Vec<Vec<Vec<u32>>>,
}

/// The opclass suffix of a metric (`l2_ops`, ...).
pub(crate) fn metric_ops(metric: Metric) -> &'static str {
    match metric {
        Metric::L2 => "l2_ops",
        Metric::InnerProduct => "ip_ops",
        Metric::Cosine => "cosine_ops",
        Metric::L1 => "l1_ops",
        Metric::Hamming | Metric::Jaccard => die("the driver measures vector and halfvec columns, not bits"),
    }
}

// ---------------------------------------------------------------- output

/// Flushes the milvus index `index`, then polls until no row waits in the
/// growing or a sealed segment and every segment due a graph has it.
pub(crate) fn wait_indexed(c: &mut Client, index: &str) {
    c.query(&format!("SELECT * FROM milvus_flush('{index}')"), &[]).unwrap();
    loop {
        let pending: i64 = c
            .query_one(
                &format!(
                    "SELECT count(*) FROM milvus_segments('{index}') WHERE (state IN ('growing', 'sealed', \
                    'flushing') AND rows > 0) OR (state = 'flushed' AND rows > {} AND index_state <> 'ready')",
                    milvus_core::jobs::FLUSH_GRAPH_MIN_ROWS
                ),
                &[],
            )
            .unwrap()
            .get(0);
        if pending == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `milvus_compact()` on `index` until every flushed segment is a
/// clustering's (a background worker may be at it already), then waits for
/// their graphs.
pub(crate) fn wait_clustered(c: &mut Client, index: &str) {
    loop {
        c.query(&format!("SELECT * FROM milvus_compact('{index}')"), &[]).unwrap();
        let unclustered: i64 = c
            .query_one(
                &format!(
                    "SELECT count(*) FROM milvus_segments('{index}') WHERE state = 'flushed' AND seal_reason NOT \
                    LIKE 'clustering%'"
                ),
                &[],
            )
            .unwrap()
            .get(0);
        if unclustered == 0 {
            return wait_indexed(c, index);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The bench database's connection string.
pub(crate) fn conninfo(a: &Args) -> String {
    format!("host={} port={} user=postgres dbname={DB}", a.host, a.port)
}

/// A fresh bench database with pg_milvus, and pgvector in a schema of its
/// own (`pgv`) when installed (or why not): a connection to it.
pub(crate) fn fresh_database(a: &Args) -> (Client, Result<(), String>) {
    let admin = format!("host={} port={} user=postgres dbname=postgres", a.host, a.port);
    let mut c = Client::connect(&admin, NoTls).unwrap_or_else(|e| die(&format!("cannot connect ({admin}): {e}")));
    c.batch_execute(&format!("DROP DATABASE IF EXISTS {DB} WITH (FORCE)")).unwrap();
    c.batch_execute(&format!("CREATE DATABASE {DB}")).unwrap();
    let mut c = Client::connect(&conninfo(a), NoTls).unwrap_or_else(|e| die(&format!("cannot connect: {e}")));
    c.batch_execute("CREATE EXTENSION pg_milvus").unwrap();
    let pgvector = c
        .batch_execute("CREATE SCHEMA pgv; CREATE EXTENSION vector SCHEMA pgv")
        .map_err(|e| e.as_db_error().map(|d| d.message().to_owned()).unwrap_or_else(|| e.to_string()))
        .and_then(|()| {
            // The tests' stand-in for pgvector's type has no `hnsw`.
            let version: String =
                c.query_one("SELECT extversion FROM pg_extension WHERE extname = 'vector'", &[]).unwrap().get(0);
            if version == "standin" {
                c.batch_execute("DROP EXTENSION vector").unwrap();
                return Err("the extension named vector is the tests' stand-in, not pgvector".to_owned());
            }
            Ok(())
        });
    (c, pgvector)
}

impl Bench<'_> {
    pub(crate) fn connect(&self) -> Client {
        self.try_connect().unwrap_or_else(|e| die(&format!("cannot connect ({}): {e}", self.conninfo())))
    }

    /// A connection, or why there is none (the crowd phases count refusals).
    pub(crate) fn try_connect(&self) -> Result<Client, postgres::Error> {
        Client::connect(&self.conninfo(), NoTls)
    }

    pub(crate) fn conninfo(&self) -> String {
        conninfo(self.a)
    }

    pub(crate) fn create_table(&self, c: &mut Client, kind: Kind) {
        let t = kind.table();
        c.batch_execute(&format!(
            "DROP TABLE IF EXISTS {t}; CREATE TABLE {t} (id bigint PRIMARY KEY, embedding {}, \
             bucket int GENERATED ALWAYS AS ((id % 1000)::int) STORED)",
            kind.vector_type(self.a.column_type, self.d.dim)
        ))
        .unwrap();
    }

    pub(crate) fn create_index(&self, c: &mut Client, kind: Kind) {
        let (t, a) = (kind.table(), self.a);
        let ops = format!("{}_{}", a.column_type.name(), metric_ops(a.metric()));
        let sql = match kind {
            Kind::Milvus => format!(
                "CREATE INDEX ON {t} USING milvus (embedding {ops}) WITH (m = {}, ef_construction = {}{})",
                a.m,
                a.ef_construction,
                a.quantization.as_ref().map(|q| format!(", quantization = {q}")).unwrap_or_default()
            ),
            Kind::Pgvector => format!(
                "CREATE INDEX ON {t} USING hnsw (embedding pgv.{ops}) WITH (m = {}, ef_construction = {})",
                a.m, a.ef_construction
            ),
            Kind::Plain => return,
        };
        c.batch_execute(&sql).unwrap();
    }

    /// Polls until no row of the measured table waits in the growing or a
    /// sealed segment ([`wait_indexed`]).
    pub(crate) fn wait_indexed(&self, c: &mut Client) {
        wait_indexed(c, &format!("{}_embedding_idx", Kind::Milvus.table()));
    }

    /// Polls until the workers have nothing left to merge or purge and no
    /// job runs (a settled index).
    pub(crate) fn wait_settled(&self, c: &mut Client) {
        while !self.settled(c) {
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Whether the workers have nothing left to merge or purge and no job
    /// runs.
    pub(crate) fn settled(&self, c: &mut Client) -> bool {
        let index = format!("{}_embedding_idx", Kind::Milvus.table());
        let plans: i64 = c
            .query_one(&format!("SELECT count(*) FROM milvus_compact('{index}', dry_run => true)"), &[])
            .unwrap()
            .get(0);
        let running: i64 = c.query_one("SELECT count(*) FROM milvus_jobs WHERE state = 'running'", &[]).unwrap().get(0);
        plans == 0 && running == 0
    }

    /// How many segments the index has, flushed and in pages.
    pub(crate) fn segment_count(&self, c: &mut Client) -> i64 {
        let index = format!("{}_embedding_idx", Kind::Milvus.table());
        c.query_one(
            &format!("SELECT count(*) FROM milvus_segments('{index}') WHERE state <> 'dropped' AND rows > 0"),
            &[],
        )
        .unwrap()
        .get(0)
    }

    /// A target's run begins: a connection, an empty table, an empty report.
    pub(crate) fn start(&self, kind: Kind) -> (Client, TargetReport) {
        let mut c = self.connect();
        self.create_table(&mut c, kind);
        (c, TargetReport { target: kind.name().into(), ..Default::default() })
    }

    /// A target's run begins with the rows loaded by COPY and read back as
    /// text, both timed.
    pub(crate) fn start_loaded(&self, kind: Kind) -> (Client, TargetReport) {
        let n = self.d.rows();
        let (mut c, mut r) = self.start(kind);
        r.copy_rows_per_s = rate(&format!("COPY {n} rows"), || self.copy(&mut c, kind, 0..n));
        r.text_output_rows_per_s = rate("text output of every row", || self.text_output(&mut c, kind));
        (c, r)
    }
}
