"""A milvus index on pgvector's own `vector`, `halfvec` and `sparsevec` columns (the
companion extension pg_milvus_pgvector): a pgvector user keeps their tables,
adds `USING milvus (embedding vector_l2_ops)` (or `halfvec_l2_ops`) with no
rewrite, and gets the same answers as a sequential scan, for every metric,
from flushed and growing segments alike.

Run against pgvector itself where it is installed; elsewhere (CI) against
tests/fixtures/pgvector_standin, an extension named `vector` with pgvector's
type name, binary layout and distance functions."""

import functools

import numpy as np
import psycopg
import pytest

from conftest import pgvector_installable
from helpers import literal, top10


DIMS = 16
METRICS = {"l2_ops": "<->", "ip_ops": "<#>", "cosine_ops": "<=>", "l1_ops": "<+>"}


@pytest.fixture
def pgv(cluster):
    """A database with pgvector (or its stand-in) in public, pg_milvus in a
    schema of its own, and the companion beside pgvector."""
    name = "t_pgvector_columns"
    with cluster.connect() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    conn = cluster.connect(name)
    with pgvector_installable(conn) as which:
        conn.execute("CREATE EXTENSION vector")
        conn.execute("CREATE SCHEMA milvus")
        conn.execute("CREATE EXTENSION pg_milvus SCHEMA milvus")
        conn.execute("CREATE EXTENSION pg_milvus_pgvector")
        yield conn, which
        conn.close()
        with cluster.connect() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.parametrize("type_", ["vector", "halfvec"])
def test_a_milvus_index_on_pgvector_columns_with_no_rewrite(pgv, type_):
    conn, which = pgv
    owner = conn.execute(
        "SELECT e.extname FROM pg_type t JOIN pg_depend d ON d.objid = t.oid AND d.deptype = 'e' "
        "JOIN pg_extension e ON e.oid = d.refobjid WHERE t.oid = %s::regtype", (type_,)).fetchone()[0]
    assert owner == "vector", "the column type is pgvector's, not pg_milvus'"
    conn.execute(f"CREATE TABLE items (id bigint PRIMARY KEY, embedding {type_}({DIMS}))")
    rng = np.random.default_rng(7)
    rows = rng.standard_normal((3200, DIMS)).astype(np.float32)
    with conn.cursor().copy("COPY items (id, embedding) FROM STDIN") as copy:
        for i, v in enumerate(rows[:3000]):
            copy.write_row((i, literal(v)))
    table = conn.execute("SELECT pg_relation_filenode('items')").fetchone()[0]
    queries = rows[rng.integers(0, 3000, 20)] + 0.05 * rng.standard_normal((20, DIMS)).astype(np.float32)

    for suffix, op in METRICS.items():
        opclass = f"{type_}_{suffix}"
        conn.execute(f"CREATE INDEX items_idx ON items USING milvus (embedding {opclass})")
        assert conn.execute("SELECT pg_relation_filenode('items')").fetchone()[0] == table, "no table rewrite"
        conn.execute("SELECT * FROM milvus.milvus_flush('items_idx')")
        for i, v in enumerate(rows[3000:], start=3000):  # growing rows too
            conn.execute(f"INSERT INTO items VALUES (%s, %s::{type_})", (i, literal(v)))
        states = conn.execute(
            "SELECT state, rows FROM milvus.milvus_segments('items_idx') ORDER BY segment_id").fetchall()
        assert states == [("flushed", 3000), ("growing", 200)], states
        plan = "\n".join(r[0] for r in conn.execute(
            f"EXPLAIN SELECT id FROM items ORDER BY embedding {op} %s::{type_} LIMIT 10", (literal(queries[0]),)))
        assert "Index Scan using items_idx" in plan, plan
        nearest = functools.partial(top10, conn, "items", op, cast=f"::{type_}", ef_search=400)
        hits = sum(len(set(nearest(literal(q))) & set(nearest(literal(q), off="enable_indexscan"))) for q in queries)
        assert hits / (10 * len(queries)) >= 0.98, (which, opclass, hits)
        conn.execute("DROP INDEX items_idx")
        conn.execute("DELETE FROM items WHERE id >= 3000")

    # The default opclass is L2, as for pgvector's own index types.
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding)")
    opclass = conn.execute(
        "SELECT opcname FROM pg_index i JOIN pg_opclass o ON o.oid = i.indclass[0] "
        "WHERE i.indexrelid = 'items_idx'::regclass").fetchone()[0]
    assert opclass == f"{type_}_l2_ops"


@pytest.mark.parametrize("opclass,op", [("sparsevec_l2_ops", "<->"), ("sparsevec_ip_ops", "<#>"),
                                        ("sparsevec_cosine_ops", "<=>")])
def test_sparsevec_columns_answer_exactly(pgv, opclass, op):
    """pgvector's sparsevec: the companion's opclasses give its columns an
    inverted milvus index, whose answers are a sequential scan's."""
    conn, which = pgv
    owner = conn.execute(
        "SELECT e.extname FROM pg_type t JOIN pg_depend d ON d.objid = t.oid AND d.deptype = 'e' "
        "JOIN pg_extension e ON e.oid = d.refobjid WHERE t.oid = 'sparsevec'::regtype").fetchone()[0]
    assert owner == "vector", "the column type is pgvector's"
    conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, terms sparsevec(500))")
    rng = np.random.default_rng(11)

    def row():
        terms = sorted(rng.choice(500, size=12, replace=False).tolist())
        return "{" + ",".join(f"{t + 1}:{rng.uniform(0.1, 2):.4f}" for t in terms) + "}/500"

    with conn.cursor().copy("COPY items (id, terms) FROM STDIN") as copy:
        for i in range(2000):
            copy.write_row((i, row()))
    conn.execute(f"CREATE INDEX items_idx ON items USING milvus (terms {opclass})")
    for i in range(2000, 2100):  # growing rows too
        conn.execute("INSERT INTO items VALUES (%s, %s::sparsevec)", (i, row()))
    states = conn.execute("SELECT state, rows FROM milvus.milvus_segments('items_idx') ORDER BY segment_id").fetchall()
    assert states == [("flushed", 2000), ("growing", 100)], states
    for _ in range(10):
        q = row()
        plan = "\n".join(r[0] for r in conn.execute(
            f"EXPLAIN SELECT id FROM items ORDER BY terms {op} %s::sparsevec LIMIT 10", (q,)))
        assert "Index Scan using items_idx" in plan, plan
        answers = []
        for scan in ("enable_seqscan", "enable_indexscan"):
            with conn.transaction():
                conn.execute(f"SET LOCAL {scan} = off")
                query = f"SELECT id, terms {op} %s::sparsevec FROM items ORDER BY terms {op} %s::sparsevec LIMIT 10"
                plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + query, (q, q)))
                assert ("Index Scan using items_idx" in plan) == (scan == "enable_seqscan"), plan
                answers.append(conn.execute(query, (q, q)).fetchall())
        # The same distances; the same rows but where tied at the cut.
        index, seq = answers
        assert [d for _, d in index] == [d for _, d in seq], (which, opclass)
        cut = seq[-1][1]
        assert {i for i, d in index if d != cut} == {i for i, d in seq if d != cut}, (which, opclass)


def test_the_companion_refuses_pg_milvus_schema(pgv):
    conn, _ = pgv
    conn.execute("DROP EXTENSION pg_milvus_pgvector")
    with pytest.raises(Exception, match="cannot be created in pg_milvus' schema"):
        conn.execute("CREATE EXTENSION pg_milvus_pgvector SCHEMA milvus")


@pytest.mark.parametrize("opclass,op", [("bit_hamming_ops", "<~>"), ("bit_jaccard_ops", "<%%>")])
def test_bit_columns_with_pgvector_operators(pgv, opclass, op):
    """Postgres' bit with pgvector's Hamming and Jaccard operators: the
    companion's opclasses (in pgvector's schema) serve them."""
    conn, which = pgv
    conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, embedding bit(64))")
    rng = np.random.default_rng(3)
    rows = ["".join("1" if b else "0" for b in r) for r in rng.integers(0, 2, (2000, 64))]
    with conn.cursor().copy("COPY items (id, embedding) FROM STDIN") as copy:
        for i, r in enumerate(rows):
            copy.write_row((i, r))
    conn.execute(f"CREATE INDEX items_idx ON items USING milvus (embedding {opclass})")
    schema = conn.execute(
        "SELECT o.opcnamespace::regnamespace::text FROM pg_index i JOIN pg_opclass o ON o.oid = i.indclass[0] "
        "WHERE i.indexrelid = 'items_idx'::regclass").fetchone()[0]
    assert schema == "public", "the companion's opclass, for pgvector's operators"

    def distances(q, scan):
        with conn.transaction():
            conn.execute(f"SET LOCAL {scan} = off")
            conn.execute("SET LOCAL milvus.ef_search = 400")
            return [r[0] for r in conn.execute(
                f"SELECT embedding {op} %s::bit(64) FROM items ORDER BY embedding {op} %s::bit(64) LIMIT 10", (q, q))]

    plan = "\n".join(r[0] for r in conn.execute(
        f"EXPLAIN SELECT id FROM items ORDER BY embedding {op} %s::bit(64) LIMIT 10", (rows[0],)))
    assert "Index Scan using items_idx" in plan, plan
    exact = sum(distances(q, "enable_seqscan") == distances(q, "enable_indexscan") for q in rows[:20])
    assert exact >= 18, (which, exact)


@pytest.mark.parametrize("first", ["pg_milvus", "vector"])
def test_both_in_one_schema_is_refused_with_the_ways_that_work(db, first):
    """pg_milvus and pgvector both define a type `vector`: the second
    `CREATE EXTENSION` into the schema of the first fails with Postgres'
    own words and SQLSTATE, and a HINT naming the set-ups that work
    (`hooks.rs`); nothing is created. A schema of its own for pg_milvus
    then works, as docs/usage.md says."""
    with pgvector_installable(db):
        db.execute("DROP EXTENSION pg_milvus")
        second = "vector" if first == "pg_milvus" else "pg_milvus"
        db.execute(f"CREATE EXTENSION {first}")
        with pytest.raises(psycopg.errors.DuplicateObject) as refused:
            db.execute(f"CREATE EXTENSION {second}")
        diag = refused.value.diag
        assert diag.message_primary == 'type "vector" already exists'
        assert 'schema "public"' in diag.message_detail
        assert "CREATE EXTENSION pg_milvus SCHEMA milvus" in diag.message_hint
        assert "pg_milvus_pgvector" in diag.message_hint
        if first == "pg_milvus":
            assert "pg_milvus alone" in diag.message_hint
        assert db.execute("SELECT count(*) FROM pg_extension WHERE extname = %s", (second,)).fetchone() == (0,)
        # The set-up the hint names.
        db.execute("DROP EXTENSION IF EXISTS pg_milvus")
        db.execute("CREATE EXTENSION IF NOT EXISTS vector")
        db.execute("CREATE SCHEMA milvus")
        db.execute("CREATE EXTENSION pg_milvus SCHEMA milvus")
        db.execute("CREATE EXTENSION pg_milvus_pgvector")
        # Already there: Postgres' own answer, not a clash.
        db.execute("CREATE EXTENSION IF NOT EXISTS pg_milvus")
        with pytest.raises(psycopg.errors.DuplicateObject, match='extension "pg_milvus" already exists'):
            db.execute("CREATE EXTENSION pg_milvus")
