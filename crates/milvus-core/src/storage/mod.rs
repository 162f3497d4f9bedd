//! Object storage: where sealed segments live.
//!
//! A [`Storage`] is opened from a URL:
//! - `file:///absolute/dir`: a local directory, the embedded default;
//! - `s3://bucket/prefix`: any S3-compatible service, configured by
//!   [`S3Options`] or, where those are unset, the standard AWS environment;
//! - `memory://`: in-process, for tests.
//!
//! Every object has a typed [`ObjectKey`] built from numbers only, and a
//! nonce that makes every write a new object (`keys.rs`). Writes are
//! published only by the manifest (data first, metadata last), so a reader
//! never sees a partial object, and the loser of a retried write is an
//! orphan for [`Storage::collect_garbage`]. Which URLs an index may use is
//! [`location`]'s to say.
//!
//! The API is blocking: each call drives object_store's future on a
//! current-thread tokio runtime owned by the `Storage`, on the caller's
//! thread. Transient failures are retried with exponential backoff up to a
//! cap ([`RetryPolicy`]); object_store's own retries are switched off so the
//! policy is ours alone and testable.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use crate::error::{SqlError, SqlState};
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig};

mod keys;
pub mod location;

pub use keys::{MAX_KEY_LEN, ObjectKey, ObjectKind, new_nonce};

/// Why a storage operation failed. Messages name the storage (its URL, with
/// no credentials) and the object, and say what went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    #[error("invalid storage URL \"{url}\": {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("storage {storage}: object {key} not found")]
    NotFound { storage: String, key: String },
    #[error("storage {storage}: {op} {key} failed after {attempts} attempt(s): {cause}")]
    Failed { storage: String, op: &'static str, key: String, attempts: u32, cause: String },
    #[error("cancelled")]
    Cancelled,
}

impl SqlError for StorageError {
    fn sqlstate(&self) -> SqlState {
        match self {
            StorageError::InvalidUrl { .. } => SqlState::InvalidParameterValue,
            StorageError::NotFound { .. } | StorageError::Failed { .. } => SqlState::IoError,
            StorageError::Cancelled => SqlState::QueryCanceled,
        }
    }

    fn hint(&self) -> Option<&'static str> {
        match self {
            StorageError::NotFound { .. } => Some(
                "An object the index references is gone: check the index's storage settings, or REINDEX to \
                 rebuild the index from the table.",
            ),
            StorageError::InvalidUrl { .. } => Some("Check milvus.storage_url and the milvus.s3_* settings."),
            _ => None,
        }
    }
}

/// S3 settings; `None` falls back to the standard AWS environment variables
/// (`AWS_ENDPOINT`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`, ...).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct S3Options {
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    pub allow_http: Option<bool>,
    /// Path-style requests (`endpoint/bucket/key`), as MinIO and moto want.
    pub path_style: Option<bool>,
}

impl fmt::Debug for S3Options {
    /// Never prints credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |o: &Option<String>| if o.is_some() { "<set>" } else { "<unset>" };
        f.debug_struct("S3Options")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &set(&self.access_key_id))
            .field("secret_access_key", &set(&self.secret_access_key))
            .field("session_token", &set(&self.session_token))
            .field("allow_http", &self.allow_http)
            .field("path_style", &self.path_style)
            .finish()
    }
}

/// Exponential backoff with a cap on attempts and on each wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = no retry).
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Bound on one request (S3 only; local I/O is not timed).
    pub request_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            request_timeout: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The wait before attempt `attempt + 1` (attempt counts from 1).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.saturating_sub(1)).unwrap_or(u32::MAX);
        self.initial_backoff.saturating_mul(factor).min(self.max_backoff)
    }
}

/// An object as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub key: String,
    pub size: u64,
    pub last_modified: SystemTime,
}

/// What a garbage collection did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    pub deleted: Vec<String>,
    /// Bytes of the deleted objects.
    pub deleted_bytes: u64,
    pub kept_referenced: usize,
    /// Unreferenced but younger than the grace period (maybe an upload whose
    /// manifest commit is still to come).
    pub kept_young: usize,
    /// Every object listed and left in place. A dropped segment none of
    /// whose objects is here may be forgotten, even when an earlier
    /// collection, cut short, deleted some of them.
    pub remaining: HashSet<String>,
}

/// A storage URL, checked for form only (no I/O): what a setting or an
/// index option may be set to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageUrl {
    /// `memory://`: in-process, for tests.
    Memory,
    /// `file:///absolute/dir`.
    File { path: String },
    /// `s3://bucket/prefix`; the prefix without surrounding slashes.
    S3 { bucket: String, prefix: String },
}

impl StorageUrl {
    pub fn parse(url: &str) -> Result<StorageUrl, StorageError> {
        let invalid = |reason: &str| StorageError::InvalidUrl { url: url.to_owned(), reason: reason.to_owned() };
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| invalid("expected scheme://..., e.g. file:///var/lib/milvus or s3://bucket/prefix"))?;
        match scheme {
            "memory" if rest.is_empty() => Ok(StorageUrl::Memory),
            "memory" => Err(invalid("memory:// takes no path")),
            "file" if rest.starts_with('/') => Ok(StorageUrl::File { path: rest.to_owned() }),
            "file" => Err(invalid("file:// needs an absolute path, e.g. file:///var/lib/milvus")),
            "s3" => {
                let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    return Err(invalid("s3:// needs a bucket, e.g. s3://bucket/prefix"));
                }
                if bucket.len() < 3 || bucket.len() > 63 {
                    return Err(invalid("bucket names are 3 to 63 characters long"));
                }
                if !bucket.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.') {
                    return Err(invalid("bucket names use lowercase letters, digits, '-' and '.'"));
                }
                Ok(StorageUrl::S3 { bucket: bucket.to_owned(), prefix: prefix.trim_matches('/').to_owned() })
            }
            other => Err(invalid(&format!("unsupported scheme \"{other}\" (use file, s3 or memory)"))),
        }
    }
}

/// An opened object store.
pub struct Storage {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    /// The URL (it never contains credentials).
    url: String,
    /// How messages name the store: the URL, or what [`Storage::labelled`]
    /// says (the embedded default is named relative to the data directory,
    /// as Postgres names its own files).
    label: String,
    retry: RetryPolicy,
    runtime: tokio::runtime::Runtime,
    /// For `file://` stores, the directory: where a crash mid-upload leaves
    /// a staging file (`<key>#<n>`) that listings never show.
    local_root: Option<std::path::PathBuf>,
}

/// An object of a `file://` store, open for reads by range
/// ([`Storage::open_local`]). An object deleted meanwhile stays readable
/// through it: objects never change, and the open file keeps its bytes.
#[derive(Debug)]
pub struct LocalObject {
    file: std::fs::File,
    key: String,
    label: String,
}

impl LocalObject {
    /// Fills `into` with the object's bytes from `offset` on.
    pub fn read_at(&self, offset: u64, into: &mut [u8]) -> Result<(), StorageError> {
        use std::os::unix::fs::FileExt;
        self.file.read_exact_at(into, offset).map_err(|e| StorageError::Failed {
            storage: self.label.clone(),
            op: "read",
            key: self.key.clone(),
            attempts: 1,
            cause: format!("{} bytes at {offset}: {e}", into.len()),
        })
    }
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Storage").field("url", &self.url).field("retry", &self.retry).finish()
    }
}

impl Storage {
    /// Opens the storage at `url`. Checks the URL's form only: reaching the
    /// service is left to the first operation, so a server that is down does
    /// not stop anything that does not need it.
    pub fn open(url: &str, s3: &S3Options, retry: RetryPolicy) -> Result<Self, StorageError> {
        let invalid = |reason: &str| StorageError::InvalidUrl { url: url.to_owned(), reason: reason.to_owned() };
        let parsed = StorageUrl::parse(url)?;
        let local_root = match &parsed {
            StorageUrl::File { path } => Some(std::path::PathBuf::from(path)),
            _ => None,
        };
        let (store, prefix): (Arc<dyn ObjectStore>, String) = match parsed {
            StorageUrl::Memory => (Arc::new(InMemory::new()), String::new()),
            StorageUrl::File { path } => {
                std::fs::create_dir_all(&path).map_err(|e| invalid(&format!("cannot create directory {path}: {e}")))?;
                let fs = LocalFileSystem::new_with_prefix(&path).map_err(|e| invalid(&e.to_string()))?;
                (Arc::new(fs), String::new())
            }
            StorageUrl::S3 { bucket, prefix } => {
                let mut b = AmazonS3Builder::from_env().with_bucket_name(bucket);
                if let Some(v) = &s3.endpoint {
                    b = b.with_endpoint(v);
                }
                if let Some(v) = &s3.region {
                    b = b.with_region(v);
                }
                if let Some(v) = &s3.access_key_id {
                    b = b.with_access_key_id(v);
                }
                if let Some(v) = &s3.secret_access_key {
                    b = b.with_secret_access_key(v);
                }
                if let Some(v) = &s3.session_token {
                    b = b.with_token(v);
                }
                if let Some(v) = s3.path_style {
                    b = b.with_virtual_hosted_style_request(!v);
                }
                // allow_http lives in the client options, which
                // `with_client_options` replaces whole: set it there.
                let client = ClientOptions::new()
                    .with_allow_http(s3.allow_http.unwrap_or(false))
                    .with_timeout(retry.request_timeout)
                    .with_connect_timeout(retry.request_timeout.min(Duration::from_secs(5)));
                let no_retries = RetryConfig { max_retries: 0, ..Default::default() };
                let s3 = b
                    .with_client_options(client)
                    .with_retry(no_retries)
                    .build()
                    .map_err(|e| invalid(&e.to_string()))?;
                (Arc::new(s3), prefix)
            }
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| invalid(&format!("cannot start the I/O runtime: {e}")))?;
        let label = url.to_owned();
        Ok(Storage { store, prefix: Path::from(prefix), url: url.to_owned(), label, retry, runtime, local_root })
    }

    /// The same store, named `label` in messages: its URL, and for a local
    /// directory its path in any cause an error reports, are replaced by it.
    pub fn labelled(mut self, label: &str) -> Self {
        self.label = label.to_owned();
        self
    }

    /// A failure's cause, the local directory's path named by the label.
    fn cause(&self, e: &object_store::Error) -> String {
        self.hide_root(error_cause(e))
    }

    /// `text` with the local directory's path replaced by the label.
    fn hide_root(&self, text: String) -> String {
        match &self.local_root {
            Some(root) if self.label != self.url => text.replace(&*root.to_string_lossy(), &self.label),
            _ => text,
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    fn full(&self, key: &str) -> Path {
        if self.prefix.as_ref().is_empty() { Path::from(key) } else { Path::from(format!("{}/{key}", self.prefix)) }
    }

    /// Runs `op` with the retry policy; `NotFound` is final at once.
    fn with_retry<T, F, Fut>(&self, op: &'static str, key: &str, f: F) -> Result<T, StorageError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = object_store::Result<T>>,
    {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.runtime.block_on(f()) {
                Ok(v) => return Ok(v),
                Err(object_store::Error::NotFound { .. }) => {
                    return Err(StorageError::NotFound { storage: self.label.clone(), key: key.to_owned() });
                }
                Err(e) if attempt >= self.retry.max_attempts || !is_transient(&e) => {
                    return Err(StorageError::Failed {
                        storage: self.label.clone(),
                        op,
                        key: key.to_owned(),
                        attempts: attempt,
                        cause: self.cause(&e),
                    });
                }
                Err(_) => std::thread::sleep(self.retry.backoff(attempt)),
            }
        }
    }

    /// Writes an object (a new key each time; see the module doc).
    pub fn put(&self, key: &str, bytes: Bytes) -> Result<(), StorageError> {
        let path = self.full(key);
        self.with_retry("put", key, || self.store.put(&path, PutPayload::from_bytes(bytes.clone()))).map(drop)
    }

    /// Reads a whole object.
    pub fn get(&self, key: &str) -> Result<Bytes, StorageError> {
        let path = self.full(key);
        self.with_retry("get", key, || async { self.store.get(&path).await?.bytes().await })
    }

    /// Reads byte ranges of an object, in one call: near ranges are fetched
    /// together and far ones in parallel (object_store's coalescing).
    pub fn get_ranges(&self, key: &str, ranges: &[std::ops::Range<u64>]) -> Result<Vec<Bytes>, StorageError> {
        let path = self.full(key);
        self.with_retry("get_ranges", key, || self.store.get_ranges(&path, ranges))
    }

    /// A `file://` store's object opened as a local file, for reads by
    /// range on the caller's thread (`pread`): no runtime, no thread hop,
    /// no reopening for each read. `None` for other stores.
    pub fn open_local(&self, key: &str) -> Result<Option<LocalObject>, StorageError> {
        let Some(path) = self.local_path(key) else { return Ok(None) };
        let file = std::fs::File::open(&path).map_err(|e| self.local_failure("open", key, &e))?;
        Ok(Some(LocalObject { file, key: key.to_owned(), label: self.label.clone() }))
    }

    /// Where a `file://` store keeps `key`; `None` for other stores.
    pub fn local_path(&self, key: &str) -> Option<std::path::PathBuf> {
        Some(self.local_root.as_ref()?.join(self.full(key).as_ref()))
    }

    /// An I/O failure on the local file of `key`, as a storage error: a
    /// missing file is a missing object.
    pub fn local_failure(&self, op: &'static str, key: &str, e: &std::io::Error) -> StorageError {
        if e.kind() == std::io::ErrorKind::NotFound {
            return StorageError::NotFound { storage: self.label.clone(), key: key.to_owned() };
        }
        let cause = self.hide_root(e.to_string());
        StorageError::Failed { storage: self.label.clone(), op, key: key.to_owned(), attempts: 1, cause }
    }

    /// Copies an object to a new key, inside the store: a hard link in a
    /// local directory (no bytes written), a server-side copy on S3.
    pub fn copy(&self, from: &str, to: &str) -> Result<(), StorageError> {
        let (source, target) = (self.full(from), self.full(to));
        if self.local_root.is_some() {
            self.with_retry("copy", from, || self.store.copy_if_not_exists(&source, &target))
        } else {
            self.with_retry("copy", from, || self.store.copy(&source, &target))
        }
    }

    /// Deletes an object; deleting a missing object is not an error.
    pub fn delete(&self, key: &str) -> Result<(), StorageError> {
        let path = self.full(key);
        match self.with_retry("delete", key, || self.store.delete(&path)) {
            Err(StorageError::NotFound { .. }) => Ok(()),
            other => other,
        }
    }

    /// Lists the objects under `prefix` (relative to the storage prefix).
    pub fn list(&self, prefix: &str) -> Result<Vec<Listed>, StorageError> {
        let path = self.full(prefix.trim_end_matches('/'));
        let strip = self.prefix.parts().count();
        let mut out: Vec<Listed> = self
            .with_retry("list", prefix, || self.store.list(Some(&path)).try_collect::<Vec<_>>())?
            .into_iter()
            .map(|m| Listed {
                key: m.location.parts().skip(strip).map(|p| p.as_ref().to_owned()).collect::<Vec<_>>().join("/"),
                size: m.size,
                last_modified: m.last_modified.into(),
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    /// Deletes the objects under `prefix` that `referenced` does not name and
    /// that are older than `grace` (invariant 5: a referenced object is never
    /// deleted; an unreferenced one is collected after the grace period).
    /// Stops between two deletions once `cancel` is set: what is left is
    /// collected next time.
    pub fn collect_garbage(
        &self,
        prefix: &str,
        referenced: &HashSet<String>,
        grace: Duration,
        now: SystemTime,
        cancel: &AtomicBool,
    ) -> Result<GcReport, StorageError> {
        let mut report = GcReport::default();
        for obj in self.list(prefix)? {
            if cancel.load(Ordering::Relaxed) {
                return Err(StorageError::Cancelled);
            }
            if referenced.contains(&obj.key) {
                report.kept_referenced += 1;
                report.remaining.insert(obj.key);
            } else if now.duration_since(obj.last_modified).unwrap_or_default() < grace {
                report.kept_young += 1;
                report.remaining.insert(obj.key);
            } else {
                self.delete(&obj.key)?;
                report.deleted_bytes += obj.size;
                report.deleted.push(obj.key);
                crate::pause::reach(crate::pause::Point::GcDeleted, cancel);
            }
        }
        // Staging files of uploads a crash cut short (file:// only): never
        // listed, never referenced; removed past the same grace period.
        for file in self.local_files(prefix) {
            if file.key.contains('#')
                && now.duration_since(file.meta.modified().unwrap_or(now)).unwrap_or_default() >= grace
                && std::fs::remove_file(&file.path).is_ok()
            {
                report.deleted_bytes += file.meta.len();
                report.deleted.push(file.key);
            }
        }
        Ok(report)
    }

    /// Every file a `file://` store holds under `prefix`, the staging files
    /// of writes included (which no listing shows), each with its key (its
    /// path below the store's directory); none for other stores.
    pub fn local_files(&self, prefix: &str) -> Vec<LocalFile> {
        let Some(root) = &self.local_root else { return Vec::new() };
        let (mut files, mut dirs) = (Vec::new(), vec![root.join(prefix)]);
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                let (path, Ok(meta)) = (entry.path(), entry.metadata()) else { continue };
                if meta.is_dir() {
                    dirs.push(path);
                } else if let Ok(key) = path.strip_prefix(root).map(|k| k.to_string_lossy().into_owned()) {
                    files.push(LocalFile { path, key, meta });
                }
            }
        }
        files
    }
}

/// A file of a `file://` store ([`Storage::local_files`]).
pub struct LocalFile {
    pub path: std::path::PathBuf,
    /// Its path below the store's directory: the object's key, and a
    /// staging suffix (`#...`) for a write in progress or cut short.
    pub key: String,
    pub meta: std::fs::Metadata,
}

/// Errors that a later attempt may not see: network, timeouts, 5xx. A
/// refused request (permissions, bad configuration) is not retried.
fn is_transient(e: &object_store::Error) -> bool {
    match e {
        object_store::Error::Generic { .. } => {
            let text = error_cause(e).to_ascii_lowercase();
            !(text.contains("403")
                || text.contains("forbidden")
                || text.contains("access denied")
                || text.contains("nosuchbucket"))
        }
        object_store::Error::JoinError { .. } => true,
        _ => false,
    }
}

/// The error with its sources, on one line.
fn error_cause(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::SegmentId;

    fn key(segment: u64, kind: ObjectKind, nonce: u32) -> ObjectKey {
        ObjectKey { cluster: 0x7301, database: 5, index: 16384, segment: SegmentId(segment), kind, nonce }
    }

    #[test]
    fn keys_are_built_from_numbers_only() {
        assert_eq!(key(0x7a, ObjectKind::InsertBinlog, 0xab).path(), "0000000000007301/5/16384/7a/insert-000000ab.bin");
        assert_eq!(key(7, ObjectKind::IndexFile, 1).path(), "0000000000007301/5/16384/7/index-00000001.hnsw");
        assert_eq!(key(7, ObjectKind::DeltaBinlog, 2).path(), "0000000000007301/5/16384/7/delta-00000002.bin");
        assert_eq!(ObjectKey::index_prefix(0x7301, 5, 16384), "0000000000007301/5/16384/");
        assert_ne!(new_nonce(), new_nonce());
    }

    /// tar's limit, for every key in the embedded default store.
    #[test]
    fn the_longest_key_fits_tar_in_the_data_directory() {
        let widest = |kind| {
            ObjectKey {
                cluster: u64::MAX,
                database: u32::MAX,
                index: u32::MAX,
                segment: SegmentId(u64::MAX),
                kind,
                nonce: 0,
            }
            .path()
        };
        for kind in [ObjectKind::InsertBinlog, ObjectKind::IndexFile, ObjectKind::DeltaBinlog] {
            let key = widest(kind);
            assert!(key.len() <= MAX_KEY_LEN, "{key}: {} characters", key.len());
            assert!("pg_milvus/objects/".len() + key.len() + "#99".len() <= 99, "{key}");
        }
        assert_eq!(widest(ObjectKind::IndexFile).len(), MAX_KEY_LEN, "the bound is the longest key");
    }

    #[test]
    fn urls_are_checked_with_a_reason() {
        let open = |u: &str| Storage::open(u, &S3Options::default(), RetryPolicy::default()).map(drop);
        let msg = |u: &str| open(u).unwrap_err().to_string();
        assert_eq!(
            msg("/tmp/x"),
            "invalid storage URL \"/tmp/x\": expected scheme://..., e.g. file:///var/lib/milvus or s3://bucket/prefix"
        );
        assert_eq!(
            msg("file://relative"),
            "invalid storage URL \"file://relative\": file:// needs an absolute path, e.g. file:///var/lib/milvus"
        );
        assert_eq!(msg("gs://b"), "invalid storage URL \"gs://b\": unsupported scheme \"gs\" (use file, s3 or memory)");
        assert_eq!(msg("s3:///p"), "invalid storage URL \"s3:///p\": s3:// needs a bucket, e.g. s3://bucket/prefix");
        assert_eq!(
            msg("s3://Bad_Bucket"),
            "invalid storage URL \"s3://Bad_Bucket\": bucket names use lowercase letters, digits, '-' and '.'"
        );
        assert_eq!(msg("s3://ab"), "invalid storage URL \"s3://ab\": bucket names are 3 to 63 characters long");
        assert!(open("memory://").is_ok());
        assert!(open("s3://bucket/some/prefix").is_ok(), "opening does not contact the service");
        // Parsing alone (what settings and index options are checked with)
        // touches nothing: not even a directory is made.
        assert_eq!(
            StorageUrl::parse("s3://bucket//some/prefix/").unwrap(),
            StorageUrl::S3 { bucket: "bucket".into(), prefix: "some/prefix".into() }
        );
        let dir = "/nonexistent-pg-milvus-test/objects";
        assert_eq!(StorageUrl::parse(&format!("file://{dir}")).unwrap(), StorageUrl::File { path: dir.into() });
        assert!(!std::path::Path::new(dir).exists());
        assert_eq!(
            StorageUrl::parse("memory://x").unwrap_err().to_string(),
            "invalid storage URL \"memory://x\": memory:// takes no path"
        );
    }

    #[test]
    fn credentials_never_print() {
        let o = S3Options {
            secret_access_key: Some("hunter2".into()),
            access_key_id: Some("AKIA".into()),
            ..Default::default()
        };
        let text = format!("{o:?}");
        assert!(!text.contains("hunter2") && !text.contains("AKIA"), "{text}");
    }

    #[test]
    fn backoff_grows_exponentially_to_a_cap() {
        let p = RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            request_timeout: Duration::from_secs(1),
        };
        let waits: Vec<u64> = (1..=6).map(|a| p.backoff(a).as_millis() as u64).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(p.backoff(100), Duration::from_secs(1));
    }

    fn round_trip_and_gc(storage: &Storage) {
        storage.put("c/from", Bytes::from_static(b"copied")).unwrap();
        storage.copy("c/from", "c/to").unwrap();
        storage.delete("c/from").unwrap();
        assert_eq!(storage.get("c/to").unwrap(), Bytes::from_static(b"copied"), "a copy outlives its source");
        storage.delete("c/to").unwrap();
        let a = key(1, ObjectKind::InsertBinlog, 1).path();
        let b = key(1, ObjectKind::IndexFile, 2).path();
        let orphan = key(2, ObjectKind::InsertBinlog, 3).path();
        for k in [&a, &b, &orphan] {
            storage.put(k, Bytes::from(k.clone().into_bytes())).unwrap();
        }
        assert_eq!(storage.get(&a).unwrap(), Bytes::from(a.clone().into_bytes()));
        let listed: Vec<String> =
            storage.list(&ObjectKey::index_prefix(0x7301, 5, 16384)).unwrap().into_iter().map(|l| l.key).collect();
        assert_eq!(listed, vec![b.clone(), a.clone(), orphan.clone()], "sorted by key");

        let missing = storage.get("5/16384/none").unwrap_err();
        assert_eq!(missing, StorageError::NotFound { storage: storage.url().into(), key: "5/16384/none".into() });
        let other_cluster = ObjectKey { cluster: 0x7302, ..key(1, ObjectKind::InsertBinlog, 1) }.path();
        storage.put(&other_cluster, Bytes::from_static(b"theirs")).unwrap();

        let referenced: HashSet<String> = [a.clone(), b.clone()].into();
        let prefix = ObjectKey::index_prefix(0x7301, 5, 16384);
        let young = storage
            .collect_garbage(
                &prefix,
                &referenced,
                Duration::from_secs(3600),
                SystemTime::now(),
                &AtomicBool::new(false),
            )
            .unwrap();
        assert_eq!((young.deleted.len(), young.kept_referenced, young.kept_young), (0, 2, 1));
        let later = SystemTime::now() + Duration::from_secs(7200);
        // A cancelled collection stops before its next deletion.
        let cancelled =
            storage.collect_garbage(&prefix, &referenced, Duration::from_secs(3600), later, &AtomicBool::new(true));
        assert_eq!(cancelled.unwrap_err(), StorageError::Cancelled);
        assert!(storage.get(&orphan).is_ok(), "nothing deleted");
        let old = storage
            .collect_garbage(&prefix, &referenced, Duration::from_secs(3600), later, &AtomicBool::new(false))
            .unwrap();
        assert_eq!(old.deleted, vec![orphan.clone()]);
        assert!(storage.get(&a).is_ok() && storage.get(&b).is_ok(), "referenced objects are never deleted");
        assert!(matches!(storage.get(&orphan), Err(StorageError::NotFound { .. })));
        assert!(storage.get(&other_cluster).is_ok(), "another cluster's objects are outside the prefix");
        storage.delete(&orphan).unwrap();
    }

    #[test]
    fn memory_store_round_trip_and_gc() {
        round_trip_and_gc(&Storage::open("memory://", &S3Options::default(), RetryPolicy::default()).unwrap());
    }

    #[test]
    fn a_labelled_store_never_names_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        let url = format!("file://{}", root.display());
        let storage =
            Storage::open(&url, &S3Options::default(), RetryPolicy::default()).unwrap().labelled("pg_milvus/objects");
        storage.put("1/2/a", Bytes::from_static(b"x")).unwrap();
        let missing = storage.get("1/2/b").unwrap_err().to_string();
        assert_eq!(missing, "storage pg_milvus/objects: object 1/2/b not found");
        // A failure whose cause names a file: an object where a directory
        // would have to be.
        let failed = storage.put("1/2/a/b", Bytes::from_static(b"x")).unwrap_err().to_string();
        assert!(failed.starts_with("storage pg_milvus/objects: put 1/2/a/b failed"), "{failed}");
        assert!(!failed.contains(&*dir.path().to_string_lossy()), "{failed}");
    }

    #[test]
    fn file_store_round_trip_and_gc() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().join("store").display());
        let storage = Storage::open(&url, &S3Options::default(), RetryPolicy::default()).unwrap();
        round_trip_and_gc(&storage);
        // A crash mid-upload leaves a staging file that no listing shows:
        // GC removes it past the grace period too.
        let prefix = ObjectKey::index_prefix(0x7301, 5, 16384);
        let staging = dir
            .path()
            .join("store")
            .join(&prefix)
            .join("00000000000000000009")
            .join("insert-00000000000000ff.binlog#1");
        std::fs::create_dir_all(staging.parent().unwrap()).unwrap();
        std::fs::write(&staging, b"half an upload").unwrap();
        let report = storage
            .collect_garbage(
                &prefix,
                &HashSet::new(),
                Duration::from_secs(3600),
                SystemTime::now(),
                &AtomicBool::new(false),
            )
            .unwrap();
        assert!(staging.exists() && report.deleted.iter().all(|k| !k.contains('#')), "young: kept");
        let later = SystemTime::now() + Duration::from_secs(7200);
        let report = storage
            .collect_garbage(&prefix, &HashSet::new(), Duration::from_secs(3600), later, &AtomicBool::new(false))
            .unwrap();
        assert!(!staging.exists() && report.deleted.iter().any(|k| k.ends_with("#1")), "{:?}", report.deleted);
    }

    #[test]
    fn unreachable_s3_fails_with_the_storage_and_cause_named_after_retries() {
        // Nothing listens on port 9 of loopback: connection refused at once.
        let s3 = S3Options {
            endpoint: Some("http://127.0.0.1:9".into()),
            region: Some("us-east-1".into()),
            access_key_id: Some("k".into()),
            secret_access_key: Some("s".into()),
            allow_http: Some(true),
            path_style: Some(true),
            ..Default::default()
        };
        let retry = RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(2),
            // Refused at once, however long the timeout: a long one keeps a
            // busy machine's slow connect from reading as a timeout instead.
            request_timeout: Duration::from_secs(60),
        };
        let storage = Storage::open("s3://bucket/pfx", &s3, retry).unwrap();
        let e = storage.put("1/2/x", Bytes::from_static(b"x")).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("storage s3://bucket/pfx: put 1/2/x failed after 3 attempt(s): "), "{text}");
        assert!(
            text.contains("onnection refused") || text.contains("error sending request"),
            "the cause is the refused connection: {text}"
        );
        assert!(!text.contains("scheme is not allowed"), "allow_http reached the client: {text}");
        assert!(matches!(e, StorageError::Failed { attempts: 3, .. }), "{e:?}");
        assert!(!text.contains(" s\"") && !text.contains("secret"), "{text}");
    }
}
