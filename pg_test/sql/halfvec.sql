-- halfvec, pgvector's half-precision vector: text and binary forms, the
-- typmod, casts to and from vector and arrays, the distances and the rest
-- of its SQL surface, and the errors of values half cannot hold.
CREATE EXTENSION pg_milvus;
\set VERBOSITY default
SELECT '[1,2,3]'::halfvec, '[-0.1, 1e-3 ,65504]'::halfvec, '[1,2,3]'::halfvec(3);
SELECT '[65520]'::halfvec;
SELECT '[1e-8]'::halfvec;
SELECT '[1,NaN]'::halfvec;
SELECT '[1,a]'::halfvec;
SELECT '[]'::halfvec;
SELECT '[1,2]'::halfvec(3);
SELECT '[1]'::halfvec(0);
SELECT '[1]'::halfvec(16001);
SELECT pg_column_size('[1,2,3,4]'::halfvec), pg_column_size('[1,2,3,4]'::vector);
SELECT halfvec_send('[1,-2.5]');
-- Casts
SELECT '[1,2,3]'::vector::halfvec, '[1.5,2,3]'::halfvec::vector, '[1,2,3]'::halfvec::real[];
SELECT ARRAY[1,2,3]::halfvec, ARRAY[1.5,2,3]::real[]::halfvec, ARRAY[1,2,3]::float8[]::halfvec, ARRAY[1.25,2]::numeric[]::halfvec;
SELECT ARRAY[1e6]::real[]::halfvec;
SELECT '[70000]'::vector::halfvec;
SELECT ARRAY[1,NULL]::real[]::halfvec;
CREATE TABLE h (id int, v halfvec(3));
INSERT INTO h VALUES (1, '[1,2,3]'), (2, '[4,5,6]'::vector), (3, ARRAY[1,1,1]);
INSERT INTO h VALUES (4, '[1,2]');
SELECT * FROM h ORDER BY id;
-- Distances, as for vector
SELECT l2_distance('[0,0]'::halfvec, '[3,4]'), '[0,0]'::halfvec <-> '[3,4]';
SELECT inner_product('[1,2]'::halfvec, '[3,4]'), '[1,2]'::halfvec <#> '[3,4]';
SELECT cosine_distance('[1,2]'::halfvec, '[2,4]'), '[1,1]'::halfvec <=> '[-1,-1]';
SELECT l1_distance('[0,0]'::halfvec, '[3,4]'), '[0,0]'::halfvec <+> '[3,4]';
SELECT '[1,2]'::halfvec <-> '[3]';
SELECT id FROM h ORDER BY v <-> '[3,3,3]' LIMIT 2;
-- Functions and arithmetic
SELECT vector_dims('[1,2,3]'::halfvec), l2_norm('[3,4]'::halfvec), l2_normalize('[3,4]'::halfvec);
SELECT l2_norm('[60000,60000]'::halfvec), l2_normalize('[60000]'::halfvec);
SELECT '{{1,2}}'::real[]::halfvec;
SELECT '[60000,0.00006,1000,0.1]'::halfvec;
SELECT binary_quantize('[1,-2,0,3]'::halfvec), subvector('[1,2,3,4,5]'::halfvec, 2, 3);
SELECT '[1,2]'::halfvec + '[3,4]', '[1,2]'::halfvec - '[3,4]', '[1,2]'::halfvec * '[3,4]', '[1,2]'::halfvec || '[3]';
SELECT '[60000]'::halfvec + '[60000]';
SELECT '[1e-4]'::halfvec * '[1e-4]';
-- Order, aggregates
SELECT '[1,2]'::halfvec < '[1,3]', '[1,2]'::halfvec = '[1,2]', '[1,2]'::halfvec > '[1]';
SELECT DISTINCT v FROM (VALUES ('[1,2]'::halfvec), ('[1,2]'), ('[0,5]')) t(v) ORDER BY v;
SELECT avg(v), sum(v) FROM h;
SELECT avg(v) FROM h WHERE id > 10;
DROP TABLE h;
-- A milvus index on halfvec: its rows in half floats in the index pages and
-- the segment files; the four opclasses, L2 the default
CREATE TABLE hi (id int, v halfvec(3));
INSERT INTO hi SELECT i, ARRAY[i % 7, i % 11, i % 13]::real[] FROM generate_series(1, 1000) i;
CREATE INDEX hi_idx ON hi USING milvus (v);
SELECT opcname FROM pg_index i JOIN pg_opclass o ON o.oid = i.indclass[0] WHERE i.indexrelid = 'hi_idx'::regclass;
INSERT INTO hi VALUES (1001, '[3,1,2]'), (1002, NULL);
SELECT state, rows FROM milvus_segments('hi_idx') ORDER BY segment_id;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM hi ORDER BY v <-> '[3,1,2]' LIMIT 3;
SELECT v <-> '[3,1,2]' AS distance FROM hi ORDER BY v <-> '[3,1,2]' LIMIT 3;
-- The two rows at 0, one in a flushed segment and one growing, in either order
SELECT array_agg(id ORDER BY id) FROM (SELECT id FROM hi ORDER BY v <-> '[3,1,2]' LIMIT 2) t;
DROP INDEX hi_idx;
CREATE INDEX hi_idx ON hi USING milvus (v halfvec_ip_ops);
SELECT v <#> '[3,1,2]' AS distance FROM hi ORDER BY v <#> '[3,1,2]' LIMIT 3;
DROP INDEX hi_idx;
CREATE INDEX hi_idx ON hi USING milvus (v halfvec_cosine_ops);
SELECT round((v <=> '[3,1,2]')::numeric, 6) AS distance FROM hi ORDER BY v <=> '[3,1,2]' LIMIT 3;
DROP INDEX hi_idx;
CREATE INDEX hi_idx ON hi USING milvus (v halfvec_l1_ops);
SELECT v <+> '[3,1,2]' AS distance FROM hi ORDER BY v <+> '[3,1,2]' LIMIT 3;
SELECT id FROM hi ORDER BY v <-> '[3,1]' LIMIT 1;
SELECT id FROM hi ORDER BY v <+> '[3,1]' LIMIT 1;
INSERT INTO hi VALUES (1003, '[1,2]');
RESET enable_seqscan;
CREATE TABLE hn (v halfvec);
CREATE INDEX ON hn USING milvus (v);
DROP TABLE hi, hn;
DROP EXTENSION pg_milvus;
