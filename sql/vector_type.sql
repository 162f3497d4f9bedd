-- The vector type, completed from the shell created first, with the same
-- I/O, storage and casts as pgvector's so values and clients move freely.
CREATE TYPE vector (
    INPUT     = vector_in,
    OUTPUT    = vector_out,
    TYPMOD_IN = vector_typmod_in,
    RECEIVE   = vector_recv,
    SEND      = vector_send,
    STORAGE   = external
);

-- vector(n): applied on assignment and on explicit casts.
CREATE CAST (vector AS vector)
    WITH FUNCTION vector(vector, integer, boolean) AS IMPLICIT;

CREATE CAST (vector AS real[])
    WITH FUNCTION vector_to_float4(vector, integer, boolean) AS IMPLICIT;
CREATE CAST (real[] AS vector)
    WITH FUNCTION array_to_vector(real[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (double precision[] AS vector)
    WITH FUNCTION array_to_vector(double precision[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (integer[] AS vector)
    WITH FUNCTION array_to_vector(integer[], integer, boolean) AS ASSIGNMENT;
CREATE CAST (numeric[] AS vector)
    WITH FUNCTION array_to_vector(numeric[], integer, boolean) AS ASSIGNMENT;
