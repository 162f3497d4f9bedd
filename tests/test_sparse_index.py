"""A milvus index on `sparsevec` (sparsevec_l2_ops, _ip_ops, _cosine_ops,
_l1_ops): rows of any width in the growing segment's pages, WAL-logged as
dense rows are; each sealed segment an inverted index whose top k is exact
(under L1, which has none, every row is read). So the index
answers what a sequential scan answers, row for row, from growing, flushed
and merged segments, after deletes, across kill -9 and on a standby."""

import threading
import time

import numpy as np
import psycopg
import pytest
from pgvector import SparseVector
from pgvector.psycopg import register_vector

from helpers import segment_rows, top10, writers


VOCAB = 3000
METRICS = {"l2_ops": "<->", "ip_ops": "<#>", "cosine_ops": "<=>", "l1_ops": "<+>"}
ZIPF = 1.0 / np.arange(1, VOCAB + 1)
ZIPF /= ZIPF.sum()


def sparse_rows(rng, n, nnz):
    """SPLADE-like rows: Zipf-distributed terms, positive weights."""
    rows = []
    for _ in range(n):
        terms = rng.choice(VOCAB, size=nnz, replace=False, p=ZIPF)
        weights = (rng.exponential(0.5, nnz) + 0.01).astype(np.float32)
        rows.append(SparseVector(dict(zip(terms.tolist(), weights.tolist())), VOCAB))
    return rows


def load(conn, rows, start):
    with conn.cursor().copy("COPY s (id, terms) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "sparsevec"])
        for i, v in enumerate(rows):
            copy.write_row((start + i, v))


def assert_exact(conn, op, queries):
    """Every query answered by the index as by a sequential scan: the same
    distances in the same order, and the same rows wherever the distances
    are not tied at the cut."""
    for q in queries:
        seq, idx = top10(conn, "s", op, q, off="enable_seqscan", column="terms", distances=True), top10(conn, "s", op, q, off="enable_indexscan", column="terms", distances=True)
        assert [d for _, d in idx] == pytest.approx([d for _, d in seq], rel=1e-6, abs=1e-6), (op, q)
        tie = seq[-1][1]
        assert {i for i, d in idx if d != tie} == {i for i, d in seq if d != tie}, (op, q)


@pytest.fixture
def data(db):
    register_vector(db)
    db.execute(f"CREATE TABLE s (id bigint PRIMARY KEY, terms sparsevec({VOCAB}))")
    rng = np.random.default_rng(29)
    rows = sparse_rows(rng, 4300, 40)
    load(db, rows[:4000], 0)
    queries = sparse_rows(rng, 12, 8)
    return db, rows, queries


@pytest.mark.parametrize("suffix", METRICS)
def test_every_metric_answers_exactly_as_a_sequential_scan(data, suffix):
    conn, rows, queries = data
    op = METRICS[suffix]
    conn.execute(f"CREATE INDEX s_idx ON s USING milvus (terms sparsevec_{suffix})")
    load(conn, rows[4000:], 4000)  # growing rows, in pages
    assert segment_rows(conn, "s_idx") == [("flushed", 4000), ("growing", 300)]
    plan = "\n".join(r[0] for r in conn.execute(
        f"EXPLAIN SELECT id FROM s ORDER BY terms {op} %s LIMIT 10", (queries[0],)))
    assert "Index Scan using s_idx" in plan, plan
    # At ef_search 1 too: an inverted segment's answer does not depend on it.
    conn.execute("SET milvus.ef_search = 1")
    assert_exact(conn, op, queries)
    conn.execute("RESET milvus.ef_search")
    # A row is its own nearest under L2, cosine and L1, from pages and segments.
    if suffix != "ip_ops":
        with conn.transaction():
            conn.execute("SET LOCAL enable_seqscan = off")
            for i in (7, 3999, 4000, 4299):
                assert conn.execute(f"SELECT id FROM s ORDER BY terms {op} %s LIMIT 1", (rows[i],)).fetchone() == (i,)
    # A filter the index cannot see is filled as a sequential scan fills it.
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        got = [r[0] for r in conn.execute(
            f"SELECT id FROM s WHERE id %% 97 = 0 ORDER BY terms {op} %s LIMIT 5", (queries[1],))]
    with conn.transaction():
        conn.execute("SET LOCAL enable_indexscan = off")
        want = [r[0] for r in conn.execute(
            f"SELECT id FROM s WHERE id %% 97 = 0 ORDER BY terms {op} %s LIMIT 5", (queries[1],))]
    assert got == want
    # milvus_recall says so too.
    query = f"SELECT id FROM s ORDER BY terms {op} (SELECT terms FROM s WHERE id = 5) LIMIT 10"
    assert conn.execute("SELECT milvus_recall(%s)", (query,)).fetchone() == (1.0,)


def test_flush_delete_merge_and_crash(cluster, data):
    conn, rows, queries = data
    dbname = conn.info.dbname
    conn.execute("CREATE INDEX s_idx ON s USING milvus (terms sparsevec_ip_ops) WITH (segment_max_rows = 2000)")
    assert segment_rows(conn, "s_idx") == [("flushed", 2000), ("flushed", 2000), ("growing", 0)]
    # Growing rows, flushed by hand into a third segment.
    load(conn, rows[4000:4200], 4000)
    conn.execute("SELECT milvus_flush('s_idx')")
    assert [r for r in segment_rows(conn, "s_idx") if r[0] == "flushed"][-1] == ("flushed", 200)
    kinds = conn.execute("SELECT DISTINCT index_state FROM milvus_segments('s_idx') WHERE state = 'flushed'").fetchall()
    assert kinds == [("ready",)], "every sealed segment has its inverted index"
    assert_exact(conn, "<#>", queries)

    conn.execute("DELETE FROM s WHERE id % 10 < 3")
    conn.execute("VACUUM s")
    assert_exact(conn, "<#>", queries)
    rewritten = conn.execute("SELECT input_segments FROM milvus_compact('s_idx')").fetchall()
    assert {1, 2} <= {s for r in rewritten for s in r[0]}, "30% deleted: both large segments are rewritten"
    flushed = conn.execute(
        "SELECT sum(rows), sum(deleted_rows) FROM milvus_segments('s_idx') WHERE state = 'flushed'").fetchone()
    assert flushed == (2940, 0)
    assert_exact(conn, "<#>", queries)

    # Growing sparse rows are WAL-logged like any: durable across kill -9.
    load(conn, rows[4200:], 4200)
    conn.close()
    cluster.crash()
    cluster.restart()
    conn = cluster.connect(dbname)
    register_vector(conn)
    assert [s for s in segment_rows(conn, "s_idx") if s[0] == "growing"] == [("growing", 100)]
    assert_exact(conn, "<#>", queries)
    # Every live row, each once: an index scan with no LIMIT runs to its end.
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        got = [r[0] for r in conn.execute("SELECT id FROM s ORDER BY terms <#> %s", (queries[0],))]
    assert sorted(got) == [r[0] for r in conn.execute("SELECT id FROM s ORDER BY id")]
    conn.close()


def test_rows_the_index_cannot_take_are_refused_and_nothing_is_lost(data):
    conn, rows, _ = data
    conn.execute("CREATE INDEX s_idx ON s USING milvus (terms sparsevec_l2_ops)")
    wide = SparseVector({i: 1.0 for i in range(1001)}, VOCAB)
    with pytest.raises(Exception, match="sparsevec cannot have more than 1000 non-zero elements for milvus index"):
        conn.execute("INSERT INTO s VALUES (-1, %s)", (wide,))
    conn.rollback() if conn.info.transaction_status else None
    at_limit = SparseVector({i: 1.0 for i in range(1000)}, VOCAB)
    conn.execute("INSERT INTO s VALUES (-2, %s)", (at_limit,))
    with pytest.raises(Exception, match="expected 3000 dimensions, not 5"):
        conn.execute("INSERT INTO s VALUES (-3, '{1:1}/5')")
    with pytest.raises(Exception, match="different sparsevec dimensions 3000 and 5"):
        with conn.transaction():
            conn.execute("SET LOCAL enable_seqscan = off")
            conn.execute("SELECT id FROM s ORDER BY terms <-> '{1:1}/5' LIMIT 1").fetchall()
    # The empty row has a distance; a NULL row none, and comes last, as a
    # sort puts it.
    conn.execute(f"INSERT INTO s VALUES (-4, '{{}}/{VOCAB}'), (-5, NULL)")
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        ids = [r[0] for r in conn.execute("SELECT id FROM s ORDER BY terms <-> %s", (rows[0],))]
    assert sorted(ids) == [-5, -4, -2] + list(range(4000)) and (ids[0], ids[-1]) == (0, -5)


def test_a_table_wider_than_maintenance_work_mem_is_cut_by_bytes(data):
    """Sparse rows vary in width: CREATE INDEX cuts segments by the bytes
    it gathered, not by a row size."""
    conn, _, _ = data
    conn.execute("SET maintenance_work_mem = '1MB'")
    conn.execute("CREATE INDEX s_idx ON s USING milvus (terms sparsevec_l2_ops) WITH (segment_max_rows = 100000)")
    conn.execute("RESET maintenance_work_mem")
    flushed = [r for _, r in segment_rows(conn, "s_idx")][:-1]
    # A row of 40 entries takes 8 (key) + 12 + 320 (words) + 8 (start) bytes.
    assert sum(flushed) == 4000 and max(flushed) == 1048576 // 348, flushed


def test_kill_9_mid_insert_loses_no_committed_row(cluster, data):
    """Writers insert rows of 1 to 200 entries in transactions of 20 while
    one insert is held with its page write in the WAL and its transaction
    open; kill -9. After recovery the index holds exactly the table: every
    committed row once, the open transaction's row nowhere."""
    conn, rows, queries = data
    dbname = conn.info.dbname
    conn.execute("CREATE INDEX s_idx ON s USING milvus (terms sparsevec_l2_ops)")
    stop, committed = threading.Event(), set()
    rngs = [np.random.default_rng(100 + w) for w in range(3)]

    def hold():
        try:
            with cluster.connect(dbname) as c:
                register_vector(c)
                c.execute("SET milvus.debug_pause_at = insert")
                c.execute("SET milvus.debug_pause = 600000")
                c.execute("BEGIN")
                c.execute("INSERT INTO s VALUES (-9, %s)", (rows[0],))
        except psycopg.Error:
            pass

    held = threading.Thread(target=hold)
    held.start()
    threads = writers(cluster, dbname, stop, committed, insert="INSERT INTO s VALUES (%s, %s)",
                      batch=lambda w, n: sparse_rows(rngs[w], 20, 1 + n % 200)) + [held]
    deadline = time.time() + 60
    while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'").fetchone()[0] != 1:
        assert time.time() < deadline, "the held insert never got to its pause"
        time.sleep(0.02)
    time.sleep(1.0)
    conn.close()
    cluster.crash()
    stop.set()
    for t in threads:
        t.join(60)
    cluster.restart()
    conn = cluster.connect(dbname)
    register_vector(conn)
    heap = {r[0] for r in conn.execute("SELECT id FROM s")}
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        ids = [r[0] for r in conn.execute("SELECT id FROM s ORDER BY terms <-> %s", (queries[0],))]
    assert len(committed) > 100, "the writers were writing"
    assert committed <= set(ids) and len(ids) == len(set(ids)) and set(ids) == heap
    assert -9 not in heap
    assert_exact(conn, "<->", queries)
