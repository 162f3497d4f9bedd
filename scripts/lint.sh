#!/usr/bin/env bash
# The gate `make test` runs first: formatting (rustfmt.toml), clippy on
# every target of every crate with warnings as errors (the skin for
# PostgreSQL 15 and 18), and the layers of
# the files of both crates: no upward edge, no cycle (scripts/module_graph.py;
# docs/design.md, "Code: a pure core and a thin skin"), and every pointer
# into the docs, a file or a cited heading, leads somewhere
# (scripts/doc_links.py: files, modules and items named in the docs and in
# comments too), and docs/benchmarks.md's tables say what the kept reports
# say (scripts/bench_doc.py). scripts/test_lints.py breaks a copy of the
# tree to prove the layer and link checks fail when they should.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all --check
cargo clippy --workspace --all-targets --features pg_test --locked -- -D warnings
# The skin again as built for PostgreSQL 18 (its cfg(feature = "pg18") paths).
cargo clippy -p pg_milvus --all-targets --no-default-features --features pg18,pg_test --locked -- -D warnings
python3 scripts/module_graph.py --check
.venv/bin/python -m pytest -q scripts/test_lints.py
python3 scripts/doc_links.py
python3 scripts/bench_doc.py --check
