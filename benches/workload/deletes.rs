//! Delete phases: DELETE 10% + VACUUM, compaction, and the queries again.

use std::time::Instant;

use postgres::Client;

use crate::bench::{Bench, Kind};
use crate::data::ground_truth;
use crate::progress::{rate, seconds};
use crate::report::TargetReport;

impl Bench<'_> {
    pub(crate) fn delete_vacuum(&self, c: &mut Client, kind: Kind, predicate: &str) -> f64 {
        let start = Instant::now();
        c.batch_execute(&format!("DELETE FROM {t} WHERE {predicate}", t = kind.table())).unwrap();
        c.batch_execute(&format!("VACUUM {}", kind.table())).unwrap();
        start.elapsed().as_secs_f64()
    }

    /// The common end: DELETE 10% + VACUUM (pg_milvus: and the compaction
    /// that purges them), queries again, sizes, single-row inserts.
    pub(crate) fn deletes(&self, c: &mut Client, kind: Kind, r: &mut TargetReport) {
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
}
