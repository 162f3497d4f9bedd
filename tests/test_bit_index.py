"""pgvector's binary quantization with a milvus index: an expression index on
`binary_quantize(embedding)::bit(n)` (bit_hamming_ops, bit_jaccard_ops), rows
stored as their bits, searched by their metric from flushed and growing
segments, and the re-rank by the full vectors pgvector's README shows. Hamming
distances are integers, so ties are many: an index answer is right when its
distances are a sequential scan's."""

import numpy as np
import pytest
from pgvector.psycopg import register_vector

from helpers import copy_rows


DIMS = 128
# '%' doubled: the queries carry psycopg placeholders.
OPS = {"bit_hamming_ops": "<~>", "bit_jaccard_ops": "<%%>"}
QUANTIZED = f"binary_quantize(embedding)::bit({DIMS})"


def distances(conn, op, q, scan):
    with conn.transaction():
        conn.execute(f"SET LOCAL {scan} = off")
        conn.execute("SET LOCAL milvus.ef_search = 200")
        return [r[0] for r in conn.execute(
            f"SELECT {QUANTIZED} {op} binary_quantize(%s) FROM items ORDER BY {QUANTIZED} {op} binary_quantize(%s) "
            "LIMIT 10", (q, q))]


@pytest.fixture
def items(db):
    register_vector(db)
    db.execute(f"CREATE TABLE items (id bigint PRIMARY KEY, embedding vector({DIMS}))")
    rng = np.random.default_rng(8)
    centres = rng.standard_normal((50, DIMS)).astype(np.float32)
    rows = centres[rng.integers(0, 50, 6200)] + np.float32(0.4) * rng.standard_normal((6200, DIMS)).astype(np.float32)
    copy_rows(db, "items", rows[:6000], 0)
    return db, rows


@pytest.mark.parametrize("opclass", OPS)
def test_a_binary_quantized_index_answers_as_a_sequential_scan(items, opclass):
    conn, rows = items
    op = OPS[opclass]
    conn.execute(f"CREATE INDEX items_bq ON items USING milvus (({QUANTIZED}) {opclass})")
    copy_rows(conn, "items", rows[6000:], 6000)
    segments = conn.execute(
        "SELECT state, rows, bytes FROM milvus_segments('items_bq') ORDER BY segment_id").fetchall()
    assert [s[:2] for s in segments] == [("flushed", 6000), ("growing", 200)]
    plan = "\n".join(r[0] for r in conn.execute(
        f"EXPLAIN SELECT id FROM items ORDER BY {QUANTIZED} {op} binary_quantize(%s) LIMIT 10", (rows[0],)))
    assert "Index Scan using items_bq" in plan, plan
    queries = rows[np.random.default_rng(9).integers(0, 6200, 20)]
    exact = 0
    for q in queries:
        got, want = distances(conn, op, q, "enable_seqscan"), distances(conn, op, q, "enable_indexscan")
        assert got == sorted(got)
        exact += got == want
    assert exact >= 18, f"{exact} of 20 queries with a sequential scan's distances"


def test_the_readme_rerank_finds_the_nearest_vectors(items):
    """Candidates by Hamming distance from the index, re-ranked by cosine
    distance over the full vectors: pgvector's README recipe."""
    conn, rows = items
    conn.execute(f"CREATE INDEX items_bq ON items USING milvus (({QUANTIZED}) bit_hamming_ops)")
    hits = 0
    for q in rows[np.random.default_rng(10).integers(0, 6000, 20)]:
        with conn.transaction():
            conn.execute("SET LOCAL enable_seqscan = off")
            conn.execute("SET LOCAL milvus.ef_search = 400")
            got = [r[0] for r in conn.execute(
                f"SELECT id FROM (SELECT * FROM items ORDER BY {QUANTIZED} <~> binary_quantize(%s) LIMIT 100) t "
                "ORDER BY embedding <=> %s LIMIT 10", (q, q))]
        exact = [r[0] for r in conn.execute("SELECT id FROM items ORDER BY embedding <=> %s LIMIT 10", (q,))]
        hits += len(set(got) & set(exact))
    assert hits / 200 >= 0.9, hits


@pytest.mark.parametrize("bits", [16_001, 65_088])
def test_bit_indexes_up_to_a_page_wide_flush_and_search(db, bits):
    """Every width CREATE INDEX takes flushes: the column check, the pages
    and the segment files share one limit (65,088 bits, one page item)."""
    rng = np.random.default_rng(bits)
    rows = ["".join(map(str, r)) for r in rng.integers(0, 2, (260, bits))]
    db.execute(f"CREATE TABLE wide (id int PRIMARY KEY, b bit({bits}))")
    with db.cursor().copy("COPY wide (id, b) FROM STDIN") as copy:
        for i, r in enumerate(rows[:200]):
            copy.write_row((i, r))
    db.execute("CREATE INDEX wide_b ON wide USING milvus (b bit_hamming_ops)")
    with db.cursor().copy("COPY wide (id, b) FROM STDIN") as copy:
        for i, r in enumerate(rows[200:], 200):
            copy.write_row((i, r))
    db.execute("SELECT milvus_flush('wide_b')")
    states = db.execute("SELECT state, sum(rows) FROM milvus_segments('wide_b') WHERE rows > 0 "
                        "GROUP BY state").fetchall()
    assert states == [("flushed", 260)], states
    for q in (rows[3], rows[250]):
        with db.transaction():
            db.execute("SET LOCAL enable_seqscan = off")
            got = db.execute("SELECT b <~> %s::varbit FROM wide ORDER BY b <~> %s::varbit LIMIT 5", (q, q)).fetchall()
        want = db.execute("SELECT b <~> %s::varbit FROM wide ORDER BY 1 LIMIT 5", (q,)).fetchall()
        assert got == want and got[0] == (0,)


def test_a_bit_column_wider_than_a_page_is_refused(db):
    db.execute("CREATE TABLE wider (b bit(65089))")
    with pytest.raises(Exception, match="column cannot have more than 65088 dimensions for milvus index"):
        db.execute("CREATE INDEX ON wider USING milvus (b bit_hamming_ops)")
