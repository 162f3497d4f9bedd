//! Filters inside the index: Milvus' scalar fields in every segment.
//!
//! A multicolumn milvus index keeps, beside each row's vector, its values
//! of the filter columns (`tenant_id`, `created_at`, labels), column by
//! column in every segment ([`Column`]), with statistics a segment is
//! judged by without reading it ([`ColumnStats`]). A scan's pushed keys
//! (`tenant_id = $2`, `created_at >= $3`, `labels && $4`, AND together)
//! make a [`Filter`]; per segment, as Milvus' segcore does:
//!
//! 1. [`Filter::excludes`]: the statistics prove no row can match: the
//!    segment costs nothing.
//! 2. [`Filter::matches`]: the keys evaluated over the columns into a
//!    [`Bitset`] of the segment's rows.
//! 3. [`Plan::choose`]: few matches are ranked exactly (every matching row's
//!    distance), many by the graph walk that steps through non-matching rows
//!    but returns only matching ones. knowhere switches to the exact scan
//!    when 7% of the rows or fewer match, or when k is half the matches or
//!    more; so does this, and also when a segment's matches are 1% or less
//!    of all the rows searched (a filter that keeps most of one clustered
//!    segment still answers exactly).
//!
//! Semantics are SQL's: a NULL value satisfies no comparison, `<>`
//! included; `IS NULL` and `IS NOT NULL` test it. Text has no order here
//! (collations are Postgres'): its keys are equality, inequality and
//! membership, and a range on text stays with the executor.

mod bitset;
mod column;

pub use bitset::Bitset;
pub use column::{Column, ColumnStats, ColumnType, POSTINGS_MIN_ROWS_PER_VALUE, Postings, Value, WrongType};

/// A comparison of a column's value with a constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// What one key asks of a column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Test {
    /// `column <op> value`.
    Cmp(Cmp, Value),
    /// `column = ANY(values)`.
    In(Vec<Value>),
    IsNull,
    IsNotNull,
    /// `column && values`: an array sharing an element with `values`.
    Overlaps(Vec<Value>),
    /// `column @> values`: an array holding every element of `values`.
    Contains(Vec<Value>),
}

/// One pushed key: a test of filter column `column` (0 the first filter
/// column, the index's second).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub column: usize,
    pub test: Test,
}

/// Keys that all have to hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub keys: Vec<Key>,
}

impl Filter {
    /// Whether `stats` (a segment's, one per filter column) prove that no
    /// row of the segment passes.
    pub fn excludes(&self, stats: &[ColumnStats]) -> bool {
        self.keys.iter().any(|key| {
            let s = &stats[key.column];
            let present = s.rows - s.nulls;
            match &key.test {
                Test::IsNull => s.nulls == 0,
                Test::IsNotNull => present == 0,
                _ if present == 0 => true,
                Test::Cmp(cmp, v) => outside(s, *cmp, v),
                Test::In(values) | Test::Overlaps(values) => {
                    values.iter().all(|v| *v == Value::Null || outside(s, Cmp::Eq, v))
                }
                Test::Contains(values) => values.iter().any(|v| *v != Value::Null && outside(s, Cmp::Eq, v)),
            }
        })
    }

    /// Whether one row, whose filter values are `values` (one per filter
    /// column), passes every key: what a scan asks of each row it reads from
    /// the growing segment's pages.
    pub fn passes(&self, values: &[Value]) -> bool {
        self.keys.iter().all(|key| key.holds(&values[key.column]))
    }

    /// The rows of a segment whose `columns` (one per filter column) pass
    /// every key.
    pub fn matches(&self, columns: &[Column], rows: usize) -> Bitset {
        let mut passing = Bitset::all(rows);
        for key in &self.keys {
            passing.and(&key.matches(&columns[key.column]));
            if passing.is_empty() {
                break;
            }
        }
        passing
    }
}

/// Whether no value between `s.min` and `s.max` can satisfy `cmp v`. Without
/// bounds (text) only nothing is proven.
fn outside(s: &ColumnStats, cmp: Cmp, v: &Value) -> bool {
    let (Some(min), Some(max)) = (&s.min, &s.max) else {
        return false;
    };
    match cmp {
        Cmp::Eq => v < min || v > max,
        Cmp::Ne => min == max && v == min,
        Cmp::Lt => min >= v,
        Cmp::Le => min > v,
        Cmp::Gt => max <= v,
        Cmp::Ge => max < v,
    }
}

impl Key {
    /// Whether one value passes this key, by SQL's rules (NULL passes
    /// nothing but `IS NULL`; text compares by equality only).
    pub fn holds(&self, value: &Value) -> bool {
        match (&self.test, value) {
            (Test::IsNull, v) => *v == Value::Null,
            (Test::IsNotNull, v) => *v != Value::Null,
            (_, Value::Null) => false,
            (Test::Cmp(cmp @ (Cmp::Eq | Cmp::Ne), c @ Value::Text(_)), v @ Value::Text(_)) => {
                (v == c) == (*cmp == Cmp::Eq)
            }
            (Test::Cmp(_, Value::Text(_)), _) | (Test::Cmp(_, _), Value::Text(_)) => false,
            (Test::Cmp(cmp, c), v) => std::mem::discriminant(c) == std::mem::discriminant(v) && holds(*cmp, v.cmp(c)),
            (Test::In(list), v) => list.iter().any(|c| c == v),
            (Test::Overlaps(wanted), Value::Ints(items)) => {
                wanted.iter().any(|w| matches!(w, Value::Int(i) if items.contains(i)))
            }
            (Test::Contains(wanted), Value::Ints(items)) => {
                wanted.iter().all(|w| matches!(w, Value::Int(i) if items.contains(i)))
            }
            (Test::Overlaps(wanted), Value::Texts(items)) => {
                wanted.iter().any(|w| matches!(w, Value::Text(s) if items.contains(s)))
            }
            (Test::Contains(wanted), Value::Texts(items)) => {
                wanted.iter().all(|w| matches!(w, Value::Text(s) if items.contains(s)))
            }
            _ => false,
        }
    }

    /// The rows of `column` passing this key.
    pub fn matches(&self, column: &Column) -> Bitset {
        let rows = column.rows();
        let nulls = column.nulls();
        match &self.test {
            Test::IsNull => return nulls.clone(),
            Test::IsNotNull => return Bitset::from_fn(rows, |r| !nulls.contains(r)),
            _ => {}
        }
        let present = |r: usize| !nulls.contains(r);
        match (column, &self.test) {
            (Column::Int { values, nulls, postings }, Test::Cmp(cmp, Value::Int(v))) => {
                let v = *v;
                // Few passing rows of a column of few values: their lists
                // (`<>` keeps all lists but one: never few).
                use std::ops::Bound::*;
                let passing = match cmp {
                    Cmp::Eq => Some((Included(v), Included(v))),
                    Cmp::Lt => Some((Unbounded, Excluded(v))),
                    Cmp::Le => Some((Unbounded, Included(v))),
                    Cmp::Gt => Some((Excluded(v), Unbounded)),
                    Cmp::Ge => Some((Included(v), Unbounded)),
                    Cmp::Ne => None,
                };
                let listed = postings.as_ref().zip(passing).map(|(p, passing)| p.rows_in(passing));
                if let Some(listed) = listed.filter(|l| l.len() <= rows / POSTINGS_SHARE) {
                    let mut set = Bitset::none(rows);
                    listed.iter().for_each(|r| set.insert(*r as usize));
                    return set;
                }
                // Else a word at a time, no branch a row: every query tests
                // every row of every segment it does not skip.
                match cmp {
                    Cmp::Eq => int_words(values, nulls, |x| x == v),
                    Cmp::Ne => int_words(values, nulls, |x| x != v),
                    Cmp::Lt => int_words(values, nulls, |x| x < v),
                    Cmp::Le => int_words(values, nulls, |x| x <= v),
                    Cmp::Gt => int_words(values, nulls, |x| x > v),
                    Cmp::Ge => int_words(values, nulls, |x| x >= v),
                }
            }
            (Column::Uuid { values, .. }, Test::Cmp(cmp, Value::Uuid(v))) => {
                Bitset::from_fn(rows, |r| present(r) && holds(*cmp, values[r].cmp(v)))
            }
            (Column::Text { dict, codes, .. }, Test::Cmp(cmp @ (Cmp::Eq | Cmp::Ne), Value::Text(v))) => {
                match dict.binary_search(v) {
                    Ok(code) => {
                        Bitset::from_fn(rows, |r| present(r) && ((codes[r] == code as u32) == (*cmp == Cmp::Eq)))
                    }
                    Err(_) if *cmp == Cmp::Eq => Bitset::none(rows),
                    Err(_) => Bitset::from_fn(rows, present),
                }
            }
            (_, Test::In(values)) => {
                let mut any = Bitset::none(rows);
                for v in values.iter().filter(|v| **v != Value::Null) {
                    any.or(&Key { column: self.column, test: Test::Cmp(Cmp::Eq, v.clone()) }.matches(column));
                }
                any
            }
            (Column::IntArray { offsets, values, .. }, Test::Overlaps(wanted) | Test::Contains(wanted)) => {
                let wanted: Vec<i64> =
                    wanted.iter().filter_map(|v| if let Value::Int(i) = v { Some(*i) } else { None }).collect();
                let all = matches!(self.test, Test::Contains(_));
                Bitset::from_fn(rows, |r| {
                    let items = &values[offsets[r] as usize..offsets[r + 1] as usize];
                    present(r) && array_test(all, wanted.iter().map(|w| items.contains(w)))
                })
            }
            (Column::TextArray { dict, offsets, codes, .. }, Test::Overlaps(wanted) | Test::Contains(wanted)) => {
                let all = matches!(self.test, Test::Contains(_));
                // A wanted string the segment never saw is in no row.
                let wanted: Vec<Option<u32>> = wanted
                    .iter()
                    .filter_map(|v| {
                        if let Value::Text(s) = v { Some(dict.binary_search(s).ok().map(|c| c as u32)) } else { None }
                    })
                    .collect();
                Bitset::from_fn(rows, |r| {
                    let items = &codes[offsets[r] as usize..offsets[r + 1] as usize];
                    present(r) && array_test(all, wanted.iter().map(|w| w.is_some_and(|c| items.contains(&c))))
                })
            }
            // A key of a type the column does not hold, or an order on
            // text, selects nothing here; the skin never pushes one.
            _ => Bitset::none(rows),
        }
    }
}

/// A key on an integer column with [`column::Postings`] reads their lists
/// when they name at most this share of the rows (half): a listed row's bit
/// costs about what testing a row in order does, so the lists win below
/// half (`make bench-core`, `filter_100k_ints`; docs/benchmarks.md,
/// "Constants and the measurements behind them").
const POSTINGS_SHARE: usize = 2;

/// The rows of an integer column, not NULL, whose value passes `test`,
/// built 64 rows to a word.
fn int_words(values: &[i64], nulls: &Bitset, test: impl Fn(i64) -> bool) -> Bitset {
    let words = values
        .chunks(64)
        .zip(nulls.words())
        .map(|(chunk, null)| chunk.iter().enumerate().fold(0u64, |w, (i, x)| w | (test(*x) as u64) << i) & !null)
        .collect();
    Bitset::from_words(words, values.len()).expect("a word per 64 rows, none past them")
}

fn holds(cmp: Cmp, order: std::cmp::Ordering) -> bool {
    use std::cmp::Ordering::*;
    match cmp {
        Cmp::Eq => order == Equal,
        Cmp::Ne => order != Equal,
        Cmp::Lt => order == Less,
        Cmp::Le => order != Greater,
        Cmp::Gt => order == Greater,
        Cmp::Ge => order != Less,
    }
}

/// `@>` (every wanted element present; true for none wanted, as in
/// Postgres) or `&&` (some wanted element present).
fn array_test(all: bool, mut found: impl Iterator<Item = bool>) -> bool {
    if all { found.all(|f| f) } else { found.any(|f| f) }
}

/// How a segment answers a filtered search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// No row passes: nothing to search.
    Skip,
    /// Every passing row's distance, exactly.
    Exact,
    /// The graph walk, returning passing rows only.
    Walk,
}

impl Plan {
    /// knowhere's rule: exact when 7% of the segment's `rows` or fewer
    /// pass, or when `k` is half the passing rows or more; else the walk.
    /// Also exact when the passing rows are 1% or less of the `searched`
    /// rows of every segment together: a filter keeping 1% of an index is
    /// answered exactly even where it keeps most of one segment (a
    /// clustered one), at the cost of a walk's distances.
    pub fn choose(passing: usize, rows: usize, k: usize, searched: usize) -> Plan {
        if passing == 0 {
            Plan::Skip
        } else if passing * 100 <= rows * 7 || 2 * k >= passing || passing * 100 <= searched {
            Plan::Exact
        } else {
            Plan::Walk
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn ints(values: &[Option<i64>]) -> Column {
        let values: Vec<Value> = values.iter().map(|v| v.map_or(Value::Null, Value::Int)).collect();
        Column::build(ColumnType::Int, &values).unwrap()
    }

    fn key(column: usize, test: Test) -> Key {
        Key { column, test }
    }

    /// SQL's answer for one row, written the plain way.
    fn sql(test: &Test, value: &Value) -> bool {
        let eq = |a: &Value, b: &Value| a == b;
        match (test, value) {
            (Test::IsNull, v) => *v == Value::Null,
            (Test::IsNotNull, v) => *v != Value::Null,
            (_, Value::Null) => false,
            (Test::Cmp(cmp, c), v) => holds(*cmp, v.cmp(c)),
            (Test::In(list), v) => list.iter().any(|c| eq(c, v)),
            (Test::Overlaps(list), Value::Ints(items)) => {
                list.iter().any(|c| matches!(c, Value::Int(i) if items.contains(i)))
            }
            (Test::Contains(list), Value::Ints(items)) => {
                list.iter().all(|c| matches!(c, Value::Int(i) if items.contains(i)))
            }
            _ => unreachable!(),
        }
    }

    #[test]
    fn keys_follow_sql_for_nulls_text_and_arrays() {
        let c = ints(&[Some(1), None, Some(3), Some(3)]);
        let rows = |k: Key| k.matches(&c).rows().collect::<Vec<_>>();
        assert_eq!(rows(key(0, Test::Cmp(Cmp::Ne, Value::Int(3)))), [0]); // NULL <> 3 is not true
        assert_eq!(rows(key(0, Test::IsNull)), [1]);
        assert_eq!(rows(key(0, Test::In(vec![Value::Null, Value::Int(1), Value::Int(3)]))), [0, 2, 3]);

        let t =
            Column::build(ColumnType::Text, &[Value::Text("acme".into()), Value::Null, Value::Text("globex".into())])
                .unwrap();
        let text = |test: Test| key(0, test).matches(&t).rows().collect::<Vec<_>>();
        assert_eq!(text(Test::Cmp(Cmp::Eq, Value::Text("acme".into()))), [0]);
        assert_eq!(text(Test::Cmp(Cmp::Ne, Value::Text("acme".into()))), [2]);
        assert_eq!(text(Test::Cmp(Cmp::Eq, Value::Text("initech".into()))), Vec::<usize>::new());
        assert_eq!(text(Test::Cmp(Cmp::Ne, Value::Text("initech".into()))), [0, 2]);

        let labels = Column::build(
            ColumnType::TextArray,
            &[Value::Texts(vec!["red".into(), "blue".into()]), Value::Texts(vec![]), Value::Null],
        )
        .unwrap();
        let arr = |test: Test| key(0, test).matches(&labels).rows().collect::<Vec<_>>();
        assert_eq!(arr(Test::Overlaps(vec![Value::Text("blue".into()), Value::Text("green".into())])), [0]);
        assert_eq!(
            arr(Test::Contains(vec![Value::Text("blue".into()), Value::Text("green".into())])),
            Vec::<usize>::new()
        );
        assert_eq!(arr(Test::Contains(vec![])), [0, 1]); // '{}' is in every array, not in NULL
        // Row by row, as a scan tests the growing segment's rows: the same.
        for (column, tests) in [
            (
                &t,
                vec![Test::Cmp(Cmp::Eq, Value::Text("acme".into())), Test::Cmp(Cmp::Ne, Value::Text("initech".into()))],
            ),
            (&labels, vec![Test::Overlaps(vec![Value::Text("blue".into())]), Test::Contains(vec![]), Test::IsNull]),
        ] {
            for test in tests {
                let k = key(0, test);
                let rows = k.matches(column);
                assert!((0..column.rows()).all(|r| k.holds(&column.value(r)) == rows.contains(r)), "{k:?}");
            }
        }
    }

    #[test]
    fn statistics_skip_a_segment_only_when_no_row_can_pass() {
        let stats = ints(&[Some(10), Some(20), None]).stats();
        let excludes = |test: Test| Filter { keys: vec![key(0, test)] }.excludes(std::slice::from_ref(&stats));
        assert!(excludes(Test::Cmp(Cmp::Eq, Value::Int(5))));
        assert!(!excludes(Test::Cmp(Cmp::Eq, Value::Int(15)))); // within the bounds: maybe
        assert!(excludes(Test::Cmp(Cmp::Lt, Value::Int(10))));
        assert!(!excludes(Test::Cmp(Cmp::Le, Value::Int(10))));
        assert!(excludes(Test::Cmp(Cmp::Gt, Value::Int(20))));
        assert!(!excludes(Test::IsNull));
        assert!(excludes(Test::In(vec![Value::Int(1), Value::Int(30), Value::Null])));
        let all_null = ints(&[None, None]).stats();
        assert!(Filter { keys: vec![key(0, Test::Cmp(Cmp::Ne, Value::Int(1)))] }.excludes(&[all_null]));
    }

    #[test]
    fn plans_follow_knowhere() {
        assert_eq!(Plan::choose(0, 1000, 10, 1000), Plan::Skip);
        assert_eq!(Plan::choose(70, 1000, 10, 1000), Plan::Exact);
        assert_eq!(Plan::choose(71, 1000, 10, 1000), Plan::Walk);
        assert_eq!(Plan::choose(500, 1000, 250, 1000), Plan::Exact);
        // All of one segment of ten, and 1% of the rows searched.
        assert_eq!(Plan::choose(1000, 1000, 10, 100_000), Plan::Exact);
        assert_eq!(Plan::choose(1001, 1000, 10, 100_000), Plan::Walk);
    }

    fn value() -> impl Strategy<Value = Option<i64>> {
        prop_oneof![1 => Just(None), 6 => (-5i64..5).prop_map(Some)]
    }

    fn test() -> impl Strategy<Value = Test> {
        let cmp = prop_oneof![Just(Cmp::Eq), Just(Cmp::Ne), Just(Cmp::Lt), Just(Cmp::Le), Just(Cmp::Gt), Just(Cmp::Ge)];
        prop_oneof![
            (cmp, -6i64..6).prop_map(|(c, v)| Test::Cmp(c, Value::Int(v))),
            prop::collection::vec(-6i64..6, 0..4).prop_map(|l| Test::In(l.into_iter().map(Value::Int).collect())),
            Just(Test::IsNull),
            Just(Test::IsNotNull),
        ]
    }

    proptest! {
        /// The bitset is SQL's row-by-row answer (columns of over 320 rows
        /// get value -> rows lists), and a segment is skipped
        /// only when that answer is empty.
        #[test]
        fn filters_agree_with_sql_row_by_row(
            a in prop::collection::vec(value(), 0..700),
            tests in prop::collection::vec((0usize..2, test()), 1..4),
        ) {
            let b: Vec<Option<i64>> = a.iter().rev().cloned().collect();
            let columns = [ints(&a), ints(&b)];
            let filter = Filter { keys: tests.into_iter().map(|(c, t)| key(c, t)).collect() };
            let got = filter.matches(&columns, a.len());
            let want = Bitset::from_fn(a.len(), |r| {
                filter.keys.iter().all(|k| sql(&k.test, &columns[k.column].value(r)))
            });
            prop_assert_eq!(&got, &want);
            for r in 0..a.len() {
                let row = [columns[0].value(r), columns[1].value(r)];
                prop_assert_eq!(filter.passes(&row), want.contains(r), "row {}", r);
            }
            let stats: Vec<ColumnStats> = columns.iter().map(Column::stats).collect();
            if filter.excludes(&stats) {
                prop_assert!(want.is_empty());
            }
        }
    }
}
