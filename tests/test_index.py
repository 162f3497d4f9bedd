"""The milvus index on a real cluster: planner choice, agreement with a
sequential scan for every metric, concurrent writers, and crash recovery of
the growing segment (kill -9 mid-insert)."""

import threading
from pathlib import Path

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from conftest import DIMS

METRICS = {"vector_l2_ops": "<->", "vector_ip_ops": "<#>", "vector_cosine_ops": "<=>", "vector_l1_ops": "<+>"}


def clustered(n, seed, clusters=50):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-1, 1, (clusters, DIMS))
    return (centres[rng.integers(0, clusters, n)] + 0.1 * rng.standard_normal((n, DIMS))).astype(np.float32)


def near(rows, n, seed=42):
    """`n` queries as real ones are: stored rows plus a little noise (points
    far from every cluster are a different, harder workload, measured by the
    benchmarks)."""
    rng = np.random.default_rng(seed)
    return (rows[rng.integers(0, len(rows), n)] + 0.05 * rng.standard_normal((n, rows.shape[1]))).astype(np.float32)


def load(conn, n, seed=1, start_id=0):
    data = clustered(n, seed)
    with conn.cursor() as cur, cur.copy("COPY items (id, category, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "int4", "vector"])
        for i, v in enumerate(data):
            copy.write_row((start_id + i, (start_id + i) % 10, v))
    return data


def index_ids(conn, op, q, limit, where=""):
    return [r[0] for r in conn.execute(
        f"SELECT id FROM items {where} ORDER BY embedding {op} %s LIMIT {limit}", (q,)).fetchall()]


def all_index_ids(conn, op="<->"):
    """Every row the index can reach, through an exhaustive index scan."""
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL milvus.max_scan_tuples = 2147483647")
        plan = "\n".join(r[0] for r in conn.execute(
            f"EXPLAIN SELECT id FROM items ORDER BY embedding {op} %s LIMIT 100000000", (np.ones(DIMS, np.float32),)))
        assert "Index Scan using items_idx" in plan, plan
        return [r[0] for r in conn.execute(
            f"SELECT id FROM items ORDER BY embedding {op} %s LIMIT 100000000", (np.ones(DIMS, np.float32),))]


def objects_of(cluster, conn, index="items_idx"):
    """Where the embedded default store keeps `index`'s objects:
    <data directory>/pg_milvus/objects/<cluster>/<database oid>/<index oid>."""
    cluster_id, db_oid, index_oid = conn.execute(
        "SELECT lpad(to_hex(s.system_identifier), 16, '0'), d.oid, %s::regclass::oid"
        " FROM pg_control_system() s, pg_database d WHERE d.datname = current_database()", (index,)).fetchone()
    return Path(cluster.host) / "data" / "pg_milvus" / "objects" / cluster_id / str(db_oid) / str(index_oid)


class ExactSearcher:
    """A session searching `queries` in a loop on a thread while the test
    changes segments underneath, checking every answer against the exact top
    10 a sequential scan gives now (segments below the brute-force threshold
    make every index answer exact). Use as a context manager."""

    def __init__(self, cluster, conn, queries):
        self.truth = {}
        with conn.transaction():
            conn.execute("SET LOCAL enable_indexscan = off")
            for i, q in enumerate(queries):
                self.truth[i] = set(index_ids(conn, "<->", q, 10))
        self.failures, self.rounds, self._stop = [], 0, threading.Event()
        self._thread = threading.Thread(target=self._run, args=(cluster, conn.info.dbname, queries))

    def _run(self, cluster, dbname, queries):
        with cluster.connect(dbname) as c:
            register_vector(c)
            while not self._stop.is_set():
                for i, q in enumerate(queries):
                    got = index_ids(c, "<->", q, 10)
                    if len(got) != 10 or set(got) != self.truth[i]:
                        self.failures.append((i, sorted(got), sorted(self.truth[i])))
                self.rounds += 1

    def more_rounds(self, n):
        """Whether `n` more rounds ran since this was called (for wait loops)."""
        target = self.rounds + n
        return lambda: self.rounds >= target or not self._thread.is_alive()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *_):
        self._stop.set()
        self._thread.join()


def check_search_quality(conn, op, queries, minimum=0.95):
    """recall@10 of the index against a sequential scan, ten distinct rows per
    answer, and a filter keeping 10% of rows still filling the LIMIT."""
    hits = 0
    for q in queries:
        got = index_ids(conn, op, q, 10)
        with conn.transaction():
            conn.execute("SET LOCAL enable_indexscan = off")
            want = index_ids(conn, op, q, 10)
        assert len(got) == 10 and len(set(got)) == 10
        hits += len(set(got) & set(want))
    recall = hits / (10 * len(queries))
    assert recall >= minimum, f"recall@10 {recall}"
    got = index_ids(conn, op, queries[1], 10, where="WHERE category = 3")
    assert len(got) == 10 and all(i % 10 == 3 for i in got)


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


def run_writers(cluster, dbname, alongside, writers=4, rows=1000, batch=50):
    """Runs `writers` threads, each inserting `rows` rows (ids w * 1e6 + i) in
    transactions of `batch`, while `alongside(connection, stop)` runs in one
    more thread until they are done. Raises what any thread raised."""
    errors, stop = [], threading.Event()

    def writer(w):
        try:
            with cluster.connect(dbname) as c:
                register_vector(c)
                data = clustered(rows, seed=w)
                for i in range(0, rows, batch):
                    with c.transaction(), c.cursor() as cur:
                        cur.executemany("INSERT INTO items VALUES (%s, %s, %s)",
                                        [(w * 1_000_000 + i + j, j % 10, data[i + j]) for j in range(batch)])
        except Exception as e:  # a thread cannot fail the test itself
            errors.append(e)

    def other():
        try:
            with cluster.connect(dbname) as c:
                register_vector(c)
                alongside(c, stop)
        except Exception as e:
            errors.append(e)

    side = threading.Thread(target=other)
    side.start()
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    side.join()
    assert not errors, errors


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
