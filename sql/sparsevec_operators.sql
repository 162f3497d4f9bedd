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
