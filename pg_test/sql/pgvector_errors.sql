-- pgvector's SQLSTATE for every refusal of its types, casts and functions:
-- a client that branches on the code sees what it would see with pgvector.
-- Each statement with the code it raises ('ok' if none); the same query
-- run in a database with pgvector 0.8.6 gives the same rows.
CREATE EXTENSION pg_milvus;
CREATE FUNCTION pg_temp.sqlstate_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE statement;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE;
END
$$;
SELECT statement, pg_temp.sqlstate_of(statement) AS sqlstate FROM (VALUES
  -- text input
  ($$SELECT '[]'::vector$$),
  ($$SELECT '[ ]'::halfvec$$),
  ($$SELECT '{}/0'::sparsevec$$),
  ($$SELECT '[hello]'::vector$$),
  ($$SELECT '[1,2'::vector$$),
  ($$SELECT '[1,,2]'::halfvec$$),
  ($$SELECT '[NaN]'::vector$$),
  ($$SELECT '[Infinity]'::vector$$),
  ($$SELECT '[-inf]'::halfvec$$),
  ($$SELECT '[4e38,1]'::vector$$),
  ($$SELECT '[-4e38]'::vector$$),
  ($$SELECT '[1e-50]'::vector$$),
  ($$SELECT '[4e38]'::halfvec$$),
  ($$SELECT '[65520]'::halfvec$$),
  ($$SELECT '{1:NaN}/2'::sparsevec$$),
  ($$SELECT '{1:1,1:2}/3'::sparsevec$$),
  ($$SELECT '{3:1,1:2}/3'::sparsevec$$),
  ($$SELECT '{4:1}/3'::sparsevec$$),
  ($$SELECT '{1:1}/1000000001'::sparsevec$$),
  -- type modifiers
  ($$SELECT '[1,2,3]'::vector(2)$$),
  ($$SELECT '[1,2]'::vector(0)$$),
  ($$SELECT '[1,2]'::vector(16001)$$),
  ($$SELECT '[1,2]'::vector('a')$$),
  ($$SELECT '[1,2]'::halfvec('a')$$),
  ($$SELECT '{}/2'::sparsevec('a')$$),
  ($$SELECT '[1,2]'::halfvec(3)$$),
  -- casts
  ($$SELECT ARRAY[NULL, 1]::real[]::vector$$),
  ($$SELECT ARRAY[[1,2],[3,4]]::real[]::vector$$),
  ($$SELECT ARRAY[]::real[]::vector$$),
  ($$SELECT array_fill(1, ARRAY[16001])::real[]::vector$$),
  ($$SELECT array_fill(1, ARRAY[16001])::real[]::halfvec$$),
  ($$SELECT '[65520]'::vector::halfvec$$),
  -- functions and operators
  ($$SELECT l2_distance('[1,2]'::vector, '[1]')$$),
  ($$SELECT '[1,2]'::vector + '[1]'$$),
  ($$SELECT '[3e38]'::vector * '[3e38]'$$),
  ($$SELECT '[3e38]'::vector + '[3e38]'$$),
  ($$SELECT '[60000]'::halfvec + '[60000]'$$),
  ($$SELECT subvector('[1,2,3]'::vector, 5, 1)$$),
  ($$SELECT subvector('[1,2,3]'::vector, 1, 0)$$),
  ($$SELECT subvector('[1,2,3]'::halfvec, 4, 2)$$),
  ($$SELECT avg(v) FROM (VALUES ('[1]'::vector), ('[1,2]')) t(v)$$),
  ($$SELECT halfvec_avg(ARRAY[1]::float8[])$$),
  ($$SELECT vector_avg(ARRAY[1]::float8[])$$),
  ($$SELECT hamming_distance(B'1', B'11')$$),
  ($$SELECT jaccard_distance(B'1', B'11')$$),
  ($$SELECT cosine_distance('[1,2]'::vector, '[0,0]')$$),
  ($$SELECT cosine_distance('[1,2]'::sparsevec, '[1]')$$)
) AS t(statement);
SELECT cosine_distance('[1,2]'::vector, '[2,4]') AS parallel, cosine_distance('[1,1]'::vector, '[1,1]') AS identical,
       cosine_distance('[1,1]'::vector, '[-1,-1]') AS opposite, cosine_distance('[1,0]'::vector, '[0,2]') AS orthogonal;
DROP EXTENSION pg_milvus;
