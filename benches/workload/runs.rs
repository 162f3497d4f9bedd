//! Which phases each target runs, in order: the full workload for
//! pg_milvus, pgvector and the plain table, and the `--recall-only`,
//! `--filters-only` and `--stream-only` subsets.

use crate::bench::{Bench, Kind, wal_position, wal_since};
use crate::load::BATCH;
use crate::progress::{done, rate, seconds, step};
use crate::report::TargetReport;

impl Bench<'_> {
    /// `--recall-only`: the rows loaded, the index built on them (one
    /// segment for pg_milvus up to its `segment_max_rows`), then recall
    /// and QPS at each ef_search.
    pub(crate) fn run_recall_only(&self, kind: Kind) -> TargetReport {
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
    pub(crate) fn run_filters_only(&self, kind: Kind) -> TargetReport {
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
    pub(crate) fn run_stream_only(&self, kind: Kind) -> TargetReport {
        let stream = Some(self.stream(kind));
        TargetReport { target: kind.name().into(), stream, crowds: self.crowds(kind), ..Default::default() }
    }

    pub(crate) fn run_milvus(&self) -> TargetReport {
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

    pub(crate) fn run_pgvector(&self) -> TargetReport {
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

    pub(crate) fn run_plain(&self) -> TargetReport {
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
