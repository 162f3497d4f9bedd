-- The rest of pgvector's SQL surface for vector, with its semantics and
-- errors: L1 distance, element-wise product, concatenation, subvector,
-- binary quantization and the distances of bit strings, and the sum/avg
-- aggregates (parallel-safe).
CREATE EXTENSION pg_milvus;
\set VERBOSITY default
SELECT l1_distance('[0,0]'::vector, '[3,4]'), '[0,0]'::vector <+> '[3,4]';
SELECT l1_distance('[1,2,3,4,5,6,7,8,9]'::vector, '[0,3,2,5,4,7,6,9,8]');
SELECT l1_distance('[1,2]'::vector, '[3]');
SELECT l1_distance('[3e38]'::vector, '[-3e38]');

SELECT '[1,2,3]'::vector * '[4,5,6]';
SELECT '[1e37]'::vector * '[1e37]';
SELECT '[1e-37]'::vector * '[1e-37]';
SELECT '[1,2]'::vector * '[3]';
SELECT '[1,2,3]'::vector || '[4,5]';
SELECT vector_dims(array_fill(0, ARRAY[15999])::vector || '[1]');
SELECT array_fill(0, ARRAY[16000])::vector || '[1]';

SELECT binary_quantize('[1,0,-1]'::vector);
SELECT binary_quantize('[0,0.1,-0.2,-0.3,0.4,0.5,0.6,-0.7,0.8,-0.9,1]'::vector);
SELECT binary_quantize('[1,2,3,-4,5,6,-7,8,1,-2,-3,4,5,-6,7,8,-1,2,3]'::vector)::bit(19) = B'1110110110011011011';

SELECT hamming_distance(B'111', B'101'), B'111' <~> B'000', jaccard_distance(B'1110', B'1010'), B'1' <%> B'0';
SELECT B'0000' <%> B'0000', hamming_distance(B'1110101011', B'0110101010');
SELECT hamming_distance(B'111', B'1111');
SELECT jaccard_distance(B'111', B'11');
SELECT binary_quantize('[1,-1,2,-2]'::vector) <~> binary_quantize('[1,1,-2,-2]'::vector);

SELECT subvector('[1,2,3,4,5]'::vector, 1, 3);
SELECT subvector('[1,2,3,4,5]'::vector, 3, 2);
SELECT subvector('[1,2,3,4,5]'::vector, -1, 3);
SELECT subvector('[1,2,3,4,5]'::vector, 3, 9);
SELECT subvector('[1,2,3,4,5]'::vector, 1, 0);
SELECT subvector('[1,2,3,4,5]'::vector, 3, -1);
SELECT subvector('[1,2,3,4,5]'::vector, -1, 2);
SELECT subvector('[1,2,3,4,5]'::vector, 2147483647, 10);
SELECT subvector('[1,2,3,4,5]'::vector, 3, 2147483647);
SELECT subvector('[1,2,3,4,5]'::vector, -2147483644, 2147483647);

SELECT avg(v) FROM unnest(ARRAY['[1,2,3]'::vector, '[3,5,7]']) v;
SELECT avg(v) FROM unnest(ARRAY['[1,2,3]'::vector, '[3,5,7]', NULL]) v;
SELECT avg(v) FROM unnest(ARRAY[]::vector[]) v;
SELECT avg(v) FROM unnest(ARRAY['[1,2]'::vector, '[3]']) v;
SELECT avg(v) FROM unnest(ARRAY['[3e38]'::vector, '[3e38]']) v;
SELECT vector_avg('{2,2,4,6}');
SELECT vector_avg('{0}');
SELECT vector_avg('{1}');
SELECT vector_avg('{{2,2,4,6}}');
SELECT vector_avg('{NULL,2,4,6}');
SELECT vector_avg('{}');
-- The combine function's states: pgvector's checks.
SELECT vector_combine('{1,2}', '{3,4}'), vector_combine('{0}', '{0}'), vector_combine('{2,4}', '{0}');
SELECT vector_combine('{{1,2}}', '{3,4}');
SELECT vector_combine('{1,2}', '{3,NULL}');
SELECT vector_combine('{}', '{0}');
SELECT vector_combine('{1}', '{0}');
SELECT vector_combine('{0}', '{1}');
SELECT vector_combine('{1,2}', '{1,2,3}');
SELECT vector_combine('{0}', (SELECT array_agg(n) FROM generate_series(1, 16002) n));
SELECT vector_combine((SELECT array_agg(n) FROM generate_series(1, 16002) n), '{0}');
SELECT vector_combine((SELECT array_agg(n) FROM generate_series(1, 16002) n), (SELECT array_agg(n) FROM generate_series(1, 16002) n));
SELECT halfvec_combine('{1}', '{0}');
SELECT sum(v) FROM unnest(ARRAY['[1,2,3]'::vector, '[3,5,7]']) v;
SELECT sum(v) FROM unnest(ARRAY['[1,2,3]'::vector, '[3,5,7]', NULL]) v;
SELECT sum(v) FROM unnest(ARRAY[]::vector[]) v;
SELECT sum(v) FROM unnest(ARRAY['[1,2]'::vector, '[3]']) v;
SELECT sum(v) FROM unnest(ARRAY['[3e38]'::vector, '[3e38]']) v;

-- Centroids per group, over a parallel plan: the combine functions run.
CREATE TABLE agg (category int, embedding vector(3));
INSERT INTO agg SELECT i % 3, ARRAY[i % 100, i % 7, 1]::real[]::vector FROM generate_series(1, 30000) i;
ANALYZE agg;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT avg(embedding), sum(embedding) FROM agg;
SELECT avg(embedding), sum(embedding) FROM agg;
-- Workers that see no row combine into no row (pgvector 0.8.6 errors here).
EXPLAIN (COSTS OFF) SELECT avg(embedding) FROM agg WHERE category::text > 'z';
SELECT avg(embedding) IS NULL AS no_rows FROM agg WHERE category::text > 'z';
RESET max_parallel_workers_per_gather;
SELECT avg(embedding) FROM agg;
SELECT category, avg(embedding) FROM agg GROUP BY category ORDER BY category;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
DROP TABLE agg;
DROP EXTENSION pg_milvus;
