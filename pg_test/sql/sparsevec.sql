-- sparsevec, pgvector's sparse vector: text and binary forms, the typmod,
-- casts to and from vector, halfvec and arrays, the distances, norms and
-- order, and the errors of values it cannot hold.
CREATE EXTENSION pg_milvus;
\set VERBOSITY default
-- Text form: 1-based indices in any order, zeros dropped, white space allowed.
SELECT '{1:1.5,3:3.5}/5'::sparsevec, '{3:-4,1:-2}/5'::sparsevec, ' { 1 : 2. , 2 : 0 } / 3 '::sparsevec;
SELECT '{}/1'::sparsevec, '{1:1.23456}/1'::sparsevec, '{1:1.5e-38,2:-3e38}/2'::sparsevec;
SELECT '{1:hello}/2'::sparsevec;
SELECT '{1:NaN}/2'::sparsevec;
SELECT '{2:-Infinity}/2'::sparsevec;
SELECT '{1:4e38}/2'::sparsevec;
SELECT '{1:1e-46}/2'::sparsevec;
SELECT ''::sparsevec;
SELECT '[1,2]'::sparsevec;
SELECT '{1:1}'::sparsevec;
SELECT '{}/1a'::sparsevec;
SELECT '{1:1,}/1'::sparsevec;
SELECT '{1a:1}/1'::sparsevec;
SELECT '{1:1,2:1,1:1}/2'::sparsevec;
SELECT '{0:1}/1'::sparsevec;
SELECT '{2:1}/1'::sparsevec;
SELECT '{2147483648:1}/1'::sparsevec;
SELECT '{}/0'::sparsevec;
SELECT '{}/1000000000'::sparsevec;
SELECT '{}/1000000001'::sparsevec;
SELECT '{}/9223372036854775808'::sparsevec;
-- The type modifier
SELECT '{}/3'::sparsevec(3);
SELECT '{}/3'::sparsevec(2);
SELECT '{}/3'::sparsevec(3, 2);
SELECT '{}/3'::sparsevec(0);
SELECT '{}/3'::sparsevec(1000000001);
CREATE TABLE s (id int, v sparsevec(4));
INSERT INTO s VALUES (1, '{1:1,4:2}/4'), (2, '[0,3,0,0]'::vector), (3, ARRAY[1,1,0,1]);
INSERT INTO s VALUES (4, '{1:1}/3');
SELECT * FROM s ORDER BY id;
-- Binary form: pgvector's wire format, 0-based indices
SELECT sparsevec_send('{2:1.5,5:-3}/6');
SELECT pg_column_size('{1:1,2:2,3:3}/1000000'::sparsevec);
-- Casts
SELECT '[0,1.5,0,3.5,0]'::vector::sparsevec, '[0,1.5,0,3.5,0]'::vector::sparsevec(5);
SELECT '[0,1.5,0,3.5,0]'::vector::sparsevec(4);
SELECT '{2:1.5,4:3.5}/5'::sparsevec::vector, '{2:1.5,4:3.5}/5'::sparsevec::halfvec(5);
SELECT '{2:1.5,4:3.5}/5'::sparsevec::vector(4);
SELECT '{}/16001'::sparsevec::vector;
SELECT '{1:65520}/1'::sparsevec::halfvec;
SELECT '[0,1.5,0]'::halfvec::sparsevec;
SELECT ARRAY[1,0,2]::sparsevec, ARRAY[1.5,0]::numeric[]::sparsevec, '{0,2.5}'::real[]::sparsevec,
       '{0,2.5}'::float8[]::sparsevec(2);
SELECT '{NULL}'::real[]::sparsevec;
SELECT '{NaN}'::real[]::sparsevec;
SELECT '{{1}}'::real[]::sparsevec;
-- Distances, pgvector's values
SELECT l2_distance('{}/2'::sparsevec, '{1:3,2:4}/2'), '{1:3}/2'::sparsevec <-> '{2:4}/2';
SELECT inner_product('{1:1,3:3,5:5}/5'::sparsevec, '{2:4,3:6,4:8}/5'), '{1:1,2:2}/2'::sparsevec <#> '{1:3,2:4}/2';
SELECT inner_product('{1:3e38}/1'::sparsevec, '{1:3e38}/1');
SELECT cosine_distance('{1:1,2:2}/2'::sparsevec, '{1:2,2:4}/2'), '{1:1,2:1}/2'::sparsevec <=> '{1:-1,2:-1}/2';
SELECT cosine_distance('{1:1}/2'::sparsevec, '{}/2'), cosine_distance('{1:1,2:1}/2'::sparsevec, '{1:1.1,2:1.1}/2');
SELECT l1_distance('{1:1,3:3,5:5,7:7,9:9}/9'::sparsevec, '{2:2,4:4,6:6,8:8}/9'), '{}/2'::sparsevec <+> '{1:3,2:4}/2';
SELECT l2_distance('{1:1,2:2}/2'::sparsevec, '{1:3}/1');
SELECT id FROM s ORDER BY v <-> '{2:3}/4', id LIMIT 2;
-- Norms
SELECT l2_norm('{1:3,2:4}/2'::sparsevec), l2_norm('{}/2'::sparsevec), l2_norm('{1:3e37,2:4e37}/2'::sparsevec)::real;
SELECT l2_normalize('{1:3,2:4}/2'::sparsevec), l2_normalize('{}/2'::sparsevec), l2_normalize('{1:3e38,2:1e-37}/2'::sparsevec);
-- Order: as the dense vectors, then by dimensions; a btree indexes it
SELECT '{1:1,2:2,3:3}/3'::sparsevec < '{1:1,2:2}/2', '{1:1}/3'::sparsevec = '{1:1}/3', '{1:-1}/3'::sparsevec < '{2:1}/3';
SELECT sparsevec_cmp('{1:1,2:2}/2', '{1:2,2:3,3:4}/3'), sparsevec_cmp('{}/3', '{2:-1}/3');
CREATE INDEX ON s (v);
SET enable_seqscan = off;
SELECT id FROM s WHERE v = '{2:3}/4';
RESET enable_seqscan;
SELECT array_agg(id ORDER BY v) FROM s;
DROP TABLE s;
DROP EXTENSION pg_milvus;
