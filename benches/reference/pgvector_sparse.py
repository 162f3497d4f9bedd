"""pgvector's HNSW on sparsevec, beside `--bench inverted`.

The incumbent for sparse rows: pgvector (0.8.6 here, where `CREATE EXTENSION
vector` works; the project never installs it) indexing SPLADE-like rows
shaped as `milvus_core::synthetic::splade_like` shapes them (120 of 30,000
dimensions, Zipf-like frequencies, exponential weights times the same
rarity factor; numpy's draws, not the same rows), with its default m and
ef_construction, one build process. Prints the load and CREATE INDEX times,
QPS of 300 queries of 20 dimensions at three `hnsw.ef_search` values with
recall@10 on the first 50 (against its sequential scan), and the sequential
scan's own QPS.

    .venv/bin/python benches/reference/pgvector_sparse.py HOST PORT
    (a cluster from `scripts/cluster.sh start NAME`; it creates database `sp`)
"""

import sys
import time

import numpy as np
import psycopg
from pgvector import SparseVector
from pgvector.psycopg import register_vector

N, VOCAB, NNZ, QUERY_NNZ, QUERIES, RECALL_QUERIES = 100_000, 30_000, 120, 20, 300, 50
rng = np.random.default_rng(42)


def splade_like(n, nnz):
    out = []
    for _ in range(n):
        ranks = np.unique(np.minimum((VOCAB ** rng.random(nnz * 3)).astype(np.int64) - 1, VOCAB - 1))
        ranks = rng.permutation(ranks)[:nnz]
        rarity = np.log(ranks + 2) / np.log(VOCAB + 1)
        weights = np.maximum(rng.exponential(0.5, len(ranks)) * rarity, 1e-3).astype(np.float32)
        out.append(SparseVector(dict(zip(ranks.tolist(), weights.tolist())), VOCAB))
    return out


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    with psycopg.connect(host=host, port=port, user="postgres", autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS sp")
        admin.execute("CREATE DATABASE sp")
    c = psycopg.connect(host=host, port=port, user="postgres", dbname="sp", autocommit=True)
    c.execute("CREATE EXTENSION vector")
    register_vector(c)
    c.execute(f"CREATE TABLE t (id int, v sparsevec({VOCAB}))")
    rows, queries = splade_like(N, NNZ), splade_like(QUERIES, QUERY_NNZ)
    start = time.time()
    with c.cursor() as cur, cur.copy("COPY t (id, v) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "sparsevec"])
        for i, v in enumerate(rows):
            copy.write_row((i, v))
    print(f"COPY {N} rows: {time.time() - start:.1f} s", flush=True)
    c.execute("SET maintenance_work_mem = '2GB'")
    c.execute("SET max_parallel_maintenance_workers = 0")
    start = time.time()
    c.execute("CREATE INDEX ON t USING hnsw (v sparsevec_ip_ops)")
    print(f"CREATE INDEX: {time.time() - start:.1f} s", flush=True)
    c.execute("ANALYZE t")
    query = "SELECT id FROM t ORDER BY v <#> %s LIMIT 10"
    c.execute("SET enable_indexscan = off")
    exact = [[r[0] for r in c.execute(query, (q,))] for q in queries[:RECALL_QUERIES]]
    start = time.time()
    for q in queries[:20]:
        c.execute(query, (q,))
    print(f"sequential scan: {20 / (time.time() - start):.0f} QPS", flush=True)
    c.execute("RESET enable_indexscan")
    for ef in (40, 100, 200):
        c.execute(f"SET hnsw.ef_search = {ef}")
        for q in queries[:10]:
            c.execute(query, (q,))
        start = time.time()
        got = [[r[0] for r in c.execute(query, (q,), prepare=True)] for q in queries]
        qps = QUERIES / (time.time() - start)
        recall = np.mean([len(set(g) & set(e)) / 10 for g, e in zip(got, exact)])
        print(f"ef_search {ef}: {qps:.0f} QPS, recall@10 {recall:.3f}", flush=True)


if __name__ == "__main__":
    main()
