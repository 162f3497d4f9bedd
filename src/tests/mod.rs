//! `#[pg_test]` tier: runs inside a real Postgres started by `cargo pgrx test`.
//! One file per area; each wraps its tests in `#[pg_schema] mod tests`, since
//! pgrx-tests calls them as `tests.<name>()`. The SQL contract is pg_test/.

mod index;
mod vector;
