"""Where the graph stands: recall@10 at equal m, ef_construction and
ef_search on the same rows, for pg_milvus (CREATE INDEX ... USING milvus),
pgvector (USING hnsw) and hnswlib (in process, one thread).

Rows without clusters (uniform in [-1, 1), the generator of the core's
`synthetic::Rng`, so `cargo bench -p milvus-core --bench hnsw_recall --
ROWS QUERIES DIMS 0` searches the very same rows), or a Gaussian mixture.
Each index is built once over every row by CREATE INDEX (one segment for
pg_milvus); the held-out queries are searched one by one at each
ef_search, and their answers compared with the exact top 10.

    .venv/bin/pip install hnswlib   # measurement only, not a dependency
    .venv/bin/python benches/reference/graph_recall.py --port PORT [--rows 20000] [--dims 128]
        [--clusters 0] [--quantization none]

pgvector is measured where `CREATE EXTENSION vector` works (installed
into the cluster by hand: the project never builds it).
"""

import argparse
import time

import hnswlib
import numpy as np
import psycopg

MASK = (1 << 64) - 1
EFS = (10, 20, 40, 100, 200)


class Rng:
    """crates/milvus-core/src/synthetic.rs' xorshift64, bit for bit."""

    def __init__(self, seed):
        self.state = ((seed * 0x9E3779B97F4A7C15) & MASK) | 1

    def next_u64(self):
        s = self.state
        s ^= (s << 13) & MASK
        s ^= s >> 7
        s ^= (s << 17) & MASK
        self.state = s
        return s

    def uniform(self, n):
        """`n` values uniform in [-1, 1), as `Rng::next_f32` draws them."""
        top = np.fromiter((self.next_u64() >> 40 for _ in range(n)), dtype=np.uint32, count=n)
        return top.astype(np.float32) / np.float32(1 << 24) * np.float32(2) - np.float32(1)


def rows_and_queries(a):
    total = a.rows + a.queries
    if a.clusters == 0:
        data = Rng(a.seed).uniform(total * a.dims).reshape(total, a.dims)
        kind = f"uniform in [-1, 1), seed {a.seed}"
    else:
        rng = np.random.default_rng(a.seed)
        centres = rng.uniform(-1.0, 1.0, (a.clusters, a.dims)).astype(np.float32)
        picks = rng.integers(0, a.clusters, total)
        data = centres[picks] + 0.1 * rng.standard_normal((total, a.dims), dtype=np.float32)
        kind = f"Gaussian mixture, {a.clusters} clusters, sigma 0.1, seed {a.seed}"
    return data[: a.rows], data[a.rows :], kind


def literal(v):
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


def hnswlib_recall(a, base, queries, truth):
    index = hnswlib.Index(space="l2", dim=a.dims)
    index.init_index(max_elements=len(base), M=a.m, ef_construction=a.ef_construction, random_seed=100)
    index.set_num_threads(1)
    start = time.perf_counter()
    index.add_items(base, np.arange(len(base)))
    build = time.perf_counter() - start
    recalls = []
    for ef in EFS:
        index.set_ef(ef)
        labels, _ = index.knn_query(queries, k=10)
        recalls.append(np.mean([len(truth[i] & set(labels[i].tolist())) / 10 for i in range(len(queries))]))
    return build, recalls


def sql_recall(a, conn, method, vector_type, opclass, operator, base, queries, truth):
    """Builds `method`'s index over the rows in a fresh table and searches it."""
    conn.execute("DROP TABLE IF EXISTS graph_recall")
    conn.execute(f"CREATE TABLE graph_recall (id int PRIMARY KEY, embedding {vector_type}({a.dims}))")
    with conn.cursor() as cur, cur.copy("COPY graph_recall (id, embedding) FROM STDIN") as copy:
        for i, v in enumerate(base):
            copy.write_row((i, literal(v)))
    options = f"m = {a.m}, ef_construction = {a.ef_construction}"
    if method == "milvus" and a.quantization:
        options += f", quantization = {a.quantization}"
    conn.execute("SET maintenance_work_mem = '2GB'")  # one segment; pgvector's graph in memory
    start = time.perf_counter()
    conn.execute(f"CREATE INDEX ON graph_recall USING {method} (embedding {opclass}) WITH ({options})")
    build = time.perf_counter() - start
    if method == "milvus":
        segments = conn.execute("SELECT count(*) FROM milvus_segments('graph_recall_embedding_idx') WHERE state <> 'growing'").fetchone()[0]
        assert segments == 1, f"CREATE INDEX made {segments} segments: the graphs would not be compared alike"
    setting = "milvus.ef_search" if method == "milvus" else "hnsw.ef_search"
    conn.execute("SET enable_seqscan = off")
    recalls = []
    for ef in EFS:
        conn.execute(f"SET {setting} = {ef}")
        hits = 0
        for q, want in zip(queries, truth):
            got = conn.execute(
                f"SELECT id FROM graph_recall ORDER BY embedding {operator} %s::{vector_type} LIMIT 10", (literal(q),)
            ).fetchall()
            hits += len(want & {r[0] for r in got})
        recalls.append(hits / (10 * len(queries)))
    conn.execute("DROP TABLE graph_recall")
    return build, recalls


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="localhost")
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--dims", type=int, default=128)
    p.add_argument("--queries", type=int, default=500)
    p.add_argument("--clusters", type=int, default=0, help="0: uniform rows")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--m", type=int, default=16)
    p.add_argument("--ef-construction", type=int, default=64)
    p.add_argument("--quantization", help="pg_milvus' quantization option (default: the index's own)")
    a = p.parse_args()

    base, queries, kind = rows_and_queries(a)
    truth = [set(np.argpartition(((base - q) ** 2).sum(1), 10)[:10].tolist()) for q in queries]
    print(f"{a.rows} rows x {a.dims}, {kind}; {a.queries} held-out queries; m {a.m}, "
          f"ef_construction {a.ef_construction}; recall@10 at ef_search {', '.join(map(str, EFS))}")
    print("| index | build (s) | " + " | ".join(f"ef {ef}" for ef in EFS) + " |")
    print("|---|---:|" + "---:|" * len(EFS))

    def row(name, build, recalls):
        print(f"| {name} | {build:.1f} | " + " | ".join(f"{r:.3f}" for r in recalls) + " |", flush=True)

    row("hnswlib (one thread)", *hnswlib_recall(a, base, queries, truth))
    admin = f"host={a.host} port={a.port} user=postgres dbname=postgres"
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute("DROP DATABASE IF EXISTS graph_recall WITH (FORCE)")
        c.execute("CREATE DATABASE graph_recall")
    conninfo = f"host={a.host} port={a.port} user=postgres dbname=graph_recall"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pg_milvus")
        name = "pg_milvus" + (f" (quantization {a.quantization})" if a.quantization else "")
        row(name, *sql_recall(a, conn, "milvus", "vector", "vector_l2_ops", "<->", base, queries, truth))
        try:
            conn.execute("CREATE SCHEMA pgv; CREATE EXTENSION vector SCHEMA pgv")
        except psycopg.Error as e:
            print(f"pgvector not measured: {e}")
        else:
            row("pgvector", *sql_recall(a, conn, "hnsw", "pgv.vector", "pgv.vector_l2_ops", "OPERATOR(pgv.<->)", base, queries, truth))
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute("DROP DATABASE graph_recall WITH (FORCE)")


if __name__ == "__main__":
    main()
