#!/usr/bin/env python3
"""The module graph of the two crates: which file uses which, and whether it keeps the
layers (an ordered list per crate, below) and has no cycle.

Each `.rs` file is a module. A file depends on another when its code (not its
comments, strings or inline `mod tests`) names an item of it: through `use`,
a `crate::`/`super::`/`self::` path, or a child module it declares. Re-exports
(`pub use x::Item` in a `mod.rs` or `lib.rs`) are followed to the file that
defines the item. Two crates are read: the skin (src/lib.rs) and the core
(crates/milvus-core/src/lib.rs), which cannot name the skin: it is its own
crate, and the skin depends on it.

    python3 scripts/module_graph.py           # the edges, file by file
    python3 scripts/module_graph.py --check   # exit 1 on an upward edge, a
                                              # module in no layer, or a cycle
    python3 scripts/module_graph.py --layers  # the layers and their modules
    python3 scripts/module_graph.py --check --root DIR
                                              # the same for a copy of the tree
                                              # (scripts/test_lints.py)
"""

import re
import sys
from pathlib import Path

CRATES = {"skin": Path("src"), "core": Path("crates/milvus-core/src")}

# Each crate's layers, lowest first: a module may name modules of its own
# layer or of one below, never of one above. A module is in the layer of the
# longest path naming it ("am" holds am/*, "format/page" only itself); ""
# is the crate root (lib.rs). docs/design.md, "Code: a pure core and a thin
# skin", draws them.
LAYERS = {
    "skin": [
        ("settings and errors", ["error", "gucs"]),
        ("shared memory, test pauses", ["shared", "pause"]),
        ("object storage and the cache, work off the main thread", ["storage", "off_thread"]),
        ("the types", ["types"]),
        ("pages, WAL, the manifest in pages", ["pages"]),
        ("catalogs", ["catalog"]),
        ("the index's options, filter columns and scan reports", ["am/options", "am/filter_columns", "am/explain"]),
        ("the segments' lifecycle: jobs, locks, objects in pages, loaded segments", ["lifecycle"]),
        ("the access method's callbacks", ["am"]),
        ("SQL functions, workers, hooks", ["api", "worker", "hooks"]),
        ("_PG_init and the #[pg_test] modules", ["", "tests"]),
    ],
    "core": [
        ("leaves", ["error", "segment", "pause", "policy", "policy/retry", "policy/schedule"]),
        ("values and their rules",
         ["format", "element", "distance", "vector", "sparse", "synthetic", "graph", "quant", "inverted", "filter",
          "policy/seal", "policy/compaction"]),
        ("formats, the meta page, stores",
         ["format/delta", "format/insert", "format/manifest", "format/index", "format/inverted", "format/page", "format/meta",
          "format/ranges", "storage"]),
        ("segments in memory: a sealed segment's graph, 0.1's files, the cache", ["graph/segment", "graph/v0_1", "cache"]),
        ("search", ["search"]),
        ("the page protocol", ["pages"]),
        ("jobs and the planner's costs", ["jobs", "policy/cost"]),
        ("the crate root", [""]),
    ],
}


def layer_of(crate, module):
    """(index, name) of the layer holding `module`, or None."""
    best = None
    for i, (layer, prefixes) in enumerate(LAYERS[crate.name]):
        for p in prefixes:
            parts = tuple(p.split("/")) if p else ()
            if not parts and module:
                continue  # "" is the crate root only, not a prefix of all
            if module[: len(parts)] == parts and (best is None or len(parts) > best[0]):
                best = (len(parts), i, layer)
    return None if best is None else best[1:]


def strip(text):
    """The code of `text`: comments, string and char literals blanked."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        m = re.match(r'r(#*)"', text[i:])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            out.append('""')
            i = n if end < 0 else end + 1 + len(m.group(1))
            continue
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
            continue
        if c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:]):
            i += len(re.match(r"'(\\.|[^\\'])'", text[i:]).group(0))
            out.append("' '")
            continue
        out.append(c)
        i += 1
    return "".join(out)


def without_test_module(code):
    """Drops an inline `mod tests { ... }` (and its cfg attribute): tests may
    reach anywhere without making the code's modules depend on each other."""
    m = re.search(r"(#\[cfg\([^\]]*test[^\]]*\)\]\s*)?(#\[[^\]]*\]\s*)*mod tests\s*\{", code)
    return code if m is None else code[: m.start()]


def expand_use(tree):
    """`a::{b, c::{d, self}}` -> [a::b, a::c::d, a::c]."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+\w+", "", tree))
    m = re.match(r"^(.*?)\{(.*)\}$", tree)
    if not m:
        return [re.sub(r"::self$", "", tree)]
    prefix, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for p in filter(None, parts):
        for sub in expand_use(p):
            out.append(prefix.rstrip(":") if sub == "self" else prefix + sub)
    return out


class Crate:
    def __init__(self, name, root):
        self.name, self.root = name, root
        self.files = {}  # module path tuple -> Path
        for path in sorted(root.rglob("*.rs")):
            rel = path.relative_to(root).with_suffix("").parts
            if rel[-1] in ("mod", "lib"):
                rel = rel[:-1]
            self.files[tuple(rel)] = path
        self.code = {m: without_test_module(strip(p.read_text())) for m, p in self.files.items()}
        self.reexports = {}
        for module, code in self.code.items():
            if self.files[module].name in ("mod.rs", "lib.rs"):
                for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", code):
                    for path in expand_use(m.group(1)):
                        segs = path.split("::")
                        self.reexports[(module, segs[-1])] = self.absolute(module, segs)

    def children(self, module):
        return {m[-1] for m in self.files if len(m) == len(module) + 1 and m[:-1] == module}

    def absolute(self, module, segs):
        """A path as written in `module`, made absolute (a tuple), or None
        for another crate's."""
        if not segs:
            return None
        head, rest = segs[0], segs[1:]
        if head == "crate":
            return tuple(rest)
        if head == "self":
            return module + tuple(rest)
        if head == "super":
            base = module
            while segs and segs[0] == "super":
                base, segs = base[:-1], segs[1:]
            return base + tuple(segs)
        if head in self.children(module):
            return module + tuple(segs)
        return None

    def resolve(self, target, depth=0):
        """The file an absolute path lands in: its longest module prefix,
        through re-exports."""
        for k in range(len(target), -1, -1):
            prefix = target[:k]
            if prefix in self.files:
                rest = target[k:]
                if rest and (prefix, rest[0]) in self.reexports and depth < 8:
                    again = self.reexports[(prefix, rest[0])]
                    if again is not None:
                        return self.resolve(again + tuple(rest[1:]), depth + 1)
                return prefix
        return None

    def edges(self):
        out = {m: set() for m in self.files}
        for module, code in self.code.items():
            paths = []
            for m in re.finditer(r"\buse\s+([^;]+);", code):
                paths += [p.split("::") for p in expand_use(m.group(1))]
            body = re.sub(r"\buse\s+[^;]+;", "", code)
            for m in re.finditer(r"\b(?:crate|super|self|[a-z_][a-z0-9_]*)(?:::[A-Za-z_][A-Za-z0-9_]*)+", body):
                paths.append(m.group(0).split("::"))
            for segs in paths:
                segs = [s for s in segs if s and s != "*"]
                target = self.absolute(module, segs)
                if target is None:
                    continue
                file = self.resolve(target)
                if file is not None and file != module:
                    out[module].add(file)
        return out


def name(crate, module):
    return "/".join(((crate.name,) if crate.name == "core" else ()) + module) or "lib"


def cycles(graph):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return found


def main():
    args = sys.argv[1:]
    root = Path(__file__).resolve().parent.parent
    if "--root" in args:
        i = args.index("--root")
        root = Path(args[i + 1])
        del args[i : i + 2]
    mode = args[0] if args else "--edges"
    failed = False
    for crate in (Crate(n, root / r) for n, r in CRATES.items()):
        graph = crate.edges()
        if mode == "--edges":
            for m in sorted(graph):
                print(f"{name(crate, m)} -> {', '.join(sorted(name(crate, t) for t in graph[m])) or '-'}")
        elif mode == "--layers":
            for i, (layer, _) in enumerate(LAYERS[crate.name]):
                members = sorted(name(crate, m) for m in graph if layer_of(crate, m)[0] == i)
                print(f"{crate.name} {i} {layer}: {', '.join(members)}")
        for m in sorted(graph):
            if layer_of(crate, m) is None:
                failed = True
                print(f"{name(crate, m)} is in no layer of the {crate.name}: add it to LAYERS", file=sys.stderr)
                continue
            for t in sorted(graph[m]):
                (i, a), (j, b) = layer_of(crate, m), layer_of(crate, t) or (len(LAYERS[crate.name]), "?")
                if j > i:
                    failed = True
                    print(f"upward edge in {crate.name}: {name(crate, m)} ({a}) -> {name(crate, t)} ({b})",
                          file=sys.stderr)
        for comp in cycles(graph):
            failed = True
            print(f"cycle in {crate.name}: " + " <-> ".join(name(crate, m) for m in comp), file=sys.stderr)
    if mode == "--check" and not failed:
        print("module graph: every edge down or level, no cycle")
    sys.exit(1 if failed and mode == "--check" else 0)


if __name__ == "__main__":
    main()
