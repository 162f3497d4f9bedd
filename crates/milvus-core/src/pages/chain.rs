//! Page chains: walking them, one page share-locked at a time, what the
//! rows in them add up to, and VACUUM's deletion of rows from them.

use crate::distance::Metric;
use crate::element::{Row, Shape};
use crate::filter::{Bitset, Filter};
use crate::format::page::{Chunks, RowAssembler, RowPage};
use crate::search::PageHits;
use crate::search::PageRows;

use super::{Block, INVALID_BLOCK, Lock, LockedBuffer, Meta, Page, PageStore, Record, damaged};

/// Walks the chain from `head`, share-locking one page at a time, and calls
/// `f(block, page)` on each. The caller holds the meta page locked, so the
/// chain is not released meanwhile. A page that is not a chain page is
/// damage: an error says so.
pub fn walk<S: PageStore>(store: S, head: Block, mut f: impl FnMut(Block, Page)) {
    let mut block = head;
    while block != INVALID_BLOCK {
        let buffer = store.read(block, Lock::Share);
        let page = buffer.page();
        let Some(opaque) = page.chain() else { damaged(store, block, "not a page of a segment or manifest chain") };
        f(block, page);
        block = opaque.next;
        drop(buffer);
        store.check_for_interrupts();
    }
}

/// The blocks of a chain, in order.
pub fn blocks<S: PageStore>(store: S, head: Block) -> Vec<Block> {
    let mut blocks = Vec::new();
    walk(store, head, |b, _| blocks.push(b));
    blocks
}

/// A row page of `shape`, checked.
fn rows<S: PageStore>(store: S, block: Block, page: Page<'_>, shape: Shape) -> RowPage<'_> {
    page.rows(shape).unwrap_or_else(|e| damaged(store, block, e))
}

/// Calls `f(key, vector)` for every live row of a chain of row pages, in
/// chain order: rows of more dimensions than a page holds put together from
/// their chunks (an unfinished one, of an insert a crash cut short, left
/// out).
pub fn for_each_row<S: PageStore>(store: S, head: Block, shape: Shape, mut f: impl FnMut(u64, Row<'_>)) {
    match Chunks::of(shape) {
        None => walk(store, head, |b, p| {
            rows(store, b, p, shape).for_each_row(|_, key, v| f(key, v)).unwrap_or_else(|e| damaged(store, b, e))
        }),
        Some(chunks) => {
            let mut assembler = RowAssembler::new(chunks);
            walk(store, head, |b, p| {
                rows(store, b, p, shape)
                    .for_each_chunk(&chunks, |_, chunk| {
                        if let Some((key, v)) = assembler.push(chunk) {
                            f(key, v)
                        }
                    })
                    .unwrap_or_else(|e| damaged(store, b, e))
            });
        }
    }
}

/// Live rows in a chain of row pages.
pub fn count_rows<S: PageStore>(store: S, head: Block, shape: Shape) -> u64 {
    let mut rows = 0;
    for_each_row(store, head, shape, |_, _| rows += 1);
    rows
}

/// Whether a row page holds a live row (or chunk of one).
pub fn has_rows<S: PageStore>(store: S, block: Block, page: Page<'_>, shape: Shape) -> bool {
    page.has_rows(shape).unwrap_or_else(|e| damaged(store, block, e))
}

/// Whether the growing segment holds no row.
pub fn growing_is_empty<S: PageStore>(store: S, meta: &Meta) -> bool {
    if meta.growing_head != meta.growing_tail {
        return false;
    }
    let mut empty = true;
    walk(store, meta.growing_head, |b, p| empty &= !has_rows(store, b, p, meta.shape()));
    empty
}

/// The rows of a chain, copied out (what a flush hands to its job), with
/// their filter values where the index has filter columns.
pub fn read_rows<S: PageStore>(store: S, head: Block, shape: Shape) -> PageRows {
    let mut out = PageRows::new(shape);
    if !shape.values {
        for_each_row(store, head, shape, |key, v| out.push(key, v));
        return out;
    }
    walk(store, head, |b, p| {
        rows(store, b, p, shape)
            .for_each_row_values(|_, key, v, values| {
                let values = crate::format::values::decode(values).unwrap_or_else(|e| damaged(store, b, e));
                out.push_with(key, v, values)
            })
            .unwrap_or_else(|e| damaged(store, b, e))
    });
    out
}

/// The distances to `query` of the rows a scan must search in pages: the
/// growing segment and every sealed segment not yet flushed, computed as
/// each page is read (no row is copied out). Call with the meta page locked.
pub fn page_hits<S: PageStore>(store: S, meta: &Meta, metric: Metric, query: Row<'_>) -> PageHits {
    let shape = meta.shape();
    let mut hits = PageHits::default();
    for (_, head) in meta.in_pages() {
        match Chunks::of(shape) {
            None => walk(store, head, |b, p| {
                rows(store, b, p, shape)
                    .distances(metric, query, |k, d| hits.push(k, d))
                    .unwrap_or_else(|e| damaged(store, b, e))
            }),
            Some(_) => for_each_row(store, head, shape, |key, v| hits.push(key, metric.between(query, v))),
        }
    }
    hits
}

/// [`page_hits`] of a filtered scan: also which of the rows pass `filter`
/// (a bit per hit, in the hits' order), tested as each row is read.
pub fn page_hits_filtered<S: PageStore>(
    store: S,
    meta: &Meta,
    metric: Metric,
    query: Row<'_>,
    filter: &Filter,
) -> (PageHits, Bitset) {
    let shape = meta.shape();
    let mut hits = PageHits::default();
    let mut passing = Vec::new();
    for (_, head) in meta.in_pages() {
        walk(store, head, |b, p| {
            let test = |values: &[u8]| {
                let values = crate::format::values::decode(values).unwrap_or_else(|e| damaged(store, b, e));
                passing.push(filter.passes(&values))
            };
            rows(store, b, p, shape)
                .distances_and_values(metric, query, |k, d| hits.push(k, d), test)
                .unwrap_or_else(|e| damaged(store, b, e))
        });
    }
    let bits = Bitset::from_fn(passing.len(), |i| passing[i]);
    (hits, bits)
}

/// VACUUM's deletion: removes the items of rows `is_dead` says are dead
/// from the chain at `head`, one page (and one WAL record) at a time,
/// calling `between_pages` before each (VACUUM's cost delay). Every chunk
/// of a wide row goes with its key. Returns (items removed, live rows
/// kept). The caller holds what keeps the chain from being released (the
/// segment's lock, or the meta page).
pub fn delete_rows<S: PageStore>(
    store: S,
    head: Block,
    shape: Shape,
    is_dead: &dyn Fn(u64) -> bool,
    mut between_pages: impl FnMut(),
) -> (usize, usize) {
    let (mut removed, mut kept) = (0, 0);
    let mut block = head;
    while block != INVALID_BLOCK {
        between_pages();
        let mut buffer = store.read(block, Lock::Exclusive);
        let page = buffer.page();
        let Some(opaque) = page.chain() else { damaged(store, block, "not a page of a segment chain") };
        let mut dead: Vec<u16> = Vec::new();
        let mut visit = |offset: u16, key: u64, first: bool| {
            if is_dead(key) {
                dead.push(offset)
            } else if first {
                kept += 1
            }
        };
        let page_rows = rows(store, block, page, shape);
        let read = match Chunks::of(shape) {
            Some(chunks) => page_rows.for_each_chunk(&chunks, |o, c| visit(o, c.key, c.seq == 0)),
            None => page_rows.for_each_row(|o, key, _| visit(o, key, true)),
        };
        read.unwrap_or_else(|e| damaged(store, block, e));
        if !dead.is_empty() {
            let mut record = Record::start(store);
            record.page(&mut buffer).delete_items(&dead);
            record.finish();
            removed += dead.len();
        }
        block = opaque.next;
    }
    (removed, kept)
}
