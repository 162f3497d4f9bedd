"""A crash matrix: kill -9 of the whole server at named points of the
lifecycle, while several sessions insert rows with known ids, then crash
recovery and the checks of the invariants: every committed row is in the
index exactly once, no deleted row comes back, nothing referenced is
missing, no index page leaks, and GC collects what the crash left
unreferenced.

Points (milvus.debug_pause / debug_pause_at hold a job exactly there):
- mid_insert: writers only, killed wherever they are;
- insert_in_wal: a row's page write is in the WAL, its transaction open;
- flush_mid_upload: the insert binlog uploaded, the index file not yet;
- flush_before_commit: a flush uploaded, its manifest commit not made;
- flush_after_commit: the manifest commit made, the segment's pages not yet
  emptied;
- compaction_before_commit: a compaction uploaded, not swapped in;
- gc_mid_delete: garbage collection after its first deletion;
- free_mid_chain: garbage collection's manifest commit made, the chains of
  the objects it forgot freed to their first page;
- restore_mid_copy: a search restoring the index's lost directory from its
  pages, one file in place.
The index keeps 8-bit codes (its default at these 64 dimensions); the
points that write or swap an index file run again with RaBitQ codes (the
default from 256 dimensions). PG_MILVUS_CRASH_RUNS repetitions per case (3
by default, 20 for the full run); the matrix is printed at the end."""

import os
import shutil
import threading
import time

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from conftest import DIMS
from helpers import all_index_ids, load, objects_of, writers


RUNS = int(os.environ.get("PG_MILVUS_CRASH_RUNS", "3"))
FLUSH = "SELECT * FROM milvus_flush('items_idx')"
COMPACT = "SELECT * FROM milvus_compact('items_idx')"
GC = "SELECT * FROM milvus_gc('items_idx')"
UNCOMMITTED_ID = 9_000_000  # the row insert_in_wal leaves in an open transaction
# point: (where the job is held, the job, how the test knows it is there)
POINTS = {
    "mid_insert": None,
    "insert_in_wal": ("insert", "INSERT INTO items VALUES (%s, 0, %s)", "sleeping"),
    "flush_mid_upload": ("upload", FLUSH, "binlog"),
    "flush_before_commit": ("commit", FLUSH, "sleeping"),
    "flush_after_commit": ("release", FLUSH, "sleeping"),
    "compaction_before_commit": ("commit", COMPACT, "sleeping"),
    "gc_mid_delete": ("gc", GC, "deleted"),
    "free_mid_chain": ("free", GC, "deleted"),
    "restore_mid_copy": ("restore", "SELECT id FROM items ORDER BY embedding <-> %s LIMIT 10", "restored"),
}
# (point, quantization): every point with the default codes, and again
# with RaBitQ's where an index file is written or swapped in.
CASES = [(point, "sq8") for point in POINTS] + [
    (point, "rabitq") for point in ("flush_mid_upload", "flush_before_commit", "compaction_before_commit")]
MATRIX = {}


@pytest.fixture(scope="module", autouse=True)
def report():
    """Prints the matrix once every point ran: runs, lost, duplicated,
    dead returned."""
    yield
    print(f"\n{'crash point (codes)':<35}{'runs':>6}{'lost':>6}{'dup':>6}{'dead':>6}")
    for case, results in MATRIX.items():
        sums = [sum(r[i] for r in results) for i in range(3)]
        print(f"{case:<35}{len(results):>6}" + "".join(f"{n:>6}" for n in sums))


def files(directory):
    return sorted(p for p in directory.rglob("*") if p.is_file()) if directory.exists() else []


def held_job(cluster, dbname, at, sql):
    """Runs `sql` in a session that holds it at `at`; the crash ends it."""
    def run():
        try:
            with cluster.connect(dbname) as c:
                register_vector(c)
                c.execute("SET milvus.gc_grace_period = 0")
                c.execute(f"SET milvus.debug_pause_at = {at}")
                c.execute("SET milvus.debug_pause = 600000")
                args = ((UNCOMMITTED_ID, np.ones(DIMS, np.float32)) if "INSERT" in sql
                        else (np.ones(DIMS, np.float32),) if "%s" in sql else None)
                c.execute(sql, args)
        except psycopg.OperationalError:
            pass
    t = threading.Thread(target=run)
    t.start()
    return t


def wait_until(condition, what):
    deadline = time.time() + 120
    while not condition():
        assert time.time() < deadline, f"the job never got {what}"
        time.sleep(0.02)


def pages(conn):
    return dict(conn.execute("SELECT kind, pages FROM milvus_index_pages('items_idx')").fetchall())


@pytest.mark.parametrize("point,quantization", CASES)
def test_crash_matrix(cluster, conn, point, quantization):
    dbname = conn.info.dbname
    # Large segments: the writers' inserts never seal one themselves (a seal
    # of theirs would also finish the page release flush_after_commit holds
    # back: any session's commit does).
    conn.execute(
        "CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) "
        f"WITH (segment_max_rows = 1000000, growing_max_rows = 1000000, quantization = {quantization})")
    objects = objects_of(cluster, conn)
    results = MATRIX[f"{point} ({quantization})"] = []  # filled run by run, printed even if a run fails
    for run in range(RUNS):
        # Known rows: two flushed segments with tombstones (a compaction
        # plan), and rows still growing; enough of them for a flush to build
        # an HNSW graph (an index file to upload) where the point needs one.
        base = set()
        for b in range(2):
            load(conn, 1500, seed=b, start_id=10_000 * run + 1500 * b)
            base.update(range(10_000 * run + 1500 * b, 10_000 * run + 1500 * (b + 1)))
            conn.execute(FLUSH)
        conn.execute("DELETE FROM items WHERE id % 10 = 3 AND id < 1000000")
        conn.execute("VACUUM items")
        dead = {i for i in base if i % 10 == 3}
        if point == "flush_mid_upload":
            load(conn, 5000, seed=run, start_id=10_000 * run + 3000)
            base.update(range(10_000 * run + 3000, 10_000 * run + 8000))
        if point in ("gc_mid_delete", "free_mid_chain"):
            conn.execute(COMPACT)  # its inputs' objects become garbage
        if point == "restore_mid_copy":
            lost = len(files(objects))
            shutil.rmtree(objects)  # lost: the pages have every object
        before = files(objects)

        stop, committed = threading.Event(), set()
        threads = writers(cluster, dbname, stop, committed)
        time.sleep(0.5)
        job = None
        if POINTS[point]:
            at, sql, sign = POINTS[point]
            job = held_job(cluster, dbname, at, sql)
            if sign == "sleeping":
                wait_until(lambda: conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'").fetchone()[0] == 1, "held")
            elif sign == "binlog":
                def binlog_only():
                    new = [p.name for p in files(objects) if p not in before]
                    return any(n.startswith("insert-") and "#" not in n for n in new)
                wait_until(binlog_only, "its insert binlog uploaded")
                time.sleep(0.2)
                assert not any(p.name.startswith("index-") for p in files(objects) if p not in before)
            elif sign == "restored":
                wait_until(lambda: any("#" not in p.name for p in files(objects)), "its first file restored")
            else:
                wait_until(lambda: len(files(objects)) < len(before), "its first deletion done")
                if point == "free_mid_chain":
                    time.sleep(0.5)  # the other deletions, the commit, the first page freed
        cluster.crash()
        if point == "restore_mid_copy":
            assert 0 < len([p for p in files(objects) if "#" not in p.name]) < lost, "killed mid-restore"
        stop.set()
        for t in threads + ([job] if job else []):
            t.join(60)
        conn.close()
        cluster.restart()
        conn = cluster.connect(dbname)
        register_vector(conn)

        # Every object the manifest references is there and intact: prewarm
        # fetches and verifies each one (and fails naming any that is not).
        conn.execute("SELECT * FROM milvus_prewarm('items_idx')")
        heap = {r[0] for r in conn.execute("SELECT id FROM items")}
        ids = all_index_ids(conn)
        lost = len((committed | (base - dead)) - set(ids))
        duplicated = len(ids) - len(set(ids))
        dead_returned = len((dead | {UNCOMMITTED_ID}) & set(ids))
        results.append((lost, duplicated, dead_returned))
        assert set(ids) == heap, "the index holds exactly the table"
        # No page leaks: what a commit released before the crash is still
        # listed, and VACUUM empties it; the object pages of a flush or a
        # merge the crash cut before its commit are unpublished until
        # VACUUM takes them back.
        after_crash = pages(conn)
        assert after_crash["unreferenced"] == 0, after_crash
        if point == "flush_after_commit":
            assert after_crash["released"] > 0, after_crash
        if not point.endswith("before_commit") and point not in ("flush_mid_upload", "free_mid_chain"):
            assert after_crash["unpublished"] == 0, after_crash
        if point == "free_mid_chain":
            assert after_crash["unpublished"] > 0, "the rest of the chains: no manifest names them"
        conn.execute("VACUUM items")
        vacuumed = pages(conn)
        assert vacuumed["released"] == vacuumed["unreferenced"] == vacuumed["unpublished"] == 0, vacuumed
        assert vacuumed["objects"] > 0, vacuumed
        # GC takes what the crash left unreferenced, and nothing else.
        conn.execute("SET milvus.gc_grace_period = 0")
        _, deleted, referenced, young, error = conn.execute(GC).fetchone()
        assert error is None
        assert len(files(objects)) == referenced and young == 0
        if point in ("flush_mid_upload", "flush_before_commit", "compaction_before_commit", "gc_mid_delete"):
            assert deleted >= 1, "the unpublished upload, or the rest of the garbage, was collected"
        dropped = conn.execute("SELECT count(*) FROM milvus_segments('items_idx') WHERE state = 'dropped'").fetchone()[0]
        assert dropped == 0, "GC forgot every dropped segment whose objects are gone"
        assert len(all_index_ids(conn)) == len(heap), "still complete after GC"
        conn.execute("DELETE FROM items WHERE id >= 1000000")  # the next run's writers start afresh
        conn.execute("VACUUM items")
    assert all(r == (0, 0, 0) for r in results), results
