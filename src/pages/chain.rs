//! Page chains: walking them, one page share-locked at a time, and what
//! the rows in them add up to.

use milvus_core::Metric;
use milvus_core::element::{Row, Shape};
use milvus_core::format::page::PageHits;
use milvus_core::format::page::{Chunks, RowAssembler};
use milvus_core::search::PageRows;

use super::{Block, INVALID_BLOCK, Index, Lock, Meta, Page};

/// Walks the chain from `head`, share-locking one page at a time, and calls
/// `f(block, page)` on each. The caller holds the meta page locked, so the
/// chain is not released meanwhile. A page that is not a chain page is
/// damage: an error says so.
pub fn walk(index: Index, head: Block, mut f: impl FnMut(Block, Page)) {
    let mut block = head;
    while block != INVALID_BLOCK {
        let buffer = index.read(block, Lock::Share);
        let page = buffer.page();
        let Some(opaque) = page.chain() else {
            index.corrupted(format!("block {block} is not a page of a segment or manifest chain"));
        };
        f(block, page);
        block = opaque.next;
        drop(buffer);
        pgrx::check_for_interrupts!();
    }
}

/// The blocks of a chain, in order.
pub fn blocks(index: Index, head: Block) -> Vec<Block> {
    let mut blocks = Vec::new();
    walk(index, head, |b, _| blocks.push(b));
    blocks
}

/// Calls `f(key, vector)` for every live row of a chain of row pages, in
/// chain order: rows of more dimensions than a page holds put together from
/// their chunks (an unfinished one, of an insert a crash cut short, left
/// out).
pub fn for_each_row(index: Index, head: Block, shape: Shape, mut f: impl FnMut(u64, Row<'_>)) {
    match Chunks::of(shape) {
        None => walk(index, head, |_, p| p.for_each_row(shape, |_, key, v| f(key, v))),
        Some(chunks) => {
            let mut rows = RowAssembler::new(chunks);
            walk(index, head, |_, p| {
                p.for_each_chunk(&chunks, |_, chunk| {
                    if let Some((key, v)) = rows.push(chunk) {
                        f(key, v)
                    }
                })
            });
        }
    }
}

/// Live rows in a chain of row pages.
pub fn count_rows(index: Index, head: Block, shape: Shape) -> u64 {
    let mut rows = 0;
    for_each_row(index, head, shape, |_, _| rows += 1);
    rows
}

/// Whether the growing segment holds no row.
pub fn growing_is_empty(index: Index, meta: &Meta) -> bool {
    if meta.growing_head != meta.growing_tail {
        return false;
    }
    let mut empty = true;
    walk(index, meta.growing_head, |_, p| empty &= !p.has_rows(meta.shape()));
    empty
}

/// The rows of a chain, copied out (what a flush hands to its job).
pub fn read_rows(index: Index, head: Block, shape: Shape) -> PageRows {
    let mut rows = PageRows::new(shape);
    for_each_row(index, head, shape, |key, v| rows.push(key, v));
    rows
}

/// The distances to `query` of the rows a scan must search in pages: the
/// growing segment and every sealed segment not yet flushed, computed as
/// each page is read (no row is copied out). Call with the meta page locked.
pub fn page_hits(index: Index, meta: &Meta, metric: Metric, query: Row<'_>) -> PageHits {
    let shape = meta.shape();
    let mut hits = PageHits::default();
    for (_, head) in meta.in_pages() {
        match Chunks::of(shape) {
            None => walk(index, head, |_, p| p.distances(shape, metric, query, &mut hits)),
            Some(_) => for_each_row(index, head, shape, |key, v| hits.push(key, metric.between(query, v))),
        }
    }
    hits
}
