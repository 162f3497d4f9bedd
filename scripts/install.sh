#!/usr/bin/env bash
# Builds and installs the extension (and its companion pg_milvus_pgvector)
# into the system PostgreSQL 15.
#   install.sh            release build (the demo, benchmarks)
#   install.sh --debug    debug build, with debug assertions (the test tiers)
# Every local cluster that loads the library is stopped first: overwriting the
# .so under a running postmaster crashes it.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=(--release)
[ "${1:-}" = --debug ] && profile=()
scripts/cluster.sh stop-all
cargo pgrx install "${profile[@]}" --pg-config /usr/bin/pg_config
test -f "$(pg_config --pkglibdir)/pg_milvus.so"
# The companion extension (SQL only): milvus opclasses for pgvector's type.
install -m 644 sql/pg_milvus_pgvector/* "$(pg_config --sharedir)/extension/"
