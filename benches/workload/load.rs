//! Load phases: COPY, INSERT with the index present (1,000 rows and one row
//! a statement), the time until every row is indexed and the merges after
//! it (with one client searching throughout), the text output of every
//! row, and the bytes on disk and in object storage.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use postgres::Client;

use crate::bench::{Bench, Kind, percentile};
use crate::data::K;
use crate::progress::counting;
use crate::report::{QueryRun, TargetReport};
use crate::wire::{QueryVector, text};

pub(crate) const BATCH: usize = 1000;

impl Bench<'_> {
    pub(crate) fn copy(&self, c: &mut Client, kind: Kind, rows: std::ops::Range<usize>) -> f64 {
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
    pub(crate) fn insert_batches(
        &self,
        c: &mut Client,
        kind: Kind,
        rows: std::ops::Range<usize>,
        id_offset: usize,
    ) -> f64 {
        self.insert_batches_counted(c, kind, rows.clone(), id_offset, &counting(rows.len()))
    }

    /// [`Self::insert_batches`], counted on `bar`.
    pub(crate) fn insert_batches_counted(
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
    pub(crate) fn insert_single(
        &self,
        c: &mut Client,
        kind: Kind,
        rows: std::ops::Range<usize>,
        id_offset: usize,
    ) -> f64 {
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

    /// The text output of every row of the table, three times: the median
    /// rate. A checkpoint first, so that neither side is measured while the
    /// checkpointer writes what its load left dirty (pg_milvus' table is
    /// read after INSERTs and merges, pgvector's right after COPY).
    pub(crate) fn text_output(&self, c: &mut Client, kind: Kind) -> f64 {
        c.batch_execute("CHECKPOINT").unwrap();
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

    pub(crate) fn sizes(&self, c: &mut Client, kind: Kind, r: &mut TargetReport) {
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

    /// One client searches without pause from now until the workers'
    /// merges are done (polled on `c`), so the figure covers the whole
    /// merge window, from the most segments to the fewest. Returns the run,
    /// the window's length, and each second's segment count (at its start)
    /// and QPS.
    pub(crate) fn while_merging(&self, c: &mut Client, kind: Kind, ef: usize) -> (QueryRun, f64, String) {
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
}
