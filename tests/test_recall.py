"""milvus_recall() on a real cluster: the recall it reports for a query is
the recall a client measures for the same query, index answer against the
exact top k, at low and high ef_search, with and without a filter, over
flushed segments and growing rows."""

import numpy as np
import pytest

from conftest import DIMS
from helpers import literal


def load_uniform(conn, n, seed, start_id=0):
    """Rows without clusters: for queries away from the rows, a sparse graph
    (m = 4) searched at a low ef_search misses some of the nearest."""
    data = np.random.default_rng(seed).standard_normal((n, DIMS)).astype(np.float32)
    with conn.cursor() as cur, cur.copy("COPY items (id, category, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "int4", "vector"])
        for i, v in enumerate(data):
            copy.write_row((start_id + i, (start_id + i) % 10, v))
    return data


def measured(conn, query, exact_ids):
    """What a client measures: the index's answer (sequential scans off) against
    the exact ids."""
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        got = [r[0] for r in conn.execute(query)]
    return len(set(got) & set(exact_ids)) / len(exact_ids)


def exact_top(rows, ids, q, k):
    d = ((rows - q) ** 2).sum(axis=1)
    return [int(ids[i]) for i in np.argsort(d, kind="stable")[:k]]


def test_recall_is_what_a_client_measures(conn):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (m = 4, growing_max_rows = 5000)")
    # Two flushed segments, each with its graph (a flush gives one to the
    # only segment it seals), and growing rows.
    parts = []
    for part in range(3):
        parts.append(load_uniform(conn, 4000 if part < 2 else 300, seed=part, start_id=4000 * part))
        if part < 2:
            conn.execute("SELECT * FROM milvus_flush('items_idx')")
    rows = np.concatenate(parts)
    states = conn.execute("SELECT state, index_state FROM milvus_segments('items_idx') ORDER BY segment_id").fetchall()
    assert states == [("flushed", "ready"), ("flushed", "ready"), ("growing", "none")], states
    ids = np.arange(len(rows))
    queries = np.random.default_rng(3).standard_normal((20, DIMS)).astype(np.float32)

    means = {}
    for ef in (1, 200):
        conn.execute(f"SET milvus.ef_search = {ef}")
        reported = []
        for q in queries:
            query = f"SELECT id FROM items ORDER BY embedding <-> '{literal(q)}' LIMIT 10"
            recall = conn.execute("SELECT milvus_recall(%s)", (query,)).fetchone()[0]
            assert recall == pytest.approx(measured(conn, query, exact_top(rows, ids, q, 10)), abs=1e-6), query
            reported.append(recall)
        means[ef] = np.mean(reported)
    assert means[1] < 1.0, "ef_search 1 misses rows: the function sees the index's own answer"
    assert means[200] > means[1]

    # A filter applies to both answers alike.
    conn.execute("SET milvus.ef_search = 1")
    keep = ids % 10 == 3
    for q in queries[:5]:
        query = f"SELECT id FROM items WHERE category = 3 ORDER BY embedding <-> '{literal(q)}' LIMIT 10"
        want = exact_top(rows[keep], ids[keep], q, 10)
        recall = conn.execute("SELECT milvus_recall(%s)", (query,)).fetchone()[0]
        assert recall == pytest.approx(measured(conn, query, want), abs=1e-6), query
    assert conn.execute("SHOW enable_seqscan").fetchone()[0] == "on"
