//! What each of the core's errors tells SQL: its SQLSTATE, its DETAIL and
//! the one HINT a user can act on.
//!
//! The core never raises; it returns typed errors, and every one of them
//! implements [`SqlError`]. The skin has one function that turns any
//! [`SqlError`] into a Postgres error (`src/error.rs`), so an error reads
//! the same whichever job or query met it: damage to an index's contents is
//! `index_corrupted` with REINDEX as the remedy, a storage or cache failure
//! is `io_error`, a cancelled job is `query_canceled`, a bad value keeps
//! pgvector's SQLSTATE.

use std::fmt;

/// The SQLSTATEs the core's errors map to, by Postgres' names; the skin
/// owns the mapping to Postgres' codes so the core stays free of Postgres.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlState {
    InvalidTextRepresentation,
    ProgramLimitExceeded,
    DataException,
    InvalidBinaryRepresentation,
    NumericValueOutOfRange,
    InvalidParameterValue,
    /// Object storage or the local cache failed (58030).
    IoError,
    /// An index's contents are damaged: a page, the manifest or an object
    /// that fails its checks (XX002).
    IndexCorrupted,
    /// The job was cancelled (57014).
    QueryCanceled,
    /// A state the code does not expect: a bug, not the user's doing
    /// (XX000).
    InternalError,
}

/// The remedy for damage, the same wherever damage is found.
pub const REINDEX_HINT: &str = "REINDEX rebuilds the index from the table.";

/// An error as SQL shows it. The message is the error's `Display`.
pub trait SqlError: fmt::Display {
    fn sqlstate(&self) -> SqlState;

    /// The DETAIL line, where there is more to say than the message.
    fn detail(&self) -> Option<String> {
        None
    }

    /// The HINT line: REINDEX for damage, otherwise none unless the error
    /// knows better.
    fn hint(&self) -> Option<&'static str> {
        (self.sqlstate() == SqlState::IndexCorrupted).then_some(REINDEX_HINT)
    }

    /// The message as it reads for a value of SQL type `type_name`; the
    /// same for every error but those about values (pgvector names the type
    /// a value error concerns).
    fn message_for(&self, _type_name: &str) -> String {
        self.to_string()
    }
}

/// An error with what was being done when it happened: "could not flush
/// segment 3 of index "items_idx": storage ... failed". Its SQLSTATE and
/// hint are the cause's.
#[derive(Debug, Clone, PartialEq)]
pub struct Failed<E> {
    /// What failed, as it follows "could not".
    pub doing: String,
    /// Boxed: a job's error is large, and a `Result` carrying it should not
    /// be.
    pub cause: Box<E>,
    /// What the failure means for the user's data, if the cause's detail
    /// does not say it (a failed flush: the rows stay sealed).
    pub detail: Option<&'static str>,
}

impl<E> Failed<E> {
    pub fn new(doing: impl Into<String>, cause: E) -> Self {
        Failed { doing: doing.into(), cause: Box::new(cause), detail: None }
    }

    pub fn with_detail(self, detail: &'static str) -> Self {
        Failed { detail: Some(detail), ..self }
    }
}

impl<E: fmt::Display> fmt::Display for Failed<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "could not {}: {}", self.doing, self.cause)
    }
}

impl<E: SqlError> SqlError for Failed<E> {
    fn sqlstate(&self) -> SqlState {
        self.cause.sqlstate()
    }

    fn detail(&self) -> Option<String> {
        self.detail.map(str::to_owned).or_else(|| self.cause.detail())
    }

    fn hint(&self) -> Option<&'static str> {
        self.cause.hint()
    }
}

impl<E: SqlError + ?Sized> SqlError for Box<E> {
    fn sqlstate(&self) -> SqlState {
        (**self).sqlstate()
    }

    fn detail(&self) -> Option<String> {
        (**self).detail()
    }

    fn hint(&self) -> Option<&'static str> {
        (**self).hint()
    }

    fn message_for(&self, type_name: &str) -> String {
        (**self).message_for(type_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::CacheError;
    use crate::format::{FormatError, FormatErrorKind};
    use crate::jobs::JobError;
    use crate::segment::SegmentId;
    use crate::storage::StorageError;

    fn failed_storage() -> StorageError {
        StorageError::Failed {
            storage: "s3://b".into(),
            op: "put",
            key: "k".into(),
            attempts: 3,
            cause: "connection refused".into(),
        }
    }

    #[test]
    fn damage_is_index_corrupted_with_reindex_whichever_layer_met_it() {
        let format = FormatError { object: "o".into(), kind: FormatErrorKind::Invalid("x".into()) };
        let corrupt = CacheError::Corrupt { key: "k".into(), reason: "checksum".into() };
        let errors: [&dyn SqlError; 3] = [&format, &corrupt, &JobError::Format(format.clone())];
        for e in errors {
            assert_eq!(e.sqlstate(), SqlState::IndexCorrupted, "{e}");
            assert_eq!(e.hint(), Some(REINDEX_HINT), "{e}");
        }
    }

    #[test]
    fn storage_failures_are_io_errors_through_every_wrapper() {
        let job = JobError::Cache(CacheError::Storage(failed_storage()));
        assert_eq!(job.sqlstate(), SqlState::IoError);
        assert_eq!(job.hint(), None);
        assert_eq!(JobError::Storage(StorageError::Cancelled).sqlstate(), SqlState::QueryCanceled);
        assert_eq!(
            StorageError::InvalidUrl { url: "x".into(), reason: "y".into() }.sqlstate(),
            SqlState::InvalidParameterValue
        );
        assert_eq!(JobError::NotFlushed(SegmentId(1)).sqlstate(), SqlState::InternalError);
    }

    #[test]
    fn failed_reads_as_could_not_and_keeps_its_cause_state() {
        let e = Failed::new("flush segment 3 of index \"i\"", JobError::Storage(failed_storage()));
        assert!(e.to_string().starts_with("could not flush segment 3 of index \"i\": storage s3://b: put k"), "{e}");
        assert_eq!(e.sqlstate(), SqlState::IoError);
        assert_eq!(e.detail(), None);
        let e = e.with_detail("The rows stay sealed.");
        assert_eq!(e.detail().as_deref(), Some("The rows stay sealed."));
        let boxed: Box<dyn SqlError> = Box::new(e);
        assert_eq!(boxed.sqlstate(), SqlState::IoError);
    }
}
