#!/usr/bin/env bash
# The main job: set up, install, start a local cluster with pg_milvus
# preloaded, load a demo collection, search it, and leave the cluster running.
set -euo pipefail
cd "$(dirname "$0")/.."
bold() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

bold "set-up (skips what is installed)"
scripts/setup.sh
bold "build and install the extension (release)"
scripts/install.sh
bold "start the demo cluster (background workers visit every 2 s; a growing segment idle for 5 s seals)"
port=$(scripts/cluster.sh start demo "milvus.naptime = 2" "milvus.seal_idle_time = 5")
host=$(scripts/cluster.sh host demo)
sql() { scripts/cluster.sh psql demo -v ON_ERROR_STOP=1 "$@"; }
# Polls until the query returns true (at most a minute).
wait_until() {
  for _ in $(seq 120); do
    [ "$(sql -tA -c "$1")" = t ] && return 0
    sleep 0.5
  done
  echo "timed out waiting for: $1" >&2
  return 1
}

bold "create a demo collection: 5,000 deterministic 64-d vectors in 10 categories, and its milvus index"
sql -q <<'SQL'
CREATE EXTENSION pg_milvus;
CREATE TABLE items (id bigserial PRIMARY KEY, category int, embedding vector(64));
SELECT setseed(0.42) \g /dev/null
INSERT INTO items (category, embedding)
SELECT i % 10, (SELECT array_agg(random() - 0.5)::vector(64) FROM generate_series(1, 64) WHERE i > 0)
  FROM generate_series(1, 5000) i;
CREATE INDEX items_embedding_idx ON items USING milvus (embedding vector_l2_ops);
ANALYZE items;
SQL
sql -c "SELECT count(*) AS rows, min(vector_dims(embedding)) AS dims FROM items"

bold "segments: CREATE INDEX wrote the table's rows as a flushed, HNSW-indexed segment"
sql -c "SELECT segment_id, state, index_state, rows, bytes, seal_reason FROM milvus_segments('items_embedding_idx')"

bold "insert 1,000 rows into the growing segment (WAL-logged pages), then nothing: the workers seal it when idle and flush it"
sql -q -c "INSERT INTO items (category, embedding) SELECT i % 10, (SELECT array_agg(random() - 0.5)::vector(64) FROM generate_series(1, 64) WHERE i > 0) FROM generate_series(1, 1000) i"
sql -c "SELECT segment_id, state, rows FROM milvus_segments('items_embedding_idx')"
wait_until "SELECT count(*) FILTER (WHERE state = 'sealed') = 0 AND sum(rows) FILTER (WHERE state = 'growing') = 0 FROM milvus_segments('items_embedding_idx')"
sql -c "SELECT segment_id, state, index_state, rows, seal_reason FROM milvus_segments('items_embedding_idx')"

bold "200 more rows, and milvus_flush(wait => false): it seals and returns; a worker flushes"
sql -q -c "INSERT INTO items (category, embedding) SELECT i % 10, (SELECT array_agg(random() - 0.5)::vector(64) FROM generate_series(1, 64) WHERE i > 0) FROM generate_series(1, 200) i"
sql -c "SELECT * FROM milvus_flush('items_embedding_idx', wait => false)"
wait_until "SELECT count(*) FILTER (WHERE state = 'sealed') = 0 AND sum(rows) FILTER (WHERE state = 'growing') = 0 FROM milvus_segments('items_embedding_idx')"
sql -c "SELECT segment_id, state, index_state, rows, deleted_rows, bytes, seal_reason FROM milvus_segments('items_embedding_idx')"
echo "objects in storage:"
find "$host/data/pg_milvus/objects" -type f -printf '  %P  %s bytes\n' | sort

bold "the plan: ORDER BY distance LIMIT uses the milvus index"
sql -c "EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY embedding <-> (SELECT embedding FROM items WHERE id = 1) LIMIT 5"

bold "search (flushed segments + growing segment, merged): the 5 nearest neighbours of item 1, and of category 3 only"
sql <<'SQL'
SELECT id, category, round((embedding <-> (SELECT embedding FROM items WHERE id = 1))::numeric, 4) AS l2
  FROM items ORDER BY embedding <-> (SELECT embedding FROM items WHERE id = 1) LIMIT 5;
SELECT id, category, round((embedding <-> (SELECT embedding FROM items WHERE id = 1))::numeric, 4) AS l2
  FROM items WHERE category = 3 ORDER BY embedding <-> (SELECT embedding FROM items WHERE id = 1) LIMIT 5;
SQL

bold "inner product and cosine (sequential scans: the index is an L2 index)"
sql <<'SQL'
SELECT id, round((embedding <#> (SELECT embedding FROM items WHERE id = 1))::numeric, 4) AS neg_inner_product
  FROM items ORDER BY embedding <#> (SELECT embedding FROM items WHERE id = 1) LIMIT 5;
SELECT id, round((embedding <=> (SELECT embedding FROM items WHERE id = 1))::numeric, 4) AS cosine
  FROM items ORDER BY embedding <=> (SELECT embedding FROM items WHERE id = 1) LIMIT 5;
SQL

bold "delete categories 1 to 3 (30%), VACUUM (tombstones): the workers compact the dead rows away"
sql -c "DELETE FROM items WHERE category IN (1, 2, 3)"
sql -c "VACUUM items"
wait_until "SELECT sum(rows) = (SELECT count(*) FROM items) AND bool_and(deleted_rows = 0) FROM milvus_segments('items_embedding_idx') WHERE state = 'flushed'"
sql -c "SELECT segment_id, state, rows, deleted_rows, seal_reason FROM milvus_segments('items_embedding_idx')"

bold "what the workers (and CREATE INDEX) did: milvus_jobs"
sql -c "SELECT job_id, kind, segments, state, reason, rows, bytes, finished - started AS took FROM milvus_jobs ORDER BY job_id"

bold "collect the replaced segments' objects now (the workers wait out milvus.gc_grace_period, an hour)"
sql <<'SQL'
SET milvus.gc_grace_period = 0;
SELECT * FROM milvus_gc('items_embedding_idx');
SQL

bold "the demo cluster is running"
echo "connect:  psql -h $host -p $port -U postgres"
echo "stop:     make stop"
