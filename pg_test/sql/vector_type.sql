-- The vector type: text form, typmods, casts, operators, and the errors
-- every kind of bad input gets. pgvector users should recognise all of it.
CREATE EXTENSION pg_milvus;
\set VERBOSITY default

-- Text form: white space tolerated, shortest round-trip output.
SELECT '[1,2,3]'::vector;
SELECT ' [ 1.5 , -2e-3 ,3 ] '::vector;
SELECT '[1e30,1.5e-7,-0]'::vector;
SELECT '[0.1,0.2,0.3]'::vector::text::vector = '[0.1,0.2,0.3]'::vector AS round_trip;

-- Malformed input names the offending part.
SELECT '[1,a,3]'::vector;
SELECT '1,2,3]'::vector;
SELECT '[1,2,3'::vector;
SELECT '[1,,3]'::vector;
SELECT '[]'::vector;
SELECT '[1,NaN]'::vector;
SELECT '[1,Infinity]'::vector;
SELECT '[-inf]'::vector;
SELECT '[1e39]'::vector;
SELECT array_fill(1, ARRAY[16001])::vector;

-- Typmods: checked on input, on casts and on assignment.
CREATE TABLE items (id int PRIMARY KEY, embedding vector(3));
\d items
INSERT INTO items VALUES (1, '[1,2,3]'), (2, '[4,5,6]'), (3, NULL);
INSERT INTO items VALUES (4, '[1,2]');
INSERT INTO items VALUES (5, '[1,2,3,4]');
SELECT '[1,2]'::vector(3);
SELECT '[1,2,3]'::vector(3);
CREATE TABLE bad (v vector(0));
CREATE TABLE bad (v vector(16001));
CREATE TABLE bad (v vector(3, 4));
SELECT count(*) FROM items;

-- Distances, with pgvector's operators and functions.
SELECT id, embedding <-> '[1,1,1]' AS l2,
       embedding <#> '[1,1,1]' AS neg_ip,
       round((embedding <=> '[1,1,1]')::numeric, 6) AS cosine
  FROM items WHERE embedding IS NOT NULL ORDER BY id;
-- Literals name their type: these functions take halfvec too (as pgvector's).
SELECT l2_distance('[0,0]'::vector, '[3,4]'), inner_product('[1,2]'::vector, '[3,4]'),
       cosine_distance('[1,0]'::vector, '[0,1]'), cosine_distance('[0,0]'::vector, '[1,1]');
SELECT vector_dims('[1,2,3]'::vector), vector_norm('[3,4]'), l2_normalize('[3,4]'::vector);
-- Large values: norms and normalisation sum in double precision (pgvector's
-- figures); the cosine distance of a vector to itself is 0 (pgvector 0.8.6:
-- NaN, its float sums overflow).
SELECT vector_norm('[3e37,4e37]'), l2_normalize('[3e38]'::vector), l2_normalize('[3e37,4e37]'::vector);
SELECT cosine_distance('[3e38]'::vector, '[3e38]'), '[3e38,1]'::vector <=> '[3e38,1]';
SELECT l2_distance('[0,0]', '[3,4]');
SELECT '[1,2]'::vector <-> '[1,2,3]';
SELECT id FROM items WHERE embedding IS NOT NULL ORDER BY embedding <-> '[4,4,4]' LIMIT 1;

-- Arithmetic and comparison.
SELECT '[1,2]'::vector + '[3,4]', '[1,2]'::vector - '[3,4]';
SELECT '[3e38]'::vector + '[3e38]';
SELECT '[1,2]'::vector = '[1,2]', '[1,2]'::vector <> '[1,2]', '[1,2]'::vector < '[1,3]';
SELECT DISTINCT v FROM (VALUES ('[2,1]'::vector), ('[1,2]'), ('[1,2]')) s(v) ORDER BY v;

-- Casts to and from arrays.
SELECT ARRAY[1,2,3]::vector, ARRAY[1.5,2.5]::real[]::vector,
       ARRAY[1.5,2.5]::float8[]::vector, ARRAY[1.25,2]::numeric[]::vector;
SELECT '[1,2,3]'::vector::real[];
SELECT ARRAY[1,NULL,3]::vector;
SELECT ARRAY[1e39]::numeric[]::vector;
SELECT ARRAY[]::integer[]::vector;
-- Arrays of more than one dimension are refused, not flattened.
SELECT '{{1,2},{3,4}}'::real[]::vector;
SELECT '{{1,2}}'::float8[]::vector;
SELECT '{{1},{2}}'::integer[]::vector;
SELECT '{{1.5}}'::numeric[]::vector;

-- Text output: float4's text, byte for byte (plain from 1e-4 to below 1e6).
SELECT '[123456789,1e14,100000,999999,1000000,0.0001,0.00001,1e-45,-3.4028235e38,1234.5,1.5e-7,1e30,-0]'::vector;
SELECT '[2974545.25,0.1,0.3333333]'::vector, '[2974545.25]'::vector::text = '[' || 2974545.25::real::text || ']';
-- Every element's text is float4's, and reads back to the same float:
-- 100,000 floats across float4's range, subnormals included.
SELECT setseed(0.25);
WITH f AS (
  SELECT (sign(random() - 0.5) * (1 + random()) * 10 ^ (random() * 82 - 44))::real AS r FROM generate_series(1, 100000)
)
SELECT bool_and(ARRAY[r]::vector::text = '[' || r::text || ']') AS as_float4,
       bool_and(ARRAY[r]::vector::text::vector = ARRAY[r]::vector) AS round_trips,
       bool_and(h::text = h::vector::text AND h::text::halfvec = h) AS halfvec_too
  FROM f, LATERAL (SELECT ARRAY[least(greatest(r, -65504), 65504)]::halfvec AS h) half;
INSERT INTO items VALUES (6, ARRAY[7,8,9]);
SELECT embedding FROM items WHERE id = 6;

-- Binary form is pgvector's: int16 dims, int16 unused, float4s, big-endian.
SELECT vector_send('[1,-2.5]');

DROP TABLE items;
DROP EXTENSION pg_milvus;
