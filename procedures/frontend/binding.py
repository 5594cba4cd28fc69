"""Argument binding: Spark 3.5's analyzer rules for procedure arguments (``ResolveProcedures``).

:func:`bind` maps positional or named arguments onto a procedure's declared parameters with
Spark's rules and messages (no mixing, case-insensitive names, duplicates, unknown names, too many
arguments, missing required parameters) and coerces each value with the SQL type system
(:func:`procedures.framework.sqltypes.coerce`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from procedures.errors import MissingParameterError, ValidationError
from procedures.framework.declaration import Procedure
from procedures.framework.sqltypes import Literal, coerce, python_literal

__all__ = ["bind"]


def bind(
    proc: Procedure,
    positional: Sequence[Any] = (),
    named: Sequence[tuple[str, Any]] | Mapping[str, Any] = (),
    *,
    tz: str = "UTC",
    lenient: bool = False,
) -> dict[str, Any]:
    """Bind and coerce arguments as Spark 3.5's analyzer does; returns ``{parameter: value}``.

    Arguments are :class:`~procedures.framework.sqltypes.Literal` objects or plain Python values;
    ``lenient`` relaxes integer widths for Python callers.  Absent optional parameters get their
    declared default (usually None).
    """
    pairs = list(named.items()) if isinstance(named, Mapping) else list(named)
    if positional and pairs:
        raise ValidationError("Named and positional arguments cannot be mixed")
    given: dict[str, Literal] = {}
    if pairs:
        for raw_name, value in pairs:
            key = raw_name.lower()
            if key in given:
                raise ValidationError(f"Could not build name to arg map: Duplicate procedure argument: {raw_name}")
            if proc.parameter(key) is None:
                names = ", ".join(p.name for p in proc.parameters)
                raise ValidationError(
                    f"Could not build name to arg map: Unknown argument: {raw_name} (parameters of {proc.name}: {names})"
                )
            given[key] = python_literal(value)
    else:
        if len(positional) > len(proc.parameters):
            raise ValidationError(
                f"Too many arguments for procedure {proc.name}: it takes at most {len(proc.parameters)}, "
                f"got {len(positional)}; signature {proc.signature()}"
            )
        for p, value in zip(proc.parameters, positional):
            given[p.name] = python_literal(value)
    out: dict[str, Any] = {}
    for p in proc.parameters:
        lit = given.get(p.name)
        value = coerce(lit, p.type, p.name, tz=tz, lenient=lenient) if lit is not None else None
        out[p.name] = p.default if value is None else value
    missing = [p.name for p in proc.parameters if p.required and out[p.name] is None]
    if missing:
        hint = " (pass table => 'db.table', the table to work on)" if "table" in missing else ""
        raise MissingParameterError(
            f"Missing required parameters: [{','.join(missing)}] for {proc.signature()}{hint}",
            procedure=proc.name, parameters=missing,
        )
    return out
