#!/usr/bin/env bash
# The #[pg_test] tier: `cargo pgrx test` starts its own cluster. As root (CI),
# initdb must run as another user, which pgrx-tests supports natively.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/pg-env.sh
scripts/cluster.sh stop-all   # pgrx test reinstalls the .so
if [ "$(id -u)" = 0 ]; then
  export CARGO_PGRX_TEST_RUNAS=postgres
  export CARGO_PGRX_TEST_PGDATA=${CARGO_PGRX_TEST_PGDATA:-/tmp/pg_milvus-pgrx-testdata-$PG_MILVUS_PG}
  rm -rf "$CARGO_PGRX_TEST_PGDATA"
  install -d -o postgres -g postgres "$CARGO_PGRX_TEST_PGDATA"
fi
cargo pgrx test "pg$PG_MILVUS_PG" "$@"
