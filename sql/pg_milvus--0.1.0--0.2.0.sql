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
