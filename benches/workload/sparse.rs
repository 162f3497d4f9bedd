//! The sparse workload (`--sparse`, `make bench-sparse`): SPLADE-like rows
//! (`milvus_core::synthetic::splade_like`: `--n` rows of `--sparse-nnz` of
//! `--vocab` dimensions, Zipf-like frequencies) in a `sparsevec` column,
//! under inner product, for pg_milvus (`sparsevec_ip_ops`: inverted
//! segments, exact) beside pgvector's HNSW on the same rows, when
//! installed. Phases: COPY all rows but the last 5%; CREATE INDEX on them;
//! INSERT the rest in statements of 1,000 rows with the index present;
//! time from the last insert until every row is in an indexed segment
//! (pgvector indexes each row as it goes: 0); then one client's QPS,
//! latency and recall@10 of `--queries` queries of `--sparse-query-nnz`
//! dimensions at each `--ef` (pgvector's `hnsw.ef_search`; pg_milvus
//! answers the same whatever it is).
//!
//! Recall counts a returned row as found when its exact score reaches the
//! exact 10th best (ties at the cut count once each), against scores the
//! driver computes with the core's own sparse kernel.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::Instant;

use bytes::{BufMut, BytesMut};
use milvus_core::sparse::{SparseVec, inner_product};
use milvus_core::synthetic::splade_like;
use postgres::Client;
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use rayon::prelude::*;
use serde::Serialize;

use crate::args::Args;
use crate::bench::{percentile, wait_indexed};
use crate::data::K;
use crate::load::BATCH;
use crate::progress::{counting, die, done, seconds, step};
use crate::report::{Machine, QueryRun};

/// Rows inserted with the index present, after CREATE INDEX on the rest.
const INSERTED_SHARE: f64 = 0.05;

#[derive(Serialize)]
pub struct SparseReport {
    machine: Machine,
    rows: usize,
    vocab: usize,
    nnz: usize,
    query_nnz: usize,
    queries: usize,
    repeats: usize,
    targets: Vec<SparseTarget>,
}

#[derive(Serialize, Default)]
struct SparseTarget {
    target: String,
    copy_rows_per_s: Option<f64>,
    create_index_s: Option<f64>,
    insert_rows: usize,
    insert_batch_rows_per_s: Option<f64>,
    /// From the last insert until every row is in an indexed segment.
    time_to_indexed_s: Option<f64>,
    index_bytes: Option<i64>,
    queries: Vec<QueryRun>,
    notes: Vec<String>,
}

/// A `sparsevec` parameter in the binary form `sparsevec_recv` reads
/// (pgvector's and pg_milvus' alike): int32 dimensions, int32 entries,
/// int32 0, the indices, the values, in network byte order.
#[derive(Debug)]
struct SparseParam<'a>(&'a SparseVec);

impl ToSql for SparseParam<'_> {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let v = self.0;
        out.put_i32(i32::try_from(v.dim)?);
        out.put_i32(i32::try_from(v.indices.len())?);
        out.put_i32(0);
        v.indices.iter().for_each(|i| out.put_i32(*i));
        v.values.iter().for_each(|x| out.put_f32(*x));
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        ty.name() == "sparsevec"
    }

    to_sql_checked!();
}

/// The text form, 1-based: `{1:0.5,7:1.2}/30000`, each value's shortest
/// exact decimal.
fn text(v: &SparseVec) -> String {
    let mut s = String::with_capacity(v.indices.len() * 14);
    s.push('{');
    for (j, (i, x)) in v.indices.iter().zip(&v.values).enumerate() {
        if j > 0 {
            s.push(',');
        }
        write!(s, "{}:{x}", i + 1).unwrap();
    }
    write!(s, "}}/{}", v.dim).unwrap();
    s
}

struct Target {
    name: &'static str,
    table: &'static str,
    /// The schema of the target's `sparsevec` type and operators.
    schema: &'static str,
    index: &'static str,
}

const MILVUS: Target = Target {
    name: "pg_milvus",
    table: "sparse_milvus",
    schema: "public",
    index: "USING milvus (terms sparsevec_ip_ops)",
};
const PGVECTOR: Target = Target {
    name: "pgvector hnsw",
    table: "sparse_pgvector",
    schema: "pgv",
    index: "USING hnsw (terms pgv.sparsevec_ip_ops)",
};

struct Workload<'a> {
    a: &'a Args,
    rows: Vec<SparseVec>,
    queries: Vec<SparseVec>,
    /// Each query's exact 10th best score.
    cut: Vec<f32>,
}

impl Workload<'_> {
    fn connect(&self) -> Client {
        Client::connect(&crate::bench::conninfo(self.a), postgres::NoTls)
            .unwrap_or_else(|e| die(&format!("cannot connect: {e}")))
    }

    fn run(&self, t: &Target) -> SparseTarget {
        let a = self.a;
        let mut c = self.connect();
        let mut r = SparseTarget { target: t.name.into(), ..Default::default() };
        let (table, vocab) = (t.table, a.vocab);
        c.batch_execute(&format!(
            "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id bigint PRIMARY KEY, terms {}.sparsevec({vocab}))",
            t.schema
        ))
        .unwrap();
        let loaded = self.rows.len() - (self.rows.len() as f64 * INSERTED_SHARE) as usize;
        step(&format!("{}: COPY {loaded} rows", t.name));
        let bar = counting(loaded);
        let start = Instant::now();
        let mut w = c.copy_in(&format!("COPY {table} (id, terms) FROM STDIN")).unwrap();
        for (i, v) in self.rows[..loaded].iter().enumerate() {
            writeln!(w, "{i}\t{}", text(v)).unwrap();
            bar.inc(1);
        }
        w.finish().unwrap();
        r.copy_rows_per_s = Some(loaded as f64 / start.elapsed().as_secs_f64());
        done(&format!("{:.0} rows/s", r.copy_rows_per_s.unwrap()));
        c.batch_execute("SET max_parallel_maintenance_workers = 0").unwrap();
        r.create_index_s = seconds(&format!("{}: CREATE INDEX", t.name), || {
            c.batch_execute(&format!("CREATE INDEX {table}_idx ON {table} {}", t.index)).unwrap();
        });

        r.insert_rows = self.rows.len() - loaded;
        step(&format!("{}: INSERT {} rows, {BATCH} a statement", t.name, r.insert_rows));
        let bar = counting(r.insert_rows);
        let start = Instant::now();
        let rest: Vec<usize> = (loaded..self.rows.len()).collect();
        for chunk in rest.chunks(BATCH) {
            let mut sql = format!("INSERT INTO {table} (id, terms) VALUES ");
            for (j, i) in chunk.iter().enumerate() {
                if j > 0 {
                    sql.push(',');
                }
                write!(sql, "({i}, '{}')", text(&self.rows[*i])).unwrap();
            }
            c.batch_execute(&sql).unwrap();
            bar.inc(chunk.len() as u64);
        }
        r.insert_batch_rows_per_s = Some(r.insert_rows as f64 / start.elapsed().as_secs_f64());
        done(&format!("{:.0} rows/s", r.insert_batch_rows_per_s.unwrap()));
        r.time_to_indexed_s = if t.name == MILVUS.name {
            seconds("pg_milvus: last insert until every row is indexed", || {
                wait_indexed(&mut c, &format!("{table}_idx"))
            })
        } else {
            Some(0.0)
        };
        r.index_bytes = Some(if t.name == MILVUS.name {
            c.query_one(
                &format!(
                    "SELECT coalesce(sum(bytes), 0)::bigint FROM milvus_segments('{table}_idx') WHERE state = 'flushed'"
                ),
                &[],
            )
            .unwrap()
            .get(0)
        } else {
            c.query_one(&format!("SELECT pg_relation_size('{table}_idx')"), &[]).unwrap().get(0)
        });
        c.batch_execute(&format!("VACUUM ANALYZE {table}")).unwrap();
        for &ef in &a.ef {
            step(&format!("{}: ef_search {ef}", t.name));
            r.queries.push(self.queries(&mut c, t, ef));
            let q = r.queries.last().unwrap();
            done(&format!("{:.0} QPS, recall@10 {:.3}", q.qps, q.recall_at_10));
        }
        r
    }

    fn queries(&self, c: &mut Client, t: &Target, ef: usize) -> QueryRun {
        let setting = if t.name == MILVUS.name { "milvus.ef_search" } else { "hnsw.ef_search" };
        c.batch_execute(&format!("SET {setting} = {ef}")).unwrap();
        let sql = format!(
            "SELECT id, (terms OPERATOR({0}.<#>) $1::{0}.sparsevec) * -1 FROM {1} ORDER BY terms OPERATOR({0}.<#>) \
             $1::{0}.sparsevec LIMIT {K}",
            t.schema, t.table
        );
        let stmt = c.prepare(&sql).unwrap();
        c.query(&stmt, &[&SparseParam(&self.queries[0])]).unwrap();
        let (mut qps, mut latencies, mut found) = (Vec::new(), Vec::new(), 0usize);
        let bar = counting(self.queries.len() * self.a.repeats);
        for repeat in 0..self.a.repeats {
            let start = Instant::now();
            for (q, query) in self.queries.iter().enumerate() {
                let t = Instant::now();
                let rows = c.query(&stmt, &[&SparseParam(query)]).unwrap();
                latencies.push(t.elapsed().as_secs_f64() * 1e3);
                bar.inc(1);
                if repeat == 0 {
                    // A row counts when its exact score reaches the 10th
                    // best (its own score, not the one returned).
                    found += rows
                        .iter()
                        .map(|r| r.get::<_, i64>(0) as usize)
                        .filter(|&id| inner_product(self.rows[id].view(), query.view()) >= self.cut[q])
                        .count();
                }
            }
            qps.push(self.queries.len() as f64 / start.elapsed().as_secs_f64());
        }
        qps.sort_by(f64::total_cmp);
        latencies.sort_by(f64::total_cmp);
        QueryRun {
            label: t.name.into(),
            ef_search: ef,
            clients: 1,
            recall_at_10: found as f64 / (K * self.queries.len()) as f64,
            qps: qps[qps.len() / 2],
            qps_min: qps[0],
            qps_max: qps[qps.len() - 1],
            p50_ms: percentile(&latencies, 0.5),
            p99_ms: percentile(&latencies, 0.99),
        }
    }
}

/// Runs the sparse workload on the fresh database `main` made; `pgvector`
/// says whether pgvector is installed there (or why not).
pub fn run(a: &Args, machine: Machine, pgvector: Result<(), String>) -> SparseReport {
    step(&format!("{} rows and {} queries, exact scores", a.n, a.queries));
    let rows = splade_like(a.n, a.vocab, a.sparse_nnz, a.seed);
    let queries = splade_like(a.queries, a.vocab, a.sparse_query_nnz, a.seed + 1);
    let cut: Vec<f32> = queries
        .par_iter()
        .map(|q| {
            let mut scores: Vec<f32> = rows.iter().map(|r| inner_product(r.view(), q.view())).collect();
            let kth = scores.len().min(K) - 1;
            scores.select_nth_unstable_by(kth, |a, b| b.total_cmp(a));
            scores[kth]
        })
        .collect();
    done("done");
    let w = Workload { a, rows, queries, cut };
    let mut targets = vec![];
    eprintln!("{}", MILVUS.name);
    targets.push(w.run(&MILVUS));
    match pgvector {
        Ok(()) => {
            eprintln!("{}", PGVECTOR.name);
            targets.push(w.run(&PGVECTOR));
        }
        Err(e) => targets.push(SparseTarget {
            target: PGVECTOR.name.into(),
            notes: vec![format!("skipped: the vector extension is not installed in this cluster ({e})")],
            ..Default::default()
        }),
    }
    SparseReport {
        machine,
        rows: a.n,
        vocab: a.vocab,
        nnz: a.sparse_nnz,
        query_nnz: a.sparse_query_nnz,
        queries: a.queries,
        repeats: a.repeats,
        targets,
    }
}

pub fn markdown(r: &SparseReport) -> String {
    let mut s = String::new();
    let m = &r.machine;
    writeln!(s, "# Sparse workload: {} rows of {} of {} dimensions, inner product\n", r.rows, r.nnz, r.vocab).unwrap();
    writeln!(s, "{}; {} cores, {:.1} GB; {}; {}\n", m.cpu, m.cores, m.memory_gb, m.postgres, m.date).unwrap();
    writeln!(
        s,
        "{} queries of {} dimensions, one client, QPS the median of {} runs.\n",
        r.queries, r.query_nnz, r.repeats
    )
    .unwrap();
    s.push_str("| target | COPY rows/s | CREATE INDEX s | INSERT rows/s | to indexed s | index MB |\n|---|---:|---:|---:|---:|---:|\n");
    let opt = crate::report::markdown::opt;
    for t in &r.targets {
        writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            t.target,
            opt(t.copy_rows_per_s),
            opt(t.create_index_s),
            opt(t.insert_batch_rows_per_s),
            opt(t.time_to_indexed_s),
            t.index_bytes.map(|b| format!("{:.1}", b as f64 / 1048576.0)).unwrap_or_default()
        )
        .unwrap();
    }
    s.push_str(
        "\n| target | ef_search | recall@10 | QPS (min-max) | p50 ms | p99 ms |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for t in &r.targets {
        for q in &t.queries {
            writeln!(
                s,
                "| {} | {} | {:.3} | {:.0} ({:.0}-{:.0}) | {:.2} | {:.2} |",
                t.target, q.ef_search, q.recall_at_10, q.qps, q.qps_min, q.qps_max, q.p50_ms, q.p99_ms
            )
            .unwrap();
        }
        for n in &t.notes {
            writeln!(s, "\n{}: {n}", t.target).unwrap();
        }
    }
    s
}
