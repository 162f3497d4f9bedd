//! Turning the core's errors into Postgres errors.
//!
//! The core never calls Postgres; it returns typed errors. This is the one
//! place that raises them, with the SQLSTATE, message and detail the core
//! chose, so every error a user sees reads the same way.

use milvus_core::error::{REINDEX_HINT, SqlError, SqlState};
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

/// Postgres' code for each of the core's SQLSTATEs.
fn code(state: SqlState) -> PgSqlErrorCode {
    match state {
        SqlState::InvalidTextRepresentation => PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
        SqlState::ProgramLimitExceeded => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        SqlState::DataException => PgSqlErrorCode::ERRCODE_DATA_EXCEPTION,
        SqlState::InvalidBinaryRepresentation => PgSqlErrorCode::ERRCODE_INVALID_BINARY_REPRESENTATION,
        SqlState::NumericValueOutOfRange => PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        SqlState::InvalidParameterValue => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        SqlState::IoError => PgSqlErrorCode::ERRCODE_IO_ERROR,
        SqlState::IndexCorrupted => PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED,
        SqlState::QueryCanceled => PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
        SqlState::InternalError => PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
    }
}

/// Raises `err` as an `ERROR`, with its SQLSTATE, DETAIL and HINT; never
/// returns.
pub fn raise_error(err: &(impl SqlError + ?Sized)) -> ! {
    raise_error_for("vector", err)
}

/// The same, a value error naming the SQL type `type_name`.
fn raise_error_for(type_name: &str, err: &(impl SqlError + ?Sized)) -> ! {
    raise(code(err.sqlstate()), err.message_for(type_name), err.detail().as_deref(), err.hint())
}

/// The same at `level` below ERROR (a WARNING that the work goes on
/// without what failed).
pub fn report_error(level: PgLogLevel, err: &(impl SqlError + ?Sized)) {
    report(level, code(err.sqlstate()), err.to_string(), err.detail().as_deref(), err.hint());
}

/// Raises an `ERROR` of `code` with its message, and a DETAIL and a HINT
/// where there is more to say; never returns. Every error the extension
/// raises with a SQLSTATE of its choosing goes through here.
pub fn raise(code: PgSqlErrorCode, message: String, detail: Option<&str>, hint: Option<&str>) -> ! {
    report(PgLogLevel::ERROR, code, message, detail, hint);
    unreachable!("ERROR does not return")
}

/// Reports a NOTICE, with its DETAIL and HINT.
pub fn notice(message: String, detail: &str, hint: &str) {
    report(PgLogLevel::NOTICE, PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION, message, Some(detail), Some(hint))
}

fn report(level: PgLogLevel, code: PgSqlErrorCode, message: String, detail: Option<&str>, hint: Option<&str>) {
    let mut report = ErrorReport::new(code, message, "pg_milvus");
    if let Some(detail) = detail {
        report = report.set_detail(detail);
    }
    if let Some(hint) = hint {
        report = report.set_hint(hint);
    }
    report.report(level);
}

/// Unwraps a core result, raising its error in Postgres: any error of the
/// core, each with its own SQLSTATE.
pub trait OrRaise<T> {
    fn or_raise(self) -> T;
    /// The same, the error naming the type `halfvec`.
    fn or_raise_half(self) -> T;
    /// The same, the error naming the type `sparsevec`.
    fn or_raise_sparse(self) -> T;
    /// The same, the error naming the type an index of `element`s indexes.
    fn or_raise_for(self, element: milvus_core::element::Element) -> T;
}

impl<T, E: SqlError> OrRaise<T> for Result<T, E> {
    #[inline]
    fn or_raise(self) -> T {
        self.unwrap_or_else(|e| raise_error(&e))
    }

    #[inline]
    fn or_raise_half(self) -> T {
        self.unwrap_or_else(|e| raise_error_for("halfvec", &e))
    }

    #[inline]
    fn or_raise_sparse(self) -> T {
        self.unwrap_or_else(|e| raise_error_for("sparsevec", &e))
    }

    #[inline]
    fn or_raise_for(self, element: milvus_core::element::Element) -> T {
        self.unwrap_or_else(|e| raise_error_for(element.type_name(), &e))
    }
}

/// Raises the error of damaged index contents (pages, the manifest), with
/// the one remedy; never returns.
pub fn raise_corrupted(message: String, detail: Option<String>) -> ! {
    raise(PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED, message, detail.as_deref(), Some(REINDEX_HINT))
}
