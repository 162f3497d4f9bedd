"""A collection sharded over three servers with Postgres' own engines
(docs/scale-out.md): a hash-partitioned parent on a coordinator whose
partitions are postgres_fdw foreign tables, one per shard, each shard with
its milvus index. Checked against one server holding every row: the same
top 10 (exact ids) for every metric, through the parent and through the
per-shard query that pushes LIMIT to each shard; inserts routed; deletes
honoured; a filtered query that fills its LIMIT; a shard that is down is an
error, never a partial answer; a standby of a shard answers as its primary.

The shards' segments stay below the brute-force size, so both sides answer
exactly and any difference is a real one."""

import subprocess
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest

from conftest import CLUSTER, Cluster
from helpers import literal, top10


HELPER = Path(__file__).resolve().parent.parent / "docs" / "scale-out" / "sharded_search.sql"
SHARDS = 3
DIMS = 16
ROWS = 900
METRICS = {"vector_l2_ops": "<->", "vector_ip_ops": "<#>", "vector_cosine_ops": "<=>", "vector_l1_ops": "<+>"}


@pytest.fixture(scope="module")
def servers():
    shards = [Cluster(f"shard{i}", ["milvus.max_workers = 0"]) for i in range(SHARDS)]
    coordinator = Cluster("coordinator", ["milvus.max_workers = 0"])
    with coordinator.connect() as c:
        c.execute("CREATE EXTENSION pg_milvus")
        c.execute("CREATE EXTENSION postgres_fdw")
        c.execute("CREATE EXTENSION dblink")
        c.execute(HELPER.read_text())
        for i, s in enumerate(shards):
            c.execute(
                f"CREATE SERVER shard{i} FOREIGN DATA WRAPPER postgres_fdw OPTIONS "
                f"(host '{s.host}', port '{s.port}', dbname 'postgres', extensions 'pg_milvus', "
                f"async_capable 'true', fetch_size '100')")
            c.execute(f"CREATE USER MAPPING FOR postgres SERVER shard{i} OPTIONS (user 'postgres')")
    for s in shards:
        with s.connect() as c:
            c.execute("CREATE EXTENSION pg_milvus")
    yield coordinator, shards
    coordinator.stop()
    for s in shards:
        s.stop()


def nearest(c, table, op, q, where=""):
    """The index's top 10 of `table` on this server, `q` sent as text."""
    return top10(c, table, op, literal(q), cast="::vector", where=where)


def create(coordinator, shards, opclass):
    """The sharded `items` and the one-server `single`, same rows."""
    for s in shards:
        with s.connect() as c:
            c.execute("DROP TABLE IF EXISTS items")
            c.execute(f"CREATE TABLE items (id bigint PRIMARY KEY, category int, embedding vector({DIMS}))")
            c.execute(f"CREATE INDEX items_idx ON items USING milvus (embedding {opclass})")
    c = coordinator.connect()
    c.execute("DROP TABLE IF EXISTS items, single")
    c.execute(f"CREATE TABLE items (id bigint, category int, embedding vector({DIMS})) PARTITION BY HASH (id)")
    for i in range(SHARDS):
        c.execute(f"CREATE FOREIGN TABLE items_{i} PARTITION OF items FOR VALUES WITH (MODULUS {SHARDS}, "
                  f"REMAINDER {i}) SERVER shard{i} OPTIONS (table_name 'items')")
    c.execute(f"CREATE TABLE single (id bigint PRIMARY KEY, category int, embedding vector({DIMS}))")
    c.execute(f"CREATE INDEX single_idx ON single USING milvus (embedding {opclass})")
    rng = np.random.default_rng(len(opclass))
    rows = rng.standard_normal((ROWS, DIMS)).astype(np.float32)
    for table in ("items", "single"):  # through the parent: routed to the shards
        with c.cursor() as cur:
            cur.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s::vector)",
                            [(i, i % 10, literal(v)) for i, v in enumerate(rows)])
    return c, rows


def per_shard_sql(op):
    """The shape of docs/scale-out.md that pushes LIMIT to every shard and
    asks them all at once (a materialized CTE: an Append, whose foreign
    scans run asynchronously, where a Merge Append's would not)."""
    parts = " UNION ALL ".join(
        f"(SELECT id, embedding {op} %(q)s::vector AS d FROM items_{i} ORDER BY d LIMIT 10)" for i in range(SHARDS))
    return f"WITH near AS MATERIALIZED ({parts}) SELECT id FROM near ORDER BY d LIMIT 10"


def per_shard(c, op, q):
    return [r[0] for r in c.execute(per_shard_sql(op), {"q": literal(q)})]


def helper(c, op, q):
    """docs/scale-out/sharded_search.sql: each shard's (id, distance) only."""
    remote = f"SELECT id, embedding {op} %1$s::vector AS distance FROM items ORDER BY distance LIMIT %2$s"
    shards = [f"shard{i}" for i in range(SHARDS)]
    return [r[0] for r in c.execute("SELECT id FROM sharded_search(%s::vector, 10, %s, %s)", (literal(q), shards, remote))]


@pytest.mark.parametrize("opclass", METRICS)
def test_sharded_answers_are_one_servers(servers, opclass):
    coordinator, shards = servers
    op = METRICS[opclass]
    c, rows = create(coordinator, shards, opclass)
    # Routed: every shard holds its part, together all of them.
    counts = []
    for s in shards:
        with s.connect() as sc:
            counts.append(sc.execute("SELECT count(*) FROM items").fetchone()[0])
    assert sum(counts) == ROWS and min(counts) > ROWS // SHARDS // 2, counts
    queries = rows[:20] + np.float32(0.05)
    for q in queries:
        want = nearest(c, "single", op, q)
        assert nearest(c, "items", op, q) == want
        assert per_shard(c, op, q) == want
        assert helper(c, op, q) == want
    plan = "\n".join(r[0] for r in c.execute(
        f"EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM items ORDER BY embedding {op} %s::vector LIMIT 10",
        (literal(queries[0]),)))
    assert plan.count("Foreign Scan") == SHARDS and "ORDER BY (embedding OPERATOR(public." in plan, plan
    plan = "\n".join(r[0] for r in c.execute(f"EXPLAIN (VERBOSE, COSTS OFF) {per_shard_sql(op)}", {"q": literal(queries[0])}))
    assert plan.count("Async Foreign Scan") == SHARDS and plan.count("LIMIT 10::bigint") == SHARDS, plan
    c.close()


def test_deletes_filters_a_shard_down_and_a_standby(servers):
    coordinator, shards = servers
    c, rows = create(coordinator, shards, "vector_l2_ops")
    queries = rows[:10] + np.float32(0.05)
    # Deletes through the parent reach the shards; each shard's VACUUM
    # makes its index forget them.
    for table in ("items", "single"):
        c.execute(f"DELETE FROM {table} WHERE id % 5 = 1")
    c.execute("VACUUM single")
    for s in shards:
        with s.connect() as sc:
            sc.execute("VACUUM items")
    # Maintenance from the coordinator, each shard's through dblink.
    flushed = c.execute("SELECT s, n FROM unnest(ARRAY['shard0', 'shard1', 'shard2']) AS s, "
                        "LATERAL dblink(s, 'SELECT count(*) FROM milvus_flush(''items_idx'')') AS t(n bigint)").fetchall()
    assert [n for _, n in flushed] == [1, 1, 1], flushed
    for s in shards:
        with s.connect() as sc:
            assert [r[0] for r in sc.execute("SELECT state FROM milvus_segments('items_idx') ORDER BY 1")] == [
                "flushed", "growing"]
    for q in queries:
        got = nearest(c, "items", "<->", q)
        assert got == nearest(c, "single", "<->", q) and not any(i % 5 == 1 for i in got)
        # A filter keeping a tenth of the rows still fills its LIMIT.
        filtered = nearest(c, "items", "<->", q, "WHERE category = 3")
        assert len(filtered) == 10 and filtered == nearest(c, "single", "<->", q, "WHERE category = 3")

    # A standby of a shard answers as its primary does.
    standby = Cluster.standby_of("shard0_standby", shards[0])
    try:
        with shards[0].connect() as p, standby.connect() as s:
            lsn = p.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
            deadline = time.time() + 60
            while not s.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:
                assert time.time() < deadline, "the standby did not catch up"
                time.sleep(0.1)
            for q in queries:
                assert nearest(s, "items", "<->", q) == nearest(p, "items", "<->", q)
    finally:
        subprocess.run([CLUSTER, "stop", "shard0_standby"], check=True)

    # A shard that is down is an error naming it, never a partial answer.
    shards[2].stop()
    try:
        with pytest.raises(psycopg.OperationalError, match="shard2|connect"):
            nearest(c, "items", "<->", queries[0])
        with pytest.raises(psycopg.Error, match="shard2|connect"):
            helper(c, "<->", queries[0])
    finally:
        shards[2].restart()
    c.close()
    c = coordinator.connect()
    assert nearest(c, "items", "<->", queries[0]) == nearest(c, "single", "<->", queries[0])
    assert helper(c, "<->", queries[0]) == nearest(c, "single", "<->", queries[0]), "the helper reconnects"
    c.close()
