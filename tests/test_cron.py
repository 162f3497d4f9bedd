"""pg_cron, for real: a cluster preloading pg_cron runs a scheduled
milvus_compact() at the next minute boundary (pg_cron 1.4 schedules by the
minute), and cron.job_run_details records its success."""

import time

import pytest
from pgvector.psycopg import register_vector

from conftest import Cluster
from helpers import load


@pytest.fixture(scope="module")
def cron_cluster():
    c = Cluster("cron", [
        "shared_preload_libraries = 'pg_milvus,pg_cron'",
        "cron.database_name = 'postgres'",
        "cron.use_background_workers = on",
        "max_worker_processes = 16",
        # pg_cron is the only trigger here: the workers would compact too.
        "milvus.max_workers = 0",
    ])
    yield c
    c.stop()


def test_cron_schedules_compaction(cron_cluster):
    with cron_cluster.connect() as conn:
        conn.execute("CREATE EXTENSION pg_cron")
        conn.execute("CREATE EXTENSION pg_milvus")
        register_vector(conn)
        conn.execute("DROP TABLE IF EXISTS items")
        conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, category int, embedding vector(64))")
        conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (segment_max_rows = 10000)")
        for b in range(2):
            load(conn, 1000, seed=b, start_id=b * 1000)
            conn.execute("SELECT * FROM milvus_flush('items_idx')")
        job = conn.execute(
            "SELECT cron.schedule('compact-items', '* * * * *', $$SELECT milvus_compact('items_idx')$$)").fetchone()[0]

        deadline = time.time() + 150  # the next minute boundary, and a margin
        runs = []
        while time.time() < deadline and not runs:
            time.sleep(2)
            runs = conn.execute(
                "SELECT status, return_message FROM cron.job_run_details WHERE jobid = %s AND status <> 'running'",
                (job,)).fetchall()
        conn.execute("SELECT cron.unschedule(%s)", (job,))
        assert runs, "pg_cron did not run the job within 150 s"
        assert runs[0][0] == "succeeded", runs
        states = conn.execute(
            "SELECT state, rows, seal_reason FROM milvus_segments('items_idx') WHERE state <> 'growing' ORDER BY segment_id").fetchall()
        assert states == [("dropped", 1000, "manual flush"), ("dropped", 1000, "manual flush"),
                          ("flushed", 2000, "compaction of [1, 2]")], states
