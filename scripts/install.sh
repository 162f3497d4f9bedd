#!/usr/bin/env bash
# Builds and installs the extension (and its companion pg_milvus_pgvector)
# into the system PostgreSQL 15, or with PG_MILVUS_PG=18 into the
# PostgreSQL 18 of .tools/ (scripts/pg-env.sh).
#   install.sh            release build (the demo, benchmarks)
#   install.sh --debug    debug build, with debug assertions (the test tiers)
# Every local cluster that loads the library is stopped first: overwriting the
# .so under a running postmaster crashes it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/pg-env.sh
profile=(--release)
[ "${1:-}" = --debug ] && profile=()
scripts/cluster.sh stop-all
features=()
[ "$PG_MILVUS_PG" = 15 ] || features=(--no-default-features --features "pg$PG_MILVUS_PG")
cargo pgrx install "${profile[@]}" "${features[@]}" --pg-config "$PG_CONFIG"
test -f "$("$PG_CONFIG" --pkglibdir)/pg_milvus.so"
# The companion extension (SQL only): milvus opclasses for pgvector's type.
install -m 644 sql/pg_milvus_pgvector/* "$("$PG_CONFIG" --sharedir)/extension/"
