"""hnswlib's build of one segment, beside `--bench hnsw_recall`.

The reference for the core's graph builder: hnswlib (the C++ library most
HNSW implementations are measured against), in process through its Python
binding, on one thread, over rows of the same kind as the core bench (a
Gaussian mixture: 1,000 centres uniform in [-1, 1)^128, noise 0.1), with the
same m and ef_construction. Prints the build time and recall@10 at
ef_search 40 and 100.

    .venv/bin/pip install hnswlib numpy   # measurement only, not a dependency
    .venv/bin/python benches/reference/hnswlib_build.py [ROWS] [DIMS]
"""

import sys
import time

import hnswlib
import numpy as np


def main():
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    dims = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    queries = 500
    rng = np.random.default_rng(42)
    centres = rng.uniform(-1.0, 1.0, (1000, dims)).astype(np.float32)
    picks = rng.integers(0, len(centres), rows + queries)
    data = centres[picks] + 0.1 * rng.standard_normal((rows + queries, dims), dtype=np.float32)
    base, held_out = data[:rows], data[rows:]

    index = hnswlib.Index(space="l2", dim=dims)
    index.init_index(max_elements=rows, M=16, ef_construction=64, random_seed=100)
    index.set_num_threads(1)
    start = time.perf_counter()
    index.add_items(base, np.arange(rows))
    build = time.perf_counter() - start
    print(f"hnswlib {hnswlib.__version__ if hasattr(hnswlib, '__version__') else ''}: rows {rows}, dims {dims}, "
          f"m 16, ef_construction 64, one thread: build {build:.1f} s ({rows / build:.0f} rows/s)")

    truth = [set(np.argpartition(((base - q) ** 2).sum(1), 10)[:10].tolist()) for q in held_out]
    for ef in (40, 100):
        index.set_ef(ef)
        labels, _ = index.knn_query(held_out, k=10)
        hits = sum(len(truth[i] & set(labels[i].tolist())) for i in range(queries))
        print(f"recall@10 at ef_search {ef}: {hits / (queries * 10):.3f}")


if __name__ == "__main__":
    main()
