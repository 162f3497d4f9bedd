//! What the catalogs say about milvus indexes: which relations are ours,
//! who may run maintenance on them, which exist, and the numbers their
//! objects are named by.
//!
//! Every query here schema-qualifies its names and operators: a
//! search_path set by a database owner cannot put its own `=` under a
//! superuser's (or a worker's) query.

use milvus_core::jobs::IndexId;
use pgrx::prelude::*;

use crate::pages::{Index, OpenIndex};

/// Refuses anything but a built milvus index with storage: another kind
/// of relation, a partitioned index (whose partitions each have their own
/// milvus index; functions that can, expand it with [`leaf_indexes`]), or
/// one CREATE INDEX CONCURRENTLY is still building.
pub fn check_milvus_index(index: Index) {
    if !is_built_milvus_index(index) {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("milvus index \"{}\" is still being built", index.name()),
            "CREATE INDEX CONCURRENTLY writes its segments before the index's pages; ask again once it is done."
        );
    }
}

/// [`check_milvus_index`] for those that skip an index being built: false
/// for a milvus index CREATE INDEX CONCURRENTLY has not laid out yet.
pub fn is_built_milvus_index(index: Index) -> bool {
    let name = index.name();
    // SAFETY: an open relation; a catalog lookup of its access method.
    let (is_milvus, partitioned) = unsafe {
        let rel = index.raw();
        let am = pg_sys::get_am_name((*(*rel).rd_rel).relam);
        let is_milvus = !am.is_null() && std::ffi::CStr::from_ptr(am).to_bytes() == b"milvus";
        (is_milvus, (*(*rel).rd_rel).relkind as u8 == pg_sys::RELKIND_PARTITIONED_INDEX)
    };
    if !is_milvus {
        ereport!(ERROR, PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE, format!("\"{name}\" is not a milvus index"));
    }
    if partitioned {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
            format!("\"{name}\" is a partitioned index: its segments are in the index of each partition"),
            format!(
                "Ask each partition's index, e.g. SELECT p.relid AS index, s.* FROM pg_partition_tree('{}') p, \
                    milvus_segments(p.relid) s WHERE p.isleaf;",
                name.replace('\'', "''")
            )
        );
    }
    index.has_pages()
}

/// Whether the current user owns the relation (superusers own everything).
pub fn owns(oid: pg_sys::Oid) -> bool {
    // SAFETY: a catalog check of the current user.
    #[cfg(feature = "pg15")]
    unsafe {
        pg_sys::pg_class_ownercheck(oid, pg_sys::GetUserId())
    }
    // SAFETY: the same check, as PostgreSQL 16 on spell it.
    #[cfg(feature = "pg18")]
    unsafe {
        pg_sys::object_ownercheck(pg_sys::RelationRelationId, oid, pg_sys::GetUserId())
    }
}

/// Refuses a user who does not own the index (superusers own everything).
pub fn check_owner(index: Index) {
    if !owns(index.oid()) {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("must be owner of index {}", index.name())
        );
    }
}

/// Refuses a user who may not read the index's table: `SELECT` on it, or
/// its owner's rights. What the inspection functions show (rows, sizes,
/// times, errors) is about the table's data.
pub fn check_can_read(index: Index) {
    // SAFETY: a catalog lookup of the index's table and an ACL check of the
    // current user on it.
    let allowed = unsafe {
        let table = pg_sys::IndexGetRelation(index.oid(), false);
        pg_sys::pg_class_aclcheck(table, pg_sys::GetUserId(), pg_sys::ACL_SELECT as pg_sys::AclMode)
            == pg_sys::AclResult::ACLCHECK_OK
            || owns(table)
    };
    if !allowed {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("permission denied for index {}", index.name()),
            "Inspecting a milvus index needs SELECT on its table."
        );
    }
}

/// Opens the milvus index `oid` under `lock` for maintenance by its owner
/// (or a superuser); an error for anything else.
pub fn open_owned(oid: pg_sys::Oid, lock: u32) -> OpenIndex {
    let index = OpenIndex::open(oid, lock);
    check_milvus_index(*index);
    check_owner(*index);
    index
}

/// The indexes `index` stands for: itself, or for a partitioned index the
/// index of every leaf partition, in OID order (what `milvus_flush`,
/// `milvus_compact`, `milvus_prewarm` and `milvus_gc` work on).
pub fn leaf_indexes(index: pg_sys::Oid) -> Vec<pg_sys::Oid> {
    // SAFETY: a syscache lookup.
    if unsafe { pg_sys::get_rel_relkind(index) } as u8 != pg_sys::RELKIND_PARTITIONED_INDEX {
        return vec![index];
    }
    Spi::connect(|client| {
        client
            .select(
                "SELECT relid FROM pg_catalog.pg_partition_tree($1::pg_catalog.regclass) WHERE isleaf ORDER BY relid",
                None,
                &[index.into()],
            )
            .map(|rows| rows.filter_map(|r| r.get::<pg_sys::Oid>(1).ok().flatten()).collect())
            .unwrap_or_else(|e| {
                crate::error::raise(
                    PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                    format!("could not list the partitions of index {}: {e}", index.to_u32()),
                    None,
                    None,
                )
            })
    })
}

/// Every milvus index of the current database.
pub fn all_milvus_indexes() -> Vec<pg_sys::Oid> {
    Spi::connect(|client| {
        client
            .select(
                "SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_am a ON a.oid OPERATOR(pg_catalog.=) \
                    c.relam WHERE a.amname OPERATOR(pg_catalog.=) 'milvus' AND c.relkind OPERATOR(pg_catalog.=) 'i' \
                    ORDER BY c.oid",
                None,
                &[],
            )
            .map(|rows| rows.filter_map(|r| r.get::<pg_sys::Oid>(1).ok().flatten()).collect())
            .unwrap_or_default()
    })
}

/// Whether a relation with this OID exists (a syscache probe).
pub fn relation_exists(oid: u32) -> bool {
    syscache_has(pg_sys::SysCacheIdentifier::RELOID, oid)
}

/// Whether a database with this OID exists.
pub fn database_exists(oid: u32) -> bool {
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

/// This database's OID.
pub fn database() -> u32 {
    // SAFETY: a backend global set at connection.
    unsafe { pg_sys::MyDatabaseId.to_u32() }
}

/// The numbers an index's object keys are built from.
pub fn index_id(index: Index) -> IndexId {
    index_id_of(index.oid().to_u32())
}

/// The same for an index of this database known only by its OID (GC of
/// dropped indexes). The first number is the cluster's writer id
/// ([`crate::storage::writer_id`]), not its system identifier: a clone
/// promoted beside its origin writes, and collects, under its own.
pub fn index_id_of(index: u32) -> IndexId {
    IndexId { cluster: crate::storage::writer_id(), database: database(), index }
}

/// Maintenance writes WAL and objects: not on a standby, where the
/// primary's jobs arrive by replay.
pub fn check_not_in_recovery(function: &str) {
    // SAFETY: reads shared state.
    if unsafe { pg_sys::RecoveryInProgress() } {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION,
            format!("cannot run {function} on a standby"),
            "Segments are sealed, flushed and compacted on the primary; the standby replays them."
        );
    }
}
