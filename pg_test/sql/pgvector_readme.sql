-- pgvector's README, run against pg_milvus: each example as pgvector's
-- README gives it, with USING milvus for USING hnsw and milvus.* for
-- hnsw.* settings (the only changes; and an alias on each subquery in FROM,
-- which PostgreSQL 15 asks for). Its sparsevec examples are not here:
-- pg_milvus has no sparsevec (docs/design.md says why).
CREATE EXTENSION pg_milvus;

-- Getting started
CREATE TABLE items (id bigserial PRIMARY KEY, embedding vector(3));
INSERT INTO items (embedding) VALUES ('[1,2,3]'), ('[4,5,6]');
SELECT * FROM items ORDER BY embedding <-> '[3,1,2]' LIMIT 5;

-- Storing
DROP TABLE items;
CREATE TABLE items (id bigserial PRIMARY KEY);
ALTER TABLE items ADD COLUMN embedding vector(3);
INSERT INTO items (embedding) VALUES ('[1,2,3]'), ('[4,5,6]');
INSERT INTO items (id, embedding) VALUES (1, '[1,2,3]'), (2, '[4,5,6]')
    ON CONFLICT (id) DO UPDATE SET embedding = EXCLUDED.embedding;
UPDATE items SET embedding = '[1,2,3]' WHERE id = 1;
DELETE FROM items WHERE id = 1;
INSERT INTO items (id, embedding) VALUES (1, '[1,2,3]'), (3, '[1,1,1]');

-- Querying
CREATE INDEX ON items USING milvus (embedding vector_l2_ops);
SET enable_seqscan = off;
SELECT * FROM items ORDER BY embedding <-> '[3,1,2]' LIMIT 5;
SELECT * FROM items WHERE id != 1 ORDER BY embedding <-> (SELECT embedding FROM items WHERE id = 1) LIMIT 5;
RESET enable_seqscan;
SELECT * FROM items WHERE embedding <-> '[3,1,2]' < 5 ORDER BY id;
SELECT embedding <-> '[3,1,2]' AS distance FROM items ORDER BY id;
SELECT (embedding <#> '[3,1,2]') * -1 AS inner_product FROM items ORDER BY id;
SELECT round((1 - (embedding <=> '[3,1,2]'))::numeric, 6) AS cosine_similarity FROM items ORDER BY id;
SELECT embedding <+> '[3,1,2]' AS l1 FROM items ORDER BY id;
SELECT AVG(embedding) FROM items;
ALTER TABLE items ADD COLUMN category_id int DEFAULT 1;
SELECT category_id, AVG(embedding) FROM items GROUP BY category_id;
DROP TABLE items;

-- Indexing: the four metrics, with pgvector's options
CREATE TABLE items (id bigserial PRIMARY KEY, embedding vector(3), category_id int, location_id int);
INSERT INTO items (embedding, category_id, location_id)
    SELECT ARRAY[i % 7, i % 11, i % 13]::real[], i % 200, i % 3 FROM generate_series(1, 1000) i;
CREATE INDEX ON items USING milvus (embedding vector_l2_ops);
CREATE INDEX ON items USING milvus (embedding vector_ip_ops);
CREATE INDEX ON items USING milvus (embedding vector_cosine_ops);
CREATE INDEX ON items USING milvus (embedding vector_l1_ops);
CREATE INDEX ON items USING milvus (embedding vector_l2_ops) WITH (m = 16, ef_construction = 64);
SET milvus.ef_search = 100;
BEGIN;
SET LOCAL milvus.ef_search = 100;
SELECT embedding <-> '[3,1,2]' AS distance FROM items ORDER BY embedding <-> '[3,1,2]' LIMIT 3;
COMMIT;
SELECT phase FROM pg_stat_progress_create_index;

-- Filtering
SELECT id FROM items WHERE category_id = 123 ORDER BY embedding <-> '[3,1,2]', id LIMIT 5;
CREATE INDEX ON items (category_id);
CREATE INDEX ON items (location_id, category_id);
SET milvus.iterative_scan = strict_order;
SELECT count(*) FROM (SELECT id FROM items WHERE category_id = 123 ORDER BY embedding <-> '[3,1,2]' LIMIT 5) t;
CREATE INDEX ON items USING milvus (embedding vector_l2_ops) WHERE (category_id = 123);
DROP INDEX items_category_id_idx, items_location_id_category_id_idx;  -- the partial index alone
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM items WHERE category_id = 123 ORDER BY embedding <-> '[3,1,2]' LIMIT 5;
SELECT id FROM items WHERE category_id = 123 ORDER BY embedding <-> '[3,1,2]' LIMIT 5;
RESET enable_seqscan;
RESET enable_bitmapscan;

-- Iterative index scans
SET milvus.iterative_scan = relaxed_order;
WITH relaxed_results AS MATERIALIZED (
    SELECT id, embedding <-> '[1,2,3]' AS distance FROM items WHERE category_id = 123 ORDER BY distance LIMIT 5
) SELECT id FROM relaxed_results ORDER BY distance, id;
WITH nearest_results AS MATERIALIZED (
    SELECT id, embedding <-> '[1,2,3]' AS distance FROM items ORDER BY distance LIMIT 5
) SELECT count(*) FROM nearest_results WHERE distance < 5;
SET milvus.max_scan_tuples = 20000;
RESET milvus.iterative_scan;
RESET milvus.max_scan_tuples;
RESET milvus.ef_search;
DROP TABLE items;

-- Half-precision vectors and indexing
CREATE TABLE items (id bigserial PRIMARY KEY, embedding halfvec(3));
INSERT INTO items (embedding) VALUES ('[1,2,3]'), ('[4,5,6]');
DROP TABLE items;
CREATE TABLE items (id bigserial PRIMARY KEY, embedding vector(3));
INSERT INTO items (embedding) VALUES ('[1,2,3]'), ('[4,5,6]');
CREATE INDEX ON items USING milvus ((embedding::halfvec(3)) halfvec_l2_ops);
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM items ORDER BY embedding::halfvec(3) <-> '[1,2,3]' LIMIT 5;
SELECT * FROM items ORDER BY embedding::halfvec(3) <-> '[1,2,3]' LIMIT 5;
RESET enable_seqscan;
DROP TABLE items;

-- Binary vectors and binary quantization
CREATE TABLE items (id bigserial PRIMARY KEY, embedding bit(3));
INSERT INTO items (embedding) VALUES ('000'), ('111');
SELECT * FROM items ORDER BY embedding <~> '101' LIMIT 5;
CREATE INDEX ON items USING milvus (embedding bit_hamming_ops);
CREATE INDEX ON items USING milvus (embedding bit_jaccard_ops);
SET enable_seqscan = off;
SELECT * FROM items ORDER BY embedding <~> '101' LIMIT 5;
SELECT * FROM items ORDER BY embedding <%> '101' LIMIT 5;
RESET enable_seqscan;
DROP TABLE items;
CREATE TABLE items (id bigserial PRIMARY KEY, embedding vector(3));
INSERT INTO items (embedding) VALUES ('[1,-2,3]'), ('[-1,2,-3]'), ('[1,2,3]');
CREATE INDEX ON items USING milvus ((binary_quantize(embedding)::bit(3)) bit_hamming_ops);
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM items ORDER BY binary_quantize(embedding)::bit(3) <~> binary_quantize('[1,-2,3]'::vector) LIMIT 5;
-- (the literal is cast: binary_quantize takes halfvec too, as pgvector's does)
SELECT id FROM items ORDER BY binary_quantize(embedding)::bit(3) <~> binary_quantize('[1,-2,3]'::vector) LIMIT 5;
RESET enable_seqscan;
SELECT * FROM (
    SELECT * FROM items ORDER BY embedding <=> '[1,-2,3]' LIMIT 20
) AS t ORDER BY embedding <=> '[1,-2,3]' LIMIT 5;
DROP TABLE items;

-- Subvectors
CREATE TABLE items (id bigserial PRIMARY KEY, embedding vector(5));
INSERT INTO items (embedding) VALUES ('[1,2,3,4,5]'), ('[5,4,3,2,1]'), ('[1,1,1,1,1]');
CREATE INDEX ON items USING milvus ((subvector(embedding, 1, 3)::vector(3)) vector_cosine_ops);
SET enable_seqscan = off;
SELECT * FROM items ORDER BY subvector(embedding, 1, 3)::vector(3) <=> subvector('[1,2,3,4,5]'::vector, 1, 3) LIMIT 5;
RESET enable_seqscan;
SELECT * FROM (
    SELECT * FROM items ORDER BY subvector(embedding, 1, 3)::vector(3) <=> subvector('[1,2,3,4,5]'::vector, 1, 3) LIMIT 20
) AS t ORDER BY embedding <=> '[1,2,3,4,5]' LIMIT 5;
DROP TABLE items;

-- Indexing an array column, and one model of many
CREATE TABLE items (id bigserial PRIMARY KEY, embedding double precision[]);
INSERT INTO items (embedding) VALUES ('{1,2,3}'), ('{4,5,6}');
ALTER TABLE items ADD CHECK (vector_dims(embedding::vector) = 3);
CREATE INDEX ON items USING milvus ((embedding::vector(3)) vector_l2_ops);
SET enable_seqscan = off;
SELECT * FROM items ORDER BY embedding::vector(3) <-> '[3,1,2]' LIMIT 5;
RESET enable_seqscan;
DROP TABLE items;
CREATE TABLE embeddings (model_id bigint, item_id bigint, embedding vector, PRIMARY KEY (model_id, item_id));
INSERT INTO embeddings VALUES (123, 1, '[1,2,3]'), (123, 2, '[4,5,6]'), (7, 1, '[1,2]');
CREATE INDEX ON embeddings USING milvus ((embedding::vector(3)) vector_l2_ops) WHERE (model_id = 123);
SET enable_seqscan = off;
SELECT * FROM embeddings WHERE model_id = 123 ORDER BY embedding::vector(3) <-> '[3,1,2]' LIMIT 5;
RESET enable_seqscan;
DROP TABLE embeddings;

-- Exact search, and the extension's version
CREATE TABLE items (id bigserial PRIMARY KEY, embedding vector(3));
INSERT INTO items (embedding) VALUES ('[1,2,3]'), ('[4,5,6]');
CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops);
BEGIN;
SET LOCAL enable_indexscan = off;
SELECT * FROM items ORDER BY embedding <-> '[3,1,2]' LIMIT 5;
COMMIT;
SELECT pg_size_pretty(pg_relation_size('items_idx'));
ALTER TABLE items ALTER COLUMN embedding SET STORAGE PLAIN;
DROP INDEX items_idx;
SELECT extversion FROM pg_extension WHERE extname = 'pg_milvus';
DROP TABLE items;
DROP EXTENSION pg_milvus;
