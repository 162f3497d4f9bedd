"""The embedded store travels with the WAL: with the defaults (no
storage_url, so the objects live in the data directory), everything that
ships WAL ships the index, because every object is also in the index's own
pages. A streaming standby and a cascade of it, a base backup restored from
the WAL archive to its end and to a named restore point, each answer exactly
as the primary did at that point, after flushes, deletes, merges and garbage
collection the primary ran after the copy was made; and a former primary
rewound with pg_rewind after a failover follows the new one exactly."""

import subprocess
import time
from pathlib import Path

from pgvector.psycopg import register_vector

from conftest import CLUSTER, Cluster, replayed
from test_index import all_index_ids, index_ids, load, near


def promoted(conn):
    deadline = time.time() + 60
    while conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]:
        assert time.time() < deadline, "recovery did not end"
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
            # The primary's WAL is archived up to here.
            archived = p.execute("SELECT pg_walfile_name(pg_current_wal_lsn())").fetchone()[0]
            p.execute("SELECT pg_switch_wal()")
            deadline = time.time() + 60
            while not (archive / archived).exists():
                assert time.time() < deadline, "the WAL was not archived"
                time.sleep(0.1)

        # Archive recovery of the backup taken before any of that: to the
        # end, and to the restore point between the flush and the merge.
        to_end = Cluster.restored("repl-restored", backup, archive)
        made.append(to_end)
        with to_end.connect() as r:
            register_vector(r)
            promoted(r)
            assert answers(r, queries) == final
            # Promoted, it carries on: a flush of new rows.
            load(r, 200, seed=3, start_id=20000)
            assert [x[2] for x in r.execute("SELECT * FROM milvus_flush('items_idx')")] == ["flushed"]
        to_point = Cluster.restored("repl-restored-point", backup, archive, ["recovery_target_name = 'after_flush'"])
        made.append(to_point)
        with to_point.connect() as r:
            register_vector(r)
            promoted(r)
            assert answers(r, queries) == at_restore_point
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
            standby = Cluster.standby_of("rw-standby", primary)
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
            promoted(s)
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
