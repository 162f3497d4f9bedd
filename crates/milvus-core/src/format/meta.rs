//! The meta page: block 0 of every milvus index, and the state machine of
//! the page chains it names.
//!
//! The growing segment lives in a chain of WAL-logged row pages; a seal
//! turns that chain into a **sealed chain** and starts a new growing one; a
//! flush publishes the sealed rows in the manifest and stops referencing
//! their chain, which is then **released**: listed here until emptied page
//! by page, so that a crash anywhere leaves every page either reachable from
//! this page or free (none leaks). The manifest itself is a chain, written
//! copy-on-write; switching to a new one releases the old.
//!
//! This module is the whole of that logic, as plain Rust over the page's
//! byte layout ([`MetaPage`] is `repr(C)`, what the skin maps onto block 0):
//! the skin only locks the page, registers it with the WAL record, and calls
//! these methods. The sequences the crash matrix found (a commit with every
//! released slot taken, a seal at the limit of sealed chains, a meta page
//! older than the page count) are its unit tests.

use crate::distance::Metric;
use crate::element::{Element, Shape};
use crate::error::{SqlError, SqlState};
use crate::policy::seal::{GrowingStats, SealPolicy, seal_by_rows};
use crate::segment::{SealReason, SegmentId};

/// A block number of the index relation (Postgres' `BlockNumber`).
pub type Block = u32;

/// The end of a chain (Postgres' `InvalidBlockNumber`).
pub const INVALID_BLOCK: Block = u32::MAX;

/// "No chain" in a released slot: block 0 is the meta page, never part of a
/// chain.
pub const NO_BLOCK: Block = 0;

/// "MVMP": a pg_milvus meta page.
pub const META_MAGIC: u32 = 0x4d56_4d50;
pub const META_VERSION: u32 = 1;

/// Sealed segments that may wait for their flush at once; at the limit, the
/// growing segment does not seal until a flush succeeds.
pub const MAX_SEALED: usize = 64;

/// Chains waiting to be emptied at once: a commit releases at most two (the
/// old manifest and a flushed segment's rows).
pub const MAX_RELEASED: usize = 4;

/// Where the meta page's contents start in block 0: after the page
/// header (`PageGetContents`).
pub const META_OFFSET: usize = 24;

/// The meta page's contents, as stored (docs/format.md, "Index pages").
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MetaPage {
    pub magic: u32,
    pub version: u32,
    pub dims: u32,
    /// [`Metric::code`].
    pub metric: u8,
    /// [`Element::code`]: 0 (f32) in meta pages older than halfvec.
    pub element: u8,
    /// 1 when a row in pages carries its filter values after its vector
    /// (an index with filter columns); 0 in meta pages older than them.
    pub row_values: u8,
    pub _reserved: u8,
    pub growing_segment: u64,
    pub growing_head: Block,
    pub growing_tail: Block,
    /// First page of the manifest chain, and the manifest's length in bytes.
    pub manifest_head: Block,
    pub manifest_len: u32,
    /// Sealed segments whose rows are still in pages (not yet flushed).
    pub sealed_count: u32,
    pub _reserved2: u32,
    pub sealed: [SealedChain; MAX_SEALED],
    /// Heads of chains a commit stopped referencing and that are not emptied
    /// yet; [`NO_BLOCK`] for none. Appended after the first fields of
    /// format 1, whose meta pages had zeros here.
    pub released: [Block; MAX_RELEASED],
    /// Pages in the growing chain (all full but the tail: rows have one
    /// size), so an insert knows when the segment is at its size limit
    /// without walking it. 0 in meta pages older than the field: unknown
    /// until the next seal.
    pub growing_pages: u32,
    /// Where `repr(C)` would pad: named, so every byte of the struct is a
    /// field and a page holding it has no uninitialised byte.
    pub _reserved3: u32,
}

const _: () = assert!(std::mem::size_of::<MetaPage>() == 1096);

/// The page chain of a sealed, not yet flushed, segment.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SealedChain {
    pub segment: u64,
    pub head: Block,
    pub _reserved: u32,
}

/// What a chain the meta page reaches holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChainKind {
    Manifest,
    Growing,
    Sealed,
    Released,
}

impl ChainKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChainKind::Manifest => "manifest",
            ChainKind::Growing => "growing",
            ChainKind::Sealed => "sealed",
            ChainKind::Released => "released",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetaError {
    #[error("meta page magic {magic:#x}, version {version}")]
    NotOurs { magic: u32, version: u32 },
    #[error("{MAX_SEALED} sealed segments are waiting for their flush")]
    TooManySealed,
    #[error("every released slot is taken: empty a released chain first")]
    NoReleaseRoom,
    #[error("segment {0} has no sealed chain")]
    NotSealed(SegmentId),
}

impl SqlError for MetaError {
    fn sqlstate(&self) -> SqlState {
        match self {
            MetaError::NotOurs { .. } => SqlState::IndexCorrupted,
            MetaError::TooManySealed | MetaError::NoReleaseRoom | MetaError::NotSealed(_) => SqlState::InternalError,
        }
    }
}

impl MetaPage {
    /// The meta page of a new index: an empty growing segment in
    /// `growing_block`, the manifest at `manifest_head`.
    pub fn new(
        shape: Shape,
        metric: Metric,
        growing: SegmentId,
        growing_block: Block,
        manifest_head: Block,
        manifest_len: u32,
    ) -> MetaPage {
        MetaPage {
            magic: META_MAGIC,
            version: META_VERSION,
            dims: shape.dims as u32,
            metric: metric.code(),
            element: shape.element.code(),
            row_values: shape.values as u8,
            _reserved: 0,
            growing_segment: growing.0,
            growing_head: growing_block,
            growing_tail: growing_block,
            manifest_head,
            manifest_len,
            sealed_count: 0,
            _reserved2: 0,
            sealed: [SealedChain::default(); MAX_SEALED],
            released: [NO_BLOCK; MAX_RELEASED],
            growing_pages: 1,
            _reserved3: 0,
        }
    }

    /// The meta page held in the contents of a page's `bytes` (from
    /// [`META_OFFSET`]); `None` if they are too short or misaligned.
    pub fn view(bytes: &[u8]) -> Option<&MetaPage> {
        let contents = bytes.get(META_OFFSET..META_OFFSET + std::mem::size_of::<MetaPage>())?;
        // SAFETY: MetaPage is repr(C), made only of integers and arrays of
        // integers with no padding (the `_reserved` fields fill it): every
        // bit pattern is a valid value, and the pointer is checked aligned.
        let (head, mid, _) = unsafe { contents.align_to::<MetaPage>() };
        if head.is_empty() { mid.first() } else { None }
    }

    /// [`MetaPage::view`], to change.
    pub fn view_mut(bytes: &mut [u8]) -> Option<&mut MetaPage> {
        let contents = bytes.get_mut(META_OFFSET..META_OFFSET + std::mem::size_of::<MetaPage>())?;
        // SAFETY: as in `view`; writes through it store integers only.
        let (head, mid, _) = unsafe { contents.align_to_mut::<MetaPage>() };
        if head.is_empty() { mid.first_mut() } else { None }
    }

    /// Whether this is a meta page of ours, of this version, with sane counts.
    pub fn check(&self) -> Result<(), MetaError> {
        let sane = Metric::from_code(self.metric).is_some()
            && Element::from_code(self.element).is_some()
            && self.row_values <= 1
            && self.sealed_count as usize <= MAX_SEALED;
        if self.magic != META_MAGIC || self.version != META_VERSION || !sane {
            return Err(MetaError::NotOurs { magic: self.magic, version: self.version });
        }
        Ok(())
    }

    /// The metric; call on a checked page.
    pub fn metric(&self) -> Metric {
        Metric::from_code(self.metric).expect("a checked meta page")
    }

    pub fn dims(&self) -> usize {
        self.dims as usize
    }

    /// How the index lays out a vector; call on a checked page.
    pub fn shape(&self) -> Shape {
        Shape::new(self.dims(), Element::from_code(self.element).expect("a checked meta page"))
            .with_values(self.row_values == 1)
    }

    pub fn growing(&self) -> SegmentId {
        SegmentId(self.growing_segment)
    }

    pub fn sealed(&self) -> &[SealedChain] {
        &self.sealed[..(self.sealed_count as usize).min(MAX_SEALED)]
    }

    pub fn sealed_chain(&self, segment: SegmentId) -> Option<SealedChain> {
        self.sealed().iter().find(|c| c.segment == segment.0).copied()
    }

    /// The segments whose rows are in pages, with the head of each chain:
    /// the growing one first, then the sealed ones in seal order.
    pub fn in_pages(&self) -> impl Iterator<Item = (SegmentId, Block)> + '_ {
        std::iter::once((self.growing(), self.growing_head))
            .chain(self.sealed().iter().map(|c| (SegmentId(c.segment), c.head)))
    }

    /// Heads of the released chains not yet emptied.
    pub fn released(&self) -> impl Iterator<Item = Block> + '_ {
        self.released.iter().copied().filter(|&b| b != NO_BLOCK)
    }

    /// Every chain the meta page reaches, head first, with its kind.
    pub fn chains(&self) -> impl Iterator<Item = (ChainKind, Block)> + '_ {
        [(ChainKind::Manifest, self.manifest_head), (ChainKind::Growing, self.growing_head)]
            .into_iter()
            .chain(self.sealed().iter().map(|c| (ChainKind::Sealed, c.head)))
            .chain(self.released().map(|head| (ChainKind::Released, head)))
    }

    /// Whether a row page of `segment` belongs to a chain in use (growing or
    /// sealed); a page of any other segment outside the released chains is
    /// an orphan.
    pub fn is_live_segment(&self, segment: u64) -> bool {
        segment == self.growing_segment || self.sealed().iter().any(|c| c.segment == segment)
    }

    /// The rows of the growing segment as the page count knows them: every
    /// page but the tail is full, so when the tail is full too this is
    /// exact. `None` for a meta page older than the count.
    pub fn growing_rows(&self, policy: &SealPolicy) -> Option<u64> {
        (self.growing_pages > 0).then(|| policy.rows_in_pages(self.growing_pages as u64))
    }

    /// The size rule, asked when the growing tail is full and a row needs a
    /// new page: `Some(reason)` to seal instead, the rule the workers apply
    /// to counted rows too ([`seal_by_rows`]), here by the rows the pages
    /// have room for (which the reason says: the rows in them may be fewer).
    /// `None` when the page count is unknown.
    pub fn needs_seal(&self, policy: &SealPolicy) -> Option<SealReason> {
        let capacity = self.growing_rows(policy)?;
        seal_by_rows(&GrowingStats { rows: capacity, bytes: 0, created_at: 0, last_insert_at: 0 }, policy)
            .map(|_| SealReason::Pages { pages: self.growing_pages as u64, capacity, max_rows: policy.max_rows })
    }

    /// Whether another sealed chain fits.
    pub fn can_seal(&self) -> bool {
        (self.sealed_count as usize) < MAX_SEALED
    }

    /// Seals the growing segment: its chain becomes a sealed chain, and
    /// `next` starts growing in `first_block` (an empty row page). Returns the
    /// sealed chain; at [`MAX_SEALED`] nothing changes.
    pub fn seal(&mut self, next: SegmentId, first_block: Block) -> Result<SealedChain, MetaError> {
        if !self.can_seal() {
            return Err(MetaError::TooManySealed);
        }
        let chain = SealedChain { segment: self.growing_segment, head: self.growing_head, _reserved: 0 };
        self.sealed[self.sealed_count as usize] = chain;
        self.sealed_count += 1;
        self.growing_segment = next.0;
        self.growing_head = first_block;
        self.growing_tail = first_block;
        self.growing_pages = 1;
        Ok(chain)
    }

    /// The growing chain got a new tail page.
    pub fn extend(&mut self, new_tail: Block) {
        self.growing_tail = new_tail;
        if self.growing_pages > 0 {
            self.growing_pages += 1;
        }
    }

    /// The growing segment, one empty page, moves to `block` (VACUUM
    /// packing the file before truncating it).
    pub fn move_growing(&mut self, block: Block) {
        self.growing_head = block;
        self.growing_tail = block;
        self.growing_pages = 1;
    }

    /// A flush published `segment`: its sealed chain is no longer referenced
    /// and is released (in the same WAL record). The others keep their
    /// order.
    pub fn finish_flush(&mut self, segment: SegmentId) -> Result<SealedChain, MetaError> {
        let n = self.sealed().len();
        let at = self.sealed().iter().position(|c| c.segment == segment.0).ok_or(MetaError::NotSealed(segment))?;
        if !self.has_release_room(1) {
            return Err(MetaError::NoReleaseRoom);
        }
        let chain = self.sealed[at];
        self.sealed.copy_within(at + 1..n, at);
        self.sealed[n - 1] = SealedChain::default();
        self.sealed_count -= 1;
        self.release(chain.head)?;
        Ok(chain)
    }

    /// Points the meta page at the manifest chain at `head` (`len` bytes)
    /// and releases the chain it pointed at.
    pub fn switch_manifest(&mut self, head: Block, len: u32) -> Result<(), MetaError> {
        if !self.has_release_room(1) {
            return Err(MetaError::NoReleaseRoom);
        }
        let old = std::mem::replace(&mut self.manifest_head, head);
        self.manifest_len = len;
        self.release(old)
    }

    /// Lists the chain at `head` as released; an empty chain needs no slot.
    pub fn release(&mut self, head: Block) -> Result<(), MetaError> {
        if head == INVALID_BLOCK || head == NO_BLOCK {
            return Ok(());
        }
        let slot = self.released.iter().position(|&b| b == NO_BLOCK).ok_or(MetaError::NoReleaseRoom)?;
        self.released[slot] = head;
        Ok(())
    }

    /// Whether `n` more chains can be released.
    pub fn has_release_room(&self, n: usize) -> bool {
        self.released().count() + n <= MAX_RELEASED
    }

    /// The first released chain: its slot and head page.
    pub fn first_released(&self) -> Option<(usize, Block)> {
        self.released.iter().position(|&b| b != NO_BLOCK).map(|slot| (slot, self.released[slot]))
    }

    /// The head page of the chain in `slot` was emptied: the chain now
    /// starts at `next` (the slot is free once the chain ends).
    pub fn advance_released(&mut self, slot: usize, next: Block) {
        self.released[slot] = if next == INVALID_BLOCK { NO_BLOCK } else { next };
    }
}

#[cfg(test)]
mod tests {
    use std::mem::{offset_of, size_of};

    use super::*;

    fn fresh() -> MetaPage {
        MetaPage::new(Shape::f32(128), Metric::L2, SegmentId(1), 1, 2, 100)
    }

    const POLICY: SealPolicy = SealPolicy {
        max_rows: 1000,
        rows_per_page: 30,
        pages_per_row: 1,
        max_bytes: u64::MAX,
        idle_secs: None,
        lifetime_secs: None,
    };

    /// Meta pages on disk keep their layout: every field where format 1
    /// put it, `released` and `growing_pages` after.
    #[test]
    fn the_layout_is_the_stored_one() {
        assert_eq!(offset_of!(MetaPage, growing_segment), 16);
        assert_eq!(offset_of!(MetaPage, manifest_head), 32);
        assert_eq!(offset_of!(MetaPage, sealed), 48);
        assert_eq!(size_of::<SealedChain>(), 16);
        assert_eq!(offset_of!(MetaPage, released), 48 + 16 * MAX_SEALED);
        assert_eq!(offset_of!(MetaPage, growing_pages), 48 + 16 * MAX_SEALED + 4 * MAX_RELEASED);
        assert_eq!(offset_of!(MetaPage, _reserved3), 1092);
        assert_eq!(size_of::<MetaPage>(), 1096);
    }

    #[test]
    fn a_page_of_another_kind_is_refused() {
        assert_eq!(fresh().check(), Ok(()));
        let other = MetaPage { magic: 0x1234, ..fresh() };
        assert_eq!(other.check(), Err(MetaError::NotOurs { magic: 0x1234, version: META_VERSION }));
        assert!(MetaPage { metric: 99, ..fresh() }.check().is_err());
        assert!(MetaPage { sealed_count: MAX_SEALED as u32 + 1, ..fresh() }.check().is_err());
    }

    /// Seal, flush, release: the chains the meta page reaches along the way.
    #[test]
    fn a_segment_goes_from_growing_to_released() {
        let mut m = fresh();
        m.extend(5);
        m.extend(6);
        assert_eq!((m.growing_head, m.growing_tail, m.growing_pages), (1, 6, 3));
        let sealed = m.seal(SegmentId(2), 7).unwrap();
        assert_eq!(sealed, SealedChain { segment: 1, head: 1, _reserved: 0 });
        assert_eq!(m.in_pages().collect::<Vec<_>>(), vec![(SegmentId(2), 7), (SegmentId(1), 1)]);
        assert!(m.is_live_segment(1) && m.is_live_segment(2) && !m.is_live_segment(3));

        m.finish_flush(SegmentId(1)).unwrap();
        m.switch_manifest(9, 120).unwrap();
        assert_eq!(m.sealed(), &[]);
        let chains: Vec<_> = m.chains().collect();
        assert_eq!(
            chains,
            vec![(ChainKind::Manifest, 9), (ChainKind::Growing, 7), (ChainKind::Released, 1), (ChainKind::Released, 2)]
        );
        // Emptying page by page: the chain at 1 goes on at 5, then 6, then ends.
        let (slot, head) = m.first_released().unwrap();
        assert_eq!(head, 1);
        m.advance_released(slot, 5);
        m.advance_released(slot, 6);
        m.advance_released(slot, INVALID_BLOCK);
        assert_eq!(m.first_released(), Some((1, 2)));
        m.advance_released(1, INVALID_BLOCK);
        assert_eq!(m.first_released(), None);
        assert!(m.has_release_room(MAX_RELEASED));
    }

    /// The crash matrix: a crash after commits and before their chains were
    /// emptied leaves every slot taken; the next commit finds no room and
    /// changes nothing until a chain is emptied.
    #[test]
    fn a_commit_with_every_slot_taken_waits_for_a_drain() {
        let mut m = fresh();
        for head in 10..10 + MAX_RELEASED as Block {
            m.release(head).unwrap();
        }
        let before = m;
        assert!(!m.has_release_room(1));
        assert_eq!(m.switch_manifest(50, 10), Err(MetaError::NoReleaseRoom));
        assert_eq!((m.manifest_head, m.manifest_len), (before.manifest_head, before.manifest_len));
        m.seal(SegmentId(2), 30).unwrap();
        assert_eq!(m.finish_flush(SegmentId(1)), Err(MetaError::NoReleaseRoom));
        assert_eq!(m.sealed().len(), 1, "nothing changed");
        let (slot, _) = m.first_released().unwrap();
        m.advance_released(slot, INVALID_BLOCK);
        m.switch_manifest(50, 10).unwrap();
        assert_eq!(m.released().collect::<Vec<_>>(), vec![2, 11, 12, 13]);
    }

    #[test]
    fn releasing_an_empty_chain_takes_no_slot() {
        let mut m = fresh();
        m.release(INVALID_BLOCK).unwrap();
        m.release(NO_BLOCK).unwrap();
        assert_eq!(m.released().count(), 0);
    }

    #[test]
    fn at_the_limit_of_sealed_chains_a_seal_changes_nothing() {
        let mut m = fresh();
        for s in 0..MAX_SEALED as u64 {
            m.seal(SegmentId(s + 2), 100 + s as Block).unwrap();
        }
        let before = m;
        assert!(!m.can_seal());
        assert_eq!(m.seal(SegmentId(999), 5), Err(MetaError::TooManySealed));
        assert_eq!((m.growing_segment, m.growing_head), (before.growing_segment, before.growing_head));
        // A flush of one in the middle makes room; the others keep their order.
        m.finish_flush(SegmentId(10)).unwrap();
        let order: Vec<u64> = m.sealed().iter().map(|c| c.segment).collect();
        assert_eq!(order.len(), MAX_SEALED - 1);
        assert!(order.windows(2).all(|w| w[0] < w[1]) && !order.contains(&10));
        assert!(m.can_seal());
        assert_eq!(m.finish_flush(SegmentId(10)), Err(MetaError::NotSealed(SegmentId(10))));
    }

    /// One rule with the workers': a segment is full when its pages hold
    /// the most whole pages of rows that `segment_max_rows` allows.
    #[test]
    fn an_insert_seals_where_the_policy_does() {
        let mut m = fresh();
        // 1000 rows at 30 a page: 33 pages (990 rows) is the capacity.
        for block in 2..=33 {
            assert_eq!(m.needs_seal(&POLICY), None, "{} pages", m.growing_pages);
            m.extend(block);
        }
        assert_eq!(m.growing_pages, 33);
        let full = SealReason::Pages { pages: 33, capacity: 990, max_rows: 1000 };
        assert_eq!(m.needs_seal(&POLICY), Some(full.clone()));
        assert_eq!(full.to_string(), "pages full: 33 pages hold 990 rows (limit 1000)");
        let counted = GrowingStats { rows: 990, bytes: 0, created_at: 0, last_insert_at: 0 };
        assert_eq!(
            POLICY.check(&counted, 0),
            Some(SealReason::Rows { rows: 990, max_rows: 1000 }),
            "the workers' check of counted rows agrees"
        );
        // A segment smaller than a page seals at one page.
        let small = SealPolicy { max_rows: 10, ..POLICY };
        assert_eq!(fresh().needs_seal(&small), Some(SealReason::Pages { pages: 1, capacity: 30, max_rows: 10 }));
    }

    /// A meta page written before the page count (zeros there) never seals
    /// by pages, and extending it keeps the count unknown; the next seal
    /// starts counting.
    #[test]
    fn a_meta_page_without_a_page_count_seals_by_the_workers() {
        let mut m = MetaPage { growing_pages: 0, ..fresh() };
        for block in 2..100 {
            m.extend(block);
        }
        assert_eq!((m.growing_pages, m.needs_seal(&POLICY)), (0, None));
        m.seal(SegmentId(2), 200).unwrap();
        assert_eq!(m.growing_pages, 1);
    }
}
