"""The milvus index on a real cluster: planner choice, agreement with a
sequential scan for every metric, concurrent writers, and crash recovery of
the growing segment (kill -9 mid-insert)."""

import threading

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from helpers import all_index_ids, check_search_quality, clustered, index_ids, load, METRICS, near, run_writers


@pytest.mark.parametrize("opclass", METRICS)
def test_index_agrees_with_sequential_scan(conn, opclass):
    op = METRICS[opclass]
    first = load(conn, 10_000)
    conn.execute(f"CREATE INDEX items_idx ON items USING milvus (embedding {opclass})")
    second = load(conn, 10_000, seed=2, start_id=10_000)  # half inserted after CREATE INDEX
    conn.execute("ANALYZE items")
    queries = near(np.concatenate([first, second]), 50)

    plan = "\n".join(r[0] for r in conn.execute(
        f"EXPLAIN SELECT id FROM items ORDER BY embedding {op} %s LIMIT 10", (queries[0],)))
    assert "Index Scan using items_idx" in plan, plan

    check_search_quality(conn, op, queries)


def test_concurrent_inserts_all_found_exactly_once(cluster, conn):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)")
    q = clustered(1, seed=5)[0]

    def searcher(c, stop):
        while not stop.is_set():
            ids = index_ids(c, "<->", q, 10)
            assert len(ids) == len(set(ids))

    run_writers(cluster, conn.info.dbname, searcher)
    ids = all_index_ids(conn)
    assert len(ids) == 4000 and len(set(ids)) == 4000


def test_committed_rows_survive_kill_9_mid_insert(cluster, conn):
    """Invariant 1 for the growing segment: after kill -9 during inserts,
    every committed row is in the index exactly once, as in the heap."""
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)")
    dbname = conn.info.dbname
    committed = [[] for _ in range(3)]

    def writer(w):
        data = clustered(100_000, seed=w)
        try:
            with cluster.connect(dbname) as c:
                register_vector(c)
                for i in range(100_000):
                    key = w * 1_000_000 + i
                    c.execute("INSERT INTO items VALUES (%s, %s, %s)", (key, i % 10, data[i]))
                    committed[w].append(key)  # autocommit: acknowledged means committed
        except psycopg.OperationalError:
            pass  # the server went away mid-insert, as intended

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    import time
    deadline = time.time() + 30
    while sum(map(len, committed)) < 3000 and time.time() < deadline:
        time.sleep(0.05)
    cluster.crash()
    for t in threads:
        t.join()
    conn.close()
    cluster.restart()

    with cluster.connect(dbname) as c:
        register_vector(c)
        acknowledged = {k for keys in committed for k in keys}
        assert len(acknowledged) >= 3000
        heap = {r[0] for r in c.execute("SELECT id FROM items")}
        ids = all_index_ids(c)
        assert len(ids) == len(set(ids)), "a row returned twice"
        assert set(ids) == heap, "index and heap disagree after recovery"
        assert acknowledged <= heap, "a committed row was lost"
