"""Compaction and GC on a real cluster: searches stay right before, during
and after a compaction (a concurrent searcher checks every answer), and a
dropped index's objects are collected."""

import threading
from pathlib import Path

import numpy as np
from pgvector.psycopg import register_vector

from test_flush import segments
from test_index import all_index_ids, index_ids, load


def test_searches_stay_right_during_compaction(cluster, conn):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (segment_max_rows = 20000)")
    data = []
    for b in range(3):
        data.append(load(conn, 5000, seed=b, start_id=b * 5000))
        conn.execute("SELECT * FROM milvus_flush('items_idx')")
    conn.execute("DELETE FROM items WHERE id % 10 < 3")
    conn.execute("VACUUM items")
    dbname = conn.info.dbname
    # Queries near the data, as real ones are: rows plus a little noise.
    rng = np.random.default_rng(42)
    rows = np.concatenate(data)
    queries = (rows[rng.integers(0, len(rows), 20)] + 0.05 * rng.standard_normal((20, rows.shape[1]))).astype(np.float32)
    truth = {}
    with conn.transaction():
        conn.execute("SET LOCAL enable_indexscan = off")
        for i, q in enumerate(queries):
            truth[i] = set(index_ids(conn, "<->", q, 10))
    failures, stop, rounds = [], threading.Event(), [0]

    def searcher():
        with cluster.connect(dbname) as c:
            register_vector(c)
            # Correctness under concurrency, not ANN quality: search wide.
            c.execute("SET milvus.ef_search = 400")
            while not stop.is_set():
                hits = 0
                for i, q in enumerate(queries):
                    got = index_ids(c, "<->", q, 10)
                    if len(got) != 10 or len(set(got)) != 10 or any(g % 10 < 3 for g in got):
                        failures.append(("bad answer", got))
                    hits += len(set(got) & truth[i])
                if hits < 0.98 * 10 * len(queries):
                    failures.append(("low recall", hits))
                rounds[0] += 1

    t = threading.Thread(target=searcher)
    t.start()
    plans = conn.execute("SELECT plan, input_segments, output_segment FROM milvus_compact('items_idx')").fetchall()
    stop.set()
    t.join()
    assert rounds[0] > 0 and not failures, failures[:3]
    assert len(plans) == 1 and plans[0][1] == [1, 2, 3], plans
    assert [(s[1], s[3], s[4]) for s in segments(conn) if s[1] != "dropped"] == [("growing", 0, 0), ("flushed", 10500, 0)]
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == 10500


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
