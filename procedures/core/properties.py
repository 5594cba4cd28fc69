"""Reading typed table properties (``commit.retry.*``, ``commit.manifest.*``, ``history.expire.*`` ...).

Table properties are strings; a value that does not parse is the user's configuration error, so it is
reported as a :class:`ValidationError` naming the property rather than as a bare ``ValueError``.
"""

from __future__ import annotations

from typing import Mapping

from procedures.errors import ValidationError

__all__ = ["int_property"]


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
