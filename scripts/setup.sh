#!/usr/bin/env bash
# Idempotent set-up for a fresh machine: installs only what is missing.
#   apt packages, cargo-pgrx 0.18.1, rustfmt and clippy, `cargo pgrx init`,
#   the Python venv for tests.
# Safe to run any number of times; each step checks before it acts.
set -euo pipefail
cd "$(dirname "$0")/.."

PGRX_VERSION=0.18.1
PG_CONFIG=/usr/bin/pg_config
VENV=${VENV:-$PWD/.venv}
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

# `cargo pgrx init` rewrites its config and forces a rebuild: run it only once.
if grep -qs "pg15 *= *\"$PG_CONFIG\"" "${PGRX_HOME:-$HOME/.pgrx}/config.toml"; then
  log "pgrx already initialised for pg15"
else
  log "cargo pgrx init --pg15 $PG_CONFIG"
  cargo pgrx init --pg15 "$PG_CONFIG"
fi

# The Debian package starts a cluster on 5432 we do not use; tests run their own.
if [ ! -x "$VENV/bin/python" ]; then
  log "python venv at $VENV"
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import pgvector, psycopg, numpy, pytest, moto.server' 2>/dev/null; then
  log "pip: test clients"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r scripts/requirements-test.txt
fi
log "done"
