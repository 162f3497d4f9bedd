//! `milvus_recall(query)`: the recall a query gets from a milvus index on
//! the caller's own data, so `milvus.ef_search` can be tuned without a
//! harness outside the database.
//!
//! The query runs twice in one snapshot: once planned with sequential scans
//! disabled, so a milvus index answers it (checked: a milvus scan must have
//! started), and once with index scans disabled, so a sequential scan and a
//! sort answer it exactly (checked: no milvus scan started). Both passes see
//! the same rows and apply the same filter; the recall is the fraction of
//! the exact answer's rows the index's answer holds.

use std::ffi::CStr;

use milvus_core::search::recall;
use pgrx::prelude::*;

use crate::am::scan;
use crate::error::raise;

/// The recall of `query`'s answer through a milvus index against the exact
/// answer: a query of the form `SELECT id FROM items [WHERE ...] ORDER BY
/// embedding <-> '[...]' LIMIT 10`, measured at the session's settings
/// (`milvus.ef_search`, `milvus.iterative_scan`). Rows are compared whole,
/// as text, so the query should select what identifies a row (a key or
/// `ctid`). NULL when the exact answer has no rows.
#[pg_extern(sql = "
CREATE FUNCTION milvus_recall(query text)
    RETURNS real
    VOLATILE PARALLEL UNSAFE STRICT LANGUAGE c AS 'MODULE_PATHNAME', '@FUNCTION_NAME@';
COMMENT ON FUNCTION milvus_recall(text) IS 'recall of a query answered by a milvus index, against an exact scan of the same rows';
")]
fn milvus_recall(query: &str) -> Option<f32> {
    if !is_one_select(query) {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "milvus_recall measures one SELECT statement".into(),
            None,
            Some(
                "For example: SELECT milvus_recall($$SELECT id FROM items ORDER BY embedding <-> '[1,2,3]' LIMIT 10$$)",
            ),
        );
    }
    // Rows compare as their text forms.
    let query = query.trim().trim_end_matches(';');
    let rows =
        std::ffi::CString::new(format!("SELECT q::pg_catalog.text FROM (\n{query}\n) q")).expect("text holds no NUL");

    let started = scan::scans_started();
    let approximate = with_settings(&[(c"enable_seqscan", c"off")], || answer(&rows));
    if scan::scans_started() == started {
        raise(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            "the query was not answered by a milvus index".into(),
            None,
            Some(
                "Measure a query of the form SELECT id FROM items ORDER BY embedding <-> '[...]' LIMIT 10 over a \
                 column with a milvus index; EXPLAIN shows which plan it gets.",
            ),
        );
    }
    let started = scan::scans_started();
    let exact = with_settings(&[(c"enable_indexscan", c"off"), (c"enable_indexonlyscan", c"off")], || answer(&rows));
    if scan::scans_started() != started {
        raise(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            "the query cannot be answered without a milvus index, so there is no exact answer to compare with".into(),
            None,
            None,
        );
    }
    recall(&approximate, &exact).map(|r| r as f32)
}

/// Whether `query` parses as exactly one SELECT (a syntax error is raised
/// as it is).
fn is_one_select(query: &str) -> bool {
    let query = std::ffi::CString::new(query).expect("text holds no NUL");
    // SAFETY: the raw parser on the main thread, over a NUL-terminated
    // string; it returns a list of RawStmt nodes (NIL, a null pointer, for
    // an empty string), allocated in the current memory context.
    unsafe {
        let statements = pg_sys::raw_parser(query.as_ptr(), pg_sys::RawParseMode::RAW_PARSE_DEFAULT);
        if statements.is_null() || (*statements).length != 1 {
            return false;
        }
        let raw = (*(*statements).elements).ptr_value.cast::<pg_sys::RawStmt>();
        (*(*raw).stmt).type_ == pg_sys::NodeTag::T_SelectStmt
    }
}

/// The rows `query` returns, each as its text form. It runs read-only (a
/// data-modifying `WITH` is refused) in the calling statement's snapshot,
/// so both passes see the same rows.
fn answer(query: &CStr) -> Vec<String> {
    Spi::connect(|_| {
        // SAFETY: SPI is connected for this closure, on the main thread; the
        // tuple table and the strings SPI_getvalue returns live in SPI's
        // memory context until Spi::connect finishes, after they are copied.
        unsafe {
            let status = pg_sys::SPI_execute(query.as_ptr(), true, 0);
            if status != pg_sys::SPI_OK_SELECT as i32 {
                crate::error::raise(
                    PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                    format!("milvus_recall: the query ended with SPI status {status}, not a SELECT's"),
                    None,
                    Some("Pass one SELECT ... ORDER BY <distance> LIMIT k."),
                );
            }
            let table = pg_sys::SPI_tuptable;
            (0..pg_sys::SPI_processed as usize)
                .map(|i| {
                    let value = pg_sys::SPI_getvalue(*(*table).vals.add(i), (*table).tupdesc, 1);
                    if value.is_null() { String::new() } else { CStr::from_ptr(value).to_string_lossy().into_owned() }
                })
                .collect()
        }
    })
}

/// Runs `f` with the planner settings `settings`, put back as they were
/// afterwards (as a function's `SET` clause does); an error in `f` puts them
/// back with the (sub)transaction it aborts.
fn with_settings<R>(settings: &[(&CStr, &CStr)], f: impl FnOnce() -> R) -> R {
    // SAFETY: GUC calls on the main thread, inside a transaction; the nest
    // level opened here is closed below or by the abort of the transaction.
    let nest = unsafe { pg_sys::NewGUCNestLevel() };
    for (name, value) in settings {
        // SAFETY: as above; both are NUL-terminated constants.
        unsafe {
            pg_sys::set_config_option(
                name.as_ptr(),
                value.as_ptr(),
                pg_sys::GucContext::PGC_USERSET,
                pg_sys::GucSource::PGC_S_SESSION,
                pg_sys::GucAction::GUC_ACTION_SAVE,
                true,
                PgLogLevel::ERROR as i32,
                false,
            );
        }
    }
    let result = f();
    // SAFETY: as above; closes the level opened here, restoring the values.
    unsafe { pg_sys::AtEOXact_GUC(true, nest) };
    result
}
