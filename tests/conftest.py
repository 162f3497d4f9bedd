"""End-to-end tier: drives a real PostgreSQL cluster with pg_milvus preloaded.

The cluster is started fresh (scripts/cluster.sh) once per test session; the
extension must already be installed (`make test` installs it first).
"""

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from pgvector.psycopg import register_vector

ROOT = Path(__file__).resolve().parent.parent
DIMS = 64  # of the `items` table the index tests share
CLUSTER = ROOT / "scripts" / "cluster.sh"
# The PostgreSQL under test (scripts/pg-env.sh exports these; 15 without it).
PG_CONFIG = os.environ.get("PG_CONFIG", "/usr/bin/pg_config")
PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_MAJOR = int(os.environ.get("PG_MILVUS_PG", "15"))


def sharedir() -> Path:
    """Where the server under test finds extensions' control and SQL files."""
    return Path(subprocess.check_output([PG_CONFIG, "--sharedir"], text=True).strip()) / "extension"


STANDIN = ROOT / "tests" / "fixtures" / "pgvector_standin"


@contextmanager
def pgvector_installable(conn):
    """Makes `CREATE EXTENSION vector` possible while it lasts: pgvector if
    it is installed, else tests/fixtures/pgvector_standin, an extension
    named `vector` with pgvector's type name, binary layout and distance
    functions, taken out of the installation again afterwards (left there,
    it would pass for pgvector to `make bench`, which then finds no `hnsw`).
    Yields which: "pgvector" or "stand-in"."""
    real = conn.execute(
        "SELECT count(*) FROM pg_available_extension_versions WHERE name = 'vector' AND version <> 'standin'"
    ).fetchone()[0]
    if real:
        yield "pgvector"
        return
    for f in STANDIN.iterdir():
        shutil.copyfile(f, sharedir() / f.name)
    try:
        yield "stand-in"
    finally:
        for f in STANDIN.iterdir():
            (sharedir() / f.name).unlink(missing_ok=True)


class Cluster:
    def __init__(self, name: str, settings: list[str] = (), env: dict | None = None, pg: int | None = None):
        """Starts a fresh cluster; `settings` are extra postgresql.conf lines,
        `env` extra variables of the server's environment, `pg` the major
        version (the one under test if None)."""
        self.name = name
        self.env = self._environment(pg)
        self.port = int(self._cluster(["start", name, *settings], env={**self.env, **(env or {})}))
        self.host = self._cluster(["host", name])

    @staticmethod
    def _environment(pg: int | None) -> dict:
        if pg is None:
            return dict(os.environ)
        # scripts/pg-env.sh derives the rest from the version.
        environment = {k: v for k, v in os.environ.items() if k not in ("PG_CONFIG", "PG_BIN", "PG_MILVUS_RUN")}
        return {**environment, "PG_MILVUS_PG": str(pg)}

    def _cluster(self, args: list[str], env: dict | None = None) -> str:
        """Runs scripts/cluster.sh for this cluster's version; its output."""
        return subprocess.check_output([CLUSTER, *args], text=True, env=env or self.env).strip()

    @classmethod
    def _made(cls, name: str, *command: str, pg: int | None = None) -> "Cluster":
        c = cls.__new__(cls)
        c.name = name
        c.env = cls._environment(pg)
        c.port = int(c._cluster(list(command)))
        c.host = c._cluster(["host", name])
        return c

    @classmethod
    def standby_of(cls, name: str, primary: "Cluster", *basebackup_args: str) -> "Cluster":
        """A streaming replica of `primary` (pg_basebackup, `-X stream`
        unless `basebackup_args` say otherwise), started."""
        return cls._made(name, "standby", name, primary.name, *basebackup_args)

    @classmethod
    def restored(cls, name: str, backup: Path, archive: Path, settings: list[str] = ()) -> "Cluster":
        """Archive recovery of the tar base backup in `backup` from the WAL
        in `archive`, to the target `settings` name (the end if none), then
        promoted."""
        return cls._made(name, "restore", name, str(backup), str(archive), *settings)

    @classmethod
    def upgraded(cls, name: str, old: "Cluster", *options: str, settings: list[str] = ()) -> "Cluster":
        """`old`, a PostgreSQL 15 cluster, stopped and upgraded with pg_upgrade
        (`options`: --link, --copy) into a new cluster of the version under
        test with `settings` in its postgresql.conf, started."""
        return cls._made(name, "upgrade", name, old.name, *options, "--", *settings)

    def backup(self, into: Path, *basebackup_args: str):
        """A base backup of this cluster in tar form (its WAL fetched unless
        `basebackup_args` say otherwise)."""
        self._cluster(["backup", str(into), self.name, *basebackup_args])

    def connect(self, dbname: str = "postgres", **kwargs) -> psycopg.Connection:
        # prepare_threshold=None: psycopg would otherwise prepare a statement
        # after its fifth run, and a prepared plan keeps ignoring later changes
        # of enable_indexscan: the "sequential scan" truth of a recall check
        # would silently become the index scan it is checked against.
        return psycopg.connect(
            host=self.host, port=self.port, user="postgres", dbname=dbname,
            autocommit=True, prepare_threshold=None, **kwargs,
        )

    def stop(self):
        self._cluster(["stop", self.name])

    def crash(self):
        """kill -9 of the postmaster and all its backends."""
        self._cluster(["crash", self.name])

    def restart(self):
        """Starts the cluster again; crash recovery replays the WAL."""
        self._cluster(["restart", self.name])

    def promote(self):
        """A standby becomes a primary (pg_ctl waits until it has)."""
        self._cluster(["promote", self.name])

    def rewind_from(self, source: "Cluster"):
        """pg_rewind of this former primary (stopped first) from `source`,
        then started as its standby."""
        self._cluster(["rewind", self.name, source.name])


def replayed(primary, standby):
    """Waits until `standby` has replayed what `primary` has written so far
    (two connections)."""
    lsn = primary.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
    deadline = time.time() + 60
    while time.time() < deadline:
        if standby.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:
            return
        time.sleep(0.1)
    raise AssertionError("the standby did not catch up")


@pytest.fixture(scope="session")
def cluster():
    # No background workers here: these tests drive seal, flush and
    # compaction by hand and check exact states (invariant 8: everything works
    # without workers). The workers have their own cluster (test_workers.py).
    c = Cluster(os.environ.get("PG_MILVUS_E2E_CLUSTER", "e2e"), ["milvus.max_workers = 0"])
    yield c
    c.stop()


@pytest.fixture
def db(cluster, request):
    """A fresh database with the extension created, dropped afterwards."""
    name = "t_" + request.node.name.lower()[:50].replace("[", "_").replace("]", "").replace("-", "_")
    with cluster.connect() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    conn = cluster.connect(name)
    conn.execute("CREATE EXTENSION pg_milvus")
    yield conn
    conn.close()
    with cluster.connect() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def conn(db):
    """`db` with pgvector's client types and an empty `items` table, which
    autovacuum leaves alone: the tests VACUUM it by hand and check what
    that did, and an autovacuum ANALYZE running at that moment holds a
    snapshot that keeps the rows just deleted from being removed (so no
    tombstones), as pgvector's own recall tests guard against."""
    register_vector(db)
    db.execute(
        f"CREATE TABLE items (id bigint PRIMARY KEY, category int, embedding vector({DIMS}))"
        " WITH (autovacuum_enabled = false)"
    )
    return db


# S3: a moto server, for the tests of a shared store.

BUCKET = "milvus-test"


class S3Server:
    """A moto server; `pause()` freezes it (SIGSTOP): connections are
    accepted by the kernel and never answered, as with a hung or
    partitioned S3 endpoint. `resume()` lets it go on, objects intact."""

    def __init__(self, proc, endpoint):
        self.proc, self.endpoint = proc, endpoint

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)


@pytest.fixture(scope="module")
def s3():
    """A moto S3 server on a free loopback port, with the test bucket."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([str(ROOT / ".venv" / "bin" / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(endpoint, timeout=1)
            break
        except OSError:
            if time.time() > deadline:
                proc.kill()
                raise
            time.sleep(0.2)
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/{BUCKET}", method="PUT"), timeout=5)
    server = S3Server(proc, endpoint)
    yield server
    server.resume()
    proc.terminate()
    proc.wait(timeout=10)
