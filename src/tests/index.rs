//! The milvus index in the `cargo pgrx test` cluster, which preloads the
//! library without background workers (`milvus.max_workers = 0`): flushes are
//! done by `milvus_flush()` in the calling backend, and recorded in the
//! shared job log. (Running without preload at all is tested end to end,
//! tests/test_workers.py.)

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    #[pg_test]
    fn index_flush_search_and_job_log() {
        let preload = Spi::get_one::<String>("SHOW shared_preload_libraries").unwrap().unwrap_or_default();
        assert!(preload.contains("pg_milvus"), "the job log needs the library preloaded: {preload}");
        Spi::run("CREATE TABLE t (id int PRIMARY KEY, v vector(3))").unwrap();
        Spi::run("INSERT INTO t SELECT i, ARRAY[i % 17, i % 13, i % 11] FROM generate_series(1, 5000) i").unwrap();
        Spi::run("CREATE INDEX t_idx ON t USING milvus (v vector_l2_ops)").unwrap();
        Spi::run("INSERT INTO t SELECT i, ARRAY[i % 17, i % 13, i % 11] FROM generate_series(5001, 5100) i").unwrap();
        let flushed = Spi::get_one::<i64>("SELECT count(*) FROM milvus_flush('t_idx')").unwrap();
        assert_eq!(flushed, Some(1), "the rows inserted after CREATE INDEX");
        let states = Spi::get_one::<String>(
            "SELECT string_agg(state || ':' || rows, ',' ORDER BY segment_id) FROM milvus_segments('t_idx')",
        )
        .unwrap();
        assert_eq!(states.as_deref(), Some("flushed:5000,flushed:100,growing:0"));
        // The job log (shared memory, so it sees this transaction's jobs):
        // the build's seal and flush, then the call's.
        let jobs = Spi::get_one::<String>(
            "SELECT string_agg(kind || ':' || segments::text || ':' || state || ':' || reason || ':' || rows, ',' \
                ORDER BY job_id) \
             FROM milvus_jobs WHERE index = 't_idx'::regclass",
        )
        .unwrap();
        assert_eq!(
            jobs.as_deref(),
            Some("flush:{1}:done:CREATE INDEX:5000,seal:{2}:done:manual flush:100,flush:{2}:done:milvus_flush():100")
        );
        Spi::run("SET enable_seqscan = off").unwrap();
        let nearest = Spi::get_one::<i32>("SELECT id FROM t ORDER BY v <-> '[1,1,1]' LIMIT 1").unwrap();
        let exact = Spi::get_one::<i32>("SELECT id FROM t ORDER BY l2_distance(v, '[1,1,1]'), id LIMIT 1").unwrap();
        assert_eq!(
            Spi::get_one::<f64>(&format!("SELECT l2_distance(v, '[1,1,1]') FROM t WHERE id = {}", nearest.unwrap()))
                .unwrap(),
            Spi::get_one::<f64>(&format!("SELECT l2_distance(v, '[1,1,1]') FROM t WHERE id = {}", exact.unwrap()))
                .unwrap(),
        );
    }

    /// A collection that finds nothing to delete leaves no trace in the job
    /// log, and costs the jobs that are there nothing: the workers collect
    /// every database every `milvus.gc_interval`, and each dropped index or
    /// database whose objects are still young is such a collection.
    #[pg_test]
    fn collections_that_find_nothing_push_no_job_out_of_the_log() {
        Spi::run("CREATE TABLE g (v vector(2))").unwrap();
        Spi::run("CREATE INDEX g_idx ON g USING milvus (v)").unwrap();
        Spi::run("INSERT INTO g SELECT ARRAY[i, 0] FROM generate_series(1, 10) i").unwrap();
        Spi::run("SELECT milvus_flush('g_idx')").unwrap();
        let logged = "SELECT string_agg(kind || ':' || state, ',' ORDER BY job_id) FROM milvus_jobs \
                      WHERE index = 'g_idx'::regclass";
        let before = Spi::get_one::<String>(logged).unwrap();
        assert_eq!(before.as_deref(), Some("seal:done,flush:done"));
        // More collections than the log has slots (128).
        for _ in 0..200 {
            let deleted = Spi::get_one::<i64>("SELECT deleted_objects FROM milvus_gc('g_idx')").unwrap();
            assert_eq!(deleted, Some(0));
        }
        assert_eq!(Spi::get_one::<String>(logged).unwrap(), before);
    }
}
