"""Compaction and GC on a real cluster: searches stay right before, during
and after a compaction (a concurrent searcher checks every answer), and a
dropped index's objects are collected."""

import threading
import time

import numpy as np

from helpers import all_index_ids, ExactSearcher, load, near, objects_of, segments


def test_searches_stay_right_during_compaction(cluster, conn):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (segment_max_rows = 20000)")
    # Segments small enough to be searched exhaustively (below the brute-force
    # threshold, before and after the merge): every answer must then be exact,
    # so a row missed or doubled at the switch cannot hide behind ANN recall.
    data = []
    for b in range(3):
        data.append(load(conn, 1300, seed=b, start_id=b * 1300))
        conn.execute("SELECT * FROM milvus_flush('items_idx')")
    conn.execute("DELETE FROM items WHERE id % 10 < 3")
    conn.execute("VACUUM items")
    # Searches run before, during (the merged segment is uploaded but not yet
    # published for half a second) and after the switch.
    with ExactSearcher(cluster, conn, near(np.concatenate(data), 20)) as searcher:
        conn.execute("SET milvus.debug_pause = 500")
        plans = conn.execute("SELECT plan, input_segments, output_segment FROM milvus_compact('items_idx')").fetchall()
        after = searcher.more_rounds(2)
        while not after():
            time.sleep(0.01)
    assert searcher.rounds > 0 and not searcher.failures, searcher.failures[:3]
    assert len(plans) == 1 and plans[0][1] == [1, 2, 3], plans
    assert [(s[1], s[3], s[4]) for s in segments(conn) if s[1] != "dropped"] == [("growing", 0, 0), ("flushed", 2730, 0)]
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == 2730


def test_vacuum_goes_on_while_a_merge_writes(cluster, conn):
    """A merge holds its inputs only to read them and to publish: a VACUUM
    meanwhile neither waits for it nor is undone by it (the rows it removes
    from the inputs are carried over as the merged segment's tombstones)."""
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (segment_max_rows = 20000)")
    for b in range(3):
        load(conn, 1300, seed=b, start_id=b * 1300)
        conn.execute("SELECT * FROM milvus_flush('items_idx')")
    conn.execute("DELETE FROM items WHERE id % 10 < 3")
    conn.execute("VACUUM items")
    # Deleted before the merge's transaction starts, so that VACUUM may
    # remove them while it runs (a transaction holds back what VACUUM may
    # remove, a merge's like any other).
    conn.execute("DELETE FROM items WHERE id % 10 = 5")
    merged = []

    def merge():
        with cluster.connect(conn.info.dbname) as c:
            c.execute("SET milvus.debug_pause = 8000")  # written, not yet published
            merged.extend(c.execute("SELECT input_segments, output_segment FROM milvus_compact('items_idx')").fetchall())

    job = threading.Thread(target=merge)
    job.start()
    deadline = time.time() + 60
    while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'").fetchone()[0] != 1:
        assert time.time() < deadline, "the merge never reached its commit"
        time.sleep(0.02)
    conn.execute("VACUUM items")
    held = conn.execute("SELECT count(*) FROM milvus_jobs WHERE kind = 'compact' AND state = 'running'").fetchone()[0]
    assert held == 1 and job.is_alive(), "VACUUM finished while the merge was still held"
    job.join(60)
    assert len(merged) == 1 and merged[0][0] == [1, 2, 3], merged
    live = [s for s in segments(conn) if s[1] == "flushed"]
    assert live == [(merged[0][1], "flushed", "ready", 2730, 390)], "the rows VACUUM removed are its tombstones"
    assert {s[4] for s in segments(conn) if s[1] == "dropped"} == {520}, "VACUUM wrote them to the inputs"
    ids = all_index_ids(conn)
    assert sorted(ids) == sorted(r[0] for r in conn.execute("SELECT id FROM items")), "exactly the table"
    assert not any(i % 10 == 5 for i in ids)


def test_gc_collects_a_dropped_index(cluster, conn):
    # One segment: its insert binlog and index file.
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 10000)")
    load(conn, 5000)
    conn.execute("SELECT * FROM milvus_flush('items_idx')")
    objects = objects_of(cluster, conn)
    index_oid = int(objects.name)
    assert len([p for p in objects.rglob("*") if p.is_file()]) == 2  # insert binlog + index file
    conn.execute("DROP INDEX items_idx")
    conn.execute("SET milvus.gc_grace_period = 0")
    rows = conn.execute("SELECT index::oid, deleted_objects FROM milvus_gc()").fetchall()
    assert (index_oid, 2) in rows, rows
    assert not [p for p in objects.rglob("*") if p.is_file()]
