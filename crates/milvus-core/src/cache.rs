//! The local segment cache: objects downloaded once, verified, shared.
//!
//! Every backend of a server reads sealed segments through one cache
//! directory (`milvus.cache_dir`), so an object is downloaded once per server,
//! not once per backend, and searched in place: [`SegmentCache::map`] maps a
//! cached file read-only, and every backend mapping it shares the same pages
//! of the OS page cache (one copy of a segment per server, not one per
//! backend, and opening a segment costs a map, not a read).
//!
//! Entries are files named from the object key, written to a temporary name
//! and renamed into place (a reader never sees half a file), and never
//! written again: a mapped file's bytes never change under a reader.
//!
//! **Integrity.** An object is verified in full (size and CRC-32C against the
//! manifest) when it enters the cache: downloaded ([`SegmentCache::map`],
//! [`SegmentCache::get`]) or written by the flush that made it
//! ([`SegmentCache::insert`]); a file that fails is an error naming it, and
//! is never stored or mapped. Once cached, a mapped file is checked by its
//! size and its header (checksummed) each time a backend opens it, not read
//! through: that would cost the first query a read of the whole segment.
//! Damage to a cached body afterwards (a disk error, a stray write) is found
//! by [`SegmentCache::verify_entry`], which `milvus_prewarm()` runs over
//! every file of an index and which replaces a damaged file; until then a
//! search over it reads wrong bytes but never outside the mapping (graph
//! neighbours are bounds-checked as they are read).
//!
//! The cache is bounded in bytes (`milvus.cache_size`), and shared by
//! processes that each hold some of its files mapped, so its rules are
//! about files in use:
//! - **Pins.** A mapped file is pinned by a shared `flock` on it, held as
//!   long as the mapping ([`ObjectBytes::Mapped`]). Eviction takes an
//!   exclusive lock without waiting before it unlinks, so it never removes
//!   a file a backend maps (which would free no disk anyway: a mapped file's
//!   pages live until unmapped, and the next backend would fetch it again).
//!   A reader that opened a file just as it was evicted sees it unlinked once
//!   it holds its pin, and takes it as a miss.
//! - **Eviction** ([`SegmentCache::evict`]) removes the least recently used
//!   unpinned entries, by modification time, which opening refreshes. Files
//!   being written (temporary names) are never candidates; those a crashed
//!   writer left are removed once an hour old.
//! - **One download per object.** A miss takes one of 64 lock files (by the
//!   key's hash) for the download, and looks in the cache again once it
//!   holds it: backends missing the same object wait for the first one's
//!   download and map its file, instead of each fetching its own.
//! - **Over the bound.** When pinned files leave no room for an object, it
//!   is served from memory, not stored: a working set larger than the cache
//!   costs downloads, never an error. Concurrent stores of one object are
//!   atomic renames of identical, verified bytes: the last one wins. An
//!   index larger than the whole cache keeps its binlogs out of it and
//!   reads their rows by range (`crate::jobs::rows_by_range`).

use std::io::Write;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use crate::error::{SqlError, SqlState};
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

impl SqlError for CacheError {
    fn sqlstate(&self) -> SqlState {
        match self {
            CacheError::Storage(e) => e.sqlstate(),
            CacheError::Corrupt { .. } => SqlState::IndexCorrupted,
            CacheError::Io { .. } => SqlState::IoError,
        }
    }

    fn hint(&self) -> Option<&'static str> {
        match self {
            CacheError::Io { .. } => Some("Check milvus.cache_dir and the free space of its file system."),
            CacheError::Storage(e) => e.hint(),
            CacheError::Corrupt { .. } => Some(crate::error::REINDEX_HINT),
        }
    }
}

/// An object that fails its format's checks is corrupt.
impl From<crate::format::FormatError> for CacheError {
    fn from(e: crate::format::FormatError) -> Self {
        CacheError::Corrupt { key: e.object, reason: e.kind.to_string() }
    }
}

/// Counters of this process' use of the cache.
#[derive(Debug, Default)]
pub struct CacheStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub bytes_downloaded: AtomicU64,
    pub evictions: AtomicU64,
}

/// An object's bytes as a search reads them: a read-only mapping of its
/// cache file, pinned while it lives, or memory (bytes that never were a
/// file, or an object the cache had no room for).
#[derive(Debug)]
pub enum ObjectBytes {
    Mapped {
        bytes: memmap2::Mmap,
        /// The file, holding the shared lock that keeps eviction off it.
        pin: std::fs::File,
    },
    Memory(Vec<u8>),
}

impl Deref for ObjectBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            ObjectBytes::Mapped { bytes, .. } => bytes,
            ObjectBytes::Memory(v) => v,
        }
    }
}

impl ObjectBytes {
    /// A read-only mapping of `file`, which the caller has pinned (a shared
    /// lock); an empty file is empty memory (a zero-length mapping is
    /// refused by the OS).
    fn map(pin: std::fs::File) -> std::io::Result<ObjectBytes> {
        if pin.metadata()?.len() == 0 {
            return Ok(ObjectBytes::Memory(Vec::new()));
        }
        // SAFETY: cache files are never written after the rename that
        // publishes them (only replaced by a new file, or unlinked), so the
        // mapped bytes do not change while mapped. Truncating one in place
        // from outside would fault a reader: the cache directory belongs to
        // the server, like its data directory.
        let bytes = unsafe { memmap2::Mmap::map(&pin)? };
        Ok(ObjectBytes::Mapped { bytes, pin })
    }
}

/// How many lock files downloads share (by the key's hash): two misses of
/// one object always meet on one; two of different objects rarely do.
const DOWNLOAD_LOCKS: u32 = 64;

/// A temporary file older than this is a crashed writer's: removed.
const STALE_TEMPORARY: std::time::Duration = std::time::Duration::from_secs(3600);

/// What a cache file's name has while it is being written.
const TEMPORARY: &str = ".tmp-";

/// Opens the cache file at `path` and pins it (a shared lock); `None` if
/// there is none, or eviction unlinked it before the pin held.
fn open_pinned(path: &Path) -> Option<std::fs::File> {
    use std::os::unix::fs::MetadataExt;
    let file = std::fs::File::open(path).ok()?;
    file.lock_shared().ok()?;
    file.metadata().is_ok_and(|m| m.nlink() > 0).then_some(file)
}

#[derive(Debug)]
pub struct SegmentCache {
    dir: PathBuf,
    /// How messages name the directory (its path, unless
    /// [`SegmentCache::labelled`]).
    label: String,
    capacity: u64,
    pub stats: CacheStats,
}

impl SegmentCache {
    pub fn new(dir: impl Into<PathBuf>, capacity: u64) -> Result<Self, CacheError> {
        let dir = dir.into();
        std::fs::create_dir_all(dir.join("objects"))
            .and_then(|_| std::fs::create_dir_all(dir.join("locks")))
            .map_err(|e| CacheError::Io { dir: dir.display().to_string(), message: e.to_string() })?;
        let label = dir.display().to_string();
        Ok(SegmentCache { dir, label, capacity, stats: CacheStats::default() })
    }

    /// The same cache, named `label` in messages (the embedded default is
    /// named relative to the data directory, as Postgres names its files).
    pub fn labelled(mut self, label: &str) -> Self {
        self.label = label.to_owned();
        self
    }

    fn io(&self, message: String) -> CacheError {
        CacheError::Io { dir: self.label.clone(), message }
    }

    /// A cache file as messages name it: relative to the directory.
    fn shown(&self, path: &Path) -> String {
        path.strip_prefix(&self.dir).unwrap_or(path).display().to_string()
    }

    /// The bound on the cache's bytes (`milvus.cache_size`).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Whether `object` is cached whole (by its size; a search checks its
    /// header as it maps it).
    pub fn contains(&self, object: &ObjectRef) -> bool {
        std::fs::metadata(self.path_of(&object.key)).is_ok_and(|m| m.len() == object.size)
    }

    /// The file an object is cached in: its key with '/' flattened (keys are
    /// built from numbers, so this is a plain file name).
    pub fn path_of(&self, key: &str) -> PathBuf {
        self.dir.join("objects").join(key.replace('/', "_"))
    }

    /// Where an index file of version 1 is unpacked for hnsw_rs to reload.
    pub fn unpack_dir_of(&self, key: &str) -> PathBuf {
        self.dir.join("unpacked").join(format!("{}-{}", key.replace('/', "_"), std::process::id()))
    }

    /// The object's bytes, from the cache or downloaded, verified in full
    /// either way: for small objects read whole (delta binlogs).
    pub fn get(&self, storage: &Storage, object: &ObjectRef) -> Result<Vec<u8>, CacheError> {
        let path = self.path_of(&object.key);
        if let Ok(bytes) = std::fs::read(&path) {
            if verify(object, &bytes).is_ok() {
                self.stats.hits.fetch_add(1, Ordering::Relaxed);
                touch(&path);
                return Ok(bytes);
            }
            // A cut or damaged entry (a crash mid-write cannot leave one; a
            // full disk or a stray write can): refetch it.
            let _ = std::fs::remove_file(&path);
        }
        let _download = self.download_lock(&object.key)?;
        // Another backend may have fetched it while this one waited.
        if let Ok(bytes) = std::fs::read(&path)
            && verify(object, &bytes).is_ok()
        {
            self.stats.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(bytes);
        }
        let bytes = self.download(storage, object)?;
        self.store(&object.key, &bytes)?;
        Ok(bytes)
    }

    /// The lock this process holds while it downloads `key`: one of
    /// [`DOWNLOAD_LOCKS`] files, released when dropped.
    fn download_lock(&self, key: &str) -> Result<std::fs::File, CacheError> {
        let dir = self.dir.join("locks");
        let path = dir.join(format!("{:02}", crc32c::crc32c(key.as_bytes()) % DOWNLOAD_LOCKS));
        // Made again if somebody removed the cache directory meanwhile.
        let file = std::fs::create_dir_all(&dir)
            .and_then(|_| std::fs::File::options().create(true).truncate(false).write(true).open(&path))
            .and_then(|f| f.lock().map(|_| f))
            .map_err(|e| self.io(format!("cannot lock {}: {e}", self.shown(&path))))?;
        Ok(file)
    }

    /// The cached file of `object`, pinned and mapped, if it is there whole
    /// (its size is the manifest's; the caller checks its header); a file
    /// of another size is removed.
    fn map_cached(&self, object: &ObjectRef) -> Result<Option<ObjectBytes>, CacheError> {
        let path = self.path_of(&object.key);
        let Some(file) = open_pinned(&path) else { return Ok(None) };
        if !file.metadata().is_ok_and(|m| m.len() == object.size) {
            drop(file);
            let _ = std::fs::remove_file(&path);
            return Ok(None);
        }
        let bytes = ObjectBytes::map(file).map_err(|e| self.io(format!("cannot map {}: {e}", self.shown(&path))))?;
        self.stats.hits.fetch_add(1, Ordering::Relaxed);
        touch(&path);
        Ok(Some(bytes))
    }

    /// The object mapped read-only from its cache file, downloaded and
    /// verified first if it is not cached. A cached file is taken if its
    /// size is the manifest's; the caller checks its header as it decodes
    /// it, and on a failure calls [`Self::remove`] and maps again.
    pub fn map(&self, storage: &Storage, object: &ObjectRef) -> Result<ObjectBytes, CacheError> {
        if let Some(bytes) = self.map_cached(object)? {
            return Ok(bytes);
        }
        let _download = self.download_lock(&object.key)?;
        // Another backend may have fetched it while this one waited.
        if let Some(bytes) = self.map_cached(object)? {
            return Ok(bytes);
        }
        let bytes = self.download(storage, object)?;
        self.store(&object.key, &bytes)
    }

    /// A file the cache derives from objects (an index file of version 1
    /// turned into version 2), mapped; `make` computes it when it is not
    /// cached. Its checks are the decoder's, as for any cached file.
    pub fn map_derived<E: From<CacheError>>(
        &self,
        name: &str,
        make: impl FnOnce() -> Result<Vec<u8>, E>,
    ) -> Result<ObjectBytes, E> {
        let path = self.path_of(name);
        if let Some(file) = open_pinned(&path) {
            let bytes =
                ObjectBytes::map(file).map_err(|e| self.io(format!("cannot map {}: {e}", self.shown(&path))))?;
            self.stats.hits.fetch_add(1, Ordering::Relaxed);
            touch(&path);
            return Ok(bytes);
        }
        self.stats.misses.fetch_add(1, Ordering::Relaxed);
        Ok(self.store(name, &make()?)?)
    }

    /// Puts an object a writer has just uploaded into the cache, verified
    /// against its reference, so that the first search after a flush or a
    /// compaction maps it instead of downloading it.
    pub fn insert(&self, object: &ObjectRef, bytes: &[u8]) -> Result<(), CacheError> {
        verify(object, bytes)?;
        self.store(&object.key, bytes).map(drop)
    }

    /// Reads a cached object through and checks it in full; a damaged file
    /// is removed (the next open fetches it again). `Ok(false)` when the
    /// object is not cached.
    pub fn verify_entry(&self, object: &ObjectRef) -> Result<bool, CacheError> {
        let path = self.path_of(&object.key);
        let Ok(bytes) = std::fs::read(&path) else { return Ok(false) };
        verify(object, &bytes).inspect_err(|_| {
            let _ = std::fs::remove_file(&path);
        })?;
        Ok(true)
    }

    /// Drops a cache entry found damaged.
    pub fn remove(&self, key: &str) {
        let _ = std::fs::remove_file(self.path_of(key));
    }

    /// Downloads and verifies an object.
    fn download(&self, storage: &Storage, object: &ObjectRef) -> Result<Vec<u8>, CacheError> {
        self.stats.misses.fetch_add(1, Ordering::Relaxed);
        let bytes = storage.get(&object.key)?;
        verify(object, &bytes)?;
        self.stats.bytes_downloaded.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(bytes.to_vec())
    }

    /// Writes verified bytes as the cache file of `key` (a temporary file,
    /// pinned, renamed into place) once eviction has made room, and returns
    /// it mapped. Without room (pinned files fill the cache) the bytes are
    /// served from memory and not stored.
    fn store(&self, key: &str, bytes: &[u8]) -> Result<ObjectBytes, CacheError> {
        if !self.make_room(bytes.len() as u64)? {
            return Ok(ObjectBytes::Memory(bytes.to_vec()));
        }
        let path = self.path_of(key);
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let tmp = path.with_extension(format!(
            "{}{}-{}",
            &TEMPORARY[1..],
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let written = std::fs::create_dir_all(self.dir.join("objects"))
            .and_then(|_| std::fs::File::options().read(true).write(true).create(true).truncate(true).open(&tmp))
            .and_then(|f| f.lock_shared().map(|_| f))
            .and_then(|mut f| f.write_all(bytes).map(|_| f))
            .and_then(|f| std::fs::rename(&tmp, &path).map(|_| f));
        let file = written.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            self.io(format!("cannot store {key}: {e}"))
        })?;
        self.keep_within_bound(&path)?;
        ObjectBytes::map(file).map_err(|e| self.io(format!("cannot map {}: {e}", self.shown(&path))))
    }

    /// After this process stored `stored` (and pins it): another process
    /// may have stored beside it since the room was made, so trim to the
    /// bound again; if only pinned files are left, `stored` leaves the
    /// cache itself (its mapping stays valid: the open file outlives the
    /// name), so the cache never stays over its bound.
    fn keep_within_bound(&self, stored: &Path) -> Result<(), CacheError> {
        if !self.make_room(0)? {
            let _ = std::fs::remove_file(stored);
        }
        Ok(())
    }

    /// Bytes held in the cache.
    pub fn size(&self) -> Result<u64, CacheError> {
        Ok(self.entries()?.iter().map(|e| e.1).sum())
    }

    /// The cache's files (not those being written), with their sizes and
    /// times of last use.
    fn entries(&self) -> Result<Vec<(PathBuf, u64, SystemTime)>, CacheError> {
        let dir = self.dir.join("objects");
        let mut out = Vec::new();
        let listed = std::fs::read_dir(&dir).map_err(|e| self.io(format!("cannot list {}: {e}", self.shown(&dir))))?;
        for entry in listed {
            let Ok(entry) = entry else { continue };
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            if entry.file_name().to_string_lossy().contains(TEMPORARY) {
                if modified.elapsed().is_ok_and(|age| age > STALE_TEMPORARY) {
                    let _ = std::fs::remove_file(entry.path());
                }
                continue;
            }
            out.push((entry.path(), meta.len(), modified));
        }
        Ok(out)
    }

    /// Removes least recently used entries that no process pins until the
    /// cache fits its bound; returns how many it removed.
    pub fn evict(&self) -> Result<u64, CacheError> {
        let before = self.stats.evictions.load(Ordering::Relaxed);
        self.make_room(0)?;
        Ok(self.stats.evictions.load(Ordering::Relaxed) - before)
    }

    /// Evicts unpinned entries, least recently used first, until `incoming`
    /// more bytes fit the bound; false if they cannot (pinned files, or an
    /// object larger than the cache).
    fn make_room(&self, incoming: u64) -> Result<bool, CacheError> {
        if incoming > self.capacity {
            return Ok(false);
        }
        let mut entries = self.entries()?;
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        entries.sort_by_key(|e| e.2);
        for (path, size, _) in entries {
            if total + incoming <= self.capacity {
                break;
            }
            // Pinned files refuse the exclusive lock: they stay.
            let Ok(file) = std::fs::File::open(&path) else { continue };
            if file.try_lock().is_ok() && std::fs::remove_file(&path).is_ok() {
                total -= size;
                self.stats.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(total + incoming <= self.capacity)
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
    fn maps_cached_files_and_takes_what_a_writer_verified() {
        let dir = tempfile::tempdir().unwrap();
        let (storage, refs) = setup(&[("1/2/a", 100), ("1/2/b", 50)]);
        let cache = SegmentCache::new(dir.path(), 1 << 20).unwrap();
        let mapped = cache.map(&storage, &refs[0]).unwrap();
        assert!(matches!(mapped, ObjectBytes::Mapped { .. }) && mapped[..] == [5u8; 100]);
        assert_eq!(cache.map(&storage, &refs[0]).unwrap()[..], [5u8; 100]);
        assert_eq!((cache.stats.misses.load(Ordering::Relaxed), cache.stats.hits.load(Ordering::Relaxed)), (1, 1));
        // A cut file (wrong size) is never mapped: fetched again.
        drop(mapped);
        std::fs::write(cache.path_of("1/2/a"), [0u8; 10]).unwrap();
        assert_eq!(cache.map(&storage, &refs[0]).unwrap()[..], [5u8; 100]);
        assert_eq!(cache.stats.misses.load(Ordering::Relaxed), 2);
        // A writer's bytes enter only if they are what the reference says.
        let e = cache.insert(&refs[1], &[0u8; 50]).unwrap_err().to_string();
        assert!(e.starts_with("object 1/2/b is corrupt: checksum"), "{e}");
        assert!(!cache.path_of("1/2/b").exists());
        cache.insert(&refs[1], &[5u8; 50]).unwrap();
        cache.map(&storage, &refs[1]).unwrap();
        assert_eq!(cache.stats.misses.load(Ordering::Relaxed), 2, "inserted, so a hit");
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

    #[test]
    fn pinned_files_are_never_evicted_and_go_once_unpinned() {
        let dir = tempfile::tempdir().unwrap();
        let (storage, refs) = setup(&[("1/2/a", 400), ("1/2/b", 400), ("1/2/c", 400)]);
        let cache = SegmentCache::new(dir.path(), 1000).unwrap();
        let a = cache.map(&storage, &refs[0]).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let b = cache.map(&storage, &refs[1]).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        // c does not fit beside a and b, both mapped (another process'
        // eviction sees the same locks): served from memory, not stored.
        let other = SegmentCache::new(dir.path(), 1000).unwrap();
        let c = other.map(&storage, &refs[2]).unwrap();
        assert!(matches!(c, ObjectBytes::Memory(_)) && c[..] == [5u8; 400]);
        assert_eq!(other.evict().unwrap(), 0);
        assert!(cache.path_of("1/2/a").exists() && cache.path_of("1/2/b").exists());
        assert!(!cache.path_of("1/2/c").exists());
        // a unpinned: the least recently used unpinned file makes room.
        drop(a);
        assert!(matches!(other.map(&storage, &refs[2]).unwrap(), ObjectBytes::Mapped { .. }));
        assert!(!cache.path_of("1/2/a").exists() && cache.path_of("1/2/c").exists());
        assert_eq!(&b[..], &[5u8; 400][..], "b's mapping was never touched");
        // An object larger than the whole cache is read, never an error.
        let (big_storage, big) = setup(&[("1/2/big", 2000)]);
        assert_eq!(other.map(&big_storage, &big[0]).unwrap().len(), 2000);
    }

    #[test]
    fn a_store_that_raced_past_the_bound_gives_its_own_file_up() {
        let dir = tempfile::tempdir().unwrap();
        let (storage, refs) = setup(&[("1/2/a", 400), ("1/2/b", 400)]);
        let cache = SegmentCache::new(dir.path(), 1000).unwrap();
        let (a, b) = (cache.map(&storage, &refs[0]).unwrap(), cache.map(&storage, &refs[1]).unwrap());
        // Another process made room for its 400 bytes before a and b were
        // stored, and stored them after: 1,200 bytes, all pinned.
        let path = cache.path_of("1/2/c");
        std::fs::write(&path, [7u8; 400]).unwrap();
        let c = open_pinned(&path).unwrap();
        cache.keep_within_bound(&path).unwrap();
        assert!(cache.size().unwrap() <= 1000 && !path.exists());
        let c = ObjectBytes::map(c).unwrap();
        assert_eq!((&a[..], &b[..], &c[..]), (&[5u8; 400][..], &[5u8; 400][..], &[7u8; 400][..]), "mappings intact");
    }

    #[test]
    fn concurrent_misses_of_one_object_download_it_once() {
        let dir = tempfile::tempdir().unwrap();
        let (storage, refs) = setup(&[("1/2/a", 1 << 20)]);
        let storage = std::sync::Arc::new(storage);
        let start = std::sync::Arc::new(std::sync::Barrier::new(8));
        let misses: u64 = (0..8)
            .map(|_| {
                let (dir, storage, object, start) =
                    (dir.path().to_owned(), storage.clone(), refs[0].clone(), start.clone());
                std::thread::spawn(move || {
                    // A backend each: its own cache handle on the shared directory.
                    let cache = SegmentCache::new(dir, 1 << 30).unwrap();
                    start.wait();
                    assert_eq!(cache.map(&storage, &object).unwrap().len(), 1 << 20);
                    cache.stats.misses.load(Ordering::Relaxed)
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .sum();
        assert_eq!(misses, 1, "one download, seven waits and hits");
    }

    #[test]
    fn files_being_written_are_not_evicted_until_stale() {
        let dir = tempfile::tempdir().unwrap();
        let (storage, refs) = setup(&[("1/2/a", 400)]);
        let cache = SegmentCache::new(dir.path(), 1000).unwrap();
        let writing = cache.path_of("1/2/b").with_extension("tmp-1-1");
        std::fs::write(&writing, [0u8; 100]).unwrap();
        cache.get(&storage, &refs[0]).unwrap();
        let tiny = SegmentCache::new(dir.path(), 0).unwrap();
        assert_eq!(tiny.evict().unwrap(), 1, "the entry, not the file being written");
        assert!(writing.exists() && tiny.size().unwrap() == 0);
        let old = SystemTime::now() - STALE_TEMPORARY - Duration::from_secs(1);
        std::fs::File::options().append(true).open(&writing).unwrap().set_modified(old).unwrap();
        tiny.evict().unwrap();
        assert!(!writing.exists(), "a crashed writer's file is removed");
    }
}
