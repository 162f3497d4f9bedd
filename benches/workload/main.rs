//! The workload driver: one run of the life of a collection against a
//! running cluster, over libpq, for pg_milvus beside pgvector's HNSW (when
//! the `vector` extension is installed) and a plain table, so that every
//! ratio is measured on the same machine in the same minutes.
//!
//! Phases, each timed: bulk load (COPY); the text output of every row
//! (`embedding::text`, what psql and text-protocol clients pay); INSERT
//! with the index present, in
//! statements of 1,000 rows and of one row; time from the last insert until
//! every row is in an indexed segment (pgvector: its CREATE INDEX); recall@10,
//! QPS and latency at several `ef_search`, one client and several; filtered
//! queries keeping 1%, 10% and 50% of the rows, with the plan the planner
//! picks (pgvector with its `relaxed_order` iterative scan); the same
//! with 10% of the rows still growing; DELETE 10% + VACUUM, compaction, and
//! queries again; bytes on local disk and in object storage; streaming
//! (half the rows loaded and indexed, the other half inserted at 1,000 rows
//! a second while one client searches: QPS, latency, recall against the
//! rows committed at each query's start, and the lag until all is indexed);
//! then 64 and 100 connections searching for 10 s while one session streams
//! rows in (QPS, latency, errors, memory per backend).
//! With `--recall-only`, only the load, the text output, CREATE INDEX on the
//! loaded table and recall and QPS at each `--ef` (`make bench-ip`). With
//! `--sparse`, the sparse workload instead (`sparse.rs`, `make bench-sparse`).
//!
//! `milvus-workload --help` lists its options (host and port of the
//! cluster, rows, dimensions, dataset, metric, clients, repeats, HNSW
//! parameters).
//!
//! Writes `report.json` (every figure and the machine), `report.md` and
//! `recall_qps.svg` into `--out`. `scripts/bench.sh` starts a cluster and
//! runs it (`make bench`, `make bench-quick`).

mod sparse;

use std::collections::HashSet;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use clap::builder::RangedU64ValueParser;
use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use milvus_core::Metric;
use milvus_core::element::f16;
use milvus_core::synthetic::{Rng, gaussian_mixture};
use plotters::prelude::*;
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use postgres::{Client, NoTls};
use rayon::prelude::*;
use serde::Serialize;

const K: usize = 10;
const EF_VALUES: [usize; 5] = [20, 40, 100, 200, 400];
const BATCH: usize = 1000;
/// Filters of the filtered phase, `WHERE bucket < t` (`bucket` is `id %
/// 1000`, a generated column): 0.1%, 1%, 10% and 50% of the rows,
/// independent of where a row lies.
const FILTERS: [(&str, usize); 4] = [("0.1%", 1), ("1%", 10), ("10%", 100), ("50%", 500)];
/// Queries per filtered run (a sequential scan each, for the plain table).
const FILTER_QUERIES: usize = 100;
/// Rows a second the streaming phase inserts.
const STREAM_RATE: usize = 1000;
/// Queries of the streaming phase whose recall is computed (each an exact
/// search over the rows committed when it started).
const STREAM_RECALL_SAMPLE: usize = 500;
/// Connections of the crowd phases, each searching while one session
/// streams rows in.
const CROWDS: [usize; 2] = [64, 100];
/// How long each crowd phase searches and streams rows in.
const CROWD_SECONDS: usize = 10;
const DB: &str = "milvus_bench";

/// One run of the life of a collection: pg_milvus beside pgvector's HNSW
/// and a plain table, on a running cluster (`scripts/bench.sh` starts one).
#[derive(Parser)]
#[command(name = "milvus-workload", version)]
struct Args {
    /// Host or socket directory of the cluster.
    #[arg(long, default_value = "/tmp")]
    host: String,
    #[arg(long, default_value_t = 5432)]
    port: u16,
    /// Rows of the collection.
    #[arg(long, default_value_t = 100_000)]
    n: usize,
    /// Dimensions of a row.
    #[arg(long, default_value_t = 128)]
    dim: usize,
    /// Clusters of the Gaussian mixture.
    #[arg(long, default_value_t = 1000)]
    clusters: usize,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Held-out queries, recall@10 against exact search.
    #[arg(long, default_value_t = 500)]
    queries: usize,
    /// Uniform rows instead of the mixture.
    #[arg(long, conflicts_with_all = ["file", "gaussian"])]
    uniform: bool,
    /// Standard Gaussian rows instead of the mixture: norms spread around
    /// sqrt(dim), the distribution on which inner product differs most
    /// from cosine.
    #[arg(long, conflicts_with = "file")]
    gaussian: bool,
    /// Every row and query divided by its norm (after it is generated or read).
    #[arg(long)]
    normalise: bool,
    /// Only the index build on the loaded table and the single-client
    /// recall and QPS at each `--ef` (both indexes built by CREATE INDEX,
    /// one graph each): no inserts, deletes, memory or streaming phases.
    #[arg(long)]
    recall_only: bool,
    /// Only the streaming and crowd phases (half the rows loaded and
    /// indexed, the rest streamed in while clients search): no plain
    /// table, bulk load, deletes or memory phases.
    #[arg(long, conflicts_with = "recall_only")]
    stream_only: bool,
    /// Only the index build on the loaded table and the filter phases
    /// (the index as it is, then each extension's index for filters):
    /// no inserts, deletes, memory, streaming or sweeps.
    #[arg(long, conflicts_with_all = ["recall_only", "stream_only"])]
    filters_only: bool,
    /// The ef_search values of the query sweeps.
    #[arg(long, value_delimiter = ',', default_values_t = EF_VALUES, value_parser = at_least_one())]
    ef: Vec<usize>,
    /// Rows from a file (.fvecs or .npy of float32) instead of generated ones.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Clients of the multi-client query phases.
    #[arg(long, default_value_t = 4, value_parser = at_least_one())]
    clients: usize,
    /// Repeats of each query phase (QPS: their median).
    #[arg(long, default_value_t = 3, value_parser = at_least_one())]
    repeats: usize,
    /// Where report.json, report.md and recall_qps.svg go.
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
    /// HNSW m (both indexes).
    #[arg(long, default_value_t = 16)]
    m: usize,
    /// HNSW ef_construction (both indexes).
    #[arg(long, default_value_t = 64)]
    ef_construction: usize,
    /// The milvus index's `quantization` option: `rabitq`, `sq8` or
    /// `none` (graphs walked on the rows); unset by default (RaBitQ codes
    /// from 256 dimensions, sq8 below).
    #[arg(long)]
    quantization: Option<String>,
    #[arg(long, value_enum, default_value_t = MetricArg::L2)]
    metric: MetricArg,
    /// The column type (both indexes): `vector` (4-byte elements) or
    /// `halfvec` (2-byte; recall is still against exact search over the
    /// f32 rows).
    #[arg(long = "type", value_enum, default_value_t = ColumnType::Vector)]
    column_type: ColumnType,
    /// The sparse workload instead: SPLADE-like `sparsevec` rows under
    /// inner product (`sparse.rs`); `--n`, `--queries`, `--ef`, `--repeats`
    /// and `--seed` apply.
    #[arg(long, conflicts_with_all = ["recall_only", "stream_only", "file"])]
    sparse: bool,
    /// Sparse rows: dimensions of the vocabulary.
    #[arg(long, default_value_t = 30_000)]
    vocab: usize,
    /// Sparse rows: non-zero entries of a row.
    #[arg(long, default_value_t = 120)]
    sparse_nnz: usize,
    /// Sparse rows: non-zero entries of a query.
    #[arg(long, default_value_t = 20)]
    sparse_query_nnz: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ColumnType {
    Vector,
    Halfvec,
}

impl ColumnType {
    fn name(self) -> &'static str {
        match self {
            ColumnType::Vector => "vector",
            ColumnType::Halfvec => "halfvec",
        }
    }
}

fn at_least_one() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(1..)
}

#[derive(Clone, Copy, ValueEnum)]
enum MetricArg {
    L2,
    Ip,
    Cosine,
    L1,
}

impl Args {
    fn metric(&self) -> Metric {
        match self.metric {
            MetricArg::L2 => Metric::L2,
            MetricArg::Ip => Metric::InnerProduct,
            MetricArg::Cosine => Metric::Cosine,
            MetricArg::L1 => Metric::L1,
        }
    }
}

fn die(message: &str) -> ! {
    eprintln!("milvus-workload: {message}");
    std::process::exit(2)
}

/// The phase running now, on stderr: a spinner with the time it has taken,
/// a bar with its ETA once it counts rows or queries ([`counting`]), and a
/// line with its figure when it ends. Not on a terminal (a log), only the
/// lines.
static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

fn step(what: &str) {
    let style = ProgressStyle::with_template("  {spinner} {msg} {elapsed}").expect("a template");
    let bar = ProgressBar::new_spinner().with_style(style).with_message(what.to_owned());
    bar.enable_steady_tick(Duration::from_millis(200));
    *BAR.lock().expect("not poisoned") = Some(bar);
}

/// The running phase's bar, now counting to `total` (rows, queries).
fn counting(total: usize) -> ProgressBar {
    let bar = BAR.lock().expect("not poisoned").clone().unwrap_or_else(ProgressBar::hidden);
    let template = "  {msg} [{bar:30}] {human_pos}/{human_len} {elapsed} (eta {eta})";
    bar.set_style(ProgressStyle::with_template(template).expect("a template").progress_chars("=> "));
    bar.set_length(total as u64);
    bar.set_position(0);
    bar
}

fn done(figure: &str) {
    let Some(bar) = BAR.lock().expect("not poisoned").take() else { return };
    let line = format!("{} ... {figure}", bar.message());
    if bar.is_hidden() {
        eprintln!("  {line}");
    } else {
        bar.set_style(ProgressStyle::with_template("  {msg}").expect("a template"));
        bar.finish_with_message(line);
    }
}

/// A phase measured in rows per second, with its progress line.
fn rate(what: &str, f: impl FnOnce() -> f64) -> Option<f64> {
    step(what);
    let rows_per_s = f();
    done(&format!("{rows_per_s:.0} rows/s"));
    Some(rows_per_s)
}

/// A phase measured in seconds, with its progress line.
/// The server's WAL insert position, to measure what a statement writes.
fn wal_position(c: &mut Client) -> String {
    c.query_one("SELECT pg_current_wal_insert_lsn()::text", &[]).unwrap().get(0)
}

/// WAL bytes written since `lsn` (by this statement and anything else the
/// server did meanwhile: on a quiet machine, the statement).
fn wal_since(c: &mut Client, lsn: &str) -> i64 {
    let bytes: i64 =
        c.query_one("SELECT (pg_current_wal_insert_lsn() - $1::text::pg_lsn)::bigint", &[&lsn]).unwrap().get(0);
    step("its WAL");
    done(&format!("{:.1} kB", bytes as f64 / 1024.0));
    bytes
}

fn seconds(what: &str, f: impl FnOnce()) -> Option<f64> {
    step(what);
    let start = Instant::now();
    f();
    let secs = start.elapsed().as_secs_f64();
    done(&format!("{secs:.2} s"));
    Some(secs)
}

// ---------------------------------------------------------------- data

struct Dataset {
    dim: usize,
    base: Vec<f32>,
    queries: Vec<f32>,
    description: String,
}

impl Dataset {
    fn rows(&self) -> usize {
        self.base.len() / self.dim
    }
    fn row(&self, i: usize) -> &[f32] {
        &self.base[i * self.dim..(i + 1) * self.dim]
    }
    fn query(&self, i: usize) -> &[f32] {
        &self.queries[i * self.dim..(i + 1) * self.dim]
    }
    fn query_count(&self) -> usize {
        self.queries.len() / self.dim
    }
}

fn dataset(a: &Args) -> Dataset {
    let (dim, all, description) = if let Some(path) = &a.file {
        let (dim, v) = read_vectors(path).unwrap_or_else(|e| die(&format!("{}: {e}", path.display())));
        (dim, v, format!("{} ({} rows held out as queries)", path.display(), a.queries))
    } else if a.uniform {
        let mut rng = Rng::new(a.seed);
        (a.dim, rng.vector((a.n + a.queries) * a.dim), format!("uniform in [-1, 1), seed {}", a.seed))
    } else if a.gaussian {
        let mut rng = Rng::new(a.seed);
        let v = (0..(a.n + a.queries) * a.dim).map(|_| rng.next_gaussian()).collect();
        (a.dim, v, format!("standard Gaussian, seed {}", a.seed))
    } else {
        let v = gaussian_mixture(a.n + a.queries, a.dim, a.clusters, 0.1, a.seed);
        (
            a.dim,
            v,
            format!(
                "Gaussian mixture: {} clusters, sigma 0.1, centres uniform in [-1, 1), seed {}",
                a.clusters, a.seed
            ),
        )
    };
    let (all, description) = if a.normalise {
        let normalised = all.chunks_exact(dim).flat_map(milvus_core::vector::l2_normalize).collect();
        (normalised, format!("{description}, normalised"))
    } else {
        (all, description)
    };
    let rows = all.len() / dim;
    if rows <= a.queries {
        die("fewer rows than queries");
    }
    let base_rows = (rows - a.queries).min(if a.file.is_some() { usize::MAX } else { a.n });
    let (base, queries) = all.split_at(base_rows * dim);
    Dataset { dim, base: base.to_vec(), queries: queries[..a.queries * dim].to_vec(), description }
}

/// `.fvecs` (per vector: int32 dimensions, then float32s) or `.npy` (a 2-D
/// little-endian float32 array in C order).
fn read_vectors(path: &Path) -> Result<(usize, Vec<f32>), String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let f32s = |b: &[u8]| b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect::<Vec<f32>>();
    if path.extension().is_some_and(|e| e == "npy") {
        if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
            return Err("not a .npy file".into());
        }
        let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        let header = std::str::from_utf8(&bytes[10..10 + header_len]).map_err(|e| e.to_string())?;
        if !header.contains("'descr': '<f4'") || header.contains("'fortran_order': True") {
            return Err(format!("only little-endian float32 in C order is read, not {header}"));
        }
        let shape = header.split("'shape': (").nth(1).and_then(|s| s.split(')').next()).ok_or("no shape")?;
        let dims: Vec<usize> = shape.split(',').filter_map(|s| s.trim().parse().ok()).collect();
        let [_, dim] = dims[..] else { return Err(format!("expected a 2-D array, got shape ({shape})")) };
        Ok((dim, f32s(&bytes[10 + header_len..])))
    } else {
        let dim = u32::from_le_bytes(bytes.get(..4).ok_or("empty file")?.try_into().unwrap()) as usize;
        let record = 4 + dim * 4;
        if dim == 0 || bytes.len() % record != 0 {
            return Err("not an .fvecs file".into());
        }
        Ok((dim, bytes.chunks_exact(record).flat_map(|r| f32s(&r[4..])).collect()))
    }
}

/// Exact top-K row numbers of each query among the rows `keep` accepts,
/// cached under `out` for the unfiltered case.
fn ground_truth(
    d: &Dataset,
    metric: Metric,
    keep: &(dyn Fn(usize) -> bool + Sync),
    cache: Option<&Path>,
) -> Vec<Vec<u32>> {
    if let Some(bytes) = cache.and_then(|p| std::fs::read(p).ok()).filter(|b| b.len() == d.query_count() * K * 4) {
        return bytes
            .chunks_exact(K * 4)
            .map(|q| q.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect())
            .collect();
    }
    let truth: Vec<Vec<u32>> = (0..d.query_count())
        .into_par_iter()
        .map(|q| {
            let query = d.query(q);
            let mut best: Vec<(f32, u32)> =
                (0..d.rows()).filter(|&i| keep(i)).map(|i| (metric.distance(query, d.row(i)), i as u32)).collect();
            let nth = K.min(best.len() - 1);
            best.select_nth_unstable_by(nth, |a, b| a.0.total_cmp(&b.0));
            best.truncate(K);
            best.sort_by(|a, b| a.0.total_cmp(&b.0));
            best.into_iter().map(|e| e.1).collect()
        })
        .collect();
    if let Some(p) = cache {
        let bytes: Vec<u8> = truth.iter().flatten().flat_map(|i| i.to_le_bytes()).collect();
        let _ = std::fs::write(p, bytes);
    }
    truth
}

/// The `p` quantile of sorted latencies (0 for none).
/// The mean over `rollups` (each a `/proc/PID/smaps_rollup`) of the sum
/// of `fields`, in MB.
fn mean_mb(rollups: &[String], fields: &[&str]) -> f64 {
    let kb: f64 = rollups
        .iter()
        .flat_map(|text| text.lines())
        .filter(|l| fields.iter().any(|f| l.starts_with(&format!("{f}:"))))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .sum();
    kb / 1024.0 / rollups.len() as f64
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted.get(((sorted.len() as f64 * p) as usize).min(sorted.len().saturating_sub(1))).copied().unwrap_or(0.0)
}

fn text(v: &[f32]) -> String {
    let mut s = String::with_capacity(v.len() * 10);
    s.push('[');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        write!(s, "{x}").unwrap();
    }
    s.push(']');
    s
}

/// A query vector as a parameter of the column's type, sent in the
/// binary form `vector_recv` and `halfvec_recv` read (int16 dimensions,
/// int16 unused, the elements in network byte order), as pgvector's
/// clients send it: parsed once at bind. A text parameter cast in SQL
/// (`CAST($1::text AS vector)`) is parsed again for every row a generic
/// plan returns, because the distance in the ORDER BY is also projected.
struct QueryVector<'a>(&'a [f32]);

impl std::fmt::Debug for QueryVector<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-d query vector", self.0.len())
    }
}

impl ToSql for QueryVector<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.put_i16(i16::try_from(self.0.len())?);
        out.put_i16(0);
        match ty.name() {
            "halfvec" => self.0.iter().for_each(|x| out.put_u16(f16::from_f32(*x).to_bits())),
            _ => self.0.iter().for_each(|x| out.put_f32(*x)),
        }
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        matches!(ty.name(), "vector" | "halfvec")
    }

    to_sql_checked!();
}

// ---------------------------------------------------------------- targets

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Milvus,
    Pgvector,
    Plain,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Milvus => "pg_milvus",
            Kind::Pgvector => "pgvector hnsw",
            Kind::Plain => "no index",
        }
    }
    fn table(self) -> &'static str {
        match self {
            Kind::Milvus => "items_milvus",
            Kind::Pgvector => "items_pgvector",
            Kind::Plain => "items_plain",
        }
    }
    /// The column type of the target's extension, and its distance operator.
    fn vector_type(self, ty: ColumnType, dim: usize) -> String {
        format!("{}({dim})", self.cast(ty))
    }
    fn op(self, metric: Metric) -> String {
        let schema = if self == Kind::Pgvector { "pgv" } else { "public" };
        format!("OPERATOR({schema}.{})", metric.operator())
    }
    fn cast(self, ty: ColumnType) -> String {
        let schema = if self == Kind::Pgvector { "pgv" } else { "public" };
        format!("{schema}.{}", ty.name())
    }
    fn ef_setting(self) -> Option<&'static str> {
        match self {
            Kind::Milvus => Some("milvus.ef_search"),
            Kind::Pgvector => Some("hnsw.ef_search"),
            Kind::Plain => None,
        }
    }
}

#[derive(Serialize, Default)]
struct Machine {
    cpu: String,
    cores: usize,
    memory_gb: f64,
    postgres: String,
    date: String,
}

#[derive(Serialize)]
struct QueryRun {
    label: String,
    ef_search: usize,
    clients: usize,
    recall_at_10: f64,
    /// Median over the repeats, with the range.
    qps: f64,
    qps_min: f64,
    qps_max: f64,
    p50_ms: f64,
    p99_ms: f64,
}

/// What each of `connections` backends holds after 20 searches each, from
/// `/proc/PID/smaps_rollup` (means over the backends, MB). `private` is
/// Private_Clean + Private_Dirty: pages no other process maps (file pages
/// of a mapped segment count there while one backend alone maps them);
/// `anonymous` is the backend's own heap and stack; `pss` shares every
/// page among the processes mapping it.
#[derive(Serialize)]
struct MemoryRun {
    connections: usize,
    private_mb: f64,
    anonymous_mb: f64,
    pss_mb: f64,
    rss_mb: f64,
}

#[derive(Serialize, Default)]
struct TargetReport {
    target: String,
    copy_rows_per_s: Option<f64>,
    insert_batch_rows_per_s: Option<f64>,
    insert_single_rows_per_s: Option<f64>,
    /// pg_milvus: from the moment every row is indexed until its workers'
    /// merges are done, nothing else running (after `time_to_indexed_s`).
    merges_settled_s: Option<f64>,
    /// pg_milvus: last insert until every row is in an indexed segment;
    /// pgvector: CREATE INDEX on the loaded table.
    time_to_indexed_s: Option<f64>,
    /// WAL bytes CREATE INDEX on the loaded table wrote (pgvector; both in
    /// `--recall-only`): what a standby replays and archives keep.
    create_index_wal_bytes: Option<i64>,
    delete_vacuum_s: Option<f64>,
    /// `SELECT sum(length(embedding::text))` over the table: the type's
    /// text output, what psql and text-protocol clients pay (median of 3).
    text_output_rows_per_s: Option<f64>,
    compaction_s: Option<f64>,
    /// The first query of a new connection (all sealed).
    cold_query_ms: Option<f64>,
    table_bytes: Option<i64>,
    index_bytes: Option<i64>,
    object_store_bytes: Option<i64>,
    cache_bytes: Option<i64>,
    queries: Vec<QueryRun>,
    memory: Vec<MemoryRun>,
    stream: Option<StreamRun>,
    crowds: Vec<CrowdRun>,
    notes: Vec<String>,
}

/// Many connections searching while rows stream in (after the streaming
/// phase, on its table): every connection searches without pause (ef_search
/// 40) for `CROWD_SECONDS` while one session inserts at up to
/// `STREAM_RATE` (what it achieves is reported).
/// Memory per backend is read from `/proc/PID/smaps_rollup` at the end, as
/// in [`MemoryRun`]; `errors` counts connections refused and queries that
/// failed.
#[derive(Serialize, Default)]
struct CrowdRun {
    connections: usize,
    insert_rows_per_s: f64,
    queries: usize,
    qps: f64,
    p50_ms: f64,
    p99_ms: f64,
    errors: usize,
    private_mb: Option<f64>,
    pss_mb: Option<f64>,
}

/// The streaming phase (VectorDBBench's streaming case): half the rows
/// loaded and indexed, the other half inserted at a fixed rate in
/// statements of `BATCH` rows while one client searches without pause.
#[derive(Serialize, Default)]
struct StreamRun {
    rows_before: usize,
    rows_streamed: usize,
    target_rows_per_s: f64,
    /// What the inserting session achieved (the target, if it kept up).
    insert_rows_per_s: f64,
    queries: usize,
    qps: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// Against the exact top-10 of the rows committed when each query
    /// started (a sample of the queries).
    recall_at_10: f64,
    /// From the last insert until every row is indexed (pgvector indexes
    /// each row as it is inserted: 0).
    lag_s: f64,
}

#[derive(Serialize)]
struct Report {
    machine: Machine,
    dataset: String,
    metric: String,
    rows: usize,
    dim: usize,
    queries: usize,
    m: usize,
    ef_construction: usize,
    /// The milvus index's `quantization`; `None` unset.
    quantization: Option<String>,
    clients: usize,
    repeats: usize,
    /// The merge policy's write amplification under a long steady ingest
    /// at the index's defaults (the core's simulation).
    merges: MergeReport,
    targets: Vec<TargetReport>,
}

#[derive(Serialize)]
struct MergeReport {
    growing_max_rows: u64,
    segment_max_rows: u64,
    fan_in: u64,
    rewrites_per_row: f64,
    bound: f64,
}

/// Simulates 50 x segment_max_rows rows ingested at the defaults.
fn merge_report() -> MergeReport {
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

struct Bench<'a> {
    a: &'a Args,
    d: &'a Dataset,
    truth: Vec<Vec<u32>>,
    /// The exact top-10 under each filter of `FILTER_MODULI`.
    filtered_truth: Vec<Vec<Vec<u32>>>,
}

impl Bench<'_> {
    fn connect(&self) -> Client {
        self.try_connect().unwrap_or_else(|e| die(&format!("cannot connect ({}): {e}", self.conninfo())))
    }

    /// A connection, or why there is none (the crowd phases count refusals).
    fn try_connect(&self) -> Result<Client, postgres::Error> {
        Client::connect(&self.conninfo(), NoTls)
    }

    fn conninfo(&self) -> String {
        conninfo(self.a)
    }

    fn create_table(&self, c: &mut Client, kind: Kind) {
        let t = kind.table();
        c.batch_execute(&format!(
            "DROP TABLE IF EXISTS {t}; CREATE TABLE {t} (id bigint PRIMARY KEY, embedding {}, \
             bucket int GENERATED ALWAYS AS ((id % 1000)::int) STORED)",
            kind.vector_type(self.a.column_type, self.d.dim)
        ))
        .unwrap();
    }

    fn create_index(&self, c: &mut Client, kind: Kind) {
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

    fn copy(&self, c: &mut Client, kind: Kind, rows: std::ops::Range<usize>) -> f64 {
        let count = rows.len();
        let start = Instant::now();
        let bar = counting(count);
        let mut w = c.copy_in(&format!("COPY {} (id, embedding) FROM STDIN", kind.table())).unwrap();
        for i in rows {
            writeln!(w, "{i}\t{}", text(self.d.row(i))).unwrap();
            bar.inc(1);
        }
        w.finish().unwrap();
        count as f64 / start.elapsed().as_secs_f64()
    }

    /// Multi-row INSERTs of `BATCH` rows; `ids` map row numbers to ids.
    fn insert_batches(&self, c: &mut Client, kind: Kind, rows: std::ops::Range<usize>, id_offset: usize) -> f64 {
        self.insert_batches_counted(c, kind, rows.clone(), id_offset, &counting(rows.len()))
    }

    /// [`Self::insert_batches`], counted on `bar`.
    fn insert_batches_counted(
        &self,
        c: &mut Client,
        kind: Kind,
        rows: std::ops::Range<usize>,
        id_offset: usize,
        bar: &ProgressBar,
    ) -> f64 {
        let count = rows.len();
        let start = Instant::now();
        let rows: Vec<usize> = rows.collect();
        for chunk in rows.chunks(BATCH) {
            let mut sql = format!("INSERT INTO {} (id, embedding) VALUES ", kind.table());
            for (j, i) in chunk.iter().enumerate() {
                if j > 0 {
                    sql.push(',');
                }
                write!(sql, "({}, '{}')", i + id_offset, text(self.d.row(*i))).unwrap();
            }
            c.batch_execute(&sql).unwrap();
            bar.inc(chunk.len() as u64);
        }
        count as f64 / start.elapsed().as_secs_f64()
    }

    /// One row per statement (autocommit), a prepared INSERT.
    fn insert_single(&self, c: &mut Client, kind: Kind, rows: std::ops::Range<usize>, id_offset: usize) -> f64 {
        let count = rows.len();
        let stmt = c
            .prepare(&format!(
                "INSERT INTO {} (id, embedding) VALUES ($1, CAST($2::text AS {}))",
                kind.table(),
                kind.cast(self.a.column_type)
            ))
            .unwrap();
        let bar = counting(count);
        let start = Instant::now();
        for i in rows {
            c.execute(&stmt, &[&((i + id_offset) as i64), &text(self.d.row(i))]).unwrap();
            bar.inc(1);
        }
        count as f64 / start.elapsed().as_secs_f64()
    }

    fn delete_vacuum(&self, c: &mut Client, kind: Kind, predicate: &str) -> f64 {
        let start = Instant::now();
        c.batch_execute(&format!("DELETE FROM {t} WHERE {predicate}", t = kind.table())).unwrap();
        c.batch_execute(&format!("VACUUM {}", kind.table())).unwrap();
        start.elapsed().as_secs_f64()
    }

    /// The SQL of a query, with `WHERE bucket < t` for a filter.
    fn query_sql(&self, kind: Kind, filter: Option<usize>) -> String {
        let filter = filter.map(|t| format!("WHERE bucket < {t} ")).unwrap_or_default();
        format!(
            "SELECT id FROM {} {filter}ORDER BY embedding {} $1::{} LIMIT {K}",
            kind.table(),
            kind.op(self.a.metric()),
            kind.cast(self.a.column_type)
        )
    }

    /// The query phase: recall@10 of the first run, QPS median and range
    /// over the repeats, latency percentiles of all of them. With a
    /// `filter`, pgvector runs its iterative scan (`relaxed_order`), as
    /// pg_milvus does by default.
    #[allow(clippy::too_many_arguments)]
    fn queries(
        &self,
        kind: Kind,
        label: &str,
        ef: usize,
        clients: usize,
        truth: &[Vec<u32>],
        limit: usize,
        filter: Option<usize>,
    ) -> QueryRun {
        let queries: Vec<usize> = (0..self.d.query_count().min(limit)).collect();
        let sql = self.query_sql(kind, filter);
        let mut qps = Vec::new();
        let mut latencies = Vec::new();
        let mut recall = 0.0;
        let bar = counting(queries.len() * self.a.repeats);
        for repeat in 0..self.a.repeats {
            let per_client: Vec<Vec<usize>> =
                (0..clients).map(|c| queries.iter().copied().skip(c).step_by(clients).collect()).collect();
            // Each client connects and runs one untimed query first, as a
            // pooled connection would have (a new backend loads every
            // segment once: that cost is reported apart, `cold_query_ms`);
            // the timing starts when all are ready.
            let ready = std::sync::Barrier::new(clients);
            type ClientRun = (Instant, Instant, Vec<(usize, Vec<i64>, f64)>);
            let results: Vec<ClientRun> = std::thread::scope(|s| {
                let handles: Vec<_> = per_client
                    .iter()
                    .map(|mine| {
                        let (sql, ready, bar) = (&sql, &ready, &bar);
                        s.spawn(move || {
                            let mut c = self.connect();
                            if let Some(setting) = kind.ef_setting() {
                                c.batch_execute(&format!("SET {setting} = {ef}")).unwrap();
                            }
                            if kind == Kind::Plain {
                                c.batch_execute("SET max_parallel_workers_per_gather = 0").unwrap();
                            }
                            if kind == Kind::Pgvector && filter.is_some() {
                                c.batch_execute("SET hnsw.iterative_scan = relaxed_order").unwrap();
                            }
                            let stmt = c.prepare(sql).unwrap();
                            c.query(&stmt, &[&QueryVector(self.d.query(0))]).unwrap();
                            ready.wait();
                            let start = Instant::now();
                            let out = mine
                                .iter()
                                .map(|&q| {
                                    let t = Instant::now();
                                    let rows = c.query(&stmt, &[&QueryVector(self.d.query(q))]).unwrap();
                                    bar.inc(1);
                                    (
                                        q,
                                        rows.iter().map(|r| r.get::<_, i64>(0)).collect(),
                                        t.elapsed().as_secs_f64() * 1e3,
                                    )
                                })
                                .collect();
                            (start, Instant::now(), out)
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let start = results.iter().map(|r| r.0).min().expect("one client at least");
            let end = results.iter().map(|r| r.1).max().expect("one client at least");
            let results: Vec<Vec<(usize, Vec<i64>, f64)>> = results.into_iter().map(|r| r.2).collect();
            qps.push(queries.len() as f64 / (end - start).as_secs_f64());
            for (q, ids, ms) in results.into_iter().flatten() {
                latencies.push(ms);
                if repeat == 0 {
                    let want: HashSet<i64> = truth[q].iter().map(|&i| i as i64).collect();
                    recall += ids.iter().filter(|i| want.contains(i)).count() as f64 / K as f64;
                }
            }
        }
        qps.sort_by(f64::total_cmp);
        latencies.sort_by(f64::total_cmp);
        QueryRun {
            label: label.to_owned(),
            ef_search: ef,
            clients,
            recall_at_10: recall / queries.len() as f64,
            qps: qps[qps.len() / 2],
            qps_min: qps[0],
            qps_max: qps[qps.len() - 1],
            p50_ms: percentile(&latencies, 0.5),
            p99_ms: percentile(&latencies, 0.99),
        }
    }

    /// The first query of a new connection: for pg_milvus it loads every
    /// flushed segment into the backend (from the local cache, here).
    fn cold_query_ms(&self, kind: Kind) -> f64 {
        let mut c = self.connect();
        let sql = self.query_sql(kind, None);
        let start = Instant::now();
        c.query(&sql, &[&QueryVector(self.d.query(0))]).unwrap();
        start.elapsed().as_secs_f64() * 1e3
    }

    fn query_sweep(&self, kind: Kind, label: &str, truth: &[Vec<u32>], r: &mut TargetReport) {
        if r.cold_query_ms.is_none() {
            step(&format!("{label}: first query of a new connection"));
            r.cold_query_ms = Some(self.cold_query_ms(kind));
            done(&format!("{:.1} ms", r.cold_query_ms.unwrap()));
        }
        let clients: &[usize] = if self.a.recall_only { &[1] } else { &[1, self.a.clients] };
        for &ef in &self.a.ef {
            for &clients in clients {
                step(&format!("{label}: ef_search {ef}, {clients} client(s)"));
                let run = self.queries(kind, label, ef, clients, truth, usize::MAX, None);
                done(&format!("recall@10 {:.3}, {:.0} QPS, p99 {:.2} ms", run.recall_at_10, run.qps, run.p99_ms));
                r.queries.push(run);
            }
        }
    }

    /// The all-sealed queries again with the local segment cache bounded at
    /// a quarter of the rows' bytes (at least its floor, 16 MB), in a
    /// directory of its own, empty at the start: the index is larger than
    /// the cache, so its segments keep their graphs and codes there and
    /// read the rows they re-rank by range from the store. One EXPLAIN
    /// (ANALYZE) says what a query read.
    fn bounded_cache(&self, c: &mut Client, r: &mut TargetReport) {
        let element_bytes = match self.a.column_type {
            ColumnType::Vector => 4,
            ColumnType::Halfvec => 2,
        };
        let rows_bytes = self.d.rows() * self.a.dim * element_bytes;
        let quarter_mb = (rows_bytes / 4) >> 20;
        let cache_mb = quarter_mb.max(16);
        let dir = std::env::temp_dir().join(format!("pg_milvus-bench-cache-{}", std::process::id()));
        let set = |c: &mut Client, what: &str| {
            c.batch_execute(&format!("ALTER DATABASE {DB} {what}")).unwrap();
        };
        set(c, &format!("SET milvus.cache_dir = '{}'", dir.display()));
        set(c, &format!("SET milvus.cache_size = {cache_mb}"));
        let label = if quarter_mb < 16 {
            format!("cache 16 MB, its least (the rows: {} MB)", rows_bytes >> 20)
        } else {
            format!("cache {cache_mb} MB, a quarter of the rows' {} MB", rows_bytes >> 20)
        };
        self.query_sweep(Kind::Milvus, &label, &self.truth, r);
        let mut q = self.connect();
        q.batch_execute("SET milvus.ef_search = 40").unwrap();
        let sql = self.query_sql(Kind::Milvus, None);
        let explain = format!("EXPLAIN (ANALYZE, COSTS OFF) {sql}");
        let line: Option<String> = q
            .query(&explain, &[&QueryVector(self.d.query(0))])
            .unwrap()
            .iter()
            .map(|row| row.get::<_, String>(0))
            .find(|line| line.starts_with("Milvus Scan"));
        let stats = q
            .query_one("SELECT misses, bytes_downloaded, cached_bytes FROM milvus_cache_stats()", &[])
            .map(|row| (row.get::<_, i64>(0), row.get::<_, i64>(1), row.get::<_, i64>(2)))
            .unwrap();
        r.notes.push(format!(
            "cache {cache_mb} MB: {} MB cached (the server's misses so far {}, {} MB downloaded); a new connection's \
             query at ef_search 40: {}",
            stats.2 >> 20,
            stats.0,
            stats.1 >> 20,
            line.as_deref().unwrap_or("no Milvus Scan line")
        ));
        drop(q);
        set(c, "RESET milvus.cache_dir");
        set(c, "RESET milvus.cache_size");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Backend memory with 1, 4 and 16 connections that have each searched
    /// the index 20 times (ef_search 40), read from /proc (the driver runs
    /// on the server's machine; elsewhere the phase is skipped, noted).
    fn memory(&self, kind: Kind, r: &mut TargetReport) {
        for connections in [1, 4, 16] {
            step(&format!("memory of {connections} connection(s) after 20 searches each"));
            let mut pids = Vec::new();
            let mut clients: Vec<Client> = (0..connections).map(|_| self.connect()).collect();
            for c in &mut clients {
                if let Some(setting) = kind.ef_setting() {
                    c.batch_execute(&format!("SET {setting} = 40")).unwrap();
                }
                let stmt = c.prepare(&self.query_sql(kind, None)).unwrap();
                for q in 0..20 {
                    c.query(&stmt, &[&QueryVector(self.d.query(q % self.d.query_count()))]).unwrap();
                }
                pids.push(c.query_one("SELECT pg_backend_pid()", &[]).unwrap().get::<_, i32>(0));
            }
            let rollups: Option<Vec<String>> =
                pids.iter().map(|p| std::fs::read_to_string(format!("/proc/{p}/smaps_rollup")).ok()).collect();
            let Some(rollups) = rollups else {
                done("skipped");
                r.notes.push("memory: /proc/PID/smaps_rollup of the backends is not readable here".into());
                return;
            };
            let mb_of = |fields: &[&str]| mean_mb(&rollups, fields);
            let run = MemoryRun {
                connections,
                private_mb: mb_of(&["Private_Clean", "Private_Dirty"]),
                anonymous_mb: mb_of(&["Anonymous"]),
                pss_mb: mb_of(&["Pss"]),
                rss_mb: mb_of(&["Rss"]),
            };
            done(&format!(
                "private {:.1} MB, anonymous {:.1} MB, PSS {:.1} MB per backend",
                run.private_mb, run.anonymous_mb, run.pss_mb
            ));
            r.memory.push(run);
        }
    }

    /// Filtered queries at each selectivity of `FILTERS`, ef_search
    /// 40, one client, with the plan the planner picks (noted), against the
    /// exact top-10 of the rows the filter keeps; `how` says what indexes
    /// serve them, in the label.
    fn filtered(&self, c: &mut Client, kind: Kind, r: &mut TargetReport, how: &str) {
        for ((share, t), truth) in FILTERS.iter().zip(&self.filtered_truth) {
            let label = format!("filter {share}{how}");
            let explain = format!(
                "EXPLAIN {}",
                self.query_sql(kind, Some(*t)).replace("$1", &format!("'{}'", text(self.d.query(0))))
            );
            let plan: Vec<String> = c.query(&explain, &[]).unwrap().iter().map(|row| row.get::<_, String>(0)).collect();
            let scan = plan
                .iter()
                .find_map(|l| ["Index Scan", "Seq Scan", "Bitmap Heap Scan"].into_iter().find(|k| l.contains(k)))
                .unwrap_or("?");
            step(&format!("{label}: {scan}, ef_search 40, 1 client"));
            let run = self.queries(kind, &label, 40, 1, truth, FILTER_QUERIES, Some(*t));
            done(&format!("recall@10 {:.3}, {:.0} QPS, p99 {:.2} ms", run.recall_at_10, run.qps, run.p99_ms));
            r.notes.push(format!("{label}: the planner chose {scan}"));
            r.queries.push(run);
        }
    }

    /// The filtered phase again with what each extension offers for it:
    /// pg_milvus' multicolumn index in place of its index of the vector
    /// alone (`bucket` a filter column, its keys evaluated inside the
    /// scan), pgvector's HNSW beside a btree on `bucket` (the planner picks
    /// the iterative scan or the btree and a sort). pg_milvus' also as ten
    /// segments, and as ten segments clustered by `bucket` (`cluster_by`,
    /// each holding a range of buckets, which a filter skips the others
    /// by): what clustering compaction is worth. Built on the loaded table;
    /// afterwards each table has its own index again.
    fn filtered_pushed(&self, c: &mut Client, kind: Kind, r: &mut TargetReport) {
        let t = kind.table();
        let variants: Vec<(String, String)> = match kind {
            Kind::Milvus => {
                let ten = format!("segment_max_rows = {}", (self.d.rows() / 10).max(100));
                c.batch_execute(&format!("DROP INDEX {t}_embedding_idx")).unwrap();
                vec![
                    (self.milvus_filter_index(t, ""), ", bucket a filter column".into()),
                    (self.milvus_filter_index(t, &ten), ", bucket a filter column, 10 segments".into()),
                    (
                        self.milvus_filter_index(t, &format!("{ten}, cluster_by = 'bucket'")),
                        ", bucket a filter column, 10 segments clustered by it".into(),
                    ),
                ]
            }
            Kind::Pgvector => {
                vec![(format!("CREATE INDEX bench_filter_idx ON {t} (bucket)"), ", btree on bucket".into())]
            }
            Kind::Plain => return,
        };
        for (index, how) in variants {
            let secs = seconds(&format!("CREATE INDEX for the filter ({})", how.trim_start_matches(", ")), || {
                c.batch_execute(&index).unwrap();
                if kind == Kind::Milvus {
                    wait_indexed(c, "bench_filter_idx");
                }
                c.batch_execute(&format!("ANALYZE {t}")).unwrap();
            });
            r.notes.push(format!("CREATE INDEX{how}: {:.1} s", secs.unwrap_or_default()));
            if index.contains("cluster_by") {
                let secs = seconds("clustering compaction", || wait_clustered(c, "bench_filter_idx"));
                r.notes.push(format!("clustering compaction{how}: {:.1} s", secs.unwrap_or_default()));
            }
            self.filtered(c, kind, r, &how);
            c.batch_execute("DROP INDEX bench_filter_idx").unwrap();
        }
        if kind == Kind::Milvus {
            self.create_index(c, kind);
            self.wait_indexed(c);
        }
    }

    /// pg_milvus' index of the vector and `bucket` on table `t`, with the
    /// run's graph options and `options` besides.
    fn milvus_filter_index(&self, t: &str, options: &str) -> String {
        let ops = format!("{}_{}", self.a.column_type.name(), metric_ops(self.a.metric()));
        let quantization = self.a.quantization.as_ref().map(|q| format!(", quantization = {q}")).unwrap_or_default();
        let options = if options.is_empty() { String::new() } else { format!(", {options}") };
        format!(
            "CREATE INDEX bench_filter_idx ON {t} USING milvus (embedding {ops}, bucket) \
             WITH (m = {}, ef_construction = {}{quantization}{options})",
            self.a.m, self.a.ef_construction
        )
    }

    /// The text output of every row of the table, three times: the median rate.
    fn text_output(&self, c: &mut Client, kind: Kind) -> f64 {
        let sql = format!("SELECT sum(length(embedding::text))::bigint FROM {}", kind.table());
        let mut rates: Vec<f64> = (0..3)
            .map(|_| {
                let start = Instant::now();
                let chars: i64 = c.query_one(&sql, &[]).unwrap().get(0);
                assert!(chars > 0);
                self.d.rows() as f64 / start.elapsed().as_secs_f64()
            })
            .collect();
        rates.sort_by(f64::total_cmp);
        rates[1]
    }

    fn sizes(&self, c: &mut Client, kind: Kind, r: &mut TargetReport) {
        let t = kind.table();
        r.table_bytes = Some(c.query_one(&format!("SELECT pg_relation_size('{t}')"), &[]).unwrap().get(0));
        r.index_bytes = c
            .query_opt(
                &format!(
                    "SELECT pg_relation_size(indexrelid)::bigint FROM pg_index WHERE indrelid = \
                '{t}'::regclass AND NOT indisprimary"
                ),
                &[],
            )
            .unwrap()
            .map(|row| row.get(0));
        if kind == Kind::Milvus {
            r.object_store_bytes = Some(
                c.query_one(
                    &format!(
                        "SELECT coalesce(sum(bytes), 0)::bigint FROM milvus_segments('{t}_embedding_idx') WHERE \
                        state = 'flushed'"
                    ),
                    &[],
                )
                .unwrap()
                .get(0),
            );
            r.cache_bytes = Some(c.query_one("SELECT cached_bytes FROM milvus_cache_stats()", &[]).unwrap().get(0));
        }
    }

    /// Polls until no row of the measured table waits in the growing or a
    /// sealed segment ([`wait_indexed`]).
    fn wait_indexed(&self, c: &mut Client) {
        wait_indexed(c, &format!("{}_embedding_idx", Kind::Milvus.table()));
    }

    /// Polls until the workers have nothing left to merge or purge and no
    /// job runs (a settled index).
    fn wait_settled(&self, c: &mut Client) {
        while !self.settled(c) {
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Whether the workers have nothing left to merge or purge and no job
    /// runs.
    fn settled(&self, c: &mut Client) -> bool {
        let index = format!("{}_embedding_idx", Kind::Milvus.table());
        let plans: i64 = c
            .query_one(&format!("SELECT count(*) FROM milvus_compact('{index}', dry_run => true)"), &[])
            .unwrap()
            .get(0);
        let running: i64 = c.query_one("SELECT count(*) FROM milvus_jobs WHERE state = 'running'", &[]).unwrap().get(0);
        plans == 0 && running == 0
    }

    /// One client searches without pause from now until the workers'
    /// merges are done (polled on `c`), so the figure covers the whole
    /// merge window, from the most segments to the fewest. Returns the run,
    /// the window's length, and each second's segment count (at its start)
    /// and QPS.
    fn while_merging(&self, c: &mut Client, kind: Kind, ef: usize) -> (QueryRun, f64, String) {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = AtomicBool::new(false);
        let sql = self.query_sql(kind, None);
        let mut searcher = self.connect();
        if let Some(setting) = kind.ef_setting() {
            searcher.batch_execute(&format!("SET {setting} = {ef}")).unwrap();
        }
        let stmt = searcher.prepare(&sql).unwrap();
        searcher.query(&stmt, &[&QueryVector(self.d.query(0))]).unwrap();
        let start = Instant::now();
        let mut segments_at = Vec::new();
        // (seconds since start, query, ids, latency in ms)
        let answers: Vec<(f64, usize, Vec<i64>, f64)> = std::thread::scope(|s| {
            let searching = s.spawn(|| {
                let mut out = Vec::new();
                let mut q = 0;
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let rows = searcher.query(&stmt, &[&QueryVector(self.d.query(q))]).unwrap();
                    let ids = rows.iter().map(|r| r.get::<_, i64>(0)).collect();
                    out.push((start.elapsed().as_secs_f64(), q, ids, t.elapsed().as_secs_f64() * 1e3));
                    q = (q + 1) % self.d.query_count();
                }
                out
            });
            loop {
                segments_at.push((start.elapsed().as_secs_f64(), self.segment_count(c)));
                if self.settled(c) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            stop.store(true, Ordering::Relaxed);
            searching.join().unwrap()
        });
        let window = start.elapsed().as_secs_f64();
        let mut latencies: Vec<f64> = answers.iter().map(|a| a.3).collect();
        latencies.sort_by(f64::total_cmp);
        let recall = answers
            .iter()
            .map(|(_, q, ids, _)| {
                let want: HashSet<i64> = self.truth[*q].iter().map(|&i| i as i64).collect();
                ids.iter().filter(|i| want.contains(i)).count() as f64 / K as f64
            })
            .sum::<f64>()
            / answers.len().max(1) as f64;
        let qps = answers.len() as f64 / window;
        let timeline = (0..window.ceil() as usize)
            .map(|second| {
                let at = second as f64;
                // The first poll comes a moment after the start.
                let segments =
                    segments_at.iter().rev().find(|(t, _)| *t <= at).or(segments_at.first()).map_or(0, |s| s.1);
                let done = answers.iter().filter(|a| a.0 >= at && a.0 < at + 1.0).count();
                format!("{segments}/{:.0}", done as f64 / (window - at).min(1.0))
            })
            .collect::<Vec<_>>()
            .join(", ");
        let run = QueryRun {
            label: "while merging".to_owned(),
            ef_search: ef,
            clients: 1,
            recall_at_10: recall,
            qps,
            qps_min: qps,
            qps_max: qps,
            p50_ms: percentile(&latencies, 0.5),
            p99_ms: percentile(&latencies, 0.99),
        };
        (run, window, timeline)
    }

    /// How many segments the index has, flushed and in pages.
    fn segment_count(&self, c: &mut Client) -> i64 {
        let index = format!("{}_embedding_idx", Kind::Milvus.table());
        c.query_one(
            &format!("SELECT count(*) FROM milvus_segments('{index}') WHERE state <> 'dropped' AND rows > 0"),
            &[],
        )
        .unwrap()
        .get(0)
    }

    /// A target's run begins: a connection, an empty table, an empty report.
    fn start(&self, kind: Kind) -> (Client, TargetReport) {
        let mut c = self.connect();
        self.create_table(&mut c, kind);
        (c, TargetReport { target: kind.name().into(), ..Default::default() })
    }

    /// A target's run begins with the rows loaded by COPY and read back as
    /// text, both timed.
    fn start_loaded(&self, kind: Kind) -> (Client, TargetReport) {
        let n = self.d.rows();
        let (mut c, mut r) = self.start(kind);
        r.copy_rows_per_s = rate(&format!("COPY {n} rows"), || self.copy(&mut c, kind, 0..n));
        r.text_output_rows_per_s = rate("text output of every row", || self.text_output(&mut c, kind));
        (c, r)
    }

    /// `--recall-only`: the rows loaded, the index built on them (one
    /// segment for pg_milvus up to its `segment_max_rows`), then recall
    /// and QPS at each ef_search.
    fn run_recall_only(&self, kind: Kind) -> TargetReport {
        let (mut c, mut r) = self.start_loaded(kind);
        let lsn = wal_position(&mut c);
        r.time_to_indexed_s = seconds("CREATE INDEX", || {
            self.create_index(&mut c, kind);
            if kind == Kind::Milvus {
                self.wait_indexed(&mut c);
            }
        });
        r.create_index_wal_bytes = Some(wal_since(&mut c, &lsn));
        c.batch_execute(&format!("ANALYZE {}", kind.table())).unwrap();
        if kind == Kind::Milvus {
            r.notes.push(format!("{} segment(s)", self.segment_count(&mut c)));
        }
        self.query_sweep(kind, "all sealed", &self.truth, &mut r);
        if kind == Kind::Milvus {
            self.bounded_cache(&mut c, &mut r);
        }
        r
    }

    /// `--filters-only`: CREATE INDEX on the loaded table, then the filter
    /// phases.
    fn run_filters_only(&self, kind: Kind) -> TargetReport {
        let (mut c, mut r) = self.start_loaded(kind);
        r.time_to_indexed_s = seconds("CREATE INDEX", || {
            self.create_index(&mut c, kind);
            if kind == Kind::Milvus {
                self.wait_indexed(&mut c);
            }
        });
        c.batch_execute(&format!("ANALYZE {}", kind.table())).unwrap();
        self.filtered(&mut c, kind, &mut r, "");
        self.filtered_pushed(&mut c, kind, &mut r);
        r
    }

    /// `--stream-only`: the streaming phase, then the crowds.
    fn run_stream_only(&self, kind: Kind) -> TargetReport {
        let stream = Some(self.stream(kind));
        TargetReport { target: kind.name().into(), stream, crowds: self.crowds(kind), ..Default::default() }
    }

    fn run_milvus(&self) -> TargetReport {
        let kind = Kind::Milvus;
        let n = self.d.rows();
        let (mut c, mut r) = self.start(kind);
        self.create_index(&mut c, kind);
        r.insert_batch_rows_per_s = rate(&format!("INSERT {n} rows, {BATCH} per statement, index present"), || {
            self.insert_batches(&mut c, kind, 0..n, 0)
        });
        r.time_to_indexed_s =
            seconds("time from the last insert until every row is indexed", || self.wait_indexed(&mut c));
        let segments = self.segment_count(&mut c);
        r.merges_settled_s =
            seconds(&format!("until the workers have merged those {segments} segments"), || self.wait_settled(&mut c));
        r.notes.push(format!(
            "{segments} segments when every row was indexed, {} once the merges were done",
            self.segment_count(&mut c)
        ));
        r.text_output_rows_per_s = rate("text output of every row", || self.text_output(&mut c, kind));

        // The same load again, one client searching while the workers merge.
        c.batch_execute(&format!("TRUNCATE {}", kind.table())).unwrap();
        self.insert_batches(&mut c, kind, 0..n, 0);
        self.wait_indexed(&mut c);
        c.batch_execute(&format!("ANALYZE {}", kind.table())).unwrap();
        let segments = self.segment_count(&mut c);
        step(&format!("the same load again, one client searching while {segments} segments merge: ef_search 40"));
        let (run, window_s, timeline) = self.while_merging(&mut c, kind, 40);
        done(&format!(
            "recall@10 {:.3}, {:.0} QPS, p99 {:.2} ms; merges done after {window_s:.2} s",
            run.recall_at_10, run.qps, run.p99_ms
        ));
        r.queries.push(run);
        r.notes.push(format!(
            "merges with one client searching throughout: done after {window_s:.2} s; each second's segments/QPS: \
            {timeline}"
        ));
        self.query_sweep(kind, "all sealed", &self.truth, &mut r);
        self.bounded_cache(&mut c, &mut r);
        self.memory(kind, &mut r);
        self.filtered(&mut c, kind, &mut r, "");
        self.filtered_pushed(&mut c, kind, &mut r);

        // 10% growing: the last tenth deleted and inserted again.
        let tail = n - n / 10;
        self.delete_vacuum(&mut c, kind, &format!("id >= {tail}"));
        self.insert_batches(&mut c, kind, tail..n, 0);
        self.query_sweep(kind, "10% growing", &self.truth, &mut r);
        self.wait_indexed(&mut c);

        self.deletes(&mut c, kind, &mut r);
        r.stream = Some(self.stream(kind));
        r.crowds = self.crowds(kind);
        r
    }

    /// The common end: DELETE 10% + VACUUM (pg_milvus: and the compaction
    /// that purges them), queries again, sizes, single-row inserts.
    fn deletes(&self, c: &mut Client, kind: Kind, r: &mut TargetReport) {
        r.delete_vacuum_s = seconds("DELETE 10% + VACUUM", || {
            self.delete_vacuum(c, kind, "id % 10 = 0");
        });
        if kind == Kind::Milvus {
            let index = format!("{}_embedding_idx", kind.table());
            let deleted: i64 = c
                .query_one(
                    &format!("SELECT coalesce(sum(deleted_rows), 0)::bigint FROM milvus_segments('{index}')"),
                    &[],
                )
                .unwrap()
                .get(0);
            r.notes.push(format!("tombstones after DELETE 10% + VACUUM: {deleted}"));
        }
        if kind == Kind::Milvus {
            r.compaction_s = seconds("compaction (milvus_compact(), purging at 10% deleted)", || {
                c.batch_execute("SET milvus.compaction_delete_ratio = 0.1").unwrap();
                c.query(&format!("SELECT * FROM milvus_compact('{}_embedding_idx')", kind.table()), &[]).unwrap();
            });
        }
        if kind != Kind::Plain {
            let truth = ground_truth(self.d, self.a.metric(), &|i| i % 10 != 0, None);
            self.query_sweep(kind, "after deletes", &truth, r);
        }
        self.sizes(c, kind, r);
        let rows = 1000.min(self.d.rows());
        r.insert_single_rows_per_s = rate(&format!("INSERT {rows} rows, one per statement"), || {
            self.insert_single(c, kind, 0..rows, 20 * self.d.rows())
        });
    }

    /// The streaming phase: the table again, with the first half of the
    /// rows loaded and indexed; the second half inserted at `STREAM_RATE`
    /// rows a second while one client searches at ef 40.
    fn stream(&self, kind: Kind) -> StreamRun {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        let n = self.d.rows();
        let before = n / 2;
        let mut c = self.connect();
        self.create_table(&mut c, kind);
        self.copy(&mut c, kind, 0..before);
        self.create_index(&mut c, kind);
        if kind == Kind::Milvus {
            self.wait_indexed(&mut c);
        }
        c.batch_execute(&format!("ANALYZE {}", kind.table())).unwrap();
        step(&format!("streaming: {} rows at {STREAM_RATE} rows/s, one client searching", n - before));
        let bar = counting(n - before);
        let committed = AtomicUsize::new(before);
        let streaming = AtomicBool::new(true);
        type Searched = (usize, usize, Vec<i64>, f64);
        let (insert_secs, searched, search_secs): (f64, Vec<Searched>, f64) = std::thread::scope(|s| {
            let searcher = s.spawn(|| {
                let mut q = self.connect();
                if let Some(setting) = kind.ef_setting() {
                    q.batch_execute(&format!("SET {setting} = 40")).unwrap();
                }
                let stmt = q.prepare(&self.query_sql(kind, None)).unwrap();
                let start = Instant::now();
                let mut out = Vec::new();
                while streaming.load(Ordering::Relaxed) {
                    let query = out.len() % self.d.query_count();
                    let prefix = committed.load(Ordering::Acquire);
                    let t = Instant::now();
                    let rows = q.query(&stmt, &[&QueryVector(self.d.query(query))]).unwrap();
                    let ids = rows.iter().map(|r| r.get::<_, i64>(0)).collect();
                    out.push((query, prefix, ids, t.elapsed().as_secs_f64() * 1e3));
                }
                (out, start.elapsed().as_secs_f64())
            });
            let rows: Vec<usize> = (before..n).collect();
            let start = Instant::now();
            for (b, chunk) in rows.chunks(BATCH).enumerate() {
                // Paced: batch b starts no sooner than b * BATCH / STREAM_RATE s.
                let due = start + Duration::from_secs_f64((b * BATCH) as f64 / STREAM_RATE as f64);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                self.insert_batches_counted(&mut c, kind, chunk[0]..chunk[0] + chunk.len(), 0, &bar);
                committed.store(chunk[0] + chunk.len(), Ordering::Release);
            }
            let insert_secs = start.elapsed().as_secs_f64();
            streaming.store(false, Ordering::Relaxed);
            let (searched, search_secs) = searcher.join().unwrap();
            (insert_secs, searched, search_secs)
        });
        let lag_s = if kind == Kind::Milvus {
            let start = Instant::now();
            self.wait_indexed(&mut c);
            start.elapsed().as_secs_f64()
        } else {
            0.0
        };
        // Recall of a sample, each against the rows committed when it began.
        let every = (searched.len() / STREAM_RECALL_SAMPLE).max(1);
        let sample: Vec<&Searched> = searched.iter().step_by(every).collect();
        let recall = sample
            .par_iter()
            .map(|(q, prefix, ids, _)| {
                let query = self.d.query(*q);
                let mut best: Vec<(f32, usize)> =
                    (0..*prefix).map(|i| (self.a.metric().distance(query, self.d.row(i)), i)).collect();
                best.select_nth_unstable_by(K, |a, b| a.0.total_cmp(&b.0));
                let want: HashSet<i64> = best[..K].iter().map(|e| e.1 as i64).collect();
                ids.iter().filter(|i| want.contains(i)).count() as f64 / K as f64
            })
            .sum::<f64>()
            / sample.len().max(1) as f64;
        let mut latencies: Vec<f64> = searched.iter().map(|s| s.3).collect();
        latencies.sort_by(f64::total_cmp);
        let run = StreamRun {
            rows_before: before,
            rows_streamed: n - before,
            target_rows_per_s: STREAM_RATE as f64,
            insert_rows_per_s: (n - before) as f64 / insert_secs,
            queries: searched.len(),
            qps: searched.len() as f64 / search_secs,
            p50_ms: percentile(&latencies, 0.5),
            p99_ms: percentile(&latencies, 0.99),
            recall_at_10: recall,
            lag_s,
        };
        done(&format!(
            "{:.0} rows/s inserted, {:.0} QPS, p99 {:.2} ms, recall@10 {:.3}, indexed {:.2} s after the last insert",
            run.insert_rows_per_s, run.qps, run.p99_ms, run.recall_at_10, run.lag_s
        ));
        run
    }

    /// The crowd phases ([`CrowdRun`]), on the streaming phase's table:
    /// the rows streamed in are the dataset's first ones again, under new
    /// ids, so no recall is measured.
    fn crowds(&self, kind: Kind) -> Vec<CrowdRun> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let mut c = self.connect();
        let rows = (CROWD_SECONDS * STREAM_RATE).min(self.d.rows());
        let mut runs = Vec::new();
        for (round, connections) in CROWDS.into_iter().enumerate() {
            step(&format!("{connections} connections searching for {CROWD_SECONDS} s while rows stream in"));
            let id_offset = self.d.rows() * (round + 2);
            let streaming = AtomicBool::new(true);
            let ready = std::sync::Barrier::new(connections + 1);
            type Searcher = (Vec<f64>, usize, Option<String>);
            let (inserted, insert_secs, searchers): (usize, f64, Vec<Searcher>) = std::thread::scope(|s| {
                let handles: Vec<_> = (0..connections)
                    .map(|i| {
                        let (streaming, ready) = (&streaming, &ready);
                        s.spawn(move || {
                            let client = self.try_connect().ok().and_then(|mut q| {
                                if let Some(setting) = kind.ef_setting() {
                                    q.batch_execute(&format!("SET {setting} = 40")).ok()?;
                                }
                                let stmt = q.prepare(&self.query_sql(kind, None)).ok()?;
                                q.query(&stmt, &[&QueryVector(self.d.query(i % self.d.query_count()))]).ok()?;
                                let pid: i32 = q.query_one("SELECT pg_backend_pid()", &[]).ok()?.get(0);
                                Some((q, stmt, pid))
                            });
                            ready.wait();
                            let Some((mut q, stmt, pid)) = client else { return (Vec::new(), 1, None) };
                            let (mut latencies, mut errors) = (Vec::new(), 0);
                            let mut query = i;
                            while streaming.load(Ordering::Relaxed) {
                                let t = Instant::now();
                                match q.query(&stmt, &[&QueryVector(self.d.query(query % self.d.query_count()))]) {
                                    Ok(_) => latencies.push(t.elapsed().as_secs_f64() * 1e3),
                                    Err(_) => errors += 1,
                                }
                                query += connections;
                            }
                            let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok();
                            (latencies, errors, rollup)
                        })
                    })
                    .collect();
                ready.wait();
                let start = Instant::now();
                let bar = counting(rows);
                let mut inserted = 0;
                for (b, chunk) in (0..rows).collect::<Vec<_>>().chunks(BATCH).enumerate() {
                    if start.elapsed().as_secs_f64() >= CROWD_SECONDS as f64 {
                        break;
                    }
                    let due = start + Duration::from_secs_f64((b * BATCH) as f64 / STREAM_RATE as f64);
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    self.insert_batches_counted(&mut c, kind, chunk[0]..chunk[0] + chunk.len(), id_offset, &bar);
                    inserted += chunk.len();
                }
                let insert_secs = start.elapsed().as_secs_f64();
                streaming.store(false, Ordering::Relaxed);
                (inserted, insert_secs, handles.into_iter().map(|h| h.join().unwrap()).collect())
            });
            let mut latencies: Vec<f64> = searchers.iter().flat_map(|s| s.0.iter().copied()).collect();
            latencies.sort_by(f64::total_cmp);
            let rollups: Vec<String> = searchers.iter().filter_map(|s| s.2.clone()).collect();
            let mb_of = |fields: &[&str]| (!rollups.is_empty()).then(|| mean_mb(&rollups, fields));
            let run = CrowdRun {
                connections,
                insert_rows_per_s: inserted as f64 / insert_secs,
                queries: latencies.len(),
                qps: latencies.len() as f64 / insert_secs,
                p50_ms: percentile(&latencies, 0.5),
                p99_ms: percentile(&latencies, 0.99),
                errors: searchers.iter().map(|s| s.1).sum(),
                private_mb: mb_of(&["Private_Clean", "Private_Dirty"]),
                pss_mb: mb_of(&["Pss"]),
            };
            done(&format!(
                "{:.0} QPS, p99 {:.2} ms, {} errors, private {:.1} MB per backend, {:.0} rows/s inserted",
                run.qps,
                run.p99_ms,
                run.errors,
                run.private_mb.unwrap_or(f64::NAN),
                run.insert_rows_per_s
            ));
            runs.push(run);
        }
        runs
    }

    fn run_pgvector(&self) -> TargetReport {
        let kind = Kind::Pgvector;
        let n = self.d.rows();
        let (mut c, mut r) = self.start_loaded(kind);
        let lsn = wal_position(&mut c);
        r.time_to_indexed_s = seconds("CREATE INDEX ... USING hnsw", || {
            self.create_index(&mut c, kind);
        });
        r.create_index_wal_bytes = Some(wal_since(&mut c, &lsn));
        // INSERT with the index present: a sample (HNSW inserts are slow),
        // under ids of their own, removed afterwards.
        let sample = (n / 10).clamp(BATCH, 5 * BATCH).min(n);
        r.insert_batch_rows_per_s =
            rate(&format!("INSERT {sample} rows, {BATCH} per statement, index present"), || {
                self.insert_batches(&mut c, kind, 0..sample, 10 * n)
            });
        self.delete_vacuum(&mut c, kind, &format!("id >= {}", 10 * n));
        c.batch_execute(&format!("ANALYZE {}", kind.table())).unwrap();
        self.query_sweep(kind, "all sealed", &self.truth, &mut r);
        self.memory(kind, &mut r);
        self.filtered(&mut c, kind, &mut r, "");
        self.filtered_pushed(&mut c, kind, &mut r);
        self.deletes(&mut c, kind, &mut r);
        r.stream = Some(self.stream(kind));
        r.crowds = self.crowds(kind);
        r
    }

    fn run_plain(&self) -> TargetReport {
        let kind = Kind::Plain;
        let n = self.d.rows();
        let (mut c, mut r) = self.start(kind);
        r.copy_rows_per_s = rate(&format!("COPY {n} rows"), || self.copy(&mut c, kind, 0..n));
        self.create_table(&mut c, kind);
        r.insert_batch_rows_per_s =
            rate(&format!("INSERT {n} rows, {BATCH} per statement"), || self.insert_batches(&mut c, kind, 0..n, 0));
        c.batch_execute(&format!("ANALYZE {}", kind.table())).unwrap();
        // The exact floor: a sequential scan per query, a few queries.
        step("exact search (sequential scan), 1 client");
        let run = self.queries(kind, "exact", 0, 1, &self.truth, 20, None);
        done(&format!("recall@10 {:.3}, {:.1} QPS", run.recall_at_10, run.qps));
        r.queries.push(run);
        self.filtered(&mut c, kind, &mut r, "");
        self.deletes(&mut c, kind, &mut r);
        r
    }
}

/// The opclass suffix of a metric (`l2_ops`, ...).
fn metric_ops(metric: Metric) -> &'static str {
    match metric {
        Metric::L2 => "l2_ops",
        Metric::InnerProduct => "ip_ops",
        Metric::Cosine => "cosine_ops",
        Metric::L1 => "l1_ops",
        Metric::Hamming | Metric::Jaccard => die("the driver measures vector and halfvec columns, not bits"),
    }
}

// ---------------------------------------------------------------- output

fn machine(c: &mut Client) -> Machine {
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

fn opt(v: Option<f64>) -> String {
    v.map(|v| if v >= 100.0 { format!("{v:.0}") } else { format!("{v:.2}") }).unwrap_or_default()
}

fn mb(v: Option<i64>) -> String {
    v.map(|v| format!("{:.1}", v as f64 / 1048576.0)).unwrap_or_default()
}

fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let m = &r.machine;
    writeln!(
        s,
        "Machine: {} ({} cores, {:.1} GB), {}; {}.\n",
        m.cpu,
        m.cores,
        m.memory_gb,
        m.postgres.split(" on ").next().unwrap_or(""),
        m.date
    )
    .unwrap();
    writeln!(
        s,
        "Data: {} rows x {} dimensions, {}; metric {}; {} held-out queries, recall@10 against exact search. HNSW m = \
            {}, ef_construction = {}; pg_milvus' quantization {}. QPS: median of {} runs (range in brackets).\n",
        r.rows,
        r.dim,
        r.dataset,
        r.metric,
        r.queries,
        r.m,
        r.ef_construction,
        r.quantization.as_deref().unwrap_or("unset (rabitq from 256 dimensions, sq8 below)"),
        r.repeats
    )
    .unwrap();
    let w = &r.merges;
    writeln!(
        s,
        "Merge policy (simulated steady ingest of {} segments' worth): growing_max_rows {}, segment_max_rows {}, \
            fan-in {}: each row rewritten {:.2} times by merges after its flush (bound 1 + log_{}({} / {}) = {:.2}).\n",
        50,
        w.growing_max_rows,
        w.segment_max_rows,
        w.fan_in,
        w.rewrites_per_row,
        w.fan_in,
        w.segment_max_rows,
        w.growing_max_rows,
        w.bound
    )
    .unwrap();
    writeln!(
        s,
        "| | COPY rows/s | INSERT rows/s (1000/stmt) | INSERT rows/s (1/stmt) | time to indexed (s) | CREATE INDEX \
        WAL (kB) | merges done (s) | first query of a connection (ms) | DELETE 10% + VACUUM (s) | compaction (s) | text output rows/s \
        | table MB | index MB (pages) | object store MB | cache MB |"
    )
    .unwrap();
    writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|").unwrap();
    for t in &r.targets {
        writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            t.target,
            opt(t.copy_rows_per_s),
            opt(t.insert_batch_rows_per_s),
            opt(t.insert_single_rows_per_s),
            opt(t.time_to_indexed_s),
            t.create_index_wal_bytes.map(|b| format!("{:.1}", b as f64 / 1024.0)).unwrap_or_default(),
            opt(t.merges_settled_s),
            opt(t.cold_query_ms),
            opt(t.delete_vacuum_s),
            opt(t.compaction_s),
            opt(t.text_output_rows_per_s),
            mb(t.table_bytes),
            mb(t.index_bytes),
            mb(t.object_store_bytes),
            mb(t.cache_bytes)
        )
        .unwrap();
    }
    writeln!(s, "\n| | phase | ef_search | clients | recall@10 | QPS | p50 (ms) | p99 (ms) |").unwrap();
    writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|").unwrap();
    for t in &r.targets {
        for q in &t.queries {
            writeln!(
                s,
                "| {} | {} | {} | {} | {:.3} | {:.0} ({:.0}–{:.0}) | {:.2} | {:.2} |",
                t.target,
                q.label,
                q.ef_search,
                q.clients,
                q.recall_at_10,
                q.qps,
                q.qps_min,
                q.qps_max,
                q.p50_ms,
                q.p99_ms
            )
            .unwrap();
        }
    }
    if r.targets.iter().any(|t| t.stream.is_some()) {
        writeln!(
            s,
            "\n| streaming | rows before | rows inserted | insert rows/s (target {STREAM_RATE}) | queries | QPS | p50 \
                (ms) | p99 (ms) | recall@10 | indexed after the last insert (s) |"
        )
        .unwrap();
        writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|").unwrap();
        for t in &r.targets {
            if let Some(m) = &t.stream {
                writeln!(
                    s,
                    "| {} | {} | {} | {:.0} | {} | {:.0} | {:.2} | {:.2} | {:.3} | {:.2} |",
                    t.target,
                    m.rows_before,
                    m.rows_streamed,
                    m.insert_rows_per_s,
                    m.queries,
                    m.qps,
                    m.p50_ms,
                    m.p99_ms,
                    m.recall_at_10,
                    m.lag_s
                )
                .unwrap();
            }
        }
    }
    if r.targets.iter().any(|t| !t.crowds.is_empty()) {
        writeln!(
            s,
            "\n| many connections, rows streaming in | connections | insert rows/s | queries | QPS | p50 (ms) | p99 \
                (ms) | errors | private MB per backend | PSS MB |"
        )
        .unwrap();
        writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|").unwrap();
        let megabytes = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.1}"));
        for t in &r.targets {
            for m in &t.crowds {
                writeln!(
                    s,
                    "| {} | {} | {:.0} | {} | {:.0} | {:.2} | {:.2} | {} | {} | {} |",
                    t.target,
                    m.connections,
                    m.insert_rows_per_s,
                    m.queries,
                    m.qps,
                    m.p50_ms,
                    m.p99_ms,
                    m.errors,
                    megabytes(m.private_mb),
                    megabytes(m.pss_mb)
                )
                .unwrap();
            }
        }
    }
    if r.targets.iter().any(|t| !t.memory.is_empty()) {
        writeln!(s, "\n| | connections | private MB per backend | of which anonymous | PSS MB | RSS MB |").unwrap();
        writeln!(s, "|---|---:|---:|---:|---:|---:|").unwrap();
        for t in &r.targets {
            for m in &t.memory {
                writeln!(
                    s,
                    "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
                    t.target, m.connections, m.private_mb, m.anonymous_mb, m.pss_mb, m.rss_mb
                )
                .unwrap();
            }
        }
    }
    for t in &r.targets {
        for n in &t.notes {
            writeln!(s, "\n{}: {n}", t.target).unwrap();
        }
    }
    s
}

/// A line of the plot: (name, [(recall, QPS, ef_search)]), of a target and phase.
type Series = (String, Vec<(f64, f64, usize)>);

/// Recall@10 against single-client QPS, one line per target and phase.
fn svg(r: &Report) -> String {
    let series: Vec<Series> = r
        .targets
        .iter()
        .flat_map(|t| {
            let mut labels: Vec<&str> =
                t.queries.iter().filter(|q| q.ef_search > 0).map(|q| q.label.as_str()).collect();
            labels.dedup();
            labels
                .into_iter()
                .map(|l| {
                    let points = t
                        .queries
                        .iter()
                        .filter(|q| q.label == l && q.clients == 1)
                        .map(|q| (q.recall_at_10, q.qps, q.ef_search))
                        .collect();
                    (format!("{} ({l})", t.target), points)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let all: Vec<(f64, f64)> = series.iter().flat_map(|s| s.1.iter().map(|p| (p.0, p.1))).collect();
    let x_min = (all.iter().map(|p| p.0).fold(1.0, f64::min) - 0.01).clamp(0.0, 0.9);
    let y_max = all.iter().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let mut out = String::new();
    draw(&mut out, &series, x_min, y_max).unwrap_or_else(|e| die(&format!("cannot draw the plot: {e}")));
    out
}

/// The recall-QPS plot: a line per series, its `ef_search` points marked.
fn draw(out: &mut String, series: &[Series], x_min: f64, y_max: f64) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::with_string(out, (760, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("recall@10 and QPS, 1 client, one point per ef_search", ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_min..1.0, 0.0..y_max)?;
    chart.configure_mesh().x_desc("recall@10").y_desc("QPS").draw()?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(points.iter().map(|p| (p.0, p.1)), color.stroke_width(2)))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart.draw_series(points.iter().map(|p| Circle::new((p.0, p.1), 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Flushes the milvus index `index`, then polls until no row waits in the
/// growing or a sealed segment and every segment due a graph has it.
fn wait_indexed(c: &mut Client, index: &str) {
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
fn wait_clustered(c: &mut Client, index: &str) {
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
fn conninfo(a: &Args) -> String {
    format!("host={} port={} user=postgres dbname={DB}", a.host, a.port)
}

/// A fresh bench database with pg_milvus, and pgvector in a schema of its
/// own (`pgv`) when installed (or why not): a connection to it.
fn fresh_database(a: &Args) -> (Client, Result<(), String>) {
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

fn main() {
    let a = Args::parse();
    std::fs::create_dir_all(&a.out).unwrap_or_else(|e| die(&format!("{}: {e}", a.out.display())));
    let write = |name: &str, body: String| {
        let p = a.out.join(name);
        std::fs::write(&p, body).unwrap_or_else(|e| die(&format!("{}: {e}", p.display())));
        eprintln!("wrote {}", p.display());
    };
    if a.sparse {
        let (mut c, pgvector) = fresh_database(&a);
        let report = sparse::run(&a, machine(&mut c), pgvector);
        write("report.json", serde_json::to_string_pretty(&report).unwrap());
        write("report.md", sparse::markdown(&report));
        return;
    }
    eprintln!("data");
    let d = dataset(&a);
    step(&format!("exact top-{K} of {} queries over {} rows", d.query_count(), d.rows()));
    let cache_name = format!(
        "truth-{}-{}-{}-{}-{}-{}{}{}-{}.bin",
        d.rows(),
        d.dim,
        a.clusters,
        a.seed,
        d.query_count(),
        a.uniform as u8,
        a.gaussian as u8,
        a.normalise as u8,
        a.metric().code()
    );
    let cache = if a.file.is_none() { Some(a.out.join(cache_name)) } else { None };
    let truth = ground_truth(&d, a.metric(), &|_| true, cache.as_deref());
    let filtered_truth: Vec<Vec<Vec<u32>>> = if a.recall_only || a.stream_only {
        Vec::new()
    } else {
        FILTERS.iter().map(|(_, t)| ground_truth(&d, a.metric(), &|i| i % 1000 < *t, None)).collect()
    };
    done("done");

    let bench = Bench { a: &a, d: &d, truth, filtered_truth };
    let (mut c, pgvector) = fresh_database(&a);
    let machine = machine(&mut c);

    let mut targets = Vec::new();
    let run = |kind| {
        if a.recall_only {
            bench.run_recall_only(kind)
        } else if a.filters_only {
            bench.run_filters_only(kind)
        } else if a.stream_only {
            bench.run_stream_only(kind)
        } else if kind == Kind::Milvus {
            bench.run_milvus()
        } else {
            bench.run_pgvector()
        }
    };
    if !a.recall_only && !a.stream_only && !a.filters_only {
        eprintln!("{}", Kind::Plain.name());
        targets.push(bench.run_plain());
    }
    eprintln!("{}", Kind::Milvus.name());
    targets.push(run(Kind::Milvus));
    match pgvector {
        Ok(()) => {
            // pg_milvus' workers first finish what its phases left them
            // (flushes, merges): their CPU and their WAL, which carries an
            // embedded index's objects, would count against pgvector (its
            // CREATE INDEX's WAL is the server's WAL meanwhile).
            bench.wait_indexed(&mut c);
            bench.wait_settled(&mut c);
            eprintln!("{}", Kind::Pgvector.name());
            targets.push(run(Kind::Pgvector));
        }
        Err(e) => {
            let note = format!("skipped: the vector extension is not installed in this cluster ({e})");
            eprintln!("pgvector {note}");
            targets.push(TargetReport {
                target: Kind::Pgvector.name().into(),
                notes: vec![note],
                ..Default::default()
            });
        }
    }
    let report = Report {
        machine,
        dataset: d.description.clone(),
        metric: format!("{:?} ({}), {} columns", a.metric(), a.metric().operator(), a.column_type.name()),
        rows: d.rows(),
        dim: d.dim,
        queries: d.query_count(),
        m: a.m,
        ef_construction: a.ef_construction,
        quantization: a.quantization.clone(),
        clients: a.clients,
        repeats: a.repeats,
        merges: merge_report(),
        targets,
    };
    write("report.json", serde_json::to_string_pretty(&report).unwrap());
    write("report.md", markdown(&report));
    write("recall_qps.svg", svg(&report));
}
