"""A crash matrix: kill -9 of the whole server at named points of the
lifecycle, while several sessions insert rows with known ids, then crash
recovery and the checks of the invariants: every committed row is in the
index exactly once, no deleted row comes back, nothing referenced is
missing, and GC collects what the crash left unreferenced.

Points: mid-insert (writers only); a flush uploaded but not committed; a
compaction uploaded but not swapped in (both held in that window by
milvus.debug_commit_pause). PG_MILVUS_CRASH_RUNS repetitions per point (2
by default; the report prints the matrix)."""

import os
import threading
import time
from pathlib import Path

import psycopg
import pytest
from pgvector.psycopg import register_vector

from test_index import all_index_ids, clustered, load

RUNS = int(os.environ.get("PG_MILVUS_CRASH_RUNS", "2"))
POINTS = ["mid_insert", "flush_before_commit", "compaction_before_commit"]
MATRIX = {}


def writers(cluster, dbname, stop, committed, count=3):
    """Sessions inserting batches of 20 rows, recording the ids whose COMMIT
    returned; a batch cut by the crash may or may not have committed."""
    def run(w):
        data = clustered(20, seed=w)
        n = 0
        try:
            with cluster.connect(dbname) as c:
                register_vector(c)
                while not stop.is_set():
                    ids = [1_000_000 * (w + 1) + n + i for i in range(20)]
                    with c.transaction(), c.cursor() as cur:
                        cur.executemany("INSERT INTO items VALUES (%s, 0, %s)", list(zip(ids, data)))
                    committed.update(ids)
                    n += 20
        except psycopg.Error:
            pass  # the crash
    threads = [threading.Thread(target=run, args=(w,)) for w in range(count)]
    for t in threads:
        t.start()
    return threads


def objects_of(cluster, conn):
    cluster_id, db_oid, index_oid = conn.execute(
        "SELECT lpad(to_hex(s.system_identifier), 16, '0'), d.oid, 'items_idx'::regclass::oid"
        " FROM pg_control_system() s, pg_database d WHERE d.datname = current_database()").fetchone()
    return Path(cluster.host) / "data" / "pg_milvus" / "objects" / cluster_id / str(db_oid) / str(index_oid)


def files(directory):
    return sorted(p for p in directory.rglob("*") if p.is_file()) if directory.exists() else []


def paused_job(cluster, dbname, sql):
    """Runs `sql` with the pause between upload and commit; the crash ends it."""
    def run():
        try:
            with cluster.connect(dbname) as c:
                c.execute("SET milvus.debug_commit_pause = 600000")
                c.execute(sql)
        except psycopg.OperationalError:
            pass
    t = threading.Thread(target=run)
    t.start()
    return t


@pytest.mark.parametrize("point", POINTS)
def test_crash_matrix(cluster, conn, point):
    dbname = conn.info.dbname
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (segment_max_rows = 20000)")
    objects = objects_of(cluster, conn)
    results = []
    for run in range(RUNS):
        # Known rows: two flushed segments with tombstones (a compaction
        # plan), and rows still growing.
        base = set()
        for b in range(2):
            load(conn, 1500, seed=b, start_id=10_000 * run + 1500 * b)
            base.update(range(10_000 * run + 1500 * b, 10_000 * run + 1500 * (b + 1)))
            conn.execute("SELECT * FROM milvus_flush('items_idx')")
        conn.execute("DELETE FROM items WHERE id % 10 = 3 AND id < 1000000")
        conn.execute("VACUUM items")
        dead = {i for i in base if i % 10 == 3}
        before = len(files(objects))

        stop, committed = threading.Event(), set()
        threads = writers(cluster, dbname, stop, committed)
        time.sleep(0.5)
        job = None
        if point == "flush_before_commit":
            job = paused_job(cluster, dbname, "SELECT * FROM milvus_flush('items_idx')")
        elif point == "compaction_before_commit":
            job = paused_job(cluster, dbname, "SELECT * FROM milvus_compact('items_idx')")
        if job:
            deadline = time.time() + 60
            while len(files(objects)) == before and time.time() < deadline:
                time.sleep(0.02)
            assert len(files(objects)) > before, "the job uploaded before the crash"
        cluster.crash()
        stop.set()
        for t in threads + ([job] if job else []):
            t.join(60)
        conn.close()
        cluster.restart()
        conn = cluster.connect(dbname)
        register_vector(conn)

        heap = {r[0] for r in conn.execute("SELECT id FROM items")}
        ids = all_index_ids(conn)
        lost = len((committed | (base - dead)) - set(ids))
        duplicated = len(ids) - len(set(ids))
        dead_returned = len(dead & set(ids))
        results.append((lost, duplicated, dead_returned))
        assert set(ids) == heap, "the index holds exactly the table"
        # GC takes what the crash left unreferenced, and nothing else.
        conn.execute("SET milvus.gc_grace_period = 0")
        _, deleted, referenced, young = conn.execute("SELECT * FROM milvus_gc('items_idx')").fetchone()
        assert len(files(objects)) == referenced and young == 0
        if job:
            assert deleted >= 1, "the unpublished upload was collected"
        assert len(all_index_ids(conn)) == len(heap), "still complete after GC"
        conn.execute("DELETE FROM items WHERE id >= 1000000")  # the next run's writers start afresh
        conn.execute("VACUUM items")
    MATRIX[point] = results
    print(f"\ncrash matrix, {point}: {RUNS} runs, lost {sum(r[0] for r in results)}, "
          f"duplicated {sum(r[1] for r in results)}, dead returned {sum(r[2] for r in results)}")
    assert all(r == (0, 0, 0) for r in results), results
