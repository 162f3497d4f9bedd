#!/usr/bin/env bash
# The end-to-end benchmark: installs the release build (and pgvector, from
# Debian's packages, to compare against), starts a cluster with background
# workers, runs the workload driver (benches/workload) and stops the cluster.
#   bench.sh           100k x 128 vectors in 1,000 clusters: the report in docs/benchmarks.md
#   bench.sh --quick   20k x 128, fewer queries and repeats: a 1-2 minute check
#   bench.sh --768     50k x 768 under cosine (embedding-sized rows, where
#                      memory bandwidth matters more): bench-results/768-cosine
#   bench.sh --filters 100k x 128, CREATE INDEX and the filter phases only
#                      (the vector's index, then each extension's index for
#                      filters, pg_milvus' also as ten segments, unclustered
#                      and clustered by the filter column): bench-results/filters
#   bench.sh --768-filters  the same at 50k x 768 under cosine:
#                      bench-results/768-cosine-filters
#   bench.sh --768-half  the same as halfvec columns (2-byte elements, both
#                      indexes): bench-results/768-cosine-halfvec
#   bench.sh --768-large 500k x 768 under cosine, both indexes built by CREATE
#                      INDEX, recall and QPS only, with the cache fitting
#                      and bounded at a quarter of the rows' bytes (not run
#                      by `make test`; some 15 minutes on 2 cores):
#                      bench-results/768-cosine-500k
#   bench.sh --ip      inner-product recall of one graph per index built by
#                      CREATE INDEX on 20k rows, standard Gaussian (not
#                      normalised) and normalised, at 64, 768 and 1,536
#                      dimensions, ef_search 40, 200 and 1,000:
#                      bench-results/ip-{gaussian,normalised}-DIM
#   bench.sh --sparse  100k SPLADE-like sparsevec rows (120 of 30,000
#                      dimensions) under inner product, queries of 20:
#                      load, CREATE INDEX, INSERT, time to indexed, recall
#                      and QPS at ef_search 40, 100, 200 beside pgvector's
#                      HNSW (some 10 minutes, most of them pgvector's
#                      build): bench-results/sparse
#   bench.sh --replay  a streaming standby's replay lag on this machine while
#                      its primary bulk-loads 100k x 128 rows, builds the
#                      index and deletes a third, for pg_milvus, pgvector's
#                      HNSW and no index (benches/replay_lag.py; some 5
#                      minutes): bench-results/replay-lag
#   bench.sh --pg 18 [...]  any of the above on PostgreSQL 18 (scripts/pg-env.sh),
#                      beside pgvector if it is installed there; results
#                      under bench-results/pg18/
# Extra arguments go to the driver (see benches/workload/args.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --pg ]; then
  export PG_MILVUS_PG=${2:?--pg takes the major version}
  shift 2
fi
source scripts/pg-env.sh
# Each server version but 15 has its results in a folder of its own.
results=bench-results
[ "$PG_MILVUS_PG" = 15 ] || results=bench-results/pg$PG_MILVUS_PG
args=(--n 100000 --dim 128 --clusters 1000 --queries 500 --repeats 3 --out $results)
# The workloads docs/benchmarks.md shows: their report is kept in
# docs/results/ and the doc's tables rendered from it (scripts/bench_doc.py),
# unless extra arguments change the workload.
doc=bench
[ "$PG_MILVUS_PG" = 15 ] || doc=bench-pg$PG_MILVUS_PG
ip=0
replay=0
# maintenance_work_mem, the same for both indexes' builds: 4 GB for the
# large run, whose pgvector graph (some 2 GB) would not fit in 1 GB; and the
# segment cache, which the large run's 1.8 GB of objects would overflow at
# its default 1 GB (its fully cached figures are then with every segment
# mapped, beside the phase with the cache at a quarter).
build_memory=1GB
cache_mb=1024
if [ "${1:-}" = --ip ]; then
  shift
  ip=1
  doc=
elif [ "${1:-}" = --replay ]; then
  shift
  replay=1
  doc=bench-replay
elif [ "${1:-}" = --quick ]; then
  shift
  doc=
  args=(--n 20000 --dim 128 --clusters 200 --queries 200 --repeats 2 --out $results/quick)
elif [ "${1:-}" = --768 ]; then
  shift
  doc=bench-768
  args=(--n 50000 --dim 768 --clusters 500 --metric cosine --queries 300 --repeats 2 --out $results/768-cosine)
elif [ "${1:-}" = --768-large ]; then
  shift
  doc=
  args=(--n 500000 --dim 768 --clusters 2000 --metric cosine --queries 200 --repeats 2 --recall-only
        --ef 20,40,100,200 --out $results/768-cosine-500k)
  build_memory=4GB
  cache_mb=4096
elif [ "${1:-}" = --sparse ]; then
  shift
  doc=
  args=(--sparse --n 100000 --queries 300 --repeats 2 --ef 40,100,200 --out $results/sparse)
elif [ "${1:-}" = --filters ]; then
  shift
  doc=bench-filters
  args=(--n 100000 --dim 128 --clusters 1000 --queries 500 --repeats 3 --filters-only --out $results/filters)
elif [ "${1:-}" = --768-filters ]; then
  shift
  doc=bench-768-filters
  args=(--n 50000 --dim 768 --clusters 500 --metric cosine --queries 300 --repeats 2 --filters-only
        --out $results/768-cosine-filters)
elif [ "${1:-}" = --768-half ]; then
  shift
  doc=
  args=(--n 50000 --dim 768 --clusters 500 --metric cosine --queries 300 --repeats 2 --type halfvec
        --out $results/768-cosine-halfvec)
fi

# On another server version only the default workload is documented.
[ "$PG_MILVUS_PG" = 15 ] || [ "$doc" = "bench-pg$PG_MILVUS_PG" ] || doc=
scripts/setup.sh
# pgvector, to compare against, where the machine's package sources have it
# (Debian 12's own do not: then the report says it was skipped; nor do they
# for 18, which the report measures it on only if built there from source).
if [ "$PG_MILVUS_PG" = 15 ] && ! dpkg -s postgresql-15-pgvector >/dev/null 2>&1; then
  apt-get update -qq >/dev/null 2>&1 || true
  if apt-cache show postgresql-15-pgvector >/dev/null 2>&1; then
    apt-get install -y -qq postgresql-15-pgvector >/dev/null
  else
    echo "postgresql-15-pgvector is not in this machine's package sources: pgvector is measured only if built from source, as docs/benchmarks.md says"
  fi
fi
scripts/install.sh
if ((replay)); then
  # Its own primary and standby, started and stopped by the script.
  .venv/bin/python benches/replay_lag.py --out "$results/replay-lag" "$@"
  [ $# -gt 0 ] || python3 scripts/bench_doc.py --take "$results/replay-lag" "$doc"
  exit 0
fi
# The same memory for both indexes' builds; workers look every second.
port=$(scripts/cluster.sh start bench "shared_buffers = '1GB'" "maintenance_work_mem = '$build_memory'" "milvus.cache_size = $cache_mb" "milvus.naptime = 1" "max_connections = 120")
host=$(scripts/cluster.sh host bench)
trap 'scripts/cluster.sh stop bench' EXIT
if ((ip)); then
  for dim in 64 768 1536; do
    for data in gaussian normalised; do
      flags=(--gaussian)
      [ "$data" = normalised ] && flags+=(--normalise)
      cargo run --release -q -p milvus-workload -- --host "$host" --port "$port" --n 20000 --dim "$dim" \
        --metric ip "${flags[@]}" --queries 1000 --repeats 1 --recall-only --ef 40,200,1000 \
        --out "$results/ip-$data-$dim" "$@"
    done
  done
else
  cargo run --release -q -p milvus-workload -- --host "$host" --port "$port" "${args[@]}" "$@"
fi
if [ -n "$doc" ] && [ $# -eq 0 ]; then
  out=${args[-1]}
  python3 scripts/bench_doc.py --take "$out" "$doc"
  echo "docs/benchmarks.md: the $doc table rendered from $out/report.json (docs/results/$doc.json)"
fi
