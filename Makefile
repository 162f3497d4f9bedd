# pg_milvus: every entry point. `make demo` and `make test` work on a fresh
# machine: each starts with scripts/setup.sh, which installs what is missing.

.PHONY: demo test stop setup install install-debug test-core test-pg test-regress test-e2e bench-core clean

demo:
	bash scripts/demo.sh

stop:
	bash scripts/cluster.sh stop-all

setup:
	bash scripts/setup.sh

install: setup
	bash scripts/install.sh

install-debug: setup
	bash scripts/install.sh --debug

# Every tier, fastest first; any failure stops the run with a non-zero exit.
test: setup test-core test-pg install-debug test-regress test-e2e

test-core:
	cargo test -p milvus-core

test-pg:
	bash scripts/test-pg.sh

test-regress:
	bash scripts/regress.sh

test-e2e:
	.venv/bin/python -m pytest -q tests

bench-core:
	cargo bench -p milvus-core --bench distance

clean:
	bash scripts/cluster.sh stop-all
	cargo clean
