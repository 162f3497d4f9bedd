#!/usr/bin/env bash
# The end-to-end tier (tests/) against the PostgreSQL PG_MILVUS_PG names
# (scripts/pg-env.sh); extra arguments go to pytest (`-x`,
# `tests/test_flush.py::test_...`). On 18,
# tests/test_cron.py is left out: pg_cron is packaged for Debian's 15 only,
# and nothing is fetched or built from source at test time. On 15,
# tests/test_pg_upgrade.py is: it upgrades clusters of 15 to the version
# under test, and needs pg_milvus installed for both (make test installs 15's
# first).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/pg-env.sh
# A test's helper thread that dies of an error it did not expect fails the
# test (pytest would only warn).
args=(-W error::pytest.PytestUnhandledThreadExceptionWarning)
if [ "$PG_MILVUS_PG" = 15 ]; then
  args+=(--ignore tests/test_pg_upgrade.py)
else
  args+=(--ignore tests/test_cron.py)
fi
# The whole of tests/ unless the arguments name files or tests of it.
[[ " $* " == *" tests/"* ]] || args+=(tests)
exec .venv/bin/python -m pytest -q "${args[@]}" "$@"
