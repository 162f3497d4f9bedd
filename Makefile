# pg_milvus: every entry point. `make demo` and `make test` work on a fresh
# machine: each starts with scripts/setup.sh, which installs what is missing.

.PHONY: demo test test-18 lint stop setup install install-debug test-core test-pg test-regress test-e2e bench bench-quick bench-replay bench-768 bench-768-half bench-filters bench-768-filters bench-768-large bench-ip bench-core bench-hnsw bench-quantized bench-inverted bench-sparse fuzz clean

demo:
	bash scripts/demo.sh

stop:
	bash scripts/cluster.sh stop-all
	PG_MILVUS_PG=18 bash scripts/cluster.sh stop-all

setup:
	bash scripts/setup.sh

install: setup
	bash scripts/install.sh

install-debug: setup
	bash scripts/install.sh --debug

# Every tier, fastest first, on PostgreSQL 15, then the server tiers on 18;
# any failure stops the run with a non-zero exit.
test: setup lint test-core test-pg install-debug test-regress test-e2e test-18

# The server tiers on PostgreSQL 18 (.tools/pg18, scripts/pg-env.sh):
# pg_test, pg_regress and end to end (but pg_cron's test: no pg_cron for 18).
test-18:
	PG_MILVUS_PG=18 $(MAKE) test-pg install-debug test-regress test-e2e

# The gate, in seconds: formatting, clippy on every target with warnings as
# errors, and the layers of both crates (docs/design.md, "Code: a pure core and a thin skin").
lint:
	bash scripts/lint.sh

test-core:
	cargo test -p milvus-core

test-pg:
	bash scripts/test-pg.sh

test-regress:
	bash scripts/regress.sh

test-e2e:
	bash scripts/e2e.sh

# The end-to-end workload (benches/workload): ingest, time to indexed,
# recall and QPS, deletes and compaction, beside pgvector and a plain table.
# Writes bench-results/{report.json,report.md,recall_qps.svg}. Every bench
# target takes the server version: `make bench PG=18` (bench-results/pg18/).
BENCH = bash scripts/bench.sh $(if $(PG),--pg $(PG))

bench:
	$(BENCH)

bench-quick:
	$(BENCH) --quick

# The same at 50k x 768 under cosine: bench-results/768-cosine; and with
# halfvec columns: bench-results/768-cosine-halfvec.
bench-768:
	$(BENCH) --768

# CREATE INDEX and the filter phases alone, at 100k x 128 (bench-results/filters)
# and at 50k x 768 under cosine (bench-results/768-cosine-filters).
bench-filters:
	$(BENCH) --filters

bench-768-filters:
	$(BENCH) --768-filters

bench-768-half:
	$(BENCH) --768-half

# 500k x 768, recall and QPS with the cache fitting and at a quarter of the
# rows' bytes: some 15 minutes on 2 cores, never part of `make test`.
bench-768-large:
	$(BENCH) --768-large

# A streaming standby's replay lag while its primary loads, builds and
# deletes, beside pgvector's HNSW and no index: bench-results/replay-lag.
bench-replay:
	$(BENCH) --replay

# Inner-product recall beside pgvector on Gaussian and normalised rows at
# 64, 768 and 1,536 dimensions: bench-results/ip-*.
bench-ip:
	$(BENCH) --ip

# 100k sparse rows beside pgvector's HNSW on sparsevec (some 10 minutes):
# bench-results/sparse.
bench-sparse:
	$(BENCH) --sparse

# Criterion benches of the core: distance kernels, the growing scan over row pages, binlog formats, merge,
# brute force against HNSW per segment size.
bench-core:
	cargo bench -p milvus-core --bench distance --bench segment --bench growing_scan

# One 100k x 128 segment: build time, recall@10, QPS, p50/p99 per ef_search.
bench-hnsw:
	cargo bench -p milvus-core --bench hnsw_recall

# One 50k x 768 cosine segment walked by its rows and by its 8-bit codes:
# recall@10, QPS and rows re-ranked per ef_search.
bench-quantized:
	cargo bench -p milvus-core --bench quantized

# One 100k-row segment of SPLADE-like sparse rows as an inverted index beside
# a scan of every row: QPS of an exact top 10, rows scored, postings read.
bench-inverted:
	cargo bench -p milvus-core --bench inverted

# libFuzzer on the vector parsers and the binlog, index file and manifest decoders,
# FUZZ_SECONDS each (default 60); needs a nightly toolchain.
fuzz:
	bash scripts/fuzz.sh

clean:
	bash scripts/cluster.sh stop-all
	PG_MILVUS_PG=18 bash scripts/cluster.sh stop-all
	cargo clean
