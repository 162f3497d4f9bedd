"""S3 for real, against a moto S3 server on loopback: the lifecycle (also on
the local default, for comparison), the
credential settings hidden from everyone but superusers, an outage in the
middle of work, corrupt and vanished objects, malformed URLs; and the local
cache under a small bound."""

import threading
import time

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from pathlib import Path

from conftest import BUCKET, Cluster, DIMS, replayed
from helpers import (
    all_index_ids, bucket_keys, check_search_quality, clear_local_cache, client, connect_s3, index_ids, literal,
    load, METRICS, milvus_scan_line, near, objects_of, segments, use_s3,
)


@pytest.mark.parametrize("store", ["local", "s3"])
def test_lifecycle(cluster, conn, store, request):
    """The main scenario twice: on the embedded default directory, and on
    S3. Objects appear under the index's prefix, one per binlog, graph and
    delta; compaction and GC leave exactly the live segment's."""
    if store == "s3":
        s3 = request.getfixturevalue("s3")
        use_s3(conn, s3, "lifecycle")
    first = load(conn, 5000)
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 100000)")  # flushes
    second = load(conn, 1000, seed=1, start_id=5000)
    assert [r[2] for r in conn.execute("SELECT * FROM milvus_flush('items_idx')")] == ["flushed"]
    check_search_quality(conn, METRICS["vector_l2_ops"], near(np.concatenate([first, second]), 30))

    index_prefix = "{}/{}/{}/".format(*conn.execute(
        "SELECT lpad(to_hex(s.system_identifier), 16, '0'), d.oid, 'items_idx'::regclass::oid"
        " FROM pg_control_system() s, pg_database d WHERE d.datname = current_database()").fetchone())

    def objects():
        """The index's object names, whichever the store."""
        if store == "s3":
            keys = [k for k in bucket_keys(s3) if k.startswith("lifecycle/")]
            assert all(k.startswith("lifecycle/" + index_prefix) for k in keys), keys
        else:
            root = Path(cluster.host) / "data" / "pg_milvus" / "objects"
            keys = [str(p.relative_to(root)) for p in (root / index_prefix).rglob("*") if p.is_file()]
        return sorted(k.rsplit("/", 1)[1].split("-")[0] for k in keys)

    assert objects() == ["index", "index", "insert", "insert"]  # both have a graph (over 512 rows)

    conn.execute("DELETE FROM items WHERE id % 10 = 3")
    conn.execute("VACUUM items")
    # VACUUM records the tombstones in the manifest; a flush writes them.
    assert objects() == ["index", "index", "insert", "insert"]
    conn.execute("SELECT * FROM milvus_flush('items_idx')")
    assert objects() == ["delta", "delta", "index", "index", "insert", "insert"]
    # The grace period counts from the merge that drops the segments, not
    # from their objects' creation: objects older than it stay a while.
    conn.execute("SET milvus.gc_grace_period = 2")
    time.sleep(2.5)
    conn.execute("SELECT * FROM milvus_compact('items_idx')")
    assert conn.execute("SELECT deleted_objects FROM milvus_gc('items_idx')").fetchone()[0] == 0
    assert objects() == ["delta", "delta", "index", "index", "index", "insert", "insert", "insert"]
    conn.execute("SET milvus.gc_grace_period = 0")
    deleted = conn.execute("SELECT deleted_objects FROM milvus_gc('items_idx')").fetchone()[0]
    assert deleted == 6  # the two merged segments' insert, index and delta objects
    assert objects() == ["index", "insert"]
    live = [s for s in segments(conn) if s[1] != "growing"]
    assert [(s[1], s[3]) for s in live] == [("flushed", 5400)], live
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == 5400 and not any(i % 10 == 3 for i in ids)


def test_s3_credentials_are_hidden_from_other_users(conn):
    conn.execute("SET milvus.s3_secret_access_key = 'hunter2'")
    conn.execute("CREATE ROLE milvus_reader")
    try:
        conn.execute("SET ROLE milvus_reader")
        for sql in ["SHOW milvus.s3_secret_access_key", "SELECT current_setting('milvus.s3_secret_access_key')",
                    "SHOW milvus.s3_access_key_id"]:
            # (PostgreSQL 18 says "permission denied to examine")
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="must be superuser|permission denied"):
                conn.execute(sql)
        shown = conn.execute("SELECT name, setting FROM pg_settings WHERE name LIKE 'milvus.s3%'").fetchall()
        assert not any("secret" in n or "key_id" in n or "token" in n for n, _ in shown), shown
        assert not any("hunter2" in str(r) for r in conn.execute("SHOW ALL").fetchall())
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SET milvus.s3_secret_access_key = 'mine'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SET milvus.storage_url = 'file:///tmp/elsewhere'")
    finally:
        conn.execute("RESET ROLE")
        conn.execute("DROP ROLE milvus_reader")


def test_storage_outage_mid_work_fails_clearly_and_recovers(cluster, conn, s3):
    use_s3(conn, s3, "outage")
    conn.execute("SET milvus.storage_timeout = 1")
    dbname = conn.info.dbname
    load(conn, 5000)
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)")
    load(conn, 1000, seed=2, start_id=5000)
    assert len(all_index_ids(conn)) == 6000  # segment 1 is now loaded and cached

    s3.pause()
    try:
        # Inserts never touch storage.
        load(conn, 500, seed=3, start_id=6000)
        # Searches of loaded or cached segments go on, in this backend and a new one.
        assert len(set(all_index_ids(conn))) == 6500
        with connect_s3(cluster, dbname, s3, "outage") as other:
            assert len(set(all_index_ids(other))) == 6500
        # A flush fails, naming the storage and the cause; the rows stay sealed.
        with pytest.raises(psycopg.errors.IoError) as failed:
            conn.execute("SELECT * FROM milvus_flush('items_idx')")
        message = str(failed.value)
        assert "could not flush segment 2" in message and f"s3://{BUCKET}/outage" in message, message
        assert "timed out" in message or "timeout" in message, message
        assert failed.value.diag.message_detail.startswith("The rows stay in the sealed segment; nothing is lost.")
        assert [s[1] for s in segments(conn)] == ["flushed", "sealed", "growing"]
        assert len(set(all_index_ids(conn))) == 6500

        # Slow storage stays interruptible: with a long timeout the flush
        # would wait a minute per request; a cancel ends it at once.
        with connect_s3(cluster, dbname, s3, "outage") as slow:
            slow.execute("SET milvus.storage_timeout = 60")
            pid = slow.info.backend_pid
            outcome = {}

            def flush():
                started = time.monotonic()
                try:
                    slow.execute("SELECT * FROM milvus_flush('items_idx')")
                except psycopg.Error as e:
                    outcome["error"] = e
                outcome["took"] = time.monotonic() - started

            t = threading.Thread(target=flush)
            t.start()
            time.sleep(1.5)
            conn.execute("SELECT pg_cancel_backend(%s)", (pid,))
            t.join(30)
            assert isinstance(outcome.get("error"), psycopg.errors.QueryCanceled), outcome
            assert outcome["took"] < 10, outcome  # the request alone would take 60 s

        # A segment in neither this backend nor the local cache: a clear
        # error naming it, never a partial answer.
        clear_local_cache(cluster)
        with connect_s3(cluster, dbname, s3, "outage") as cold:
            cold.execute("SET milvus.storage_timeout = 1")
            with pytest.raises(psycopg.errors.IoError, match='could not read segment 1 of index "items_idx"'):
                all_index_ids(cold)
            # VACUUM needs neither the store nor the cache: each flushed
            # segment's keys and tombstones are in the index's pages.
            conn.execute("DELETE FROM items WHERE id % 7 = 0")
            cold.execute("VACUUM items")
            deleted = cold.execute("SELECT deleted_rows FROM milvus_segments('items_idx') WHERE segment_id = 1").fetchone()
            assert deleted == (len([i for i in range(5000) if i % 7 == 0]),)
    finally:
        s3.resume()

    # Back: the flush succeeds and writes the tombstones VACUUM recorded;
    # nothing lost, nothing twice, nothing deleted returned.
    assert [r[1:] for r in conn.execute("SELECT * FROM milvus_flush('items_idx')")] == [(2, "flushed")]
    heap = {r[0] for r in conn.execute("SELECT id FROM items")}
    with connect_s3(cluster, dbname, s3, "outage") as fresh:
        ids = all_index_ids(fresh)
    assert len(ids) == len(set(ids)) and set(ids) == heap and len(heap) == 6500 - len(range(0, 6500, 7))
    conn.execute("DELETE FROM items WHERE id % 7 = 1")
    conn.execute("VACUUM items")  # reads the delta binlog the flush wrote from the pages too
    with connect_s3(cluster, dbname, s3, "outage") as fresh:
        assert set(all_index_ids(fresh)) == {r[0] for r in conn.execute("SELECT id FROM items")}


def test_corrupt_or_vanished_objects_are_named_never_served(cluster, conn, s3):
    use_s3(conn, s3, "corrupt")
    dbname = conn.info.dbname
    rows = load(conn, 5000)
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)")
    binlog = next(k for k in bucket_keys(s3) if k.startswith("corrupt/") and "/insert-" in k)
    key = binlog.split("/", 1)[1]  # as named in messages: below the URL's prefix
    body = client(s3).get_object(Bucket=BUCKET, Key=binlog)["Body"].read()
    damaged = bytearray(body)
    damaged[len(damaged) // 2] ^= 0x40  # one bit, same size
    client(s3).put_object(Bucket=BUCKET, Key=binlog, Body=bytes(damaged))
    clear_local_cache(cluster)

    with connect_s3(cluster, dbname, s3, "corrupt") as c:
        with pytest.raises(psycopg.errors.IndexCorrupted) as failed:
            index_ids(c, "<->", rows[0], 10)
        message = str(failed.value)
        assert 'could not read segment 1 of index "items_idx"' in message and key in message and "corrupt" in message, message
        assert failed.value.diag.message_detail == "Queries need every flushed segment."
        assert failed.value.diag.message_hint == "REINDEX rebuilds the index from the table."
    error = conn.execute("SELECT error FROM milvus_segments('items_idx') WHERE segment_id = 1").fetchone()[0]
    assert error and key in error and "corrupt" in error, error

    # The documented repair: rebuild from the table.
    conn.execute("REINDEX INDEX items_idx")
    assert conn.execute("SELECT error FROM milvus_segments('items_idx') WHERE segment_id = 1").fetchone() == (None,)
    with connect_s3(cluster, dbname, s3, "corrupt") as c:
        assert len(set(all_index_ids(c))) == 5000

    # An object deleted behind our back: the same, "not found".
    keys = [k for k in bucket_keys(s3) if k.startswith("corrupt/") and "/insert-" in k and k != binlog]
    client(s3).delete_object(Bucket=BUCKET, Key=keys[-1])
    clear_local_cache(cluster)
    with connect_s3(cluster, dbname, s3, "corrupt") as c:
        with pytest.raises(psycopg.errors.IoError, match="not found"):
            index_ids(c, "<->", rows[0], 10)


def test_malformed_storage_urls_are_refused_when_set(conn):
    for url, reason in [("/tmp/objects", "expected scheme://"), ("gs://bucket", 'unsupported scheme "gs"'),
                        ("s3://Bad_Bucket/x", "bucket names use lowercase"), ("file://relative", "absolute path")]:
        with pytest.raises(psycopg.errors.InvalidParameterValue) as refused:
            conn.execute(f"SET milvus.storage_url = '{url}'")
        assert reason in refused.value.diag.message_detail, refused.value.diag.message_detail
    conn.execute("SET milvus.storage_url = 's3://a-bucket/prefix'")  # well formed: accepted, not contacted
    conn.execute("RESET milvus.storage_url")


@pytest.mark.parametrize("store", ["local", "s3"])
def test_an_index_larger_than_the_cache_reads_rows_by_range(cluster, conn, s3, store):
    """Four segments of about 5 MB each (3.2 MB binlog, 1.6 MB graph and
    codes) under a 16 MB cache: the index files and the binlogs' read
    indexes stay cached, the rows a search re-ranks are read by range, and
    the answers are the ones the whole binlogs gave, in every backend."""
    dbname = conn.info.dbname
    if store == "s3":
        use_s3(conn, s3, "by-range")
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 100000)")
    rows = []
    for b in range(4):
        rows.append(load(conn, 12_000, seed=b, start_id=b * 12_000))
        conn.execute("SELECT * FROM milvus_flush('items_idx')")
    queries = near(np.concatenate(rows), 10)
    whole = [index_ids(conn, "<->", q, 10) for q in queries]
    conn.execute(f'ALTER DATABASE "{dbname}" SET milvus.cache_size = 16')  # MB, the least it takes
    clear_local_cache(cluster)

    def answers():
        with cluster.connect(dbname) as c:  # a new backend loads every segment
            register_vector(c)
            if store == "s3":
                use_s3(c, s3, "by-range")
            got = [index_ids(c, "<->", q, 10) for q in queries]
            line = milvus_scan_line(
                c, f"SELECT id FROM items ORDER BY embedding <-> '{literal(queries[0])}' LIMIT 10", "items_idx")
            every = sorted(all_index_ids(c))
            stats = c.execute("SELECT hits, misses, evictions, cached_bytes, capacity_bytes FROM milvus_cache_stats()").fetchone()
            return got, line, every, stats

    try:
        base = conn.execute("SELECT misses FROM milvus_cache_stats()").fetchone()[0]  # the server's, so far
        first, line, every, stats = answers()
        assert first == whole
        assert every == list(range(48_000)), "an exhaustive scan reads every row by range"
        fields = dict(kv.split("=") for kv in line.split(": ", 2)[2].split())
        # The rows the codes found in the four segments, of 256-byte
        # vectors, read and nothing else.
        assert int(fields["reranked"]) >= 40 and fields["read_by_range"] == fields["reranked"], line
        assert int(fields["read_bytes"]) == int(fields["reranked"]) * 4 * 64, line
        # Missed once each: the four index files and the four read indexes.
        assert stats[1] - base == 8 and stats[3] <= stats[4] == 16 << 20, stats
        # Another backend maps what the first cached: nothing is fetched whole again.
        second, _, _, stats2 = answers()
        assert second == whole and stats2[1] == stats[1] and stats2[3] <= 16 << 20, (stats, stats2)
        # Prewarm loads an index's segments ahead of queries.
        with cluster.connect(dbname) as c:
            if store == "s3":
                use_s3(c, s3, "by-range")
            segs, size = c.execute("SELECT * FROM milvus_prewarm('items_idx')").fetchone()
            assert segs == 4 and size > 16 << 20

        # Rows changed in the store after their read index was taken (every
        # vector byte of each binlog flipped in place): a query fails naming
        # the object, and answers as before once the rows are whole again.
        def flip_rows():
            vectors = 64 + 8 * 12_000
            if store == "s3":
                s3c = client(s3)
                for key in [k for k in bucket_keys(s3) if k.startswith("by-range/") and "/insert-" in k]:
                    body = bytearray(s3c.get_object(Bucket=BUCKET, Key=key)["Body"].read())
                    body[vectors:] = bytes(b ^ 0x40 for b in body[vectors:])
                    s3c.put_object(Bucket=BUCKET, Key=key, Body=bytes(body))
            else:
                for path in objects_of(cluster, conn).rglob("insert-*.bin"):
                    body = bytearray(path.read_bytes())
                    body[vectors:] = bytes(b ^ 0x40 for b in body[vectors:])
                    with open(path, "r+b") as f:  # in place, as a disk's damage would be
                        f.write(body)

        flip_rows()
        with cluster.connect(dbname) as c:
            register_vector(c)
            if store == "s3":
                use_s3(c, s3, "by-range")
            with pytest.raises(psycopg.errors.IndexCorrupted) as damaged:
                index_ids(c, "<->", queries[0], 10)
        message = damaged.value.diag.message_primary
        assert message.startswith('could not search index "items_idx": object ') and "is corrupt: row " in message, message
        flip_rows()
        assert answers()[0] == whole
    finally:
        conn.execute(f'ALTER DATABASE "{dbname}" RESET milvus.cache_size')


def test_an_index_keeps_its_storage_when_the_setting_changes(cluster, conn, s3):
    """WITH (storage_url) puts one index on S3 while the server's default
    stays local; the location is fixed at build, so changing
    milvus.storage_url later strands nothing."""
    dbname = conn.info.dbname
    use_s3(conn, s3, "unused-default")
    conn.execute("RESET milvus.storage_url")  # the embedded default for everything else
    load(conn, 5000)
    conn.execute(f"CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (storage_url = 's3://{BUCKET}/per-index')")
    conn.execute("CREATE INDEX items_local_idx ON items USING milvus (embedding vector_cosine_ops)")
    on_s3 = [k for k in bucket_keys(s3) if k.startswith("per-index/")]
    assert sorted(k.rsplit("/", 1)[1].split("-")[0] for k in on_s3) == ["index", "insert"], on_s3
    index_oid = conn.execute("SELECT 'items_idx'::regclass::oid").fetchone()[0]
    local = Path(cluster.host) / "data" / "pg_milvus" / "objects"
    assert not [p for p in local.rglob("*") if p.is_file() and f"/{index_oid}/" in str(p)]

    # Another location for new indexes; the existing ones keep theirs.
    conn.execute(f"SET milvus.storage_url = 's3://{BUCKET}/moved'")
    with connect_s3(cluster, dbname, s3, "moved") as c:
        assert len(set(all_index_ids(c))) == 5000
        with c.transaction():
            c.execute("SET LOCAL enable_seqscan = off")
            c.execute("SET LOCAL milvus.max_scan_tuples = 2147483647")
            assert len(index_ids(c, "<=>", np.ones(64, np.float32), 100_000)) == 5000
    load(conn, 100, seed=2, start_id=5000)
    assert [r[2] for r in conn.execute("SELECT * FROM milvus_flush('items_idx')")] == ["flushed"]
    assert not [k for k in bucket_keys(s3) if k.startswith("moved/")]

    with pytest.raises(psycopg.errors.InvalidParameterValue, match="invalid storage_url option"):
        conn.execute("CREATE INDEX bad_idx ON items USING milvus (embedding vector_l2_ops) WITH (storage_url = 'ftp://x')")

    # Dropped, its location is known to no setting and no live index: GC
    # still finds its objects there (build-time locations are remembered).
    conn.execute("DROP INDEX items_idx")
    with connect_s3(cluster, dbname, s3, "moved") as c:
        c.execute("SET milvus.gc_grace_period = 0")
        rows = c.execute("SELECT index::oid, deleted_objects FROM milvus_gc()").fetchall()
    assert (index_oid, len(on_s3) + 1) in rows, rows  # + the flush's binlog
    assert not [k for k in bucket_keys(s3) if k.startswith("per-index/")]


def test_a_failover_on_s3_adopts_by_server_side_copies_and_the_old_prefix_can_be_removed(s3):
    """A standby promoted after its primary is gone for good is a new
    writer: its first job copies each object its manifest references under
    its own prefix (one server-side copy request each, no bytes through the
    server). The old writer's prefix, the first part of the keys
    milvus_verify() lists before that job, is then the DBA's to delete, as
    docs/operations.md says."""
    settings = [f"milvus.s3_endpoint = '{s3.endpoint}'", "milvus.s3_region = 'us-east-1'",
                "milvus.s3_access_key_id = 'testing'", "milvus.s3_secret_access_key = 'testing-secret'",
                "milvus.s3_allow_http = on", "milvus.s3_path_style = on",
                f"milvus.storage_url = 's3://{BUCKET}/failover'", "milvus.max_workers = 0"]
    primary = Cluster("s3-failover-primary", settings)
    standby = None
    try:
        with primary.connect() as p:
            p.execute("CREATE EXTENSION pg_milvus")
            register_vector(p)
            p.execute(f"CREATE TABLE items (id bigint PRIMARY KEY, category int, embedding vector({DIMS}))")
            p.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) "
                      "WITH (growing_max_rows = 1000)")
            rows = load(p, 3000)
            p.execute("SELECT * FROM milvus_flush('items_idx')")
            queries = near(rows, 5)
            expected = [index_ids(p, "<->", q, 10) for q in queries]
            standby = Cluster.standby_of("s3-failover-standby", primary)
            with standby.connect() as s:
                replayed(p, s)
        primary.stop()  # gone for good
        standby.promote()
        old = {k for k in bucket_keys(s3) if k.startswith("failover/")}
        with standby.connect() as s:
            register_vector(s)
            assert [index_ids(s, "<->", q, 10) for q in queries] == expected
            # Before its first job, the keys it reads are under the old
            # primary's prefix: the one to delete later.
            stale = {k.split("/")[0] for (k,) in s.execute("SELECT object FROM milvus_verify('items_idx')")}
            assert len(stale) == 1
            # Its first job adopts: a copy of each object, under its prefix.
            [(referenced, error)] = s.execute("SELECT referenced_objects, error FROM milvus_gc('items_idx')").fetchall()
            keys = [k for (k,) in s.execute("SELECT object FROM milvus_verify('items_idx')")]
            assert error is None and referenced == len(keys) == len(old)
            writer = keys[0].split("/")[0]
            assert all(k.startswith(writer + "/") for k in keys) and not any(k.split("/", 1)[1].startswith(writer) for k in old)
            new = {k for k in bucket_keys(s3) if k.startswith("failover/")} - old
            assert sorted(k.split("/", 1)[1] for k in new) == sorted(keys)
            # The documented step, the old primary gone for good: delete
            # its prefix.
            assert stale == {k.split("/")[1] for k in old} and writer not in stale
            listed = client(s3).list_objects_v2(Bucket=BUCKET, Prefix=f"failover/{stale.pop()}/")["Contents"]
            client(s3).delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": o["Key"]} for o in listed]})
        clear_local_cache(standby)
        with standby.connect() as s:
            register_vector(s)
            assert [index_ids(s, "<->", q, 10) for q in queries] == expected
            assert s.execute("SELECT count(*) FROM milvus_verify('items_idx') WHERE error IS NOT NULL").fetchone() == (0,)
            assert sorted(all_index_ids(s)) == list(range(3000))
    finally:
        if standby is not None:
            standby.stop()
        primary.stop()
