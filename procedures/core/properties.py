"""Reading typed table properties (``commit.retry.*``, ``commit.manifest.*``, ``history.expire.*`` ...).

Table properties are strings; a value that does not parse is the user's configuration error, so it is
reported as a :class:`ValidationError` naming the property rather than as a bare ``ValueError``.
"""

from __future__ import annotations

from typing import Mapping

from procedures.errors import ValidationError

__all__ = ["int_property", "DELETE_GRANULARITY", "file_scoped_deletes"]

#: how finely position deletes are grouped into files: one file per data file, or per partition
DELETE_GRANULARITY = "write.delete.granularity"


def int_property(props: Mapping[str, str], key: str, default: int, *, minimum: int | None = None) -> int:
    """``props[key]`` as an integer (``default`` when unset); refuses non-integers and values below ``minimum``."""
    raw = props.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ValidationError(f"Table property {key} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ValidationError(f"Table property {key} must be at least {minimum}, got {value}")
    return value


def file_scoped_deletes(props: Mapping[str, str]) -> bool:
    """Whether position deletes go to one file per data file (``write.delete.granularity`` =
    ``file``, the effective default of Iceberg's Spark writers since 1.8) rather than one per
    partition (``partition``)."""
    raw = props.get(DELETE_GRANULARITY, "file")
    value = str(raw).strip().lower()
    if value not in ("file", "partition"):
        raise ValidationError(f"Table property {DELETE_GRANULARITY} must be 'file' or 'partition', got {raw!r}")
    return value == "file"
