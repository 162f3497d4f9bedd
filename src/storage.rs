//! Object storage and the segment cache, as a backend sees them.
//!
//! A backend opens its `Storage` (from `milvus.storage_url`) and its
//! `SegmentCache` (`milvus.cache_dir`, `milvus.cache_size`) on first use and
//! keeps them while the settings do not change. The work done with them
//! runs off the main thread (`crate::off_thread`).

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use milvus_core::cache::SegmentCache;
use milvus_core::storage::{RetryPolicy, S3Options, Storage, StorageError, location};
use pgrx::prelude::*;

use crate::gucs;

type StorageKey = (String, S3Options, Duration);
/// The cache directory and its bound.
type CacheKey = (String, u64);

thread_local! {
    /// The stores this backend opened, by URL and settings: a few at most
    /// (the default, and each `storage_url` indexes were built with).
    static STORAGES: RefCell<Vec<(StorageKey, Arc<Storage>)>> = const { RefCell::new(Vec::new()) };
    static CACHE: RefCell<Option<(CacheKey, Arc<SegmentCache>)>> = const { RefCell::new(None) };
}

/// Refuses a storage URL that the current user may not choose for an index
/// (its `storage_url` option, checked at CREATE INDEX and ALTER INDEX):
/// inside the data directory for anyone; for a user who is not a superuser,
/// anything but the embedded default or a location under
/// `milvus.allowed_storage_urls`.
pub fn check_index_location(url: &str) {
    if let Err((message, detail)) = gucs::check_outside_data_dir(url) {
        ereport!(ERROR, PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, message, detail);
    }
    // SAFETY: a catalog check of the current user.
    if url == gucs::default_storage_url() || unsafe { pgrx::pg_sys::superuser() } {
        return;
    }
    let allowed = gucs::allowed_storage_urls();
    if !location::is_allowed(url, &allowed) {
        let detail = if allowed.is_empty() {
            "Only superusers choose where an index is stored; milvus.allowed_storage_urls lists no location for other \
                users."
                .to_owned()
        } else {
            format!(
                "Only superusers choose where an index is stored; other users may name a location under \
                    milvus.allowed_storage_urls ({allowed})."
            )
        };
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("permission denied to store an index at \"{url}\""),
            detail
        );
    }
}

/// The store at `url`, `None` meaning the embedded default directory: an
/// index's objects live where its manifest says, whatever
/// `milvus.storage_url` says today. The failure to open is a value: jobs
/// report failures as their own (a flush leaves its segment sealed and says
/// why). An index's objects are read through `lifecycle::object_pages::reading_store`.
pub fn try_storage_at(url: Option<&str>) -> Result<Arc<Storage>, StorageError> {
    let url = url.map(str::to_owned).unwrap_or_else(gucs::default_storage_url);
    let key: StorageKey = (url, gucs::s3_options(), gucs::storage_timeout());
    STORAGES.with_borrow_mut(|opened| {
        if let Some((_, storage)) = opened.iter().find(|(k, _)| *k == key) {
            return Ok(storage.clone());
        }
        let retry = RetryPolicy { request_timeout: key.2, ..RetryPolicy::default() };
        let mut storage = Storage::open(&key.0, &key.1, retry)?;
        // The embedded default is named as Postgres names its files: relative
        // to the data directory, whose path only superusers may see.
        if key.0 == gucs::default_storage_url() {
            storage = storage.labelled("pg_milvus/objects");
        }
        let storage = Arc::new(storage);
        // Settings changed or many URLs: keep the few most recent.
        if opened.len() >= 8 {
            opened.remove(0);
        }
        opened.push((key, storage.clone()));
        Ok(storage)
    })
}

/// Records `url` among the locations GC searches, once. Lines are appended
/// with one write each (O_APPEND), so concurrent builds cannot interleave
/// them; a duplicate line from a race is harmless.
pub fn remember_location(url: &str) {
    if remembered_locations().iter().any(|u| u == url) {
        return;
    }
    let path = std::path::PathBuf::from(gucs::locations_file());
    let written = std::fs::create_dir_all(path.parent().expect("inside the data directory")).and_then(|_| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path)?;
        f.write_all(format!("{url}\n").as_bytes())?;
        f.sync_all()
    });
    if let Err(e) = written {
        crate::error::raise(
            PgSqlErrorCode::ERRCODE_IO_ERROR,
            format!("cannot record storage location in {}: {e}", path.display()),
            None,
            None,
        );
    }
}

thread_local! {
    /// The writer id this backend read, with the timeline it holds for.
    static WRITER: std::cell::Cell<Option<(u32, u64)>> = const { std::cell::Cell::new(None) };
}

/// The number this cluster's object keys begin with: the system identifier
/// on the timeline where pg_milvus first wrote, and a new random number
/// from the first write on any later timeline. A timeline changes when a
/// standby or a restored backup is promoted: that server is a clone of the
/// one it came from (the system identifier is the same), which may still be
/// running and sharing the store, so from then on it writes, and collects
/// garbage, under a prefix of its own, and its indexes adopt what they
/// reference (`lifecycle/adopt.rs`). Kept in `pg_milvus/writer` ("<id hex>
/// <timeline>"), written once per timeline under a lock file.
pub fn writer_id() -> u64 {
    // SAFETY: reads of shared state and a backend global.
    let (system, in_recovery) = unsafe { (pg_sys::GetSystemIdentifier(), pg_sys::RecoveryInProgress()) };
    let path = std::path::PathBuf::from(format!("{}/pg_milvus/writer", gucs::data_dir()));
    let recorded = || -> Option<(u64, u32)> {
        let text = std::fs::read_to_string(&path).ok()?;
        let mut words = text.split_whitespace();
        Some((u64::from_str_radix(words.next()?, 16).ok()?, words.next()?.parse().ok()?))
    };
    if in_recovery {
        // A standby writes nothing: the id it reads keys under is its
        // primary's, carried by the base backup.
        return recorded().map_or(system, |(id, _)| id);
    }
    // SAFETY: valid once recovery is over.
    let timeline = unsafe { pg_sys::GetWALInsertionTimeLine() };
    if let Some((t, id)) = WRITER.get()
        && t == timeline
    {
        return id;
    }
    let decided = (|| -> std::io::Result<u64> {
        std::fs::create_dir_all(path.parent().expect("inside the data directory"))?;
        let lock = std::fs::File::create(path.with_extension("lock"))?;
        lock.lock()?;
        let id = match recorded() {
            Some((id, t)) if t == timeline => return Ok(id),
            // Another timeline: a promoted clone, a new writer.
            Some(_) => {
                use std::hash::BuildHasher;
                std::collections::hash_map::RandomState::new().hash_one((system, timeline, std::process::id()))
            }
            // The first write of this cluster.
            None => system,
        };
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, format!("{id:016x} {timeline}\n"))?;
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        Ok(id)
    })();
    let id = decided.unwrap_or_else(|e| {
        crate::error::raise(
            PgSqlErrorCode::ERRCODE_IO_ERROR,
            format!("cannot record the writer id in pg_milvus/writer: {e}"),
            None,
            None,
        )
    });
    WRITER.set(Some((timeline, id)));
    id
}

/// Every URL [`remember_location`] recorded.
pub fn remembered_locations() -> Vec<String> {
    std::fs::read_to_string(gucs::locations_file())
        .map(|s| s.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The backend's view of the shared segment cache.
pub fn cache() -> Arc<SegmentCache> {
    let (dir, label) = gucs::cache_dir();
    let key = (dir, gucs::cache_size_bytes());
    CACHE.with_borrow_mut(|slot| {
        if let Some((_, cache)) = slot.as_ref().filter(|(k, _)| *k == key) {
            return cache.clone();
        }
        if label.is_some() {
            remove_old_default_cache();
        }
        let opened = SegmentCache::new(&key.0, key.1).map(|c| match label {
            Some(label) => c.labelled(label),
            None => c,
        });
        let cache = Arc::new(opened.unwrap_or_else(|e| {
            let message = match label {
                Some(label) => format!("cannot create the segment cache directory {label}"),
                None => e.to_string(),
            };
            ereport!(ERROR, PgSqlErrorCode::ERRCODE_IO_ERROR, message, "Check milvus.cache_dir.");
        }));
        *slot = Some((key, cache.clone()));
        cache
    })
}

/// Removes the cache directory 0.2 and before used by default (only copies
/// of objects, in base backups with names tar refuses), if it is there.
/// Backends racing to do it are harmless; one that still maps a file from
/// it keeps its pages until it unmaps them.
fn remove_old_default_cache() {
    let old = std::path::Path::new(&gucs::data_dir()).join(gucs::OLD_DEFAULT_CACHE_DIR);
    if old.exists()
        && let Err(e) = std::fs::remove_dir_all(&old)
    {
        debug1!("pg_milvus: could not remove the old cache directory {}: {e}", gucs::OLD_DEFAULT_CACHE_DIR);
    }
}

thread_local! {
    /// This backend's cache (by address) and its counters as last added to
    /// the server's.
    static REPORTED: std::cell::Cell<(usize, [u64; 4])> = const { std::cell::Cell::new((0, [0; 4])) };
}

/// Adds what this backend's cache did since the last call to the server's
/// counters (shared memory; only the main thread may touch it, so this is
/// called after the job, not by it).
pub fn report_cache_use() {
    let Some(cache) = CACHE.with_borrow(|slot| slot.as_ref().map(|(_, c)| c.clone())) else {
        return;
    };
    let s = &cache.stats;
    let now = [&s.hits, &s.misses, &s.bytes_downloaded, &s.evictions].map(|c| c.load(Ordering::Relaxed));
    let id = Arc::as_ptr(&cache) as usize;
    let (reported_id, before) = REPORTED.replace((id, now));
    // A new cache (the settings changed) counts from zero.
    let d = |i: usize| now[i] - if reported_id == id { before[i] } else { 0 };
    crate::shared::add_cache_counters(crate::shared::CacheCounters {
        hits: d(0),
        misses: d(1),
        bytes_downloaded: d(2),
        evictions: d(3),
    });
}
