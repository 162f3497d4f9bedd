"""End-to-end tier: drives a real PostgreSQL cluster with pg_milvus preloaded.

The cluster is started fresh (scripts/cluster.sh) once per test session; the
extension must already be installed (`make test` installs it first).
"""

import os
import subprocess
import time
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


class Cluster:
    def __init__(self, name: str, settings: list[str] = (), env: dict | None = None):
        """Starts a fresh cluster; `settings` are extra postgresql.conf lines,
        `env` extra variables of the server's environment."""
        self.name = name
        environment = {**os.environ, **(env or {})}
        self.port = int(subprocess.check_output([CLUSTER, "start", name, *settings], text=True, env=environment).strip())
        self.host = subprocess.check_output([CLUSTER, "host", name], text=True).strip()

    @classmethod
    def _made(cls, name: str, *command: str) -> "Cluster":
        c = cls.__new__(cls)
        c.name = name
        c.port = int(subprocess.check_output([CLUSTER, *command], text=True).strip())
        c.host = subprocess.check_output([CLUSTER, "host", name], text=True).strip()
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

    def backup(self, into: Path, *basebackup_args: str):
        """A base backup of this cluster in tar form (its WAL fetched unless
        `basebackup_args` say otherwise)."""
        subprocess.run([CLUSTER, "backup", str(into), self.name, *basebackup_args], check=True)

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
        subprocess.run([CLUSTER, "stop", self.name], check=True)

    def crash(self):
        """kill -9 of the postmaster and all its backends."""
        subprocess.run([CLUSTER, "crash", self.name], check=True)

    def restart(self):
        """Starts the cluster again; crash recovery replays the WAL."""
        subprocess.run([CLUSTER, "restart", self.name], check=True)

    def promote(self):
        """A standby becomes a primary (pg_ctl waits until it has)."""
        subprocess.run([CLUSTER, "promote", self.name], check=True)

    def rewind_from(self, source: "Cluster"):
        """pg_rewind of this former primary (stopped first) from `source`,
        then started as its standby."""
        subprocess.run([CLUSTER, "rewind", self.name, source.name], check=True)


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
    """`db` with pgvector's client types and an empty `items` table."""
    register_vector(db)
    db.execute(f"CREATE TABLE items (id bigint PRIMARY KEY, category int, embedding vector({DIMS}))")
    return db
