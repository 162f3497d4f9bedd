//! The streaming phase: half the rows loaded and indexed, the other half
//! inserted at a fixed rate while one client searches (QPS, latency,
//! recall against the rows committed at each query's start, and the lag
//! until all is indexed).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::bench::{Bench, Kind, percentile};
use crate::data::K;
use crate::load::BATCH;
use crate::progress::{counting, done, step};
use crate::report::StreamRun;
use crate::wire::QueryVector;

/// Rows a second the streaming phase inserts.
pub(crate) const STREAM_RATE: usize = 1000;

/// Queries of the streaming phase whose recall is computed (each an exact
/// search over the rows committed when it started).
pub(crate) const STREAM_RECALL_SAMPLE: usize = 500;

impl Bench<'_> {
    /// The streaming phase: the table again, with the first half of the
    /// rows loaded and indexed; the second half inserted at `STREAM_RATE`
    /// rows a second while one client searches at ef 40.
    pub(crate) fn stream(&self, kind: Kind) -> StreamRun {
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
}
