"""The user's own stack, first try: psycopg 3 (binary COPY both ways,
numpy), asyncpg, SQLAlchemy (ORM, sync and async engines) and Django
(makemigrations, migrate, ORM), each written as pgvector-python's README
has a user write it, with pg_milvus' own helpers (python/, `pg_milvus`).
Every answer is checked against a sequential scan of the same rows (the
database's `milvus.ef_search` at 1,000, which on 2,000 rows makes the
graph walk exhaustive) and every query's plan against the index; a client
that fails is a failing test."""

import asyncio
import importlib
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from conftest import DIMS, ROOT, pgvector_installable


ROWS = 2000


def rows(seed=7):
    return np.random.default_rng(seed).standard_normal((ROWS, DIMS)).astype(np.float32)


OPS = {"l2": "<->", "cosine": "<=>", "ip": "<#>"}


@pytest.fixture
def db(db):
    """conftest's database, every session of it searching exhaustively."""
    db.execute(f'ALTER DATABASE "{db.info.dbname}" SET milvus.ef_search = 1000')
    db.execute("SET milvus.ef_search = 1000")
    return db


def exact(db, q, metric="l2", where=None, table="items"):
    """The ids of the 10 rows of `table` nearest `q` by a sequential scan
    (row i has category i % 10), over `db`, a psycopg connection with
    pgvector's types registered."""
    filter_ = f"WHERE category = {where}" if where is not None else ""
    with db.transaction():
        db.execute("SET LOCAL enable_indexscan = off")
        return [r[0] for r in db.execute(
            f"SELECT id FROM {table} {filter_} ORDER BY embedding {OPS[metric]} %s, id LIMIT 10", (q,))]


def uses_index(plan_lines, index):
    plan = "\n".join(plan_lines)
    assert f"Index Scan using {index}" in plan, plan


def test_psycopg_binary_copy_both_ways_numpy_and_the_index(db):
    register_vector(db)
    data = rows()
    db.execute(f"CREATE TABLE items (id bigint PRIMARY KEY, category int, embedding vector({DIMS}))")
    db.execute("CREATE INDEX items_embedding_idx ON items USING milvus (embedding vector_l2_ops)")
    with db.cursor() as cur, cur.copy("COPY items (id, category, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "int4", "vector"])
        for i, v in enumerate(data):
            copy.write_row((i, i % 10, v))
    db.execute("SELECT * FROM milvus_flush('items_embedding_idx')")
    for binary in (False, True):
        with db.cursor(binary=binary) as cur:
            for q in data[:5] + 0.01:
                got = [r[0] for r in cur.execute("SELECT id FROM items ORDER BY embedding <-> %s LIMIT 10", (q,))]
                assert got == exact(db, q)
                got = [r[0] for r in cur.execute(
                    "SELECT id FROM items WHERE category = 3 ORDER BY embedding <-> %s LIMIT 10", (q,))]
                assert got == exact(db, q, where=3)
    uses_index([r[0] for r in db.execute("EXPLAIN SELECT id FROM items ORDER BY embedding <-> %s LIMIT 10",
                                         (data[0],))], "items_embedding_idx")
    with db.cursor() as cur, cur.copy("COPY items (id, embedding) TO STDOUT WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "vector"])
        back = {i: v for i, v in copy.rows()}
    assert len(back) == ROWS and all(np.array_equal(back[i].to_numpy(), data[i]) for i in range(ROWS))


def test_asyncpg(cluster, db):
    asyncpg = importlib.import_module("asyncpg")
    from pgvector.asyncpg import register_vector as register_asyncpg

    register_vector(db)
    data = rows(seed=8)
    dbname = db.info.dbname

    async def run():
        conn = await asyncpg.connect(host=cluster.host, port=cluster.port, user="postgres", database=dbname)
        try:
            await register_asyncpg(conn)
            await conn.execute(f"CREATE TABLE items (id bigint PRIMARY KEY, category int, embedding vector({DIMS}))")
            await conn.execute("CREATE INDEX items_embedding_idx ON items USING milvus (embedding vector_cosine_ops)")
            await conn.copy_records_to_table(
                "items", records=[(i, i % 10, v) for i, v in enumerate(data)], columns=["id", "category", "embedding"])
            await conn.execute("SELECT * FROM milvus_flush('items_embedding_idx')")
            for q in data[:5] + 0.01:
                got = [r["id"] for r in await conn.fetch(
                    "SELECT id FROM items ORDER BY embedding <=> $1 LIMIT 10", q)]
                assert got == exact(db, q, "cosine")
            plan = [r[0] for r in await conn.fetch(
                "EXPLAIN SELECT id FROM items ORDER BY embedding <=> $1 LIMIT 10", data[0])]
            uses_index(plan, "items_embedding_idx")
            back = await conn.fetchval("SELECT embedding FROM items WHERE id = 7")
            assert np.array_equal(back.to_numpy(), data[7])
        finally:
            await conn.close()

    asyncio.run(run())


def sqlalchemy_model(table):
    """An ORM class of `table`, its index built with pg_milvus' helper."""
    from pgvector.sqlalchemy import Vector
    from sqlalchemy import BigInteger, Integer
    from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

    from pg_milvus.sqlalchemy import milvus_index

    class Base(DeclarativeBase):
        pass

    class Item(Base):
        __tablename__ = table
        id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
        category: Mapped[int] = mapped_column(Integer)
        embedding = mapped_column(Vector(DIMS))
        __table_args__ = (
            milvus_index(f"{table}_embedding_idx", "embedding", "vector_cosine_ops", m=12, quantization="none"),
        )

    return Base, Item


def test_sqlalchemy_orm_sync_and_async_engines(cluster, db):
    from sqlalchemy import create_engine, select, text
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.orm import Session

    from pg_milvus.sqlalchemy import milvus_flush, milvus_recall, milvus_segments

    register_vector(db)
    data = rows(seed=9)
    url = f"postgres@/{db.info.dbname}?host={cluster.host}&port={cluster.port}"
    Base, Item = sqlalchemy_model("items")
    engine = create_engine(f"postgresql+psycopg://{url}")
    Base.metadata.create_all(engine)
    ddl = db.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'items_embedding_idx'").fetchone()[0]
    assert "USING milvus (embedding vector_cosine_ops) WITH (m='12', quantization='none')" in ddl, ddl
    with Session(engine) as session:
        session.add_all(Item(id=i, category=i % 10, embedding=v) for i, v in enumerate(data))
        session.commit()
        flushed = session.execute(
            select(milvus_flush("items_embedding_idx").table_valued("index", "segment_id", "state"))).all()
        assert [r.state for r in flushed] == ["flushed"]
        for q in data[:5] + 0.01:
            query = select(Item.id).order_by(Item.embedding.cosine_distance(q)).limit(10)
            assert list(session.scalars(query)) == exact(db, q, "cosine")
            query = select(Item.id).where(Item.category == 3).order_by(Item.embedding.cosine_distance(q)).limit(10)
            assert list(session.scalars(query)) == exact(db, q, "cosine", where=3)
        segments = session.execute(
            select(milvus_segments("items_embedding_idx").table_valued("segment_id", "state", "rows"))).all()
        assert sum(s.rows for s in segments if s.state == "flushed") == ROWS
        sql = f"SELECT id FROM items ORDER BY embedding <=> '{list(map(float, data[3]))}' LIMIT 10"
        assert session.scalar(select(milvus_recall(sql))) == 1.0
        plan = session.execute(text("EXPLAIN " + sql)).scalars().all()
        uses_index(plan, "items_embedding_idx")
    engine.dispose()

    async def run_async():
        # pgvector-python's SQLAlchemy type sends text: no asyncpg codec.
        aengine = create_async_engine(f"postgresql+asyncpg://{url}")
        async with aengine.connect() as conn:
            for q in data[5:8] + 0.01:
                got = (await conn.execute(
                    select(Item.id).order_by(Item.embedding.cosine_distance(q)).limit(10))).scalars().all()
                assert list(got) == exact(db, q, "cosine")
        await aengine.dispose()

    asyncio.run(run_async())


def readme_section(heading, next_heading):
    """README.md's text from `heading` to `next_heading`."""
    text = (ROOT / "README.md").read_text()
    return text[text.index(heading):text.index(next_heading)]


def readme_blocks():
    """The Python blocks of README.md's "Clients", in order: the ones a
    first line names (`# models.py`) by that name, the rest in a list."""
    section = readme_section("## Clients", "## Documentation")
    named, runnable = {}, []
    for block in re.findall(r"```python\n(.*?)```", section, re.S):
        first = block.splitlines()[0]
        if first.startswith("# ") and first.endswith(".py"):
            named[first[2:]] = block
        else:
            runnable.append(block)
    return named, runnable


def test_the_readme_first_query_runs_as_it_stands(db):
    """README.md's "A first query", in a database without the extension."""
    section = readme_section("## A first query", "## pg_milvus or pgvector")
    [block] = re.findall(r"```sql\n(.*?)```", section, re.S)
    db.execute("DROP EXTENSION pg_milvus")
    db.execute(block)
    assert db.execute("SELECT state, rows FROM milvus_segments('items_embedding_idx') ORDER BY segment_id").fetchall() \
        == [("flushed", 2), ("growing", 0)]


def test_the_readme_client_examples_run_as_they_stand(cluster, db, monkeypatch):
    """psycopg, asyncpg and SQLAlchemy as README.md shows them, in a
    database where they create the extension themselves."""
    _, runnable = readme_blocks()
    assert len(runnable) == 3
    db.execute("DROP EXTENSION pg_milvus")
    monkeypatch.setenv("DATABASE_URL",
                       f"postgresql://postgres@/{db.info.dbname}?host={cluster.host}&port={cluster.port}")
    for block in runnable:
        exec(compile(block, "README.md", "exec"), {"__name__": "readme_example"})
    for table in ("items", "documents", "orm_items"):
        assert db.execute(f"SELECT count(*) FROM {table}").fetchone() == (1000,)
        assert db.execute("SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                          "JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = %s::regclass AND a.amname = 'milvus'",
                          (table,)).fetchone() == (1,)


def test_django_makemigrations_migrate_and_orm(cluster, db, tmp_path, monkeypatch):
    """A Django project from nothing: app `readme` is README.md's migration
    and models as they stand; app `extra` has an index per metric (the L2
    one with `category` as a filter column), its first migration depending
    on `readme`'s for the extension.
    makemigrations writes the rest, migrate runs them, and the ORM queries
    by each of pgvector's distances, with a filter."""
    named, _ = readme_blocks()
    dbname = db.info.dbname
    db.execute("DROP EXTENSION pg_milvus")  # the migration creates it
    for app, files in {
        "readme": {"migrations/0001_pg_milvus.py": named["migrations/0001_pg_milvus.py"],
                   "models.py": named["models.py"]},
        "extra": {
            "migrations/0001_initial.py": (
                "from django.db import migrations\n\n\n"
                "class Migration(migrations.Migration):\n"
                "    dependencies = [('readme', '0001_pg_milvus')]\n"),
            "models.py": (
                "from django.db import models\n"
                "from pgvector.django import VectorField\n"
                "from pg_milvus.django import MilvusIndex\n\n\n"
                "class Doc(models.Model):\n"
                "    category = models.IntegerField()\n"
                f"    embedding = VectorField(dimensions={DIMS})\n\n"
                "    class Meta:\n"
                "        indexes = [\n"
                "            MilvusIndex(name='doc_l2_idx', fields=['embedding', 'category'],\n"
                "                        opclasses=['vector_l2_ops', 'int4_ops']),\n"
                "            MilvusIndex(name='doc_cosine_idx', fields=['embedding'], opclasses=['vector_cosine_ops'],\n"
                "                        m=16, ef_construction=64, quantization='sq8'),\n"
                "            MilvusIndex(name='doc_ip_idx', fields=['embedding'], opclasses=['vector_ip_ops'],\n"
                "                        growing_max_rows=1000),\n"
                "        ]\n"),
        },
    }.items():
        (tmp_path / app / "migrations").mkdir(parents=True)
        (tmp_path / app / "__init__.py").write_text("")
        (tmp_path / app / "migrations" / "__init__.py").write_text("")
        for name, source in files.items():
            (tmp_path / app / name).write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))

    import django
    from django.conf import settings
    from django.core.management import call_command

    settings.configure(
        DATABASES={"default": {"ENGINE": "django.db.backends.postgresql", "NAME": dbname, "USER": "postgres",
                               "HOST": cluster.host, "PORT": str(cluster.port)}},
        INSTALLED_APPS=["readme", "extra"],
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        USE_TZ=True,
    )
    django.setup()
    try:
        call_command("makemigrations", "readme", "extra", verbosity=0)
        written = "\n".join(p.read_text() for p in (tmp_path / "extra" / "migrations").glob("0002_*.py"))
        assert "pg_milvus.django.MilvusIndex" in written and "quantization='sq8'" in written, written
        call_command("migrate", verbosity=0)
        assert db.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_milvus'").fetchone()
        register_vector(db)

        from django.db import connection
        from pgvector.django import CosineDistance, L2Distance, MaxInnerProduct

        Item = importlib.import_module("readme.models").Item
        Doc = importlib.import_module("extra.models").Doc
        small = np.random.default_rng(11).standard_normal((ROWS, 3)).astype(np.float32)
        Item.objects.bulk_create(Item(id=i, category=i % 10, embedding=v) for i, v in enumerate(small))
        data = rows(seed=10)
        Doc.objects.bulk_create(Doc(id=i, category=i % 10, embedding=v) for i, v in enumerate(data))
        with connection.cursor() as cur:
            cur.execute("SELECT * FROM milvus_flush()")
        q = small[0] + 0.01
        got = list(Item.objects.filter(category=3).order_by(CosineDistance("embedding", q))
                   .values_list("id", flat=True)[:10])
        assert got == exact(db, q, "cosine", where=3, table="readme_item")
        uses_index(Item.objects.order_by(CosineDistance("embedding", q))[:5].explain().splitlines(),
                   "item_embedding_idx")
        for distance, metric, index in [(L2Distance, "l2", "doc_l2_idx"), (CosineDistance, "cosine", "doc_cosine_idx"),
                                        (MaxInnerProduct, "ip", "doc_ip_idx")]:
            for q in data[:3] + 0.01:
                got = list(Doc.objects.order_by(distance("embedding", q)).values_list("id", flat=True)[:10])
                assert got == exact(db, q, metric, table="extra_doc"), distance
                got = list(Doc.objects.filter(category=3).order_by(distance("embedding", q))
                           .values_list("id", flat=True)[:10])
                assert got == exact(db, q, metric, where=3, table="extra_doc"), distance
            uses_index(Doc.objects.order_by(distance("embedding", data[0]))[:10].explain().splitlines(), index)
        # The filter column: Django's filter goes into the index's scan.
        plan = Doc.objects.filter(category=3).order_by(L2Distance("embedding", data[0]))[:10].explain()
        assert "Index Scan using doc_l2_idx" in plan and "Index Cond: (category = 3)" in plan, plan
    finally:
        from django.db import connections

        connections.close_all()
        for module in ("readme.models", "readme", "extra.models", "extra"):
            sys.modules.pop(module, None)


def test_the_index_options_are_checked_before_the_server_sees_them():
    from pg_milvus import with_params

    assert with_params({"m": 16, "storage_url": "s3://b/it's", "quantization": None}) == [
        "m = 16", "storage_url = 's3://b/it''s'"]
    with pytest.raises(TypeError, match="has no option 'ef'"):
        with_params({"ef": 40})
    with pytest.raises(TypeError, match="m takes int"):
        with_params({"m": "16"})
    with pytest.raises(ValueError, match="quantization takes one of rabitq, sq8, none"):
        with_params({"quantization": "pq"})


def test_a_psycopg_error_carries_pgvectors_sqlstate(db):
    with pytest.raises(psycopg.errors.DataException, match="vector must have at least 1 dimension"):
        db.execute("SELECT '[]'::vector")


LANGCHAIN = ROOT / ".venv-langchain" / "bin" / "python"


def test_langchain_pgvector_store_through_the_companion(cluster, db):
    """LangChain's PGVector store keeps pgvector's column type (and runs
    `CREATE EXTENSION IF NOT EXISTS vector`), so pg_milvus joins it through
    the companion: pgvector (here its stand-in) in public, pg_milvus in a
    schema of its own, a milvus index on the store's table. LangChain runs in
    a venv of its own (scripts/setup.sh): langchain-postgres wants
    pgvector-python below 0.4. Its searches, plain and filtered by metadata,
    return a sequential scan's rows and go through the index."""
    with pgvector_installable(db):
        db.execute("DROP EXTENSION pg_milvus")
        db.execute("CREATE EXTENSION vector")
        db.execute("CREATE SCHEMA milvus")
        db.execute("CREATE EXTENSION pg_milvus SCHEMA milvus")
        db.execute("CREATE EXTENSION pg_milvus_pgvector")
        dbname = db.info.dbname
        db.execute(f'ALTER DATABASE "{dbname}" SET milvus.ef_search = 1000')
        env = {**os.environ, "DATABASE_URL": f"postgresql://postgres@/{dbname}?host={cluster.host}&port={cluster.port}"}
        script = str(ROOT / "tests" / "clients" / "langchain_store.py")

        def store(step):
            return subprocess.run([str(LANGCHAIN), script, step], env=env, check=True, capture_output=True,
                                  text=True).stdout

        store("load")
        db.execute("CREATE INDEX langchain_embedding_idx ON langchain_pg_embedding "
                   "USING milvus (embedding vector_cosine_ops)")
        db.execute("SELECT * FROM milvus.milvus_flush('langchain_embedding_idx')")
        db.execute("ANALYZE langchain_pg_embedding")
        scans = "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'langchain_embedding_idx'"
        before = db.execute(scans).fetchone()[0]
        answers = json.loads(store("search"))
        query = db.execute("SELECT embedding FROM langchain_pg_embedding WHERE id = '7'").fetchone()[0]
        with db.transaction():
            db.execute("SET LOCAL enable_indexscan = off")
            want = [r[0] for r in db.execute(
                "SELECT id FROM langchain_pg_embedding ORDER BY embedding <=> %s::text::vector LIMIT 5", (query,))]
            want_odd = [r[0] for r in db.execute(
                "SELECT id FROM langchain_pg_embedding WHERE cmetadata->>'parity' = '1' "
                "ORDER BY embedding <=> %s::text::vector LIMIT 5", (query,))]
        assert answers == {"found": want, "filtered": want_odd}
        # The searching backend's statistics reach the others once it ends.
        deadline = time.time() + 10
        while db.execute(scans).fetchone()[0] < before + 2 and time.time() < deadline:
            time.sleep(0.1)
        assert db.execute(scans).fetchone()[0] >= before + 2
