"""A streaming standby's replay lag while its primary works: a bulk load
into a table with the index, CREATE INDEX on a loaded table, and deletes
with the VACUUM (and, for pg_milvus, the merge and garbage collection)
that follow; for pg_milvus on its embedded store (its objects travel in the
WAL), pgvector's HNSW and a table without an index, each in a database of
its own on one primary with one standby on this machine.

For each phase: the primary's rows/s or seconds, its WAL bytes, the
standby's lag sampled every 50 ms from pg_stat_replication (bytes not yet
replayed, and `replay_lag`), and the catch-up: seconds from the phase's end
until the standby has replayed everything it wrote.

    .venv/bin/python benches/replay_lag.py [--n 100000] [--dim 128] [--out bench-results/replay-lag]

Run by `make bench-replay` (scripts/bench.sh --replay), which installs the
release build first. pgvector is measured where `CREATE EXTENSION vector`
works."""

import argparse
import json
import statistics
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "scripts" / "cluster.sh"
BATCH = 2000


def cluster(*args):
    return subprocess.check_output([str(CLUSTER), *args], text=True).strip()


def connect(name, dbname="postgres"):
    host, port = cluster("host", name), cluster("port", name)
    return psycopg.connect(host=host, port=port, user="postgres", dbname=dbname, autocommit=True)


class Sampler:
    """Polls the primary's view of its standby every 50 ms while a phase runs."""

    def __init__(self, primary):
        self.conn = connect(primary)
        self.samples, self.stop = [], threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self):
        while not self.stop.is_set():
            row = self.conn.execute(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint,"
                " COALESCE(extract(epoch FROM replay_lag), 0)::float8 FROM pg_stat_replication").fetchone()
            if row:
                self.samples.append(row)
            time.sleep(0.05)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.conn.close()


def caught_up(primary_conn, standby_conn):
    """Seconds until the standby has replayed what the primary has written."""
    lsn = primary_conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
    start = time.time()
    while not standby_conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:
        time.sleep(0.01)
    return time.time() - start


def phase(primary, conn, standby_conn, work, then=None):
    """Runs `work()` (which returns what it did: rows, or None), then
    `then()` (the background work it caused), and measures them: seconds
    of each, WAL bytes, the lag while they ran, the catch-up."""
    wal = lambda: conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]  # noqa: E731
    before = wal()
    with Sampler(primary) as s:
        start = time.time()
        rows = work()
        seconds = time.time() - start
        if then:
            then()
        settled = time.time() - start - seconds
        catch_up = caught_up(conn, standby_conn)
    wal_bytes = conn.execute("SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)::bigint", (wal(), before)).fetchone()[0]
    lag_bytes = [b for b, _ in s.samples] or [0]
    lag_seconds = [t for _, t in s.samples] or [0]
    return {
        "seconds": round(seconds, 2),
        "rows_per_s": round(rows / seconds) if rows else None,
        "then_s": round(settled, 2) if then else None,
        "wal_mb": round(wal_bytes / 1e6, 1),
        "lag_mb_max": round(max(lag_bytes) / 1e6, 1),
        "lag_mb_median": round(statistics.median(lag_bytes) / 1e6, 2),
        "replay_lag_s_max": round(max(lag_seconds), 2),
        "catch_up_s": round(catch_up, 2),
        "samples": len(s.samples),
    }


def data(n, dim, seed=1):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-1, 1, (max(n // 100, 1), dim))
    return (centres[rng.integers(0, len(centres), n)] + 0.1 * rng.standard_normal((n, dim))).astype(np.float32)


def copy_rows(conn, rows, start=0):
    for b in range(0, len(rows), BATCH):
        with conn.cursor() as cur, cur.copy("COPY items (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "vector"])
            for i, v in enumerate(rows[b:b + BATCH]):
                copy.write_row((start + b + i, v))
    return len(rows)


def settle(conn):
    """Waits until the workers have flushed every sealed segment, have
    nothing left to merge and run no job: their flushes and merges belong
    to the phase that caused them."""
    while conn.execute(
            "SELECT (SELECT count(*) FROM milvus_compact('items_idx', dry_run => true))"
            " + (SELECT count(*) FROM milvus_jobs WHERE state = 'running')"
            " + (SELECT count(*) FROM milvus_segments('items_idx') WHERE state IN ('sealed', 'flushing'))").fetchone()[0]:
        time.sleep(0.2)


VARIANTS = {
    # name: (extension, index statement)
    "pg_milvus": ("pg_milvus", "CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)"),
    "pgvector HNSW": ("vector", "CREATE INDEX items_idx ON items USING hnsw (embedding vector_l2_ops)"),
    "no index": ("pg_milvus", None),
}


def run_variant(name, extension, index, rows, primary, standby):
    db = "replag_" + name.split()[0].lower().replace("-", "_")
    with connect(primary) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {db}")
        admin.execute(f"CREATE DATABASE {db}")
    conn = connect(primary, db)
    try:
        conn.execute(f"CREATE EXTENSION {extension}")
    except psycopg.Error as e:
        conn.close()
        return {"skipped": str(e).splitlines()[0]}
    register_vector(conn)
    dim = rows.shape[1]
    conn.execute(f"CREATE TABLE items (id bigint PRIMARY KEY, embedding vector({dim}))")
    milvus = index and "milvus" in index
    result = {}
    with connect(standby) as s:
        caught_up(conn, s)  # the standby has the database
    with connect(standby, db) as s:
        # 1. A bulk load with the index present.
        if index:
            conn.execute(index)

        result["bulk load" + (", index present" if index else "")] = phase(
            primary, conn, s, lambda: copy_rows(conn, rows), (lambda: settle(conn)) if milvus else None)
        # 2. CREATE INDEX on the loaded table.
        if index:
            conn.execute("DROP INDEX items_idx")
            conn.execute("CHECKPOINT")
            result["CREATE INDEX on the loaded table"] = phase(primary, conn, s, lambda: conn.execute(index) and None)
        # 3. A third of the rows deleted; VACUUM; for pg_milvus, the merges
        # and the garbage collection that follow.

        def deletes():
            conn.execute("DELETE FROM items WHERE id % 3 = 0")
            conn.execute("VACUUM items")
            if milvus:
                conn.execute("SELECT * FROM milvus_compact('items_idx')")
                conn.execute("SELECT * FROM milvus_gc('items_idx')")
        result["DELETE a third, VACUUM" + (", merge, GC" if milvus else "")] = phase(primary, conn, s, deletes)
    conn.close()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--out", default="bench-results/replay-lag")
    args = parser.parse_args()
    primary, standby = "replag-primary", "replag-standby"
    cluster("start", primary, "shared_buffers = '1GB'", "maintenance_work_mem = '1GB'", "milvus.naptime = 1",
            "milvus.gc_grace_period = 0", "wal_keep_size = '4GB'", "max_wal_size = '4GB'")
    try:
        cluster("standby", standby, primary)
        rows = data(args.n, args.dim)
        report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "n": args.n, "dim": args.dim,
                  "variants": {}}
        for name, (extension, index) in VARIANTS.items():
            report["variants"][name] = run_variant(name, extension, index, rows, primary, standby)
            print(name, json.dumps(report["variants"][name], indent=1), flush=True)
    finally:
        cluster("stop", standby)
        cluster("stop", primary)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    lines = [f"Replay lag of a streaming standby, {args.n:,} x {args.dim}, {report['date']}", "",
             "| index | phase | primary | then, until flushed and merged | WAL | lag max | lag median |"
             " replay_lag max | catch-up |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, phases in report["variants"].items():
        if "skipped" in phases:
            lines.append(f"| {name} | skipped: {phases['skipped']} | | | | | | | |")
            continue
        for what, m in phases.items():
            done = f"{m['rows_per_s']:,} rows/s" if m["rows_per_s"] else f"{m['seconds']} s"
            then = f"{m['then_s']} s" if m["then_s"] is not None else ""
            lines.append(f"| {name} | {what} | {done} | {then} | {m['wal_mb']} MB | {m['lag_mb_max']} MB | "
                         f"{m['lag_mb_median']} MB | {m['replay_lag_s_max']} s | {m['catch_up_s']} s |")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
