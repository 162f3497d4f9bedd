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
//! - `build.rs`: `ambuild`, `ambuildempty`;
//! - `insert.rs`: `aminsert`;
//! - `scan.rs`: `ambeginscan`, `amrescan`, `amgettuple`, `amendscan`;
//! - `vacuum.rs`: `ambulkdelete`, `amvacuumcleanup`;
//! - `cost.rs`: `amcostestimate`; `explain.rs`: what scans report to
//!   EXPLAIN (ANALYZE);
//! - `options.rs`: reloptions; `page.rs`: page layout and WAL.

mod build;
pub(crate) mod compact;
mod cost;
pub(crate) mod explain;
pub mod flush;
pub(crate) mod gc;
mod insert;
pub mod options;
pub mod page;
pub mod scan;
mod vacuum;

use milvus_core::Metric;
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
    am.amstrategies = 1;
    am.amsupport = 1;
    am.amoptsprocnum = 0;
    am.amcanorder = false;
    am.amcanorderbyop = true;
    am.amcanbackward = false;
    am.amcanunique = false;
    am.amcanmulticol = false;
    am.amoptionalkey = true;
    am.amsearcharray = false;
    am.amsearchnulls = false;
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

/// The metric of an index, from its opclass' distance function.
pub(crate) unsafe fn metric_of(index: pg_sys::Relation) -> Metric {
    // SAFETY: an open index with one key column and one support function.
    let name = unsafe {
        let proc = pg_sys::index_getprocid(index, 1, 1);
        let name = pg_sys::get_func_name(proc);
        std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned()
    };
    match name.as_str() {
        "l2_distance" => Metric::L2,
        "vector_negative_inner_product" => Metric::InnerProduct,
        "cosine_distance" => Metric::Cosine,
        other => error!("milvus index opclass has an unknown distance function \"{other}\""),
    }
}

/// The dimensions of the indexed column, from its type modifier.
pub(crate) unsafe fn dims_of(index: pg_sys::Relation) -> usize {
    // SAFETY: an open index with one key column.
    let typmod = unsafe { (*(*index).rd_att).attrs.as_slice(1)[0].atttypmod };
    if typmod < 1 {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "column does not have dimensions",
            "A milvus index needs a column of type vector(n), e.g. embedding vector(128)."
        );
    }
    let dims = typmod as usize;
    let max = page::max_dims_per_page();
    if dims > max {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("column cannot have more than {max} dimensions for milvus index"),
            format!("The column has {dims}; a row of the growing segment must fit one index page.")
        );
    }
    dims
}

/// Whether a relation with this OID exists (a syscache probe).
pub(crate) fn relation_exists(oid: u32) -> bool {
    syscache_has(pg_sys::SysCacheIdentifier::RELOID, oid)
}

/// Whether a database with this OID exists.
pub(crate) fn database_exists(oid: u32) -> bool {
    syscache_has(pg_sys::SysCacheIdentifier::DATABASEOID, oid)
}

/// Whether the catalog cache `cache`, keyed by one OID, has `oid`.
fn syscache_has(cache: pg_sys::SysCacheIdentifier::Type, oid: u32) -> bool {
    // SAFETY: a syscache lookup by OID.
    unsafe {
        pg_sys::SearchSysCacheExists(
            cache as i32,
            pg_sys::Datum::from(oid),
            pg_sys::Datum::from(0),
            pg_sys::Datum::from(0),
            pg_sys::Datum::from(0),
        )
    }
}

/// The name of a relation, for messages.
pub(crate) unsafe fn relation_name(rel: pg_sys::Relation) -> String {
    // SAFETY: an open relation.
    unsafe { std::ffi::CStr::from_ptr((*(*rel).rd_rel).relname.data.as_ptr()).to_string_lossy().into_owned() }
}

extension_sql_file!("../../sql/milvus_am.sql", name = "milvus_am", requires = [milvus_handler, "vector_operators"]);
