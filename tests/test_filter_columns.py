"""A multicolumn milvus index: filter columns stored in every segment and
the keys the planner pushes on them evaluated inside the scan. Every answer
is checked against a sequential scan of the same statement: through the
build's segments, the growing and sealed rows in pages, a flush, deletes
and a merge, and a kill -9 mid-insert; every supported type and operator;
the errors of columns the index cannot keep; an UPDATE of a filter
column, concurrent inserts and a streaming standby; clustering by a
column."""

import subprocess
import threading

import psycopg
import pytest

from conftest import Cluster, PG_MAJOR, replayed
from helpers import milvus_scan


DIMS = 8
ROWS = 6000
QUERY = "[0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5]"

# Each filter as a user writes it, and how much of it the planner pushes
# into the index: all (an Index Cond, no Filter), part, or none. PostgreSQL
# 15's planner pushes neither a bare boolean column (nor a comparison of
# one with a constant, which it simplifies to one: only a boolean btree
# takes them) nor `IN (...)` on a column after the first (it would drop
# the scan's order); 18's pushes both.
FILTERS = [
    ("tenant = 17", "all"),
    ("tenant IN (3, 4)", "all" if PG_MAJOR >= 18 else "none"),
    ("big >= 100 AND tenant < 10", "all"),
    ("big = 42", "all"),  # bigint = integer: the integer family's cross-type operator
    ("tenant <> 5 AND tenant < 40 AND tenant > 30", "all"),
    ("big BETWEEN 10 AND 20", "all"),
    ("small <= 2", "all"),
    ("flag", "all" if PG_MAJOR >= 18 else "none"),
    ("flag = false AND tenant = 9", "all" if PG_MAJOR >= 18 else "part"),
    ("day = '2026-03-04'", "all"),
    ("at >= '2026-01-03 00:00+00' AND at < '2026-01-03 06:00+00'", "all"),
    ("ref = '00000000-0000-0000-0000-000000000abc'", "all"),
    ("label = 'l3' AND tenant < 50", "all"),
    ("label <> 'l3' AND tenant = 2", "all"),
    ("tags && ARRAY['t1', 'x']", "all"),
    ("tags @> ARRAY['t2', 't4']", "all"),
    ("nums && ARRAY[7, 8]::int[]", "all"),
    ("tenant IS NULL", "all"),
    ("label IS NOT NULL AND tenant = 11", "all"),
]


def fill(db, first, count):
    """Rows `first` to `first + count - 1`; every seventh NULL in its
    filter columns, every 997th with a NULL vector."""
    db.execute(
        """INSERT INTO items
           SELECT i,
                  CASE WHEN i %% 7 = 0 THEN NULL ELSE i %% 100 END,
                  CASE WHEN i %% 7 = 0 THEN NULL ELSE (i %% 1000)::bigint END,
                  (i %% 5)::smallint,
                  CASE WHEN i %% 7 = 0 THEN NULL ELSE i %% 3 = 0 END,
                  '2026-03-01'::date + i %% 9,
                  '2026-01-01 00:00+00'::timestamptz + i * interval '1 minute',
                  CASE WHEN i %% 7 = 0 THEN NULL
                       ELSE ('00000000-0000-0000-0000-' || lpad(to_hex(i %% 4000), 12, '0'))::uuid END,
                  CASE WHEN i %% 7 = 0 THEN NULL ELSE 'l' || (i %% 11) END,
                  CASE WHEN i %% 7 = 0 THEN NULL ELSE ARRAY['t' || (i %% 3), 't' || (i %% 5), NULL] END,
                  ARRAY[i %% 13, i %% 17]::int[],
                  CASE WHEN i %% 997 = 0 THEN NULL
                       ELSE ARRAY[sin(i), cos(i), sin(i * 0.3), cos(i * 0.7), sin(i * 1.1), cos(i * 1.3),
                                  sin(i * 0.17), cos(i * 0.23)]::vector END
           FROM generate_series(%s::int, %s::int) i""",
        (first, first + count - 1),
    )


@pytest.fixture
def items(db):
    db.execute(
        f"""CREATE TABLE items (id int PRIMARY KEY, tenant int, big bigint, small smallint, flag bool,
                                day date, at timestamptz, ref uuid, label varchar(8), tags text[], nums int[],
                                embedding vector({DIMS}))"""
    )
    fill(db, 1, ROWS)
    db.execute("""CREATE INDEX items_idx ON items USING milvus
                  (embedding vector_l2_ops, tenant, big, small, flag, day, at, ref, label, tags, nums)""")
    db.execute("ANALYZE items")
    return db


def statement(where, limit=10):
    return f"SELECT id FROM items WHERE {where} ORDER BY embedding <-> '{QUERY}' LIMIT {limit}"


def answers(db, where, limit=10):
    """(the index's rows, a sequential scan's, the plan), the index
    forced. Rows come as (distance, id), ties in distance by id."""
    query = f"SELECT embedding <-> '{QUERY}', id FROM items WHERE {where} ORDER BY 1 LIMIT {limit}"

    def rows():
        return sorted(db.execute(query).fetchall(), key=lambda r: (r[0] is None, r[0] or 0, r[1]))

    with db.transaction():
        db.execute("SET LOCAL enable_seqscan = off")
        db.execute("SET LOCAL enable_bitmapscan = off")
        plan = "\n".join(r[0] for r in db.execute("EXPLAIN " + query))
        got = rows()
    with db.transaction():
        db.execute("SET LOCAL enable_indexscan = off")
        db.execute("SET LOCAL enable_bitmapscan = off")
        want = rows()
    assert "items_idx" in plan, plan
    return got, want, plan


def same(got, want):
    """The same answer: the same distances, and the same rows at each but
    the last (a LIMIT may cut a tie anywhere; distances of float32 rows tie
    often, and those of NULL vectors all do)."""
    if [d for d, _ in got] != [d for d, _ in want]:
        return False
    last = got[-1][0] if got else None
    return [r for r in got if r[0] != last] == [r for r in want if r[0] != last]


def check_all(db, stage):
    for where, pushed in FILTERS:
        for limit in (10, 400):
            got, want, plan = answers(db, where, limit)
            # Exact: selective filters are measured, and past the
            # approximate rounds every row comes in order.
            assert same(got, want), f"{stage}: WHERE {where} LIMIT {limit}\n{plan}"
        found = {(True, False): "all", (True, True): "part", (False, True): "none"}[("Index Cond" in plan, "Filter" in plan)]
        assert found == pushed, f"{stage}: WHERE {where}\n{plan}"


def test_every_type_and_operator_answers_as_a_sequential_scan(items):
    db = items
    check_all(db, "built")
    # Rows in pages: growing, and sealed by a full growing segment.
    fill(db, ROWS + 1, 3000)
    segments = db.execute("SELECT state FROM milvus_segments('items_idx')").fetchall()
    assert ("sealed",) in segments and ("growing",) in segments, segments
    check_all(db, "in pages")
    db.execute("SELECT * FROM milvus_flush('items_idx')")
    check_all(db, "flushed")
    db.execute("DELETE FROM items WHERE id % 4 = 1")
    db.commit()
    db.autocommit = True
    db.execute("VACUUM items")
    merges = db.execute("SELECT removed_rows FROM milvus_compact('items_idx')").fetchall()
    db.autocommit = False
    assert merges and sum(r[0] for r in merges) > 0, merges
    check_all(db, "merged")


def test_explain_shows_the_pushed_keys_and_what_the_filter_did(items):
    db = items
    db.execute("SET enable_seqscan = off")
    plan = [r[0] for r in db.execute("EXPLAIN (ANALYZE, COSTS OFF) " + statement("tenant = 17"))]
    assert any("Index Cond: (tenant = 17)" in line for line in plan), plan
    counters = milvus_scan(db, statement("tenant = 17"))
    # 1% of the rows pass: every segment measures its passing rows.
    passing = db.execute("SELECT count(*) FROM items WHERE tenant = 17 AND embedding IS NOT NULL").fetchone()[0]
    assert (counters["filtered"], counters["matched"], counters["walked"]) == (1, passing, 0), counters
    assert counters["measured"] >= 1
    # A tenant no segment holds: the statistics skip every segment.
    counters = milvus_scan(db, statement("tenant = 5000"))
    assert (counters["skipped"], counters["matched"]) == (1, 0), counters


def test_a_boolean_parameter_is_pushed(items):
    """A comparison with a parameter stays a comparison, and is pushed on
    every version (PostgreSQL 15 turns `flag = false` into `NOT flag`,
    which only a boolean btree takes)."""
    db = items
    db.execute(f"PREPARE q(bool) AS SELECT id FROM items WHERE flag = $1 ORDER BY embedding <-> '{QUERY}' LIMIT 10")
    db.execute("SET plan_cache_mode = force_generic_plan")
    plan = "\n".join(r[0] for r in db.execute("EXPLAIN EXECUTE q(false)"))
    assert "Index Cond: (flag = $1)" in plan, plan
    got = [r[0] for r in db.execute("EXECUTE q(false)")]
    db.execute("SET enable_indexscan = off")
    assert got == [r[0] for r in db.execute("EXECUTE q(false)")] and len(got) == 10


def test_the_planner_weighs_the_pushed_keys(db):
    """Beside a btree on the filter column: a key keeping one row of 300,000
    goes to the btree and a sort of one row (testing every row's value
    costs more); one keeping 1% to the milvus index, which measures those
    rows and fetches ten from the table, where the btree would fetch them
    all."""
    db.execute("CREATE TABLE big (id int, ref int, v vector(2))")
    db.execute("INSERT INTO big SELECT i, i, ARRAY[sin(i), cos(i)]::vector FROM generate_series(1, 300000) i")
    db.execute("CREATE INDEX big_idx ON big USING milvus (v vector_l2_ops, ref)")
    db.execute("CREATE INDEX big_ref_idx ON big (ref)")
    db.execute("ANALYZE big")

    def plan(where):
        return "\n".join(r[0] for r in db.execute(f"EXPLAIN SELECT id FROM big WHERE {where} ORDER BY v <-> '[1,0]' LIMIT 10"))

    assert "Index Scan using big_ref_idx" in plan("ref = 77") and "Sort" in plan("ref = 77"), plan("ref = 77")
    for where in ("ref < 3000", "ref < 30000", "ref > 1000"):
        assert "Index Scan using big_idx" in plan(where) and "Index Cond" in plan(where), plan(where)


def test_filter_values_survive_kill_9_mid_insert(cluster, items):
    db = items
    db.commit()
    name = db.info.dbname
    writer = cluster.connect(name)
    fill(writer, ROWS + 1, 500)
    writer.commit()
    cluster.crash()
    cluster.restart()
    db = cluster.connect(name)
    try:
        for where in ("tenant = 17", "label = 'l3' AND tenant < 50", "tags && ARRAY['t1']", "tenant IS NULL"):
            got, want, _ = answers(db, where, 50)
            assert same(got, want) and len(got) > 0, where
    finally:
        db.close()
        writer.close()


def test_a_changed_filter_value_is_a_new_index_entry(items):
    """An UPDATE of a filter column is not HOT (the column is indexed): the
    row's new version enters the index with its new value, and the old
    version's entry is not returned for the old value."""
    db = items
    moved = [r[0] for r in db.execute("SELECT id FROM items WHERE tenant = 17 AND embedding IS NOT NULL LIMIT 20")]
    db.execute("UPDATE items SET tenant = 777 WHERE id = ANY(%s)", (moved,))
    hot = db.execute("SELECT pg_stat_get_xact_tuples_hot_updated('items'::regclass)").fetchone()[0]
    assert hot == 0, "an update of a filter column is never HOT"
    got, want, _ = answers(db, "tenant = 777", 50)
    assert same(got, want) and sorted(i for _, i in got) == sorted(moved)
    got, want, _ = answers(db, "tenant = 17", 400)
    assert same(got, want) and not set(moved) & {i for _, i in got}
    db.commit()
    db.execute("SELECT * FROM milvus_flush('items_idx')")
    got, want, _ = answers(db, "tenant = 777", 50)
    assert same(got, want) and len(got) == len(moved)


def test_concurrent_inserts_keep_every_filter_value(cluster, items):
    """Four sessions inserting at once into the growing segment (sealing
    it, again and again, as it fills): every row is found under its values."""
    db = items
    db.commit()
    name = db.info.dbname

    def writer(first):
        with cluster.connect(name) as conn:
            for start in range(first, first + 2000, 250):
                fill(conn, start, 250)

    threads = [threading.Thread(target=writer, args=(ROWS + 1 + 2000 * w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert db.execute("SELECT count(*) FROM items").fetchone() == (ROWS + 8000,)
    for where in ("tenant = 17", "label = 'l3' AND tenant < 50", "tags && ARRAY['t1']", "tenant IS NULL",
                  "big BETWEEN 10 AND 20"):
        got, want, plan = answers(db, where, 400)
        assert same(got, want) and len(got) > 0, f"{where}\n{plan}"


def test_a_standby_answers_filters_as_the_primary(tmp_path):
    """The default embedded store on a streaming standby: the filter values
    of growing rows replay with them, and a flushed or clustered segment's
    scalar binlog comes through WAL with its other objects (the standby's
    object directory, removed, is restored from the index's pages)."""
    primary = Cluster("filters-primary", ["milvus.max_workers = 0"])
    standby = None
    try:
        with primary.connect() as p:
            p.execute("CREATE EXTENSION pg_milvus")
            p.execute(f"""CREATE TABLE items (id int PRIMARY KEY, tenant int, big bigint, small smallint,
                                              flag bool, day date, at timestamptz, ref uuid, label varchar(8),
                                              tags text[], nums int[], embedding vector({DIMS}))""")
            fill(p, 1, 3000)
            p.execute("""CREATE INDEX items_idx ON items USING milvus
                         (embedding vector_l2_ops, tenant, big, small, flag, day, at, ref, label, tags, nums)
                         WITH (segment_max_rows = 1000, cluster_by = 'tenant')""")
            p.execute("ANALYZE items")
            standby = Cluster.standby_of("filters-standby", primary)
            fill(p, 3001, 700)  # growing: in WAL only
            with standby.connect() as s:
                wheres = ("tenant = 17", "label = 'l3' AND tenant < 50", "tags && ARRAY['t1']", "tenant IS NULL")

                def agree(stage):
                    replayed(p, s)
                    for where in wheres:
                        primary_got, want, _ = answers(p, where, 50)
                        got, _, plan = answers(s, where, 50)
                        assert same(got, want) and got == primary_got, f"{stage}: {where}\n{plan}"

                agree("built, growing")
                p.execute("SELECT * FROM milvus_flush('items_idx')")
                p.execute("SELECT * FROM milvus_compact('items_idx')")
                reasons = [r[0] for r in p.execute("SELECT seal_reason FROM milvus_segments('items_idx') "
                                                   "WHERE state = 'flushed'")]
                assert len(reasons) == 4 and all(r.startswith("clustering of") for r in reasons), reasons
                subprocess.run(["rm", "-rf", f"{standby.host}/data/pg_milvus/objects"], check=True)
                agree("flushed and clustered")
    finally:
        if standby:
            standby.stop()
        primary.stop()


@pytest.mark.parametrize(
    "columns, sqlstate, message",
    [
        # No operator class: Postgres' own error.
        ("embedding vector_l2_ops, price", "42704", "data type numeric has no default operator class"),
        ("tenant, embedding vector_l2_ops", "42P17", "the first column of a milvus index must be the vector"),
        ("embedding vector_l2_ops, embedding vector_ip_ops", "42P17", "column 2 of a milvus index cannot be a vector"),
        ("terms sparsevec_ip_ops, tenant", "0A000", "a milvus index with filter columns cannot index sparsevec"),
        ("wide vector_l2_ops, tenant", "0A000", "cannot index vector of more than 2034 dimensions"),
        ("embedding vector_l2_ops, tags", "0A000", "cannot filter on column 2 of type boolean[]"),
    ],
)
def test_columns_the_index_cannot_keep_are_refused(db, columns, sqlstate, message):
    db.execute(f"""CREATE TABLE t (id int, tenant int, price numeric, tags bool[], terms sparsevec(100),
                                   wide vector(3000), embedding vector({DIMS}))""")
    db.execute("INSERT INTO t VALUES (1, 1, 1, '{true}', '{1:1}/100', NULL, %s)", (QUERY,))
    with pytest.raises(psycopg.Error) as error:
        db.execute(f"CREATE INDEX ON t USING milvus ({columns})")
    assert error.value.sqlstate == sqlstate
    assert message in error.value.diag.message_primary
    db.rollback()
    assert db.execute("SELECT count(*) FROM pg_indexes WHERE tablename = 't'").fetchone() == (0,)


def test_clustering_puts_each_tenant_in_few_segments(db):
    """`cluster_by`: compaction rewrites the segments as ranges of the
    column, so a tenant's filter searches one segment and skips the rest by
    their statistics; answers stay a sequential scan's through the
    clustering, fresh rows, a second clustering and a purge."""
    db.execute(f"CREATE TABLE items (id int PRIMARY KEY, tenant int, embedding vector({DIMS}))")

    def load(first, count):
        db.execute(
            """INSERT INTO items SELECT i, CASE WHEN i %% 50 = 0 THEN NULL ELSE (i * 7919) %% 100 END,
                      ARRAY[sin(i), cos(i), sin(i * 0.3), cos(i * 0.7), sin(i * 1.1), cos(i * 1.3),
                            sin(i * 0.17), cos(i * 0.23)]::vector
               FROM generate_series(%s::int, %s::int) i""",
            (first, first + count - 1),
        )

    load(1, 12000)
    db.execute("""CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops, tenant)
                  WITH (segment_max_rows = 3000, growing_max_rows = 1000, cluster_by = 'tenant')""")
    db.execute("ANALYZE items")
    db.execute("SET enable_seqscan = off")
    # CREATE INDEX writes the table's rows in their order: every tenant in
    # every segment.
    assert milvus_scan(db, statement("tenant = 17"))["skipped"] == 0
    [(plan,)] = db.execute("SELECT plan FROM milvus_compact('items_idx', dry_run => true)").fetchall()
    assert plan == "cluster 4 segments [1, 2, 3, 4] into 4 of 12000 rows by their ranges", plan
    [(_, output)] = db.execute("SELECT plan, output_segment FROM milvus_compact('items_idx')").fetchall()
    segments = db.execute(
        "SELECT segment_id, seal_reason FROM milvus_segments('items_idx') WHERE state = 'flushed' ORDER BY 1"
    ).fetchall()
    assert [s for s, _ in segments] == [output, output + 1, output + 2, output + 3], segments
    assert all(r == "clustering of [1, 2, 3, 4]" for _, r in segments), segments
    for tenant in (1, 17, 99):
        counters = milvus_scan(db, statement(f"tenant = {tenant}"))
        assert counters["skipped"] == 3, (tenant, counters)
    assert milvus_scan(db, statement("tenant IS NULL"))["skipped"] == 3
    for where in ("tenant = 17", "tenant < 3", "tenant BETWEEN 40 AND 45", "tenant IS NULL", "tenant <> 5"):
        got, want, plan = answers(db, where, 50)
        assert same(got, want) and len(got) == 50, (where, plan)
    assert not db.execute("SELECT * FROM milvus_compact('items_idx', dry_run => true)").fetchall()

    # Fresh rows, flushed: every tenant again. A fan-in's share of the
    # clustered rows (3,000) is due a second clustering of everything.
    load(12001, 3000)
    db.execute("SELECT * FROM milvus_flush('items_idx')")
    assert milvus_scan(db, statement("tenant = 17"))["skipped"] <= 3
    plans = [r[0] for r in db.execute("SELECT plan FROM milvus_compact('items_idx')")]
    assert [p for p in plans if p.startswith("cluster ")], plans
    assert milvus_scan(db, statement("tenant = 17"))["skipped"] >= 3
    got, want, _ = answers(db, "tenant = 17", 400)
    assert same(got, want) and len(got) == db.execute("SELECT count(*) FROM items WHERE tenant = 17").fetchone()[0]

    # A clustered segment purged: it stays one range, clustered.
    db.execute("DELETE FROM items WHERE tenant < 10")
    db.commit()
    db.autocommit = True
    db.execute("VACUUM items")
    plans = [r[0] for r in db.execute("SELECT plan FROM milvus_compact('items_idx')")]
    db.autocommit = False
    assert any(p.startswith("purge segment") for p in plans), plans
    reasons = [r[0] for r in db.execute("SELECT seal_reason FROM milvus_segments('items_idx') WHERE state = 'flushed'")]
    assert all(r.startswith("clustering of") for r in reasons), reasons
    db.execute("SET enable_seqscan = off")
    for where in ("tenant = 17", "tenant < 12", "tenant IS NULL"):
        got, want, _ = answers(db, where, 50)
        assert same(got, want), where


@pytest.mark.parametrize(
    "cluster_by, message",
    [
        ("nope", 'cluster_by names "nope", which is not a filter column of the index'),
        ("label", 'cluster_by column "label" is not of an integer, boolean, date, timestamp or uuid type'),
        ("embedding", 'cluster_by names "embedding", which is not a filter column of the index'),
    ],
)
def test_a_cluster_by_the_index_cannot_cluster_by_is_refused(db, cluster_by, message):
    db.execute(f"CREATE TABLE t (id int, tenant int, label text, embedding vector({DIMS}))")
    with pytest.raises(psycopg.Error) as error:
        db.execute(f"""CREATE INDEX ON t USING milvus (embedding vector_l2_ops, tenant, label)
                       WITH (cluster_by = '{cluster_by}')""")
    assert error.value.sqlstate == "22023"
    assert error.value.diag.message_primary == message


def test_an_altered_cluster_by_is_warned_about_and_merges_go_on(db):
    db.execute(f"CREATE TABLE t (id int, tenant int, embedding vector({DIMS}))")
    db.execute(f"CREATE INDEX t_idx ON t USING milvus (embedding vector_l2_ops, tenant) WITH (cluster_by = 'tenant')")
    for first in (1, 101):
        db.execute(f"INSERT INTO t SELECT i, i % 7, '{QUERY}' FROM generate_series({first}, {first + 99}) i")
        db.execute("SELECT * FROM milvus_flush('t_idx')")
    db.execute("ALTER INDEX t_idx SET (cluster_by = 'nope')")
    warnings = []
    db.add_notice_handler(lambda d: warnings.append(d.message_primary))
    plans = [r[0] for r in db.execute("SELECT plan FROM milvus_compact('t_idx')")]
    assert plans == ["merge 2 small segments [1, 2] into one of 200 rows"], plans
    assert 'milvus index "t_idx": cluster_by names "nope", which is not a filter column of the index; ' \
           "compacting without clustering" in warnings, warnings
