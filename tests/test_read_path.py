"""The read path on a real cluster: flushed segments are searched in place
from files of the local cache that every backend maps (one copy per
server), a flush and a compaction leave their files in the cache for the
first search, eviction of a mapped file never disturbs a backend, and a
damaged cache file is found and fetched again."""

from pathlib import Path

import psycopg
import pytest
from pgvector.psycopg import register_vector

from helpers import all_index_ids, index_ids, load, near, objects_of, segments


CACHE = Path("data") / "pg_milvus" / "pgsql_tmp_cache" / "objects"


def cache_files(cluster, conn, suffix=""):
    """The cache files of items_idx's objects: each named by its object key
    with '/' flattened, so they begin <cluster>_<database oid>_<index oid>_."""
    objects = objects_of(cluster, conn)
    prefix = "_".join(objects.parts[-3:]) + "_"
    return sorted(p for p in (Path(cluster.host) / CACHE).iterdir() if p.name.startswith(prefix) and p.name.endswith(suffix))


def mapped(pid):
    """The cache files a backend has mapped, from /proc/PID/maps."""
    lines = (Path(f"/proc/{pid}/maps")).read_text().splitlines()
    return {line.split()[-1] for line in lines if str(CACHE) in line and not line.endswith("(deleted)")}


def mapped_deleted(pid):
    lines = (Path(f"/proc/{pid}/maps")).read_text().splitlines()
    return {line.split()[-2] for line in lines if str(CACHE) in line and line.endswith("(deleted)")}


def misses(conn):
    return conn.execute("SELECT misses FROM milvus_cache_stats()").fetchone()[0]


def backend(cluster, dbname):
    c = cluster.connect(dbname)
    register_vector(c)
    return c


def test_backends_search_the_same_mapped_files(cluster, conn):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 100000)")
    rows = load(conn, 6000)
    before = misses(conn)
    conn.execute("SELECT * FROM milvus_flush('items_idx')")
    [index_file], [binlog] = cache_files(cluster, conn, ".hnsw"), cache_files(cluster, conn, ".bin")
    queries = near(rows, 5)
    dbname = conn.info.dbname
    with backend(cluster, dbname) as a, backend(cluster, dbname) as b:
        answers = [[index_ids(c, "<->", q, 10) for q in queries] for c in (a, b)]
        assert answers[0] == answers[1] and all(len(ids) == 10 for ids in answers[0])
        for c in (a, b):
            # Both backends read the segment in place from the same files.
            assert {str(index_file), str(binlog)} <= mapped(c.info.backend_pid)
        assert misses(conn) == before, "the flush left its files in the cache: nothing was downloaded"


def test_compaction_and_eviction_never_disturb_a_warm_backend(cluster, conn):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 100000)")
    rows = load(conn, 6000)
    conn.execute("SELECT * FROM milvus_flush('items_idx')")
    queries = near(rows, 5)
    with backend(cluster, conn.info.dbname) as warm:
        first = [index_ids(warm, "<->", q, 10) for q in queries]
        old = mapped(warm.info.backend_pid)
        # Eviction unlinks what the warm backend maps: it keeps answering
        # from its mapping, as unlinked files stay readable while mapped.
        for f in cache_files(cluster, conn):
            f.unlink()
        assert [index_ids(warm, "<->", q, 10) for q in queries] == first
        assert old <= mapped_deleted(warm.info.backend_pid)

        # A compaction rewrites the segment (10% deleted) and caches the new
        # files: the warm backend's next query maps them, no download.
        conn.execute("DELETE FROM items WHERE id % 10 = 0")
        conn.execute("VACUUM items")
        conn.execute("SET milvus.compaction_delete_ratio = 0.05")
        conn.execute("SELECT * FROM milvus_compact('items_idx')")
        assert sorted(s[1] for s in segments(conn)) == ["dropped", "flushed", "growing"]
        before = misses(conn)
        after = [index_ids(warm, "<->", q, 10) for q in queries]
        assert all(len(ids) == 10 and all(i % 10 for i in ids) for ids in after)
        assert misses(conn) == before
        heap = {r[0] for r in conn.execute("SELECT id FROM items")}
        assert sorted(all_index_ids(warm)) == sorted(heap)


def test_a_damaged_cache_file_is_found_and_fetched_again(cluster, conn):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 100000)")
    rows = load(conn, 6000)
    conn.execute("SELECT * FROM milvus_flush('items_idx')")
    queries = near(rows, 5)
    truth = [index_ids(conn, "<->", q, 10) for q in queries]
    [index_file] = cache_files(cluster, conn, ".hnsw")
    good = index_file.read_bytes()

    # A damaged header: the next backend to open the file drops it and
    # fetches the object again.
    damaged = bytearray(good)
    damaged[20] ^= 0x01
    index_file.write_bytes(bytes(damaged))
    with backend(cluster, conn.info.dbname) as c:
        assert [index_ids(c, "<->", q, 10) for q in queries] == truth
    assert index_file.read_bytes() == good

    # A damaged body (same size, header intact): opening does not read it
    # through; milvus_prewarm() does, warns naming it, and fetches it again.
    damaged = bytearray(good)
    damaged[len(good) // 2] ^= 0x01
    index_file.write_bytes(bytes(damaged))
    notices = []
    with backend(cluster, conn.info.dbname) as c:
        c.add_notice_handler(lambda d: notices.append((d.severity, d.message_primary)))
        assert c.execute("SELECT segments FROM milvus_prewarm('items_idx')").fetchone() == (1,)
        assert [index_ids(c, "<->", q, 10) for q in queries] == truth
    object_name = index_file.name.split("_")[-1]  # index-<nonce>.hnsw, the end of its key
    assert [n for n in notices if n[0] == "WARNING" and object_name in n[1] and "corrupt" in n[1]], notices
    assert index_file.read_bytes() == good


def test_prewarm_of_a_missing_object_fails_naming_it(cluster, conn):
    # A store outside the data directory: the objects are only there (an
    # index on the embedded store gets them back from its pages: below).
    store = Path(cluster.host) / "items-store"
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) "
                 f"WITH (growing_max_rows = 100000, storage_url = 'file://{store}')")
    load(conn, 6000)
    conn.execute("SELECT * FROM milvus_flush('items_idx')")
    for f in cache_files(cluster, conn):
        f.unlink()
    for f in store.rglob("index-*.hnsw"):
        f.unlink()
    with backend(cluster, conn.info.dbname) as c:
        with pytest.raises(psycopg.errors.IoError, match='could not read segment 1 of index "items_idx".*not found'):
            c.execute("SELECT * FROM milvus_prewarm('items_idx')")


def test_prewarm_restores_an_object_gone_from_the_directory_from_the_pages(cluster, conn):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 100000)")
    load(conn, 6000)
    conn.execute("SELECT * FROM milvus_flush('items_idx')")
    for f in cache_files(cluster, conn):
        f.unlink()
    gone = list(objects_of(cluster, conn).rglob("index-*.hnsw"))
    for f in gone:
        f.unlink()
    with backend(cluster, conn.info.dbname) as c:
        c.execute("SELECT * FROM milvus_prewarm('items_idx')")
    assert gone and all(f.exists() for f in gone), "copied back from the index's pages"
