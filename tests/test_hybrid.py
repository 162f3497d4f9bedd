"""Hybrid search as the README shows it: a dense and a sparse ranking of
the same rows, fused by reciprocal rank (RRF) in one SQL statement. Each
ranking comes from a milvus index (flushed and growing rows; the sparse
one's answers are exact); the statement's answer is the fusion a client
computes from the two rankings asked for apart."""

import numpy as np
import pytest
from pgvector import SparseVector

DIMS, VOCAB, N = 16, 2000, 3000
DEPTH, K, RRF_K = 40, 10, 60

# The README's statement: each ranking's first DEPTH rows, each row scored
# 1 / (RRF_K + rank) in each ranking it is in, the sums ranked.
HYBRID = f"""
WITH dense AS (
    SELECT id, row_number() OVER (ORDER BY embedding <=> %(q)s) AS rank
      FROM docs ORDER BY embedding <=> %(q)s LIMIT {DEPTH}
), sparse AS (
    SELECT id, row_number() OVER (ORDER BY terms <#> %(t)s) AS rank
      FROM docs ORDER BY terms <#> %(t)s LIMIT {DEPTH}
)
SELECT id, sum(1.0 / ({RRF_K} + rank)) AS score
  FROM (SELECT * FROM dense UNION ALL SELECT * FROM sparse) ranked
 GROUP BY id
 ORDER BY score DESC, id
 LIMIT {K}
"""


def sparse_rows(rng, n, nnz):
    rows = []
    for _ in range(n):
        terms = rng.choice(VOCAB, size=nnz, replace=False, p=ZIPF)
        rows.append(SparseVector(dict(zip(terms.tolist(), rng.exponential(0.5, nnz).astype(np.float32).tolist())), VOCAB))
    return rows


ZIPF = 1.0 / np.arange(1, VOCAB + 1)
ZIPF /= ZIPF.sum()


@pytest.fixture
def docs(conn):
    rng = np.random.default_rng(17)
    centres = rng.standard_normal((20, DIMS))
    dense = (centres[rng.integers(0, 20, N)] + 0.3 * rng.standard_normal((N, DIMS))).astype(np.float32)
    terms = sparse_rows(rng, N, 30)
    conn.execute(f"CREATE TABLE docs (id bigint PRIMARY KEY, embedding vector({DIMS}), terms sparsevec({VOCAB}))")
    conn.execute("CREATE INDEX docs_idx ON docs USING milvus (embedding vector_cosine_ops)")
    conn.execute("CREATE INDEX docs_terms ON docs USING milvus (terms sparsevec_ip_ops)")
    with conn.cursor() as cur:
        # Flushed rows, then growing ones.
        for part in (range(0, N - 500), range(N - 500, N)):
            with cur.copy("COPY docs (id, embedding, terms) FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(["int8", "vector", "sparsevec"])
                for i in part:
                    copy.write_row((i, dense[i], terms[i]))
            if part.start == 0:
                cur.execute("SELECT * FROM milvus_flush()")
    conn.execute("ANALYZE docs")
    conn.execute("SET milvus.ef_search = 100")
    return rng


def ranking(conn, sql, param):
    return [r[0] for r in conn.execute(sql, {"p": param}).fetchall()]


def test_one_statement_fuses_the_two_rankings(conn, docs):
    rng = docs
    states = {r[0] for r in conn.execute("SELECT state FROM milvus_segments('docs_idx')")}
    assert states == {"flushed", "growing"}, states
    for _ in range(5):
        q = rng.standard_normal(DIMS).astype(np.float32)
        t = sparse_rows(rng, 1, 8)[0]
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN (COSTS OFF) " + HYBRID, {"q": q, "t": t}))
        assert "Index Scan using docs_idx" in plan and "Index Scan using docs_terms" in plan, plan
        got = conn.execute(HYBRID, {"q": q, "t": t}).fetchall()

        dense = ranking(conn, f"SELECT id FROM docs ORDER BY embedding <=> %(p)s LIMIT {DEPTH}", q)
        sparse = ranking(conn, f"SELECT id FROM docs ORDER BY terms <#> %(p)s LIMIT {DEPTH}", t)
        assert len(dense) == len(sparse) == DEPTH
        scores = {}
        for ranked in (dense, sparse):
            for rank, i in enumerate(ranked, start=1):
                scores[i] = scores.get(i, 0.0) + 1.0 / (RRF_K + rank)
        want = sorted(scores.items(), key=lambda s: (-s[1], s[0]))[:K]
        assert [r[0] for r in got] == [w[0] for w in want]
        assert [float(r[1]) for r in got] == pytest.approx([w[1] for w in want], rel=1e-12)
        # Rows both rankings hold lead the fusion.
        both = set(dense) & set(sparse)
        assert {r[0] for r in got[: min(len(both), K)]} <= both
