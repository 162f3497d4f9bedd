#!/usr/bin/env bash
# The gate `make test` runs first: formatting (rustfmt.toml), clippy on
# every target of every crate with warnings as errors, and the layers of
# the files of src/: no upward edge, no cycle (scripts/module_graph.py;
# docs/design.md, "Code: a pure core and a thin skin"), and every pointer
# into the docs, a file or a cited heading, leads somewhere
# (scripts/doc_links.py).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all --check
cargo clippy --workspace --all-targets --features pg_test --locked -- -D warnings
python3 scripts/module_graph.py --check
python3 scripts/doc_links.py
