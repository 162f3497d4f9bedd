"""Who may do what, and what user input can reach: the maintenance
functions need the index's owner (or a superuser); hostile table and index
names never reach object keys; the extension works from a schema of its
own, off the search path, beside another extension's type named `vector`."""

import shutil
import subprocess
from pathlib import Path

import psycopg
from psycopg import sql
import pytest

from test_index import load


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
    share = Path(subprocess.check_output(["pg_config", "--sharedir"], text=True).strip()) / "extension"
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
