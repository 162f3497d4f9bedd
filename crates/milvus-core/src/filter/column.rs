//! A segment's filter columns, column-wise, and what their statistics say.

use std::collections::BTreeSet;

use std::ops::Bound;

use super::bitset::Bitset;

/// One row's value of a filter column. Postgres' integer-like types
/// (`int2`, `int4`, `int8`, `bool`, `date` in days, `timestamptz` in
/// microseconds) are all `Int`, whose order is theirs; a `uuid` is its 16
/// bytes read big-endian, whose order is Postgres' (memcmp).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Value {
    Null,
    Int(i64),
    Uuid(u128),
    Text(String),
    Ints(Vec<i64>),
    Texts(Vec<String>),
}

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Int,
    Uuid,
    Text,
    IntArray,
    TextArray,
}

/// One filter column of a segment's rows. Text is dictionary-encoded: the
/// segment's distinct strings, sorted, and a code per row (or per element),
/// so an equality is one binary search and then integer compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Column {
    /// `postings` is derived from `values` ([`Column::ints`]), never stored.
    Int {
        values: Vec<i64>,
        nulls: Bitset,
        postings: Option<Postings>,
    },
    Uuid {
        values: Vec<u128>,
        nulls: Bitset,
    },
    Text {
        dict: Vec<String>,
        codes: Vec<u32>,
        nulls: Bitset,
    },
    IntArray {
        offsets: Vec<u32>,
        values: Vec<i64>,
        nulls: Bitset,
    },
    TextArray {
        dict: Vec<String>,
        offsets: Vec<u32>,
        codes: Vec<u32>,
        nulls: Bitset,
    },
}

/// Why values do not make a column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("row {row}: {found:?} in a column of {column:?}")]
pub struct WrongType {
    pub row: usize,
    pub column: ColumnType,
    pub found: Value,
}

impl Column {
    /// The column of `values`, one per row, each `Null` or of `kind`.
    pub fn build(kind: ColumnType, values: &[Value]) -> Result<Column, WrongType> {
        let nulls = Bitset::from_fn(values.len(), |r| values[r] == Value::Null);
        let wrong = |row: usize| WrongType { row, column: kind, found: values[row].clone() };
        let dict_of = |strings: &mut dyn Iterator<Item = &String>| -> Vec<String> {
            strings.cloned().collect::<BTreeSet<_>>().into_iter().collect()
        };
        let code = |dict: &[String], s: &String| dict.binary_search(s).expect("in the dictionary") as u32;
        // The first row neither NULL nor of the column's kind, if any.
        let check = |of_kind: fn(&Value) -> bool| match values.iter().position(|v| *v != Value::Null && !of_kind(v)) {
            Some(r) => Err(wrong(r)),
            None => Ok(()),
        };
        Ok(match kind {
            ColumnType::Int => {
                check(|v| matches!(v, Value::Int(_)))?;
                let values = values.iter().map(|v| if let Value::Int(i) = v { *i } else { 0 }).collect();
                Column::ints(values, nulls)
            }
            ColumnType::Uuid => {
                check(|v| matches!(v, Value::Uuid(_)))?;
                let values = values.iter().map(|v| if let Value::Uuid(u) = v { *u } else { 0 }).collect();
                Column::Uuid { values, nulls }
            }
            ColumnType::Text => {
                check(|v| matches!(v, Value::Text(_)))?;
                let dict =
                    dict_of(&mut values.iter().filter_map(|v| if let Value::Text(s) = v { Some(s) } else { None }));
                let codes = values.iter().map(|v| if let Value::Text(s) = v { code(&dict, s) } else { 0 }).collect();
                Column::Text { dict, codes, nulls }
            }
            ColumnType::IntArray => {
                check(|v| matches!(v, Value::Ints(_)))?;
                let (mut offsets, mut flat) = (vec![0u32], Vec::new());
                for v in values {
                    if let Value::Ints(items) = v {
                        flat.extend_from_slice(items);
                    }
                    offsets.push(flat.len() as u32);
                }
                Column::IntArray { offsets, values: flat, nulls }
            }
            ColumnType::TextArray => {
                check(|v| matches!(v, Value::Texts(_)))?;
                let dict =
                    dict_of(&mut values.iter().flat_map(|v| if let Value::Texts(s) = v { s.as_slice() } else { &[] }));
                let (mut offsets, mut codes) = (vec![0u32], Vec::new());
                for v in values {
                    if let Value::Texts(items) = v {
                        codes.extend(items.iter().map(|s| code(&dict, s)));
                    }
                    offsets.push(codes.len() as u32);
                }
                Column::TextArray { dict, offsets, codes, nulls }
            }
        })
    }

    /// An integer column, with its value -> rows lists when its values are
    /// few ([`Postings::of`]).
    pub fn ints(values: Vec<i64>, nulls: Bitset) -> Column {
        let postings = Postings::of(&values, &nulls);
        Column::Int { values, nulls, postings }
    }

    /// The column of `rows`, each `(part, row)` a row of one of `parts`
    /// (columns of one type): a merge's output, row for row.
    pub fn gather(parts: &[&Column], rows: impl Iterator<Item = (usize, u32)>) -> Column {
        let values: Vec<Value> = rows.map(|(part, row)| parts[part].value(row as usize)).collect();
        Column::build(parts[0].kind(), &values).expect("parts of one type")
    }

    /// What the column holds.
    pub fn kind(&self) -> ColumnType {
        match self {
            Column::Int { .. } => ColumnType::Int,
            Column::Uuid { .. } => ColumnType::Uuid,
            Column::Text { .. } => ColumnType::Text,
            Column::IntArray { .. } => ColumnType::IntArray,
            Column::TextArray { .. } => ColumnType::TextArray,
        }
    }

    /// How many rows the column has.
    pub fn rows(&self) -> usize {
        self.nulls().len()
    }

    pub fn nulls(&self) -> &Bitset {
        match self {
            Column::Int { nulls, .. }
            | Column::Uuid { nulls, .. }
            | Column::Text { nulls, .. }
            | Column::IntArray { nulls, .. }
            | Column::TextArray { nulls, .. } => nulls,
        }
    }

    /// Row `row`'s value, as it was built.
    pub fn value(&self, row: usize) -> Value {
        if self.nulls().contains(row) {
            return Value::Null;
        }
        match self {
            Column::Int { values, .. } => Value::Int(values[row]),
            Column::Uuid { values, .. } => Value::Uuid(values[row]),
            Column::Text { dict, codes, .. } => Value::Text(dict[codes[row] as usize].clone()),
            Column::IntArray { offsets, values, .. } => {
                Value::Ints(values[offsets[row] as usize..offsets[row + 1] as usize].to_vec())
            }
            Column::TextArray { dict, offsets, codes, .. } => Value::Texts(
                codes[offsets[row] as usize..offsets[row + 1] as usize]
                    .iter()
                    .map(|c| dict[*c as usize].clone())
                    .collect(),
            ),
        }
    }

    /// The statistics a segment keeps of this column.
    pub fn stats(&self) -> ColumnStats {
        let rows = self.rows();
        let nulls = self.nulls().count();
        let present = || (0..rows).filter(|r| !self.nulls().contains(*r));
        let (min, max) = match self {
            Column::Int { values, .. } => bounds(present().map(|r| Value::Int(values[r]))),
            Column::Uuid { values, .. } => bounds(present().map(|r| Value::Uuid(values[r]))),
            Column::IntArray { values, .. } => bounds(values.iter().map(|v| Value::Int(*v))),
            // Text sorts by its collation, which the core does not know:
            // no bounds, the dictionary says which values occur.
            Column::Text { .. } | Column::TextArray { .. } => (None, None),
        };
        ColumnStats { rows, nulls, min, max }
    }
}

fn bounds(values: impl Iterator<Item = Value>) -> (Option<Value>, Option<Value>) {
    values.fold((None, None), |(lo, hi): (Option<Value>, Option<Value>), v| {
        (Some(lo.map_or(v.clone(), |l| l.min(v.clone()))), Some(hi.map_or(v.clone(), |h| h.max(v))))
    })
}

/// An integer column's value -> rows lists (Milvus' scalar index of a
/// low-cardinality field): its distinct values, ascending, and for each the
/// rows holding it, ascending. An equality or a narrow range then costs its
/// passing rows, not a test of every row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Postings {
    keys: Vec<i64>,
    /// Where each key's rows start in `rows`; one more, its end.
    starts: Vec<u32>,
    rows: Vec<u32>,
}

/// Rows a distinct value holds on average, at least, for a column to get
/// [`Postings`]: fewer, and testing every row costs about as little.
pub const POSTINGS_MIN_ROWS_PER_VALUE: usize = 32;

impl Postings {
    /// The lists of the rows of `values` not in `nulls`, if its distinct
    /// values hold [`POSTINGS_MIN_ROWS_PER_VALUE`] rows each on average.
    pub fn of(values: &[i64], nulls: &Bitset) -> Option<Postings> {
        let mut pairs: Vec<(i64, u32)> =
            (0..values.len()).filter(|r| !nulls.contains(*r)).map(|r| (values[r], r as u32)).collect();
        if pairs.len() < POSTINGS_MIN_ROWS_PER_VALUE {
            return None;
        }
        pairs.sort_unstable();
        let distinct = 1 + pairs.windows(2).filter(|w| w[0].0 != w[1].0).count();
        if distinct * POSTINGS_MIN_ROWS_PER_VALUE > pairs.len() {
            return None;
        }
        let (mut keys, mut starts) = (Vec::with_capacity(distinct), Vec::with_capacity(distinct + 1));
        for (i, (v, _)) in pairs.iter().enumerate() {
            if keys.last() != Some(v) {
                keys.push(*v);
                starts.push(i as u32);
            }
        }
        starts.push(pairs.len() as u32);
        Some(Postings { keys, starts, rows: pairs.into_iter().map(|(_, r)| r).collect() })
    }

    /// The rows whose value lies in `values`, by value then row.
    pub fn rows_in(&self, values: (Bound<i64>, Bound<i64>)) -> &[u32] {
        let start = match values.0 {
            Bound::Included(v) => self.keys.partition_point(|k| *k < v),
            Bound::Excluded(v) => self.keys.partition_point(|k| *k <= v),
            Bound::Unbounded => 0,
        };
        let end = match values.1 {
            Bound::Included(v) => self.keys.partition_point(|k| *k <= v),
            Bound::Excluded(v) => self.keys.partition_point(|k| *k < v),
            Bound::Unbounded => self.keys.len(),
        };
        &self.rows[self.starts[start] as usize..self.starts[end.max(start)] as usize]
    }
}

/// What a segment knows of one column without reading it: enough to skip
/// the segment when a filter's keys cannot hold for any of its rows. For
/// arrays the bounds are over their elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnStats {
    pub rows: usize,
    pub nulls: usize,
    pub min: Option<Value>,
    pub max: Option<Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_give_back_their_values_and_keep_their_bounds() {
        let ints = [Value::Int(5), Value::Null, Value::Int(-3), Value::Int(9)];
        let column = Column::build(ColumnType::Int, &ints).unwrap();
        assert_eq!((0..4).map(|r| column.value(r)).collect::<Vec<_>>(), ints);
        let stats = column.stats();
        assert_eq!((stats.rows, stats.nulls, stats.min, stats.max), (4, 1, Some(Value::Int(-3)), Some(Value::Int(9))));

        let texts = [Value::Text("b".into()), Value::Text("a".into()), Value::Null, Value::Text("b".into())];
        let column = Column::build(ColumnType::Text, &texts).unwrap();
        assert!(matches!(&column, Column::Text { dict, .. } if dict == &["a", "b"]));
        assert_eq!((0..4).map(|r| column.value(r)).collect::<Vec<_>>(), texts);

        let labels = [Value::Texts(vec!["x".into(), "y".into()]), Value::Texts(vec![]), Value::Null];
        let column = Column::build(ColumnType::TextArray, &labels).unwrap();
        assert_eq!((0..3).map(|r| column.value(r)).collect::<Vec<_>>(), labels);

        let arrays = [Value::Ints(vec![3, 1]), Value::Null, Value::Ints(vec![7])];
        let column = Column::build(ColumnType::IntArray, &arrays).unwrap();
        assert_eq!((0..3).map(|r| column.value(r)).collect::<Vec<_>>(), arrays);
        assert_eq!(column.stats().max, Some(Value::Int(7)));

        let wrong = Column::build(ColumnType::Int, &[Value::Int(1), Value::Text("1".into())]).unwrap_err();
        assert_eq!(wrong.row, 1);
    }

    #[test]
    fn postings_list_the_rows_of_each_value_of_a_column_of_few_values() {
        // 320 rows, values 0..10, every fifth NULL.
        let values: Vec<Value> =
            (0..320).map(|r| if r % 5 == 0 { Value::Null } else { Value::Int((r % 10) as i64) }).collect();
        let Column::Int { postings: Some(p), .. } = Column::build(ColumnType::Int, &values).unwrap() else {
            panic!("ten values of 320 rows get postings")
        };
        let rows_of = |pick: &dyn Fn(i64) -> bool| -> Vec<u32> {
            (0..320u32).filter(|r| matches!(values[*r as usize], Value::Int(v) if pick(v))).collect()
        };
        use Bound::*;
        let sorted = |rows: &[u32]| {
            let mut rows = rows.to_vec();
            rows.sort();
            rows
        };
        assert_eq!(p.rows_in((Included(3), Included(3))), rows_of(&|v| v == 3));
        assert_eq!(sorted(p.rows_in((Unbounded, Excluded(3)))), rows_of(&|v| v < 3));
        assert_eq!(sorted(p.rows_in((Excluded(2), Included(5)))), rows_of(&|v| v > 2 && v <= 5));
        assert_eq!(sorted(p.rows_in((Included(8), Unbounded))), rows_of(&|v| v >= 8));
        assert!(p.rows_in((Included(42), Included(42))).is_empty());
        assert!(p.rows_in((Excluded(9), Unbounded)).is_empty());
        // A column of many values has none.
        let many: Vec<Value> = (0..320).map(Value::Int).collect();
        assert!(matches!(Column::build(ColumnType::Int, &many).unwrap(), Column::Int { postings: None, .. }));
    }
}
