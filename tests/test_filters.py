"""Filtered searches return what a sequential scan returns: the index scan
never stops while rows remain (milvus.iterative_scan), the planner weighs a
filter's selectivity against a sequential scan, and pg_stat counts the
scans. The reproduction of each defect a new user found comes first."""

import psycopg
import pytest

from helpers import milvus_scan, milvus_scan_line

FAR = "[30,0,0,0,0,0,0,0]"


@pytest.fixture
def f(db):
    """The trial's table: 30,000 rows, 600 (2%) tagged: those with the
    smallest first coordinate, the farthest from FAR."""
    db.execute("CREATE TABLE f (id int, tag int, v vector(8))")
    db.execute("SELECT setseed(0.5)")
    db.execute("INSERT INTO f SELECT g, (g <= 600)::int, array[g / 1000.0, random(), random(), random(), random(),"
               " random(), random(), random()]::vector FROM generate_series(1, 30000) g")
    db.execute("CREATE INDEX f_idx ON f USING milvus (v vector_l2_ops)")
    db.execute("ANALYZE f")
    return db


def ids(conn, query, index=True):
    conn.execute(f"SET enable_indexscan = {'on' if index else 'off'}")
    conn.execute(f"SET enable_seqscan = {'off' if index else 'on'}")
    try:
        return [r[0] for r in conn.execute(query).fetchall()]
    finally:
        conn.execute("RESET enable_indexscan")
        conn.execute("RESET enable_seqscan")


def plan(conn, query):
    return "\n".join(r[0] for r in conn.execute(f"EXPLAIN {query}").fetchall())


def test_a_selective_filter_returns_what_a_sequential_scan_returns(f):
    # Before: the index scan gave up after 20,000 candidates and returned 0.
    query = f"SELECT id FROM f WHERE tag = 1 ORDER BY v <-> '{FAR}' LIMIT 10"
    truth = ids(f, query, index=False)
    assert len(truth) == 10
    assert ids(f, query) == truth
    # strict_order finds the same rows here: they all come from the exact tail.
    f.execute("SET milvus.iterative_scan = strict_order")
    assert ids(f, query) == truth
    # off is pgvector's default: the first round only, so nothing passes.
    f.execute("SET milvus.iterative_scan = off")
    assert ids(f, query) == []
    f.execute("RESET milvus.iterative_scan")


def test_an_index_scan_without_limit_returns_every_row_once(f):
    # Before: 20,000 of 30,000.
    got = ids(f, f"SELECT id FROM f ORDER BY v <-> '{FAR}'")
    assert len(got) == 30000 and len(set(got)) == 30000
    # A small max_scan_tuples only ends the approximate rounds sooner.
    f.execute("SET milvus.max_scan_tuples = 100")
    got = ids(f, f"SELECT id FROM f ORDER BY v <-> '{FAR}'")
    assert len(set(got)) == 30000
    # Past the rounds the rows come in exact order.
    f.execute("SET enable_seqscan = off")
    distances = [r[0] for r in f.execute(f"SELECT v <-> '{FAR}' FROM f ORDER BY v <-> '{FAR}'").fetchall()]
    f.execute("RESET enable_seqscan")
    f.execute("RESET milvus.max_scan_tuples")
    assert distances[100:] == sorted(distances[100:])


@pytest.mark.parametrize("modulus", [100, 10, 2])
def test_uniform_filters_fill_their_limit_with_the_nearest_rows(f, modulus):
    query = f"SELECT id FROM f WHERE id % {modulus} = 0 ORDER BY v <-> '[15,0.5,0.5,0.5,0.5,0.5,0.5,0.5]' LIMIT 10"
    truth = ids(f, query, index=False)
    got = ids(f, query)
    assert len(got) == 10
    assert len(set(got) & set(truth)) >= 9, (got, truth)


def test_the_planner_weighs_the_filter(f):
    # An unselective filter: the index's first round answers the LIMIT.
    assert "Index Scan using f_idx" in plan(f, f"SELECT id FROM f WHERE tag = 0 ORDER BY v <-> '{FAR}' LIMIT 10")
    # A filter keeping 0.1% of the rows: reading most of the index and
    # fetching its rows from the heap costs more than a sequential scan.
    f.execute("UPDATE f SET tag = 2 WHERE id <= 30")
    f.execute("ANALYZE f")
    selective = plan(f, f"SELECT id FROM f WHERE tag = 2 ORDER BY v <-> '{FAR}' LIMIT 10")
    assert "Seq Scan on f" in selective and "Index Scan" not in selective, selective
    # A larger LIMIT costs the index more.
    small = f.execute(f"EXPLAIN (FORMAT JSON) SELECT id FROM f ORDER BY v <-> '{FAR}' LIMIT 10").fetchone()[0]
    large = f.execute(f"EXPLAIN (FORMAT JSON) SELECT id FROM f ORDER BY v <-> '{FAR}' LIMIT 1000").fetchone()[0]
    assert small[0]["Plan"]["Total Cost"] < large[0]["Plan"]["Total Cost"]


def test_growing_rows_of_wide_vectors_keep_the_index_scan(db):
    """5,000 growing rows of 768 dimensions fill 2,500 index pages. Priced
    as pages read from disk, they made the planner sort a sequential scan,
    which it prices without detoasting the vectors: 20x slower. The growing
    chain is in shared buffers; the index scan stays, and answers exactly."""
    db.execute("CREATE TABLE w (id int, v vector(768))")
    db.execute("CREATE INDEX w_idx ON w USING milvus (v vector_cosine_ops) WITH (growing_max_rows = 100000)")
    db.execute("SELECT setseed(0.25)")
    db.execute("INSERT INTO w SELECT g, (SELECT array_agg(random() - 0.5) FROM generate_series(1, 768) d WHERE g > 0)::vector"
               " FROM generate_series(1, 5000) g")
    db.execute("ANALYZE w")
    assert db.execute("SELECT state, rows FROM milvus_segments('w_idx')").fetchall() == [("growing", 5000)]
    q = db.execute("SELECT v::text FROM w WHERE id = 7").fetchone()[0]
    query = f"SELECT id FROM w ORDER BY v <=> '{q}' LIMIT 10"
    assert "Index Scan using w_idx" in plan(db, query)
    assert ids(db, query) == ids(db, query, index=False)


def test_scans_are_counted_in_pg_stat_user_indexes(cluster, f):
    for _ in range(5):
        ids(f, f"SELECT id FROM f ORDER BY v <-> '{FAR}' LIMIT 3")
    # Statistics reach the shared counters when the session is idle, or at once here.
    f.execute("SELECT pg_stat_force_next_flush()")
    with cluster.connect(f.info.dbname) as other:
        scans, read = other.execute(
            "SELECT idx_scan, idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'f_idx'").fetchone()
    assert scans >= 5 and read >= 15, (scans, read)


def test_the_default_operator_class_is_l2(db):
    db.execute("CREATE TABLE t (v vector(3))")
    db.execute("INSERT INTO t VALUES ('[1,0,0]'), ('[0,1,0]'), ('[5,5,5]')")
    db.execute("CREATE INDEX t_idx ON t USING milvus (v)")
    opclass = db.execute("SELECT opcname FROM pg_index i JOIN pg_opclass o ON o.oid = i.indclass[0]"
                         " WHERE i.indexrelid = 't_idx'::regclass").fetchone()[0]
    assert opclass == "vector_l2_ops"
    db.execute("SET enable_seqscan = off")
    assert [r[0] for r in db.execute("SELECT v::text FROM t ORDER BY v <-> '[1,0.1,0]' LIMIT 2").fetchall()] == \
        ["[1,0,0]", "[0,1,0]"]


def test_maintenance_on_a_partitioned_index(db):
    db.execute("CREATE TABLE p (id int, part int, v vector(4)) PARTITION BY LIST (part)")
    db.execute("CREATE TABLE p1 PARTITION OF p FOR VALUES IN (1)")
    db.execute("CREATE TABLE p2 PARTITION OF p FOR VALUES IN (2)")
    db.execute("CREATE INDEX p_idx ON p USING milvus (v vector_l2_ops)")
    db.execute("INSERT INTO p SELECT g, 1 + g % 2, array[g, 0, 0, 0]::vector FROM generate_series(1, 1000) g")
    # Before: could not open file "pg_tblspc/0/...". Now: one row per partition index.
    flushed = db.execute("SELECT index::text, state FROM milvus_flush('p_idx') ORDER BY 1").fetchall()
    assert [r[0] for r in flushed] == ["p1_v_idx", "p2_v_idx"] and all(r[1] == "flushed" for r in flushed), flushed
    assert db.execute("SELECT segments FROM milvus_prewarm('p_idx')").fetchone()[0] == 2
    assert len(db.execute("SELECT * FROM milvus_compact('p_idx', dry_run => true)").fetchall()) == 0
    assert sorted(r[0] for r in db.execute("SELECT index::text FROM milvus_gc('p_idx')").fetchall()) == ["p1_v_idx", "p2_v_idx"]
    # The per-segment functions say where the segments are, and how to ask.
    for function in ("milvus_segments", "milvus_index_pages"):
        with pytest.raises(Exception, match="is a partitioned index") as e:
            db.execute(f"SELECT * FROM {function}('p_idx')")
        assert "pg_partition_tree('p_idx')" in e.value.diag.message_detail
    # The query the message shows works.
    rows = db.execute("SELECT p.relid::text, s.rows FROM pg_partition_tree('p_idx') p, milvus_segments(p.relid) s"
                      " WHERE p.isleaf AND s.state = 'flushed' ORDER BY 1").fetchall()
    assert rows == [("p1_v_idx", 500), ("p2_v_idx", 500)]
    db.execute("SET enable_seqscan = off")
    assert db.execute("SELECT id FROM p ORDER BY v <-> '[3,0,0,0]' LIMIT 1").fetchone()[0] == 3


def test_vacuum_and_build_give_free_pages_back(cluster, db):
    # The pages of rows and manifests, without the objects an index on the
    # embedded store also keeps in pages (test_flush.py measures those):
    # here the objects go to a directory outside the data directory, and
    # the pages keep only each segment's keys (8 bytes a row, for VACUUM).
    db.execute("CREATE TABLE t (id int, v vector(16))")
    db.execute(f"CREATE INDEX t_idx ON t USING milvus (v vector_l2_ops) WITH (storage_url = 'file://{cluster.host}/t-store')")
    db.execute("INSERT INTO t SELECT g, array_fill(g::real, ARRAY[16])::vector FROM generate_series(1, 20000) g")
    size = lambda: db.execute("SELECT pg_relation_size('t_idx')").fetchone()[0]
    keys = lambda: db.execute("SELECT pages FROM milvus_index_pages('t_idx') WHERE kind = 'objects'").fetchone()[0]
    assert size() > 1_000_000  # 20,000 growing rows in pages
    # A flush gives back what it emptied; its keys take pages its rows
    # left. Before: the index kept its largest size for good.
    db.execute("SELECT * FROM milvus_flush('t_idx')")
    assert keys() == 20 and size() <= (8 + keys()) * 8192, (keys(), size())
    # VACUUM too, when a flush could not (a scan held the index then): here
    # the workers flush while a session has the index open.
    db.execute("INSERT INTO t SELECT g, array_fill(g::real, ARRAY[16])::vector FROM generate_series(20001, 40000) g")
    db.execute("BEGIN")
    db.execute("SELECT count(*) FROM (SELECT id FROM t ORDER BY v <-> array_fill(1::real, ARRAY[16])::vector LIMIT 1) s")
    with psycopg.connect(db.info.dsn, autocommit=True) as other:
        other.execute("SELECT * FROM milvus_flush('t_idx')")
    db.execute("COMMIT")
    assert size() > 1_000_000, "the session's lock kept the pages"
    db.execute("DELETE FROM t WHERE id > 20000")
    db.execute("VACUUM t")
    assert size() <= (8 + keys()) * 8192, (keys(), size())
    pages = dict(db.execute("SELECT kind, pages FROM milvus_index_pages('t_idx')").fetchall())
    assert pages["unreferenced"] == 0 and pages["growing"] == 1, pages
    # Inserts, searches and flushes go on in the smaller file.
    db.execute("INSERT INTO t SELECT g, array_fill(g::real, ARRAY[16])::vector FROM generate_series(20001, 21000) g")
    db.execute("SET enable_seqscan = off")
    assert db.execute("SELECT id FROM t ORDER BY v <-> array_fill(20500::real, ARRAY[16])::vector LIMIT 1").fetchone()[0] == 20500
    assert db.execute("SELECT count(*) FROM (SELECT id FROM t ORDER BY v <-> array_fill(0::real, ARRAY[16])::vector) s").fetchone()[0] == 21000
    # A fresh build is a few pages beside its keys: its rows went to
    # object storage.
    db.execute("REINDEX INDEX t_idx")
    assert size() <= (8 + keys()) * 8192, (keys(), size())


def test_explain_analyze_shows_what_the_scan_did(f):
    f.execute("SET enable_seqscan = off")
    fields = milvus_scan(f, f"SELECT id FROM f WHERE tag = 1 ORDER BY v <-> '{FAR}' LIMIT 10", "f_idx")
    # One flushed segment (the build's), searched in rounds, then exactly.
    assert fields["scans"] == 1 and fields["segments"] == 1 and fields["page_rows"] == 0, fields
    assert fields["rounds"] >= 1 and fields["exact"] == 1 and fields["offered"] > 10_000, fields
    # An unfiltered LIMIT: one round, no exact tail.
    line = milvus_scan_line(f, f"SELECT id FROM f ORDER BY v <-> '{FAR}' LIMIT 10")
    # The segment's codes found ef_search (40) rows, re-ranked exactly.
    assert "rounds=1 exact=0 offered=10 reranked=40" in line, line
    # Plain EXPLAIN runs nothing and says nothing more.
    assert not any("Milvus" in r[0] for r in f.execute(f"EXPLAIN SELECT id FROM f ORDER BY v <-> '{FAR}' LIMIT 10"))


def test_alter_index_says_when_options_take_effect(f):
    notices = []
    f.add_notice_handler(lambda d: notices.append(d.message_primary))
    for option in ("m = 32", "quantization = none"):
        f.execute(f"ALTER INDEX f_idx SET ({option})")
        assert any("apply to the segments flushed or compacted from now on" in n for n in notices), notices
        notices.clear()
    notices.clear()
    f.execute("ALTER INDEX f_idx SET (segment_max_rows = 5000)")
    assert any("apply at once: to the growing segment and to the next merges" in n for n in notices), notices
    notices.clear()
    f.execute("CREATE INDEX f_id ON f (id)")
    f.execute("ALTER INDEX f_id SET (fillfactor = 80)")
    assert notices == []
