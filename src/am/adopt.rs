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

use std::collections::HashMap;

use milvus_core::error::Failed;
use milvus_core::jobs::{self, JobError};
use pgrx::prelude::*;

use crate::catalog;
use crate::pages::{Index, manifest_chain};

/// Adopts the objects of `index` that another instance wrote, if any;
/// returns how many references it moved, or why it could not.
pub fn adopt_if_copied(index: Index) -> Result<usize, Failed<JobError>> {
    let (_, snapshot) = manifest_chain::snapshot(index);
    let id = catalog::index_id(index);
    let foreign = snapshot.foreign_objects(&id.prefix());
    if foreign.is_empty() {
        return Ok(0);
    }
    let doing = || format!("adopt the objects index \"{}\" was copied with", index.name());
    let storage = crate::storage::try_storage_at(snapshot.storage_url.as_deref())
        .map_err(|e| Failed::new(doing(), JobError::from(e)))?;
    let count = foreign.len();
    let moved =
        crate::storage::run_job("adopt", move |control| jobs::adopt(&storage, id, &foreign, control.cancel_flag()))
            .map_err(|e| Failed::new(doing(), e))?;
    let moved: HashMap<String, String> = moved.into_iter().collect();
    let changed = manifest_chain::change(index, |m| m.rehome(&moved));
    log!("pg_milvus: index \"{}\" adopted {changed} of the {count} objects it was copied with", index.name());
    Ok(changed)
}
