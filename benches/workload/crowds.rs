//! The crowd phases: many connections searching at once while one
//! session streams rows in (QPS, latency, errors, memory per backend).

use std::time::{Duration, Instant};

use crate::bench::{Bench, Kind, mean_mb, percentile};
use crate::load::BATCH;
use crate::progress::{counting, done, step};
use crate::report::CrowdRun;
use crate::stream::STREAM_RATE;
use crate::wire::QueryVector;

/// Connections of the crowd phases, each searching while one session
/// streams rows in.
pub(crate) const CROWDS: [usize; 2] = [64, 100];

/// How long each crowd phase searches and streams rows in.
pub(crate) const CROWD_SECONDS: usize = 10;

impl Bench<'_> {
    /// The crowd phases ([`CrowdRun`]), on the streaming phase's table:
    /// the rows streamed in are the dataset's first ones again, under new
    /// ids, so no recall is measured.
    pub(crate) fn crowds(&self, kind: Kind) -> Vec<CrowdRun> {
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
}
