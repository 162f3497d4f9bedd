//! The `milvus` index access method.
//!
//! `CREATE INDEX ... USING milvus (embedding vector_l2_ops)` builds an index
//! whose rows live first in a **growing segment**: WAL-logged index pages
//! that `aminsert` appends to, durable when the inserting transaction commits
//! and replayed by crash recovery and standbys like any index page. An
//! ordered scan (`ORDER BY embedding <-> $1`) searches the segments and merges
//! them by distance (`milvus_core::search`).
//!
//! One file per phase, each opening with its story:
//! - `build.rs`: `ambuild`, `ambuildempty` (CREATE INDEX, REINDEX);
//! - `insert.rs`: `aminsert` (INSERT, COPY, UPDATE), with the row's filter
//!   values (`filter_columns.rs`);
//! - `scan.rs`: `ambeginscan`, `amrescan`, `amgettuple`, `amendscan`
//!   (`ORDER BY embedding <-> $1`), with the keys on filter columns
//!   (`filter_columns.rs`) and `nulls.rs`, the rows of NULL vectors that
//!   come after the last distance;
//! - `vacuum.rs`: `ambulkdelete`, `amvacuumcleanup` (VACUUM);
//! - `cost.rs`: `amcostestimate`; `explain.rs`: what scans report to
//!   EXPLAIN (ANALYZE); `options.rs`: `amoptions`, the reloptions.
//!
//! The jobs that move segments through their life (seal and flush,
//! compaction, tombstones, GC, adoption) and the segments a backend has
//! loaded are `crate::lifecycle`, which these callbacks and `crate::api`
//! and `crate::worker` run; the pages themselves are `crate::pages`.

mod build;
mod cost;
pub mod explain;
pub mod filter_columns;
pub mod insert;
mod nulls;
pub mod options;
pub mod scan;
pub mod vacuum;

use pgrx::prelude::*;

/// The handler: Postgres calls it to learn the access method's callbacks.
#[pg_extern(sql = "
CREATE FUNCTION milvus_handler(internal) RETURNS index_am_handler
    PARALLEL SAFE IMMUTABLE STRICT LANGUAGE c AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
CREATE ACCESS METHOD milvus TYPE INDEX HANDLER milvus_handler;
COMMENT ON ACCESS METHOD milvus IS 'vector index with Milvus segment lifecycle: growing segment in WAL-logged pages, \
    sealed HNSW segments in object storage';
")]
fn milvus_handler(_fcinfo: pg_sys::FunctionCallInfo) -> PgBox<pg_sys::IndexAmRoutine> {
    // SAFETY: palloc'd and tagged as Postgres expects of a handler's result.
    let mut am = unsafe { PgBox::<pg_sys::IndexAmRoutine>::alloc_node(pg_sys::NodeTag::T_IndexAmRoutine) };
    // Strategy 1 is a vector opclass' ORDER BY operator; a filter column's
    // opclass numbers its operators 1 to 8 (`filter_columns.rs`).
    am.amstrategies = 8;
    am.amsupport = 1;
    am.amoptsprocnum = 0;
    am.amcanorder = false;
    am.amcanorderbyop = true;
    am.amcanbackward = false;
    am.amcanunique = false;
    am.amcanmulticol = true;
    am.amoptionalkey = true;
    am.amsearcharray = true;
    am.amsearchnulls = true;
    am.amstorage = false;
    am.amclusterable = false;
    am.ampredlocks = false;
    am.amcanparallel = false;
    am.amcaninclude = false;
    am.amusemaintenanceworkmem = false;
    am.amparallelvacuumoptions = pg_sys::VACUUM_OPTION_PARALLEL_BULKDEL as u8;
    am.amkeytype = pg_sys::InvalidOid;

    am.ambuild = Some(build::ambuild);
    am.ambuildempty = Some(build::ambuildempty);
    am.aminsert = Some(insert::aminsert);
    am.ambulkdelete = Some(vacuum::ambulkdelete);
    am.amvacuumcleanup = Some(vacuum::amvacuumcleanup);
    am.amcostestimate = Some(cost::amcostestimate);
    am.amoptions = Some(options::amoptions);
    am.amvalidate = Some(amvalidate);
    am.ambuildphasename = Some(build::ambuildphasename);
    am.ambeginscan = Some(scan::ambeginscan);
    am.amrescan = Some(scan::amrescan);
    am.amgettuple = Some(scan::amgettuple);
    am.amendscan = Some(scan::amendscan);
    am.into_pg_boxed()
}

#[pg_guard]
unsafe extern "C-unwind" fn amvalidate(_opclass: pg_sys::Oid) -> bool {
    true
}

extension_sql_file!(
    "../../sql/milvus_am.sql",
    name = "milvus_am",
    requires = [milvus_handler, "vector_operators", "halfvec_operators", "sparsevec_operators"]
);
