#!/usr/bin/env python3
"""docs/benchmarks.md's tables, from the benches' own reports.

Each documented workload's last `report.json` is kept in docs/results/
(the bench writes it there, scripts/bench.sh); this script renders one
table per workload from them, with its date, machine and command, between
the markers in docs/benchmarks.md. The prose around the tables is written
by hand; the figures never are.

    scripts/bench_doc.py                  rewrite the tables from docs/results/
    scripts/bench_doc.py --take DIR NAME  keep DIR/report.json as NAME's
                                          report, then rewrite the tables
    scripts/bench_doc.py --check          exit 1 if the tables are not what
                                          docs/results/ says (make lint)
    scripts/bench_doc.py --root DIR ...   the same for a copy of the tree
                                          (scripts/test_lints.py)
"""

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
DOC = ROOT / "docs" / "benchmarks.md"
BEGIN = "<!-- tables: scripts/bench_doc.py writes from here to the end marker, from docs/results/ -->"
END = "<!-- end of the tables -->"

# The documented workloads, in the order the doc shows them: the name of
# the kept report, its title, and the command that makes it.
WORKLOADS = [
    ("bench", "100k x 128 under L2", "make bench"),
    ("bench-768", "50k x 768 under cosine", "make bench-768"),
    ("bench-filters", "Filters at 100k x 128", "make bench-filters"),
    ("bench-768-filters", "Filters at 50k x 768 under cosine", "make bench-768-filters"),
    ("bench-pg18", "100k x 128 under L2 on PostgreSQL 18", "make bench PG=18"),
    ("bench-replay", "A standby's replay lag, 100k x 128", "make bench-replay"),
]
MILVUS, PGVECTOR, PLAIN = "pg_milvus", "pgvector hnsw", "no index"


def num(v, digits=0):
    if v is None:
        return ""
    return f"{v:,.{digits}f}"


def ratio(a, b):
    """a / b, as the last column shows it: more than 1 where pg_milvus is ahead."""
    if a is None or b is None or not b:
        return ""
    x = a / b
    return f"{x:,.0f}x" if x >= 10 else f"{x:.2f}x"


def header(r, command):
    m = r["machine"]
    version = " ".join(m["postgres"].split()[:2])
    date = m.get("date", "")[:16]
    return (
        f"{date} UTC, `{command}`: {m['cpu']} ({m['cores']} cores, {m['memory_gb']:.1f} GB), {version}. "
        f"{r['rows']:,} rows x {r['dim']}, {r['dataset']}; {r['metric']}; HNSW m {r['m']}, "
        f"ef_construction {r['ef_construction']}; {r['queries']} held-out queries, recall@10 against exact "
        f"search; QPS the median of {r['repeats']} runs."
    )


def queries(target, label, clients=1):
    """{ef_search: run} of a phase."""
    return {q["ef_search"]: q for q in target["queries"] if q["label"] == label and q["clients"] == clients}


def matched(mine, theirs):
    """For each of `theirs` (ef -> run): the least ef of `mine` whose recall
    reaches it, as (their ef, their run, my ef, my run)."""
    out = []
    for ef, run in sorted(theirs.items()):
        reaching = [(e, q) for e, q in sorted(mine.items()) if q["recall_at_10"] >= run["recall_at_10"] - 1e-9]
        if reaching:
            out.append((ef, run, *reaching[0]))
    return out


def table(r):
    mv, pv = targets(r)
    plain = next((x for x in r["targets"] if x["target"] == PLAIN), None)
    rows = []

    def row(figure, a, b, c="", ra=""):
        rows.append(f"| {figure} | {a} | {b} | {c} | {ra} |")

    def scalar(figure, key, digits=0, lower_is_better=False):
        a, b = (x.get(key) if x else None for x in (mv, pv))
        c = plain.get(key) if plain else None
        if a is None and b is None:
            return
        row(figure, num(a, digits), num(b, digits), num(c, digits), ratio(b, a) if lower_is_better else ratio(a, b))

    scalar("COPY, rows/s", "copy_rows_per_s")
    scalar("INSERT, 1,000 rows a statement, rows/s", "insert_batch_rows_per_s")
    scalar("INSERT, one row a statement, rows/s", "insert_single_rows_per_s")
    scalar("time to indexed, s (after the last INSERT; pgvector, and with --filters-only both: CREATE INDEX)", "time_to_indexed_s", 2, True)
    scalar("DELETE 10% + VACUUM, s", "delete_vacuum_s", 2, True)
    scalar("first query of a connection, ms", "cold_query_ms", 2, True)
    scalar("text output of every row, rows/s", "text_output_rows_per_s")
    if mv and pv and mv.get("index_bytes") and pv.get("index_bytes"):
        a, b = mv["index_bytes"] / 2**20, pv["index_bytes"] / 2**20
        row("index size, MB (pg_milvus: its pages)", num(a), num(b), "", ratio(b, a))
    if mv and pv:
        a, b = mv.get("stream"), pv.get("stream")
        if a and b:
            # What each inserter held beside what was asked: at 768
            # dimensions pgvector's falls short, and the row then compares
            # unequal insert work.
            row(
                f"streaming at {a['target_rows_per_s']:,.0f} rows/s asked, one searcher: "
                "QPS / p99 ms / recall / rows inserted a second",
                f"{num(a['qps'])} / {a['p99_ms']:.2f} / {a['recall_at_10']:.3f} / {num(a['insert_rows_per_s'])}",
                f"{num(b['qps'])} / {b['p99_ms']:.2f} / {b['recall_at_10']:.3f} / {num(b['insert_rows_per_s'])}",
                "",
                ratio(a["qps"], b["qps"]),
            )
    filters(mv, pv, row)
    head = "| figure | pg_milvus | pgvector 0.8.6 | no index | pg_milvus ahead by |\n|---|---:|---:|---:|---:|"
    return head + "\n" + "\n".join(rows)


def targets(r):
    t = {x["target"]: x for x in r["targets"]}
    return t.get(MILVUS), t.get(PGVECTOR)


def matched_table(r):
    """pgvector's points beside pg_milvus' least ef_search reaching their
    recall, all sealed, one client and several."""
    mv, pv = targets(r)
    if not mv or not pv:
        return None
    rows = []
    for clients in (1, r.get("clients", 4)):
        mine, theirs = queries(mv, "all sealed", clients), queries(pv, "all sealed", clients)
        for ef, run, my_ef, mine_run in matched(mine, theirs):
            rows.append(
                f"| {clients} | {run['recall_at_10']:.3f} (ef {ef}) | {num(run['qps'])} | "
                f"{mine_run['recall_at_10']:.3f} (ef {my_ef}) | {num(mine_run['qps'])} | "
                f"{ratio(mine_run['qps'], run['qps'])} |"
            )
    if not rows:
        return None
    head = (
        "| clients | pgvector's recall@10 | pgvector QPS | pg_milvus' recall@10 | pg_milvus QPS | pg_milvus ahead by |\n"
        "|---:|---:|---:|---:|---:|---:|"
    )
    return head + "\n" + "\n".join(rows)


def crowd_table(r):
    """The crowd sweep: each count of connections searching alone and while
    rows stream in, pg_milvus beside pgvector."""
    mv, pv = targets(r)
    if not mv or not pv:
        return None
    theirs = {(c["connections"], c.get("target_rows_per_s")): c for c in pv.get("crowds", [])}
    rows = []
    for c in mv.get("crowds", []):
        rate = c.get("target_rows_per_s")
        o = theirs.get((c["connections"], rate))
        if rate is None or o is None:
            continue
        stream = "none" if not rate else f"{num(c['insert_rows_per_s'])} / {num(o['insert_rows_per_s'])}"
        rows.append(
            f"| {c['connections']} | {stream} | {num(c['qps'])} / {c['p99_ms']:.1f} | "
            f"{num(o['qps'])} / {o['p99_ms']:.1f} | {ratio(c['qps'], o['qps'])} | {ratio(o['p99_ms'], c['p99_ms'])} |"
        )
    if not rows:
        return None
    head = (
        "| connections | rows streaming in a second, pg_milvus / pgvector | pg_milvus QPS / p99 ms | "
        "pgvector QPS / p99 ms | QPS ahead by | p99 ahead by |\n|---:|---:|---:|---:|---:|---:|"
    )
    return head + "\n" + "\n".join(rows)


def filters(mv, pv, row):
    """The filtered phases: each pg_milvus variant beside pgvector's best at
    that share (its HNSW index, or a btree on the filter column), at
    ef_search 40, one client."""
    if not mv or not pv:
        return
    shares = [q["label"] for q in mv["queries"] if q["label"].startswith("filter ") and "," not in q["label"]]
    for share in dict.fromkeys(shares):
        best = max(
            (q for q in pv["queries"] if q["label"] in (share, f"{share}, btree on bucket")),
            key=lambda q: q["qps"],
            default=None,
        )
        if best is None:
            continue
        for q in mv["queries"]:
            if not (q["label"] == share or q["label"].startswith(share + ",")):
                continue
            variant = q["label"][len(share) :].lstrip(", ") or "the vector's index alone"
            row(
                f"{share.removeprefix('filter ')} of the rows pass the filter, {variant}: QPS (recall)",
                f"{num(q['qps'])} ({q['recall_at_10']:.3f})",
                f"{num(best['qps'])} ({best['recall_at_10']:.3f}; {best['label'][len(share):].lstrip(', ') or 'HNSW'})",
                "",
                ratio(q["qps"], best["qps"]),
            )


def replay_table(r, command):
    head = (
        f"{r['date']}, `{command}`: a primary and its streaming standby on this machine, {r['n']:,} rows x {r['dim']}.\n\n"
        "| index | phase | seconds | WAL (MB) | replay lag at most (s) | standby caught up after (s) |\n"
        "|---|---|---:|---:|---:|---:|"
    )
    rows = []
    for variant, phases in r["variants"].items():
        for phase, p in phases.items():
            if p is not None:
                rows.append(
                    f"| {variant} | {phase} | {p['seconds']:,.2f} | {p['wal_mb']:,.0f} | "
                    f"{p['replay_lag_s_max']:.2f} | {p['catch_up_s']:.2f} |"
                )
    return head + "\n" + "\n".join(rows)


def render():
    parts = [BEGIN, ""]
    reports = {
        name: json.loads((RESULTS / f"{name}.json").read_text())
        for name, _, _ in WORKLOADS
        if (RESULTS / f"{name}.json").exists()
    }
    leading = [
        ("Crowds: 1 to 100 connections searching, alone and while rows stream in", crowd_table),
        ("QPS at matched recall, every segment sealed", matched_table),
    ]
    for title, render_table in leading:
        for name, workload, command in WORKLOADS:
            t = render_table(reports[name]) if name in reports and name != "bench-replay" else None
            if t is None:
                continue
            parts.append(f"### {title}: {workload} (`{command}`)")
            parts.append("")
            parts.append(header(reports[name], command))
            parts.append("")
            parts.append(t)
            parts.append("")
    for name, title, command in WORKLOADS:
        if name not in reports:
            continue
        r = reports[name]
        parts.append(f"### {title} (`{command}`)")
        parts.append("")
        if name == "bench-replay":
            parts.append(replay_table(r, command))
        else:
            parts.append(header(r, command))
            parts.append("")
            parts.append(table(r))
        parts.append("")
    parts.append(END)
    return "\n".join(parts)


def spliced(doc):
    i, j = doc.index(BEGIN), doc.index(END) + len(END)
    return doc[:i] + render() + doc[j:]


def main(args):
    doc = DOC.read_text()
    if args[:1] == ["--check"]:
        if spliced(doc) != doc:
            print("docs/benchmarks.md: the tables are not what docs/results/ says; run scripts/bench_doc.py")
            return 1
        print("benchmark tables: as docs/results/ says")
        return 0
    if args[:1] == ["--take"]:
        source, name = Path(args[1]) / "report.json", args[2]
        if name not in {w[0] for w in WORKLOADS}:
            print(f"{name}: not a documented workload", file=sys.stderr)
            return 2
        RESULTS.mkdir(exist_ok=True)
        shutil.copy(source, RESULTS / f"{name}.json")
    DOC.write_text(spliced(doc))
    return 0


if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv[:1] == ["--root"]:
        ROOT = Path(argv[1]).resolve()
        RESULTS, DOC = ROOT / "docs" / "results", ROOT / "docs" / "benchmarks.md"
        argv = argv[2:]
    sys.exit(main(argv))
