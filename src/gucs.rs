//! Every `milvus.*` setting, in one place: private statics, one `init()`,
//! typed accessors. Each description states the range.

use std::ffi::{CStr, CString};

use milvus_core::storage::location;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

static EF_SEARCH: GucSetting<i32> = GucSetting::<i32>::new(40);
static MAX_SCAN_TUPLES: GucSetting<i32> = GucSetting::<i32>::new(20_000);
static ITERATIVE_SCAN: GucSetting<IterativeScan> = GucSetting::<IterativeScan>::new(IterativeScan::RelaxedOrder);
static STORAGE_URL: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static ALLOWED_STORAGE_URLS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static STORAGE_TIMEOUT_S: GucSetting<i32> = GucSetting::<i32>::new(30);
static CACHE_DIR: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static CACHE_SIZE_MB: GucSetting<i32> = GucSetting::<i32>::new(1024);
static DEBUG_PAUSE_MS: GucSetting<i32> = GucSetting::<i32>::new(0);
static DEBUG_PAUSE_AT: GucSetting<PausePoint> = GucSetting::<PausePoint>::new(PausePoint::Commit);
static S3_ENDPOINT: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static S3_REGION: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static S3_ACCESS_KEY_ID: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static S3_SECRET_ACCESS_KEY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static S3_SESSION_TOKEN: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static S3_ALLOW_HTTP: GucSetting<bool> = GucSetting::<bool>::new(false);
static S3_PATH_STYLE: GucSetting<bool> = GucSetting::<bool>::new(false);
static COMPACTION_DELETE_RATIO: GucSetting<f64> = GucSetting::<f64>::new(0.2);
static GC_GRACE_PERIOD_S: GucSetting<i32> = GucSetting::<i32>::new(3600);
static MAX_WORKERS: GucSetting<i32> = GucSetting::<i32>::new(2);
static NAPTIME_S: GucSetting<i32> = GucSetting::<i32>::new(10);
static SEAL_IDLE_TIME_S: GucSetting<i32> = GucSetting::<i32>::new(600);
static SEAL_LIFETIME_S: GucSetting<i32> = GucSetting::<i32>::new(3600);
static GC_INTERVAL_S: GucSetting<i32> = GucSetting::<i32>::new(600);
static MAINTENANCE_NICE: GucSetting<i32> = GucSetting::<i32>::new(10);

/// Registers the settings; called from `_PG_init`.
pub fn init() {
    // SAFETY: a postmaster global, true while shared_preload_libraries loads.
    // A postmaster-context setting can only be made then; loaded later, the
    // library runs no workers anyway.
    if unsafe { pgrx::pg_sys::process_shared_preload_libraries_in_progress } {
        GucRegistry::define_int_guc(
            c"milvus.max_workers",
            c"Most background workers pg_milvus runs at once, one per database with work.",
            c"Taken from max_worker_processes, which must leave room for them (and one launcher). Range 0 to 64; \
                default 2; 0 turns automatic seal, flush, compaction and GC off. Needs a restart.",
            &MAX_WORKERS,
            0,
            64,
            GucContext::Postmaster,
            GucFlags::default(),
        );
    }
    GucRegistry::define_int_guc(
        c"milvus.ef_search",
        c"Size of the HNSW candidate list of a search, shared by the flushed segments by their rows.",
        c"Larger is more accurate and slower. Range 1 to 1000; default 40, like pgvector's hnsw.ef_search.",
        &EF_SEARCH,
        1,
        1000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"milvus.max_scan_tuples",
        c"Most rows the approximate rounds of one index scan offer before it goes on exactly.",
        c"A filtered query that rejects most rows widens its HNSW search round by round; past this many rows (or \
            sooner, once a round would cost more than brute force) it computes the exact distance of every remaining \
            row and goes on nearest first, so it never ends while rows remain. Range 1 to 2147483647; default \
            20000, like pgvector's hnsw.max_scan_tuples.",
        &MAX_SCAN_TUPLES,
        1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_enum_guc(
        c"milvus.iterative_scan",
        c"What an index scan does when a filter rejects the rows its first round found.",
        c"relaxed_order (the default): widening rounds, then exact, until every row has been offered; a row a round \
            missed may come after a farther one. strict_order: the same, but a row nearer than one already returned is \
            skipped. off: the first round only (milvus.ef_search rows), so a selective filter may return fewer \
            rows than its LIMIT. pgvector's hnsw.iterative_scan values.",
        &ITERATIVE_SCAN,
        GucContext::Userset,
        GucFlags::default(),
    );
    // SAFETY: the check hook is pg_guard'ed and only reads its argument.
    unsafe {
        GucRegistry::define_string_guc_with_hooks(
            c"milvus.storage_url",
            c"Where sealed segments are stored: file:///absolute/dir or s3://bucket/prefix.",
            c"Empty (the default) means file://<data directory>/pg_milvus/objects. A malformed URL is refused when \
                set. Superuser only.",
            &STORAGE_URL,
            GucContext::Suset,
            GucFlags::default(),
            Some(check_storage_url),
            None,
            None,
        );
    }
    GucRegistry::define_string_guc(
        c"milvus.allowed_storage_urls",
        c"Storage locations that index owners who are not superusers may name in an index's storage_url option.",
        c"A comma-separated list of URL prefixes, e.g. 's3://shared-bucket/milvus, file:///srv/milvus'; a storage_url \
            must equal one or lie below it. Empty (the default): only superusers choose where an index is stored. \
            Never a directory inside the data directory. Superuser only.",
        &ALLOWED_STORAGE_URLS,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"milvus.storage_timeout",
        c"Seconds one object storage request may take before it fails (and is retried).",
        c"S3 only; local directories are not timed. A request is tried up to 4 times. Range 1 to 3600; default 30. \
            Superuser only.",
        &STORAGE_TIMEOUT_S,
        1,
        3600,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_string_guc(
        c"milvus.cache_dir",
        c"Local directory where downloaded segments are cached.",
        c"Empty (the default) means <data directory>/pg_milvus/pgsql_tmp_cache, which base backups leave out. \
            Superuser only.",
        &CACHE_DIR,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"milvus.cache_size",
        c"Bound of the local segment cache.",
        c"Least recently used segments are evicted beyond it. A size with its unit ('16GB', '512MB'), a bare \
            number in megabytes; 16MB to 2147483647MB, default 1GB.",
        &CACHE_SIZE_MB,
        16,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_MB,
    );
    // S3 settings: superuser-only, and the credentials hidden from everyone
    // else (not in SHOW, pg_settings or current_setting for other users).
    let hidden = GucFlags::SUPERUSER_ONLY | GucFlags::NO_SHOW_ALL;
    for (name, short, setting, flags) in [
        (
            c"milvus.s3_endpoint",
            c"S3 endpoint URL, e.g. http://127.0.0.1:9000 (empty: AWS_ENDPOINT or AWS itself).",
            &S3_ENDPOINT,
            GucFlags::default(),
        ),
        (c"milvus.s3_region", c"S3 region (empty: AWS_REGION, else us-east-1).", &S3_REGION, GucFlags::default()),
        (
            c"milvus.s3_access_key_id",
            c"S3 access key id (empty: AWS_ACCESS_KEY_ID). Superuser only, never shown to others.",
            &S3_ACCESS_KEY_ID,
            hidden,
        ),
        (
            c"milvus.s3_secret_access_key",
            c"S3 secret access key (empty: AWS_SECRET_ACCESS_KEY). Superuser only, never shown to others.",
            &S3_SECRET_ACCESS_KEY,
            hidden,
        ),
        (
            c"milvus.s3_session_token",
            c"S3 session token (empty: AWS_SESSION_TOKEN). Superuser only, never shown to others.",
            &S3_SESSION_TOKEN,
            hidden,
        ),
    ] {
        GucRegistry::define_string_guc(name, short, c"Used for s3:// storage URLs.", setting, GucContext::Suset, flags);
    }
    GucRegistry::define_bool_guc(
        c"milvus.s3_allow_http",
        c"Allow plain HTTP to the S3 endpoint (local S3-compatible servers).",
        c"Default off.",
        &S3_ALLOW_HTTP,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"milvus.s3_path_style",
        c"Path-style S3 requests (endpoint/bucket/key), as MinIO and moto want.",
        c"Default off (virtual-hosted style).",
        &S3_PATH_STYLE,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"milvus.compaction_delete_ratio",
        c"Deleted fraction of a flushed segment at which compaction rewrites it.",
        c"Range 0.01 to 1.0; default 0.2, Milvus' value.",
        &COMPACTION_DELETE_RATIO,
        0.01,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"milvus.maintenance_nice",
        c"Nice value of the threads that flush and merge segments (their graph builds).",
        c"They then yield the CPU to queries and inserts when both want it, and take all of it when they are alone. \
            Range 0 (the backend's priority) to 19; default 10.",
        &MAINTENANCE_NICE,
        0,
        19,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"milvus.gc_grace_period",
        c"Seconds garbage collection keeps an object after it stopped being referenced.",
        c"Counted from the compaction that dropped its segment: queries that started before it, copies of the index \
            and restores to a point in that window still find its objects. Range 0 to 2147483647; default 3600. \
            Superuser only.",
        &GC_GRACE_PERIOD_S,
        0,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"milvus.naptime",
        c"Seconds between two visits of the background workers to each database.",
        c"Range 1 to 86400; default 10. milvus_flush(wait => false) wakes them at once.",
        &NAPTIME_S,
        1,
        86_400,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"milvus.seal_idle_time",
        c"Seconds without inserts after which the workers seal a growing segment.",
        c"Range 0 to 2147483647, 0 to never seal by idle time; default 600, Milvus' value.",
        &SEAL_IDLE_TIME_S,
        0,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"milvus.seal_lifetime",
        c"Seconds after its creation at which the workers seal a growing segment, inserts or not.",
        c"Growing rows are searched by brute force; this bounds how long they stay so. Range 0 to 2147483647, 0 for no \
            limit; default 3600.",
        &SEAL_LIFETIME_S,
        0,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"milvus.gc_interval",
        c"Seconds between two garbage collections of a database by the background workers.",
        c"Range 1 to 2147483647; default 600. What is deleted is still bounded by milvus.gc_grace_period.",
        &GC_INTERVAL_S,
        1,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    // The crash tests' pause points (`crate::pause`) exist in debug builds
    // only, the ones the test tiers install: a release build has neither
    // setting, so `SHOW ALL` never lists a test hook.
    if cfg!(debug_assertions) {
        GucRegistry::define_int_guc(
            c"milvus.debug_pause",
            c"Test hook: milliseconds a job waits at the point milvus.debug_pause_at names.",
            c"For crash tests only (kill -9 inside that window). Range 0 to 600000; default 0 (no pause). Superuser only.",
            &DEBUG_PAUSE_MS,
            0,
            600_000,
            GucContext::Suset,
            GucFlags::default(),
        );
        GucRegistry::define_enum_guc(
            c"milvus.debug_pause_at",
            c"Test hook: where milvus.debug_pause holds a job.",
            c"commit (a flush or compaction between its upload and its manifest commit; the default), build (a flush \
                about to build its segment's graph), upload (a flush between its insert binlog and its index file), \
                release (a flush committed, its pages not yet emptied), insert (a row's page write in WAL, its \
                transaction not committed), gc (garbage collection after its first deletion), merge (a compaction \
                about to write its output), restore (a restore from the index's pages after its first file), free (a \
                manifest commit after freeing the first page of a dropped object's chain). Superuser only.",
            &DEBUG_PAUSE_AT,
            GucContext::Suset,
            GucFlags::default(),
        );
    }
    // SAFETY: called once from _PG_init, in the postmaster or a backend.
    unsafe { pgrx::pg_sys::MarkGUCPrefixReserved(PREFIX.as_ptr()) };
}

const PREFIX: &CStr = c"milvus";

pub fn ef_search() -> usize {
    EF_SEARCH.get() as usize
}

pub fn max_scan_tuples() -> usize {
    MAX_SCAN_TUPLES.get() as usize
}

/// `milvus.iterative_scan`, pgvector's names for the core's modes.
#[derive(pgrx::PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum IterativeScan {
    #[name = c"off"]
    Off,
    #[name = c"relaxed_order"]
    RelaxedOrder,
    #[name = c"strict_order"]
    StrictOrder,
}

pub fn iterative_scan() -> milvus_core::search::IterativeScan {
    match ITERATIVE_SCAN.get() {
        IterativeScan::Off => milvus_core::search::IterativeScan::Off,
        IterativeScan::RelaxedOrder => milvus_core::search::IterativeScan::Relaxed,
        IterativeScan::StrictOrder => milvus_core::search::IterativeScan::Strict,
    }
}

/// The data directory, where the embedded defaults live.
pub fn data_dir() -> String {
    // SAFETY: DataDir is set before any backend runs SQL.
    unsafe { CStr::from_ptr(pgrx::pg_sys::DataDir).to_string_lossy().into_owned() }
}

fn non_empty(s: Option<CString>) -> Option<String> {
    s.map(|c| c.to_string_lossy().into_owned()).filter(|s| !s.is_empty())
}

/// Refuses a malformed `milvus.storage_url` when it is set, by its form only
/// (no I/O: a bucket may be created after the setting).
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn check_storage_url(
    newval: *mut *mut std::ffi::c_char,
    _extra: *mut *mut std::ffi::c_void,
    _source: pgrx::pg_sys::GucSource::Type,
) -> bool {
    // SAFETY: Postgres passes the candidate value, NULL or a C string.
    let value =
        unsafe { newval.as_ref().filter(|v| !v.is_null()).map(|v| CStr::from_ptr(*v).to_string_lossy().into_owned()) };
    let checked = value.filter(|v| !v.is_empty()).map(|v| {
        milvus_core::storage::StorageUrl::parse(&v).map_err(|e| e.to_string())?;
        check_outside_data_dir(&v).map_err(|(message, detail)| format!("{message}. {detail}"))
    });
    match checked {
        None | Some(Ok(())) => true,
        Some(Err(e)) => {
            let detail = CString::new(e).unwrap_or_default();
            // SAFETY: GUC_check_errdetail: a palloc'd string Postgres reports
            // as the DETAIL of its "invalid value" error.
            unsafe { pgrx::pg_sys::GUC_check_errdetail_string = pgrx::pg_sys::pstrdup(detail.as_ptr()) };
            false
        }
    }
}

/// Refuses a `file://` URL inside the data directory (objects written
/// there could overwrite the server's own files), but for the embedded
/// default itself. `Err((message, detail))`; any other URL passes.
pub fn check_outside_data_dir(url: &str) -> Result<(), (String, String)> {
    // SAFETY: DataDir is set before any setting of the library is checked
    // in a backend; early in the postmaster it may not be yet.
    if unsafe { pgrx::pg_sys::DataDir.is_null() } {
        return Ok(());
    }
    let data_dir = data_dir();
    if location::is_inside_data_dir(url, std::path::Path::new(&data_dir), &default_storage_url()) {
        return Err((
            format!("storage location \"{url}\" is inside the data directory"),
            "Objects there could overwrite the server's own files; choose a directory outside the data directory."
                .to_owned(),
        ));
    }
    Ok(())
}

/// `milvus.allowed_storage_urls`, as set (a comma-separated list).
pub fn allowed_storage_urls() -> String {
    non_empty(ALLOWED_STORAGE_URLS.get()).unwrap_or_default()
}

pub fn storage_timeout() -> std::time::Duration {
    std::time::Duration::from_secs(STORAGE_TIMEOUT_S.get() as u64)
}

/// `milvus.storage_url` if set: where new indexes put their objects.
pub fn storage_url_setting() -> Option<String> {
    non_empty(STORAGE_URL.get())
}

/// The embedded default location, inside the data directory (an index
/// whose manifest names no URL lives there).
pub fn default_storage_url() -> String {
    format!("file://{}/pg_milvus/objects", data_dir())
}

/// The embedded default cache directory, relative to the data directory.
/// Its name begins with `pgsql_tmp`, which pg_basebackup leaves out of a
/// backup as Postgres' own temporary files: it holds only copies of
/// objects (and files derived from them) that any server rebuilds from
/// object storage, so a backup or a new standby does not carry them.
pub const DEFAULT_CACHE_DIR: &str = "pg_milvus/pgsql_tmp_cache";

/// Where 0.2 and before kept the cache by default: in base backups, with
/// names too long for tar. Removed when the default cache is opened.
pub const OLD_DEFAULT_CACHE_DIR: &str = "pg_milvus/cache";

/// The cache directory and, for the embedded default, how messages name
/// it (relative to the data directory, as Postgres names its own files).
pub fn cache_dir() -> (String, Option<&'static str>) {
    match non_empty(CACHE_DIR.get()) {
        Some(dir) => (dir, None),
        None => (format!("{}/{DEFAULT_CACHE_DIR}", data_dir()), Some(DEFAULT_CACHE_DIR)),
    }
}

/// The file listing every storage URL an index was built with: GC looks
/// there for the objects of dropped indexes (their manifests are gone, and
/// with them the URL). One URL per line, appended, never shrunk.
pub fn locations_file() -> String {
    format!("{}/pg_milvus/locations", data_dir())
}

pub fn cache_size_bytes() -> u64 {
    CACHE_SIZE_MB.get() as u64 * 1024 * 1024
}

/// Where `milvus.debug_pause` holds a job (see `crate::pause`).
#[derive(pgrx::PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum PausePoint {
    #[name = c"commit"]
    Commit,
    #[name = c"upload"]
    Upload,
    #[name = c"release"]
    Release,
    #[name = c"insert"]
    Insert,
    #[name = c"gc"]
    Gc,
    #[name = c"build"]
    Build,
    #[name = c"merge"]
    Merge,
    #[name = c"restore"]
    Restore,
    #[name = c"free"]
    Free,
}

/// The pause to make at `point`, if the settings ask for one there.
pub fn debug_pause(point: PausePoint) -> Option<std::time::Duration> {
    let ms = DEBUG_PAUSE_MS.get();
    (ms > 0 && DEBUG_PAUSE_AT.get() == point).then(|| std::time::Duration::from_millis(ms as u64))
}

pub fn compaction_delete_ratio() -> f64 {
    COMPACTION_DELETE_RATIO.get()
}

pub fn gc_grace_period() -> std::time::Duration {
    std::time::Duration::from_secs(GC_GRACE_PERIOD_S.get() as u64)
}

/// The nice value of flush and merge threads (`milvus.maintenance_nice`).
pub fn maintenance_nice() -> i32 {
    MAINTENANCE_NICE.get()
}

pub fn max_workers() -> usize {
    MAX_WORKERS.get() as usize
}

pub fn naptime() -> std::time::Duration {
    std::time::Duration::from_secs(NAPTIME_S.get() as u64)
}

/// The workers' seal policy for an index whose segments hold `max_rows`.
/// The workers' seal policy: an index's size rule (`milvus_core::pages::growing::size_rule`),
/// with the time rules of `milvus.seal_idle_time` and `milvus.seal_lifetime`.
pub fn seal_policy(size: milvus_core::policy::seal::SealPolicy) -> milvus_core::policy::seal::SealPolicy {
    let secs = |s: &GucSetting<i32>| Some(s.get() as u64).filter(|s| *s > 0);
    milvus_core::policy::seal::SealPolicy {
        idle_secs: secs(&SEAL_IDLE_TIME_S),
        lifetime_secs: secs(&SEAL_LIFETIME_S),
        ..size
    }
}

pub fn gc_interval() -> std::time::Duration {
    std::time::Duration::from_secs(GC_INTERVAL_S.get() as u64)
}

/// The S3 settings; unset ones fall back to the server's AWS environment.
pub fn s3_options() -> milvus_core::storage::S3Options {
    milvus_core::storage::S3Options {
        endpoint: non_empty(S3_ENDPOINT.get()),
        region: non_empty(S3_REGION.get()),
        access_key_id: non_empty(S3_ACCESS_KEY_ID.get()),
        secret_access_key: non_empty(S3_SECRET_ACCESS_KEY.get()),
        session_token: non_empty(S3_SESSION_TOKEN.get()),
        allow_http: S3_ALLOW_HTTP.get().then_some(true),
        path_style: S3_PATH_STYLE.get().then_some(true),
    }
}
