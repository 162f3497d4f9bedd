"""Seal and flush on a real cluster: recall across flushed segments for every
metric, deletes in flushed segments, concurrent inserts during flushes,
kill -9 between upload and manifest commit, and storage that refuses writes
or whose disk is full."""

import os
import pwd
import shutil
import stat
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from helpers import (
    all_index_ids, check_search_quality, clustered, index_ids, load, METRICS, near, objects_of, run_writers,
    segments,
)


@pytest.mark.parametrize("opclass", METRICS)
def test_recall_across_flushed_segments(conn, opclass):
    op = METRICS[opclass]
    conn.execute(f"CREATE INDEX items_idx ON items USING milvus (embedding {opclass}) WITH (growing_max_rows = 100000)")
    rows = []
    for batch in range(4):  # 20k rows: three flushed segments and a growing one
        rows.append(load(conn, 5000, seed=batch, start_id=batch * 5000))
        if batch < 3:
            assert [r[2] for r in conn.execute("SELECT * FROM milvus_flush('items_idx')")] == ["flushed"]
    conn.execute("ANALYZE items")
    segs = segments(conn)
    assert [(s[1], s[2], s[3]) for s in segs] == [("flushed", "ready", 5000)] * 3 + [("growing", "none", 5000)]

    check_search_quality(conn, op, near(np.concatenate(rows), 50))

    # Delete 10% + VACUUM: tombstones in flushed segments, rows out of pages.
    conn.execute("DELETE FROM items WHERE id % 10 = 7")
    conn.execute("VACUUM items")
    assert [s[4] for s in segments(conn)] == [500, 500, 500, 0]
    ids = all_index_ids(conn, op)
    assert len(ids) == len(set(ids)) == 18_000
    assert not any(i % 10 == 7 for i in ids), "a dead row was returned"


def test_concurrent_inserts_during_flushes(cluster, conn):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)")

    def flusher(c, stop):
        while not stop.is_set():
            c.execute("SELECT * FROM milvus_flush('items_idx')")

    run_writers(cluster, conn.info.dbname, flusher, rows=2000, batch=100)
    conn.execute("SELECT * FROM milvus_flush('items_idx')")
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == 8000, "every committed row exactly once"
    assert sum(s[3] for s in segments(conn)) == 8000


def test_kill_9_between_upload_and_manifest_commit(cluster, conn):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 100000)")
    load(conn, 6000)
    dbname = conn.info.dbname
    objects = objects_of(cluster, conn)  # this index's only

    def flush_and_pause():
        try:
            with cluster.connect(dbname) as c:
                c.execute("SET milvus.debug_pause = 60000")
                c.execute("SELECT * FROM milvus_flush('items_idx')")
        except psycopg.OperationalError:
            pass  # killed, as intended

    t = threading.Thread(target=flush_and_pause)
    t.start()
    # Held at the pause before the commit (after its WAL so far is
    # durable): the objects are uploaded, the manifest not changed. The
    # files alone appear before that, while the objects are still being
    # written into the index's pages.
    deadline = time.time() + 60
    while not conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'").fetchone()[0] \
            and time.time() < deadline:
        time.sleep(0.05)
    assert list(objects.rglob("index-*.hnsw")), "the flush uploaded its objects"
    cluster.crash()
    t.join()
    conn.close()
    cluster.restart()

    with cluster.connect(dbname) as c:
        register_vector(c)
        # The commit never happened: the rows are still sealed in pages.
        assert [s[1] for s in segments(c)] == ["sealed", "growing"]
        ids = all_index_ids(c)
        assert len(ids) == len(set(ids)) == 6000
        # Flushing again publishes the rows once; the first upload is an orphan.
        assert [r[2] for r in c.execute("SELECT * FROM milvus_flush('items_idx')")] == ["flushed"]
        assert [s[1] for s in segments(c)] == ["flushed", "growing"]
        ids = all_index_ids(c)
        assert len(ids) == len(set(ids)) == 6000
        assert len(list(objects.rglob("index-*.hnsw"))) == 2


def read_only_store(cluster, name):
    """A directory the server may read but not write (root's, mode 0555)."""
    store = Path(cluster.host) / name
    store.mkdir(exist_ok=True)
    shutil.chown(store, "root", "root")
    os.chmod(store, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    return store


def make_writable(store):
    shutil.chown(store, "postgres", "postgres")
    os.chmod(store, 0o755)


def test_storage_refusing_writes_loses_nothing(cluster, conn):
    readonly = read_only_store(cluster, "readonly-store")
    conn.execute(f"CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (storage_url = 'file://{readonly}')")
    load(conn, 1000)
    with pytest.raises(psycopg.errors.IoError) as e:
        conn.execute("SELECT * FROM milvus_flush('items_idx')")
    assert e.value.diag.message_primary.startswith(
        f'could not flush segment 1 of index "items_idx": storage file://{readonly}: put '), e.value.diag.message_primary
    assert "nothing is lost" in e.value.diag.message_detail

    # Inserts and searches keep working; every row is still found.
    load(conn, 10, seed=9, start_id=5000)
    assert [s[1] for s in segments(conn)] == ["sealed", "growing"]
    assert len(all_index_ids(conn)) == 1010

    make_writable(readonly)  # the storage is fixed
    assert [r[2] for r in conn.execute("SELECT * FROM milvus_flush('items_idx')")] == ["flushed", "flushed"]
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == 1010


@pytest.fixture
def small_disks(cluster):
    """Two 1 MB filesystems (tmpfs, mounted by the root test runner) the
    server writes to: disks that fill up. grow(disk, mb) frees space."""
    pg = pwd.getpwnam("postgres")
    disks = []
    for name in ("small-store", "small-cache"):
        path = Path(cluster.host) / name
        path.mkdir(exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size=1m,mode=0700,uid={pg.pw_uid},gid={pg.pw_gid}", "tmpfs", str(path)], check=True)
        disks.append(path)
    yield disks
    for path in disks:
        subprocess.run(["umount", "--lazy", str(path)], check=True)


def grow(disk, mb):
    subprocess.run(["mount", "-o", f"remount,size={mb}m", str(disk)], check=True)


def test_a_full_disk_fails_clearly_and_loses_nothing(cluster, conn, small_disks):
    store, cache = small_disks
    conn.execute(f"CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 100000, storage_url = 'file://{store}')")
    load(conn, 5000)  # a 1.3 MB insert binlog, and its HNSW graph: more than the store's 1 MB
    with pytest.raises(psycopg.errors.IoError) as e:
        conn.execute("SELECT * FROM milvus_flush('items_idx')")
    assert e.value.diag.message_primary.startswith('could not flush segment 1 of index "items_idx"')
    assert "No space left on device" in e.value.diag.message_primary, e.value.diag.message_primary
    assert "nothing is lost" in e.value.diag.message_detail
    load(conn, 10, seed=9, start_id=5000)
    assert [s[1] for s in segments(conn)] == ["sealed", "growing"]
    assert len(all_index_ids(conn)) == 5010

    grow(store, 64)  # space freed
    assert [r[2] for r in conn.execute("SELECT * FROM milvus_flush('items_idx')")] == ["flushed", "flushed"]
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == 5010

    # A full cache disk: the query that needs a download fails, naming the
    # cause; nothing changes; with space it answers.
    with cluster.connect(conn.info.dbname) as c:
        register_vector(c)
        c.execute(f"SET milvus.cache_dir = '{cache}'")
        with pytest.raises(psycopg.errors.IoError, match="No space left on device"):
            all_index_ids(c)
        grow(cache, 64)
        assert sorted(all_index_ids(c)) == sorted(ids)


def test_a_full_disk_under_the_directory_fails_the_copy_from_pages_clearly(cluster, conn):
    """An embedded index whose directory lost its files (a standby, a
    restored backup) copies them back from its pages; a disk too small for
    them fails the query with the cause, naming the store as Postgres names
    its files (never the data directory's path), leaves no half-written
    file, and answers once there is room."""
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 100000)")
    load(conn, 5000)  # a 1.3 MB insert binlog and its graph: more than 1 MB
    conn.execute("SELECT * FROM milvus_flush('items_idx')")
    heap = sorted(r[0] for r in conn.execute("SELECT id FROM items"))
    data_dir = conn.execute("SHOW data_directory").fetchone()[0]
    # A small, empty disk mounted over the index's directory hides its files.
    directory = objects_of(cluster, conn)
    pg = pwd.getpwnam("postgres")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size=1m,mode=0700,uid={pg.pw_uid},gid={pg.pw_gid}", "tmpfs",
                    str(directory)], check=True)
    try:
        with cluster.connect(conn.info.dbname) as c:
            register_vector(c)
            with pytest.raises(psycopg.errors.IoError) as e:
                all_index_ids(c)
            message = e.value.diag.message_primary
            assert message.startswith('could not restore the objects of index "items_idx" from its pages'), message
            assert "No space left on device" in message and "pg_milvus/objects" in message, message
            assert data_dir not in message, message
            assert not [f for f in directory.rglob("*") if "#" in f.name], "no staging file left"
            grow(directory, 64)
            assert sorted(all_index_ids(c)) == heap
    finally:
        subprocess.run(["umount", "--lazy", str(directory)], check=True)


@pytest.mark.parametrize("rebuild", ["TRUNCATE items", "REINDEX INDEX items_idx"])
def test_truncate_and_reindex_never_serve_old_segments(conn, rebuild):
    """Segment ids restart at 1 in a rebuilt index: a backend that loaded
    the old segment 1 must not search it in place of the new one."""
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 100000)")
    load(conn, 5000)
    conn.execute("SELECT * FROM milvus_flush('items_idx')")
    q = clustered(1, seed=3)[0]
    assert len(index_ids(conn, "<->", q, 10)) == 10  # this backend loads segment 1
    if rebuild.startswith("TRUNCATE"):
        conn.execute(rebuild)
        load(conn, 4500, seed=8, start_id=100_000)
    else:
        conn.execute("DELETE FROM items WHERE id >= 4500")
        conn.execute(rebuild)
    conn.execute("SELECT * FROM milvus_flush('items_idx')")
    assert [s[1] for s in segments(conn)] == ["flushed", "growing"]
    heap = {r[0] for r in conn.execute("SELECT id FROM items")}
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == len(heap) == 4500
    assert set(ids) == heap


def test_create_index_reports_progress_and_flushes(cluster, conn):
    load(conn, 9000)
    dbname = conn.info.dbname
    seen = set()

    def build():
        with cluster.connect(dbname) as c:
            c.execute("SET milvus.debug_pause = 300")  # room to observe each flush
            c.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (segment_max_rows = 4500)")

    t = threading.Thread(target=build)
    t.start()
    with cluster.connect(dbname) as watcher:
        while t.is_alive():
            row = watcher.execute(
                "SELECT phase, tuples_total FROM pg_stat_progress_create_index WHERE relid = 'items'::regclass").fetchone()
            if row:
                seen.add(row)
            time.sleep(0.02)
    t.join()
    # Each segment is written as it fills: the first when 4,500 rows of the
    # table have been read (loading is too quick to be seen for long).
    assert {("building index: flushing segments", 4500), ("building index: flushing segments", 9000)} <= seen, seen
    assert [(s[1], s[2], s[3]) for s in segments(conn)] == [("flushed", "ready", 4500)] * 2 + [("growing", "none", 0)]


def wal_bytes_of(conn, statement):
    before = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
    conn.execute(statement)
    return conn.execute("SELECT pg_current_wal_insert_lsn() - %s::pg_lsn", (str(before),)).fetchone()[0]


def test_create_index_writes_segments_not_rows_to_the_wal(cluster, conn):
    """The table's rows go from the heap scan straight to storage: with the
    objects in a store outside the data directory, the WAL of CREATE INDEX
    holds the meta page, a few manifest pages per segment and the rows'
    keys (8 bytes each, which VACUUM reads from the pages), not a record per
    row, so it stays far below the rows' own size (20,000 x 64 float32:
    5.1 MB) and grows with them by their keys alone."""
    load(conn, 20000)
    store = f"storage_url = 'file://{cluster.host}/items-store'"
    small = wal_bytes_of(conn, "CREATE INDEX small_idx ON items USING milvus (embedding vector_l2_ops) "
                               f"WITH (segment_max_rows = 10000, {store}) WHERE id < 2000")
    conn.execute("DROP INDEX small_idx")
    large = wal_bytes_of(conn, "CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) "
                               f"WITH (segment_max_rows = 10000, {store})")
    assert large < 20000 * 64 * 4 / 25, (small, large)
    assert large - small < (20000 - 2000) * 8 * 1.1 + 16 * 1024, (small, large)
    assert [(s[1], s[3]) for s in segments(conn)] == [("flushed", 10000), ("flushed", 10000), ("growing", 0)]
    assert len(set(all_index_ids(conn))) == 20000


def test_create_index_logs_its_segments_once_not_a_record_per_row(conn):
    """The table's rows go from the heap scan straight to segments, and on
    the embedded store each segment's objects go into the index's pages as
    whole-page WAL records, once, as pgvector logs its graph once after a
    build: the WAL of CREATE INDEX is the objects' bytes and the pages'
    headers, so a standby and the WAL archive get the index with it."""
    load(conn, 20000)
    wal = wal_bytes_of(conn, "CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) "
                             "WITH (segment_max_rows = 10000)")
    objects = int(conn.execute("SELECT sum(bytes) FROM milvus_segments('items_idx')").fetchone()[0])
    assert objects <= wal < 1.05 * objects + 256 * 1024, (wal, objects)
    assert [(s[1], s[3]) for s in segments(conn)] == [("flushed", 10000), ("flushed", 10000), ("growing", 0)]
    assert len(set(all_index_ids(conn))) == 20000


def test_create_index_keeps_a_segment_within_maintenance_work_mem(conn):
    """CREATE INDEX gathers each segment's rows in memory before writing
    it: at most segment_max_rows of them, and no more than
    maintenance_work_mem holds (1 MB: 1,048,576 / (8 + 64 x 4) = 3,971
    rows). A NOTICE says so once, with the remedy; every row is indexed,
    once."""
    load(conn, 10000)
    notices = []  # a notice's fields are read in the handler, valid only there
    conn.add_notice_handler(lambda d: notices.append((d.message_primary, d.message_hint)))
    conn.execute("SET maintenance_work_mem = '1MB'")
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) "
                 "WITH (segment_max_rows = 100000)")
    conn.execute("RESET maintenance_work_mem")
    assert [(s[1], s[3]) for s in segments(conn)] == [
        ("flushed", 3971), ("flushed", 3971), ("flushed", 2058), ("growing", 0)]
    budget = [(m, h) for m, h in notices if "maintenance_work_mem" in m]
    assert budget == [('milvus index "items_idx": maintenance_work_mem holds 3971 rows, '
                       "fewer than segment_max_rows (100000)",
                       "Increase maintenance_work_mem for larger segments from the start.")], notices
    assert sorted(all_index_ids(conn)) == list(range(10000))


def test_create_index_concurrently_takes_the_rows_inserted_while_it_ran(cluster, conn):
    """CREATE INDEX CONCURRENTLY: the catalog row is visible while the
    segments are written (before the pages exist: a worker visiting then
    skips the index), and the rows inserted during the build reach the
    index through the validation pass, which reads the built segments'
    rows as VACUUM does. Every row is found once."""
    load(conn, 3000)
    dbname = conn.info.dbname

    def build():
        with cluster.connect(dbname) as c:
            c.execute("SET milvus.debug_pause = 1000")  # each segment held before it is listed
            c.execute("CREATE INDEX CONCURRENTLY items_idx ON items USING milvus (embedding vector_l2_ops) "
                      "WITH (segment_max_rows = 1500)")

    t = threading.Thread(target=build)
    t.start()
    refusals = set()
    with cluster.connect(dbname) as w:
        register_vector(w)
        while t.is_alive():
            time.sleep(0.3)
            n = w.execute("SELECT count(*) FROM items").fetchone()[0]
            load(w, 50, seed=n, start_id=n)
            try:
                w.execute("SELECT * FROM milvus_segments('items_idx')")
            except psycopg.errors.UndefinedTable:
                pass  # not in the catalog yet
            except psycopg.errors.ObjectNotInPrerequisiteState as e:
                refusals.add(e.diag.message_primary)
    t.join()
    # Asked while the segments were being written, the index says so.
    assert refusals == {'milvus index "items_idx" is still being built'}, refusals
    total = conn.execute("SELECT count(*) FROM items").fetchone()[0]
    assert total > 3000
    assert conn.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = 'items_idx'::regclass").fetchone()[0]
    segs = segments(conn)
    assert [s[3] for s in segs if s[1] == "flushed"][:2] == [1500, 1500], segs
    assert sum(s[3] for s in segs) == total, segs
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == total


def test_create_index_of_more_segments_than_may_wait_flushes_as_it_loads(conn):
    """At most 64 sealed segments may wait for their flush; a build writes
    each segment as it fills (here 80 of 100 rows), so however many it
    makes, none waits, none outgrows the limit, every row is found once."""
    load(conn, 8000)
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (segment_max_rows = 100)")
    segs = segments(conn)
    assert [(s[1], s[3]) for s in segs] == [("flushed", 100)] * 80 + [("growing", 0)], segs
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == 8000


def test_create_index_with_storage_refusing_writes_warns_and_keeps_rows(cluster, conn):
    load(conn, 1000)
    readonly = read_only_store(cluster, "readonly-at-build")
    notices = []
    conn.add_notice_handler(lambda d: notices.append((d.severity, d.message_primary)))
    conn.execute(f"CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (storage_url = 'file://{readonly}')")
    assert any(sev == "WARNING" and msg.startswith('could not write the rows of index "items_idx" to storage: storage file://')
               for sev, msg in notices), notices
    assert [s[1] for s in segments(conn)] == ["sealed", "growing"]
    assert len(all_index_ids(conn)) == 1000
    make_writable(readonly)
    assert [r[2] for r in conn.execute("SELECT * FROM milvus_flush('items_idx')")] == ["flushed"]
    assert len(set(all_index_ids(conn))) == 1000


def test_cancelled_flush_returns_promptly_and_loses_nothing(cluster, conn):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 100000)")
    load(conn, 6000)
    dbname = conn.info.dbname
    outcome = {}

    def flush():
        with cluster.connect(dbname) as c:
            outcome["pid"] = c.info.backend_pid
            c.execute("SET milvus.debug_pause = 60000")
            try:
                c.execute("SELECT * FROM milvus_flush('items_idx')")
            except psycopg.errors.QueryCanceled as e:
                outcome["error"] = e.diag.message_primary
                outcome["at"] = time.time()

    t = threading.Thread(target=flush)
    t.start()
    deadline = time.time() + 30
    while time.time() < deadline and not conn.execute(
            "SELECT 1 FROM pg_stat_activity WHERE query LIKE 'SELECT * FROM milvus_flush%' AND state = 'active'").fetchone():
        time.sleep(0.05)
    time.sleep(1.0)  # inside the build, the upload or the pause
    asked = time.time()
    conn.execute("SELECT pg_cancel_backend(%s)", (outcome["pid"],))
    t.join(timeout=30)
    assert outcome.get("error") == "canceling statement due to user request", outcome
    assert outcome["at"] - asked < 2.0, f"cancel took {outcome['at'] - asked:.2f} s"
    # Cancelled before its commit: the rows are growing or sealed, each found once.
    assert {s[1] for s in segments(conn)} <= {"growing", "sealed"}
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == 6000
    assert [r[2] for r in conn.execute("SELECT * FROM milvus_flush('items_idx')")] == ["flushed"]


def test_a_running_flush_shows_flushing_then_building_to_another_session(cluster, conn):
    """milvus_segments() shows what a flush is doing while it runs (the job
    log in shared memory tells): the segment `flushing`, its index
    `building` while the graph is built; cancelled, it is `sealed` again."""
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 100000)")
    load(conn, 6000)  # past the brute-force size: the flush builds a graph
    dbname = conn.info.dbname
    for at, index_state in [("build", "building"), ("upload", "none")]:
        outcome = {}

        def flush():
            with cluster.connect(dbname) as c:
                outcome["pid"] = c.info.backend_pid
                c.execute(f"SET milvus.debug_pause_at = {at}")
                c.execute("SET milvus.debug_pause = 60000")
                try:
                    c.execute("SELECT * FROM milvus_flush('items_idx')")
                except psycopg.errors.QueryCanceled:
                    outcome["cancelled"] = True

        t = threading.Thread(target=flush)
        t.start()
        # Held at `at`: what another session sees there (on the way to the
        # upload, it may see the build first).
        deadline, seen = time.time() + 30, []
        while time.time() < deadline and seen != [(1, index_state)]:
            seen = [(s[0], s[2]) for s in segments(conn) if s[1] == "flushing"]
            time.sleep(0.05)
        assert seen == [(1, index_state)], (at, segments(conn))
        conn.execute("SELECT pg_cancel_backend(%s)", (outcome["pid"],))
        t.join(timeout=30)
        assert outcome.get("cancelled"), outcome
        assert [s[1] for s in segments(conn)] == ["sealed", "growing"]
    assert [r[2] for r in conn.execute("SELECT * FROM milvus_flush('items_idx')")] == ["flushed"]
    assert [s[1:3] for s in segments(conn)] == [("flushed", "ready"), ("growing", "none")]


def test_pages_freed_by_flushes_are_reused(cluster, conn):
    """A flush frees the pages its rows were in; the next rows must reuse
    them, so an index under a steady insert-and-flush load stays the same
    size but for each flushed segment's keys (it grew by every flushed row's
    pages before the FSM was updated) and, since milvus_flush() gives the
    free tail back, a small one. Its objects go to a directory outside the
    data directory: an index on the embedded store also keeps them in its
    pages (the next test)."""
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) "
                 f"WITH (storage_url = 'file://{cluster.host}/items-store')")
    sizes, keys = [], []
    for cycle in range(8):
        load(conn, 1000, seed=cycle, start_id=cycle * 1000)
        conn.execute("SELECT * FROM milvus_flush('items_idx')")
        sizes.append(conn.execute("SELECT pg_relation_size('items_idx') / 8192").fetchone()[0])
        keys.append(conn.execute("SELECT pages FROM milvus_index_pages('items_idx') WHERE kind = 'objects'").fetchone()[0])
    assert keys == list(range(1, 9)), f"one page of keys per 1,000-row segment: {keys}"
    assert [s - k for s, k in zip(sizes, keys)][1:] == [sizes[1] - keys[1]] * 7, f"index pages per cycle: {sizes}"
    assert len(set(all_index_ids(conn))) == 8000
    pages = dict(conn.execute("SELECT kind, pages FROM milvus_index_pages('items_idx')").fetchall())
    assert pages["unreferenced"] == 0 and pages["released"] == 0, pages
    # milvus_flush() also gives the file's free tail back: the index stays
    # a few pages beside its keys, whatever the rows that went through it.
    assert sizes[-1] - keys[-1] <= 3, sizes


def test_an_embedded_index_grows_by_its_objects_alone(conn):
    """On the embedded store a flush writes its objects into the index's
    pages (docs/operations.md, "Replication, backups and PITR") while its rows still take
    theirs: under a steady insert-and-flush load the index grows by the
    objects alone, the rows' pages are reused, and the pages beside the
    objects stay a few and one cycle's rows' at most."""
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)")
    beside, row_pages = [], []
    for cycle in range(8):
        load(conn, 1000, seed=cycle, start_id=cycle * 1000)
        row_pages.append(conn.execute(
            "SELECT pages FROM milvus_index_pages('items_idx') WHERE kind = 'growing'").fetchone()[0])
        conn.execute("SELECT * FROM milvus_flush('items_idx')")
        size = conn.execute("SELECT pg_relation_size('items_idx') / 8192").fetchone()[0]
        objects = conn.execute("SELECT pages FROM milvus_index_pages('items_idx') WHERE kind = 'objects'").fetchone()[0]
        beside.append(size - objects)
    assert beside[-1] == beside[1], f"pages beside the objects per cycle: {beside}"
    assert len(set(all_index_ids(conn))) == 8000
    pages = dict(conn.execute("SELECT kind, pages FROM milvus_index_pages('items_idx')").fetchall())
    assert pages["unreferenced"] == pages["released"] == pages["unpublished"] == 0, pages
    # milvus_flush() also gives the file's free tail back: beside the
    # objects, the index is a few pages and at most one cycle's rows' pages,
    # freed below the objects that were written while they were in use.
    assert beside[-1] <= max(row_pages) + 8, (beside, row_pages)


def test_inserts_seal_a_full_segment_themselves(conn):
    """No worker here (milvus.max_workers = 0): the insert that would take
    the growing segment past segment_max_rows seals it, so no segment ever
    exceeds the limit, and every row is found once."""
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (segment_max_rows = 1000)")
    load(conn, 3500)
    rows = conn.execute("SELECT state, rows, seal_reason FROM milvus_segments('items_idx') ORDER BY segment_id").fetchall()
    sealed = [r for r in rows if r[0] == "sealed"]
    assert len(sealed) == 3 and rows[-1][0] == "growing", rows
    per_page = 30  # 64-d rows: 8 + 256 bytes and a line pointer each, in 8 kB pages
    assert all(1000 - per_page < r[1] <= 1000 and r[2].startswith("pages full: ") for r in sealed), rows
    assert sum(r[1] for r in rows) == 3500
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == 3500
    flushed = conn.execute("SELECT * FROM milvus_flush('items_idx')").fetchall()
    assert [r[2] for r in flushed] == ["flushed"] * 4


@pytest.mark.parametrize("type_,dims,per_page,capacity",
                         [("vector", 768, 2, 340), ("halfvec", 768, 5, 680), ("vector", 64, 30, 2040)])
def test_growing_segments_hold_a_mebibyte_of_rows_by_default(conn, type_, dims, per_page, capacity):
    """Without growing_max_rows, the growing segment seals at the rows
    whose vectors fill 1 MiB (341 rows of 768 dimensions, 682 halfvec,
    2,048 at most), in whole pages, and merge tiers start at 2,048 rows; a
    set value still rules."""
    conn.execute(f"CREATE TABLE wide (id int, v {type_}({dims}))")
    conn.execute(f"CREATE INDEX wide_idx ON wide USING milvus (v {type_}_l2_ops)")
    conn.execute(f"INSERT INTO wide SELECT g, array_fill(g::real, ARRAY[{dims}])::{type_} FROM generate_series(1, 2500) g")
    rows = conn.execute("SELECT state, rows FROM milvus_segments('wide_idx') ORDER BY segment_id").fetchall()
    assert all(r == ("sealed", capacity) for r in rows[:-1]) and rows[-1][0] == "growing", rows
    assert sum(r[1] for r in rows) == 2500
    # Merge tiers start at 2,048 rows however wide: wide segments start below tier 0.
    conn.execute("SELECT * FROM milvus_flush('wide_idx')")
    tiers = {t for (t,) in conn.execute("SELECT tier FROM milvus_segments('wide_idx') WHERE rows = %s", (capacity,))}
    assert tiers == ({0} if capacity == 2040 else {None}), tiers
    conn.execute("ALTER INDEX wide_idx SET (growing_max_rows = 1000)")
    conn.execute(f"INSERT INTO wide SELECT g, array_fill(g::real, ARRAY[{dims}])::{type_} FROM generate_series(1, 2500) g")
    rows = conn.execute("SELECT state, rows FROM milvus_segments('wide_idx') ORDER BY segment_id").fetchall()
    assert ("sealed", 1000 - 1000 % per_page) in rows, rows


def test_a_flush_in_a_rolled_back_transaction_stays_and_loses_nothing(conn):
    """milvus_flush() is maintenance, as VACUUM is: ROLLBACK does not undo
    it (docs/usage.md), and it changes nothing a query returns: the rolled-back
    rows it flushed are never returned, the committed ones all, once."""
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)")
    load(conn, 300)
    with conn.transaction(force_rollback=True):
        load(conn, 200, seed=2, start_id=300)
        assert [r[2] for r in conn.execute("SELECT * FROM milvus_flush('items_idx')")] == ["flushed"]
    assert [(s[1], s[3]) for s in segments(conn)] == [("flushed", 500), ("growing", 0)]
    assert sorted(all_index_ids(conn)) == list(range(300))
