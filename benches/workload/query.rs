//! Query phases: recall@10, QPS and latency at each `ef_search` with one
//! client and several, the first query of a new connection, the same with
//! the segment cache bounded, and backend memory.

use std::collections::HashSet;
use std::time::Instant;

use postgres::Client;

use crate::args::ColumnType;
use crate::bench::{Bench, DB, Kind, mean_mb, percentile};
use crate::data::K;
use crate::progress::{counting, done, step};
use crate::report::{MemoryRun, QueryRun, TargetReport};
use crate::wire::QueryVector;

pub(crate) const EF_VALUES: [usize; 5] = [20, 40, 100, 200, 400];

impl Bench<'_> {
    /// The SQL of a query, with `WHERE bucket < t` for a filter.
    pub(crate) fn query_sql(&self, kind: Kind, filter: Option<usize>) -> String {
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
    pub(crate) fn queries(
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
    pub(crate) fn cold_query_ms(&self, kind: Kind) -> f64 {
        let mut c = self.connect();
        let sql = self.query_sql(kind, None);
        let start = Instant::now();
        c.query(&sql, &[&QueryVector(self.d.query(0))]).unwrap();
        start.elapsed().as_secs_f64() * 1e3
    }

    pub(crate) fn query_sweep(&self, kind: Kind, label: &str, truth: &[Vec<u32>], r: &mut TargetReport) {
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
    pub(crate) fn bounded_cache(&self, c: &mut Client, r: &mut TargetReport) {
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
    pub(crate) fn memory(&self, kind: Kind, r: &mut TargetReport) {
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
}
