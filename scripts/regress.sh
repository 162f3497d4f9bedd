#!/usr/bin/env bash
# The pg_regress tier: pg_test/sql/*.sql against a fresh cluster, output
# compared with pg_test/expected/*.out. These files are the SQL contract.
#   regress.sh            run the schedule
#   regress.sh --accept   copy the results over the expected files (review the diff!)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/pg-env.sh
out=$(mktemp -d /tmp/pg_milvus-regress.XXXXXX)
chmod 0777 "$out"
# Without background workers: expected outputs need exact segment states.
port=$(scripts/cluster.sh start regress "milvus.max_workers = 0")
host=$(scripts/cluster.sh host regress)
trap 'scripts/cluster.sh stop regress' EXIT
regress="$("$PG_CONFIG" --pkglibdir)/pgxs/src/test/regress/pg_regress"
tests=$(sed -n 's/^test: //p' pg_test/schedule)
status=0
# A new test has no expected output yet, and pg_regress stops at the first
# missing one: start it empty, to be accepted.
if [ "${1:-}" = --accept ]; then
  for t in $tests; do [ -f "pg_test/expected/$t.out" ] || : > "pg_test/expected/$t.out"; done
fi
"$regress" --host="$host" --port="$port" --user=postgres \
  --bindir="$PG_BIN" --inputdir=pg_test --outputdir="$out" \
  --dbname=pg_milvus_regress $tests || status=$?
if [ "${1:-}" = --accept ]; then
  for t in $tests; do cp "$out/results/$t.out" "pg_test/expected/$t.out"; done
  echo "accepted results into pg_test/expected/"
elif [ $status -ne 0 ]; then
  cat "$out/regression.diffs"
fi
exit $status
