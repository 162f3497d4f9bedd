"""Indexes over the 2,034 dimensions one page holds (4,068 of halfvec): 3,072
(OpenAI's text-embedding-3-large) and the types' 16,000. Growing rows wider
than a page go in chunks of a page each, WAL-logged like any row: durable at
commit, replayed after kill -9 (an insert the crash cut short leaves nothing
a search returns, and VACUUM takes its pages back); flushed segments have no
limit."""

import threading
import time

import numpy as np
import psycopg
import pytest
from pgvector import HalfVector
from pgvector.psycopg import register_vector

from helpers import segment_rows, top10

BATCH = 20


def value(v, type_):
    """A parameter of the column's type: numpy arrays go as `vector`."""
    return HalfVector(v) if type_ == "halfvec" else v


def insert(conn, rows, start, type_):
    for b in range(0, len(rows), BATCH):
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO wide (id, embedding) VALUES (%s, %s)",
                            [(start + b + i, value(v, type_)) for i, v in enumerate(rows[b:b + BATCH])])


def every_id(conn, type_):
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL milvus.max_scan_tuples = 2147483647")
        q = np.zeros(conn.execute("SELECT vector_dims(embedding) FROM wide LIMIT 1").fetchone()[0], np.float32)
        return [r[0] for r in conn.execute(
            "SELECT id FROM wide ORDER BY embedding <-> %s LIMIT 100000", (value(q, type_),))]


@pytest.mark.parametrize("type_,dims", [("vector", 3072), ("vector", 16000), ("halfvec", 16000)])
def test_wide_rows_are_indexed_flushed_searched_and_survive_a_crash(cluster, db, type_, dims):
    conn, dbname = db, db.info.dbname
    register_vector(conn)
    conn.execute(f"CREATE TABLE wide (id bigint PRIMARY KEY, embedding {type_}({dims}))")
    conn.execute(
        f"CREATE INDEX wide_idx ON wide USING milvus (embedding {type_}_l2_ops) WITH (growing_max_rows = 100000)")
    n = 120 if dims == 3072 else 40
    rng = np.random.default_rng(dims)
    rows = rng.standard_normal((2 * n, dims)).astype(np.float32)
    insert(conn, rows[:n], 0, type_)
    conn.execute("SELECT * FROM milvus_flush('wide_idx')")
    insert(conn, rows[n:], n, type_)
    assert segment_rows(conn, "wide_idx") == [("flushed", n), ("growing", n)]
    queries = rows[rng.integers(0, 2 * n, 5)] + np.float32(0.01)
    # Segments under the brute-force size: the index answers exactly.
    for q in queries:
        assert top10(conn, "wide", "<->", value(q, type_), off="enable_seqscan") == top10(conn, "wide", "<->", value(q, type_), off="enable_indexscan")

    # A session inserting wide rows in a transaction that never commits,
    # killed with the server while it writes their chunks.
    started = threading.Event()

    def uncommitted():
        try:
            with cluster.connect(dbname) as c:
                register_vector(c)
                with c.transaction():
                    for i in range(100_000):
                        c.execute("INSERT INTO wide (id, embedding) VALUES (%s, %s)", (10_000_000 + i, value(rows[i % n], type_)))
                        started.set()
        except psycopg.OperationalError:
            pass

    writer = threading.Thread(target=uncommitted)
    writer.start()
    assert started.wait(30)
    time.sleep(0.5)
    cluster.crash()
    writer.join(60)
    conn.close()
    cluster.restart()
    conn = cluster.connect(dbname)
    register_vector(conn)

    # Every committed row, once; nothing of the insert the crash cut short.
    assert sorted(every_id(conn, type_)) == list(range(2 * n))
    for q in queries:
        assert top10(conn, "wide", "<->", value(q, type_), off="enable_seqscan") == top10(conn, "wide", "<->", value(q, type_), off="enable_indexscan")
    # The aborted rows (whole, and the one cut short) stay in pages until
    # VACUUM, as any index's entries of dead tuples do.
    assert segment_rows(conn, "wide_idx")[1][1] > n
    conn.execute("VACUUM wide")
    assert segment_rows(conn, "wide_idx") == [("flushed", n), ("growing", n)]
    pages = dict(conn.execute("SELECT kind, pages FROM milvus_index_pages('wide_idx')").fetchall())
    assert pages["unreferenced"] == 0 and pages["released"] == 0, pages
    # The growing rows flush like any; the answers stay exact.
    conn.execute("SELECT * FROM milvus_flush('wide_idx')")
    assert segment_rows(conn, "wide_idx") == [("flushed", n), ("flushed", n), ("growing", 0)]
    for q in queries:
        assert top10(conn, "wide", "<->", value(q, type_), off="enable_seqscan") == top10(conn, "wide", "<->", value(q, type_), off="enable_indexscan")
    conn.close()
