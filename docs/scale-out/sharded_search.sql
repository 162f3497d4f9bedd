-- sharded_search: the top k of a sharded collection, every shard asked at
-- once and computing its own distances, so only (shard, id, distance)
-- cross the network. For the coordinator of docs/scale-out.md; needs the
-- dblink extension (contrib) and a foreign server per shard (postgres_fdw's
-- servers and user mappings serve dblink too). Create it in your own schema:
--     CREATE EXTENSION dblink;
--     \i sharded_search.sql
--
-- `remote` is the query each shard runs: %1$s is the query vector (a quoted
-- literal), %2$s is k. A connection per shard is opened on first use and
-- kept for the session. Each shard answers from its committed data at that
-- moment (dblink runs the remote query in autocommit). A shard that is down
-- or fails makes the whole call fail, never a partial answer.
CREATE FUNCTION sharded_search(
    query vector,
    k integer,
    shards text[],
    remote text DEFAULT 'SELECT id, embedding <-> %1$s::vector AS distance FROM items ORDER BY distance LIMIT %2$s'
) RETURNS TABLE (shard text, id bigint, distance double precision)
LANGUAGE plpgsql AS $fn$
DECLARE
    s text;
    sql text := format(remote, quote_literal(query::text), k);
BEGIN
    BEGIN
        FOREACH s IN ARRAY shards LOOP
            IF NOT s = ANY (coalesce(dblink_get_connections(), '{}')) THEN
                PERFORM dblink_connect(s, s);
            END IF;
            PERFORM dblink_send_query(s, sql);
        END LOOP;
        RETURN QUERY
            SELECT r.shard, r.id, r.distance
              FROM (SELECT name AS shard, t.id, t.distance
                      FROM unnest(shards) AS name,
                           LATERAL dblink_get_result(name) AS t(id bigint, distance double precision)) r
             ORDER BY r.distance
             LIMIT k;
        -- The empty result after each query frees its connection.
        FOREACH s IN ARRAY shards LOOP
            PERFORM * FROM dblink_get_result(s) AS t(id bigint, distance double precision);
        END LOOP;
    EXCEPTION WHEN OTHERS THEN
        -- A connection left mid-query cannot take the next one: drop them all.
        FOREACH s IN ARRAY coalesce(dblink_get_connections(), '{}') LOOP
            IF s = ANY (shards) THEN
                PERFORM dblink_disconnect(s);
            END IF;
        END LOOP;
        RAISE;
    END;
END
$fn$;
