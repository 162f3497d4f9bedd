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
DROP EXTENSION pg_milvus;
