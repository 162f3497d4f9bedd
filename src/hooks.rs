//! Two things an index access method cannot say through its callbacks, said
//! through hooks Postgres offers every extension:
//!
//! - **EXPLAIN (ANALYZE)**: Postgres 15 has no per-node hook for an index
//!   AM, so the `ExplainOneQuery` hook runs the standard EXPLAIN and then
//!   adds one `Milvus Scan` line per milvus index the statement scanned:
//!   scans, flushed segments searched and loaded, rows read from pages,
//!   approximate rounds, exact tails, rows offered (`am::explain`).
//!   Text format only: the other formats close their document before the
//!   hook gets control back.
//! - **ALTER INDEX ... SET (...)** on a milvus index: a NOTICE saying when
//!   each option takes effect (`m`, `ef_construction` and `quantization`
//!   for segments built from now on, `storage_url` at the next REINDEX, `segment_max_rows` and
//!   `growing_max_rows` at once), from the `ProcessUtility` hook after the
//!   command succeeded.
//! - **CREATE EXTENSION vector** where pg_milvus' types are, or **CREATE
//!   EXTENSION pg_milvus** where pgvector's are: refused before the script
//!   runs, with Postgres' own message (`type "vector" already exists`) and
//!   a HINT naming the two set-ups that work.
//!
//! Errors raised by the statement pass through the hooks untouched (see the
//! declarations below). Both are installed by `_PG_init`, so they act in every backend when the
//! library is preloaded, and otherwise once the backend has loaded it.

use std::ffi::{CStr, c_char, c_void};

use pgrx::prelude::*;

use crate::am::explain;

static mut PREVIOUS_EXPLAIN: pg_sys::ExplainOneQuery_hook_type = None;
static mut PREVIOUS_UTILITY: pg_sys::ProcessUtility_hook_type = None;

/// Installs the hooks, keeping whatever was installed before.
pub fn init() {
    // SAFETY: _PG_init runs once per process, before any query.
    unsafe {
        PREVIOUS_EXPLAIN = pg_sys::ExplainOneQuery_hook;
        pg_sys::ExplainOneQuery_hook = Some(explain_one_query);
        PREVIOUS_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(process_utility);
    }
}

/// The pointers of a `List` of pointers.
unsafe fn list_pointers(list: *mut pg_sys::List) -> Vec<*mut c_void> {
    if list.is_null() {
        return Vec::new();
    }
    // SAFETY: a valid List; each cell of a pointer list holds ptr_value.
    unsafe { (0..(*list).length as usize).map(|i| (*(*list).elements.add(i)).ptr_value).collect() }
}

// Postgres' functions the hooks call on the standard path, declared here
// rather than through pg_sys: pgrx's wrappers catch a Postgres error and
// raise it again, which drops part of it (the cursor position of a syntax
// or type error, `LINE 1: ... ^`). Called this way, an error passes over
// the hook as if it were not there. So the hooks keep nothing that needs
// dropping in their frames across these calls (what they need afterwards
// waits in thread-locals).
unsafe extern "C-unwind" {
    #[link_name = "standard_ProcessUtility"]
    fn raw_standard_process_utility(
        statement: *mut pg_sys::PlannedStmt,
        query_string: *const c_char,
        read_only_tree: bool,
        context: pg_sys::ProcessUtilityContext::Type,
        params: pg_sys::ParamListInfo,
        query_env: *mut pg_sys::QueryEnvironment,
        dest: *mut pg_sys::DestReceiver,
        completion: *mut pg_sys::QueryCompletion,
    );
    #[cfg(feature = "pg18")]
    #[link_name = "standard_ExplainOneQuery"]
    fn raw_standard_explain_one_query(
        query: *mut pg_sys::Query,
        cursor_options: i32,
        into: *mut pg_sys::IntoClause,
        es: *mut pg_sys::ExplainState,
        query_string: *const c_char,
        params: pg_sys::ParamListInfo,
        query_env: *mut pg_sys::QueryEnvironment,
    );
    #[cfg(feature = "pg15")]
    #[link_name = "pg_plan_query"]
    fn raw_pg_plan_query(
        query: *mut pg_sys::Query,
        query_string: *const c_char,
        cursor_options: i32,
        params: pg_sys::ParamListInfo,
    ) -> *mut pg_sys::PlannedStmt;
    #[cfg(feature = "pg15")]
    #[link_name = "ExplainOnePlan"]
    fn raw_explain_one_plan(
        plan: *mut pg_sys::PlannedStmt,
        into: *mut pg_sys::IntoClause,
        es: *mut pg_sys::ExplainState,
        query_string: *const c_char,
        params: pg_sys::ParamListInfo,
        query_env: *mut pg_sys::QueryEnvironment,
        planning: *const pg_sys::instr_time,
        buffers: *const pg_sys::BufferUsage,
    );
}

thread_local! {
    /// The options an ALTER INDEX in progress sets, for its notice.
    static ALTERED: std::cell::RefCell<Option<(pg_sys::RangeVar, Vec<String>)>> =
        const { std::cell::RefCell::new(None) };
}

/// EXPLAIN of one query: the standard planning and EXPLAIN (or the hook
/// installed before ours), then the milvus scans' reports.
#[pg_guard]
unsafe extern "C-unwind" fn explain_one_query(
    query: *mut pg_sys::Query,
    cursor_options: i32,
    into: *mut pg_sys::IntoClause,
    es: *mut pg_sys::ExplainState,
    query_string: *const c_char,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
) {
    // SAFETY: Postgres calls the hook on the main thread with a valid
    // ExplainState; the arguments go on to the previous hook unchanged.
    unsafe {
        explain::start_collecting((*es).analyze);
        match PREVIOUS_EXPLAIN {
            Some(previous) => previous(query, cursor_options, into, es, query_string, params, query_env),
            // PostgreSQL 17 on has the standard path as a function.
            #[cfg(feature = "pg18")]
            None => raw_standard_explain_one_query(query, cursor_options, into, es, query_string, params, query_env),
            #[cfg(feature = "pg15")]
            None => {
                // What ExplainOneQuery does without a hook: plan, timing the
                // planning and counting its buffers, then ExplainOnePlan.
                // Nothing here needs dropping (see the declarations above).
                let buffers = (*es).buffers;
                let buffers_before = pg_sys::pgBufferUsage;
                let started = std::time::Instant::now();
                let plan = raw_pg_plan_query(query, query_string, cursor_options, params);
                let took = started.elapsed();
                let planning = pg_sys::instr_time { tv_sec: took.as_secs() as _, tv_nsec: took.subsec_nanos() as _ };
                let mut used: pg_sys::BufferUsage = std::mem::zeroed();
                if buffers {
                    pg_sys::BufferUsageAccumDiff(&mut used, &raw const pg_sys::pgBufferUsage, &buffers_before);
                }
                let used_ptr = if buffers { &raw const used } else { std::ptr::null() };
                raw_explain_one_plan(plan, into, es, query_string, params, query_env, &planning, used_ptr);
            }
        }
        print_reports(es);
    }
}

/// The `Milvus Scan` lines of the statement just explained (text format).
unsafe fn print_reports(es: *mut pg_sys::ExplainState) {
    let reports = explain::finish_collecting();
    // SAFETY: the ExplainState of the running EXPLAIN.
    unsafe {
        if (*es).format == pg_sys::ExplainFormat::EXPLAIN_FORMAT_TEXT {
            for report in reports {
                let line = std::ffi::CString::new(report).unwrap_or_default();
                pg_sys::ExplainPropertyText(c"Milvus Scan".as_ptr(), line.as_ptr(), es);
            }
        }
    }
}

/// Utility statements: a type clash between pg_milvus and pgvector refused,
/// then the standard processing (or the hook installed before ours), then
/// the notice an `ALTER INDEX ... SET` of milvus options deserves.
#[pg_guard]
#[allow(clippy::too_many_arguments)] // Postgres' signature
unsafe extern "C-unwind" fn process_utility(
    statement: *mut pg_sys::PlannedStmt,
    query_string: *const c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    completion: *mut pg_sys::QueryCompletion,
) {
    // SAFETY: Postgres calls the hook on the main thread with a valid
    // statement; the arguments go on to the previous hook unchanged.
    unsafe {
        refuse_type_clash(statement);
        // Read before running: the command may scribble on its tree.
        let altered = altered_index_options(statement);
        ALTERED.with_borrow_mut(|a| *a = altered);
        match PREVIOUS_UTILITY {
            Some(previous) => {
                previous(statement, query_string, read_only_tree, context, params, query_env, dest, completion)
            }
            None => raw_standard_process_utility(
                statement,
                query_string,
                read_only_tree,
                context,
                params,
                query_env,
                dest,
                completion,
            ),
        }
        if let Some((relation, options)) = ALTERED.with_borrow_mut(Option::take) {
            notice_option_changes(relation, &options);
        }
    }
}

/// `CREATE EXTENSION vector` where pg_milvus' types already are, or
/// `CREATE EXTENSION pg_milvus` where pgvector's are: both define types
/// named `vector`, `halfvec` and `sparsevec`. Refused before the script
/// runs with the error Postgres would raise, `type "vector" already
/// exists`, and the two ways that work.
///
/// # Safety
/// `statement` is the planned utility statement the hook was given, on the
/// main thread inside a transaction.
unsafe fn refuse_type_clash(statement: *mut pg_sys::PlannedStmt) {
    // SAFETY: the caller's; each node is read only after its tag says what
    // it is.
    let (creating, schema) = unsafe {
        let node = (*statement).utilityStmt;
        if node.is_null() || (*node).type_ != pg_sys::NodeTag::T_CreateExtensionStmt {
            return;
        }
        let create = node.cast::<pg_sys::CreateExtensionStmt>();
        let creating = CStr::from_ptr((*create).extname).to_string_lossy().into_owned();
        let schema = list_pointers((*create).options)
            .into_iter()
            .map(|o| o.cast::<pg_sys::DefElem>())
            .find(|o| CStr::from_ptr((**o).defname).to_bytes() == b"schema")
            .map(|o| CStr::from_ptr(pg_sys::defGetString(o)).to_string_lossy().into_owned());
        (creating, schema)
    };
    let holder = match creating.as_str() {
        "vector" => "pg_milvus",
        "pg_milvus" => "vector",
        _ => return,
    };
    // An extension already there is Postgres' to report (or to skip, for
    // IF NOT EXISTS).
    let name = std::ffi::CString::new(creating).expect("a name from the parser has no NUL");
    // SAFETY: a catalog lookup on the main thread, in the transaction.
    if unsafe { pg_sys::get_extension_oid(name.as_ptr(), true) } != pg_sys::InvalidOid {
        return;
    }
    // Where the new extension's types would go: its SCHEMA, else the
    // first schema of the search path, as CREATE EXTENSION decides.
    let clash = Spi::get_two_with_args::<String, String>(
        "SELECT t.typname::text, n.nspname::text
           FROM pg_type t
           JOIN pg_namespace n ON n.oid = t.typnamespace
           JOIN pg_depend d ON d.classid = 'pg_type'::regclass AND d.objid = t.oid AND d.deptype = 'e'
           JOIN pg_extension e ON e.oid = d.refobjid
          WHERE e.extname = $1 AND t.typname IN ('vector', 'halfvec', 'sparsevec')
            AND n.nspname = coalesce($2, current_schema())
          ORDER BY t.typname = 'vector' DESC, t.typname
          LIMIT 1",
        &[holder.into(), schema.into()],
    );
    let Ok((Some(type_name), Some(schema))) = clash else {
        return;
    };
    let (detail, hint) = if holder == "pg_milvus" {
        (
            format!(
                "Extension \"pg_milvus\" has it in schema \"{schema}\": it provides pgvector's types, functions and \
                 operators itself."
            ),
            "Use pg_milvus alone (pgvector's clients work unchanged with it), or give pg_milvus a schema of its own \
             (CREATE EXTENSION pg_milvus SCHEMA milvus) and add pg_milvus_pgvector beside pgvector: docs/usage.md, \
             \"Coming from pgvector\".",
        )
    } else {
        (
            format!("Extension \"vector\" (pgvector) has it in schema \"{schema}\"."),
            "Give pg_milvus a schema of its own (CREATE SCHEMA milvus; CREATE EXTENSION pg_milvus SCHEMA milvus) and \
             add pg_milvus_pgvector for milvus indexes on pgvector's columns: docs/usage.md, \"Coming from pgvector\".",
        )
    };
    crate::error::raise(
        PgSqlErrorCode::ERRCODE_DUPLICATE_OBJECT,
        format!("type \"{type_name}\" already exists"),
        Some(&detail),
        Some(hint),
    );
}

/// For `ALTER INDEX name SET (...)`: the index and the option names set.
///
/// # Safety
/// `statement` is the planned utility statement the hook was given.
unsafe fn altered_index_options(statement: *mut pg_sys::PlannedStmt) -> Option<(pg_sys::RangeVar, Vec<String>)> {
    // SAFETY: the caller's; each node is read only after its tag says
    // what it is.
    unsafe {
        let node = (*statement).utilityStmt;
        if node.is_null() || (*node).type_ != pg_sys::NodeTag::T_AlterTableStmt {
            return None;
        }
        let alter = node.cast::<pg_sys::AlterTableStmt>();
        if (*alter).objtype != pg_sys::ObjectType::OBJECT_INDEX || (*alter).relation.is_null() {
            return None;
        }
        let mut names = Vec::new();
        for cmd in list_pointers((*alter).cmds).into_iter().map(|c| c.cast::<pg_sys::AlterTableCmd>()) {
            if (*cmd).subtype == pg_sys::AlterTableType::AT_SetRelOptions {
                for elem in list_pointers((*cmd).def.cast()).into_iter().map(|e| e.cast::<pg_sys::DefElem>()) {
                    names.push(CStr::from_ptr((*elem).defname).to_string_lossy().into_owned());
                }
            }
        }
        (!names.is_empty()).then(|| (*(*alter).relation, names))
    }
}

/// The NOTICE for options set on a milvus index: when each takes effect.
///
/// # Safety
/// On the main thread, after the ALTER INDEX ran.
unsafe fn notice_option_changes(relation: pg_sys::RangeVar, options: &[String]) {
    // SAFETY: the caller's; the relation is looked up without a lock and
    // opened only if it exists.
    unsafe {
        let oid = pg_sys::RangeVarGetRelidExtended(
            &relation,
            pg_sys::NoLock as i32,
            pg_sys::RVROption::RVR_MISSING_OK,
            None,
            std::ptr::null_mut(),
        );
        if oid == pg_sys::InvalidOid {
            return;
        }
        // The ALTER holds its lock on the index to the end of the transaction.
        let rel = pg_sys::relation_open(oid, pg_sys::AccessShareLock as i32);
        let am = pg_sys::get_am_name((*(*rel).rd_rel).relam);
        pg_sys::relation_close(rel, pg_sys::AccessShareLock as i32);
        if am.is_null() || CStr::from_ptr(am).to_bytes() != b"milvus" {
            return;
        }
        let set = |name: &str| options.iter().any(|o| o == name);
        let mut said = Vec::new();
        if set("m") || set("ef_construction") || set("quantization") {
            said.push(
                "m, ef_construction and quantization apply to the segments flushed or compacted from now on; \
                REINDEX rebuilds the existing ones with them",
            );
        }
        if set("storage_url") {
            said.push(
                "storage_url takes effect at the next REINDEX; until then the index's objects stay where they are",
            );
        }
        if set("segment_max_rows") || set("growing_max_rows") {
            said.push(
                "segment_max_rows and growing_max_rows apply at once: to the growing segment and to the next merges",
            );
        }
        if !said.is_empty() {
            notice!("{}", said.join("; "));
        }
    }
}
