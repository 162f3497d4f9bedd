"""Who may do what, and what user input can reach: the maintenance
functions need the index's owner (or a superuser); hostile table and index
names never reach object keys; the extension works from a schema of its
own, off the search path, beside another extension's type named `vector`."""

import shutil
from pathlib import Path

import psycopg
from psycopg import sql
import pytest

from conftest import sharedir
from helpers import load


@pytest.fixture
def stranger(conn):
    conn.execute("CREATE ROLE milvus_stranger LOGIN")
    conn.execute("GRANT SELECT ON items TO milvus_stranger")
    yield
    conn.execute("RESET ROLE")
    conn.execute("DROP OWNED BY milvus_stranger")
    conn.execute("DROP ROLE milvus_stranger")


def test_maintenance_needs_the_owner(conn, stranger):
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)")
    load(conn, 500)
    conn.execute("SET ROLE milvus_stranger")
    for call in ["milvus_flush('items_idx')", "milvus_compact('items_idx')", "milvus_gc('items_idx')",
                 "milvus_prewarm('items_idx')", "milvus_gc()"]:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"SELECT * FROM {call}")
    # Reading is for whoever may read the table.
    assert len(conn.execute("SELECT * FROM milvus_segments('items_idx')").fetchall()) == 1
    assert conn.execute("SELECT count(*) FROM items").fetchone() == (500,)
    for setting in ["milvus.storage_url", "milvus.cache_dir", "milvus.gc_grace_period", "milvus.storage_timeout"]:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"SET {setting} = DEFAULT")
    conn.execute("RESET ROLE")
    # The owner may, without being a superuser.
    conn.execute("ALTER TABLE items OWNER TO milvus_stranger")
    conn.execute("SET ROLE milvus_stranger")
    assert [r[2] for r in conn.execute("SELECT * FROM milvus_flush('items_idx')")] == ["flushed"]


def test_hostile_names_never_reach_object_keys(cluster, conn):
    name = '../../x"; DROP TABLE items; --'
    table, index = sql.Identifier(name), sql.Identifier(name + "_idx")
    conn.execute(sql.SQL("CREATE TABLE {} (id int, embedding vector(64))").format(table))
    conn.execute(sql.SQL("INSERT INTO {} SELECT i, ARRAY(SELECT random() FROM generate_series(1, 64) WHERE i > 0)::real[]::vector"
                         " FROM generate_series(1, 300) i").format(table))
    conn.execute(sql.SQL("CREATE INDEX {} ON {} USING milvus (embedding vector_l2_ops)").format(index, table))
    oid = conn.execute("SELECT indexrelid FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid WHERE c.relname = %s", (name,)).fetchone()[0]
    root = Path(cluster.host) / "data" / "pg_milvus" / "objects"
    files = [p.relative_to(root) for p in root.rglob("*") if p.is_file()]
    mine = [f for f in files if f.parts[2] == str(oid)]
    assert len(mine) == 1 and all(part.replace("-", "").replace(".", "").isalnum() for part in mine[0].parts), mine
    assert not any(".." in str(f) or "DROP" in str(f) for f in files)
    assert conn.execute("SELECT to_regclass('items') IS NOT NULL").fetchone() == (True,)


def test_installs_in_its_own_schema_off_the_search_path(cluster, conn):
    conn.execute("DROP TABLE items")
    conn.execute("DROP EXTENSION pg_milvus")
    conn.execute("CREATE SCHEMA milvus_ext")
    conn.execute("CREATE EXTENSION pg_milvus SCHEMA milvus_ext")
    conn.execute("SET search_path = public")
    conn.execute("CREATE TABLE items (id int PRIMARY KEY, embedding milvus_ext.vector(3))")
    conn.execute("INSERT INTO items SELECT i, ARRAY[i, i % 7, 1]::real[]::milvus_ext.vector FROM generate_series(1, 2000) i")
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding milvus_ext.vector_l2_ops)")
    conn.execute("INSERT INTO items VALUES (0, '[0,0,1]')")
    assert [r[2] for r in conn.execute("SELECT * FROM milvus_ext.milvus_flush('items_idx')")] == ["flushed"]
    conn.execute("SET enable_seqscan = off")
    plan = "\n".join(r[0] for r in conn.execute(
        "EXPLAIN SELECT id FROM items ORDER BY embedding OPERATOR(milvus_ext.<->) '[0,0,1]' LIMIT 3"))
    assert "Index Scan using items_idx" in plan, plan
    ids = [r[0] for r in conn.execute(
        "SELECT id FROM items ORDER BY embedding OPERATOR(milvus_ext.<->) '[0,0,1]' LIMIT 3")]
    assert ids[0] == 0
    jobs = conn.execute("SELECT kind, state FROM milvus_ext.milvus_jobs ORDER BY job_id").fetchall()
    assert ("flush", "done") in jobs, jobs


def install_lookalike():
    """Puts tests/fixtures' vector_lookalike extension (a foreign type named
    `vector`, as pgvector's) where the server finds extensions."""
    share = sharedir()
    for f in (Path(__file__).parent / "fixtures").glob("vector_lookalike*"):
        if not (share / f.name).exists() or (share / f.name).read_bytes() != f.read_bytes():
            shutil.copyfile(f, share / f.name)


def test_coexists_with_another_extensions_vector_type(cluster, conn):
    install_lookalike()
    conn.execute("DROP TABLE items")
    conn.execute("DROP EXTENSION pg_milvus")
    conn.execute("CREATE EXTENSION vector_lookalike SCHEMA public")
    conn.execute("CREATE SCHEMA milvus_ext")
    conn.execute("CREATE EXTENSION pg_milvus SCHEMA milvus_ext")
    assert {r[0] for r in conn.execute("SELECT extname FROM pg_extension")} >= {"vector_lookalike", "pg_milvus"}
    # The foreign type comes first on the search path: every unqualified
    # name below could resolve to the wrong extension.
    conn.execute("SET search_path = public, milvus_ext")
    assert conn.execute("SELECT 'x'::vector::text, pg_typeof('x'::vector)::text").fetchone() == ("x", "vector")
    conn.execute("CREATE TABLE items (id int PRIMARY KEY, other vector, embedding milvus_ext.vector(3))")
    conn.execute("INSERT INTO items SELECT i, 'not a vector'::vector, ARRAY[i, i % 7, 1]::real[]::milvus_ext.vector"
                 " FROM generate_series(1, 2000) i")
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)")
    conn.execute("INSERT INTO items VALUES (0, 'x', '[0,0,1]')")
    assert [r[2] for r in conn.execute("SELECT * FROM milvus_flush('items_idx')")] == ["flushed"]
    conn.execute("SET enable_seqscan = off")
    query = "SELECT id FROM items ORDER BY embedding <-> '[0,0,1]' LIMIT 3"
    plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + query))
    assert "Index Scan using items_idx" in plan, plan
    assert [r[0] for r in conn.execute(query)][0] == 0
    # Each extension's operator on its own type.
    assert conn.execute("SELECT 'a'::vector <-> 'b'::vector").fetchone() == (0.0,)
    assert conn.execute("SELECT '[0,3,4]'::milvus_ext.vector <-> '[0,0,0]'").fetchone() == (5.0,)
    # Either drops without touching the other.
    conn.execute("DROP TABLE items")
    conn.execute("DROP EXTENSION vector_lookalike")
    assert conn.execute("SELECT '[1,2]'::milvus_ext.vector::text").fetchone() == ("[1,2]",)


def test_a_hostile_search_path_cannot_hijack_our_queries(conn):
    """The extension's own catalog queries (here: the milvus indexes of the
    database, read by milvus_gc() and milvus_flush() with no index, and by
    every worker visit) qualify every operator: an `=` placed first on the
    search_path, as a database owner could for everyone with ALTER DATABASE
    ... SET search_path, is never called, even by a superuser."""
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)")
    load(conn, 100)
    conn.execute("CREATE SCHEMA hostile")
    for t in ("oid", "name", "\"char\""):
        conn.execute(f"CREATE FUNCTION hostile.eq(a {t}, b {t}) RETURNS boolean LANGUAGE plpgsql"
                     " AS $$ BEGIN RAISE EXCEPTION 'hijacked'; END $$")
        conn.execute(f"CREATE OPERATOR hostile.= (LEFTARG = {t}, RIGHTARG = {t}, FUNCTION = hostile.eq)")
    conn.execute("SET search_path = hostile, pg_catalog, public")
    assert conn.execute("SELECT count(*) FROM milvus_gc()").fetchone()[0] >= 1
    assert [r[2] for r in conn.execute("SELECT * FROM milvus_flush()")] == ["flushed"]


@pytest.fixture
def owner(conn):
    """A role that owns `items` and may create indexes on it, not a superuser."""
    conn.execute("CREATE ROLE milvus_owner LOGIN")
    conn.execute("GRANT CREATE ON SCHEMA public TO milvus_owner")
    conn.execute("ALTER TABLE items OWNER TO milvus_owner")
    yield
    conn.execute("RESET ROLE")
    conn.execute("RESET milvus.allowed_storage_urls")
    conn.execute("DROP OWNED BY milvus_owner")
    conn.execute("DROP ROLE milvus_owner")


def test_only_a_superuser_chooses_where_an_index_is_stored(cluster, conn, owner, tmp_path):
    data_dir = Path(cluster.host) / "data"
    elsewhere = tmp_path / "alice"
    conn.execute("SET ROLE milvus_owner")
    # Before: a table owner could make the server write into its own data directory.
    for url, sqlstate, message in [
        (f"file://{data_dir}/base", "22023", "is inside the data directory"),
        (f"file:///tmp/../{data_dir}/global", "22023", "is inside the data directory"),
        (f"file://{elsewhere}", "42501", "permission denied to store an index at"),
        ("s3://some-bucket/prefix", "42501", "permission denied to store an index at"),
    ]:
        with pytest.raises(psycopg.Error, match=message) as e:
            conn.execute(f"CREATE INDEX items_idx ON items USING milvus (embedding) WITH (storage_url = '{url}')")
        assert e.value.sqlstate == sqlstate, (url, e.value.sqlstate)
    assert not (data_dir / "base" / "0").exists()
    # The default, by name or not, is anybody's.
    default = f"file://{data_dir}/pg_milvus/objects"
    conn.execute(f"CREATE INDEX items_idx ON items USING milvus (embedding) WITH (storage_url = '{default}')")
    # A superuser may allow locations; an owner may then use what is under them, only.
    conn.execute("RESET ROLE")
    conn.execute(f"SET milvus.allowed_storage_urls = 'file://{tmp_path}/shared, s3://team-bucket/milvus'")
    conn.execute("SET ROLE milvus_owner")
    conn.execute(f"CREATE INDEX items_idx2 ON items USING milvus (embedding) WITH (storage_url = 'file://{tmp_path}/shared/a')")
    for url in [f"file://{tmp_path}/shared/../escape", f"file://{tmp_path}/sharedx", "s3://team-bucket/milvus-other"]:
        with pytest.raises(psycopg.Error, match="permission denied to store an index at"):
            conn.execute(f"ALTER INDEX items_idx2 SET (storage_url = '{url}')")
    # Only a superuser can change the list.
    with pytest.raises(psycopg.Error, match="permission denied to set parameter"):
        conn.execute("SET milvus.allowed_storage_urls = 'file:///'")
    # The server-wide setting never points into the data directory either.
    conn.execute("RESET ROLE")
    with pytest.raises(psycopg.Error, match="is inside the data directory"):
        conn.execute(f"SET milvus.storage_url = 'file://{data_dir}/pg_wal'")


def test_owners_see_the_jobs_of_their_own_indexes(cluster, conn, owner):
    conn.execute("SET ROLE milvus_owner")
    conn.execute("CREATE INDEX mine_idx ON items USING milvus (embedding)")
    load(conn, 300)
    conn.execute("SELECT * FROM milvus_flush('mine_idx')")
    conn.execute("RESET ROLE")
    conn.execute("CREATE TABLE theirs (v vector(3))")
    conn.execute("INSERT INTO theirs VALUES ('[1,2,3]')")
    conn.execute("CREATE INDEX theirs_idx ON theirs USING milvus (v)")
    conn.execute("SELECT * FROM milvus_flush('theirs_idx')")
    everything = conn.execute("SELECT DISTINCT index::text FROM milvus_jobs").fetchall()
    assert ("theirs_idx",) in everything
    # Before: permission denied for view milvus_jobs.
    conn.execute("SET ROLE milvus_owner")
    kinds = conn.execute("SELECT index, pg_typeof(index)::text, kind, state FROM milvus_jobs").fetchall()
    assert kinds and {k[0] for k in kinds} == {"mine_idx"}, kinds
    assert all(k[1] == "regclass" for k in kinds)
    assert ("mine_idx", "regclass", "flush", "done") in kinds
