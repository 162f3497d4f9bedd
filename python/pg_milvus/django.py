"""pg_milvus in Django: the index class and the extension's migration
operation. Fields and distances are pgvector-python's
(`pgvector.django.VectorField`, `L2Distance`, `CosineDistance`,
`MaxInnerProduct`, ...), which pg_milvus answers as pgvector does::

    from pgvector.django import VectorField
    from pg_milvus.django import MilvusIndex

    class Item(models.Model):
        embedding = VectorField(dimensions=3)

        class Meta:
            indexes = [MilvusIndex(name="item_embedding_idx", fields=["embedding"],
                                   opclasses=["vector_cosine_ops"], m=16)]

and in the first migration, before the model: `MilvusExtension()`.
"""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.indexes import PostgresIndex
from django.contrib.postgres.operations import CreateExtension

from ._options import OPTIONS, checked, with_params


class MilvusExtension(CreateExtension):
    """`CREATE EXTENSION IF NOT EXISTS pg_milvus` in a migration (and DROP
    when it is reversed), as Django's `CreateExtension` does for others."""

    def __init__(self) -> None:
        super().__init__("pg_milvus")


class MilvusIndex(PostgresIndex):
    """`CREATE INDEX ... USING milvus (column opclass) WITH (...)`.

    `opclasses` as pgvector's (`vector_l2_ops`, `vector_ip_ops`,
    `vector_cosine_ops`, `vector_l1_ops`, `halfvec_*_ops`, `bit_hamming_ops`,
    `sparsevec_*_ops`); fields after the vector are filter columns, each with
    its type's opclass (`int4_ops`, `int8_ops`, `timestamptz_ops`,
    `text_ops`, `array_ops`, ...: docs/usage.md, "Filter columns"), so a
    queryset's `.filter(tenant_id=...)` is evaluated inside the index; the
    options those of docs/usage.md, "The milvus index":
    `m`, `ef_construction`, `quantization` ('rabitq', 'sq8', 'none'),
    `segment_max_rows`, `growing_max_rows`, `storage_url`. Unset options keep
    the server's defaults.
    """

    suffix = "milvus"

    def __init__(
        self,
        *expressions: Any,
        m: int | None = None,
        ef_construction: int | None = None,
        quantization: str | None = None,
        segment_max_rows: int | None = None,
        growing_max_rows: int | None = None,
        storage_url: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.milvus_options = checked(
            {
                "m": m,
                "ef_construction": ef_construction,
                "quantization": quantization,
                "segment_max_rows": segment_max_rows,
                "growing_max_rows": growing_max_rows,
                "storage_url": storage_url,
            }
        )
        super().__init__(*expressions, **kwargs)

    def deconstruct(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
        path, args, kwargs = super().deconstruct()
        kwargs.update(self.milvus_options)
        return path, args, kwargs

    def get_with_params(self) -> list[str]:
        return with_params(self.milvus_options)


__all__ = ["MilvusExtension", "MilvusIndex", "OPTIONS"]
