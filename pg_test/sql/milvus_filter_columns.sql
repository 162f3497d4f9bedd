-- Filter columns: a multicolumn milvus index, its operator classes, the
-- keys the planner pushes into the scan (EXPLAIN), answers with them,
-- clustering by a column, and the columns and options it refuses.
CREATE EXTENSION pg_milvus;
\set VERBOSITY default

-- The operator classes each filter type gets by default (btree_gin's names).
SELECT c.opcname, format_type(c.opcintype, NULL) AS type, f.opfname AS family
  FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod JOIN pg_opfamily f ON f.oid = c.opcfamily
 WHERE a.amname = 'milvus' AND c.opcdefault AND c.opcname NOT LIKE '%vec%' AND c.opcname NOT LIKE 'bit%'
 ORDER BY 1, 2;

CREATE TABLE tickets (id int PRIMARY KEY, tenant_id int, created_at timestamptz, labels text[],
                      author text, embedding vector(3));
INSERT INTO tickets
SELECT i, CASE WHEN i % 50 = 0 THEN NULL ELSE i % 20 END, '2026-11-01 00:00+00'::timestamptz + i * interval '1 hour',
       ARRAY[(ARRAY['billing', 'login', 'refund'])[1 + i % 3]], 'u' || (i % 7),
       ARRAY[(i * 7 % 101) / 101.0, (i * 13 % 103) / 103.0, (i * 29 % 107) / 107.0]
  FROM generate_series(1, 600) i;
CREATE INDEX tickets_idx ON tickets USING milvus (embedding vector_l2_ops, tenant_id, created_at, labels, author)
  WITH (segment_max_rows = 200, cluster_by = 'tenant_id');
ANALYZE tickets;
SET enable_seqscan = off;

-- Every key on a filter column goes into the index: an Index Cond, no Filter.
EXPLAIN (COSTS OFF)
SELECT id FROM tickets WHERE tenant_id = 3 ORDER BY embedding <-> '[0.5,0.5,0.5]' LIMIT 5;
EXPLAIN (COSTS OFF)
SELECT id FROM tickets
 WHERE tenant_id BETWEEN 2 AND 4 AND created_at >= '2026-11-10' AND labels && ARRAY['refund'] AND author <> 'u1'
 ORDER BY embedding <-> '[0.5,0.5,0.5]' LIMIT 5;
-- A key the index has no test for (LIKE) stays the executor's.
EXPLAIN (COSTS OFF)
SELECT id FROM tickets WHERE tenant_id = 3 AND author LIKE 'u%' ORDER BY embedding <-> '[0.5,0.5,0.5]' LIMIT 5;

SELECT id, tenant_id, labels FROM tickets
 WHERE tenant_id = 3 AND labels @> ARRAY['login']
 ORDER BY embedding <-> '[0.5,0.5,0.5]' LIMIT 5;
SELECT id, tenant_id FROM tickets WHERE tenant_id IS NULL ORDER BY embedding <-> '[0.5,0.5,0.5]' LIMIT 5;

-- What the scan did, from EXPLAIN ANALYZE's Milvus Scan line: segments
-- skipped by their statistics, rows matched, segments measured or walked.
CREATE FUNCTION scan_line(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || query LOOP
    IF line LIKE 'Milvus Scan:%' THEN RETURN line; END IF;
  END LOOP;
  RETURN NULL;
END $$;
SELECT scan_line($$SELECT id FROM tickets WHERE tenant_id = 3 ORDER BY embedding <-> '[0.5,0.5,0.5]' LIMIT 5$$);

-- Clustering by tenant_id: three segments of CREATE INDEX's, each every
-- tenant's, rewritten as three ranges of tenants.
SELECT plan FROM milvus_compact('tickets_idx', dry_run => true);
SELECT plan FROM milvus_compact('tickets_idx');
SELECT segment_id, rows, seal_reason FROM milvus_segments('tickets_idx') WHERE state = 'flushed' ORDER BY 1;
SELECT id, tenant_id, labels FROM tickets
 WHERE tenant_id = 3 AND labels @> ARRAY['login']
 ORDER BY embedding <-> '[0.5,0.5,0.5]' LIMIT 5;
SELECT scan_line($$SELECT id FROM tickets WHERE tenant_id = 3 ORDER BY embedding <-> '[0.5,0.5,0.5]' LIMIT 5$$);
SELECT scan_line($$SELECT id FROM tickets WHERE tenant_id IS NULL ORDER BY embedding <-> '[0.5,0.5,0.5]' LIMIT 5$$);

-- Refused: a type without an operator class, the vector not first, a
-- cluster_by the index cannot cluster by.
CREATE TABLE other (price numeric, tenant int, name text, embedding vector(3));
CREATE INDEX ON other USING milvus (embedding vector_l2_ops, price);
CREATE INDEX ON other USING milvus (tenant, embedding vector_l2_ops);
CREATE INDEX ON other USING milvus (embedding vector_l2_ops, tenant) WITH (cluster_by = 'price');
CREATE INDEX ON other USING milvus (embedding vector_l2_ops, tenant, name) WITH (cluster_by = 'name');
