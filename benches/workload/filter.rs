//! Filter phases: queries keeping 0.1%, 1%, 10% and 50% of the rows, on
//! the vector's index alone and on each extension's index for filters
//! (pg_milvus' filter column, also as ten segments, unclustered and
//! clustered by it; pgvector beside a btree).

use postgres::Client;

use crate::bench::{Bench, Kind, metric_ops, wait_clustered, wait_indexed};
use crate::progress::{done, seconds, step};
use crate::report::TargetReport;
use crate::wire::text;

/// Filters of the filtered phase, `WHERE bucket < t` (`bucket` is `id %
/// 1000`, a generated column): 0.1%, 1%, 10% and 50% of the rows,
/// independent of where a row lies.
pub(crate) const FILTERS: [(&str, usize); 4] = [("0.1%", 1), ("1%", 10), ("10%", 100), ("50%", 500)];

/// Queries per filtered run (a sequential scan each, for the plain table).
pub(crate) const FILTER_QUERIES: usize = 100;

impl Bench<'_> {
    /// Filtered queries at each selectivity of `FILTERS`, ef_search
    /// 40, one client, with the plan the planner picks (noted), against the
    /// exact top-10 of the rows the filter keeps; `how` says what indexes
    /// serve them, in the label.
    pub(crate) fn filtered(&self, c: &mut Client, kind: Kind, r: &mut TargetReport, how: &str) {
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
    pub(crate) fn filtered_pushed(&self, c: &mut Client, kind: Kind, r: &mut TargetReport) {
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
    pub(crate) fn milvus_filter_index(&self, t: &str, options: &str) -> String {
        let ops = format!("{}_{}", self.a.column_type.name(), metric_ops(self.a.metric()));
        let quantization = self.a.quantization.as_ref().map(|q| format!(", quantization = {q}")).unwrap_or_default();
        let options = if options.is_empty() { String::new() } else { format!(", {options}") };
        format!(
            "CREATE INDEX bench_filter_idx ON {t} USING milvus (embedding {ops}, bucket) \
             WITH (m = {}, ef_construction = {}{quantization}{options})",
            self.a.m, self.a.ef_construction
        )
    }
}
