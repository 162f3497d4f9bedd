"""Garbage collection across a server: one index whose storage fails does
not stop the collection of the others, and the objects of a dropped
database are collected from another one."""

import os
import shutil
from pathlib import Path

import numpy as np
import psycopg
import pytest

from helpers import load


def files_under(path: Path):
    return [p for p in path.rglob("*") if p.is_file()] if path.exists() else []


def test_objects_of_a_dropped_database_are_collected(cluster, conn):
    with cluster.connect() as admin:
        admin.execute("DROP DATABASE IF EXISTS gc_doomed")
        admin.execute("CREATE DATABASE gc_doomed")
    with cluster.connect("gc_doomed") as doomed:
        doomed.execute("CREATE EXTENSION pg_milvus")
        doomed.execute("CREATE TABLE t (v vector(4))")
        doomed.execute("INSERT INTO t SELECT array[g, 1, 2, 3]::vector FROM generate_series(1, 500) g")
        doomed.execute("CREATE INDEX t_idx ON t USING milvus (v)")
        cluster_id, db_oid = doomed.execute(
            "SELECT lpad(to_hex(system_identifier), 16, '0'), (SELECT oid FROM pg_database"
            " WHERE datname = current_database()) FROM pg_control_system()").fetchone()
    objects = Path(cluster.host) / "data" / "pg_milvus" / "objects" / cluster_id / str(db_oid)
    assert files_under(objects)
    with cluster.connect() as admin:
        admin.execute("DROP DATABASE gc_doomed")
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding)")
    load(conn, 300)
    conn.execute("SELECT * FROM milvus_flush('items_idx')")
    # Within the grace period, nothing goes.
    rows = conn.execute("SELECT index, deleted_objects, young_objects, error FROM milvus_gc()").fetchall()
    assert files_under(objects)
    assert any(r[0] is None and r[1] == 0 and r[2] >= 1 and r[3] is None for r in rows), rows
    # Before: 157 MB stayed for good. Now the whole prefix goes; this
    # database's own objects stay.
    conn.execute("SET milvus.gc_grace_period = 0")
    rows = conn.execute("SELECT index::text, deleted_objects, error FROM milvus_gc()").fetchall()
    assert any(r[0] is None and r[1] >= 1 and r[2] is None for r in rows), rows
    assert not files_under(objects)
    conn.execute("SET enable_seqscan = off")
    assert conn.execute("SELECT count(*) FROM (SELECT id FROM items ORDER BY embedding <-> %s) s",
                        (np.zeros(64, dtype=np.float32),)).fetchone()[0] == 300


def test_one_failing_location_does_not_stop_the_others(cluster, conn):
    store = Path(cluster.host) / "gc_store"
    store.mkdir(exist_ok=True)
    shutil.chown(store, "postgres", "postgres")
    conn.execute("CREATE TABLE other (v vector(4))")
    conn.execute("INSERT INTO other SELECT array[g, 0, 0, 0]::vector FROM generate_series(1, 300) g")
    conn.execute(f"CREATE INDEX other_idx ON other USING milvus (v) WITH (storage_url = 'file://{store}')")
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding)")
    load(conn, 300)
    conn.execute("SELECT * FROM milvus_flush()")
    conn.execute("DELETE FROM items WHERE id < 100")
    conn.execute("VACUUM items")
    conn.execute("SELECT * FROM milvus_compact('items_idx')")
    conn.execute("SET milvus.gc_grace_period = 0")
    os.chmod(store, 0)
    try:
        # Before: the whole call failed, naming no index.
        rows = {r[0]: r for r in conn.execute("SELECT index::text, deleted_objects, error FROM milvus_gc()").fetchall()}
        assert rows["items_idx"][1] >= 1 and rows["items_idx"][2] is None, rows
        assert "Permission denied" in rows["other_idx"][2] and 'index "other_idx"' in rows["other_idx"][2], rows
        assert any(k is None and e and str(store) in e for k, _, e in rows.values()), rows
        # Asked about that index alone, the call fails with the cause.
        with pytest.raises(psycopg.errors.IoError, match="Permission denied"):
            conn.execute("SELECT * FROM milvus_gc('other_idx')")
    finally:
        os.chmod(store, 0o700)
    rows = conn.execute("SELECT index::text, error FROM milvus_gc()").fetchall()
    assert all(e is None for _, e in rows), rows
