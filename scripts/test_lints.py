"""The lints prove themselves: scripts/module_graph.py passes the tree as it
is and fails a copy of it given an upward import, a cycle, or a module no
layer names; scripts/doc_links.py passes the docs and comments as they are
and fails a copy naming a file, a module or an item that is not there.
Runs in scripts/lint.sh, without Postgres, in a second.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "module_graph.py"
DOC_LINKS = ROOT / "scripts" / "doc_links.py"
BENCH_DOC = ROOT / "scripts" / "bench_doc.py"


@pytest.fixture
def tree(tmp_path):
    """A copy of both crates' sources, to break."""
    shutil.copytree(ROOT / "src", tmp_path / "src")
    shutil.copytree(ROOT / "crates" / "milvus-core" / "src", tmp_path / "crates" / "milvus-core" / "src")
    return tmp_path


@pytest.fixture
def documented(tree):
    """The copy with every other tracked file beside the sources: the docs,
    the tests and scripts they name."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name in listed.splitlines():
        source, copy = ROOT / name, tree / name
        if source.is_file() and not copy.exists():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, copy)
    return tree


def doc_links(root):
    return subprocess.run([sys.executable, str(DOC_LINKS), "--root", str(root)], capture_output=True, text=True)


def check(root):
    return subprocess.run([sys.executable, str(SCRIPT), "--check", "--root", str(root)], capture_output=True, text=True)


def append(path, code):
    """Adds `code` after the module's doc comment: at the end it could fall
    inside the inline `mod tests`, which the lint rightly skips."""
    lines = path.read_text().splitlines(keepends=True)
    head = 0
    while head < len(lines) and lines[head].startswith("//!"):
        head += 1
    path.write_text("".join(lines[:head]) + "\n" + code + "\n" + "".join(lines[head:]))


def test_the_tree_as_it_is_passes(tree):
    out = check(tree)
    assert out.returncode == 0, out.stderr
    assert "every edge down or level, no cycle" in out.stdout


def test_an_upward_import_in_the_skin_fails(tree):
    # pages sit below the access method: a page module may not call into it.
    append(tree / "src" / "pages" / "rows.rs", "use crate::am::scan::ScanState;")
    out = check(tree)
    assert out.returncode == 1
    assert "upward edge in skin: pages/rows (pages, WAL, the manifest in pages) -> am/scan" in out.stderr


def test_an_upward_path_in_the_core_fails(tree):
    # A path in code, not a `use`: the segment states may not name the cache.
    append(tree / "crates" / "milvus-core" / "src" / "segment.rs", "fn f() { crate::cache::touch(); }")
    out = check(tree)
    assert out.returncode == 1
    assert "upward edge in core: core/segment (leaves) -> core/cache" in out.stderr


def test_a_cycle_within_one_layer_fails(tree):
    # Two modules of one layer may name each other's layer, not each other.
    core = tree / "crates" / "milvus-core" / "src"
    append(core / "distance.rs", "use crate::quant::Sq8;")
    append(core / "quant" / "mod.rs", "use crate::distance::Metric;")
    out = check(tree)
    assert out.returncode == 1
    assert "cycle in core: core/distance <-> core/quant" in out.stderr


def test_a_module_in_no_layer_fails(tree):
    (tree / "src" / "orphan.rs").write_text("pub fn f() {}\n")
    out = check(tree)
    assert out.returncode == 1
    assert "orphan is in no layer of the skin" in out.stderr


def test_comments_strings_and_inline_tests_are_not_edges(tree):
    append(tree / "src" / "pages" / "rows.rs", '// crate::am::scan::ScanState\nconst S: &str = "crate::am::scan";')
    (tree / "src" / "pages" / "probe.rs").write_text(
        "pub fn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::am::scan::ScanState;\n}\n"
    )
    out = check(tree)
    assert out.returncode == 0, out.stderr


def test_the_docs_as_they_are_pass(documented):
    out = doc_links(documented)
    assert out.returncode == 0, out.stdout


def test_a_missing_file_module_or_item_fails(documented):
    append(
        documented / "src" / "lifecycle" / "gc.rs",
        "//! See `lifecycle/collect.rs`, `milvus_core::hnsw::SegmentIndex`,\n"
        "//! [`crate::lifecycle::flush::publish_all`] and DESIGN.md.",
    )
    with open(documented / "docs" / "design.md", "a") as doc:
        doc.write("\nThe reader of 0.1's files is `graph/v0_2.rs` (`milvus_core::graph::v0_1::Nothing`).\n")
    out = doc_links(documented)
    assert out.returncode == 1
    for line in (
        "src/lifecycle/gc.rs: names `lifecycle/collect.rs`, which is no file of the tree",
        "src/lifecycle/gc.rs: names milvus_core::hnsw::SegmentIndex, which is not in the tree",
        "src/lifecycle/gc.rs: names crate::lifecycle::flush::publish_all, which is not in the tree",
        "src/lifecycle/gc.rs: names DESIGN.md, which is no file of the tree",
        "docs/design.md: names `graph/v0_2.rs`, which is no file of the tree",
        "docs/design.md: names milvus_core::graph::v0_1::Nothing, which is not in the tree",
    ):
        assert line in out.stdout, out.stdout


def test_other_projects_files_and_existing_items_pass(documented):
    append(
        documented / "src" / "lifecycle" / "gc.rs",
        "//! As `pgvector/src/hnswutils.c` and `hnsw_rs/src/hnsw.rs` do; see\n"
        "//! `lifecycle/flush.rs`, [`crate::lifecycle::flush::seal`], `milvus_core::graph::segment::SegmentIndex`.",
    )
    out = doc_links(documented)
    assert out.returncode == 0, out.stdout


def test_a_module_the_drawing_does_not_name_fails(documented):
    (documented / "src" / "lifecycle" / "rebalance.rs").write_text("//! Not drawn.\n")
    out = doc_links(documented)
    assert out.returncode == 1
    assert "docs/design.md: the drawing of the code does not name src/lifecycle/rebalance.rs" in out.stdout, out.stdout


def test_a_benchmark_table_edited_by_hand_fails(documented):
    check = [sys.executable, str(BENCH_DOC), "--root", str(documented), "--check"]
    assert subprocess.run(check, capture_output=True, text=True).returncode == 0
    doc = documented / "docs" / "benchmarks.md"
    text = doc.read_text()
    start = text.index("| INSERT, 1,000 rows a statement, rows/s | ")
    row = text[start : text.index("\n", start)]
    cells = row.split(" | ")
    cells[1] = "1" + cells[1]  # pg_milvus' figure, a digit more than its report says
    doc.write_text(text.replace(row, " | ".join(cells), 1))
    out = subprocess.run(check, capture_output=True, text=True)
    assert out.returncode == 1
    assert "the tables are not what docs/results/ says" in out.stdout, out.stdout
