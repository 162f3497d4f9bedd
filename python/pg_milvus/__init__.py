"""Python helpers for pg_milvus: `pg_milvus.django` and `pg_milvus.sqlalchemy`.

pgvector-python provides the types (`Vector`, `HalfVector`, `SparseVector`,
`Bit`), their adapters for psycopg, asyncpg, Django and SQLAlchemy, and the
distance expressions; they work with pg_milvus as they do with pgvector. What
is pg_milvus' own, its index options and maintenance functions, is here.
"""

from ._options import OPTIONS, QUANTIZATIONS, with_params

__all__ = ["OPTIONS", "QUANTIZATIONS", "with_params"]
__version__ = "0.2.0"
