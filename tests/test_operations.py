"""What a DBA does every day, on indexes with flushed segments: base
backups in tar and plain form of a cluster whose OIDs are long, messages
with no Rust backtrace and no server path, inspection and maintenance
within a role's own rights, seal reasons that say what happened."""

import subprocess
import tarfile
import threading
from pathlib import Path

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from conftest import CLUSTER, Cluster, DIMS, PG_BIN
from helpers import all_index_ids, index_ids, load, near


BIN = PG_BIN
TAR_NAME_MAX = 99  # tar's limit on a member's name, which pg_basebackup keeps


def as_postgres(*args, **kwargs):
    return subprocess.run(["runuser", "-u", "postgres", "--", *map(str, args)], check=True, capture_output=True,
                          text=True, **kwargs)


@pytest.fixture
def long_oids():
    """A cluster whose next OID has ten digits: every database, table and
    index made from now on has an OID as long as an OID gets."""
    c = Cluster("longoids", ["milvus.max_workers = 0"])
    subprocess.run([CLUSTER, "stop", c.name], check=True)
    as_postgres(BIN / "pg_resetwal", "-o", "4000000000", "-D", Path(c.host) / "data")
    subprocess.run([CLUSTER, "restart", c.name], check=True)
    yield c
    c.stop()


def test_base_backups_of_long_oids_in_tar_and_plain_form(long_oids):
    with long_oids.connect() as admin:
        admin.execute("CREATE DATABASE app")
        assert admin.execute("SELECT oid FROM pg_database WHERE datname = 'app'").fetchone()[0] >= 4_000_000_000
    with long_oids.connect("app") as p:
        p.execute("CREATE EXTENSION pg_milvus")
        register_vector(p)
        p.execute(f"CREATE TABLE items (id bigint PRIMARY KEY, category int, embedding vector({DIMS}))")
        rows = load(p, 3000)
        p.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (segment_max_rows = 1000)")
        rows = np.concatenate([rows, load(p, 200, seed=2, start_id=3000)])
        p.execute("SELECT milvus_flush('items_idx')")
        index_oid = p.execute("SELECT 'items_idx'::regclass::oid").fetchone()[0]
        assert index_oid >= 4_000_000_000
        flushed = p.execute("SELECT count(*) FROM milvus_segments('items_idx') WHERE state = 'flushed'").fetchone()[0]
        assert flushed >= 4
        queries = near(rows, 5)
        expected = [index_ids(p, "<->", q, 10) for q in queries]

    # The flush left objects in the store and in the cache, both in the data
    # directory: every name fits tar, and the cache is not in the backup.
    data = Path(long_oids.host) / "data"
    names = [str(f.relative_to(data)) for f in (data / "pg_milvus").rglob("*") if f.is_file()]
    assert any("/pgsql_tmp_cache/" in n for n in names) and any("/insert-" in n for n in names)
    assert max(len(n) for n in names if "/pgsql_tmp_cache/" not in n) <= TAR_NAME_MAX

    backup = Path(long_oids.host) / "backup-tar"
    as_postgres(BIN / "pg_basebackup", "-h", long_oids.host, "-p", long_oids.port, "-U", "postgres",
                "-D", backup, "-Ft", "-X", "fetch", "-c", "fast", cwd="/")
    with tarfile.open(backup / "base.tar") as tar:
        members = tar.getnames()
    objects = [m for m in members if m.startswith("pg_milvus/objects/")]
    assert sum("/insert-" in m for m in objects) == flushed
    assert not any("pgsql_tmp_cache" in m for m in members), "the cache is rebuilt from the store, not backed up"

    # Plain form, started as a standby: it answers from the objects the
    # backup carried, its cache empty.
    standby = Cluster.standby_of("longoids_standby", long_oids)
    try:
        with standby.connect("app") as s:
            register_vector(s)
            assert [index_ids(s, "<->", q, 10) for q in queries] == expected
            assert sorted(all_index_ids(s)) == list(range(3200))
    finally:
        standby.stop()


def test_no_rust_backtrace_reaches_a_client():
    c = Cluster("backtraces", ["milvus.max_workers = 0"], env={"RUST_BACKTRACE": "1"})
    try:
        with c.connect() as conn:
            conn.execute("CREATE EXTENSION pg_milvus")
            conn.execute("CREATE TABLE t (id int, v vector(3))")
            failures = [
                "CREATE INDEX ON t USING milvus (v vector_l2_ops) WITH (m = 1000)",
                "CREATE INDEX ON t USING milvus (v vector_l2_ops) WITH (storage_url = 'bogus://x')",
                "CREATE INDEX ON t USING milvus (v vector_l2_ops) WITH (storage_url = 's3://')",
                "SELECT '[1,2'::vector",
                "SELECT * FROM milvus_segments('t')",
            ]
            for statement in failures:
                with pytest.raises(psycopg.Error) as e:
                    conn.execute(statement)
                diag = e.value.diag
                text = "\n".join(filter(None, [diag.message_primary, diag.message_detail, diag.message_hint]))
                assert "backtrace" not in text.lower() and "rust_begin_unwind" not in text, text
                assert text.count("\n") < 3, text
    finally:
        c.stop()


@pytest.fixture
def roles(conn):
    conn.execute("CREATE ROLE milvus_alice LOGIN")
    conn.execute("CREATE ROLE milvus_bob LOGIN")
    yield
    conn.execute("RESET ROLE")
    for role in ["milvus_alice", "milvus_bob"]:
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE {role}")


def test_inspection_needs_the_right_to_read_the_table(cluster, conn, roles):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)")
    load(conn, 300)
    conn.execute("SELECT milvus_flush('items_idx')")
    conn.execute("SET ROLE milvus_alice")
    for call in ["milvus_segments('items_idx')", "milvus_index_pages('items_idx')"]:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied for index items_idx"):
            conn.execute(f"SELECT * FROM {call}")
    conn.execute("RESET ROLE")
    conn.execute("GRANT SELECT ON items TO milvus_alice")
    conn.execute("SET ROLE milvus_alice")
    assert conn.execute("SELECT count(*) FROM milvus_segments('items_idx')").fetchone()[0] == 2
    assert conn.execute("SELECT count(*) FROM milvus_index_pages('items_idx')").fetchone()[0] > 0


def test_no_server_path_in_a_message(cluster, conn, roles):
    data_dir = conn.execute("SHOW data_directory").fetchone()[0]
    # A storage URL inside the data directory is refused without naming it.
    with pytest.raises(psycopg.errors.InvalidParameterValue) as e:
        conn.execute(f"CREATE INDEX ON items USING milvus (embedding vector_l2_ops) "
                     f"WITH (storage_url = 'file://{data_dir}/elsewhere')")
    assert data_dir not in e.value.diag.message_detail
    # Objects gone from the embedded store's directory, and from the cache:
    # copied back from the index's pages, so the search answers.
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)")
    rows = load(conn, 300)
    conn.execute("SELECT milvus_flush('items_idx')")
    conn.execute("GRANT SELECT ON items TO milvus_alice")
    data = Path(cluster.host) / "data" / "pg_milvus"
    index_oid = str(conn.execute("SELECT 'items_idx'::regclass::oid").fetchone()[0])
    for f in (data / "objects").rglob("*.bin"):
        if f.parts[-3] == index_oid:
            f.unlink()
    for f in (data / "pgsql_tmp_cache" / "objects").iterdir():
        f.unlink()
    dbname = conn.info.dbname
    with cluster.connect(dbname) as fresh:
        register_vector(fresh)
        fresh.execute("SET ROLE milvus_alice")
        assert len(fresh.execute("SELECT id FROM items ORDER BY embedding <-> %s LIMIT 5", (rows[0],)).fetchall()) == 5


def test_maintenance_of_every_index_means_the_callers_own(conn, roles):
    for role, table in [("milvus_alice", "a"), ("milvus_bob", "b")]:
        conn.execute(f"CREATE TABLE {table} (id int, v vector(3))")
        conn.execute(f"CREATE INDEX {table}_idx ON {table} USING milvus (v vector_l2_ops)")
        conn.execute(f"INSERT INTO {table} SELECT i, ARRAY[i, 1, 2]::real[]::vector FROM generate_series(1, 50) i")
        conn.execute(f"ALTER TABLE {table} OWNER TO {role}")
    conn.execute("SET ROLE milvus_alice")
    assert [r[0] for r in conn.execute("SELECT index::text FROM milvus_flush()")] == ["a_idx"]
    assert {r[0] for r in conn.execute("SELECT index::text FROM milvus_compact()")} <= {"a_idx"}
    conn.execute("RESET ROLE")
    assert conn.execute("SELECT state, rows FROM milvus_segments('b_idx')").fetchall() == [("growing", 50)]
    conn.execute("INSERT INTO a VALUES (51, '[1,2,3]')")
    # A superuser owns them all.
    assert [r[0] for r in conn.execute("SELECT index::text FROM milvus_flush() ORDER BY 1")] == ["a_idx", "b_idx"]


def test_a_seal_by_pages_says_so(conn):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 1000)")
    # Rows of a transaction that rolled back fill the growing pages: the
    # insert that finds them full seals a segment of a few live rows.
    conn.execute("BEGIN")
    load(conn, 1200)
    conn.execute("ROLLBACK")
    load(conn, 10, seed=2, start_id=5000)
    reasons = conn.execute("SELECT seal_reason FROM milvus_segments('items_idx') WHERE state = 'sealed'").fetchall()
    assert reasons and all(r[0].startswith("pages full: ") for r in reasons), reasons
    assert "rows (limit 1000)" in reasons[0][0]


def test_a_cache_a_quarter_of_the_working_set_serves_every_connection(cluster, db):
    """Two tables of eight segments each (~70 MB of objects), a 16 MB cache,
    100 connections of one query each from four clients at once: every
    answer right, no error."""
    dims, per_segment = 256, 4400
    dbname = db.info.dbname
    register_vector(db)
    rng = np.random.default_rng(7)
    data = {}
    for table in ["a", "b"]:
        db.execute(f"CREATE TABLE {table} (id int, v vector({dims}))")
        db.execute(f"CREATE INDEX {table}_idx ON {table} USING milvus (v vector_l2_ops) "
                   f"WITH (segment_max_rows = {per_segment}, growing_max_rows = {per_segment})")
        data[table] = rng.standard_normal((8 * per_segment, dims)).astype(np.float32)
        with db.cursor() as cur, cur.copy(f"COPY {table} (id, v) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "vector"])
            for i, v in enumerate(data[table]):
                copy.write_row((i, v))
        db.execute(f"SELECT milvus_flush('{table}_idx')")
        assert db.execute(f"SELECT count(*) FROM milvus_segments('{table}_idx') WHERE state = 'flushed'").fetchone()[0] >= 8
    stored = db.execute("SELECT sum(bytes) FROM milvus_segments('a_idx') s UNION ALL "
                        "SELECT sum(bytes) FROM milvus_segments('b_idx')").fetchall()
    assert sum(r[0] for r in stored) >= 4 * (16 << 20), stored
    queries = {t: data[t][rng.integers(0, len(data[t]), 4)] for t in data}
    expected = {t: [[r[0] for r in db.execute(f"SELECT id FROM {t} ORDER BY v <-> %s LIMIT 10", (q,))]
                    for q in queries[t]] for t in data}
    db.execute(f'ALTER DATABASE "{dbname}" SET milvus.cache_size = 16')
    # The flushes left every segment in the cache: start from an empty one.
    for f in (Path(cluster.host) / "data" / "pg_milvus" / "pgsql_tmp_cache" / "objects").iterdir():
        f.unlink()

    errors, answered = [], []

    def client(n):
        for i in range(25):
            table = "ab"[(n + i) % 2]
            q = (n * 25 + i) % 4
            try:
                with cluster.connect(dbname) as c:
                    register_vector(c)
                    got = [r[0] for r in c.execute(f"SELECT id FROM {table} ORDER BY v <-> %s LIMIT 10",
                                                   (queries[table][q],))]
                answered.append(got == expected[table][q])
            except psycopg.Error as e:
                errors.append(str(e))

    try:
        threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [] and len(answered) == 100 and all(answered), (errors[:3], answered.count(False))
        with cluster.connect(dbname) as c:
            misses, evictions = c.execute("SELECT misses, evictions FROM milvus_cache_stats()").fetchone()
            assert misses >= 32 and evictions > 0, (misses, evictions)
    finally:
        db.execute(f'ALTER DATABASE "{dbname}" RESET milvus.cache_size')


def test_verify_says_which_segments_the_store_can_no_longer_rebuild(cluster, conn):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 1000)")
    rows = load(conn, 2500)
    conn.execute("SELECT milvus_flush('items_idx')")
    conn.execute("DELETE FROM items WHERE id < 10")
    # So few dead rows that VACUUM may bypass the index (PostgreSQL 18's
    # heap packs them into one page): ask for the index pass.
    conn.execute("VACUUM (INDEX_CLEANUP ON) items")
    conn.execute("SELECT milvus_flush('items_idx')")  # writes the tombstones: a delta binlog too
    verify = "SELECT segment_id, object, bytes, error FROM milvus_verify('items_idx') ORDER BY 1, 2"
    whole = conn.execute(verify).fetchall()
    segments = conn.execute("SELECT count(*) FROM milvus_segments('items_idx') WHERE state = 'flushed'").fetchone()[0]
    assert len({r[0] for r in whole}) == segments and all(r[3] is None and r[2] > 0 for r in whole), whole
    assert any("/delta-" in r[1] for r in whole)

    # One object damaged, one gone from the directory: searches still
    # answer from the cache; the check copies the gone one back from the
    # index's pages, finds the damaged one and writes it again from them,
    # with a warning.
    index_oid = str(conn.execute("SELECT 'items_idx'::regclass::oid").fetchone()[0])
    store = Path(cluster.host) / "data" / "pg_milvus" / "objects"
    mine = sorted(f for f in store.rglob("*") if f.is_file() and f.parts[-3] == index_oid)
    segment_files = [f for f in mine if not f.name.startswith("delta-")]  # deltas are not cached: skip them
    gone, damaged = segment_files[0], segment_files[-1]
    gone.unlink()
    damaged.write_bytes(b"\0" * damaged.stat().st_size)
    assert len(index_ids(conn, "<->", rows[100], 10)) == 10
    warnings = []
    conn.add_notice_handler(lambda d: warnings.append(d.message_primary))
    found = {r[1].rsplit("/", 1)[-1]: r[3] for r in conn.execute(verify).fetchall()}
    assert found[gone.name] is None and gone.exists(), found
    assert found[damaged.name] is None and damaged.read_bytes() != b"\0" * damaged.stat().st_size, found
    assert [w for w in warnings if "1 damaged files in pg_milvus/objects written again" in w], warnings
    assert sum(e is not None for e in found.values()) == 0
    # The whole directory gone: every object is copied back, and checks.
    for f in mine:
        f.unlink(missing_ok=True)
    assert all(r[3] is None for r in conn.execute(verify).fetchall())
    assert all(f.exists() for f in mine)


def test_vacuum_succeeds_while_the_store_refuses_writes(cluster, conn):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 1000)")
    load(conn, 3000)
    conn.execute("SELECT milvus_flush('items_idx')")
    dbname = conn.info.dbname
    index_oid = str(conn.execute("SELECT 'items_idx'::regclass::oid").fetchone()[0])
    [index_dir] = [d for d in (Path(cluster.host) / "data" / "pg_milvus" / "objects").glob(f"*/*/{index_oid}")]
    deltas = "SELECT count(*) FROM milvus_verify('items_idx') WHERE object LIKE '%/delta-%'"
    deleted = "SELECT sum(deleted_rows) FROM milvus_segments('items_idx')"

    def truth(c):
        with c.transaction():
            c.execute("SET LOCAL enable_indexscan = off")
            return sorted(r[0] for r in c.execute("SELECT id FROM items"))

    subprocess.run(["chmod", "-R", "a-w", index_dir], check=True)  # the store refuses every write
    try:
        conn.execute("DELETE FROM items WHERE id < 300")
        conn.execute("VACUUM items")
        assert conn.execute(deleted).fetchone()[0] == 300
        assert conn.execute(deltas).fetchone()[0] == 0, "recorded in the manifest, not in the store"
        # The heap reuses the dead rows' TIDs: none of them comes back.
        load(conn, 300, seed=3, start_id=10_000)
        assert sorted(all_index_ids(conn)) == truth(conn)
        with pytest.raises(psycopg.errors.IoError):
            conn.execute("SELECT milvus_flush('items_idx')")
        # The recorded tombstones are WAL-logged: they survive a crash.
        cluster.crash()
        cluster.restart()
        with cluster.connect(dbname) as c:
            register_vector(c)
            assert sorted(all_index_ids(c)) == truth(c)
            assert c.execute(deleted).fetchone()[0] == 300
    finally:
        subprocess.run(["chmod", "-R", "u+w", index_dir], check=True)
    # Once the store takes writes again, a flush writes them as a delta
    # binlog; nothing is counted twice, nothing comes back.
    with cluster.connect(dbname) as c:
        register_vector(c)
        c.execute("SELECT milvus_flush('items_idx')")
        assert c.execute(deltas).fetchone()[0] >= 1
        assert c.execute(deleted).fetchone()[0] == 300
        assert sorted(all_index_ids(c)) == truth(c)
        assert all(r[0] is None for r in c.execute("SELECT error FROM milvus_verify('items_idx')"))


def test_a_damaged_index_page_is_named_and_reindex_repairs_it():
    """Index pages damaged on disk (each page's id in its special space
    overwritten, as a bad disk or a stray write might): a search raises
    index_corrupted naming the index with REINDEX as the remedy, the table
    is intact, and REINDEX brings the index back."""
    c = Cluster("damagedpages", ["milvus.max_workers = 0"])
    try:
        conn = c.connect()
        conn.execute("CREATE EXTENSION pg_milvus")
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v vector(3))")
        conn.execute("INSERT INTO t SELECT i, ARRAY[i, i % 7, 1]::real[] FROM generate_series(1, 500) i")
        conn.execute("CREATE INDEX t_v ON t USING milvus (v)")
        conn.execute("INSERT INTO t SELECT i, ARRAY[i, i % 5, 2]::real[] FROM generate_series(501, 600) i")
        path = Path(c.host) / "data" / conn.execute("SELECT pg_relation_filepath('t_v')").fetchone()[0]
        conn.execute("CHECKPOINT")
        checksums = conn.execute("SHOW data_checksums").fetchone()[0] == "on"
        conn.close()
        c.stop()
        if checksums:
            # PostgreSQL 18's initdb turns data checksums on, which would
            # name the damage first ("invalid page in block"): this is
            # about the index's own checks.
            as_postgres(BIN / "pg_checksums", "--disable", "-D", Path(c.host) / "data")
        data = bytearray(path.read_bytes())
        for block in range(1, len(data) // 8192):
            at = block * 8192 + 8192 - 16 + 4  # the page id, after `next`
            data[at:at + 2] = b"\0\0"
        path.write_bytes(bytes(data))
        c.restart()
        conn = c.connect()
        search = "SELECT id FROM t ORDER BY v <-> '[3.3,2.6,1.1]' LIMIT 5"
        conn.execute("SET enable_seqscan = off")
        with pytest.raises(psycopg.errors.IndexCorrupted) as e:
            conn.execute(search)
        assert 't_v' in e.value.diag.message_primary, e.value.diag.message_primary
        assert e.value.diag.message_hint == "REINDEX rebuilds the index from the table."
        conn.execute("RESET enable_seqscan")
        conn.execute("SET enable_indexscan = off")
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 600
        exact = [r[0] for r in conn.execute(search)]
        conn.execute("RESET enable_indexscan")
        conn.execute("REINDEX INDEX t_v")
        conn.execute("SET enable_seqscan = off")
        assert "Index Scan using t_v" in "\n".join(r[0] for r in conn.execute("EXPLAIN " + search))
        assert [r[0] for r in conn.execute(search)] == exact
    finally:
        c.stop()
