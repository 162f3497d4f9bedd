"""Copies of an index: a database made from a template, a clone promoted
beside its origin on a shared store. Each copy adopts what its manifest
references under its own prefix at its first job, so neither side's
compaction and garbage collection can take the other's objects."""

import subprocess
from pathlib import Path

from pgvector.psycopg import register_vector

from conftest import Cluster, DIMS, PG_BIN, replayed
from helpers import all_index_ids, clear_local_cache, index_ids, load, near


PG_CTL = str(PG_BIN / "pg_ctl")


def truth(conn):
    with conn.transaction():
        conn.execute("SET LOCAL enable_indexscan = off")
        return sorted(r[0] for r in conn.execute("SELECT id FROM items"))


def seq_ids(conn, q):
    with conn.transaction():
        conn.execute("SET LOCAL enable_indexscan = off")
        return [r[0] for r in conn.execute("SELECT id FROM items ORDER BY embedding <-> %s LIMIT 10", (q,))]


def make_items(conn, n):
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_milvus")
    register_vector(conn)
    conn.execute(f"CREATE TABLE items (id bigint PRIMARY KEY, category int, embedding vector({DIMS}))")
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 1000)")
    rows = load(conn, n)
    conn.execute("SELECT milvus_flush('items_idx')")
    return rows


def test_a_template_copy_keeps_its_index_when_the_origin_collects_and_goes(cluster):
    with cluster.connect() as admin:
        for name in ["copy_origin", "copy_copy"]:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute("CREATE DATABASE copy_origin")
    try:
        with cluster.connect("copy_origin") as o:
            rows = make_items(o, 3000)
        with cluster.connect() as admin:
            admin.execute("CREATE DATABASE copy_copy TEMPLATE copy_origin")
        with cluster.connect("copy_copy") as c:
            # Its first job adopts: every object it references is its own.
            [(referenced, error)] = c.execute("SELECT referenced_objects, error FROM milvus_gc('items_idx')").fetchall()
            objects = c.execute("SELECT count(*) FROM milvus_verify('items_idx')").fetchone()[0]
            assert error is None and referenced == objects > 0
        with cluster.connect("copy_origin") as o:
            # The origin rewrites and collects everything it had.
            o.execute("SET milvus.gc_grace_period = 0")
            o.execute("DELETE FROM items WHERE id < 1500")
            o.execute("VACUUM items")
            o.execute("SELECT milvus_compact('items_idx')")
            assert o.execute("SELECT sum(deleted_objects) FROM milvus_gc('items_idx')").fetchone()[0] > 0
        with cluster.connect() as admin:
            admin.execute("DROP DATABASE copy_origin")
        clear_local_cache(cluster)
        with cluster.connect("copy_copy") as c:
            register_vector(c)
            c.execute("SET milvus.gc_grace_period = 0")
            c.execute("SELECT milvus_gc()")  # the dropped database's objects go
            assert sorted(all_index_ids(c)) == truth(c) == list(range(3000))
            for q in near(rows, 5):
                assert index_ids(c, "<->", q, 10) == seq_ids(c, q)
            assert c.execute("SELECT count(*) FROM milvus_verify('items_idx') WHERE error IS NOT NULL").fetchone() == (0,)
    finally:
        with cluster.connect() as admin:
            for name in ["copy_origin", "copy_copy"]:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_clone_promoted_beside_its_origin_on_a_shared_store():
    primary = Cluster("clone_origin", ["milvus.max_workers = 0"])
    clone = None
    try:
        store = Path(primary.host) / "shared-store"
        with primary.connect() as p:
            p.execute(f"SET milvus.storage_url = 'file://{store}'")
            make_items(p, 3000)
            clone = Cluster.standby_of("clone_copy", primary)
            with clone.connect() as s:
                replayed(p, s)
        subprocess.run(["runuser", "-u", "postgres", "--", PG_CTL, "-D", f"{clone.host}/data", "-w", "promote"],
                       check=True, capture_output=True)
        with primary.connect() as p, clone.connect() as c:
            for conn in (p, c):
                register_vector(conn)
                conn.execute("SET milvus.gc_grace_period = 0")
            # Both write: the clone adopts at its first job, then both go on.
            load(c, 500, seed=2, start_id=10_000)
            c.execute("SELECT milvus_flush('items_idx')")
            load(p, 500, seed=3, start_id=20_000)
            p.execute("SELECT milvus_flush('items_idx')")
            # The clone collects: the primary's new segment is not its to take.
            c.execute("SELECT milvus_gc()")
            # The primary rewrites and collects everything it had.
            p.execute("DELETE FROM items WHERE id < 1000")
            p.execute("VACUUM items")
            p.execute("SELECT milvus_compact('items_idx')")
            p.execute("SELECT milvus_gc()")
        clear_local_cache(primary)
        clear_local_cache(clone)
        with primary.connect() as p, clone.connect() as c:
            for conn, expected in [(p, list(range(1000, 3000)) + list(range(20_000, 20_500))),
                                   (c, list(range(3000)) + list(range(10_000, 10_500)))]:
                register_vector(conn)
                assert sorted(all_index_ids(conn)) == truth(conn) == expected
                assert conn.execute(
                    "SELECT count(*) FROM milvus_verify('items_idx') WHERE error IS NOT NULL").fetchone() == (0,)
    finally:
        if clone is not None:
            clone.stop()
        primary.stop()
