-- pg_milvus 0.1.0 -> 0.2.0 (ALTER EXTENSION pg_milvus UPDATE). The library
-- is one for every version: install the new one, restart, then update.
\echo Use "ALTER EXTENSION pg_milvus UPDATE TO '0.2.0'" to load this file. \quit

-- milvus_segments() shows each flushed segment's merge tier, as a last column.
DROP FUNCTION milvus_segments(regclass);
CREATE FUNCTION milvus_segments(index regclass)
    RETURNS TABLE(segment_id bigint, state text, index_state text, rows bigint, deleted_rows bigint, bytes bigint,
                  seal_reason text, created_at timestamptz, sealed_at timestamptz, flushed_at timestamptz, error text,
                  tier integer)
    STABLE PARALLEL SAFE STRICT LANGUAGE c AS 'MODULE_PATHNAME', 'milvus_segments_wrapper';
COMMENT ON FUNCTION milvus_segments(regclass) IS 'the segments of a milvus index, growing one included';

-- The rest of pgvector's SQL surface for vector: the L1 distance, <+> and
-- the index's vector_l1_ops,
-- element-wise *, ||, subvector, binary_quantize, sum() and avg(); the
-- Hamming and Jaccard distances of bit strings, <~> and <%>.
CREATE FUNCTION l1_distance(a vector, b vector) RETURNS double precision
    IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'l1_distance_wrapper';
CREATE FUNCTION vector_mul(a vector, b vector) RETURNS vector
    IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'vector_mul_wrapper';
CREATE FUNCTION vector_concat(a vector, b vector) RETURNS vector
    IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'vector_concat_wrapper';
CREATE FUNCTION subvector(v vector, start integer, count integer) RETURNS vector
    IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'subvector_wrapper';
CREATE FUNCTION binary_quantize(v vector) RETURNS bit
    IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'binary_quantize_wrapper';
CREATE FUNCTION vector_accum(state_array double precision[], v vector) RETURNS double precision[]
    IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'vector_accum_wrapper';
CREATE FUNCTION vector_combine(a double precision[], b double precision[]) RETURNS double precision[]
    IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'vector_combine_wrapper';
CREATE FUNCTION vector_avg(state_array double precision[]) RETURNS vector
    IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'vector_avg_wrapper';
CREATE FUNCTION hamming_distance(a bit, b bit) RETURNS double precision
    IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'hamming_distance_wrapper';
CREATE FUNCTION jaccard_distance(a bit, b bit) RETURNS double precision
    IMMUTABLE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', 'jaccard_distance_wrapper';

CREATE OPERATOR <+> (
    LEFTARG = vector, RIGHTARG = vector, PROCEDURE = l1_distance,
    COMMUTATOR = '<+>'
);
CREATE OPERATOR * (
    LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_mul, COMMUTATOR = *
);
CREATE OPERATOR || (
    LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_concat
);
CREATE OPERATOR <~> (
    LEFTARG = bit, RIGHTARG = bit, PROCEDURE = hamming_distance, COMMUTATOR = '<~>'
);
CREATE OPERATOR <%> (
    LEFTARG = bit, RIGHTARG = bit, PROCEDURE = jaccard_distance, COMMUTATOR = '<%>'
);
CREATE OPERATOR CLASS vector_l1_ops
    FOR TYPE vector USING milvus AS
    OPERATOR 1 <+> (vector, vector) FOR ORDER BY float_ops,
    FUNCTION 1 l1_distance(vector, vector);
CREATE AGGREGATE sum(vector) (
    SFUNC = vector_add, STYPE = vector, COMBINEFUNC = vector_add, PARALLEL = SAFE
);
COMMENT ON AGGREGATE sum(vector) IS 'sum as vector across all vector input values';
CREATE AGGREGATE avg(vector) (
    SFUNC = vector_accum, STYPE = double precision[], FINALFUNC = vector_avg,
    COMBINEFUNC = vector_combine, INITCOND = '{0}', PARALLEL = SAFE
);
COMMENT ON AGGREGATE avg(vector) IS 'the average (arithmetic mean) as vector of all vector values';
