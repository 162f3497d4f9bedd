"""The rows' 8-bit codes on a real cluster (`quantization`, sq8 by default):
a scan walks each flushed segment's graph by the codes and re-ranks what it
keeps on the rows, so its answers carry exact distances and the recall of a
walk on the rows; `quantization = none` keeps no codes; ALTER INDEX takes
effect at the next REINDEX or compaction."""

import numpy as np
import pytest

from conftest import DIMS
from test_index import load, near

METRICS = {"vector_l2_ops": "<->", "vector_ip_ops": "<#>", "vector_cosine_ops": "<=>"}


def literal(v):
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


def milvus_scan(conn, op, q):
    """The EXPLAIN (ANALYZE) `Milvus Scan` counters of one top-10 query."""
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        lines = [r[0] for r in conn.execute(
            f"EXPLAIN (ANALYZE, COSTS OFF) SELECT id FROM items ORDER BY embedding {op} '{literal(q)}' LIMIT 10")]
    line = next(line for line in lines if line.startswith("Milvus Scan"))
    return dict(kv.split("=") for kv in line.split(": ", 2)[2].split())


def recall(conn, op, queries):
    return np.mean([conn.execute("SELECT milvus_recall(%s)", (
        f"SELECT id FROM items ORDER BY embedding {op} '{literal(q)}' LIMIT 10",)).fetchone()[0] for q in queries])


@pytest.mark.parametrize("opclass", METRICS)
def test_codes_find_what_the_rows_find(conn, opclass):
    op = METRICS[opclass]
    rows = load(conn, 8000)
    conn.execute(f"CREATE INDEX items_idx ON items USING milvus (embedding {opclass})")
    queries = near(rows, 30)
    conn.execute("SET milvus.ef_search = 20")

    # The index orders its rows by their exact distances (re-ranked), not
    # by the codes' estimates.
    for q in queries[:5]:
        with conn.transaction():
            conn.execute("SET LOCAL enable_seqscan = off")
            distances = [r[0] for r in conn.execute(
                f"SELECT embedding {op} %s FROM items ORDER BY embedding {op} %s LIMIT 10", (q, q))]
        assert distances == sorted(distances), distances
    q = queries[0]
    assert int(milvus_scan(conn, op, q)["reranked"]) == 20, "ef_search rows re-ranked on the rows"
    coded = recall(conn, op, queries)

    conn.execute("ALTER INDEX items_idx SET (quantization = none)")
    assert int(milvus_scan(conn, op, q)["reranked"]) == 20, "segments keep their codes until rewritten"
    conn.execute("REINDEX INDEX items_idx")
    assert milvus_scan(conn, op, q)["reranked"] == "0", "no codes: the graph is walked on the rows"
    plain = recall(conn, op, queries)
    assert coded >= plain - 0.02, f"recall {coded} with codes, {plain} without"
