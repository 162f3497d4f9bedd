-- Operators on vector, with pgvector's names and symbols.
CREATE OPERATOR <-> (
    LEFTARG = vector, RIGHTARG = vector, PROCEDURE = l2_distance,
    COMMUTATOR = '<->'
);
CREATE OPERATOR <#> (
    LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_negative_inner_product,
    COMMUTATOR = '<#>'
);
CREATE OPERATOR <=> (
    LEFTARG = vector, RIGHTARG = vector, PROCEDURE = cosine_distance,
    COMMUTATOR = '<=>'
);
CREATE OPERATOR <+> (
    LEFTARG = vector, RIGHTARG = vector, PROCEDURE = l1_distance,
    COMMUTATOR = '<+>'
);

CREATE OPERATOR + (
    LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_add, COMMUTATOR = +
);
CREATE OPERATOR - (
    LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_sub
);
CREATE OPERATOR * (
    LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_mul, COMMUTATOR = *
);
CREATE OPERATOR || (
    LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_concat
);

-- Distances between bit strings (Postgres' bit), for binary quantization.
CREATE OPERATOR <~> (
    LEFTARG = bit, RIGHTARG = bit, PROCEDURE = hamming_distance, COMMUTATOR = '<~>'
);
CREATE OPERATOR <%> (
    LEFTARG = bit, RIGHTARG = bit, PROCEDURE = jaccard_distance, COMMUTATOR = '<%>'
);

-- Aggregates, parallel-safe: sum by vector_add, avg by a float8[] state
-- (count, then each element's sum), pgvector's.
CREATE AGGREGATE sum(vector) (
    SFUNC = vector_add, STYPE = vector, COMBINEFUNC = vector_add, PARALLEL = SAFE
);
COMMENT ON AGGREGATE sum(vector) IS 'sum as vector across all vector input values';
CREATE AGGREGATE avg(vector) (
    SFUNC = vector_accum, STYPE = double precision[], FINALFUNC = vector_avg,
    COMBINEFUNC = vector_combine, INITCOND = '{0}', PARALLEL = SAFE
);
COMMENT ON AGGREGATE avg(vector) IS 'the average (arithmetic mean) as vector of all vector values';

CREATE OPERATOR = (
    LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_eq,
    COMMUTATOR = = , NEGATOR = <> ,
    RESTRICT = eqsel, JOIN = eqjoinsel
);
CREATE OPERATOR <> (
    LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_ne,
    COMMUTATOR = <> , NEGATOR = = ,
    RESTRICT = neqsel, JOIN = neqjoinsel
);
CREATE OPERATOR < (
    LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_lt,
    COMMUTATOR = > , NEGATOR = >= ,
    RESTRICT = scalarltsel, JOIN = scalarltjoinsel
);
CREATE OPERATOR <= (
    LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_le,
    COMMUTATOR = >= , NEGATOR = > ,
    RESTRICT = scalarlesel, JOIN = scalarlejoinsel
);
CREATE OPERATOR > (
    LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_gt,
    COMMUTATOR = < , NEGATOR = <= ,
    RESTRICT = scalargtsel, JOIN = scalargtjoinsel
);
CREATE OPERATOR >= (
    LEFTARG = vector, RIGHTARG = vector, PROCEDURE = vector_ge,
    COMMUTATOR = <= , NEGATOR = < ,
    RESTRICT = scalargesel, JOIN = scalargejoinsel
);

-- Equality and ordering, so vectors work in DISTINCT, GROUP BY, ORDER BY,
-- unique constraints and merge joins.
CREATE OPERATOR CLASS vector_ops
    DEFAULT FOR TYPE vector USING btree AS
    OPERATOR 1 < ,
    OPERATOR 2 <= ,
    OPERATOR 3 = ,
    OPERATOR 4 >= ,
    OPERATOR 5 > ,
    FUNCTION 1 vector_cmp(vector, vector);
