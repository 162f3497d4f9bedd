-- The milvus access method on sparsevec: pgvector's HNSW tests on sparsevec
-- (test/sql/hnsw_sparsevec.sql) run USING milvus, whose answers are exact;
-- then what differs: the entry limit, the opclasses, flushed and merged
-- segments.
CREATE EXTENSION pg_milvus;
\set VERBOSITY default
SET enable_seqscan = off;

-- L2
CREATE TABLE t (val sparsevec(3));
INSERT INTO t (val) VALUES ('{}/3'), ('{1:1,2:2,3:3}/3'), ('{1:1,2:1,3:1}/3'), (NULL);
CREATE INDEX ON t USING milvus (val sparsevec_l2_ops);
INSERT INTO t (val) VALUES ('{1:1,2:2,3:4}/3');
SELECT * FROM t ORDER BY val <-> '{1:3,2:3,3:3}/3';
SELECT COUNT(*) FROM (SELECT * FROM t ORDER BY val <-> (SELECT NULL::sparsevec)) t2;
SELECT COUNT(*) FROM t;
TRUNCATE t;
SELECT * FROM t ORDER BY val <-> '{1:3,2:3,3:3}/3';
DROP TABLE t;

-- inner product
CREATE TABLE t (val sparsevec(3));
INSERT INTO t (val) VALUES ('{}/3'), ('{1:1,2:2,3:3}/3'), ('{1:1,2:1,3:1}/3'), (NULL);
CREATE INDEX ON t USING milvus (val sparsevec_ip_ops);
INSERT INTO t (val) VALUES ('{1:1,2:2,3:4}/3');
SELECT * FROM t ORDER BY val <#> '{1:3,2:3,3:3}/3';
SELECT COUNT(*) FROM (SELECT * FROM t ORDER BY val <#> (SELECT NULL::sparsevec)) t2;
DROP TABLE t;

-- cosine
CREATE TABLE t (val sparsevec(3));
INSERT INTO t (val) VALUES ('{}/3'), ('{1:1,2:2,3:3}/3'), ('{1:1,2:1,3:1}/3'), (NULL);
CREATE INDEX ON t USING milvus (val sparsevec_cosine_ops);
INSERT INTO t (val) VALUES ('{1:1,2:2,3:4}/3');
SELECT * FROM t ORDER BY val <=> '{1:3,2:3,3:3}/3';
SELECT COUNT(*) FROM (SELECT * FROM t ORDER BY val <=> '{}/3') t2;
SELECT COUNT(*) FROM (SELECT * FROM t ORDER BY val <=> (SELECT NULL::sparsevec)) t2;
DROP TABLE t;

-- The same rows flushed into an inverted segment, then merged after a
-- delete: the same answers.
CREATE TABLE t (id int, val sparsevec(5));
CREATE INDEX t_idx ON t USING milvus (val sparsevec_ip_ops);
INSERT INTO t SELECT i, format('{%s:%s,%s:1}/5', i % 5 + 1, i, (i + 2) % 5 + 1)::sparsevec FROM generate_series(1, 40) i;
SELECT state FROM milvus_flush('t_idx');
INSERT INTO t SELECT i, format('{%s:%s}/5', i % 5 + 1, i)::sparsevec FROM generate_series(41, 50) i;
SELECT id, val <#> '{1:1,3:0.5}/5' AS d FROM t ORDER BY val <#> '{1:1,3:0.5}/5' LIMIT 5;
SELECT state FROM milvus_flush('t_idx');
SELECT state, rows, index_state FROM milvus_segments('t_idx') WHERE state <> 'dropped' ORDER BY segment_id;
DELETE FROM t WHERE id % 2 = 0;
VACUUM t;
SELECT state, rows, deleted_rows FROM milvus_segments('t_idx') WHERE state <> 'dropped' ORDER BY segment_id;
SELECT id, val <#> '{1:1,3:0.5}/5' AS d FROM t ORDER BY val <#> '{1:1,3:0.5}/5' LIMIT 5;
SELECT plan, input_segments, removed_rows FROM milvus_compact('t_idx');
SELECT state, rows, deleted_rows FROM milvus_segments('t_idx') WHERE state <> 'dropped' ORDER BY segment_id;
SELECT id, val <#> '{1:1,3:0.5}/5' AS d FROM t ORDER BY val <#> '{1:1,3:0.5}/5' LIMIT 5;
DROP TABLE t;

-- What the index refuses: more entries than one page holds (pgvector's
-- HNSW limit too), another width, a column without dimensions.
CREATE TABLE t (val sparsevec(2000));
CREATE INDEX ON t USING milvus (val);
INSERT INTO t SELECT format('{%s}/2000', string_agg(i || ':1', ','))::sparsevec FROM generate_series(1, 1001) i;
INSERT INTO t SELECT format('{%s}/2000', string_agg(i || ':1', ','))::sparsevec FROM generate_series(1, 1000) i;
INSERT INTO t VALUES ('{1:1}/3');
SELECT count(*) FROM t;
CREATE TABLE nodims (val sparsevec);
CREATE INDEX ON nodims USING milvus (val sparsevec_l2_ops);
DROP TABLE t, nodims;

-- L1 has no inverted form: its segments are read row by row, as exactly.
CREATE TABLE t (id int, val sparsevec(5));
INSERT INTO t SELECT i, format('{%s:%s,%s:1}/5', i % 5 + 1, i, (i + 2) % 5 + 1)::sparsevec FROM generate_series(1, 40) i;
CREATE INDEX t_l1 ON t USING milvus (val sparsevec_l1_ops);
INSERT INTO t VALUES (41, '{1:3}/5'), (42, '{}/5');
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM t ORDER BY val <+> '{1:3,3:1}/5' LIMIT 4;
SELECT id, val <+> '{1:3,3:1}/5' AS d FROM t ORDER BY val <+> '{1:3,3:1}/5', id LIMIT 4;
SELECT id FROM t ORDER BY val <+> '{1:3,3:1}/5' LIMIT 4;
RESET enable_seqscan;
SELECT state, index_state, rows FROM milvus_segments('t_l1') ORDER BY segment_id;
DROP TABLE t;
DROP EXTENSION pg_milvus;
