"""pgvector's own Python client works unchanged against pg_milvus' vector types.

`pgvector.psycopg.register_vector` looks the `vector`, `halfvec` and
`sparsevec` types up by name and uses their binary send/recv formats; numpy
arrays and `Vector`, `HalfVector` and `SparseVector` values must round-trip
bit for bit, in text and binary, in parameters, results (pgvector-python
0.5 reads a `vector` as its `Vector`) and binary COPY.
"""

import numpy as np
import psycopg
import pytest
from pgvector import Vector
from pgvector.psycopg import register_vector


@pytest.fixture
def conn(db):
    register_vector(db)
    db.execute("CREATE TABLE items (id bigint PRIMARY KEY, embedding vector(8))")
    return db


def sample(n, dim=8, seed=42):
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((n, dim)).astype(np.float32)
    data[0] = [np.finfo(np.float32).max, np.finfo(np.float32).tiny, -0.0, 1e-30, 1e30, 3.4e-38, -1.5, 0.1]
    return data


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_numpy_round_trip(conn, binary):
    data = sample(50)
    with conn.cursor(binary=binary) as cur:
        cur.executemany(
            "INSERT INTO items VALUES (%s, %s)",
            [(i, v) for i, v in enumerate(data)],
        )
        cur.execute("SELECT id, embedding FROM items ORDER BY id")
        rows = cur.fetchall()
    assert len(rows) == len(data)
    for (i, got), want in zip(rows, data):
        assert isinstance(got, Vector) and got.to_numpy().dtype == np.float32
        assert got.to_numpy().tobytes() == want.tobytes(), f"row {i}: {got} != {want}"


def test_binary_copy_round_trip(conn):
    data = sample(200, seed=7)
    with conn.cursor() as cur:
        with cur.copy("COPY items (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "vector"])
            for i, v in enumerate(data):
                copy.write_row((i, v))
        with cur.copy("COPY items (id, embedding) TO STDOUT WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "vector"])
            back = {row[0]: row[1] for row in copy.rows()}
    assert sorted(back) == list(range(len(data)))
    for i, want in enumerate(data):
        assert back[i].to_numpy().tobytes() == want.tobytes()


def test_distance_operators_agree_with_numpy(conn):
    data = sample(20, seed=3)[1:]
    q = data[0]
    with conn.cursor() as cur:
        for i, v in enumerate(data):
            cur.execute("INSERT INTO items VALUES (%s, %s)", (i, v))
        cur.execute(
            "SELECT id, embedding <-> %s, embedding <#> %s, embedding <=> %s FROM items ORDER BY id",
            (q, q, q),
        )
        for i, l2, nip, cos in cur.fetchall():
            v = data[i].astype(np.float64)
            q64 = q.astype(np.float64)
            assert l2 == pytest.approx(np.linalg.norm(v - q64), rel=1e-5, abs=1e-5)
            assert nip == pytest.approx(-v.dot(q64), rel=1e-5, abs=1e-5)
            want = 1 - v.dot(q64) / (np.linalg.norm(v) * np.linalg.norm(q64))
            assert cos == pytest.approx(want, rel=1e-5, abs=1e-5)


def test_errors_reach_the_client_with_detail(conn):
    with pytest.raises(psycopg.errors.InvalidTextRepresentation) as e:
        conn.execute("SELECT '[1,x]'::vector")
    assert e.value.diag.message_primary == 'invalid input syntax for type vector: "[1,x]"'
    assert e.value.diag.message_detail == 'Element 2 "x" is not a number.'

    with pytest.raises(psycopg.errors.DataException, match="expected 8 dimensions, not 3"):
        conn.execute("INSERT INTO items VALUES (1, %s)", (np.array([1, 2, 3], dtype=np.float32),))

    with pytest.raises(psycopg.errors.DataException, match=r"NaN not allowed in vector \(element 2\)"):
        conn.execute("INSERT INTO items VALUES (1, %s)", (np.array([1, np.nan] + [0] * 6, dtype=np.float32),))
    with pytest.raises(psycopg.errors.DataException, match="NaN not allowed"):
        conn.cursor(binary=True).execute(
            "INSERT INTO items VALUES (1, %s)", (np.array([1, np.nan] + [0] * 6, dtype=np.float32),)
        )
    # Nothing of the failed statements was written.
    assert conn.execute("SELECT count(*) FROM items").fetchone()[0] == 0


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_halfvec_round_trip(conn, binary):
    """pgvector-python's HalfVector, in text and binary: every half value
    comes back bit for bit, and a vector column reads the same numbers."""
    from pgvector import HalfVector

    rng = np.random.default_rng(11)
    data = rng.standard_normal((50, 8)).astype(np.float16)
    data[0] = [np.finfo(np.float16).max, np.finfo(np.float16).tiny, -0.0, 6e-8, -65504, 0.1, 1.5, 0]
    conn.execute("CREATE TABLE h (id bigint PRIMARY KEY, embedding halfvec(8))")
    with conn.cursor(binary=binary) as cur:
        cur.executemany("INSERT INTO h VALUES (%s, %s)", [(i, HalfVector(v)) for i, v in enumerate(data)])
        cur.execute("SELECT id, embedding, embedding::vector FROM h ORDER BY id")
        rows = cur.fetchall()
    assert len(rows) == len(data)
    for (i, got, widened), want in zip(rows, data):
        assert isinstance(got, HalfVector)
        assert got.to_numpy().astype(np.float16).tobytes() == want.tobytes(), f"row {i}"
        assert widened.to_numpy().tobytes() == want.astype(np.float32).tobytes(), f"row {i} as vector"


def sparse_sample(n, dim=30_000, nnz=120, seed=5):
    """SPLADE-like rows: `nnz` distinct terms of `dim`, positive weights,
    and a first row of extreme values."""
    from pgvector import SparseVector

    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        terms = rng.choice(dim, size=nnz, replace=False)
        rows.append(SparseVector(dict(zip(terms.tolist(), rng.random(nnz).astype(np.float32).tolist())), dim))
    extremes = [float(np.finfo(np.float32).max), float(np.finfo(np.float32).tiny), 1e-45, -1.5, 0.1]
    rows[0] = SparseVector({i * 7: v for i, v in enumerate(extremes)}, dim)
    return rows


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_sparsevec_round_trip(conn, binary):
    """pgvector-python's SparseVector, in text and binary parameters and
    results: dimensions, indices and every float4 value come back bit for
    bit."""
    from pgvector import SparseVector

    data = sparse_sample(40)
    conn.execute("CREATE TABLE s (id bigint PRIMARY KEY, embedding sparsevec(30000))")
    with conn.cursor(binary=binary) as cur:
        cur.executemany("INSERT INTO s VALUES (%s, %s)", list(enumerate(data)))
        cur.execute("SELECT id, embedding FROM s ORDER BY id")
        rows = cur.fetchall()
    assert len(rows) == len(data)
    f32 = lambda values: np.array(values, dtype=np.float32).tobytes()  # noqa: E731
    for (i, got), want in zip(rows, data):
        assert isinstance(got, SparseVector)
        assert got.dimensions() == want.dimensions() == 30_000
        assert list(got.indices()) == sorted(want.indices()), f"row {i}"
        order = np.argsort(want.indices())
        assert f32(got.values()) == f32(np.array(want.values())[order]), f"row {i}"


def test_sparsevec_binary_copy_and_distances(conn):
    """Binary COPY in and out, and the four distances beside numpy's on
    the dense rows."""
    data = sparse_sample(30, dim=1000, nnz=40, seed=9)[1:]
    conn.execute("CREATE TABLE s (id bigint PRIMARY KEY, embedding sparsevec(1000))")
    with conn.cursor() as cur:
        with cur.copy("COPY s (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "sparsevec"])
            for i, v in enumerate(data):
                copy.write_row((i, v))
        with cur.copy("COPY s (id, embedding) TO STDOUT WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "sparsevec"])
            back = {row[0]: row[1] for row in copy.rows()}
        assert sorted(back) == list(range(len(data)))
        assert all(back[i].to_numpy().tobytes() == v.to_numpy().tobytes() for i, v in enumerate(data))
        q = data[0]
        cur.execute(
            "SELECT id, embedding <-> %s, embedding <#> %s, embedding <=> %s, embedding <+> %s FROM s ORDER BY id",
            (q, q, q, q),
        )
        q64 = q.to_numpy().astype(np.float64)
        for i, l2, nip, cos, l1 in cur.fetchall():
            v = data[i].to_numpy().astype(np.float64)
            assert l2 == pytest.approx(np.linalg.norm(v - q64), rel=1e-5)
            assert nip == pytest.approx(-v.dot(q64), rel=1e-5)
            assert cos == pytest.approx(1 - v.dot(q64) / (np.linalg.norm(v) * np.linalg.norm(q64)), rel=1e-5, abs=1e-6)
            assert l1 == pytest.approx(np.abs(v - q64).sum(), rel=1e-5)


def test_sparsevec_errors_reach_the_client_and_write_nothing(conn):
    from pgvector import SparseVector

    conn.execute("CREATE TABLE s (id bigint PRIMARY KEY, embedding sparsevec(5))")
    with pytest.raises(psycopg.errors.InvalidTextRepresentation) as e:
        conn.execute("SELECT '{1:x}/5'::sparsevec")
    assert e.value.diag.message_primary == 'invalid input syntax for type sparsevec: "{1:x}/5"'
    with pytest.raises(psycopg.errors.DataException, match="expected 5 dimensions, not 6"):
        conn.execute("INSERT INTO s VALUES (1, %s)", (SparseVector({0: 1.0}, 6),))
    for binary in (False, True):
        with pytest.raises(psycopg.errors.DataException, match="sparsevec index out of bounds"):
            conn.cursor(binary=binary).execute("INSERT INTO s VALUES (1, %s)", (SparseVector._from_parts(5, [5], [1.0]),))
        with pytest.raises(psycopg.errors.DataException, match="NaN not allowed in sparsevec"):
            conn.cursor(binary=binary).execute(
                "INSERT INTO s VALUES (1, %s)", (SparseVector._from_parts(5, [1], [float("nan")]),)
            )
    with pytest.raises(psycopg.errors.DataException, match="cannot contain zero values"):
        conn.cursor(binary=True).execute("INSERT INTO s VALUES (1, %s)", (SparseVector._from_parts(5, [1], [0.0]),))
    assert conn.execute("SELECT count(*) FROM s").fetchone()[0] == 0
