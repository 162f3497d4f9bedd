//! The filter columns of a multicolumn milvus index: `USING milvus
//! (embedding vector_cosine_ops, tenant_id, created_at)` keeps, beside each
//! vector, its row's values of the columns after it (Milvus' scalar
//! fields), and a scan evaluates the keys the planner pushes on them
//! (`tenant_id = $2`, `created_at >= $3`, `labels && $4`, `tenant_id =
//! ANY($5)`, `IS NULL`) inside each segment (`milvus_core::filter`).
//!
//! The operator classes (`int4_ops`, `text_ops`, `array_ops`, ...: btree_gin's
//! names) give each column's operators strategy numbers: 1 `<`, 2 `<=`,
//! 3 `=`, 4 `>=`, 5 `>`, 6 `<>`, 7 `&&`, 8 `@>`. The integer types share
//! one family, so `bigint_column = 5` (an `int8 = int4` comparison) is
//! pushed too. A scan with keys has the executor recheck the rows it
//! returns (`xs_recheck`), as GIN's scans do: a key it does not evaluate
//! (one on the vector column, an operator it has no test for) costs a
//! recheck, never a wrong row.

use milvus_core::filter::{Cmp, ColumnType, Filter, Key, Test, Value};
use pgrx::PgTupleDesc;
use pgrx::prelude::*;

use crate::pages::Index;
use crate::types::scalar;

/// The type of each filter column of `index` (its key columns after the
/// vector), in order; none for an index of a vector alone.
pub fn types(index: Index) -> Vec<pg_sys::Oid> {
    // SAFETY: an open index relation: its tuple descriptor and pg_index row.
    unsafe {
        let keys = (*(*index.raw()).rd_index).indnkeyatts as usize;
        let desc = PgTupleDesc::from_pg_unchecked((*index.raw()).rd_att);
        (1..keys).map(|i| desc.get(i).expect("a key column").atttypid).collect()
    }
}

/// What the core keeps of each filter column of `index`.
pub fn kinds(index: Index) -> Vec<ColumnType> {
    types(index).into_iter().map(|t| scalar::column_type(t).expect("checked at CREATE INDEX")).collect()
}

/// The filter column (0 the first) whose values the index's `cluster_by`
/// option names, if it sets one; `Err` with the reason if that is not a
/// filter column of a type with an order the core knows.
pub fn cluster_column(index: Index) -> Result<Option<usize>, String> {
    let Some(name) = super::options::cluster_by(index) else {
        return Ok(None);
    };
    // SAFETY: an open index relation: its tuple descriptor.
    let desc = unsafe { PgTupleDesc::from_pg_unchecked((*index.raw()).rd_att) };
    let kinds = kinds(index);
    let found = (0..kinds.len()).find(|c| desc.get(c + 1).is_some_and(|a| a.name() == name));
    match found {
        Some(c) if matches!(kinds[c], ColumnType::Int | ColumnType::Uuid) => Ok(Some(c)),
        Some(_) => {
            Err(format!("cluster_by column \"{name}\" is not of an integer, boolean, date, timestamp or uuid type"))
        }
        None => Err(format!("cluster_by names \"{name}\", which is not a filter column of the index")),
    }
}

/// CREATE INDEX's check of the columns: the vector first, with its
/// opclass' distance (`build.rs` reads it), then columns of the types a
/// filter column may have, with the extension's filter opclasses.
pub fn validate(index: Index) {
    // SAFETY: an open index with `indnkeyatts` key columns.
    let keys = unsafe { (*(*index.raw()).rd_index).indnkeyatts } as u16;
    for column in 1..=keys {
        // SAFETY: as above; column numbers are 1-based.
        let ordering = unsafe { pg_sys::index_getprocid(index.raw(), column as i16, 1) } != pg_sys::InvalidOid;
        if (column == 1) != ordering {
            let message = if column == 1 {
                "the first column of a milvus index must be the vector".to_string()
            } else {
                format!("column {column} of a milvus index cannot be a vector: only the first column is")
            };
            crate::error::raise(
                PgSqlErrorCode::ERRCODE_INVALID_OBJECT_DEFINITION,
                message,
                None,
                Some(
                    "Put the vector first with its operator class, then the filter columns: \
                      USING milvus (embedding vector_l2_ops, tenant_id, created_at).",
                ),
            );
        }
    }
    for (i, typid) in types(index).into_iter().enumerate() {
        if scalar::column_type(typid).is_none() {
            // SAFETY: format_type_be of a type OID from the catalog.
            let name = unsafe { std::ffi::CStr::from_ptr(pg_sys::format_type_be(typid)) }.to_string_lossy();
            crate::error::raise(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!("a milvus index cannot filter on column {} of type {name}", i + 2),
                None,
                Some(&format!("Filter columns may be {}.", scalar::SUPPORTED)),
            );
        }
    }
    if let Err(message) = cluster_column(index) {
        crate::error::raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            message,
            None,
            Some(
                "cluster_by names a filter column of the index (one after the vector) of an integer, boolean, \
                  date, timestamp or uuid type: USING milvus (embedding vector_l2_ops, tenant_id) \
                  WITH (cluster_by = 'tenant_id').",
            ),
        );
    }
}

/// A row's values of the filter columns, from the index tuple's datums
/// (`values[0]` being the vector).
///
/// # Safety
/// `values` and `isnull` hold one entry per key column of the index whose
/// filter columns have `types`, on the main thread.
pub unsafe fn row_values(types: &[pg_sys::Oid], values: *const pg_sys::Datum, isnull: *const bool) -> Vec<Value> {
    // SAFETY: the caller's.
    unsafe {
        (0..types.len())
            .map(|i| if *isnull.add(i + 1) { Value::Null } else { scalar::value_of(types[i], *values.add(i + 1)) })
            .collect()
    }
}

/// The filter a scan's keys make, or `None` when it has none on the filter
/// columns.
///
/// # Safety
/// `scan` is a milvus index scan whose keys `amrescan` set, on the main thread.
pub unsafe fn filter_of(scan: pg_sys::IndexScanDesc) -> Option<Filter> {
    // SAFETY: the caller's; `keyData` holds `numberOfKeys` keys (and may be
    // null when there are none).
    unsafe {
        if (*scan).numberOfKeys <= 0 || (*scan).keyData.is_null() {
            return None;
        }
        let types = types(Index::from_raw((*scan).indexRelation));
        let keys = std::slice::from_raw_parts((*scan).keyData, (*scan).numberOfKeys as usize);
        let keys: Vec<Key> = keys
            .iter()
            // The vector column's `IS NOT NULL`: the executor rechecks it.
            .filter(|k| k.sk_attno >= 2)
            .filter_map(|k| {
                let column = k.sk_attno as usize - 2;
                key_test(k, types[column]).map(|test| Key { column, test })
            })
            .collect();
        (!keys.is_empty()).then_some(Filter { keys })
    }
}

/// What one scan key asks of its column, of type `column_type`; `None` for
/// a key this index does not evaluate (the recheck does).
///
/// # Safety
/// `key` is a scan key the planner made for the index, on the main thread.
unsafe fn key_test(key: &pg_sys::ScanKeyData, column_type: pg_sys::Oid) -> Option<Test> {
    let flags = key.sk_flags as u32;
    if flags & pg_sys::SK_SEARCHNULL != 0 {
        return Some(Test::IsNull);
    }
    if flags & pg_sys::SK_SEARCHNOTNULL != 0 {
        return Some(Test::IsNotNull);
    }
    // A comparison with NULL is never true.
    let nothing = Test::In(Vec::new());
    if flags & pg_sys::SK_ISNULL != 0 {
        return Some(nothing);
    }
    // The operator's right-hand type: another integer type than the
    // column's for a cross-type comparison; arrays' operators take anyarray.
    let argument_type = match key.sk_subtype {
        pg_sys::InvalidOid | pg_sys::ANYARRAYOID => column_type,
        subtype => subtype,
    };
    let cmp = match key.sk_strategy {
        1 => Some(Cmp::Lt),
        2 => Some(Cmp::Le),
        3 => Some(Cmp::Eq),
        4 => Some(Cmp::Ge),
        5 => Some(Cmp::Gt),
        6 => Some(Cmp::Ne),
        _ => None,
    };
    // SAFETY: the caller's; the argument has the operator's right type (an
    // array of it under SK_SEARCHARRAY).
    unsafe {
        if flags & pg_sys::SK_SEARCHARRAY != 0 {
            let values: Vec<Value> = scalar::array_values(argument_type, key.sk_argument)
                .into_iter()
                .filter(|v| *v != Value::Null)
                .collect();
            return Some(any(cmp?, values));
        }
        let value = scalar::value_of(argument_type, key.sk_argument);
        match (key.sk_strategy, value) {
            (7, Value::Ints(items)) => Some(Test::Overlaps(items.into_iter().map(Value::Int).collect())),
            (7, Value::Texts(items)) => Some(Test::Overlaps(items.into_iter().map(Value::Text).collect())),
            (8, Value::Ints(items)) => Some(Test::Contains(items.into_iter().map(Value::Int).collect())),
            (8, Value::Texts(items)) => Some(Test::Contains(items.into_iter().map(Value::Text).collect())),
            (_, value) => cmp.map(|cmp| Test::Cmp(cmp, value)),
        }
    }
}

/// `column <cmp> ANY(values)` (NULLs taken out) as one test: true for a
/// row when the comparison holds with some value.
fn any(cmp: Cmp, values: Vec<Value>) -> Test {
    let bound = |pick_max: bool| {
        let bound = if pick_max { values.iter().max() } else { values.iter().min() };
        bound.cloned().map_or(Test::In(Vec::new()), |b| Test::Cmp(cmp, b))
    };
    match cmp {
        Cmp::Eq => Test::In(values),
        Cmp::Lt | Cmp::Le => bound(true),
        Cmp::Gt | Cmp::Ge => bound(false),
        // Unequal to one of two different values: every non-NULL row.
        Cmp::Ne => match values.iter().collect::<std::collections::BTreeSet<_>>().len() {
            0 => Test::In(Vec::new()),
            1 => Test::Cmp(Cmp::Ne, values[0].clone()),
            _ => Test::IsNotNull,
        },
    }
}
