"""What the end-to-end tests share: data, loading, queries and their exact
answers, the `Milvus Scan` counters, segments and jobs, where objects and
the cache live, S3 settings, concurrent writers. Fixtures are in
conftest.py; no test module imports another."""

import threading
import time
from pathlib import Path

import boto3
import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from conftest import BUCKET, DIMS


# Data.

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


def literal(v):
    """A vector as SQL text that parses back to the same float4 values."""
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


# Loading.

def load(conn, n, seed=1, start_id=0):
    data = clustered(n, seed)
    with conn.cursor() as cur, cur.copy("COPY items (id, category, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "int4", "vector"])
        for i, v in enumerate(data):
            copy.write_row((start_id + i, (start_id + i) % 10, v))
    return data


def copy_rows(conn, table, rows, start):
    """COPYs `rows` into `table` (id, embedding) as text, ids from `start`."""
    with conn.cursor().copy(f"COPY {table} (id, embedding) FROM STDIN") as copy:
        for i, v in enumerate(rows):
            copy.write_row((start + i, literal(v)))


# Queries and their exact answers.

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


def top10(conn, table, op, q, off="enable_seqscan", column="embedding", cast="", where="", ef_search=None,
          distances=False):
    """The ten nearest rows of `table` to the parameter `q` by `op`, with the
    scan `off` names turned off: `enable_seqscan` for the index's answer,
    `enable_indexscan` for the exact one. Their ids, or (id, distance) with
    `distances` (then ties go by id)."""
    with conn.transaction():
        conn.execute(f"SET LOCAL {off} = off")
        if ef_search:
            conn.execute(f"SET LOCAL milvus.ef_search = {ef_search}")
        select, then = (f"id, {column} {op} %(q)s{cast}", ", id") if distances else ("id", "")
        rows = conn.execute(
            f"SELECT {select} FROM {table} {where} ORDER BY {column} {op} %(q)s{cast}{then} LIMIT 10", {"q": q}).fetchall()
    return rows if distances else [r[0] for r in rows]


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


def milvus_scan_line(conn, statement, index=None):
    """The `Milvus Scan` line EXPLAIN (ANALYZE) prints for `statement`: the
    one line, or `index`'s where the statement scans several."""
    lines = [r[0] for r in conn.execute("EXPLAIN (ANALYZE, COSTS OFF) " + statement)]
    found = [line for line in lines if line.startswith("Milvus Scan: " + (f"{index}:" if index else ""))]
    assert len(found) == 1, lines
    return found[0]


def milvus_scan(conn, statement, index=None):
    """The counters of the `Milvus Scan` line of `statement`, as integers
    (`scans`, `segments`, `page_rows`, `rounds`, `exact`, `offered`,
    `reranked`, ...)."""
    counters = milvus_scan_line(conn, statement, index).split(": ", 2)[2]
    return {key: int(value) for key, value in (kv.split("=") for kv in counters.split())}


# Segments and jobs.

def segments(conn, index="items_idx"):
    return conn.execute(
        "SELECT segment_id, state, index_state, rows, deleted_rows FROM milvus_segments(%s) ORDER BY 1", (index,)).fetchall()


def live_segments(conn, index="items_idx"):
    """`segments` but the dropped ones."""
    return [s for s in segments(conn, index) if s[1] != "dropped"]


def segment_rows(conn, index):
    """(state, rows) of `index`'s live segments, in id order."""
    return conn.execute(
        "SELECT state, rows FROM milvus_segments(%s) WHERE state <> 'dropped' ORDER BY segment_id", (index,)).fetchall()


def all_flushed(conn):
    """The live segments once every row is flushed (the growing segment
    empty), else None. A compaction's output gets a newer id than the
    growing segment, so the growing one is not always last."""
    segs = live_segments(conn)
    growing = [s for s in segs if s[1] == "growing"]
    done = len(growing) == 1 and growing[0][3] == 0 and all(s[1] in ("growing", "flushed") for s in segs)
    return segs if done else None


def jobs(conn, kind=None):
    where = f"WHERE kind = '{kind}'" if kind else ""
    return conn.execute(
        f"SELECT kind, segments, state, reason, rows, error FROM milvus_jobs {where} ORDER BY job_id").fetchall()


def wait_for(check, what, timeout=60):
    """Polls `check()` until it returns something truthy; returns that."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


# Objects, the cache, S3.

def objects_of(cluster, conn, index="items_idx"):
    """Where the embedded default store keeps `index`'s objects:
    <data directory>/pg_milvus/objects/<cluster>/<database oid>/<index oid>."""
    cluster_id, db_oid, index_oid = conn.execute(
        "SELECT lpad(to_hex(s.system_identifier), 16, '0'), d.oid, %s::regclass::oid"
        " FROM pg_control_system() s, pg_database d WHERE d.datname = current_database()", (index,)).fetchone()
    return Path(cluster.host) / "data" / "pg_milvus" / "objects" / cluster_id / str(db_oid) / str(index_oid)


def clear_local_cache(cluster):
    """Empties the local segment cache, as on a fresh replica."""
    objects = Path(cluster.host) / "data" / "pg_milvus" / "pgsql_tmp_cache" / "objects"
    for p in objects.iterdir():
        p.unlink()


def use_s3(conn, s3, prefix):
    conn.execute(f"SET milvus.storage_url = 's3://{BUCKET}/{prefix}'")
    for name, value in [("s3_endpoint", s3.endpoint), ("s3_region", "us-east-1"),
                        ("s3_access_key_id", "testing"), ("s3_secret_access_key", "testing-secret")]:
        conn.execute(f"SET milvus.{name} = '{value}'")
    conn.execute("SET milvus.s3_allow_http = on")
    conn.execute("SET milvus.s3_path_style = on")


def connect_s3(cluster, dbname, s3, prefix):
    c = cluster.connect(dbname)
    register_vector(c)
    use_s3(c, s3, prefix)
    return c


def client(s3):
    return boto3.client("s3", endpoint_url=s3.endpoint, region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing-secret")


def bucket_keys(s3):
    pages = client(s3).get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
    return sorted(o["Key"] for p in pages for o in p.get("Contents", []))


# Writers beside the test.

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


def writers(cluster, dbname, stop, committed, count=3, insert="INSERT INTO items VALUES (%s, 0, %s)",
            batch=lambda w, n: clustered(20, seed=w)):
    """Sessions inserting batches of 20 rows (`batch(writer, rows written
    so far)`, by `insert` with each row's id first), recording the ids
    whose COMMIT returned; a batch cut by the crash may or may not have
    committed."""
    def run(w):
        n = 0
        try:
            with cluster.connect(dbname) as c:
                register_vector(c)
                while not stop.is_set():
                    ids = [1_000_000 * (w + 1) + n + i for i in range(20)]
                    with c.transaction(), c.cursor() as cur:
                        cur.executemany(insert, list(zip(ids, batch(w, n))))
                    committed.update(ids)
                    n += 20
        except psycopg.Error:
            pass  # the crash
    threads = [threading.Thread(target=run, args=(w,)) for w in range(count)]
    for t in threads:
        t.start()
    return threads
