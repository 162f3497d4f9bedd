-- Seal and flush (Milvus' Flush), segments (GetSegmentInfo), deletes in
-- flushed segments, and who may flush.
CREATE EXTENSION pg_milvus;
\set VERBOSITY default

CREATE TABLE items (id int PRIMARY KEY, category int, embedding vector(4));
-- A growing segment of up to 10,000 rows (it seals at 2,048 by default).
CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 10000);
INSERT INTO items
SELECT i, i % 4, ARRAY[(i * 7 % 101) / 101.0, (i * 13 % 103) / 103.0, (i * 29 % 107) / 107.0, (i * 31 % 109) / 109.0]
  FROM generate_series(1, 5000) i;

-- One growing segment holds every row.
SELECT segment_id, state, index_state, rows, deleted_rows, bytes, seal_reason, sealed_at, flushed_at
  FROM milvus_segments('items_idx');

-- Flush: seal at a barrier, write binlog and HNSW, publish; a new growing segment.
SELECT * FROM milvus_flush('items_idx');
SELECT segment_id, state, index_state, rows, deleted_rows, bytes > 0 AS stored, seal_reason,
       sealed_at IS NOT NULL AS sealed, flushed_at >= sealed_at AS flushed_after_seal
  FROM milvus_segments('items_idx');
-- Nothing to seal: flushing again does nothing (also without waiting).
SELECT * FROM milvus_flush('items_idx');
SELECT * FROM milvus_flush('items_idx', wait => false);
-- VACUUM with nothing dead counts the index's rows (flushed and in pages).
INSERT INTO items VALUES (5200, 0, '[0.1,0.2,0.3,0.4]');
VACUUM items;
SELECT reltuples FROM pg_class WHERE relname = 'items_idx';
DELETE FROM items WHERE id = 5200;
VACUUM items;

-- Rows after the barrier are in the new growing segment; small segments
-- (up to 512 rows) are flushed without a graph: brute force is as fast.
INSERT INTO items SELECT i, i % 4, ARRAY[i / 6000.0, 0.5, 0.5, 0.5] FROM generate_series(5001, 5100) i;
SELECT * FROM milvus_flush();
SELECT segment_id, state, index_state, rows FROM milvus_segments('items_idx');

-- Searches merge flushed segments and the growing one, like a sequential scan.
INSERT INTO items VALUES (6000, 0, '[0.5,0.5,0.5,0.5]');
SELECT id FROM items ORDER BY embedding <-> '[0.5,0.5,0.5,0.5]' LIMIT 5;
SET enable_indexscan = off;
SELECT id FROM items ORDER BY embedding <-> '[0.5,0.5,0.5,0.5]' LIMIT 5;
RESET enable_indexscan;

-- Deletes: VACUUM tombstones rows of flushed segments; none comes back.
DELETE FROM items WHERE id % 5 = 0;
VACUUM items;
SELECT segment_id, state, rows, deleted_rows FROM milvus_segments('items_idx');
SET enable_seqscan = off;
SET milvus.max_scan_tuples = 100000;
SELECT count(*), count(*) FILTER (WHERE id % 5 = 0) AS dead
  FROM (SELECT id FROM items ORDER BY embedding <-> '[0,0,0,0]' LIMIT 100000) s;
RESET milvus.max_scan_tuples;
RESET enable_seqscan;
SELECT count(*) FROM items WHERE embedding IS NOT NULL;

-- CREATE INDEX on a populated table writes the rows straight to storage,
-- as flushed segments of segment_max_rows rows (the last holds the rest),
-- and an empty growing segment after them. Each gets a graph but one of up
-- to 512 rows, which is searched exactly.
CREATE INDEX items_built ON items USING milvus (embedding vector_l2_ops) WITH (segment_max_rows = 2000);
SELECT segment_id, state, index_state, rows, seal_reason FROM milvus_segments('items_built');
SELECT id FROM items ORDER BY embedding <-> '[0.5,0.5,0.5,0.5]' LIMIT 3;
DROP INDEX items_built;

-- Inserts seal the growing segment at growing_max_rows, in whole pages (3
-- of 291 rows under 1,000), so the rows each query reads from pages stay
-- few; sealed segments wait for a flush (the workers', or this one).
CREATE TABLE fresh (id int, embedding vector(4));
CREATE INDEX fresh_idx ON fresh USING milvus (embedding vector_l2_ops) WITH (growing_max_rows = 1000);
INSERT INTO fresh SELECT i, ARRAY[i % 3, i % 5, i % 7, i % 11] FROM generate_series(1, 2000) i;
SELECT segment_id, state, rows, seal_reason FROM milvus_segments('fresh_idx');
SELECT segment_id, state FROM milvus_flush('fresh_idx');
SELECT count(DISTINCT id) FROM (SELECT id FROM fresh ORDER BY embedding <-> '[1,1,1,1]' LIMIT 5000) s;
DROP TABLE fresh;

-- Errors: not an index, not a milvus index, not the owner.
SELECT * FROM milvus_flush('items');
SELECT * FROM milvus_flush('items_pkey');
SELECT * FROM milvus_segments('items_pkey');
CREATE ROLE milvus_stranger;
GRANT SELECT ON items TO milvus_stranger;
SET ROLE milvus_stranger;
SELECT * FROM milvus_flush('items_idx');
SELECT count(*) FROM milvus_segments('items_idx');
RESET ROLE;
DROP OWNED BY milvus_stranger;
DROP ROLE milvus_stranger;

DROP TABLE items;
DROP EXTENSION pg_milvus;
