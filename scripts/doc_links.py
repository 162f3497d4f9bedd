#!/usr/bin/env python3
"""Checks that every pointer into the docs leads somewhere.

The pointers, in the tracked sources, scripts, tests and docs:

- a path to a file of the repository, in a Markdown link `[text](path)`
  or written out as `docs/NAME.md`: the file must exist;
- a file named in backquotes (`lifecycle/flush.rs`, `scripts/bench.sh`,
  `mod.rs`): some tracked file's path must end with it (a name that is
  another project's file says whose: `hnsw_rs' src/hnsw.rs` is skipped
  when written as `hnsw_rs/src/hnsw.rs`, under OTHER_PROJECTS);
- a Rust module path into either crate (`milvus_core::graph::segment`,
  `crate::lifecycle::flush::seal`, in a comment or a doc): its modules
  must exist, and the item after them must be defined or re-exported
  there;
- the drawing of the skin in docs/design.md ("Code: a pure core and a
  thin skin") names every module of `src/` (its file's name, a folder's
  for its `mod.rs`), so a module added is a module drawn;
- a section cited by its heading, as the code and docs write it:
  `docs/NAME.md, "Heading"` or `docs/NAME.md ("Heading")`, or within one
  Markdown file `"Heading", below/above`: some heading of that file must
  hold the quoted words, in any case (a quote may be cut at a line's end).

  scripts/doc_links.py              list every broken pointer, exit 1 if any
  scripts/doc_links.py --root DIR   the same for a copy of the tree, every
                                    file under it (scripts/test_lints.py)
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LINK = re.compile(r"\[[^\]]*\]\(([^)#\s]+)(#[^)]*)?\)")
DOC_PATH = re.compile(r"\bdocs/[\w.-]+\.md\b")
# `docs/x.md, "Heading` or `docs/x.md ("Heading`: the heading may run on
# past the end of the line, so only its first words are kept.
SECTION = re.compile(r'(docs/[\w.-]+\.md)[,)]?\s*\(?\s*"([^"\n]+)')
NEARBY = re.compile(r'"([^"\n]+)"[,.]?\s*\(?(?:below|above)\b')
COMMENT = re.compile(r"^\s*(//[/!]?|#|--|\*)\s?")
# A file named in backquotes: a path of word characters ending in one of
# the project's own kinds of file.
FILE_NAME = re.compile(r"`((?:[\w.-]+/)*[\w-]+\.(?:rs|py|sh|md|sql|toml))`")
# Names of other projects' files, which the docs compare with (pgvector,
# hnswlib, hnsw_rs, pgrx, Milvus): written with the project as their first
# folder, they are not looked for here.
OTHER_PROJECTS = ("pgvector/", "hnswlib/", "hnsw_rs/", "pgrx/", "milvus/", "VectorChord/", "pgvectorscale/")
# What the benches write, never tracked: the reports and their folders.
GENERATED = ("bench-results/", "report.md", "report.json", "recall_qps.svg")
# A document named bare in prose (`DESIGN.md: "the log is..."`).
BARE_DOC = re.compile(r"(?<![\w/.`-])([A-Za-z][\w-]*\.md)\b")
# A module path into one of the crates.
MODULE_PATH = re.compile(r"\b(milvus_core|crate)((?:::[A-Za-z_]\w*)+)")
CORE, SKIN = Path("crates/milvus-core/src"), Path("src")


def tracked() -> list[Path]:
    """The files git tracks under ROOT; every file, for a copy that is not
    a repository."""
    keep = (".rs", ".md", ".py", ".sh", ".sql", ".toml", ".yml")
    if (ROOT / ".git").exists():
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        names = out.splitlines()
    else:
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file()]
    return [ROOT / p for p in names if p.endswith(keep) or p == "Makefile" or p.startswith(".ci/")]


def headings(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [re.sub(r"[`*]", "", m.group(1)).strip() for m in re.finditer(r"^#+\s+(.*)$", text, re.M)]


def has_heading(doc: Path, quoted: str) -> bool:
    words = " ".join(quoted.split()).lower()
    return any(words in " ".join(h.split()).lower() for h in headings(doc))


def joined(text: str) -> str:
    """The file's text with comment markers and line breaks folded, so a
    citation broken over two comment lines reads as one."""
    return " ".join(COMMENT.sub("", line) for line in text.splitlines())


def comments(path: Path, text: str) -> str:
    """What a reader reads of `path` as pointers: a Markdown file's prose
    (its fenced blocks are commands and records, such as a profile's
    symbols as they were), the comments of source (a Rust file's `//`
    lines, a script's `#` lines)."""
    if path.suffix == ".md":
        return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    marker = "//" if path.suffix == ".rs" else "#" if path.suffix in (".py", ".sh", ".toml") or path.name == "Makefile" else "--"
    return "\n".join(line for line in text.splitlines() if line.lstrip().startswith(marker))


def names_a_file(name: str, paths: list[str]) -> bool:
    return any(p == name or p.endswith("/" + name) for p in paths)


def module_file(root: Path, segs: list[str]) -> Path | None:
    """The file of the module `segs` under a crate's `root`, if it exists."""
    root = ROOT / root
    base = root.joinpath(*segs)
    for candidate in (base.with_suffix(".rs"), base / "mod.rs") if segs else (root / "lib.rs",):
        if candidate.exists():
            return candidate
    return None


def defines(text: str, name: str) -> bool:
    """Whether a module's text defines `name` or brings it in with `use`."""
    item = rf"\b(?:fn|struct|enum|trait|type|const|static|mod|union|macro_rules!)\s+{name}\b"
    used = rf"^\s*(?:pub(?:\([^)]*\))?\s+)?use\s[^;]*\b{name}\b"
    variant = rf"^\s*{name}\b\s*[({{,]"  # an enum's variant, a field
    return any(re.search(p, text, re.M) for p in (item, used, variant))


def module_path_ok(root: Path, path: list[str]) -> bool:
    """Whether `path` (after the crate) names modules that exist and, after
    them, an item the last module defines (an item's own member, a method
    or a variant, is not checked)."""
    segs: list[str] = []
    for seg in path:
        if module_file(root, segs + [seg]) is None:
            break
        segs.append(seg)
    rest = path[len(segs) :]
    if not rest:
        return True
    return defines(module_file(root, segs).read_text(encoding="utf-8"), rest[0])


def skin_or_core(rel: Path) -> Path | None:
    """The crate whose `crate::` a file's comments mean, if any."""
    if rel.parts[:1] == ("src",):
        return SKIN
    if rel.parts[:2] == ("crates", "milvus-core"):
        return CORE
    return None


def undrawn() -> list[str]:
    """The modules of the skin docs/design.md's drawing does not name."""
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    start = design.find("## Code: a pure core and a thin skin")
    drawing = re.search(r"```text\n(.*?)```", design[start:], re.S) if start >= 0 else None
    if drawing is None:
        return ["docs/design.md: no drawing of the code"]
    missing = []
    for path in sorted((ROOT / "src").rglob("*.rs")):
        rel = path.relative_to(ROOT / "src")
        if rel.parts[0] == "tests":
            continue  # the #[pg_test] modules, drawn as one layer's note
        name = path.parent.name if path.name == "mod.rs" else path.stem
        if not re.search(rf"\b{re.escape(name)}\b", drawing.group(1)):
            missing.append(f"docs/design.md: the drawing of the code does not name src/{rel}")
    return missing


def main() -> int:
    broken = undrawn()
    files = tracked()
    paths = [str(p.relative_to(ROOT)) for p in files]
    for path in files:
        if not path.exists() or path.name == Path(__file__).name:
            continue  # this file's docstring shows the forms with made-up names
        text = path.read_text(encoding="utf-8", errors="replace")
        rel = path.relative_to(ROOT)
        if path.suffix == ".md":
            for m in LINK.finditer(text):
                target = m.group(1)
                if re.match(r"^[a-z]+:", target):
                    continue
                if not (path.parent / target).exists() and not (ROOT / target).exists():
                    broken.append(f"{rel}: link to {target}, which does not exist")
        for m in DOC_PATH.finditer(text):
            if not (ROOT / m.group(0)).exists():
                broken.append(f"{rel}: names {m.group(0)}, which does not exist")
        for m in SECTION.finditer(joined(text)):
            doc, quoted = ROOT / m.group(1), m.group(2).strip()
            if not doc.exists():
                continue
            if not has_heading(doc, quoted):
                broken.append(f'{rel}: cites {m.group(1)}, "{quoted}": no such heading')
        read = comments(path, text)
        for m in FILE_NAME.finditer(read):
            name = m.group(1)
            if name.startswith(OTHER_PROJECTS + GENERATED) or names_a_file(name, paths):
                continue
            broken.append(f"{rel}: names `{name}`, which is no file of the tree")
        for m in BARE_DOC.finditer(read):
            if not names_a_file(m.group(1), paths) and not m.group(1).startswith(GENERATED):
                broken.append(f"{rel}: names {m.group(1)}, which is no file of the tree")
        for m in MODULE_PATH.finditer(read):
            crate, segs = m.group(1), m.group(2).split("::")[1:]
            root = CORE if crate == "milvus_core" else skin_or_core(rel)
            if root is not None and not module_path_ok(root, segs):
                broken.append(f"{rel}: names {crate}::{'::'.join(segs)}, which is not in the tree")
        if path.suffix == ".md":
            for m in NEARBY.finditer(joined(text)):
                if not has_heading(path, m.group(1)):
                    broken.append(f'{rel}: cites "{m.group(1)}" nearby: no such heading')
    for line in broken:
        print(line)
    if broken:
        print(f"{len(broken)} broken pointer(s) into the docs", file=sys.stderr)
        return 1
    print("doc links: every pointer leads somewhere")
    return 0


if __name__ == "__main__":
    if "--root" in sys.argv:
        ROOT = Path(sys.argv[sys.argv.index("--root") + 1]).resolve()
    sys.exit(main())
