//! Pages in memory: a [`PageStore`] whose WAL records change the pages
//! whole, and which can crash at any record boundary, for the tests of the
//! page protocol (`tests/page_protocol.rs`).
//!
//! The model of a crash is Postgres': what survives is exactly the pages as
//! the WAL records written so far left them (recovery replays them; a
//! block a relation extension added and no record wrote is a page of
//! zeros), while the free space map, which is not WAL-logged, may list any
//! block afterwards. [`MemoryPages::crash_after`] makes the record after
//! the `n`th panic with [`Crash`] before any of it is written, so the code
//! that was running stops exactly there, unwinding as an ERROR does
//! (records abandoned, locks released); [`MemoryPages::restart`] is the
//! recovery.
//!
//! Locks are checked, not waited for: the tests run one session, so a lock
//! that would wait is a lock taken twice (a self-deadlock on a server),
//! and fails the test. A record may register at most four pages, as
//! GenericXLog allows.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

use crate::format::page::{AlignedPage, PAGE_SIZE};

use super::{Block, Lock, LockedBuffer, PageStore, RawRecord};

/// Pages a WAL record may register (GenericXLog's `MAX_GENERIC_XLOG_PAGES`).
pub const MAX_RECORD_PAGES: usize = 4;

/// The panic payload of an injected crash.
#[derive(Debug)]
pub struct Crash;

/// An index relation's pages in memory.
pub struct MemoryPages {
    state: RefCell<State>,
}

#[derive(Default)]
struct State {
    pages: Vec<Box<AlignedPage>>,
    /// Shared lock counts, or `usize::MAX` for an exclusive lock.
    locks: HashMap<Block, usize>,
    free_space_map: BTreeSet<Block>,
    records: u64,
    crash_after: Option<u64>,
}

const EXCLUSIVE: usize = usize::MAX;

impl Default for MemoryPages {
    fn default() -> Self {
        MemoryPages::new()
    }
}

impl MemoryPages {
    /// An empty relation.
    pub fn new() -> MemoryPages {
        MemoryPages { state: RefCell::new(State::default()) }
    }

    /// WAL records written so far.
    pub fn records(&self) -> u64 {
        self.state.borrow().records
    }

    /// Crash at the record after the `n`th: it panics with [`Crash`], and
    /// none of it is written.
    pub fn crash_after(&self, n: u64) {
        self.state.borrow_mut().crash_after = Some(n);
    }

    /// Recovery after a crash: the pages are what the written records left;
    /// no lock is held (a crash ends every session); the free space map
    /// lists every block, the worst it can be after losing its changes.
    pub fn restart(&self) {
        let mut state = self.state.borrow_mut();
        assert!(state.locks.is_empty(), "locks outlived the crash: {:?}", state.locks);
        state.crash_after = None;
        state.free_space_map = (1..state.pages.len() as Block).collect();
    }

    /// A copy of `block`, to check.
    pub fn page(&self, block: Block) -> Box<AlignedPage> {
        self.state.borrow().pages[block as usize].clone()
    }

    /// Flips the bits of `mask` in byte `at` of `block`, as damage on disk
    /// would, outside any record.
    pub fn damage(&self, block: Block, at: usize, mask: u8) {
        self.state.borrow_mut().pages[block as usize].0[at] ^= mask;
    }

    /// Blocks the free space map lists.
    pub fn free_space_map(&self) -> Vec<Block> {
        self.state.borrow().free_space_map.iter().copied().collect()
    }

    fn lock(&self, block: Block, lock: Lock) -> MemoryBuffer<'_> {
        let mut state = self.state.borrow_mut();
        assert!((block as usize) < state.pages.len(), "block {block} is past the end of the relation");
        let held = state.locks.entry(block).or_default();
        match lock {
            Lock::Share => {
                assert!(*held != EXCLUSIVE, "block {block} share-locked while locked exclusively: a self-deadlock");
                *held += 1;
            }
            Lock::Exclusive => {
                assert!(*held == 0, "block {block} locked exclusively while locked: a self-deadlock");
                *held = EXCLUSIVE;
            }
        }
        let bytes = state.pages[block as usize].clone();
        MemoryBuffer { store: self, block, lock, bytes }
    }
}

impl<'s> PageStore for &'s MemoryPages {
    type Buffer = MemoryBuffer<'s>;
    type Record<'b>
        = MemoryRecord<'s, 'b>
    where
        Self: 'b;

    fn name(self) -> String {
        "memory".into()
    }

    fn blocks(self) -> Block {
        self.state.borrow().pages.len() as Block
    }

    fn read(self, block: Block, lock: Lock) -> MemoryBuffer<'s> {
        self.lock(block, lock)
    }

    fn try_lock_exclusive(self, block: Block) -> Option<MemoryBuffer<'s>> {
        let held = self.state.borrow().locks.get(&block).copied().unwrap_or(0);
        (held == 0).then(|| self.lock(block, Lock::Exclusive))
    }

    fn extend(self) -> MemoryBuffer<'s> {
        let block = {
            let mut state = self.state.borrow_mut();
            state.pages.push(AlignedPage::zeroed());
            state.pages.len() as Block - 1
        };
        self.lock(block, Lock::Exclusive)
    }

    fn free_candidate(self) -> Option<Block> {
        self.state.borrow_mut().free_space_map.pop_first()
    }

    fn record_free(self, block: Block) {
        self.state.borrow_mut().free_space_map.insert(block);
    }

    fn update_free_space_map(self) {}

    fn start_record<'b>(self) -> MemoryRecord<'s, 'b>
    where
        Self: 'b,
    {
        MemoryRecord { store: self, pages: Vec::new() }
    }

    fn check_for_interrupts(self) {}

    fn corrupted(self, message: String, detail: Option<String>) -> ! {
        panic!("{message} ({})", detail.unwrap_or_default())
    }
}

/// A locked block of [`MemoryPages`]: a copy of its page, which no one
/// else can change while the lock is held.
pub struct MemoryBuffer<'s> {
    store: &'s MemoryPages,
    block: Block,
    lock: Lock,
    bytes: Box<AlignedPage>,
}

impl LockedBuffer for MemoryBuffer<'_> {
    fn block(&self) -> Block {
        self.block
    }

    fn lock(&self) -> Lock {
        self.lock
    }

    fn bytes(&self) -> &[u8] {
        &self.bytes.0
    }
}

impl Drop for MemoryBuffer<'_> {
    fn drop(&mut self) {
        let mut state = self.store.state.borrow_mut();
        let held = state.locks.get_mut(&self.block).expect("a held lock");
        if *held == EXCLUSIVE || *held == 1 {
            state.locks.remove(&self.block);
        } else {
            *held -= 1;
        }
    }
}

/// A WAL record of [`MemoryPages`]: copies of the registered pages, written
/// to the store (and the buffers) when it finishes.
pub struct MemoryRecord<'s, 'b> {
    store: &'s MemoryPages,
    pages: Vec<(&'b mut MemoryBuffer<'s>, Box<AlignedPage>)>,
}

impl<'s, 'b> RawRecord<'b, MemoryBuffer<'s>> for MemoryRecord<'s, 'b> {
    fn register(&mut self, buffer: &'b mut MemoryBuffer<'s>, _full_image: bool) -> usize {
        assert!(self.pages.len() < MAX_RECORD_PAGES, "a WAL record registers at most {MAX_RECORD_PAGES} pages");
        assert!(self.pages.iter().all(|(b, _)| b.block != buffer.block), "block {} registered twice", buffer.block);
        let copy = buffer.bytes.clone();
        self.pages.push((buffer, copy));
        self.pages.len() - 1
    }

    fn page(&mut self, slot: usize) -> &mut [u8] {
        &mut self.pages[slot].1.0[..PAGE_SIZE]
    }

    fn finish(self) {
        {
            let mut state = self.store.state.borrow_mut();
            if state.crash_after == Some(state.records) {
                drop(state);
                std::panic::panic_any(Crash);
            }
            state.records += 1;
            for (buffer, copy) in &self.pages {
                state.pages[buffer.block as usize] = copy.clone();
            }
        }
        for (buffer, copy) in self.pages {
            buffer.bytes = copy;
        }
    }

    fn abort(self) {}
}
