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
bold "start the demo cluster"
port=$(scripts/cluster.sh start demo)
host=$(scripts/cluster.sh host demo)
sql() { scripts/cluster.sh psql demo -v ON_ERROR_STOP=1 "$@"; }

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

bold "insert 1,000 rows (growing segment, WAL-logged pages), then flush: seal, binlog + HNSW to storage, manifest"
sql -q -c "INSERT INTO items (category, embedding) SELECT i % 10, (SELECT array_agg(random() - 0.5)::vector(64) FROM generate_series(1, 64) WHERE i > 0) FROM generate_series(1, 1000) i"
sql -c "SELECT * FROM milvus_flush('items_embedding_idx')"
sql -q -c "INSERT INTO items (category, embedding) SELECT i % 10, (SELECT array_agg(random() - 0.5)::vector(64) FROM generate_series(1, 64) WHERE i > 0) FROM generate_series(1, 200) i"
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

bold "delete 30% of category 1..3, VACUUM (tombstones), compact, collect garbage"
sql <<'SQL'
DELETE FROM items WHERE category IN (1, 2, 3);
VACUUM items;
SELECT segment_id, state, rows, deleted_rows FROM milvus_segments('items_embedding_idx') WHERE state <> 'dropped';
SELECT plan, input_segments, output_segment, removed_rows FROM milvus_compact('items_embedding_idx');
SET milvus.gc_grace_period = 0;
SELECT * FROM milvus_gc('items_embedding_idx');
SELECT segment_id, state, index_state, rows, deleted_rows, seal_reason FROM milvus_segments('items_embedding_idx');
SQL

bold "the demo cluster is running"
echo "connect:  psql -h $host -p $port -U postgres"
echo "stop:     make stop"
