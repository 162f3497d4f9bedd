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

-- milvus_verify(): whether every object of an index is whole in the store.
CREATE FUNCTION milvus_verify(index regclass)
    RETURNS TABLE(index regclass, segment_id bigint, object text, bytes bigint, error text)
    VOLATILE PARALLEL UNSAFE STRICT LANGUAGE c AS 'MODULE_PATHNAME', 'milvus_verify_wrapper';
COMMENT ON FUNCTION milvus_verify(regclass) IS 'check that every object of a milvus index is whole in object storage';

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


-- halfvec, pgvector's half-precision vector: the type, its I/O and casts,
-- its operators, functions, btree opclass and aggregates (as the install
-- script pgrx generates declares them; tests/test_upgrade.py compares).
CREATE TYPE halfvec; -- shell, completed in halfvec_type.sql

CREATE  FUNCTION "halfvec_typmod_in"(
	"list" cstring[] /* Array < & CStr > */
) RETURNS INT /* i32 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_typmod_in_wrapper';

CREATE  FUNCTION "array_to_halfvec"(
	"array" double precision[], /* Array < f64 > */
	"typmod" INT, /* i32 */
	"_explicit" bool /* bool */
) RETURNS halfvec /* PgHalfvec */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'array_to_halfvec_double_wrapper';

CREATE  FUNCTION "array_to_halfvec"(
	"array" INT[], /* Array < i32 > */
	"typmod" INT, /* i32 */
	"_explicit" bool /* bool */
) RETURNS halfvec /* PgHalfvec */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'array_to_halfvec_integer_wrapper';

CREATE  FUNCTION "array_to_halfvec"(
	"array" NUMERIC[], /* Array < AnyNumeric > */
	"typmod" INT, /* i32 */
	"_explicit" bool /* bool */
) RETURNS halfvec /* PgHalfvec */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'array_to_halfvec_numeric_wrapper';

CREATE  FUNCTION "array_to_halfvec"(
	"array" real[], /* Array < f32 > */
	"typmod" INT, /* i32 */
	"_explicit" bool /* bool */
) RETURNS halfvec /* PgHalfvec */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'array_to_halfvec_real_wrapper';

CREATE  FUNCTION "halfvec"(
	"halfvec" halfvec, /* PgHalfvec */
	"typmod" INT, /* i32 */
	"_explicit" bool /* bool */
) RETURNS halfvec /* PgHalfvec */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_wrapper';

CREATE  FUNCTION "halfvec_in"(
	"input" cstring, /* & CStr */
	"_typioparam" oid, /* pg_sys :: Oid */
	"typmod" INT /* i32 */
) RETURNS halfvec /* PgHalfvec */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_in_wrapper';

CREATE  FUNCTION "halfvec_out"(
	"halfvec" halfvec /* PgHalfvec */
) RETURNS cstring /* CString */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_out_wrapper';

CREATE  FUNCTION "halfvec_recv"(
	"buf" internal, /* Internal */
	"_typioparam" oid, /* pg_sys :: Oid */
	"typmod" INT /* i32 */
) RETURNS halfvec /* PgHalfvec */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_recv_wrapper';

CREATE  FUNCTION "halfvec_send"(
	"halfvec" halfvec /* PgHalfvec */
) RETURNS bytea /* Vec < u8 > */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_send_wrapper';

CREATE  FUNCTION "halfvec_to_float4"(
	"halfvec" halfvec, /* PgHalfvec */
	"_typmod" INT, /* i32 */
	"_explicit" bool /* bool */
) RETURNS real[] /* Vec < f32 > */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_to_float4_wrapper';

CREATE  FUNCTION "halfvec_to_vector"(
	"halfvec" halfvec, /* PgHalfvec */
	"typmod" INT, /* i32 */
	"_explicit" bool /* bool */
) RETURNS vector /* PgVector */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_to_vector_wrapper';

CREATE  FUNCTION "vector_to_halfvec"(
	"vector" vector, /* PgVector */
	"typmod" INT, /* i32 */
	"_explicit" bool /* bool */
) RETURNS halfvec /* PgHalfvec */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'vector_to_halfvec_wrapper';

CREATE TYPE halfvec (
    INPUT     = halfvec_in,
    OUTPUT    = halfvec_out,
    TYPMOD_IN = halfvec_typmod_in,
    RECEIVE   = halfvec_recv,
    SEND      = halfvec_send,
    STORAGE   = external
);

CREATE CAST (halfvec AS halfvec)
    WITH FUNCTION halfvec(halfvec, integer, boolean) AS IMPLICIT;
CREATE CAST (halfvec AS vector)
    WITH FUNCTION halfvec_to_vector(halfvec, integer, boolean) AS ASSIGNMENT;
CREATE CAST (vector AS halfvec)
    WITH FUNCTION vector_to_halfvec(vector, integer, boolean) AS IMPLICIT;
CREATE CAST (halfvec AS real[])
    WITH FUNCTION halfvec_to_float4(halfvec, integer, boolean) AS ASSIGNMENT;
CREATE CAST (integer[] AS halfvec)
    WITH FUNCTION array_to_halfvec(integer[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (real[] AS halfvec)
    WITH FUNCTION array_to_halfvec(real[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (double precision[] AS halfvec)
    WITH FUNCTION array_to_halfvec(double precision[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (numeric[] AS halfvec)
    WITH FUNCTION array_to_halfvec(numeric[], integer, boolean) AS ASSIGNMENT;

CREATE  FUNCTION "halfvec_cmp"(
	"a" halfvec, /* PgHalfvec */
	"b" halfvec /* PgHalfvec */
) RETURNS INT /* i32 */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_cmp_wrapper';

CREATE  FUNCTION "halfvec_ge"(
	"a" halfvec, /* PgHalfvec */
	"b" halfvec /* PgHalfvec */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_ge_wrapper';

CREATE  FUNCTION "halfvec_avg"(
	"state" double precision[] /* Array < f64 > */
) RETURNS halfvec /* Option < PgHalfvec > */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_avg_wrapper';

CREATE  FUNCTION "l1_distance"(
	"a" halfvec, /* PgHalfvec */
	"b" halfvec /* PgHalfvec */
) RETURNS double precision /* f64 */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_l1_distance_wrapper';

CREATE  FUNCTION "halfvec_add"(
	"a" halfvec, /* PgHalfvec */
	"b" halfvec /* PgHalfvec */
) RETURNS halfvec /* PgHalfvec */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_add_wrapper';

CREATE  FUNCTION "halfvec_combine"(
	"a" double precision[], /* Array < f64 > */
	"b" double precision[] /* Array < f64 > */
) RETURNS double precision[] /* Vec < f64 > */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_combine_wrapper';

CREATE  FUNCTION "halfvec_le"(
	"a" halfvec, /* PgHalfvec */
	"b" halfvec /* PgHalfvec */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_le_wrapper';

CREATE  FUNCTION "binary_quantize"(
	"v" halfvec /* PgHalfvec */
) RETURNS bit /* PgBit */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_binary_quantize_wrapper';

CREATE  FUNCTION "halfvec_sub"(
	"a" halfvec, /* PgHalfvec */
	"b" halfvec /* PgHalfvec */
) RETURNS halfvec /* PgHalfvec */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_sub_wrapper';

CREATE  FUNCTION "halfvec_concat"(
	"a" halfvec, /* PgHalfvec */
	"b" halfvec /* PgHalfvec */
) RETURNS halfvec /* PgHalfvec */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_concat_wrapper';

CREATE  FUNCTION "halfvec_gt"(
	"a" halfvec, /* PgHalfvec */
	"b" halfvec /* PgHalfvec */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_gt_wrapper';

CREATE  FUNCTION "halfvec_accum"(
	"state" double precision[], /* Array < f64 > */
	"v" halfvec /* PgHalfvec */
) RETURNS double precision[] /* Vec < f64 > */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_accum_wrapper';

CREATE  FUNCTION "l2_normalize"(
	"v" halfvec /* PgHalfvec */
) RETURNS halfvec /* PgHalfvec */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_l2_normalize_wrapper';

CREATE  FUNCTION "halfvec_negative_inner_product"(
	"a" halfvec, /* PgHalfvec */
	"b" halfvec /* PgHalfvec */
) RETURNS double precision /* f64 */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_negative_inner_product_wrapper';

CREATE  FUNCTION "l2_norm"(
	"v" halfvec /* PgHalfvec */
) RETURNS double precision /* f64 */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_l2_norm_wrapper';

CREATE  FUNCTION "halfvec_eq"(
	"a" halfvec, /* PgHalfvec */
	"b" halfvec /* PgHalfvec */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_eq_wrapper';

CREATE  FUNCTION "halfvec_mul"(
	"a" halfvec, /* PgHalfvec */
	"b" halfvec /* PgHalfvec */
) RETURNS halfvec /* PgHalfvec */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_mul_wrapper';

CREATE  FUNCTION "cosine_distance"(
	"a" halfvec, /* PgHalfvec */
	"b" halfvec /* PgHalfvec */
) RETURNS double precision /* f64 */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_cosine_distance_wrapper';

CREATE  FUNCTION "vector_dims"(
	"v" halfvec /* PgHalfvec */
) RETURNS INT /* i32 */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_vector_dims_wrapper';

CREATE  FUNCTION "l2_distance"(
	"a" halfvec, /* PgHalfvec */
	"b" halfvec /* PgHalfvec */
) RETURNS double precision /* f64 */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_l2_distance_wrapper';

CREATE  FUNCTION "subvector"(
	"v" halfvec, /* PgHalfvec */
	"start" INT, /* i32 */
	"count" INT /* i32 */
) RETURNS halfvec /* PgHalfvec */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_subvector_wrapper';

CREATE  FUNCTION "halfvec_lt"(
	"a" halfvec, /* PgHalfvec */
	"b" halfvec /* PgHalfvec */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_lt_wrapper';

CREATE  FUNCTION "halfvec_ne"(
	"a" halfvec, /* PgHalfvec */
	"b" halfvec /* PgHalfvec */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_ne_wrapper';

CREATE OPERATOR <-> (
    LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = l2_distance, COMMUTATOR = '<->'
);
CREATE OPERATOR <#> (
    LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_negative_inner_product, COMMUTATOR = '<#>'
);
CREATE OPERATOR <=> (
    LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = cosine_distance, COMMUTATOR = '<=>'
);
CREATE OPERATOR <+> (
    LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = l1_distance, COMMUTATOR = '<+>'
);
CREATE OPERATOR + (
    LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_add, COMMUTATOR = +
);
CREATE OPERATOR - (
    LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_sub
);
CREATE OPERATOR * (
    LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_mul, COMMUTATOR = *
);
CREATE OPERATOR || (
    LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_concat
);
CREATE OPERATOR = (
    LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_eq,
    COMMUTATOR = = , NEGATOR = <> , RESTRICT = eqsel, JOIN = eqjoinsel
);
CREATE OPERATOR <> (
    LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_ne,
    COMMUTATOR = <> , NEGATOR = = , RESTRICT = neqsel, JOIN = neqjoinsel
);
CREATE OPERATOR < (
    LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_lt,
    COMMUTATOR = > , NEGATOR = >= , RESTRICT = scalarltsel, JOIN = scalarltjoinsel
);
CREATE OPERATOR <= (
    LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_le,
    COMMUTATOR = >= , NEGATOR = > , RESTRICT = scalarlesel, JOIN = scalarlejoinsel
);
CREATE OPERATOR > (
    LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_gt,
    COMMUTATOR = < , NEGATOR = <= , RESTRICT = scalargtsel, JOIN = scalargtjoinsel
);
CREATE OPERATOR >= (
    LEFTARG = halfvec, RIGHTARG = halfvec, PROCEDURE = halfvec_ge,
    COMMUTATOR = <= , NEGATOR = < , RESTRICT = scalargesel, JOIN = scalargejoinsel
);
CREATE OPERATOR CLASS halfvec_ops
    DEFAULT FOR TYPE halfvec USING btree AS
    OPERATOR 1 < ,
    OPERATOR 2 <= ,
    OPERATOR 3 = ,
    OPERATOR 4 >= ,
    OPERATOR 5 > ,
    FUNCTION 1 halfvec_cmp(halfvec, halfvec);

CREATE AGGREGATE sum(halfvec) (
    SFUNC = halfvec_add, STYPE = halfvec, COMBINEFUNC = halfvec_add, PARALLEL = SAFE
);
COMMENT ON AGGREGATE sum(halfvec) IS 'sum as halfvec across all halfvec input values';
CREATE AGGREGATE avg(halfvec) (
    SFUNC = halfvec_accum, STYPE = double precision[], FINALFUNC = halfvec_avg,
    COMBINEFUNC = halfvec_combine, INITCOND = '{0}', PARALLEL = SAFE
);
COMMENT ON AGGREGATE avg(halfvec) IS 'the average (arithmetic mean) as halfvec of all halfvec input values';

CREATE  FUNCTION "inner_product"(
	"a" halfvec, /* PgHalfvec */
	"b" halfvec /* PgHalfvec */
) RETURNS double precision /* f64 */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_inner_product_wrapper';

-- halfvec: rows stored as 2-byte floats in the index pages and segment
-- files, half the bytes of vector (pgvector's opclass names).
CREATE OPERATOR CLASS halfvec_l2_ops
    DEFAULT FOR TYPE halfvec USING milvus AS
    OPERATOR 1 <-> (halfvec, halfvec) FOR ORDER BY float_ops,
    FUNCTION 1 l2_distance(halfvec, halfvec);

CREATE OPERATOR CLASS halfvec_ip_ops
    FOR TYPE halfvec USING milvus AS
    OPERATOR 1 <#> (halfvec, halfvec) FOR ORDER BY float_ops,
    FUNCTION 1 halfvec_negative_inner_product(halfvec, halfvec);

CREATE OPERATOR CLASS halfvec_cosine_ops
    FOR TYPE halfvec USING milvus AS
    OPERATOR 1 <=> (halfvec, halfvec) FOR ORDER BY float_ops,
    FUNCTION 1 cosine_distance(halfvec, halfvec);

CREATE OPERATOR CLASS halfvec_l1_ops
    FOR TYPE halfvec USING milvus AS
    OPERATOR 1 <+> (halfvec, halfvec) FOR ORDER BY float_ops,
    FUNCTION 1 l1_distance(halfvec, halfvec);

-- bit: Hamming and Jaccard distances over Postgres' bit(n) (pgvector's
-- binary quantization: an index on binary_quantize(embedding)::bit(n)),
-- rows stored as their bits. Neither is the type's default, as in pgvector.
CREATE OPERATOR CLASS bit_hamming_ops
    FOR TYPE bit USING milvus AS
    OPERATOR 1 <~> (bit, bit) FOR ORDER BY float_ops,
    FUNCTION 1 hamming_distance(bit, bit);

CREATE OPERATOR CLASS bit_jaccard_ops
    FOR TYPE bit USING milvus AS
    OPERATOR 1 <%> (bit, bit) FOR ORDER BY float_ops,
    FUNCTION 1 jaccard_distance(bit, bit);

-- milvus_recall(): a query's recall through a milvus index, against an
-- exact scan of the same rows.
CREATE FUNCTION milvus_recall(query text)
    RETURNS real
    VOLATILE PARALLEL UNSAFE STRICT LANGUAGE c AS 'MODULE_PATHNAME', 'milvus_recall_wrapper';
COMMENT ON FUNCTION milvus_recall(text) IS 'recall of a query answered by a milvus index, against an exact scan of the same rows';

-- sparsevec, pgvector's sparse vector: the type, its I/O and casts, its
-- operators, functions and btree opclass (as the install script pgrx
-- generates declares them; tests/test_upgrade.py compares).
-- creates:
--   Type(pg_milvus::vector::sparse::PgSparsevec)

CREATE TYPE sparsevec; -- shell, completed in sparsevec_type.sql

CREATE  FUNCTION "array_to_sparsevec"(
	"array" double precision[], /* Array < f64 > */
	"typmod" INT, /* i32 */
	"_explicit" bool /* bool */
) RETURNS sparsevec /* PgSparsevec */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'array_to_sparsevec_double_wrapper';

CREATE  FUNCTION "array_to_sparsevec"(
	"array" INT[], /* Array < i32 > */
	"typmod" INT, /* i32 */
	"_explicit" bool /* bool */
) RETURNS sparsevec /* PgSparsevec */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'array_to_sparsevec_integer_wrapper';

CREATE  FUNCTION "array_to_sparsevec"(
	"array" NUMERIC[], /* Array < AnyNumeric > */
	"typmod" INT, /* i32 */
	"_explicit" bool /* bool */
) RETURNS sparsevec /* PgSparsevec */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'array_to_sparsevec_numeric_wrapper';

CREATE  FUNCTION "array_to_sparsevec"(
	"array" real[], /* Array < f32 > */
	"typmod" INT, /* i32 */
	"_explicit" bool /* bool */
) RETURNS sparsevec /* PgSparsevec */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'array_to_sparsevec_real_wrapper';

CREATE  FUNCTION "halfvec_to_sparsevec"(
	"halfvec" halfvec, /* PgHalfvec */
	"typmod" INT, /* i32 */
	"_explicit" bool /* bool */
) RETURNS sparsevec /* PgSparsevec */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'halfvec_to_sparsevec_wrapper';

CREATE  FUNCTION "sparsevec"(
	"sparsevec" sparsevec, /* PgSparsevec */
	"typmod" INT, /* i32 */
	"_explicit" bool /* bool */
) RETURNS sparsevec /* PgSparsevec */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_wrapper';

CREATE  FUNCTION "sparsevec_in"(
	"input" cstring, /* & CStr */
	"_typioparam" oid, /* pg_sys :: Oid */
	"typmod" INT /* i32 */
) RETURNS sparsevec /* PgSparsevec */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_in_wrapper';

CREATE  FUNCTION "sparsevec_out"(
	"sparsevec" sparsevec /* PgSparsevec */
) RETURNS cstring /* CString */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_out_wrapper';

CREATE  FUNCTION "sparsevec_recv"(
	"buf" internal, /* Internal */
	"_typioparam" oid, /* pg_sys :: Oid */
	"typmod" INT /* i32 */
) RETURNS sparsevec /* PgSparsevec */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_recv_wrapper';

CREATE  FUNCTION "sparsevec_send"(
	"sparsevec" sparsevec /* PgSparsevec */
) RETURNS bytea /* Vec < u8 > */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_send_wrapper';

CREATE  FUNCTION "sparsevec_to_halfvec"(
	"sparsevec" sparsevec, /* PgSparsevec */
	"typmod" INT, /* i32 */
	"_explicit" bool /* bool */
) RETURNS halfvec /* PgHalfvec */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_to_halfvec_wrapper';

CREATE  FUNCTION "sparsevec_to_vector"(
	"sparsevec" sparsevec, /* PgSparsevec */
	"typmod" INT, /* i32 */
	"_explicit" bool /* bool */
) RETURNS vector /* PgVector */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_to_vector_wrapper';

CREATE  FUNCTION "sparsevec_typmod_in"(
	"list" cstring[] /* Array < & CStr > */
) RETURNS INT /* i32 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_typmod_in_wrapper';

CREATE  FUNCTION "vector_to_sparsevec"(
	"vector" vector, /* PgVector */
	"typmod" INT, /* i32 */
	"_explicit" bool /* bool */
) RETURNS sparsevec /* PgSparsevec */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'vector_to_sparsevec_wrapper';

CREATE  FUNCTION "sparsevec_ne"(
	"a" sparsevec, /* PgSparsevec */
	"b" sparsevec /* PgSparsevec */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_ne_wrapper';

CREATE  FUNCTION "sparsevec_le"(
	"a" sparsevec, /* PgSparsevec */
	"b" sparsevec /* PgSparsevec */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_le_wrapper';

CREATE  FUNCTION "sparsevec_negative_inner_product"(
	"a" sparsevec, /* PgSparsevec */
	"b" sparsevec /* PgSparsevec */
) RETURNS double precision /* f64 */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_negative_inner_product_wrapper';

CREATE  FUNCTION "cosine_distance"(
	"a" sparsevec, /* PgSparsevec */
	"b" sparsevec /* PgSparsevec */
) RETURNS double precision /* f64 */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_cosine_distance_wrapper';

CREATE  FUNCTION "sparsevec_gt"(
	"a" sparsevec, /* PgSparsevec */
	"b" sparsevec /* PgSparsevec */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_gt_wrapper';

CREATE  FUNCTION "sparsevec_l2_squared_distance"(
	"a" sparsevec, /* PgSparsevec */
	"b" sparsevec /* PgSparsevec */
) RETURNS double precision /* f64 */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_l2_squared_distance_wrapper';

CREATE  FUNCTION "l1_distance"(
	"a" sparsevec, /* PgSparsevec */
	"b" sparsevec /* PgSparsevec */
) RETURNS double precision /* f64 */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_l1_distance_wrapper';

CREATE  FUNCTION "sparsevec_cmp"(
	"a" sparsevec, /* PgSparsevec */
	"b" sparsevec /* PgSparsevec */
) RETURNS INT /* i32 */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_cmp_wrapper';

CREATE  FUNCTION "inner_product"(
	"a" sparsevec, /* PgSparsevec */
	"b" sparsevec /* PgSparsevec */
) RETURNS double precision /* f64 */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_inner_product_wrapper';

CREATE  FUNCTION "sparsevec_lt"(
	"a" sparsevec, /* PgSparsevec */
	"b" sparsevec /* PgSparsevec */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_lt_wrapper';

CREATE  FUNCTION "sparsevec_ge"(
	"a" sparsevec, /* PgSparsevec */
	"b" sparsevec /* PgSparsevec */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_ge_wrapper';

CREATE  FUNCTION "l2_norm"(
	"v" sparsevec /* PgSparsevec */
) RETURNS double precision /* f64 */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_l2_norm_wrapper';

CREATE  FUNCTION "sparsevec_eq"(
	"a" sparsevec, /* PgSparsevec */
	"b" sparsevec /* PgSparsevec */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_eq_wrapper';

CREATE  FUNCTION "l2_normalize"(
	"v" sparsevec /* PgSparsevec */
) RETURNS sparsevec /* PgSparsevec */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_l2_normalize_wrapper';

CREATE  FUNCTION "l2_distance"(
	"a" sparsevec, /* PgSparsevec */
	"b" sparsevec /* PgSparsevec */
) RETURNS double precision /* f64 */
IMMUTABLE STRICT PARALLEL SAFE  
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sparsevec_l2_distance_wrapper';

-- The sparsevec type (pgvector's: a dimension count and the non-zero
-- entries), completed from its shell, with pgvector's I/O and casts.
CREATE TYPE sparsevec (
    INPUT     = sparsevec_in,
    OUTPUT    = sparsevec_out,
    TYPMOD_IN = sparsevec_typmod_in,
    RECEIVE   = sparsevec_recv,
    SEND      = sparsevec_send,
    STORAGE   = external
);

CREATE CAST (sparsevec AS sparsevec)
    WITH FUNCTION sparsevec(sparsevec, integer, boolean) AS IMPLICIT;
CREATE CAST (sparsevec AS vector)
    WITH FUNCTION sparsevec_to_vector(sparsevec, integer, boolean) AS ASSIGNMENT;
CREATE CAST (vector AS sparsevec)
    WITH FUNCTION vector_to_sparsevec(vector, integer, boolean) AS IMPLICIT;
CREATE CAST (sparsevec AS halfvec)
    WITH FUNCTION sparsevec_to_halfvec(sparsevec, integer, boolean) AS ASSIGNMENT;
CREATE CAST (halfvec AS sparsevec)
    WITH FUNCTION halfvec_to_sparsevec(halfvec, integer, boolean) AS IMPLICIT;
CREATE CAST (integer[] AS sparsevec)
    WITH FUNCTION array_to_sparsevec(integer[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (real[] AS sparsevec)
    WITH FUNCTION array_to_sparsevec(real[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (double precision[] AS sparsevec)
    WITH FUNCTION array_to_sparsevec(double precision[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (numeric[] AS sparsevec)
    WITH FUNCTION array_to_sparsevec(numeric[], integer, boolean) AS ASSIGNMENT;

-- Operators on sparsevec, with pgvector's names and symbols.
CREATE OPERATOR <-> (
    LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = l2_distance, COMMUTATOR = '<->'
);
CREATE OPERATOR <#> (
    LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = sparsevec_negative_inner_product, COMMUTATOR = '<#>'
);
CREATE OPERATOR <=> (
    LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = cosine_distance, COMMUTATOR = '<=>'
);
CREATE OPERATOR <+> (
    LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = l1_distance, COMMUTATOR = '<+>'
);
CREATE OPERATOR = (
    LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = sparsevec_eq,
    COMMUTATOR = = , NEGATOR = <> , RESTRICT = eqsel, JOIN = eqjoinsel
);
CREATE OPERATOR <> (
    LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = sparsevec_ne,
    COMMUTATOR = <> , NEGATOR = = , RESTRICT = neqsel, JOIN = neqjoinsel
);
CREATE OPERATOR < (
    LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = sparsevec_lt,
    COMMUTATOR = > , NEGATOR = >= , RESTRICT = scalarltsel, JOIN = scalarltjoinsel
);
CREATE OPERATOR <= (
    LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = sparsevec_le,
    COMMUTATOR = >= , NEGATOR = > , RESTRICT = scalarlesel, JOIN = scalarlejoinsel
);
CREATE OPERATOR > (
    LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = sparsevec_gt,
    COMMUTATOR = < , NEGATOR = <= , RESTRICT = scalargtsel, JOIN = scalargtjoinsel
);
CREATE OPERATOR >= (
    LEFTARG = sparsevec, RIGHTARG = sparsevec, PROCEDURE = sparsevec_ge,
    COMMUTATOR = <= , NEGATOR = < , RESTRICT = scalargesel, JOIN = scalargejoinsel
);
CREATE OPERATOR CLASS sparsevec_ops
    DEFAULT FOR TYPE sparsevec USING btree AS
    OPERATOR 1 < ,
    OPERATOR 2 <= ,
    OPERATOR 3 = ,
    OPERATOR 4 >= ,
    OPERATOR 5 > ,
    FUNCTION 1 sparsevec_cmp(sparsevec, sparsevec);

-- sparsevec: sealed segments are inverted indexes, searched exactly
-- (L2, inner product, cosine; L1 has no inverted form). A row holds at most
-- 1,000 non-zero entries, pgvector's limit for its HNSW index on sparsevec.
CREATE OPERATOR CLASS sparsevec_l2_ops
    DEFAULT FOR TYPE sparsevec USING milvus AS
    OPERATOR 1 <-> (sparsevec, sparsevec) FOR ORDER BY float_ops,
    FUNCTION 1 l2_distance(sparsevec, sparsevec);

CREATE OPERATOR CLASS sparsevec_ip_ops
    FOR TYPE sparsevec USING milvus AS
    OPERATOR 1 <#> (sparsevec, sparsevec) FOR ORDER BY float_ops,
    FUNCTION 1 sparsevec_negative_inner_product(sparsevec, sparsevec);

CREATE OPERATOR CLASS sparsevec_cosine_ops
    FOR TYPE sparsevec USING milvus AS
    OPERATOR 1 <=> (sparsevec, sparsevec) FOR ORDER BY float_ops,
    FUNCTION 1 cosine_distance(sparsevec, sparsevec);

CREATE OPERATOR CLASS sparsevec_l1_ops
    FOR TYPE sparsevec USING milvus AS
    OPERATOR 1 <+> (sparsevec, sparsevec) FOR ORDER BY float_ops,
    FUNCTION 1 l1_distance(sparsevec, sparsevec);

-- Filter columns: USING milvus (embedding vector_l2_ops, tenant_id,
-- created_at) keeps each row's values of the columns after the vector in
-- every segment, and a scan evaluates the keys the planner pushes on them
-- (src/am/filter_columns.rs). Strategies: 1 <, 2 <=, 3 =, 4 >=, 5 >, 6 <>,
-- 7 &&, 8 @>; no support function. The integer types share a family, so a
-- bigint column compared with an integer constant is pushed too. Named as
-- btree_gin's operator classes, and each its type's default.
CREATE OPERATOR FAMILY integer_ops USING milvus;
CREATE OPERATOR CLASS int2_ops
    DEFAULT FOR TYPE int2 USING milvus FAMILY integer_ops AS
    OPERATOR 1 < (int2, int2),
    OPERATOR 2 <= (int2, int2),
    OPERATOR 3 = (int2, int2),
    OPERATOR 4 >= (int2, int2),
    OPERATOR 5 > (int2, int2),
    OPERATOR 6 <> (int2, int2);
CREATE OPERATOR CLASS int4_ops
    DEFAULT FOR TYPE int4 USING milvus FAMILY integer_ops AS
    OPERATOR 1 < (int4, int4),
    OPERATOR 2 <= (int4, int4),
    OPERATOR 3 = (int4, int4),
    OPERATOR 4 >= (int4, int4),
    OPERATOR 5 > (int4, int4),
    OPERATOR 6 <> (int4, int4);
CREATE OPERATOR CLASS int8_ops
    DEFAULT FOR TYPE int8 USING milvus FAMILY integer_ops AS
    OPERATOR 1 < (int8, int8),
    OPERATOR 2 <= (int8, int8),
    OPERATOR 3 = (int8, int8),
    OPERATOR 4 >= (int8, int8),
    OPERATOR 5 > (int8, int8),
    OPERATOR 6 <> (int8, int8);
ALTER OPERATOR FAMILY integer_ops USING milvus ADD
    OPERATOR 1 < (int2, int4),
    OPERATOR 2 <= (int2, int4),
    OPERATOR 3 = (int2, int4),
    OPERATOR 4 >= (int2, int4),
    OPERATOR 5 > (int2, int4),
    OPERATOR 6 <> (int2, int4),
    OPERATOR 1 < (int2, int8),
    OPERATOR 2 <= (int2, int8),
    OPERATOR 3 = (int2, int8),
    OPERATOR 4 >= (int2, int8),
    OPERATOR 5 > (int2, int8),
    OPERATOR 6 <> (int2, int8),
    OPERATOR 1 < (int4, int2),
    OPERATOR 2 <= (int4, int2),
    OPERATOR 3 = (int4, int2),
    OPERATOR 4 >= (int4, int2),
    OPERATOR 5 > (int4, int2),
    OPERATOR 6 <> (int4, int2),
    OPERATOR 1 < (int4, int8),
    OPERATOR 2 <= (int4, int8),
    OPERATOR 3 = (int4, int8),
    OPERATOR 4 >= (int4, int8),
    OPERATOR 5 > (int4, int8),
    OPERATOR 6 <> (int4, int8),
    OPERATOR 1 < (int8, int2),
    OPERATOR 2 <= (int8, int2),
    OPERATOR 3 = (int8, int2),
    OPERATOR 4 >= (int8, int2),
    OPERATOR 5 > (int8, int2),
    OPERATOR 6 <> (int8, int2),
    OPERATOR 1 < (int8, int4),
    OPERATOR 2 <= (int8, int4),
    OPERATOR 3 = (int8, int4),
    OPERATOR 4 >= (int8, int4),
    OPERATOR 5 > (int8, int4),
    OPERATOR 6 <> (int8, int4);

CREATE OPERATOR CLASS bool_ops
    DEFAULT FOR TYPE bool USING milvus AS
    OPERATOR 1 < (bool, bool),
    OPERATOR 2 <= (bool, bool),
    OPERATOR 3 = (bool, bool),
    OPERATOR 4 >= (bool, bool),
    OPERATOR 5 > (bool, bool),
    OPERATOR 6 <> (bool, bool);

CREATE OPERATOR CLASS date_ops
    DEFAULT FOR TYPE date USING milvus AS
    OPERATOR 1 < (date, date),
    OPERATOR 2 <= (date, date),
    OPERATOR 3 = (date, date),
    OPERATOR 4 >= (date, date),
    OPERATOR 5 > (date, date),
    OPERATOR 6 <> (date, date);

CREATE OPERATOR CLASS timestamptz_ops
    DEFAULT FOR TYPE timestamptz USING milvus AS
    OPERATOR 1 < (timestamptz, timestamptz),
    OPERATOR 2 <= (timestamptz, timestamptz),
    OPERATOR 3 = (timestamptz, timestamptz),
    OPERATOR 4 >= (timestamptz, timestamptz),
    OPERATOR 5 > (timestamptz, timestamptz),
    OPERATOR 6 <> (timestamptz, timestamptz);

CREATE OPERATOR CLASS uuid_ops
    DEFAULT FOR TYPE uuid USING milvus AS
    OPERATOR 1 < (uuid, uuid),
    OPERATOR 2 <= (uuid, uuid),
    OPERATOR 3 = (uuid, uuid),
    OPERATOR 4 >= (uuid, uuid),
    OPERATOR 5 > (uuid, uuid),
    OPERATOR 6 <> (uuid, uuid);

-- text (and varchar, binary-coercible to it): equality only; its order is
-- the collation's, which a segment does not keep.
CREATE OPERATOR CLASS text_ops
    DEFAULT FOR TYPE text USING milvus AS
    OPERATOR 3 = (text, text),
    OPERATOR 6 <> (text, text);

-- Arrays of smallint, integer, bigint, text or varchar (CREATE INDEX
-- refuses other element types): labels && $1, labels @> $1.
CREATE OPERATOR CLASS array_ops
    DEFAULT FOR TYPE anyarray USING milvus AS
    OPERATOR 7 && (anyarray, anyarray),
    OPERATOR 8 @> (anyarray, anyarray);
