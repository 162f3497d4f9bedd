"""pg_milvus in SQLAlchemy: an index builder and its SQL functions. Columns
and distances are pgvector-python's (`pgvector.sqlalchemy.Vector`,
`.l2_distance()`, `.cosine_distance()`, `.max_inner_product()`, ...)::

    from pg_milvus.sqlalchemy import milvus_index, milvus_segments

    milvus_index("item_embedding_idx", Item.embedding, "vector_cosine_ops", m=16)
    session.execute(select(milvus_segments("item_embedding_idx").table_valued("segment_id", "state", "rows")))
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Float, Index
from sqlalchemy.sql.functions import GenericFunction

from ._options import literals


def milvus_index(name: str, column: Any, opclass: str = "vector_l2_ops", **options: int | str) -> Index:
    """`CREATE INDEX name ... USING milvus (column opclass) WITH (options)`,
    created with the table's metadata (`metadata.create_all`) or by
    `index.create(engine)`. The options as in docs/usage.md, "The milvus index"."""
    key = column.key if hasattr(column, "key") else str(column)
    return Index(
        name,
        column,
        postgresql_using="milvus",
        postgresql_with=literals(options),
        postgresql_ops={key: opclass},
    )


class milvus_flush(GenericFunction[Any]):
    """`milvus_flush(index)`: seal and flush; a table of (index, segment_id,
    state): select from it with `.table_valued(...)`."""

    inherit_cache = True


class milvus_compact(GenericFunction[Any]):
    """`milvus_compact(index)`: a table of (index, plan, input_segments,
    output_segment, removed_rows)."""

    inherit_cache = True


class milvus_segments(GenericFunction[Any]):
    """`milvus_segments(index)`: a table of (segment_id, state, index_state,
    rows, deleted_rows, bytes, ...)."""

    inherit_cache = True


class milvus_recall(GenericFunction[float]):
    """`milvus_recall(query)`: recall@k of a query's index answer against an
    exact scan of the same rows (`real`)."""

    type = Float()
    inherit_cache = True


__all__ = ["milvus_compact", "milvus_flush", "milvus_index", "milvus_recall", "milvus_segments"]
