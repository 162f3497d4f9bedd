//! The local segment cache: objects downloaded once, verified, shared.
//!
//! Every backend of a server reads sealed segments through one cache
//! directory (`milvus.cache_dir`), so an object is downloaded once per server,
//! not once per backend. Entries are files named from the object key, written
//! to a temporary name and renamed into place (a reader never sees half a
//! file), verified against the manifest's CRC-32C when downloaded (a corrupt
//! object is an error naming it, never cached). The cache is bounded in bytes
//! (`milvus.cache_size`): [`SegmentCache::evict`] removes the least recently
//! used entries, by modification time, which a hit refreshes. Removing a file
//! another backend has open or mapped is safe on POSIX systems: its data
//! stays valid until closed.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use crate::format::manifest::ObjectRef;
use crate::storage::{Storage, StorageError};

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("object {key} is corrupt: {reason}")]
    Corrupt { key: String, reason: String },
    #[error("cache directory {dir}: {message}")]
    Io { dir: String, message: String },
}

/// Counters of this process' use of the cache.
#[derive(Debug, Default)]
pub struct CacheStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub bytes_downloaded: AtomicU64,
    pub evictions: AtomicU64,
}

#[derive(Debug)]
pub struct SegmentCache {
    dir: PathBuf,
    capacity: u64,
    pub stats: CacheStats,
}

impl SegmentCache {
    pub fn new(dir: impl Into<PathBuf>, capacity: u64) -> Result<Self, CacheError> {
        let dir = dir.into();
        std::fs::create_dir_all(dir.join("objects")).map_err(|e| CacheError::Io { dir: dir.display().to_string(), message: e.to_string() })?;
        Ok(SegmentCache { dir, capacity, stats: CacheStats::default() })
    }

    fn io(&self, message: String) -> CacheError {
        CacheError::Io { dir: self.dir.display().to_string(), message }
    }

    /// The file an object is cached in: its key with '/' flattened (keys are
    /// built from numbers, so this is a plain file name).
    pub fn path_of(&self, key: &str) -> PathBuf {
        self.dir.join("objects").join(key.replace('/', "_"))
    }

    /// Where an index file is unpacked for hnsw_rs to map.
    pub fn unpack_dir_of(&self, key: &str) -> PathBuf {
        self.dir.join("unpacked").join(format!("{}-{}", key.replace('/', "_"), std::process::id()))
    }

    /// The object's bytes, from the cache or downloaded and verified.
    pub fn get(&self, storage: &Storage, object: &ObjectRef) -> Result<Vec<u8>, CacheError> {
        let path = self.path_of(&object.key);
        if let Ok(bytes) = std::fs::read(&path) {
            // Verified on every hit, not only on download: a local file can
            // rot or be overwritten too, and CRC-32C costs far less than the
            // load it guards.
            if verify(object, &bytes).is_ok() {
                self.stats.hits.fetch_add(1, Ordering::Relaxed);
                touch(&path);
                return Ok(bytes);
            }
            // A cut or damaged entry (a crash mid-write cannot leave one; a
            // full disk or a stray write can): refetch it.
            let _ = std::fs::remove_file(&path);
        }
        self.stats.misses.fetch_add(1, Ordering::Relaxed);
        let bytes = storage.get(&object.key)?;
        verify(object, &bytes)?;
        self.stats.bytes_downloaded.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        std::fs::write(&tmp, &bytes)
            .and_then(|_| std::fs::rename(&tmp, &path))
            .map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                self.io(format!("cannot store {}: {e}", object.key))
            })?;
        self.evict()?;
        Ok(bytes.to_vec())
    }

    /// Bytes held in the cache.
    pub fn size(&self) -> Result<u64, CacheError> {
        Ok(self.entries()?.iter().map(|e| e.1).sum())
    }

    fn entries(&self) -> Result<Vec<(PathBuf, u64, SystemTime)>, CacheError> {
        let dir = self.dir.join("objects");
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(|e| self.io(e.to_string()))? {
            let Ok(entry) = entry else { continue };
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_file() {
                out.push((entry.path(), meta.len(), meta.modified().unwrap_or(SystemTime::UNIX_EPOCH)));
            }
        }
        Ok(out)
    }

    /// Removes least recently used entries until the cache fits its bound.
    pub fn evict(&self) -> Result<u64, CacheError> {
        let mut entries = self.entries()?;
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        entries.sort_by_key(|e| e.2);
        let mut removed = 0;
        for (path, size, _) in entries {
            if total <= self.capacity {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= size;
                removed += 1;
                self.stats.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(removed)
    }
}

/// Checks downloaded bytes against the manifest's size and checksum.
pub fn verify(object: &ObjectRef, bytes: &[u8]) -> Result<(), CacheError> {
    let corrupt = |reason: String| CacheError::Corrupt { key: object.key.clone(), reason };
    if bytes.len() as u64 != object.size {
        return Err(corrupt(format!("{} bytes, the manifest says {}", bytes.len(), object.size)));
    }
    let crc = crc32c::crc32c(bytes);
    if crc != object.crc32c {
        return Err(corrupt(format!("checksum {crc:08x}, the manifest says {:08x}", object.crc32c)));
    }
    Ok(())
}

/// Marks a cache entry as just used.
fn touch(path: &Path) {
    if let Ok(f) = std::fs::File::options().append(true).open(path) {
        let _ = f.set_modified(SystemTime::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{RetryPolicy, S3Options};
    use bytes::Bytes;
    use std::time::Duration;

    fn setup(objects: &[(&str, usize)]) -> (Storage, Vec<ObjectRef>) {
        let storage = Storage::open("memory://", &S3Options::default(), RetryPolicy::default()).unwrap();
        let refs = objects
            .iter()
            .map(|(key, size)| {
                let bytes = vec![key.len() as u8; *size];
                storage.put(key, Bytes::from(bytes.clone())).unwrap();
                ObjectRef::of(*key, &bytes)
            })
            .collect();
        (storage, refs)
    }

    #[test]
    fn downloads_once_then_hits() {
        let dir = tempfile::tempdir().unwrap();
        let (storage, refs) = setup(&[("1/2/a", 100)]);
        let cache = SegmentCache::new(dir.path(), 1 << 20).unwrap();
        assert_eq!(cache.get(&storage, &refs[0]).unwrap().len(), 100);
        assert_eq!(cache.get(&storage, &refs[0]).unwrap().len(), 100);
        assert_eq!((cache.stats.misses.load(Ordering::Relaxed), cache.stats.hits.load(Ordering::Relaxed)), (1, 1));
        // A second process (another backend) shares the directory.
        let other = SegmentCache::new(dir.path(), 1 << 20).unwrap();
        other.get(&storage, &refs[0]).unwrap();
        assert_eq!(other.stats.hits.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn corrupt_or_missing_objects_are_errors_naming_them_and_never_cached() {
        let dir = tempfile::tempdir().unwrap();
        let (storage, refs) = setup(&[("1/2/a", 10)]);
        let cache = SegmentCache::new(dir.path(), 1 << 20).unwrap();
        storage.put("1/2/a", Bytes::from(vec![0u8; 10])).unwrap();
        let e = cache.get(&storage, &refs[0]).unwrap_err().to_string();
        assert!(e.starts_with("object 1/2/a is corrupt: checksum "), "{e}");
        assert!(!cache.path_of("1/2/a").exists());
        storage.delete("1/2/a").unwrap();
        let e = cache.get(&storage, &refs[0]).unwrap_err().to_string();
        assert_eq!(e, "storage memory://: object 1/2/a not found");
    }

    #[test]
    fn a_damaged_cache_entry_is_refetched_not_served() {
        let dir = tempfile::tempdir().unwrap();
        let (storage, refs) = setup(&[("1/2/a", 64)]);
        let cache = SegmentCache::new(dir.path(), 1 << 20).unwrap();
        let good = cache.get(&storage, &refs[0]).unwrap();
        // Same size, other bytes: only the checksum can tell.
        std::fs::write(cache.path_of("1/2/a"), vec![0xeeu8; 64]).unwrap();
        assert_eq!(cache.get(&storage, &refs[0]).unwrap(), good);
        assert_eq!(cache.stats.misses.load(Ordering::Relaxed), 2, "the damaged entry counted as a miss");
        assert_eq!(std::fs::read(cache.path_of("1/2/a")).unwrap(), good, "and repaired");
    }

    #[test]
    fn evicts_least_recently_used_to_the_bound_and_refetches() {
        let dir = tempfile::tempdir().unwrap();
        let (storage, refs) = setup(&[("1/2/a", 400), ("1/2/b", 400), ("1/2/c", 400)]);
        let cache = SegmentCache::new(dir.path(), 1000).unwrap();
        cache.get(&storage, &refs[0]).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        cache.get(&storage, &refs[1]).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        cache.get(&storage, &refs[0]).unwrap(); // a is now the most recent
        std::thread::sleep(Duration::from_millis(20));
        cache.get(&storage, &refs[2]).unwrap(); // over the bound: b goes
        assert!(cache.size().unwrap() <= 1000);
        assert!(cache.path_of("1/2/a").exists() && !cache.path_of("1/2/b").exists() && cache.path_of("1/2/c").exists());
        assert_eq!(cache.get(&storage, &refs[1]).unwrap(), vec![5u8; 400], "re-downloaded after eviction");
        assert!(cache.stats.evictions.load(Ordering::Relaxed) >= 1);
    }
}
