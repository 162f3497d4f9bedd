//! What a filtered search may return: a set of passing rows per source.

use crate::filter::{Bitset, Plan};

/// The passing rows of each source (0 the pages, `i + 1` the `i`-th
/// segment), tombstones taken out, with their counts.
pub(super) struct Passing {
    sets: Vec<Bitset>,
    counts: Vec<usize>,
    /// Live rows of every source, passing or not.
    searched: usize,
}

impl Passing {
    /// The passing rows `sets` of sources holding `searched` live rows.
    pub(super) fn new(sets: Vec<Bitset>, searched: usize) -> Self {
        let counts = sets.iter().map(Bitset::count).collect();
        Passing { sets, counts, searched }
    }

    /// Live rows of every source, passing or not.
    pub(super) fn searched(&self) -> usize {
        self.searched
    }

    pub(super) fn allows(&self, source: usize, row: u32) -> bool {
        self.sets[source].contains(row as usize)
    }

    pub(super) fn count(&self, source: usize) -> usize {
        self.counts[source]
    }

    /// Passing rows across every source.
    pub(super) fn total(&self) -> usize {
        self.counts.iter().sum()
    }

    /// The passing rows of `source`, ascending.
    pub(super) fn rows(&self, source: usize) -> impl Iterator<Item = u32> + '_ {
        self.sets[source].rows().map(|r| r as u32)
    }
}

/// How a round's segment searches went.
#[derive(Debug, Default)]
pub(super) struct SegmentPlans {
    pub exact: usize,
    pub walked: usize,
}

impl SegmentPlans {
    pub(super) fn count(&mut self, plan: Plan) {
        match plan {
            Plan::Skip => {}
            Plan::Exact => self.exact += 1,
            Plan::Walk => self.walked += 1,
        }
    }
}
