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
