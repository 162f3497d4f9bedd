//! Adoption: an index copied with its database or its cluster takes what
//! its manifest references under its own prefix before anything can delete
//! it.
//!
//! Object keys begin with the index instance's numbers: the cluster's
//! writer id (`storage::writer_id`), the database OID, the index OID. An
//! index's own objects are all under that prefix, and GC collects under
//! it alone. A manifest whose objects lie elsewhere was copied: by
//! `CREATE DATABASE ... TEMPLATE` (another database OID), or with a
//! cluster promoted beside the one it was cloned from (another writer id).
//! The instance it was copied from still treats those objects as its own
//! and deletes them once its manifest lets them go (a compaction, a DROP),
//! so the copy copies them under its own prefix (a hard link in a local
//! directory, a server-side copy on S3) and points its manifest at the
//! copies in one change. It happens at the first job on the index: a
//! worker's visit (every database is visited), or a `milvus_flush()`,
//! `milvus_compact()` or `milvus_gc()`. A crash in between leaves copies
//! nobody references, garbage under the index's own prefix.
//!
//! A copy made by `pg_upgrade` is one too: the new cluster has a system
//! identifier, and so a writer id, of its own, and none of the old one's
//! `pg_milvus/` directory. So the first job also records the index's
//! location among those GC searches for dropped indexes
//! (`storage::remember_location`): the old cluster's record of it stayed
//! behind.
//!
//! The same first job writes into the index's pages the objects of an
//! embedded index that a version before the manifest's version 4 left in
//! the directory only (`object_pages.rs`), so from then on they travel
//! with the WAL too.

use std::collections::HashMap;

use milvus_core::error::Failed;
use milvus_core::jobs::{self, JobError};
use pgrx::prelude::*;

use super::object_pages;
use crate::catalog;
use crate::pages::{Block, Index, manifest_chain};

/// Adopts the objects of `index` that another instance wrote, if any;
/// returns how many references it moved, or why it could not.
pub fn adopt_if_copied(index: Index) -> Result<usize, Failed<JobError>> {
    let adopted = adopt_foreign(index)?;
    write_unpaged(index)?;
    Ok(adopted)
}

/// Adoption proper: copies what another instance wrote under this one's
/// prefix, after recording where the index keeps its objects.
fn adopt_foreign(index: Index) -> Result<usize, Failed<JobError>> {
    let (_, snapshot) = manifest_chain::snapshot(index);
    if let Some(url) = &snapshot.storage_url {
        crate::storage::remember_location(url);
    }
    let id = catalog::index_id(index);
    let foreign = snapshot.foreign_objects(&id.prefix());
    if foreign.is_empty() {
        return Ok(0);
    }
    let doing = || format!("adopt the objects index \"{}\" was copied with", index.name());
    let storage = object_pages::reading_store(index, &snapshot).map_err(|e| Failed::new(doing(), JobError::from(e)))?;
    let count = foreign.len();
    let moved =
        crate::off_thread::run("adopt", move |control| jobs::adopt(&storage, id, &foreign, control.cancel_flag()))
            .map_err(|e| Failed::new(doing(), e))?;
    let moved: HashMap<String, String> = moved.into_iter().collect();
    let changed = manifest_chain::change(index, |m| m.rehome(&moved));
    log!("pg_milvus: index \"{}\" adopted {changed} of the {count} objects it was copied with", index.name());
    Ok(changed)
}

/// Writes into pages the objects of an embedded index its manifest lists
/// without pages; returns how many.
fn write_unpaged(index: Index) -> Result<usize, Failed<JobError>> {
    let (_, snapshot) = manifest_chain::snapshot(index);
    let mut unpaged = snapshot.unpaged_objects();
    if unpaged.is_empty() || !object_pages::is_embedded(snapshot.storage_url.as_deref()) {
        return Ok(0);
    }
    let doing = format!("write the objects of index \"{}\" into its pages", index.name());
    let _writing = object_pages::write(index, snapshot.storage_url.as_deref(), unpaged.iter_mut())
        .map_err(|e| Failed::new(doing, JobError::from(e)))?;
    let paged: HashMap<String, Block> = unpaged.into_iter().filter_map(|o| Some((o.key, o.pages?))).collect();
    let changed = manifest_chain::change(index, |m| m.set_pages(&paged));
    log!("pg_milvus: index \"{}\" wrote {changed} objects into its pages", index.name());
    Ok(changed)
}
