"""A physical standby: made with pg_basebackup from a primary whose index
stores its segments in a directory both servers reach (as an S3 bucket
would be). The standby replays the growing segment and the manifest from
WAL, reads the sealed segments from the same storage through its own
cache, runs no workers, refuses maintenance, and once promoted carries on
the lifecycle."""

import subprocess
from pathlib import Path

import numpy as np
import psycopg
import pytest
from pgvector import HalfVector, SparseVector
from pgvector.psycopg import register_vector

from conftest import CLUSTER, Cluster, PG_BIN, replayed
from helpers import all_index_ids, index_ids, literal, load, milvus_scan, near


def test_standby_replays_reads_the_same_storage_and_takes_over():
    primary = Cluster("primary", ["milvus.naptime = 1"])
    standby = None
    try:
        store = Path(primary.host) / "shared-store"
        with primary.connect() as p:
            p.execute("CREATE EXTENSION pg_milvus")
            register_vector(p)
            p.execute("CREATE TABLE items (id bigint PRIMARY KEY, category int, embedding vector(64))")
            p.execute(f"SET milvus.storage_url = 'file://{store}'")
            rows = load(p, 5000)
            # Flushed to the store, with RaBitQ codes (the default from 256
            # dimensions) in its index file.
            p.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) "
                      "WITH (quantization = rabitq)")
            standby = Cluster.standby_of("standby", primary)
            rows = np.concatenate([rows, load(p, 300, seed=2, start_id=5000)])  # growing, in WAL only
            queries = near(rows, 10)
            # The base backup left the primary's cache out (where the flush
            # left its files): the standby reads the store.
            standby_cache = Path(standby.host) / "data" / "pg_milvus" / "pgsql_tmp_cache" / "objects"
            assert not standby_cache.exists()
            with standby.connect() as s:
                register_vector(s)
                replayed(p, s)
                segs = "SELECT segment_id, state, rows FROM milvus_segments('items_idx') ORDER BY 1"
                assert s.execute(segs).fetchall() == p.execute(segs).fetchall() == [(1, "flushed", 5000), (2, "growing", 300)]
                for q in queries:
                    assert index_ids(s, "<->", q, 10) == index_ids(p, "<->", q, 10)
                with s.transaction():
                    s.execute("SET LOCAL enable_seqscan = off")
                    top = f"SELECT id FROM items ORDER BY embedding <-> '{literal(queries[0])}' LIMIT 10"
                    assert milvus_scan(s, top)["reranked"] == 80, "walked by its codes, 2 x ef re-ranked"
                assert sorted(all_index_ids(s)) == list(range(5300))
                # Rows wider than a page (in chunks, a WAL record each), halfvec
                # rows, bits and sparse rows of any width replay like any row.
                p.execute("CREATE TABLE wide (id int PRIMARY KEY, v vector(3072), h halfvec(16000), b bit(3072), "
                          "t sparsevec(16000))")
                for column, ops in (("v", "vector_l2_ops"), ("h", "halfvec_l2_ops"), ("b", "bit_hamming_ops"),
                                    ("t", "sparsevec_cosine_ops")):
                    p.execute(f"CREATE INDEX ON wide USING milvus ({column} {ops})")
                wide = np.random.default_rng(5).standard_normal((20, 16000)).astype(np.float32)
                terms = [SparseVector({int(j): float(w[j]) for j in np.argsort(-w)[:10 + 49 * i]}, 16000)
                         for i, w in enumerate(wide)]
                for i, w in enumerate(wide):
                    p.execute("INSERT INTO wide VALUES (%s, %s, %s, binary_quantize(%s)::bit(3072), %s)",
                              (i, w[:3072], HalfVector(w), w[:3072], terms[i]))
                replayed(p, s)
                for i in (0, 7, 19):
                    for column, op, value in (("v", "<->", wide[i][:3072]), ("h", "<->", HalfVector(wide[i])),
                                              ("t", "<=>", terms[i])):
                        with s.transaction():
                            s.execute("SET LOCAL enable_seqscan = off")
                            got = s.execute(f"SELECT id FROM wide ORDER BY {column} {op} %s LIMIT 1", (value,)).fetchone()
                        assert got == (i,), column
                    with s.transaction():
                        s.execute("SET LOCAL enable_seqscan = off")
                        got = s.execute("SELECT id FROM wide ORDER BY b <~> binary_quantize(%s)::bit(3072) LIMIT 1",
                                        (wide[i][:3072],)).fetchone()
                    assert got == (i,), "b"
                # Its own cache, filled from the shared store.
                assert s.execute("SELECT misses > 0 AND cached_bytes > 0 FROM milvus_cache_stats()").fetchone() == (True,)
                assert list(standby_cache.iterdir())
                # No workers on a standby, and no maintenance.
                assert not s.execute("SELECT 1 FROM pg_stat_activity WHERE backend_type LIKE 'pg_milvus%'").fetchall()
                with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
                    s.execute("SELECT * FROM milvus_flush('items_idx')")
        # Failover: the primary goes, the standby is promoted and carries on.
        primary.stop()
        subprocess.run(["runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D",
                        f"{standby.host}/data", "-w", "promote"], check=True, capture_output=True)
        with standby.connect() as s:
            register_vector(s)
            assert [r[2] for r in s.execute("SELECT * FROM milvus_flush('items_idx')")] == ["flushed"]
            ids = all_index_ids(s)
            assert len(ids) == len(set(ids)) == 5300
    finally:
        if standby:
            subprocess.run([CLUSTER, "stop", "standby"], check=True)
        primary.stop()
