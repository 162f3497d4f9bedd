-- pg_milvus_pgvector: operator classes of the milvus access method for
-- pgvector's `vector`, `halfvec` and `sparsevec` types, and for `bit` with
-- pgvector's Hamming and Jaccard operators. Each vector type has the binary
-- layout of pg_milvus' type of the same name (for vector and halfvec: int32
-- varlena header, int16 dimensions, int16 unused, then float4 or float2
-- elements; for sparsevec: int32 dimensions, nnz and unused, then the
-- indices and values), so pg_milvus reads pgvector's values as its own;
-- the operators and distance functions are pgvector's, whose names and
-- argument type tell the index its metric and element type. halfvec's,
-- sparsevec's and bit's opclasses are made when pgvector has them (0.7
-- and later).
--
-- Create it in pgvector's schema (pg_milvus itself must live in another
-- one: both define a type named vector):
--     CREATE EXTENSION pg_milvus SCHEMA milvus;
--     CREATE EXTENSION pg_milvus_pgvector SCHEMA public;  -- where pgvector is
--     CREATE INDEX ON items USING milvus (embedding vector_l2_ops);
\echo Use "CREATE EXTENSION pg_milvus_pgvector" to load this file. \quit

DO $$
DECLARE
    pgvector name := (SELECT n.nspname FROM pg_catalog.pg_extension e
                        JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
                       WHERE e.extname = 'vector');
    milvus name := (SELECT n.nspname FROM pg_catalog.pg_extension e
                      JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
                     WHERE e.extname = 'pg_milvus');
    here name := '@extschema@';
    c record;
    typ text;
BEGIN
    IF here = milvus THEN
        RAISE EXCEPTION 'pg_milvus_pgvector cannot be created in pg_milvus'' schema "%"', here
            USING HINT = format('Create it where pgvector is: CREATE EXTENSION pg_milvus_pgvector SCHEMA %I;',
                                pgvector);
    END IF;
    FOR c IN SELECT * FROM (VALUES
            ('vector', 'vector_l2_ops', 'DEFAULT', '<->', 'l2_distance'),
            ('vector', 'vector_ip_ops', '', '<#>', 'vector_negative_inner_product'),
            ('vector', 'vector_cosine_ops', '', '<=>', 'cosine_distance'),
            ('vector', 'vector_l1_ops', '', '<+>', 'l1_distance'),
            ('halfvec', 'halfvec_l2_ops', 'DEFAULT', '<->', 'l2_distance'),
            ('halfvec', 'halfvec_ip_ops', '', '<#>', 'halfvec_negative_inner_product'),
            ('halfvec', 'halfvec_cosine_ops', '', '<=>', 'cosine_distance'),
            ('halfvec', 'halfvec_l1_ops', '', '<+>', 'l1_distance'),
            ('sparsevec', 'sparsevec_l2_ops', 'DEFAULT', '<->', 'l2_distance'),
            ('sparsevec', 'sparsevec_ip_ops', '', '<#>', 'sparsevec_negative_inner_product'),
            ('sparsevec', 'sparsevec_cosine_ops', '', '<=>', 'cosine_distance'),
            ('sparsevec', 'sparsevec_l1_ops', '', '<+>', 'l1_distance'),
            ('bit', 'bit_hamming_ops', '', '<~>', 'hamming_distance'),
            ('bit', 'bit_jaccard_ops', '', '<%>', 'jaccard_distance')) AS v(type, name, dflt, op, fn)
    LOOP
        -- bit is Postgres' own type; vector and halfvec are pgvector's.
        typ := CASE c.type WHEN 'bit' THEN 'pg_catalog.bit' ELSE format('%I.%I', pgvector, c.type) END;
        CONTINUE WHEN pg_catalog.to_regtype(typ) IS NULL;
        CONTINUE WHEN pg_catalog.to_regprocedure(format('%I.%I(%s, %s)', pgvector, c.fn, typ, typ)) IS NULL;
        EXECUTE format(
            'CREATE OPERATOR CLASS %1$I.%2$I %3$s FOR TYPE %7$s USING milvus AS '
            'OPERATOR 1 %4$I.%5$s (%7$s, %7$s) FOR ORDER BY pg_catalog.float_ops, '
            'FUNCTION 1 %4$I.%6$I(%7$s, %7$s)',
            here, c.name, c.dflt, pgvector, c.op, c.fn, typ);
    END LOOP;
END
$$;
