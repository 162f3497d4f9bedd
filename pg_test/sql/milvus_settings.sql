-- Sizes and times take Postgres' units, as shared_buffers and
-- statement_timeout do; a bare number keeps the unit each always had.
SET milvus.cache_size = '16GB';
SHOW milvus.cache_size;
SET milvus.cache_size = 512;
SHOW milvus.cache_size;
-- Below the least: refused (the message's wording differs between 15 and 18).
\set VERBOSITY sqlstate
SET milvus.cache_size = '8MB';
\set VERBOSITY default
RESET milvus.cache_size;
SHOW milvus.cache_size;
SET milvus.gc_grace_period = '2h';
SHOW milvus.gc_grace_period;
SET milvus.gc_grace_period = 90;
SHOW milvus.gc_grace_period;
RESET milvus.gc_grace_period;
