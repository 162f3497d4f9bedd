//! The crowd sweep: 1 to 100 connections searching at once, alone and
//! while one session streams rows in at a rate both extensions hold (QPS,
//! latency, errors, memory per backend).

use std::time::{Duration, Instant};

use crate::bench::{Bench, Kind, mean_mb, percentile};
use crate::progress::{counting, done, step};
use crate::report::CrowdRun;
use crate::wire::QueryVector;

/// Connections of the crowd sweep.
pub(crate) const CROWDS: [usize; 5] = [1, 4, 16, 64, 100];

/// Rows a second streamed in while a crowd searches. Low enough that both
/// extensions hold it at 100 connections and 768 dimensions on 2 cores
/// (pgvector's HNSW inserts managed 98-157 rows/s there when asked for
/// 1,000), so both sides do the same insert work while their searches are
/// measured; what each achieves is reported beside it.
pub(crate) const CROWD_RATE: usize = 100;

/// Rows per INSERT statement while a crowd searches: a statement every
/// tenth of a second at [`CROWD_RATE`].
pub(crate) const CROWD_BATCH: usize = 10;

/// How long each crowd phase searches.
pub(crate) const CROWD_SECONDS: usize = 10;

impl Bench<'_> {
    /// The crowd sweep ([`CrowdRun`]), on the streaming phase's table: at
    /// each of [`CROWDS`], the connections searching alone, then while rows
    /// stream in at [`CROWD_RATE`]. The rows streamed in are the dataset's
    /// first ones again, under new ids, so no recall is measured.
    pub(crate) fn crowds(&self, kind: Kind) -> Vec<CrowdRun> {
        let mut runs = Vec::new();
        for (round, connections) in CROWDS.into_iter().enumerate() {
            for rate in [0, CROWD_RATE] {
                let id_offset = self.d.rows() * (round + 2);
                runs.push(self.crowd(kind, connections, rate, id_offset));
            }
        }
        runs
    }

    /// `connections` searching without pause at ef_search 40 for
    /// [`CROWD_SECONDS`] while one more session inserts `rate` rows a
    /// second (none at 0), in statements of [`CROWD_BATCH`].
    fn crowd(&self, kind: Kind, connections: usize, rate: usize, id_offset: usize) -> CrowdRun {
        use std::sync::atomic::{AtomicBool, Ordering};
        if rate == 0 {
            step(&format!("{connections} connection(s) searching for {CROWD_SECONDS} s"));
        } else {
            step(&format!("{connections} connection(s) searching for {CROWD_SECONDS} s while {rate} rows/s stream in"));
        }
        let mut c = self.connect();
        let rows = (CROWD_SECONDS * rate).min(self.d.rows());
        let searching = AtomicBool::new(true);
        let ready = std::sync::Barrier::new(connections + 1);
        type Searcher = (Vec<f64>, usize, Option<String>);
        let (inserted, secs, searchers): (usize, f64, Vec<Searcher>) = std::thread::scope(|s| {
            let handles: Vec<_> = (0..connections)
                .map(|i| {
                    let (searching, ready) = (&searching, &ready);
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
                        while searching.load(Ordering::Relaxed) {
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
            let until = Duration::from_secs(CROWD_SECONDS as u64);
            let bar = counting(rows);
            let mut inserted = 0;
            for (b, first) in (0..rows).step_by(CROWD_BATCH).enumerate() {
                // Paced: statement b starts no sooner than b * CROWD_BATCH / rate s.
                let due = start + Duration::from_secs_f64((b * CROWD_BATCH) as f64 / rate as f64);
                if due >= start + until {
                    break;
                }
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                if start.elapsed() >= until {
                    break;
                }
                let last = (first + CROWD_BATCH).min(rows);
                self.insert_batches_counted(&mut c, kind, first..last, id_offset, &bar);
                inserted += last - first;
            }
            if let Some(left) = (start + until).checked_duration_since(Instant::now()) {
                std::thread::sleep(left);
            }
            let secs = start.elapsed().as_secs_f64();
            searching.store(false, Ordering::Relaxed);
            (inserted, secs, handles.into_iter().map(|h| h.join().unwrap()).collect())
        });
        let mut latencies: Vec<f64> = searchers.iter().flat_map(|s| s.0.iter().copied()).collect();
        latencies.sort_by(f64::total_cmp);
        let rollups: Vec<String> = searchers.iter().filter_map(|s| s.2.clone()).collect();
        let mb_of = |fields: &[&str]| (!rollups.is_empty()).then(|| mean_mb(&rollups, fields));
        let run = CrowdRun {
            connections,
            target_rows_per_s: rate as f64,
            insert_rows_per_s: inserted as f64 / secs,
            queries: latencies.len(),
            qps: latencies.len() as f64 / secs,
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
        run
    }
}
