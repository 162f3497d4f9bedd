-- The milvus access method: creation and its errors, inserts, ordered
-- scans for each metric, filtered queries, NULLs, deletes, plans.
CREATE EXTENSION pg_milvus;
\set VERBOSITY default
SELECT setseed(0.5) \g /dev/null

CREATE TABLE items (id int PRIMARY KEY, category int, embedding vector(3));
INSERT INTO items
SELECT i, i % 4, ARRAY[(i * 7 % 101) / 101.0, (i * 13 % 103) / 103.0, (i * 29 % 107) / 107.0]
  FROM generate_series(1, 300) i;
INSERT INTO items VALUES (301, 0, NULL);

-- Creation on a populated table, with defaults and with options.
CREATE INDEX items_l2 ON items USING milvus (embedding vector_l2_ops);
CREATE INDEX items_ip ON items USING milvus (embedding vector_ip_ops) WITH (m = 8, ef_construction = 32, quantization = none);
CREATE INDEX items_cos ON items USING milvus (embedding vector_cosine_ops) WITH (segment_max_rows = 1000);
SELECT amname FROM pg_am WHERE amname = 'milvus';
SELECT c.relname, c.reloptions FROM pg_class c WHERE c.relname LIKE 'items\_%' ORDER BY 1;

-- Option and column errors.
CREATE INDEX bad ON items USING milvus (embedding vector_l2_ops) WITH (m = 1);
CREATE INDEX bad ON items USING milvus (embedding vector_l2_ops) WITH (m = 101);
CREATE INDEX bad ON items USING milvus (embedding vector_l2_ops) WITH (ef_construction = 20);
CREATE INDEX bad ON items USING milvus (embedding vector_l2_ops) WITH (segment_max_rows = 10);
CREATE INDEX bad ON items USING milvus (embedding vector_l2_ops) WITH (nonsense = 1);
CREATE INDEX bad ON items USING milvus (embedding vector_l2_ops) WITH (quantization = pq);
CREATE INDEX bad ON items USING milvus (id);
CREATE TABLE nodims (v vector);
CREATE INDEX bad ON nodims USING milvus (v vector_l2_ops);
-- The largest row that fits a page as one item, one dimension more (two
-- chunks of a page each), and the type's limit (eight chunks): inserted,
-- flushed, searched, growing and flushed alike.
CREATE TABLE edge (id int, v vector(2034), w vector(2035), x vector(16000));
CREATE INDEX edge_v ON edge USING milvus (v vector_l2_ops);
CREATE INDEX edge_w ON edge USING milvus (w vector_l2_ops);
CREATE INDEX edge_x ON edge USING milvus (x vector_l2_ops);
INSERT INTO edge SELECT i, array_fill(i::real, ARRAY[2034]), array_fill(i::real, ARRAY[2035]),
    array_fill(i::real, ARRAY[16000]) FROM generate_series(1, 3) i;
SELECT count(*) FROM milvus_flush('edge_x');
INSERT INTO edge SELECT i, array_fill(i::real, ARRAY[2034]), array_fill(i::real, ARRAY[2035]),
    array_fill(i::real, ARRAY[16000]) FROM generate_series(4, 5) i;
SELECT state, rows FROM milvus_segments('edge_x') ORDER BY segment_id;
SET enable_seqscan = off;
SELECT id FROM edge ORDER BY v <-> array_fill(2.9::real, ARRAY[2034])::vector LIMIT 2;
SELECT id FROM edge ORDER BY w <-> array_fill(4.2::real, ARRAY[2035])::vector LIMIT 2;
SELECT id FROM edge ORDER BY x <-> array_fill(2.9::real, ARRAY[16000])::vector LIMIT 5;
RESET enable_seqscan;
DELETE FROM edge WHERE id IN (2, 4);
VACUUM edge;
SELECT state, rows, deleted_rows FROM milvus_segments('edge_x') ORDER BY segment_id;
SELECT kind, pages FROM milvus_index_pages('edge_x') WHERE kind IN ('growing', 'unreferenced') ORDER BY kind;
SET enable_seqscan = off;
SELECT id FROM edge ORDER BY x <-> array_fill(2.9::real, ARRAY[16000])::vector LIMIT 5;
RESET enable_seqscan;
CREATE TABLE huge (v vector(16001));
DROP TABLE nodims, edge;

-- Inserts after creation; NULLs are not indexed; bad vectors are refused.
INSERT INTO items VALUES (302, 1, '[0.5,0.5,0.5]'), (303, 2, NULL);
INSERT INTO items VALUES (304, 1, '[1,2]');
INSERT INTO items VALUES (304, 1, '[1,NaN,2]');
ANALYZE items;

-- Ordered scans use the index for ORDER BY distance LIMIT, nothing else.
EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY embedding <-> '[0.5,0.5,0.5]' LIMIT 5;
EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY embedding <#> '[0.5,0.5,0.5]' LIMIT 5;
EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY embedding <=> '[0.5,0.5,0.5]' LIMIT 5;
EXPLAIN (COSTS OFF) SELECT id FROM items WHERE embedding = '[0.5,0.5,0.5]';
EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY id LIMIT 5;

-- Index results equal a sequential scan's, for each metric.
SELECT id, round((embedding <-> '[0.5,0.5,0.5]')::numeric, 5) AS d FROM items ORDER BY embedding <-> '[0.5,0.5,0.5]' LIMIT 5;
SELECT id, round((embedding <#> '[0.5,0.5,0.5]')::numeric, 5) AS d FROM items ORDER BY embedding <#> '[0.5,0.5,0.5]' LIMIT 5;
SELECT id, round((embedding <=> '[0.5,0.2,0.5]')::numeric, 5) AS d FROM items ORDER BY embedding <=> '[0.5,0.2,0.5]' LIMIT 5;
SET enable_indexscan = off;
SELECT id, round((embedding <-> '[0.5,0.5,0.5]')::numeric, 5) AS d FROM items ORDER BY embedding <-> '[0.5,0.5,0.5]' LIMIT 5;
SELECT id, round((embedding <#> '[0.5,0.5,0.5]')::numeric, 5) AS d FROM items ORDER BY embedding <#> '[0.5,0.5,0.5]' LIMIT 5;
SELECT id, round((embedding <=> '[0.5,0.2,0.5]')::numeric, 5) AS d FROM items ORDER BY embedding <=> '[0.5,0.2,0.5]' LIMIT 5;
RESET enable_indexscan;

-- A filter that rejects most rows still fills the LIMIT.
SELECT count(*) FROM (SELECT id FROM items WHERE category = 3 ORDER BY embedding <-> '[0.1,0.9,0.1]' LIMIT 20) s;
-- Every row is reachable, NULL vectors last. (A LIMIT above the table's
-- size makes a sequential scan as cheap: force the index.)
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY embedding <-> '[0,0,0]' LIMIT 1000;
SET milvus.max_scan_tuples = 100000;
SELECT count(*), count(DISTINCT id) FROM (SELECT id FROM items ORDER BY embedding <-> '[0,0,0]' LIMIT 1000) s;
-- milvus.max_scan_tuples ends the approximate rounds, never the scan: the
-- rest comes exactly. milvus.iterative_scan = off stops after the first
-- round (milvus.ef_search rows), as pgvector's default does.
SET milvus.max_scan_tuples = 50;
SELECT count(*) FROM (SELECT id FROM items ORDER BY embedding <-> '[0,0,0]' LIMIT 1000) s;
RESET milvus.max_scan_tuples;
SET milvus.iterative_scan = off;
SELECT count(*) FROM (SELECT id FROM items ORDER BY embedding <-> '[0,0,0]' LIMIT 1000) s;
SET milvus.iterative_scan = strict_order;
SELECT count(*) FROM (SELECT id FROM items ORDER BY embedding <-> '[0,0,0]' LIMIT 1000) s;
SET milvus.iterative_scan = sideways;
RESET milvus.iterative_scan;
-- With no operator class, an index takes vector_l2_ops, as pgvector's does.
CREATE INDEX items_default ON items USING milvus (embedding);
SELECT opcname FROM pg_index i JOIN pg_opclass o ON o.oid = i.indclass[0] WHERE i.indexrelid = 'items_default'::regclass;
DROP INDEX items_default;
SET milvus.ef_search = 0;
SHOW milvus.ef_search;
-- A query vector of the wrong size, and a NULL one.
SELECT id FROM items ORDER BY embedding <-> '[1,2]' LIMIT 1;
SELECT count(*) FROM (SELECT id FROM items ORDER BY embedding <-> NULL LIMIT 5) s;

-- NULLs sort as a sequential scan sorts them: rows whose vector is NULL
-- come after every distance, and a NULL query (every distance NULL)
-- returns every row.
SET enable_seqscan = off;
-- (the plan's scan line only: how EXPLAIN names the sub-select differs
-- between PostgreSQL 15 and 18)
CREATE FUNCTION scans_of(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
        IF line ~ 'Scan' THEN RETURN NEXT line; END IF;
    END LOOP;
END $$;
SELECT scans_of('SELECT id FROM items ORDER BY embedding <-> (SELECT NULL::vector) LIMIT 5');
DROP FUNCTION scans_of(text);
SELECT count(*), count(DISTINCT id) FROM (SELECT id FROM items ORDER BY embedding <-> (SELECT NULL::vector) LIMIT 1000) s;
SELECT id, embedding FROM items ORDER BY embedding <-> '[0,0,0]' LIMIT 5 OFFSET 299;
CREATE TABLE sparse (id int, v vector(2));
INSERT INTO sparse SELECT i, CASE WHEN i % 2000 = 0 THEN ARRAY[i / 2000, 1]::real[]::vector END
  FROM generate_series(1, 20000) i;
CREATE INDEX sparse_v ON sparse USING milvus (v vector_l2_ops);
-- An index on an expression, and a partial index: their NULLs and their
-- predicate as CREATE INDEX evaluates them.
CREATE INDEX sparse_h ON sparse USING milvus ((v::halfvec(2)) halfvec_l2_ops);
CREATE INDEX sparse_even ON sparse USING milvus (v vector_l2_ops) WHERE id % 4000 = 0 OR id % 7 = 0;
ANALYZE sparse;
EXPLAIN (COSTS OFF) SELECT id FROM sparse ORDER BY v <-> '[0,0]' LIMIT 20;
SELECT count(*), count(v), array_agg(id) FILTER (WHERE v IS NOT NULL) FROM (SELECT id, v FROM sparse ORDER BY v <-> '[0,0]' LIMIT 20) s;
EXPLAIN (COSTS OFF) SELECT id FROM sparse ORDER BY v::halfvec(2) <-> '[0,0]' LIMIT 20;
SELECT count(*), count(v) FROM (SELECT id, v FROM sparse ORDER BY v::halfvec(2) <-> '[0,0]' LIMIT 20) s;
EXPLAIN (COSTS OFF) SELECT id FROM sparse WHERE id % 4000 = 0 OR id % 7 = 0 ORDER BY v <-> '[0,0]' LIMIT 20;
SELECT count(*), count(v), bool_and(id % 4000 = 0 OR id % 7 = 0)
  FROM (SELECT id, v FROM sparse WHERE id % 4000 = 0 OR id % 7 = 0 ORDER BY v <-> '[0,0]' LIMIT 20) s;
-- A search that stops early (iterative scans off) has not run out of
-- vectors: no NULL row comes before the rows it left.
SET milvus.iterative_scan = off;
SET milvus.ef_search = 5;
SELECT count(*), count(v) FROM (SELECT id, v FROM sparse ORDER BY v <-> '[0,0]' LIMIT 20) s;
RESET milvus.ef_search;
RESET milvus.iterative_scan;
SELECT count(*) FROM (SELECT id FROM sparse ORDER BY v <-> (SELECT NULL::vector) LIMIT 30000) s;
RESET enable_seqscan;
DROP TABLE sparse;

-- Deletes: VACUUM removes dead rows from the index; none is returned.
DELETE FROM items WHERE id % 3 = 0;
VACUUM items;
SELECT count(*) FROM (SELECT id FROM items ORDER BY embedding <-> '[0,0,0]' LIMIT 1000) s;
SELECT count(*) FROM (SELECT id FROM items ORDER BY embedding <-> '[0,0,0]' LIMIT 1000) s WHERE id % 3 = 0;
RESET enable_seqscan;

-- Unlogged tables, TRUNCATE and REINDEX keep a working index.
CREATE UNLOGGED TABLE u (id int, v vector(2));
CREATE INDEX ON u USING milvus (v vector_l2_ops);
INSERT INTO u VALUES (1, '[1,1]'), (2, '[2,2]');
SELECT id FROM u ORDER BY v <-> '[2.1,2.1]' LIMIT 1;
TRUNCATE u;
INSERT INTO u VALUES (3, '[3,3]');
SELECT id FROM u ORDER BY v <-> '[2.1,2.1]' LIMIT 1;
REINDEX TABLE u;
SELECT id FROM u ORDER BY v <-> '[2.1,2.1]' LIMIT 1;

DROP TABLE u;

-- An operator class whose function the index does not know is refused when
-- the index is built (invalid_object_definition).
CREATE FUNCTION zero_distance(vector, vector) RETURNS float8 LANGUAGE sql IMMUTABLE AS 'SELECT 0::float8';
CREATE OPERATOR <<>> (LEFTARG = vector, RIGHTARG = vector, FUNCTION = zero_distance);
CREATE OPERATOR CLASS zero_ops FOR TYPE vector USING milvus AS
    OPERATOR 1 <<>> (vector, vector) FOR ORDER BY float_ops, FUNCTION 1 zero_distance(vector, vector);
\set VERBOSITY sqlstate
CREATE INDEX ON items USING milvus (embedding zero_ops);
\set VERBOSITY default
CREATE INDEX ON items USING milvus (embedding zero_ops);
DROP OPERATOR CLASS zero_ops USING milvus;
DROP OPERATOR <<>> (vector, vector);
DROP FUNCTION zero_distance(vector, vector);
DROP TABLE items;
DROP EXTENSION pg_milvus;
