//! A set of a segment's row numbers, one bit a row: what a filter leaves.

/// Rows `0..len` of one segment, each in or out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bitset {
    words: Vec<u64>,
    len: usize,
}

impl Bitset {
    /// No row of `len`.
    pub fn none(len: usize) -> Self {
        Bitset { words: vec![0; len.div_ceil(64)], len }
    }

    /// Every row of `len`.
    pub fn all(len: usize) -> Self {
        let mut set = Bitset { words: vec![u64::MAX; len.div_ceil(64)], len };
        set.clear_tail();
        set
    }

    /// The rows for which `test` holds.
    pub fn from_fn(len: usize, mut test: impl FnMut(usize) -> bool) -> Self {
        let mut set = Bitset::none(len);
        for row in 0..len {
            if test(row) {
                set.insert(row);
            }
        }
        set
    }

    /// The set whose row `r` is bit `r % 64` of `words[r / 64]`; none if
    /// the words are not `len`'s or a bit past `len` is set.
    pub fn from_words(words: Vec<u64>, len: usize) -> Option<Self> {
        let mut set = Bitset { words, len };
        if set.words.len() != len.div_ceil(64) {
            return None;
        }
        let before = set.words.last().copied();
        set.clear_tail();
        (set.words.last().copied() == before).then_some(set)
    }

    /// The set's words, as [`Self::from_words`] takes them.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// How many rows there are in all, in or out.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    pub fn insert(&mut self, row: usize) {
        debug_assert!(row < self.len);
        self.words[row / 64] |= 1 << (row % 64);
    }

    pub fn contains(&self, row: usize) -> bool {
        row < self.len && self.words[row / 64] & (1 << (row % 64)) != 0
    }

    /// How many rows are in.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Keeps the rows that are also in `other` (of the same length).
    pub fn and(&mut self, other: &Bitset) {
        debug_assert_eq!(self.len, other.len);
        self.words.iter_mut().zip(&other.words).for_each(|(a, b)| *a &= b);
    }

    /// Adds the rows of `other` (of the same length).
    pub fn or(&mut self, other: &Bitset) {
        debug_assert_eq!(self.len, other.len);
        self.words.iter_mut().zip(&other.words).for_each(|(a, b)| *a |= b);
    }

    /// Keeps the rows for which `keep` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(usize) -> bool) {
        for (i, word) in self.words.iter_mut().enumerate() {
            let mut bits = *word;
            while bits != 0 {
                let bit = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if !keep(i * 64 + bit) {
                    *word &= !(1 << bit);
                }
            }
        }
    }

    /// The rows that are in, ascending.
    pub fn rows(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(i, w)| {
            let mut bits = *w;
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let bit = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    i * 64 + bit
                })
            })
        })
    }

    fn clear_tail(&mut self) {
        if !self.len.is_multiple_of(64)
            && let Some(last) = self.words.last_mut()
        {
            *last &= (1u64 << (self.len % 64)) - 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_count_combine_and_list_their_rows() {
        assert_eq!(Bitset::all(130).count(), 130);
        assert!(Bitset::none(130).is_empty());
        let even = Bitset::from_fn(130, |r| r % 2 == 0);
        let thirds = Bitset::from_fn(130, |r| r % 3 == 0);
        let mut both = even.clone();
        both.and(&thirds);
        assert_eq!(both.rows().collect::<Vec<_>>(), (0..130).filter(|r| r % 6 == 0).collect::<Vec<_>>());
        let mut either = even.clone();
        either.or(&thirds);
        assert_eq!(either.count(), (0..130).filter(|r| r % 2 == 0 || r % 3 == 0).count());
        assert!(even.contains(128) && !even.contains(129) && !even.contains(130));
        assert_eq!(Bitset::all(0).count(), 0);
        assert_eq!(Bitset::all(64).count(), 64);
        let mut kept = Bitset::all(130);
        kept.retain(|r| r % 5 == 0);
        assert_eq!(kept.rows().collect::<Vec<_>>(), (0..130).step_by(5).collect::<Vec<_>>());
    }
}
