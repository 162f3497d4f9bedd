"""docs/usage.md as a user reads it: every code block runs as it stands
(a `$n` placeholder bound by PREPARE, as a client binds it), its answers are
a sequential scan's, and the transcripts it shows (errors, the EXPLAIN line)
are what the server says. A new block fails `test_every_block_is_run` until
a test here runs it."""

import re

import pytest

from conftest import ROOT, pgvector_installable
from helpers import milvus_scan_line


USAGE = ROOT / "docs" / "usage.md"


def blocks() -> list[tuple[str, str]]:
    """(language, text) of each fenced block of docs/usage.md, in order."""
    return re.findall(r"```(\w*)\n(.*?)```", USAGE.read_text(), re.S)


def block(starting: str) -> str:
    """The one SQL block whose first line starts with `starting`."""
    [found] = [text for lang, text in blocks() if lang == "sql" and text.startswith(starting)]
    return found


def transcript(starting: str) -> str:
    """The one unlabelled block (a psql session or output) starting so."""
    [found] = [text for lang, text in blocks() if lang == "" and text.startswith(starting)]
    return found


RUN = ["CREATE EXTENSION pg_milvus;", "SET milvus.ef_search", "Milvus Scan:", "CREATE TABLE tickets",
       "=# SELECT '[1,a,3]'",
       "CREATE INDEX ON items USING milvus ((binary_quantize", "CREATE TABLE docs", "WITH dense AS",
       "CREATE SCHEMA milvus;"]


def test_every_block_is_run():
    """Each block starts as one of RUN's, which the tests below run."""
    assert [[s for s in RUN if text.startswith(s)] for _, text in blocks()] == [[s] for s in RUN]


def statements(sql: str) -> list[str]:
    """A block's statements, one by one as psql sends them (none of them
    holds a `;` or `--` of its own)."""
    sql = re.sub(r"--.*$", "", sql, flags=re.M)
    return [s.strip() for s in sql.split(";") if s.strip()]


def unindexed(db, sql, *params):
    with db.transaction():
        db.execute("SET LOCAL enable_indexscan = off")
        return db.execute(sql, params).fetchall()


@pytest.fixture
def overview(db):
    """The overview block, run in a database without the extension."""
    db.execute("DROP EXTENSION pg_milvus")
    db.autocommit = True  # as psql: VACUUM runs outside a transaction
    for statement in statements(block("CREATE EXTENSION pg_milvus;")):
        db.execute(statement)
    db.autocommit = False
    return db


def test_the_overview_runs_as_it_stands(overview):
    db = overview
    assert db.execute("SELECT state, rows FROM milvus_segments('items_embedding_idx') ORDER BY segment_id") \
        .fetchall() == [("flushed", 2), ("growing", 0)]
    assert "flush" in {r[0] for r in db.execute("SELECT kind FROM milvus_jobs")}


def test_the_recall_check_measures_the_index(overview):
    db = overview
    # Enough pages that a 1% page sample is never empty.
    for start in range(0, 200000, 20000):
        db.execute("INSERT INTO items (category, embedding) SELECT i %% 10, "
                   "ARRAY[sin(i), cos(i), sin(i * 0.37)]::vector FROM generate_series(%s::int, %s::int) i",
                   (start, start + 19999))
        db.execute("SELECT * FROM milvus_flush('items_embedding_idx')")
    setting, query = statements(block("SET milvus.ef_search"))
    db.execute(setting)
    [(recall,)] = db.execute(query).fetchall()
    assert 0.9 <= recall <= 1.0


def test_the_explain_line_names_what_explain_prints(overview):
    db = overview
    db.execute("SELECT * FROM milvus_flush('items_embedding_idx')")
    shown = transcript("Milvus Scan:").strip()
    db.execute("SET enable_seqscan = off")  # two rows
    line = milvus_scan_line(db, "SELECT id FROM items ORDER BY embedding <-> '[3,1,2]' LIMIT 5")
    assert re.findall(r"(\w+)=", line) == re.findall(r"(\w+)=", shown)
    assert line.split(": ")[1] == "items_embedding_idx"


def test_the_filter_columns_block_pushes_its_keys(db):
    """The multicolumn index as docs/usage.md shows it: its query's three
    keys go into the index, and it answers as a sequential scan does, also
    once its cluster_by has clustered it."""
    create_table, create_index, search = statements(block("CREATE TABLE tickets"))
    db.execute(create_table)
    db.execute("INSERT INTO tickets SELECT i, i % 50, '2026-10-15'::timestamptz + (i % 40) * interval '1 day', "
               "ARRAY[(ARRAY['billing', 'login', 'refund'])[1 + i % 3]], "
               "ARRAY[sin(i), cos(i), sin(i * 0.37)]::vector FROM generate_series(1, 20000) i")
    db.execute(create_index)
    db.execute("ANALYZE tickets")
    plan = "\n".join(r[0] for r in db.execute("EXPLAIN " + search))
    assert "Index Cond: ((tenant_id = 42) AND (created_at >= " in plan and "labels && " in plan, plan
    assert "Filter" not in plan, plan
    got = db.execute(search).fetchall()
    assert len(got) == 10 and got == unindexed(db, search)
    # Its cluster_by: the first compaction after CREATE INDEX clusters.
    plans = [r[0] for r in db.execute("SELECT plan FROM milvus_compact()")]
    assert plans == ["cluster 1 segments [1] into 1 of 20000 rows by their ranges"], plans
    assert db.execute(search).fetchall() == got


def test_the_error_transcript_is_what_the_server_says(overview):
    db = overview
    shown = transcript("=# SELECT '[1,a,3]'")
    for session in re.split(r"^=# ", shown, flags=re.M)[1:]:
        statement, *said = session.strip().splitlines()
        told = dict(line.split(":  ", 1) for line in said)
        with pytest.raises(Exception) as error:
            db.execute(statement)
        diag = error.value.diag
        assert (diag.message_primary, diag.message_detail) == (told["ERROR"], told.get("DETAIL"))
        db.rollback()
    assert db.execute("SELECT count(*) FROM items").fetchone() == (2,)


def test_binary_quantization_and_rerank(overview):
    db = overview
    db.execute("INSERT INTO items (category, embedding) SELECT i % 10, "
               "ARRAY[sin(i), cos(i), sin(i * 0.37)]::vector FROM generate_series(1, 500) i")
    create, search = statements(block("CREATE INDEX ON items USING milvus ((binary_quantize"))
    db.execute(create)
    db.execute(f"PREPARE bq(vector) AS {search}")
    with db.transaction():
        db.execute("SET LOCAL enable_seqscan = off")  # 502 rows
        plan = "".join(r[0] for r in db.execute("EXPLAIN EXECUTE bq('[3,1,2]')"))
    [(bits,)] = db.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'items' "
                           "AND indexdef LIKE '%%bit_hamming_ops%%'").fetchall()
    assert f"Index Scan using {bits} on items" in plan
    for q in ("[3,1,2]", "[-0.5,0.2,0.9]", "[0.1,-1,0.3]"):
        got = db.execute(f"EXECUTE bq('{q}')").fetchall()
        assert len(got) == 5
        assert [r[0] for r in got] == [r[0] for r in unindexed(db, f"EXECUTE bq('{q}')")]


def sparse_docs(db):
    """The sparse block as it stands, then rows for it to find."""
    db.execute(block("CREATE TABLE docs"))
    db.execute("INSERT INTO docs SELECT i, format('{%s:%s,%s:%s,%s:%s}/30522', "
               "1000 + i % 50, 0.1 + (i * 7919 % 10007) / 1000.0, 2000 + i % 30, 0.2 + i % 5, 7000 + i % 900, 1 + i % 3)::sparsevec "
               "FROM generate_series(1, 2000) i")


def test_the_sparse_block_runs_and_is_exact(db):
    sparse_docs(db)
    *_, search = statements(block("CREATE TABLE docs"))
    assert db.execute(search).fetchall() == unindexed(db, search)
    assert len(db.execute(search).fetchall()) == 10


def test_hybrid_search_fuses_both_indexes(db):
    sparse_docs(db)
    db.execute("ALTER TABLE docs ADD COLUMN embedding vector(3)")
    db.execute("UPDATE docs SET embedding = ARRAY[sin(id), cos(id), sin(id * 0.37)]::vector")
    db.execute("CREATE INDEX ON docs USING milvus (embedding vector_cosine_ops)")
    db.execute(f"PREPARE hybrid(vector, sparsevec) AS {block('WITH dense AS')}")
    # The dense side is approximate: searched wide enough to be exact here.
    db.execute("SET milvus.ef_search = 400")
    execute = "EXECUTE hybrid('[0.3,0.9,-0.2]', '{1012:0.8,2054:1.4,7592:0.3}/30522')"
    got = db.execute(execute).fetchall()
    assert len(got) == 10
    assert got == unindexed(db, execute)
    plan = "".join(r[0] for r in db.execute("EXPLAIN " + execute))
    assert plan.count("docs_embedding_idx") == 1 and plan.count("docs_terms_idx") == 1


def test_the_companion_recipe_runs_as_it_stands(db):
    with pgvector_installable(db):
        try:
            db.execute("DROP EXTENSION pg_milvus")
            db.execute("CREATE EXTENSION vector")
            db.execute("CREATE TABLE items (id bigint PRIMARY KEY, embedding vector(3))")
            db.execute("INSERT INTO items SELECT i, ARRAY[i, 1, 2]::real[]::vector FROM generate_series(1, 50) i")
            for statement in statements(block("CREATE SCHEMA milvus;")):
                db.execute(statement)
            assert db.execute("SELECT state, rows FROM milvus.milvus_segments('items_embedding_idx') "
                              "ORDER BY segment_id").fetchall() == [("flushed", 50), ("growing", 0)]
            query = "SELECT id FROM items ORDER BY embedding <-> '[3,1,2]' LIMIT 3"
            assert db.execute(query).fetchall() == [(3,), (2,), (4,)]
            db.execute("SET enable_seqscan = off")  # 50 rows
            assert "items_embedding_idx" in "".join(r[0] for r in db.execute("EXPLAIN " + query))
        finally:
            db.close()
