//! Turning the core's errors into Postgres errors.
//!
//! The core never calls Postgres; it returns typed errors. This is the one
//! place that raises them, with the SQLSTATE, message and detail the core
//! chose, so every error a user sees reads the same way.

use milvus_core::vector::{SqlState, VectorError};
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

/// Raises `err` as an `ERROR`; never returns.
pub fn raise_vector_error(err: VectorError) -> ! {
    raise_vector_error_for("vector", err)
}

/// Raises `err`, about a value of `type_name`, as an `ERROR`.
fn raise_vector_error_for(type_name: &str, err: VectorError) -> ! {
    let code = match err.sqlstate() {
        SqlState::InvalidTextRepresentation => PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
        SqlState::ProgramLimitExceeded => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        SqlState::DataException => PgSqlErrorCode::ERRCODE_DATA_EXCEPTION,
        SqlState::InvalidBinaryRepresentation => PgSqlErrorCode::ERRCODE_INVALID_BINARY_REPRESENTATION,
        SqlState::NumericValueOutOfRange => PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        SqlState::InvalidParameterValue => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
    };
    raise(code, err.message_for(type_name), err.detail(), None)
}

/// Raises an `ERROR` of `code` with its message, and a DETAIL and a HINT
/// where there is more to say; never returns. Every error the extension
/// raises with a SQLSTATE of its choosing goes through here.
pub fn raise(code: PgSqlErrorCode, message: String, detail: Option<&str>, hint: Option<&str>) -> ! {
    let mut report = ErrorReport::new(code, message, "pg_milvus");
    if let Some(detail) = detail {
        report = report.set_detail(detail);
    }
    if let Some(hint) = hint {
        report = report.set_hint(hint);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}

/// Unwraps a core result, raising its error in Postgres.
pub trait OrRaise<T> {
    fn or_raise(self) -> T;
    /// The same, the error naming the type `halfvec`.
    fn or_raise_half(self) -> T;
    /// The same, the error naming the type `sparsevec`.
    fn or_raise_sparse(self) -> T;
    /// The same, the error naming the type an index of `element`s indexes.
    fn or_raise_for(self, element: milvus_core::element::Element) -> T;
}

impl<T> OrRaise<T> for Result<T, VectorError> {
    #[inline]
    fn or_raise(self) -> T {
        self.unwrap_or_else(|e| raise_vector_error(e))
    }

    #[inline]
    fn or_raise_half(self) -> T {
        self.unwrap_or_else(|e| raise_vector_error_for("halfvec", e))
    }

    #[inline]
    fn or_raise_sparse(self) -> T {
        self.unwrap_or_else(|e| raise_vector_error_for("sparsevec", e))
    }

    #[inline]
    fn or_raise_for(self, element: milvus_core::element::Element) -> T {
        self.unwrap_or_else(|e| raise_vector_error_for(element.type_name(), e))
    }
}

/// Raises the error of damaged index contents (pages, the manifest), with
/// the one remedy; never returns.
pub fn raise_corrupted(message: String) -> ! {
    raise(PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED, message, None, Some("REINDEX rebuilds the index from the table."))
}

/// Raises an I/O-class error (object storage, the cache); never returns.
pub fn raise_io(message: String) -> ! {
    raise(PgSqlErrorCode::ERRCODE_IO_ERROR, message, None, None)
}
