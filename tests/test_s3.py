"""S3 for real: the lifecycle against a moto S3 server on loopback, and the
credential settings hidden from everyone but superusers."""

import socket
import subprocess
import time
import urllib.request

import boto3
import numpy as np
import psycopg
import pytest

from conftest import ROOT
from test_flush import segments
from test_index import METRICS, all_index_ids, check_search_quality, load, near

BUCKET = "milvus-test"


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
    yield endpoint
    proc.terminate()
    proc.wait(timeout=10)


def use_s3(conn, endpoint, prefix):
    conn.execute(f"SET milvus.storage_url = 's3://{BUCKET}/{prefix}'")
    for name, value in [("s3_endpoint", endpoint), ("s3_region", "us-east-1"),
                        ("s3_access_key_id", "testing"), ("s3_secret_access_key", "testing-secret")]:
        conn.execute(f"SET milvus.{name} = '{value}'")
    conn.execute("SET milvus.s3_allow_http = on")
    conn.execute("SET milvus.s3_path_style = on")


def bucket_keys(endpoint):
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing-secret")
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
    return sorted(o["Key"] for p in pages for o in p.get("Contents", []))


def test_lifecycle_on_s3(conn, s3):
    use_s3(conn, s3, "lifecycle")
    first = load(conn, 5000)
    conn.execute("CREATE INDEX items_idx ON items USING milvus (embedding vector_l2_ops)")  # flushes to S3
    second = load(conn, 1000, seed=1, start_id=5000)
    assert [r[2] for r in conn.execute("SELECT * FROM milvus_flush('items_idx')")] == ["flushed"]
    check_search_quality(conn, METRICS["vector_l2_ops"], near(np.concatenate([first, second]), 30))

    prefix = "lifecycle/{}/{}/{}/".format(*conn.execute(
        "SELECT lpad(to_hex(s.system_identifier), 16, '0'), d.oid, 'items_idx'::regclass::oid"
        " FROM pg_control_system() s, pg_database d WHERE d.datname = current_database()").fetchone())
    keys = bucket_keys(s3)
    assert all(k.startswith(prefix) for k in keys), keys
    kinds = sorted(k.rsplit("/", 1)[1].split("-")[0] for k in keys)
    assert kinds == ["index", "insert", "insert"], keys  # segment 1 has a graph, segment 2 (1,000 rows) not

    conn.execute("DELETE FROM items WHERE id % 10 = 3")
    conn.execute("VACUUM items")
    assert sum(k.rsplit("/", 1)[1].startswith("delta-") for k in bucket_keys(s3)) == 2
    conn.execute("SELECT * FROM milvus_compact('items_idx')")
    conn.execute("SET milvus.gc_grace_period = 0")
    deleted = conn.execute("SELECT deleted_objects FROM milvus_gc('items_idx')").fetchone()[0]
    assert deleted == 5  # the two merged segments' insert, index and delta objects
    live = [s for s in segments(conn) if s[1] != "growing"]
    assert [(s[1], s[3]) for s in live] == [("flushed", 5400)], live
    ids = all_index_ids(conn)
    assert len(ids) == len(set(ids)) == 5400 and not any(i % 10 == 3 for i in ids)


def test_s3_credentials_are_hidden_from_other_users(conn):
    conn.execute("SET milvus.s3_secret_access_key = 'hunter2'")
    conn.execute("CREATE ROLE milvus_reader")
    try:
        conn.execute("SET ROLE milvus_reader")
        for sql in ["SHOW milvus.s3_secret_access_key", "SELECT current_setting('milvus.s3_secret_access_key')",
                    "SHOW milvus.s3_access_key_id"]:
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="must be superuser"):
                conn.execute(sql)
        shown = conn.execute("SELECT name, setting FROM pg_settings WHERE name LIKE 'milvus.s3%'").fetchall()
        assert not any("secret" in n or "key_id" in n or "token" in n for n, _ in shown), shown
        assert not any("hunter2" in str(r) for r in conn.execute("SHOW ALL").fetchall())
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SET milvus.s3_secret_access_key = 'mine'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SET milvus.storage_url = 'file:///tmp/elsewhere'")
    finally:
        conn.execute("RESET ROLE")
        conn.execute("DROP ROLE milvus_reader")
