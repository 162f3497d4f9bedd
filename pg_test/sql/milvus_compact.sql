-- Compaction by hand (merge small segments, purge deleted rows, dry runs)
-- and garbage collection (grace period, dropped segments and indexes).
CREATE EXTENSION pg_milvus;
\set VERBOSITY default

CREATE TABLE items (id int PRIMARY KEY, embedding vector(4));
CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (segment_max_rows = 1000);
INSERT INTO items SELECT i, ARRAY[i % 7, i % 11, i % 13, i % 17] FROM generate_series(1, 300) i;
SELECT count(*) FROM milvus_flush('items_idx');
INSERT INTO items SELECT i, ARRAY[i % 7, i % 11, i % 13, i % 17] FROM generate_series(301, 600) i;
SELECT count(*) FROM milvus_flush('items_idx');
INSERT INTO items SELECT i, ARRAY[i % 7, i % 11, i % 13, i % 17] FROM generate_series(601, 900) i;
SELECT count(*) FROM milvus_flush('items_idx');
SELECT segment_id, state, rows FROM milvus_segments('items_idx');

-- A dry run lists the plans and their reasons, and changes nothing.
SELECT * FROM milvus_compact('items_idx', dry_run => true);
SELECT segment_id, state FROM milvus_segments('items_idx');

-- Three small segments merge into one (under segment_max_rows).
SELECT plan, input_segments, output_segment, removed_rows FROM milvus_compact('items_idx');
SELECT segment_id, state, rows, deleted_rows, seal_reason FROM milvus_segments('items_idx');
SELECT id FROM items ORDER BY embedding <-> '[3,5,7,9]' LIMIT 5;
SET enable_indexscan = off;
SELECT id FROM items ORDER BY embedding <-> '[3,5,7,9]' LIMIT 5;
RESET enable_indexscan;

-- 30% deleted reaches milvus.compaction_delete_ratio (0.2): purged.
DELETE FROM items WHERE id % 10 IN (1, 4, 7);
VACUUM items;
SELECT segment_id, state, rows, deleted_rows FROM milvus_segments('items_idx');
SELECT plan, input_segments, output_segment, removed_rows FROM milvus_compact('items_idx');
SELECT segment_id, state, rows, deleted_rows, seal_reason FROM milvus_segments('items_idx');
SET enable_seqscan = off;
SELECT count(*), count(*) FILTER (WHERE id % 10 IN (1, 4, 7)) AS dead
  FROM (SELECT id FROM items ORDER BY embedding <-> '[0,0,0,0]' LIMIT 10000) s;
RESET enable_seqscan;
-- Nothing left to do.
SELECT count(*) FROM milvus_compact('items_idx');

-- GC: the replaced segments' objects stay for milvus.gc_grace_period
-- from the merge (kept with the live ones); then exactly they go, and the
-- manifest forgets them.
SELECT deleted_objects, referenced_objects, young_objects FROM milvus_gc('items_idx');
SET milvus.gc_grace_period = 0;
SELECT deleted_objects, referenced_objects, young_objects FROM milvus_gc('items_idx');
SELECT segment_id, state, rows FROM milvus_segments('items_idx');
SELECT id FROM items ORDER BY embedding <-> '[3,5,7,9]' LIMIT 3;

-- Permissions: owners compact and collect their own indexes; the whole
-- database's garbage is the superuser's.
CREATE ROLE milvus_stranger;
SET ROLE milvus_stranger;
SELECT * FROM milvus_compact('items_idx');
SELECT * FROM milvus_gc('items_idx');
SELECT * FROM milvus_gc();
RESET ROLE;
DROP ROLE milvus_stranger;

-- A dropped index's objects are collected by milvus_gc() for the database
-- (earlier files of this schedule dropped indexes too: look at this one).
SELECT 'items_idx'::regclass::oid AS dropped_oid \gset
DROP INDEX items_idx;
SELECT deleted_objects, referenced_objects, young_objects FROM milvus_gc() WHERE index::oid = :dropped_oid;
SELECT count(*) FROM milvus_gc() WHERE index::oid = :dropped_oid;

DROP TABLE items;
DROP EXTENSION pg_milvus;
