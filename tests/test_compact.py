"""Compaction and GC on a real cluster: searches stay right before, during
and after a compaction (a concurrent searcher checks every answer), and a
dropped index's objects are collected."""

import threading
import time
from pathlib import Path

import numpy as np
from pgvector.psycopg import register_vector

from test_flush import segments
from test_index import all_index_ids, index_ids, load, near


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
    dbname = conn.info.dbname
    queries = near(np.concatenate(data), 20)
    truth = {}
    with conn.transaction():
        conn.execute("SET LOCAL enable_indexscan = off")
        for i, q in enumerate(queries):
            truth[i] = set(index_ids(conn, "<->", q, 10))
    failures, stop, rounds = [], threading.Event(), [0]

    def searcher():
        with cluster.connect(dbname) as c:
            register_vector(c)
            while not stop.is_set():
                for i, q in enumerate(queries):
                    got = index_ids(c, "<->", q, 10)
                    if len(got) != 10 or set(got) != truth[i]:
                        failures.append((i, sorted(got), sorted(truth[i])))
                rounds[0] += 1

    t = threading.Thread(target=searcher)
    t.start()
    # Searches run before, during (the merged segment is uploaded but not yet
    # published for half a second) and after the switch.
    conn.execute("SET milvus.debug_commit_pause = 500")
    plans = conn.execute("SELECT plan, input_segments, output_segment FROM milvus_compact('items_idx')").fetchall()
    done = rounds[0]
    while rounds[0] < done + 2 and t.is_alive():
        time.sleep(0.01)
    stop.set()
    t.join()
    assert rounds[0] > 0 and not failures, failures[:3]
    assert len(plans) == 1 and plans[0][1] == [1, 2, 3], plans
    assert [(s[1], s[3], s[4]) for s in segments(conn) if s[1] != "dropped"] == [("growing", 0, 0), ("flushed", 2730, 0)]
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == 2730


def test_gc_collects_a_dropped_index(cluster, conn):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)")
    load(conn, 5000)
    conn.execute("SELECT * FROM milvus_flush('items_idx')")
    cluster_id, db_oid, index_oid = conn.execute(
        "SELECT lpad(to_hex(s.system_identifier), 16, '0'), d.oid, 'items_idx'::regclass::oid"
        " FROM pg_control_system() s, pg_database d WHERE d.datname = current_database()").fetchone()
    objects = Path(cluster.host) / "data" / "pg_milvus" / "objects" / cluster_id / str(db_oid) / str(index_oid)
    assert len([p for p in objects.rglob("*") if p.is_file()]) == 2  # insert binlog + index file
    conn.execute("DROP INDEX items_idx")
    conn.execute("SET milvus.gc_grace_period = 0")
    rows = conn.execute("SELECT index::oid, deleted_objects FROM milvus_gc()").fetchall()
    assert (index_oid, 2) in rows, rows
    assert not [p for p in objects.rglob("*") if p.is_file()]
