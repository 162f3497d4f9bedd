#!/usr/bin/env bash
# The gate `make test` runs first: formatting (rustfmt.toml), and clippy on
# every target of every crate with warnings as errors.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all --check
cargo clippy --workspace --all-targets --features pg_test --locked -- -D warnings
