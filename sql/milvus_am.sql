-- Operator classes of the milvus access method, one per metric. The
-- support function is the distance the index orders by. L2 is the default,
-- as in pgvector: USING milvus (embedding) means vector_l2_ops.
CREATE OPERATOR CLASS vector_l2_ops
    DEFAULT FOR TYPE vector USING milvus AS
    OPERATOR 1 <-> (vector, vector) FOR ORDER BY float_ops,
    FUNCTION 1 l2_distance(vector, vector);

CREATE OPERATOR CLASS vector_ip_ops
    FOR TYPE vector USING milvus AS
    OPERATOR 1 <#> (vector, vector) FOR ORDER BY float_ops,
    FUNCTION 1 vector_negative_inner_product(vector, vector);

CREATE OPERATOR CLASS vector_cosine_ops
    FOR TYPE vector USING milvus AS
    OPERATOR 1 <=> (vector, vector) FOR ORDER BY float_ops,
    FUNCTION 1 cosine_distance(vector, vector);

CREATE OPERATOR CLASS vector_l1_ops
    FOR TYPE vector USING milvus AS
    OPERATOR 1 <+> (vector, vector) FOR ORDER BY float_ops,
    FUNCTION 1 l1_distance(vector, vector);

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

-- sparsevec: sealed segments are inverted indexes, searched exactly
-- (L2, inner product, cosine); under L1, which has no inverted form, every
-- row is read, also exactly. A row holds at most
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
