"""The rows' codes on a real cluster (`quantization`: unset, 8-bit codes
below 256 dimensions and RaBitQ's from 256): a scan walks each flushed
segment's graph by the codes and re-ranks what it keeps on the rows, so its
answers carry exact distances and the recall of a walk on the rows;
`quantization = none` keeps no codes; ALTER INDEX takes effect at the next
REINDEX or compaction."""

import numpy as np
import pytest

import helpers
from helpers import literal, load, milvus_scan, near, objects_of


# The metrics with codes: L1 has none.
METRICS = {opclass: op for opclass, op in helpers.METRICS.items() if opclass != "vector_l1_ops"}


def reranked(conn, op, q):
    """Rows the index re-ranked on their vectors answering the top 10 of `q`."""
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        return milvus_scan(conn, f"SELECT id FROM items ORDER BY embedding {op} '{literal(q)}' LIMIT 10")["reranked"]


def recall(conn, op, queries):
    return np.mean([conn.execute("SELECT milvus_recall(%s)", (
        f"SELECT id FROM items ORDER BY embedding {op} '{literal(q)}' LIMIT 10",)).fetchone()[0] for q in queries])


def in_exact_order(conn, op, q):
    """The index's top 10 for `q` as (id, distance), checked to come
    nearest first by their exact distances (re-ranked), not by the codes'
    estimates."""
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        got = conn.execute(f"SELECT id, embedding {op} %s FROM items ORDER BY embedding {op} %s LIMIT 10",
                           (q, q)).fetchall()
    distances = [d for _, d in got]
    assert distances == sorted(distances), distances
    return got


@pytest.mark.parametrize("opclass", METRICS)
def test_codes_find_what_the_rows_find(conn, opclass):
    op = METRICS[opclass]
    rows = load(conn, 8000)
    conn.execute(f"CREATE INDEX items_idx ON items USING milvus (embedding {opclass})")
    queries = near(rows, 30)
    conn.execute("SET milvus.ef_search = 20")

    for q in queries[:5]:
        in_exact_order(conn, op, q)
    q = queries[0]
    assert reranked(conn, op, q) == 20, "ef_search rows re-ranked on the rows"
    coded = recall(conn, op, queries)

    conn.execute("ALTER INDEX items_idx SET (quantization = none)")
    assert reranked(conn, op, q) == 20, "segments keep their codes until rewritten"
    conn.execute("REINDEX INDEX items_idx")
    assert reranked(conn, op, q) == 0, "no codes: the graph is walked on the rows"
    plain = recall(conn, op, queries)
    assert coded >= plain - 0.02, f"recall {coded} with codes, {plain} without"


@pytest.mark.parametrize("opclass", METRICS)
def test_rabitq_codes_find_what_the_rows_find(cluster, conn, opclass):
    """RaBitQ codes, an index's default from 256 dimensions, where their
    estimates are tight (their error shrinks as 1 / sqrt(dims); at 64 they
    cost recall, docs/benchmarks.md): rows in exact order, twice
    `ef_search` rows re-ranked, the recall of a walk on the rows, halfvec
    rows too; `quantization = rabitq` chooses them, RESET the default."""
    op = METRICS[opclass]
    dims, n = 256, 6000
    rng = np.random.default_rng(3)
    centres = rng.uniform(-1, 1, (40, dims))
    rows = (centres[rng.integers(0, 40, n)] + 0.1 * rng.standard_normal((n, dims))).astype(np.float32)
    conn.execute(f"DROP TABLE items; CREATE TABLE items (id bigint PRIMARY KEY, embedding vector({dims}))")
    with conn.cursor() as cur, cur.copy("COPY items (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "vector"])
        for i, v in enumerate(rows):
            copy.write_row((i, v))
    conn.execute(f"CREATE INDEX items_idx ON items USING milvus (embedding {opclass})")
    queries = near(rows, 30)
    conn.execute("SET milvus.ef_search = 40")
    for q in queries[:5]:
        got = in_exact_order(conn, op, q)
        exact = dict(conn.execute(f"SELECT id, embedding {op} %s FROM items WHERE id = ANY(%s)",
                                  (q, [i for i, _ in got])).fetchall())
        assert all(exact[i] == d for i, d in got), "exact distances, not estimates"
    assert reranked(conn, op, queries[0]) == 80, "twice ef_search re-ranked"
    coded = recall(conn, op, queries)

    conn.execute("ALTER INDEX items_idx SET (quantization = none)")
    conn.execute("REINDEX INDEX items_idx")
    assert reranked(conn, op, queries[0]) == 0
    plain = recall(conn, op, queries)
    assert coded >= plain - 0.02, f"recall {coded} with RaBitQ codes, {plain} without"
    conn.execute("ALTER INDEX items_idx SET (quantization = rabitq)")
    conn.execute("REINDEX INDEX items_idx")
    assert reranked(conn, op, queries[0]) == 80, "rabitq by name"
    conn.execute("ALTER INDEX items_idx SET (quantization = sq8)")
    conn.execute("REINDEX INDEX items_idx")
    assert reranked(conn, op, queries[0]) == 40, "sq8 by name"
    # Back to the default: the segments flushed from now on get RaBitQ
    # codes beside the sq8 ones, and a scan walks each by its own. (A
    # flush builds a graph past 4,096 rows: one growing segment of 5,000.)
    conn.execute("ALTER INDEX items_idx RESET (quantization)")
    conn.execute("ALTER INDEX items_idx SET (growing_max_rows = 8000)")
    more = (centres[rng.integers(0, 40, 5000)] + 0.1 * rng.standard_normal((5000, dims))).astype(np.float32)
    with conn.cursor() as cur, cur.copy("COPY items (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "vector"])
        for i, v in enumerate(more):
            copy.write_row((n + i, v))
    objects = objects_of(cluster, conn)
    before = set(objects.rglob("index-*"))
    conn.execute("SELECT * FROM milvus_flush('items_idx')")
    written = set(objects.rglob("index-*")) - before
    assert written and all(p.read_bytes()[48] == 2 for p in written), "RaBitQ codes (kind 2 at byte 48)"
    for q in near(more, 3):
        got = in_exact_order(conn, op, q)
        assert any(i >= n for i, _ in got), "the new segment's rows are found"
    assert recall(conn, op, queries) >= plain - 0.02
    conn.execute("REINDEX INDEX items_idx")
    assert reranked(conn, op, queries[0]) == 80, "the default again"

    # halfvec rows code as their floats do.
    conn.execute("DROP INDEX items_idx")
    half_opclass = opclass.replace("vector_", "halfvec_")
    conn.execute(f"CREATE INDEX items_idx ON items USING milvus ((embedding::halfvec({dims})) {half_opclass})")
    for q in queries[:3]:
        literal_q = f"'{literal(q)}'::halfvec({dims})"
        with conn.transaction():
            conn.execute("SET LOCAL enable_seqscan = off")
            by_index = [r[0] for r in conn.execute(
                f"SELECT id FROM items ORDER BY embedding::halfvec({dims}) {op} {literal_q} LIMIT 10")]
        with conn.transaction():
            conn.execute("SET LOCAL enable_indexscan = off")
            exact = [r[0] for r in conn.execute(
                f"SELECT id FROM items ORDER BY embedding::halfvec({dims}) {op} {literal_q} LIMIT 10")]
        assert len(set(by_index) & set(exact)) >= 8, (by_index, exact)


@pytest.mark.parametrize("quantization", ["unset", "sq8"])
def test_near_parallel_rows_under_cosine_keep_their_recall(db, quantization):
    """pgvector's recall test under cosine: 10,000 rows of 3 dimensions in
    one octant, whose neighbours lie a few hundredths of a radian apart.
    Unset, rows this narrow get no codes; asked for, sq8 codes rank rows by
    their directions. Recall at the default ef_search after CREATE INDEX,
    after inserts (growing, then flushed), and in a strict-order iterative
    scan under a filter."""
    rng = np.random.default_rng(12)
    db.execute("CREATE TABLE lowd (id int PRIMARY KEY, v vector(3))")

    def insert(first, n):
        with db.cursor() as cur, cur.copy("COPY lowd (id, v) FROM STDIN") as copy:
            for i, v in enumerate(rng.random((n, 3), dtype=np.float32)):
                copy.write_row((first + i, literal(v)))

    def recall(where=""):
        queries = rng.random((20, 3), dtype=np.float32)
        return np.mean([db.execute("SELECT milvus_recall(%s)", (
            f"SELECT id FROM lowd {where} ORDER BY v <=> '{literal(q)}' LIMIT 10",)).fetchone()[0] for q in queries])

    insert(0, 10_000)
    option = "" if quantization == "unset" else f" WITH (quantization = {quantization})"
    db.execute(f"CREATE INDEX lowd_idx ON lowd USING milvus (v vector_cosine_ops){option}")
    assert recall() >= 0.99, "after CREATE INDEX"
    insert(10_000, 5_000)
    assert recall() >= 0.99, "with growing rows"
    db.execute("SELECT * FROM milvus_flush('lowd_idx')")
    assert recall() >= 0.99, "flushed"
    db.execute("SET milvus.iterative_scan = strict_order")
    assert recall("WHERE id % 5 = 0") >= 0.99, "a strict-order iterative scan under a filter"
