-- Operators and aggregates on halfvec, with pgvector's names and symbols.
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
