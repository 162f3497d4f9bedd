"""The embedded store travels with the WAL: with the defaults (no
storage_url, so the objects live in the data directory), everything that
ships WAL ships the index, because every object is also in the index's own
pages, whatever pg_basebackup's form (plain: the standbys; tar: the
backups) and its WAL's way (streamed, fetched). A streaming standby and a
cascade of it, a base backup restored from the WAL archive to its end, to
a named restore point and to a time, each answer exactly as the primary
did at that point, after flushes, deletes, merges and garbage collection
the primary ran after the copy was made; a replica's directory damaged on
disk is mended from the pages; a former primary rewound with pg_rewind
after a failover follows the new one exactly; ALTER INDEX ... SET
TABLESPACE, CREATE DATABASE ... TEMPLATE, DROP DATABASE and REINDEX keep
one file for each object. On a shared store, a restore finds the objects
the garbage collection's grace period kept, and names those it did not."""

import contextlib
import subprocess
import time
from pathlib import Path

import psycopg
import pytest
from pgvector.psycopg import register_vector

from conftest import CLUSTER, Cluster, replayed
from helpers import all_index_ids, clear_local_cache, index_ids, load, near, objects_of


def promoted(conn):
    deadline = time.time() + 60
    while conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]:
        assert time.time() < deadline, "recovery did not end"
        time.sleep(0.1)


@contextlib.contextmanager
def restored(made, name, backup, archive, *settings):
    """A connection to the tar base backup `backup` restored from the WAL
    in `archive` (to the target `settings` name, else to the end), once it
    is promoted; the server goes into `made`, to be stopped."""
    server = Cluster.restored(name, backup, archive, list(settings))
    made.append(server)
    with server.connect() as r:
        register_vector(r)
        promoted(r)
        yield r


def damage_a_file(server):
    """Flips a bit in the middle of the largest file of the server's
    embedded store; returns its path."""
    victim = max(files_of(Path(server.host) / "data" / "pg_milvus" / "objects"), key=lambda f: f.stat().st_size)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x20
    victim.write_bytes(bytes(data))
    return victim


def files_of(directory):
    """The files under `directory`, by path."""
    return sorted(f for f in directory.rglob("*") if f.is_file()) if directory.exists() else []


def object_files(server):
    """The files of the server's embedded store, by key."""
    root = Path(server.host) / "data" / "pg_milvus" / "objects"
    return [str(f.relative_to(root)) for f in files_of(root)]


def archived(conn, archive):
    """Switches the WAL file and waits until the archive has it: after a
    record of its own, so the file is never one nothing was written to
    (whose switch does nothing)."""
    last = conn.execute("SELECT pg_walfile_name(pg_logical_emit_message(false, 'test', 'archived'))").fetchone()[0]
    conn.execute("SELECT pg_switch_wal()")
    deadline = time.time() + 60
    while not (archive / last).exists():
        assert time.time() < deadline, "the WAL was not archived"
        time.sleep(0.1)


SEGMENTS = "SELECT segment_id, state, rows, deleted_rows FROM milvus_segments('items_idx') ORDER BY 1"


def items(conn, n):
    """The extension, the `items` table and `n` rows in it; returns them."""
    conn.execute("CREATE EXTENSION pg_milvus")
    register_vector(conn)
    conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, category int, embedding vector(64))")
    return load(conn, n)


def answers(conn, queries):
    """What the index answers now: the top 10 of each query, the segments,
    and every row an exhaustive index scan reaches."""
    return ([index_ids(conn, "<->", q, 10) for q in queries], conn.execute(SEGMENTS).fetchall(),
            sorted(all_index_ids(conn)))


def test_standbys_and_restored_backups_answer_like_the_primary():
    # The WAL archive and the base backup, where the servers' user writes.
    files = Path(subprocess.check_output([CLUSTER, "host", "repl-files"], text=True).strip())
    subprocess.run(["rm", "-rf", str(files)], check=True)
    archive = files / "archive"
    subprocess.run(["install", "-d", "-o", "postgres", "-g", "postgres", str(files), str(archive)], check=True)
    primary = Cluster("repl-primary", [
        "milvus.max_workers = 0", "archive_mode = on", f"archive_command = 'cp %p {archive}/%f'",
        "wal_level = replica", "milvus.gc_grace_period = 0"])
    made = []
    try:
        with primary.connect() as p:
            rows = items(p, 6000)
            # CREATE INDEX writes its segment's objects into the index's
            # pages: the base backups below carry them in the relation.
            p.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) "
                      "WITH (segment_max_rows = 4000)")
            queries = near(rows, 12)
            backup = files / "base"
            primary.backup(backup)
            standby = Cluster.standby_of("repl-standby", primary)
            made.append(standby)
            cascade = Cluster.standby_of("repl-cascade", standby, "-X", "fetch")
            made.append(cascade)
            with standby.connect() as s, cascade.connect() as c:
                register_vector(s)
                register_vector(c)
                replayed(p, s)
                replayed(p, c)
                # The copies' directories were made by pg_basebackup from
                # the primary's: drop them, as a store lost or never copied.
                for copy in (standby, cascade):
                    subprocess.run(["rm", "-rf", f"{copy.host}/data/pg_milvus/objects"], check=True)
                assert answers(s, queries) == answers(c, queries) == answers(p, queries)

                # After the copies were made: rows flushed into new segments.
                load(p, 3000, seed=2, start_id=6000)
                p.execute("SELECT * FROM milvus_flush('items_idx')")
                p.execute("SELECT pg_create_restore_point('after_flush')")
                at_restore_point = answers(p, queries)
                p.execute("SELECT pg_switch_wal()")
                replayed(p, s)
                replayed(p, c)
                assert answers(s, queries) == answers(c, queries) == at_restore_point

                # Deletes past the purge threshold, merges that drop the old
                # segments, and GC of their objects (no grace period here).
                p.execute("DELETE FROM items WHERE id % 3 = 0")
                p.execute("VACUUM items")
                merged = p.execute("SELECT input_segments FROM milvus_compact('items_idx')").fetchall()
                before_gc = answers(p, queries)
                before_gc_time = p.execute("SELECT clock_timestamp()").fetchone()[0]
                time.sleep(0.2)
                # A recovery to a time stops at the first commit after it:
                # what is logged outside transactions before that commit
                # (flushes, merges, GC, as VACUUM) is replayed too.
                p.execute("CREATE TABLE after_the_target ()")
                gc = p.execute("SELECT sum(deleted_objects) FROM milvus_gc('items_idx')").fetchone()[0]
                assert merged and gc > 0, (merged, gc, p.execute(SEGMENTS).fetchall())
                assert [r[1] for r in p.execute(SEGMENTS)].count("flushed") >= 1
                final = answers(p, queries)
                p.execute("SELECT pg_switch_wal()")
                replayed(p, s)
                replayed(p, c)
                # The same standby sessions, which have the merged-away
                # segments mapped, answer on after replay dropped them.
                assert answers(s, queries) == answers(c, queries) == final
                assert all(i % 3 != 0 for i in final[2])
                # Their directories hold what the primary's does: the files
                # they restored of objects the primary collected are gone.
                assert object_files(standby) == object_files(cascade) == object_files(primary)
            # A file of the standby's directory damaged on its disk:
            # milvus_verify() finds it, writes it again from the pages and
            # says so; so does the first search that loads it.
            for check in ("verify", "search"):
                damaged = damage_a_file(standby)
                clear_local_cache(standby)
                with standby.connect() as s:
                    register_vector(s)
                    warnings = []
                    s.add_notice_handler(lambda d: warnings.append(d.message_primary))
                    if check == "verify":
                        verified = s.execute("SELECT object, error FROM milvus_verify('items_idx')").fetchall()
                        assert damaged.name in {Path(o).name for o, _ in verified}
                        assert [e for _, e in verified if e] == [], verified
                    assert answers(s, queries) == final
                    assert [w for w in warnings if "damaged files in pg_milvus/objects written again" in w], warnings
                primary_copy = Path(primary.host) / damaged.relative_to(standby.host)
                assert damaged.read_bytes() == primary_copy.read_bytes()
            # The primary's WAL is archived up to here.
            archived(p, archive)

        # Archive recovery of the backup taken before any of that: to the
        # end (by a server that does not preload pg_milvus: replay runs
        # none of its code), and to the restore point between the flush
        # and the merge.
        with restored(made, "repl-restored", backup, archive, "shared_preload_libraries = ''") as r:
            assert answers(r, queries) == final
            # Promoted, it carries on: a flush of new rows.
            load(r, 200, seed=3, start_id=20000)
            assert [x[2] for x in r.execute("SELECT * FROM milvus_flush('items_idx')")] == ["flushed"]
        with restored(made, "repl-restored-point", backup, archive, "recovery_target_name = 'after_flush'") as r:
            assert answers(r, queries) == at_restore_point
        # And to a time between the merge and the collection of its inputs.
        with restored(made, "repl-restored-time", backup, archive,
                      f"recovery_target_time = '{before_gc_time.isoformat()}'") as r:
            assert answers(r, queries) == before_gc
    finally:
        for c in reversed(made):
            subprocess.run([CLUSTER, "stop", c.name], check=True)
        primary.stop()


def test_a_former_primary_rewound_after_a_failover_answers_like_the_new_one():
    # pg_rewind needs hint bits logged and the WAL since the last common
    # checkpoint kept.
    primary = Cluster("rw-primary", ["milvus.max_workers = 0", "wal_log_hints = on", "wal_keep_size = 1GB",
                                     "milvus.gc_grace_period = 0"])
    standby = None
    try:
        with primary.connect() as p:
            rows = items(p, 4000)
            p.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)")
            queries = near(rows, 10)
            standby = Cluster.standby_of("rw-standby", primary, "-X", "fetch")
            with standby.connect() as s:
                replayed(p, s)
        # Failover: the standby is promoted while the old primary goes on
        # alone for a while (rows and a flush no one else sees), then stops.
        standby.promote()
        with primary.connect() as p:
            register_vector(p)
            load(p, 1000, seed=5, start_id=50_000)
            p.execute("SELECT * FROM milvus_flush('items_idx')")
        primary.stop()
        # The new primary flushes, deletes, merges and collects.
        with standby.connect() as s:
            register_vector(s)
            load(s, 2000, seed=6, start_id=10_000)
            s.execute("SELECT * FROM milvus_flush('items_idx')")
            s.execute("DELETE FROM items WHERE id % 3 = 0")
            s.execute("VACUUM items")
            s.execute("SELECT * FROM milvus_compact('items_idx')")
            s.execute("SELECT * FROM milvus_gc('items_idx')")
            s.execute("CHECKPOINT")  # pg_rewind reads the new timeline from the control file
            new = answers(s, queries)
            assert not {50_000, 50_001} & set(new[2])
        # The old primary, rewound, follows the new one: its pages are the
        # new primary's, its directory is made to match them at first use,
        # and its own divergent segment is gone from its answers.
        primary.rewind_from(standby)
        with standby.connect() as s, primary.connect() as p:
            register_vector(p)
            replayed(s, p)
            assert answers(p, queries) == new
    finally:
        if standby:
            subprocess.run([CLUSTER, "stop", standby.name], check=True)
        primary.stop()


def test_set_tablespace_template_drop_database_and_reindex_keep_one_copy_of_each_object(cluster):
    space = Path(cluster.host) / "tablespace"
    subprocess.run(["rm", "-rf", str(space)], check=True)
    subprocess.run(["install", "-d", "-o", "postgres", "-g", "postgres", str(space)], check=True)
    databases = ["ts_origin", "ts_copy"]

    def drop_all():
        with cluster.connect() as admin:
            for name in databases:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.execute("DROP TABLESPACE IF EXISTS ts_space")

    drop_all()
    with cluster.connect() as admin:
        admin.execute(f"CREATE TABLESPACE ts_space LOCATION '{space}'")
        admin.execute("CREATE DATABASE ts_origin")
    try:
        with cluster.connect("ts_origin") as o:
            rows = items(o, 3000)
            o.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) "
                      "WITH (segment_max_rows = 1000)")
            queries = near(rows, 8)
            before = answers(o, queries)
            home = objects_of(cluster, o)
            files = files_of(home)
            pages = o.execute("SELECT * FROM milvus_index_pages('items_idx') ORDER BY 1").fetchall()
            assert len(files) == o.execute("SELECT count(*) FROM milvus_verify('items_idx')").fetchone()[0] >= 6
            # The relation moves with its pages, objects' chains included;
            # the directory is left as it was: one file for each object.
            o.execute("ALTER INDEX items_idx SET TABLESPACE ts_space")
            assert files_of(home) == files
            assert o.execute("SELECT * FROM milvus_index_pages('items_idx') ORDER BY 1").fetchall() == pages
            # Its files lost, they come back from the pages in their new place.
            subprocess.run(["rm", "-rf", str(home)], check=True)
        with cluster.connect("ts_origin") as o:
            register_vector(o)
            assert answers(o, queries) == before
            assert files_of(home) == files
            load(o, 500, seed=2, start_id=3000)
            o.execute("SELECT * FROM milvus_flush('items_idx')")
            now = answers(o, queries)
            origin_db = o.execute("SELECT oid FROM pg_database WHERE datname = 'ts_origin'").fetchone()[0]
        with cluster.connect() as admin:
            admin.execute("CREATE DATABASE ts_copy TEMPLATE ts_origin")
            admin.execute("DROP DATABASE ts_origin")
        with cluster.connect("ts_copy") as c:
            register_vector(c)
            assert answers(c, queries) == now
            # The copy adopts what it references and collects the dropped
            # database's objects: then each object is one file, its own.
            c.execute("SET milvus.gc_grace_period = 0")
            c.execute("SELECT * FROM milvus_gc()")
            assert files_of(home.parent.parent / str(origin_db)) == []
            referenced = sorted(Path(o).name for (o,) in c.execute("SELECT object FROM milvus_verify('items_idx')"))
            assert sorted(f.name for f in files_of(objects_of(cluster, c))) == referenced
            assert answers(c, queries) == now
            # REINDEX: a new relation, its pages holding the new objects;
            # GC takes the old files.
            c.execute("REINDEX INDEX items_idx")
            c.execute("SELECT * FROM milvus_gc('items_idx')")
            referenced = sorted(Path(o).name for (o,) in c.execute("SELECT object FROM milvus_verify('items_idx')"))
            assert sorted(f.name for f in files_of(objects_of(cluster, c))) == referenced
            assert sorted(all_index_ids(c)) == now[2]
    finally:
        drop_all()


def test_a_restore_on_a_shared_store_finds_what_the_grace_period_kept_and_names_the_rest():
    files = Path(subprocess.check_output([CLUSTER, "host", "pitr-files"], text=True).strip())
    subprocess.run(["rm", "-rf", str(files)], check=True)
    archive, store = files / "archive", files / "store"
    subprocess.run(["install", "-d", "-o", "postgres", "-g", "postgres", str(files), str(archive), str(store)],
                   check=True)
    # The objects live in a store the servers share (as a bucket), not in
    # the WAL: what a restore finds there is what GC left.
    primary = Cluster("pitr-primary", [
        "milvus.max_workers = 0", "archive_mode = on", f"archive_command = 'cp %p {archive}/%f'",
        f"milvus.storage_url = 'file://{store}'"])
    made = []
    try:
        with primary.connect() as p:
            rows = items(p, 6000)
            p.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) "
                      "WITH (segment_max_rows = 4000)")
            queries = near(rows, 10)
            backup = files / "base"
            primary.backup(backup, "-X", "stream")
            load(p, 3000, seed=2, start_id=6000)
            p.execute("SELECT * FROM milvus_flush('items_idx')")
            p.execute("SELECT pg_create_restore_point('before_merge')")
            at_point = answers(p, queries)
            # A grace period the objects are older than when the merge
            # drops them: it counts from the drop.
            p.execute("SET milvus.gc_grace_period = 3")
            time.sleep(3.5)
            p.execute("DELETE FROM items WHERE id % 3 = 0")
            p.execute("VACUUM items")
            assert p.execute("SELECT input_segments FROM milvus_compact('items_idx')").fetchall()
            deleted, kept = p.execute("SELECT deleted_objects, referenced_objects FROM milvus_gc('items_idx')").fetchone()
            live = p.execute("SELECT count(*) FROM milvus_verify('items_idx')").fetchone()[0]
            assert deleted == 0 and kept > live, "the merged-away segments' objects are kept beside the live ones"
            archived(p, archive)

        # Restored to before the merge, within the grace period: exact.
        with restored(made, "pitr-within", backup, archive, "recovery_target_name = 'before_merge'") as r:
            assert answers(r, queries) == at_point

        # Past it (here: no grace period), GC deletes them.
        with primary.connect() as p:
            p.execute("SET milvus.gc_grace_period = 0")
            assert p.execute("SELECT deleted_objects FROM milvus_gc('items_idx')").fetchone()[0] > 0
        with restored(made, "pitr-past", backup, archive, "recovery_target_name = 'before_merge'") as r:
            # The first query names the missing object and the remedy.
            with pytest.raises(psycopg.errors.IoError) as gone:
                index_ids(r, "<->", queries[0], 10)
            assert "not found" in str(gone.value) and 'index "items_idx"' in str(gone.value), gone.value
            assert "REINDEX" in gone.value.diag.message_hint
            missing = r.execute("SELECT object FROM milvus_verify('items_idx') WHERE error LIKE '%not found%'").fetchall()
            assert any(o in str(gone.value) for (o,) in missing), (missing, gone.value)
            # The remedy: the index rebuilt from the table at that point.
            r.execute("REINDEX INDEX items_idx")
            assert r.execute("SELECT count(*) FROM milvus_verify('items_idx') WHERE error IS NOT NULL").fetchone() == (0,)
            assert sorted(all_index_ids(r)) == at_point[2]
    finally:
        for c in reversed(made):
            subprocess.run([CLUSTER, "stop", c.name], check=True)
        primary.stop()
