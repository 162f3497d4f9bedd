"""The background workers on a real cluster (pg_milvus preloaded, naptime
1 s): segments seal by rows and by idle time, flush and get indexed with no
call; deleted rows are compacted away while a searcher checks every answer;
two sessions flushing by hand race the workers; storage failures back off,
show in milvus_segments() and heal; orphan objects are collected; a fast
shutdown during a flush is prompt and the work resumes after restart; and a
soak of writers, a deleter and searchers with the workers busy throughout."""

import os
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from pgvector.psycopg import register_vector

from conftest import Cluster
from helpers import (
    all_flushed, all_index_ids, check_search_quality, ExactSearcher, jobs, live_segments, load, near, objects_of,
    run_writers, segments, wait_for,
)


SETTINGS = [
    "milvus.naptime = 1",
    "milvus.seal_idle_time = 3",
    "milvus.gc_interval = 1",
]


@pytest.fixture(scope="module")
def cluster():
    """Overrides conftest's cluster (which runs without workers) for the
    tests of this module."""
    c = Cluster("workers", SETTINGS)
    yield c
    c.stop()


def test_segments_seal_flush_and_get_indexed_by_themselves(cluster, conn):
    conn.execute(
        "CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) "
        "WITH (segment_max_rows = 5000, growing_max_rows = 5000)")
    rows = np.concatenate([load(conn, 6000, seed=1), load(conn, 6000, seed=2, start_id=6000)])

    # More than segment_max_rows: sealed by the inserts themselves, flushed
    # and indexed by the workers, with no call.
    segs = wait_for(lambda: all_flushed(conn), "every row to be flushed")
    assert sum(s[3] for s in segs) == 12_000
    assert any(s[2] == "ready" for s in segs), segs  # big enough for an HNSW graph
    seals = jobs(conn, "seal")
    assert seals and all(j[2] == "done" for j in seals), seals
    assert any(j[3].startswith("pages full: ") for j in seals), seals
    flushes = jobs(conn, "flush")
    assert flushes and all(j[2] == "done" and j[3] == "sealed; background worker" for j in flushes), flushes
    assert sum(j[4] for j in flushes) == 12_000
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == 12_000
    conn.execute("ANALYZE items")
    check_search_quality(conn, "<->", near(rows, 30))

    # A few rows, then nothing: sealed for being idle (milvus.seal_idle_time 3 s).
    load(conn, 100, seed=3, start_id=12_000)
    wait_for(lambda: any(j[3].startswith("idle for") for j in jobs(conn, "seal")), "an idle seal")
    wait_for(lambda: all_flushed(conn), "the idle segment to be flushed")
    assert len(set(all_index_ids(conn))) == 12_100


def test_small_segments_are_flushed_at_once_and_merged_into_large_ones(cluster, conn):
    """Seal small, merge big: inserts seal the growing segment at
    growing_max_rows (in whole pages: 1,980 rows here) and wake the workers,
    which flush each small segment (searched by brute force: no graph to
    build) and merge four of a tier into one segment with a graph, leaving
    the fifth to wait for three more."""
    conn.execute(
        "CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) "
        "WITH (growing_max_rows = 2000, segment_max_rows = 20000)")
    rows = load(conn, 10_000)

    cap = wait_for(lambda: [j[4] for j in jobs(conn, "seal")], "a seal")[0]
    assert 2000 - 100 < cap <= 2000, cap

    def merged():
        segs = segments(conn)
        big = [s for s in segs if s[1] == "flushed" and s[3] == 4 * cap]
        return big if big and big[0][2] == "ready" and not [s for s in segs if s[1] == "sealed"] else None

    wait_for(merged, "four small segments merged into one with a graph")
    segs = segments(conn)
    live = [s for s in segs if s[1] in ("flushed", "growing") and s[3] > 0]
    assert sorted(s[3] for s in live) == [10_000 - 5 * cap, cap, 4 * cap], segs
    seals = jobs(conn, "seal")
    assert all(j[3].endswith(f"pages hold {cap} rows (limit 2000)") for j in seals if j[3].startswith("pages")), seals
    merges = jobs(conn, "compact")
    assert [j[3].split(" [")[0] for j in merges if j[2] == "done"] == ["merge 4 segments of tier 0"], merges
    tiers = conn.execute(
        "SELECT rows, tier FROM milvus_segments('items_idx') WHERE state = 'flushed' ORDER BY rows").fetchall()
    assert tiers == [(cap, 0), (4 * cap, 1)], tiers
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == 10_000
    conn.execute("ANALYZE items")
    check_search_quality(conn, "<->", near(rows, 30))


def test_rows_sealed_during_a_merge_are_flushed_before_it_ends(cluster, conn):
    """A merge takes its inputs' locks only to read and to publish, and a
    worker flushes what inserts seal while it writes: fresh rows never wait
    in pages behind a long merge."""
    db = conn.info.dbname
    conn.execute(f'ALTER DATABASE "{db}" SET milvus.debug_pause_at = merge')
    conn.execute(f'ALTER DATABASE "{db}" SET milvus.debug_pause = 15000')  # a merge of 15 s
    conn.execute(
        "CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) "
        "WITH (growing_max_rows = 2000, segment_max_rows = 20000)")
    load(conn, 4 * 1980 + 10)
    merge = wait_for(lambda: [j for j in jobs(conn, "compact") if j[2] == "running"], "a merge of four segments")
    inputs = merge[0][1]
    assert len(inputs) == 4, merge
    load(conn, 1990, seed=2, start_id=10_000)  # seals one more segment

    def flushed_while_merging():
        merging = [j for j in jobs(conn, "compact") if j[2] == "running"]
        fresh = [s for s in segments(conn) if s[1] == "flushed" and s[0] not in inputs]
        assert merging or not fresh, "the merge ended first"
        return merging and fresh

    wait_for(flushed_while_merging, "the new segment flushed while the merge runs", timeout=12)
    wait_for(lambda: [j for j in jobs(conn, "compact") if j[2] == "done"], "the merge done", timeout=30)
    conn.execute(f'ALTER DATABASE "{db}" RESET ALL')
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == 4 * 1980 + 10 + 1990


def test_quick_merges_run_while_a_long_merge_writes(cluster, conn):
    """Segments flushed while a long merge writes are merged meanwhile, not
    after it (CompactionPolicy::is_quick): two compactions of one index at
    once, on disjoint segments, and every row is still found once."""
    db = conn.info.dbname
    conn.execute(f'ALTER DATABASE "{db}" SET milvus.debug_pause_at = merge')
    conn.execute(f'ALTER DATABASE "{db}" SET milvus.debug_pause = 5000')  # each merge takes 5 s
    try:
        conn.execute(
            "CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) "
            "WITH (growing_max_rows = 2000, segment_max_rows = 20000)")
        load(conn, 1990)  # one full segment, and ten rows growing
        wait_for(lambda: [s for s in segments(conn) if s[1] == "flushed"], "the full segment flushed")
        conn.execute("DELETE FROM items WHERE id < 600")
        conn.execute("VACUUM items")  # 30% of it deleted: a purge, not a quick merge
        purge = wait_for(lambda: [j for j in jobs(conn, "compact") if j[2] == "running"], "the purge")
        for start in (10_000, 20_000):  # two undersized segments
            load(conn, 50, seed=start, start_id=start)
            conn.execute("SELECT milvus_flush('items_idx')")

        def both_running():
            running = [j for j in jobs(conn, "compact") if j[2] == "running"]
            assert purge[0] in running or len(running) < 2, "the purge ended first"
            return len(running) == 2 and running

        running = wait_for(both_running, "a quick merge while the purge writes", timeout=4.5)
        assert not set(running[0][1]) & set(running[1][1]), running
        assert "small segments" in running[1][3], running
        wait_for(lambda: all(j[2] == "done" for j in jobs(conn, "compact")), "both merges done", timeout=30)
    finally:
        conn.execute(f'ALTER DATABASE "{db}" RESET ALL')
        # Nothing of this database left running (or held) when it is dropped.
        wait_for(lambda: not [j for j in jobs(conn) if j[2] == "running"], "every job done", timeout=30)
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == 1990 - 600 + 100


def thread_nices(pid, name):
    """The nice value of each thread of process `pid` named `name`."""
    nices = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if (task / "comm").read_text().strip() != name:
                continue
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        nices.append(int(fields[16]))  # field 19 of proc(5), counted from the state (field 3)
    return nices


def test_merges_run_at_the_maintenance_nice_value(cluster, conn):
    """A merge's graph build yields the CPU to queries when both want it:
    the thread a worker merges on runs at milvus.maintenance_nice (a
    database setting reaches the workers), the worker's own thread (which
    takes locks) and the backends as they were."""
    db = conn.info.dbname
    conn.execute(f'ALTER DATABASE "{db}" SET milvus.debug_pause_at = merge')
    conn.execute(f'ALTER DATABASE "{db}" SET milvus.debug_pause = 15000')
    conn.execute(f'ALTER DATABASE "{db}" SET milvus.maintenance_nice = 7')
    try:
        conn.execute(
            "CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) "
            "WITH (growing_max_rows = 2000, segment_max_rows = 20000)")
        load(conn, 4 * 1980 + 10)
        wait_for(lambda: [j for j in jobs(conn, "compact") if j[2] == "running"], "a merge of four segments")
        workers = [r[0] for r in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_milvus worker'").fetchall()]
        merging = wait_for(lambda: [(pid, n) for pid in workers for n in thread_nices(pid, "milvus-compact")],
                           "the merge's thread")
        assert [n for _, n in merging] == [7], merging
        pid = merging[0][0]
        # On Linux a pid names its process's main thread.
        assert os.getpriority(os.PRIO_PROCESS, pid) == 0, "the worker's own thread keeps its priority"
        assert os.getpriority(os.PRIO_PROCESS, conn.info.backend_pid) == 0
    finally:
        conn.execute(f'ALTER DATABASE "{db}" RESET ALL')
    wait_for(lambda: [j for j in jobs(conn, "compact") if j[2] == "done"], "the merge done", timeout=30)
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == 4 * 1980 + 10


def test_deleted_rows_are_compacted_away_while_searches_stay_exact(cluster, conn):
    # Segments below the brute-force threshold: every answer must be exact.
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (segment_max_rows = 20000)")
    data = []
    for b in range(3):
        data.append(load(conn, 1300, seed=b, start_id=b * 1300))
        conn.execute("SELECT * FROM milvus_flush('items_idx')")
    conn.execute("DELETE FROM items WHERE id % 10 < 3")
    with ExactSearcher(cluster, conn, near(np.concatenate(data), 20)) as searcher:
        conn.execute("VACUUM items")  # tombstones: 30% of each segment is dead
        wait_for(lambda: [s for s in live_segments(conn) if s[1] == "flushed"] and
                 all(s[4] == 0 for s in live_segments(conn)), "the workers to compact the dead rows away")
        wait_for(searcher.more_rounds(2), "searches after the compaction")
    assert searcher.rounds > 2 and not searcher.failures, searcher.failures[:3]
    compactions = jobs(conn, "compact")
    assert compactions and all(j[2] == "done" for j in compactions), compactions
    assert sum(s[3] for s in live_segments(conn)) == 2730
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == 2730 and not any(i % 10 < 3 for i in ids)


def test_flushes_from_two_sessions_race_the_workers(cluster, conn):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (segment_max_rows = 300)")
    dbname = conn.info.dbname
    failures = []

    def flushers(c, stop):
        def flush_loop():
            try:
                with cluster.connect(dbname) as other:
                    while not stop.is_set():
                        other.execute("SELECT * FROM milvus_flush('items_idx')")
            except Exception as e:
                failures.append(e)

        second = threading.Thread(target=flush_loop)
        second.start()
        while not stop.is_set():
            c.execute("SELECT * FROM milvus_flush('items_idx', wait => false)")
            c.execute("SELECT * FROM milvus_flush('items_idx')")
        second.join()

    run_writers(cluster, dbname, flushers, writers=4, rows=1000, batch=50)
    assert not failures, failures
    conn.execute("SELECT * FROM milvus_flush('items_idx')")
    heap = {r[0] for r in conn.execute("SELECT id FROM items")}
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)), "a row was returned twice"
    assert set(ids) == heap and len(heap) == 4000
    # Each segment was sealed once and flushed once, by whoever got there first.
    for kind in ("seal", "flush"):
        done = [j[1][0] for j in jobs(conn, kind) if j[2] == "done"]
        assert len(done) == len(set(done)), (kind, done)
    assert {s[0] for s in segments(conn) if s[1] != "growing"} >= set(j[1][0] for j in jobs(conn, "flush") if j[2] == "done")


def test_storage_failures_back_off_show_and_heal(cluster, conn):
    # The index's store is a path through a file: every write fails until
    # the file goes.
    blocker = Path(cluster.host) / "not-a-directory"
    blocker.write_text("a file where the store's directory should be\n")
    conn.execute(f"CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (storage_url = 'file://{blocker}/objects')")
    log = Path(cluster.host) / "server.log"
    log_start = log.stat().st_size
    try:
        load(conn, 500)
        assert conn.execute("SELECT state FROM milvus_flush('items_idx', wait => false)").fetchall() == [("sealed",)]
        error = wait_for(lambda: conn.execute(
            "SELECT error FROM milvus_segments('items_idx') WHERE state = 'sealed' AND error IS NOT NULL").fetchone(),
            "the failure to show in milvus_segments()")[0]
        assert "could not flush segment 1" in error and "retrying with backoff" in error, error
        # Meanwhile nothing is lost: the sealed rows are searched from pages.
        assert len(set(all_index_ids(conn))) == 500
        wait_for(lambda: sum(1 for j in jobs(conn, "flush") if j[2] == "failed") >= 2, "a retry")
    finally:
        blocker.unlink()  # the storage is fixed
    # Backoff doubles from the naptime: a retry comes within seconds.
    wait_for(lambda: [s for s in segments(conn) if s[0] == 1 and s[1] == "flushed"], "the flush to succeed", timeout=90)
    assert conn.execute("SELECT error FROM milvus_segments('items_idx') WHERE segment_id = 1").fetchone() == (None,)
    logged = log.read_text()[log_start:]
    assert logged.count('background work on index "items_idx" failed') == 1, "logged once per failure streak"
    assert 'background work on index "items_idx" works again after' in logged
    assert len(set(all_index_ids(conn))) == 500


def test_a_failed_flush_keeps_its_whole_cause_and_leaks_nothing(cluster, conn):
    """A failed visit closes its index on the early return (no relcache
    leak logged) and rolls its transaction back (nothing of it commits)."""
    # A long name and a deep path: the message outgrows what the job log and
    # the retry slots hold (it was cut at 255 bytes, now the middle of what
    # passes 1024 goes), and the cause comes last.
    name = "i" * 63
    store = Path(cluster.host).joinpath(*[c * 200 for c in "defgh"]) / "store"
    store.mkdir(parents=True, exist_ok=True)
    for p in [store, *store.parents]:
        if str(p).startswith(cluster.host + "/"):
            shutil.chown(p, "postgres", "postgres")
    conn.execute(f"CREATE INDEX {name} ON items USING milvus (embedding vector_l2_ops) WITH (storage_url = 'file://{store}')")
    log = Path(cluster.host) / "server.log"
    log_start = log.stat().st_size
    rollbacks = "SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()"
    rolled_back = conn.execute(rollbacks).fetchone()[0]
    os.chmod(store, 0)
    try:
        load(conn, 300)
        conn.execute(f"SELECT * FROM milvus_flush('{name}', wait => false)")
        error = wait_for(lambda: conn.execute(
            f"SELECT error FROM milvus_segments('{name}') WHERE state = 'sealed' AND error IS NOT NULL").fetchone(),
            "the failure to show in milvus_segments()")[0]
        assert "Permission denied (os error 13)" in error and "retrying with backoff" in error, error
        assert len(error) > 1000, error
        wait_for(lambda: sum(1 for j in jobs(conn, "flush") if j[2] == "failed") >= 2, "a retry")
        failed = [j for j in jobs(conn, "flush") if j[2] == "failed"]
        assert all(j[5].endswith("Permission denied (os error 13)") for j in failed), failed
        # A failed job commits nothing: each failed visit's transaction is
        # rolled back (the workers report their counts as they exit).
        wait_for(lambda: conn.execute(rollbacks).fetchone()[0] - rolled_back >= 2, "the failed visits to roll back")
    finally:
        os.chmod(store, 0o700)
    wait_for(lambda: [s for s in segments(conn, name) if s[0] == 1 and s[1] == "flushed"], "the flush to succeed", timeout=90)
    # Before: every failed attempt logged a relcache reference leak.
    assert "leak" not in log.read_text()[log_start:]


def test_more_databases_than_workers_are_all_served():
    """One worker, three databases: each gets its turn (before, only the
    first in pg_database was ever visited)."""
    c = Cluster("fair", ["milvus.max_workers = 1", "milvus.naptime = 1", "milvus.seal_idle_time = 2"])
    names = ["fair_a", "fair_b", "fair_c"]
    try:
        with c.connect() as admin:
            for n in names:
                admin.execute(f"CREATE DATABASE {n}")
        conns = [c.connect(n) for n in names]
        for conn in conns:
            conn.execute("CREATE EXTENSION pg_milvus")
            conn.execute("CREATE TABLE t (v vector(4))")
            conn.execute("CREATE INDEX t_idx ON t USING milvus (v)")
            conn.execute("INSERT INTO t SELECT array[g, 0, 0, 0]::vector FROM generate_series(1, 200) g")

        def flushed(conn):
            """Rows in flushed segments (compaction may merge them)."""
            return conn.execute("SELECT coalesce(sum(rows), 0) FROM milvus_segments('t_idx') WHERE state = 'flushed'").fetchone()[0]

        for n, conn in zip(names, conns):
            wait_for(lambda: flushed(conn) == 200, f"database {n}'s segment to be sealed and flushed", timeout=60)
        # And again: the queue keeps turning.
        for conn in conns:
            conn.execute("INSERT INTO t SELECT array[g, 1, 0, 0]::vector FROM generate_series(1, 50) g")
        for n, conn in zip(names, conns):
            wait_for(lambda: flushed(conn) == 250, f"database {n}'s second segment", timeout=60)
        for conn in conns:
            conn.close()
    finally:
        c.stop()


def test_workers_collect_orphans_and_never_referenced_objects(cluster, conn):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 100000)")
    load(conn, 5000)
    conn.execute("SELECT * FROM milvus_flush('items_idx')")
    objects = objects_of(cluster, conn)
    referenced = sorted(p for p in objects.rglob("*") if p.is_file())
    assert len(referenced) == 2
    # An upload whose commit never came (a crash), two hours old.
    orphan = objects / f"{99:020}" / "insert-00000000000000ff.binlog"
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"left over by a crash")
    for p in (orphan.parent, orphan):  # as the server would have written it
        shutil.chown(p, "postgres", "postgres")
    old = time.time() - 7200
    os.utime(orphan, (old, old))
    for p in referenced:
        os.utime(p, (old, old))
    # The default grace period (an hour) has passed for the orphan.
    wait_for(lambda: not orphan.exists(), "the workers to collect the orphan")
    time.sleep(2)  # a few more collections
    assert sorted(p for p in objects.rglob("*") if p.is_file()) == referenced
    # The collection that deleted the orphan logs its count when it ends,
    # which on a busy machine can be after the file is gone.
    gc_jobs = wait_for(lambda: [j for j in jobs(conn, "gc") if j[4]], "the collection's job done", timeout=30)
    assert gc_jobs[0][2] == "done" and gc_jobs[0][4] == 1, gc_jobs
    assert len(all_index_ids(conn)) == 5000


def test_fast_shutdown_during_a_flush_is_prompt_and_the_flush_resumes(cluster, conn):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)")
    dbname = conn.info.dbname
    # The worker's flush will hold still between upload and commit.
    conn.execute("ALTER SYSTEM SET milvus.debug_pause = 600000")
    conn.execute("SELECT pg_reload_conf()")
    time.sleep(0.5)
    load(conn, 5000)
    conn.execute("SELECT * FROM milvus_flush('items_idx', wait => false)")
    wait_for(lambda: [j for j in jobs(conn, "flush") if j[2] == "running"], "the worker's flush to start")
    conn.execute("ALTER SYSTEM RESET milvus.debug_pause")  # for the restart
    conn.close()
    started = time.monotonic()
    cluster.stop()
    took = time.monotonic() - started
    # Not a timing assertion on speed: a worker that ignored SIGTERM would
    # hold the shutdown for the whole 600 s pause.
    assert took < 60, f"pg_ctl stop -m fast took {took:.1f} s"
    cluster.restart()
    with cluster.connect(dbname) as c:
        register_vector(c)
        wait_for(lambda: [s for s in segments(c) if s[0] == 1 and s[1] == "flushed"], "the flush to resume after restart")
        ids = all_index_ids(c)
        assert len(ids) == len(set(ids)) == 5000


def test_everything_works_without_preload():
    """Invariant 8: without shared_preload_libraries there are no workers and
    no job log; milvus_flush(wait => false) says so and flushes itself."""
    c = Cluster("nopreload", ["shared_preload_libraries = ''"])
    try:
        with c.connect() as conn:
            conn.execute("CREATE EXTENSION pg_milvus")
            register_vector(conn)
            conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, category int, embedding vector(64))")
            conn.execute(
                "CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 100000)")
            rows = load(conn, 3000)
            notices = []
            conn.add_notice_handler(lambda d: notices.append(d.message_primary))
            assert conn.execute("SELECT state FROM milvus_flush('items_idx', wait => false)").fetchall() == [("flushed",)]
            assert any("no pg_milvus background workers run" in n for n in notices), notices
            assert conn.execute("SELECT count(*) FROM milvus_jobs").fetchone() == (0,)
            conn.execute("ANALYZE items")
            check_search_quality(conn, "<->", near(rows, 20))
    finally:
        c.stop()


SOAK_SECONDS = int(os.environ.get("PG_MILVUS_SOAK_SECONDS", "60"))


def test_soak_writers_deleter_searchers_and_workers(cluster, conn):
    """A bounded soak (PG_MILVUS_SOAK_SECONDS, 60 by default): 4 writers,
    1 deleter with VACUUMs, 2 searchers, and the workers sealing (small
    segments), flushing and compacting throughout. Every answer must be 10
    distinct rows in distance order (a stale index entry would surface as a
    row out of order); at the end the index holds exactly the table."""
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (segment_max_rows = 2000)")
    dbname = conn.info.dbname
    stop = threading.Event()
    errors, stats = [], {"inserted": 0, "deleted": 0, "searches": 0}
    lock = threading.Lock()
    committed = [0] * 4  # ids below w * 10M + committed[w] are in the table or deleted

    def worker(body):
        def run():
            try:
                with cluster.connect(dbname) as c:
                    register_vector(c)
                    body(c)
            except Exception as e:  # reported by the test thread
                errors.append(e)
                stop.set()
        return threading.Thread(target=run)

    def writer(w):
        def body(c):
            rng = np.random.default_rng(w)
            next_id = w * 10_000_000
            while not stop.is_set():
                rows = [(next_id + i, int(rng.integers(10)), v) for i, v in enumerate(near_data(rng, 50))]
                with c.transaction(), c.cursor() as cur:
                    cur.executemany("INSERT INTO items VALUES (%s, %s, %s)", rows)
                next_id += 50
                with lock:
                    stats["inserted"] += 50
                    committed[w] += 50
                time.sleep(0.2)  # about 1,000 rows/s in all: a soak, not a load test
        return body

    def deleter(c):
        rng, rounds = np.random.default_rng(99), 0
        while not stop.is_set():
            with lock:
                pool = [(w, n) for w, n in enumerate(committed) if n]
            if not pool:
                time.sleep(0.1)
                continue
            victims = [int(w * 10_000_000 + rng.integers(n)) for w, n in (pool[i] for i in rng.integers(len(pool), size=40))]
            gone = c.execute("DELETE FROM items WHERE id = ANY(%s) RETURNING id", (victims,)).fetchall()
            with lock:
                stats["deleted"] += len(gone)
            rounds += 1
            if rounds % 5 == 0:
                c.execute("VACUUM items")
            time.sleep(0.1)

    def searcher(s):
        def body(c):
            rng = np.random.default_rng(100 + s)
            while not stop.is_set():
                q = near_data(rng, 1)[0]
                rows = c.execute("SELECT id, embedding <-> %s FROM items ORDER BY embedding <-> %s LIMIT 10", (q, q)).fetchall()
                ids, dists = [r[0] for r in rows], [r[1] for r in rows]
                if len(set(ids)) != len(ids) or any(a > b + 1e-6 for a, b in zip(dists, dists[1:])):
                    raise AssertionError(f"bad answer: {rows}")
                with lock:
                    stats["searches"] += 1
        return body

    done_kinds = set()

    def monitor(c):
        # milvus_jobs keeps the last 128 jobs: a long soak outlives it.
        while not stop.is_set():
            done_kinds.update(r[0] for r in c.execute("SELECT kind FROM milvus_jobs WHERE state = 'done'"))
            time.sleep(1)

    threads = [worker(writer(w)) for w in range(4)] + [worker(deleter), worker(monitor)] + [worker(searcher(s)) for s in range(2)]
    for t in threads:
        t.start()
    stop.wait(SOAK_SECONDS)
    stop.set()
    ended = time.monotonic()
    for t in threads:
        t.join(120)
    print(f"soak: {stats}, jobs done: {sorted(done_kinds)}, threads ended in {time.monotonic() - ended:.1f} s")
    assert not errors, errors
    assert stats["inserted"] > 0 and stats["deleted"] > 0 and stats["searches"] > 0, stats
    done_kinds.update(j[0] for j in jobs(conn) if j[2] == "done")
    assert {"seal", "flush", "compact"} <= done_kinds, done_kinds  # the workers worked throughout

    conn.execute("VACUUM items")
    heap = {r[0] for r in conn.execute("SELECT id FROM items")}
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)), "a row offered twice"
    assert set(ids) == heap, (len(set(ids) - heap), len(heap - set(ids)))
    assert len(heap) == stats["inserted"] - stats["deleted"]


CENTRES = np.random.default_rng(7).uniform(-1, 1, (50, 64))


def near_data(rng, n):
    """`n` vectors of the soak's one mixture."""
    return (CENTRES[rng.integers(0, len(CENTRES), n)] + 0.1 * rng.standard_normal((n, 64))).astype(np.float32)


def test_workers_leave_an_index_being_built_concurrently_alone(cluster, conn):
    """CREATE INDEX CONCURRENTLY puts the index in the catalog before its
    build writes any page (am/build.rs writes the segments first). Workers
    visiting meanwhile skip it: no failed visit, and the index, once
    built, holds every row once."""
    load(conn, 3000)
    log = Path(cluster.host) / "server.log"
    log_start = log.stat().st_size
    dbname = conn.info.dbname
    with cluster.connect(dbname) as c:
        c.execute("SET milvus.debug_pause = 2500")  # each segment held: several naptimes in all
        c.execute("CREATE INDEX CONCURRENTLY items_idx ON items USING milvus (embedding vector_l2_ops) "
                  "WITH (segment_max_rows = 1000)")
    logged = log.read_text()[log_start:]
    assert "failed" not in logged and "could not read block" not in logged, logged
    assert [s[3] for s in segments(conn) if s[1] == "flushed"] == [1000] * 3
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == 3000
