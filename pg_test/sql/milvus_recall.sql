-- milvus_recall(): a query's recall through a milvus index against an
-- exact scan of the same rows, its NULL and its errors, and the planner
-- settings it leaves as they were.
CREATE EXTENSION pg_milvus;
\set VERBOSITY default

CREATE TABLE items (id int PRIMARY KEY, category int, embedding vector(3));
INSERT INTO items
SELECT i, i % 4, ARRAY[(i * 7 % 101) / 101.0, (i * 13 % 103) / 103.0, (i * 29 % 107) / 107.0]
  FROM generate_series(1, 300) i;
CREATE INDEX items_l2 ON items USING milvus (embedding vector_l2_ops);

-- A segment this small is searched exactly: recall 1, filtered or not, in
-- a transaction, by ctid or by key.
SELECT milvus_recall($$SELECT id FROM items ORDER BY embedding <-> '[0.5,0.5,0.5]' LIMIT 10$$);
SELECT milvus_recall('SELECT ctid FROM items WHERE category = 2 ORDER BY embedding <-> ''[0.1,0.9,0.5]'' LIMIT 5;');
BEGIN;
SET LOCAL milvus.ef_search = 1;
SELECT milvus_recall($$SELECT id, embedding <-> '[1,0,0]' FROM items ORDER BY embedding <-> '[1,0,0]' LIMIT 20$$);
COMMIT;
-- No row to find: NULL.
SELECT milvus_recall($$SELECT id FROM items WHERE category = 9 ORDER BY embedding <-> '[1,0,0]' LIMIT 5$$);

-- Errors: not one SELECT, not answered by the index, the query's own.
SELECT milvus_recall('');
SELECT milvus_recall('DELETE FROM items');
SELECT milvus_recall('SELECT id FROM items; SELECT 1');
SELECT milvus_recall('WITH gone AS (DELETE FROM items RETURNING id) SELECT id FROM gone');
SELECT milvus_recall('SELECT id FROM items WHERE id < 5');
SELECT milvus_recall('SELECT id FROM items ORDER BY embedding <-> ''[1,2]'' LIMIT 5');
SELECT milvus_recall('SELECT nope FROM items ORDER BY embedding <-> ''[1,0,0]'' LIMIT 5');
SELECT milvus_recall(NULL);

-- The planner settings are back as they were, after an answer and after
-- an error.
SHOW enable_seqscan;
SHOW enable_indexscan;
SELECT count(*) FROM items;
DROP TABLE items;
DROP EXTENSION pg_milvus;
