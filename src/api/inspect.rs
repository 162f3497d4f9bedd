//! The functions that show what the extension holds and does: segments,
//! index pages, the job log, the segment cache.

use std::sync::atomic::Ordering;

use milvus_core::jobs::Phase;
use milvus_core::segment::{IndexState, SegmentState};
use pgrx::prelude::*;

use crate::catalog::{self, check_milvus_index};
use crate::error::OrRaise;
use crate::lifecycle::compact;
use crate::pages::{Lock, OpenIndex, chain, free, manifest_chain};
use crate::{gucs, shared, storage};

/// The segments of a milvus index, the growing one included: Milvus'
/// GetSegmentInfo.
#[pg_extern(sql = "
CREATE FUNCTION milvus_segments(index regclass)
    RETURNS TABLE(segment_id bigint, state text, index_state text, rows bigint, deleted_rows bigint, bytes bigint,
                  seal_reason text, created_at timestamptz, sealed_at timestamptz, flushed_at timestamptz, error text,
                  tier integer)
    STABLE PARALLEL SAFE STRICT LANGUAGE c AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
COMMENT ON FUNCTION milvus_segments(regclass) IS 'the segments of a milvus index, growing one included';
")]
#[allow(clippy::type_complexity)] // a SQL result row, spelled out for pgrx
fn milvus_segments(
    index: pg_sys::Oid,
) -> TableIterator<
    'static,
    (
        name!(segment_id, i64),
        name!(state, String),
        name!(index_state, String),
        name!(rows, i64),
        name!(deleted_rows, i64),
        name!(bytes, i64),
        name!(seal_reason, Option<String>),
        name!(created_at, TimestampWithTimeZone),
        name!(sealed_at, Option<TimestampWithTimeZone>),
        name!(flushed_at, Option<TimestampWithTimeZone>),
        name!(error, Option<String>),
        name!(tier, Option<i32>),
    ),
> {
    let rel = OpenIndex::open(index, pg_sys::AccessShareLock);
    check_milvus_index(*rel);
    catalog::check_can_read(*rel);
    let (manifest, page_rows, policy) = {
        let meta = rel.meta(Lock::Share);
        let page_rows: Vec<(u64, u64)> =
            meta.in_pages().map(|(s, head)| (s.0, chain::count_rows(*rel, head, meta.shape()))).collect();
        (manifest_chain::read(&meta), page_rows, compact::policy(*rel, meta.shape()))
    };
    drop(rel);
    let database = catalog::database();
    // The background workers' current failure streak on this index, a
    // segment searches could not load, and the flushes running now (from
    // the job log: a second session sees them).
    let trouble = shared::trouble(database, index.to_u32());
    let flushing = shared::flushing(database, index.to_u32());
    let rows = manifest.segments.iter().map(move |e| {
        let m = &e.meta;
        let rows = page_rows.iter().find(|(s, _)| *s == m.id.0).map_or(m.rows, |(_, r)| *r);
        let running = flushing.iter().find(|(s, _)| *s == m.id.0 && m.state == SegmentState::Sealed);
        let state = if running.is_some() { SegmentState::Flushing } else { m.state };
        let index_state = match running {
            Some((_, Phase::Building)) => IndexState::Building,
            _ => m.index_state,
        };
        let damage = trouble.damage.as_ref().filter(|(s, _)| *s == m.id.0).map(|(_, error)| error.clone());
        // A failure not tied to a segment concerns every sealed one.
        let failure = trouble
            .failure
            .as_ref()
            .filter(|(s, _, _)| *s == m.id.0 || (*s == 0 && m.state == SegmentState::Sealed))
            .map(|(_, error, attempts)| {
                format!("{error} (background worker, {attempts} failed attempts; retrying with backoff)")
            });
        (
            m.id.0 as i64,
            state.as_str().to_owned(),
            index_state.as_str().to_owned(),
            rows as i64,
            m.deleted_rows as i64,
            m.bytes as i64,
            m.seal_reason.as_ref().map(|r| r.to_string()),
            seconds_to_timestamptz(m.created_at),
            m.sealed_at.map(seconds_to_timestamptz),
            m.flushed_at.map(seconds_to_timestamptz),
            damage.or(failure),
            // The merge tier of a flushed segment; none for an undersized one.
            (m.state == SegmentState::Flushed).then(|| policy.tier(m.live_rows())).flatten().map(|t| t as i32),
        )
    });
    TableIterator::new(rows.collect::<Vec<_>>())
}

fn seconds_to_timestamptz(unix_secs: u64) -> TimestampWithTimeZone {
    // SAFETY: a pure conversion.
    let ts = unsafe { pg_sys::time_t_to_timestamptz(unix_secs as pg_sys::pg_time_t) };
    TimestampWithTimeZone::try_from(ts).unwrap_or_else(|_| {
        crate::error::raise(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW, // 22008, datetime_value_out_of_range too
            format!("timestamp out of range: {unix_secs}"),
            None,
            None,
        )
    })
}

fn micros_to_timestamptz(unix_micros: i64) -> Option<TimestampWithTimeZone> {
    // Postgres counts from 2000-01-01.
    const PG_EPOCH_OFFSET_MICROS: i64 = 946_684_800_000_000;
    (unix_micros != 0).then(|| TimestampWithTimeZone::try_from(unix_micros - PG_EPOCH_OFFSET_MICROS).ok()).flatten()
}

/// What each block of a milvus index holds, counted: `meta`, `manifest`,
/// `growing`, `sealed`, `released` (waiting to be emptied), `free`, and
/// `unreferenced` (a chain page nothing points at: a leak, which releasing
/// chains through the meta page rules out, crashes included). Like
/// pgstatindex, for operators and tests.
#[pg_extern(sql = "
CREATE FUNCTION milvus_index_pages(index regclass) RETURNS TABLE(kind text, pages bigint)
    VOLATILE STRICT PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
COMMENT ON FUNCTION milvus_index_pages(regclass) IS 'the pages of a milvus index by what they hold';
")]
fn milvus_index_pages(index: pg_sys::Oid) -> TableIterator<'static, (name!(kind, String), name!(pages, i64))> {
    let rel = OpenIndex::open(index, pg_sys::AccessShareLock);
    check_milvus_index(*rel);
    catalog::check_can_read(*rel);
    TableIterator::new(free::census(*rel).into_iter().map(|(kind, n)| (kind.to_owned(), n)))
}

/// The job log, newest first: every job for a superuser, the jobs on their
/// own indexes of this database for anybody else. A job still `running`
/// whose process is gone (the server was stopped, or the process crashed)
/// shows as `abandoned`:
/// its upload, if any, was never published.
#[pg_extern(sql = "
CREATE FUNCTION milvus_job_log()
    RETURNS TABLE(job_id bigint, pid integer, kind text, database oid, index oid, segments bigint[], state text,
                  reason text, started timestamptz, finished timestamptz, rows bigint, bytes bigint, error text)
    VOLATILE PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
COMMENT ON FUNCTION milvus_job_log() IS 'recent seal, flush, compaction and GC jobs of every database (shared memory)';
CREATE VIEW milvus_jobs AS
    SELECT job_id, pid, kind, index::regclass AS index, segments, state, reason, started, finished, rows, bytes, error
      FROM milvus_job_log() WHERE database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = \
          current_database());
COMMENT ON VIEW milvus_jobs IS 'recent and running seal, flush, compaction and GC jobs of this database';
GRANT SELECT ON milvus_jobs TO PUBLIC;
")]
#[allow(clippy::type_complexity)] // a SQL result row, spelled out for pgrx
fn milvus_job_log() -> TableIterator<
    'static,
    (
        name!(job_id, i64),
        name!(pid, i32),
        name!(kind, String),
        name!(database, pg_sys::Oid),
        name!(index, pg_sys::Oid),
        name!(segments, Vec<i64>),
        name!(state, String),
        name!(reason, String),
        name!(started, Option<TimestampWithTimeZone>),
        name!(finished, Option<TimestampWithTimeZone>),
        name!(rows, Option<i64>),
        name!(bytes, Option<i64>),
        name!(error, Option<String>),
    ),
> {
    let mut jobs = shared::jobs();
    // A superuser sees every job; anybody else, the jobs on indexes they own
    // in this database.
    // SAFETY: a catalog check of the current user.
    if !unsafe { pg_sys::superuser() } {
        let database = catalog::database();
        jobs.retain(|j| {
            j.database == database
                && j.index != 0
                && catalog::relation_exists(j.index)
                && catalog::owns(pg_sys::Oid::from(j.index))
        });
    }
    let rows = jobs.into_iter().map(|j| {
        (
            j.id as i64,
            j.pid,
            j.kind.to_owned(),
            pg_sys::Oid::from(j.database),
            pg_sys::Oid::from(j.index),
            j.segments.iter().map(|s| *s as i64).collect(),
            j.state.to_owned(),
            j.reason,
            micros_to_timestamptz(j.started),
            micros_to_timestamptz(j.finished),
            j.written.map(|w| w.0),
            j.written.map(|w| w.1),
            j.error,
        )
    });
    TableIterator::new(rows.collect::<Vec<_>>())
}

/// The local segment cache: the server's counters (this backend's without
/// shared memory), and what the cache directory holds against its bound.
#[pg_extern(sql = "
CREATE FUNCTION milvus_cache_stats()
    RETURNS TABLE(hits bigint, misses bigint, bytes_downloaded bigint, evictions bigint, cached_bytes bigint, \
        capacity_bytes bigint)
    VOLATILE PARALLEL SAFE LANGUAGE c AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
COMMENT ON FUNCTION milvus_cache_stats() IS 'use of the local segment cache since the server started';
")]
fn milvus_cache_stats() -> TableIterator<
    'static,
    (
        name!(hits, i64),
        name!(misses, i64),
        name!(bytes_downloaded, i64),
        name!(evictions, i64),
        name!(cached_bytes, i64),
        name!(capacity_bytes, i64),
    ),
> {
    storage::report_cache_use();
    let cache = storage::cache();
    let counters = shared::cache_counters().unwrap_or_else(|| {
        let s = &cache.stats;
        shared::CacheCounters {
            hits: s.hits.load(Ordering::Relaxed),
            misses: s.misses.load(Ordering::Relaxed),
            bytes_downloaded: s.bytes_downloaded.load(Ordering::Relaxed),
            evictions: s.evictions.load(Ordering::Relaxed),
        }
    });
    let cached = cache.size().or_raise();
    TableIterator::once((
        counters.hits as i64,
        counters.misses as i64,
        counters.bytes_downloaded as i64,
        counters.evictions as i64,
        cached as i64,
        gucs::cache_size_bytes() as i64,
    ))
}
