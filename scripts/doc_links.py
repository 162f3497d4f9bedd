#!/usr/bin/env python3
"""Checks that every pointer into the docs leads somewhere.

Two kinds of pointer, in the tracked sources, scripts, tests and docs:

- a path to a file of the repository, in a Markdown link `[text](path)`
  or written out as `docs/NAME.md`: the file must exist;
- a section cited by its heading, as the code and docs write it:
  `docs/NAME.md, "Heading"` or `docs/NAME.md ("Heading")`, or within one
  Markdown file `"Heading", below/above`: some heading of that file must
  hold the quoted words, in any case (a quote may be cut at a line's end).

  scripts/doc_links.py           list every broken pointer, exit 1 if any
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


def tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    keep = (".rs", ".md", ".py", ".sh", ".sql", ".toml", ".yml")
    return [ROOT / p for p in out.splitlines() if p.endswith(keep) or p == "Makefile" or p.startswith(".ci/")]


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


def main() -> int:
    broken = []
    files = tracked()
    for path in files:
        if not path.exists() or path == Path(__file__).resolve():
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
    sys.exit(main())
