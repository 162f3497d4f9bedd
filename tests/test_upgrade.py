"""ALTER EXTENSION pg_milvus UPDATE from every earlier version: an index
made under the old version keeps its rows and answers, and the updated
extension is object for object what a fresh CREATE EXTENSION makes (so `\\dx`
and `\\dx+` read the same either way).

tests/fixtures keeps the install script of each earlier version as it was
released (pgrx generates only the current one); sql/ holds the upgrade
scripts, which `cargo pgrx install` puts beside it."""

import shutil
from pathlib import Path

import numpy as np
import pytest
from pgvector.psycopg import register_vector

from conftest import sharedir
from helpers import load


FIXTURES = Path(__file__).parent / "fixtures"
EARLIER = sorted(p.name.split("--")[1][:-4] for p in FIXTURES.glob("pg_milvus--*.sql") if p.name.count("--") == 1)

# Every object of the extension, with what would differ if an upgrade
# script missed a change: a function's result, volatility, parallel safety
# and strictness, a view's definition, and the comment.
MEMBERS = """
SELECT pg_describe_object(d.classid, d.objid, d.objsubid),
       CASE WHEN d.classid = 'pg_proc'::regclass THEN
           (SELECT concat_ws(' ', pg_get_function_result(p.oid), p.provolatile, p.proparallel, p.proisstrict)
              FROM pg_proc p WHERE p.oid = d.objid)
       WHEN d.classid = 'pg_class'::regclass THEN
           (SELECT concat_ws(' ', c.relkind, pg_get_viewdef(c.oid)) FROM pg_class c WHERE c.oid = d.objid)
       END,
       obj_description(d.objid, d.classid::regclass::text)
  FROM pg_depend d JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
 WHERE e.extname = 'pg_milvus' AND d.deptype = 'e'
 ORDER BY 1, 2
"""


def install_earlier_versions():
    share = sharedir()
    for f in FIXTURES.glob("pg_milvus--*.sql"):
        if not (share / f.name).exists() or (share / f.name).read_bytes() != f.read_bytes():
            shutil.copyfile(f, share / f.name)


def test_there_is_an_earlier_version_to_update_from():
    assert EARLIER == ["0.1.0"], EARLIER


@pytest.mark.parametrize("version", EARLIER)
def test_update_keeps_the_index_and_matches_a_fresh_install(cluster, db, version):
    install_earlier_versions()
    name = f"t_upgrade_from_{version.replace('.', '_')}"
    with cluster.connect() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with cluster.connect(name) as old:
            old.execute(f"CREATE EXTENSION pg_milvus VERSION '{version}'")
            register_vector(old)
            old.execute("CREATE TABLE items (id bigint PRIMARY KEY, category int, embedding vector(64))")
            rows = load(old, 3000)
            old.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)")
            old.execute("SELECT * FROM milvus_flush('items_idx')")
            load(old, 500, seed=2, start_id=3000)  # growing rows too
            query = rows[7] + np.float32(0.01)
            search = "SELECT id FROM items ORDER BY embedding <-> %s LIMIT 10"
            before = [r[0] for r in old.execute(search, (query,))]

            old.execute("ALTER EXTENSION pg_milvus UPDATE")
            current = old.execute(
                "SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'pg_milvus')"
                "  FROM pg_extension WHERE extname = 'pg_milvus'").fetchone()[0]
            assert current, "updated to the default version"
            assert [r[0] for r in old.execute(search, (query,))] == before, "same answers after the update"
            segments = old.execute(
                "SELECT state, rows, tier FROM milvus_segments('items_idx') ORDER BY segment_id").fetchall()
            assert segments == [("flushed", 3000, 0), ("growing", 500, None)], segments
            updated = old.execute(MEMBERS).fetchall()
        fresh = db.execute(MEMBERS).fetchall()
        assert len(fresh) > 40
        assert updated == fresh, [m for m in updated if m not in fresh] + [m for m in fresh if m not in updated]
    finally:
        with cluster.connect() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
