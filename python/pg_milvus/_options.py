"""The `WITH (...)` options of a milvus index, checked and rendered once for
both integrations."""

from __future__ import annotations

from collections.abc import Mapping

#: Option name -> its Python type, as `CREATE INDEX ... USING milvus` takes them.
OPTIONS: Mapping[str, type] = {
    "m": int,
    "ef_construction": int,
    "quantization": str,
    "segment_max_rows": int,
    "growing_max_rows": int,
    "storage_url": str,
}

#: The values `quantization` takes.
QUANTIZATIONS = ("rabitq", "sq8", "none")


def checked(options: Mapping[str, object]) -> dict[str, int | str]:
    """The options that are set, checked for name and type (the server checks
    their ranges and says why, at CREATE INDEX)."""
    out: dict[str, int | str] = {}
    for name, value in options.items():
        if value is None:
            continue
        if name not in OPTIONS:
            raise TypeError(f"a milvus index has no option {name!r}; it has {', '.join(OPTIONS)}")
        kind = OPTIONS[name]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise TypeError(f"milvus index option {name} takes {kind.__name__}, not {value!r}")
        if name == "quantization" and value not in QUANTIZATIONS:
            raise ValueError(f"quantization takes one of {', '.join(QUANTIZATIONS)}, not {value!r}")
        out[name] = value  # type: ignore[assignment]
    return out


def literals(options: Mapping[str, object]) -> dict[str, str]:
    """Each option set, its value as SQL writes it (text quoted)."""

    def literal(value: int | str) -> str:
        if isinstance(value, int):
            return str(value)
        return "'" + value.replace("'", "''") + "'"

    return {name: literal(value) for name, value in checked(options).items()}


def with_params(options: Mapping[str, object]) -> list[str]:
    """`name = value` for each option set, as `WITH (...)` lists them."""
    return [f"{name} = {value}" for name, value in literals(options).items()]
