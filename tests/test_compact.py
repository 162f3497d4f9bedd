"""Compaction and GC on a real cluster: searches stay right before, during
and after a compaction (a concurrent searcher checks every answer), and a
dropped index's objects are collected."""

import time

import numpy as np

from test_flush import segments
from test_index import ExactSearcher, all_index_ids, load, near, objects_of


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
