"""What a procedure is: its parameters, its output columns and the procedure itself.

The declaration types of the procedure framework (Java's ``ProcedureParameter`` and ``StructType``
output schema of ``BaseProcedure``).  Parameter and column types are Spark SQL types
(:mod:`procedures.framework.sqltypes`); :func:`declare` validates a declaration the way
:func:`procedures.framework.registry.register` needs it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from procedures.errors import ValidationError
from procedures.framework.sqltypes import SqlType, parse_sql_type

__all__ = ["Parameter", "OutputColumn", "Procedure", "declare", "DRY_RUN"]


@dataclass(frozen=True, slots=True)
class Parameter:
    """One declared procedure parameter (Java's ``ProcedureParameter``)."""

    name: str
    type: SqlType
    required: bool = False
    default: Any = None
    doc: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", parse_sql_type(self.type))
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", self.name):
            raise ValidationError(f"Invalid parameter name {self.name!r}: use lower-case letters, digits and '_'")


#: the ``dry_run`` parameter (default false) of the procedures that change tables, beyond Iceberg
#: Java: the output a real run would return at that moment, with nothing written, committed or
#: deleted (the procedure runs against :mod:`procedures.catalog.sandbox`)
DRY_RUN = Parameter("dry_run", "BOOLEAN", default=False,
                    doc="Return what a real run would return now, changing nothing (beyond Iceberg Java).")


@dataclass(frozen=True, slots=True)
class OutputColumn:
    """One column of a procedure's output schema."""

    name: str
    type: SqlType
    nullable: bool = True
    doc: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", parse_sql_type(self.type))


@dataclass(frozen=True)
class Procedure:
    """A registered procedure: name, ordered parameters, output schema, doc and implementation.

    ``fn(ctx, **args)`` receives a :class:`ProcedureContext` and every parameter by name (None
    for an absent optional one without default) and returns the output rows as tuples.
    """

    name: str
    parameters: tuple[Parameter, ...]
    output: tuple[OutputColumn, ...]
    fn: Callable[..., Iterable[Sequence[Any]]]
    doc: str = ""

    def parameter(self, name: str) -> Parameter | None:
        """The parameter called ``name`` (case-insensitive), or None."""
        low = name.lower()
        return next((p for p in self.parameters if p.name == low), None)

    def signature(self) -> str:
        """``name(table STRING, [snapshot_id BIGINT])`` -- optional parameters in brackets."""
        parts = [f"{p.name} {p.type}" if p.required else f"[{p.name} {p.type}]" for p in self.parameters]
        return f"{self.name}({', '.join(parts)})"

    def describe(self) -> str:
        """A readable description: signature, parameters, output columns."""
        lines = [self.signature(), "", self.doc.strip(), "", "Parameters:"]
        for i, p in enumerate(self.parameters, 1):
            req = "required" if p.required else f"optional, default {p.default!r}"
            lines.append(f"  {i}. {p.name} {p.type} ({req}) {p.doc}".rstrip())
        lines.append("Output columns:")
        for c in self.output:
            lines.append(f"  {c.name} {c.type}{'' if c.nullable else ' NOT NULL'} {c.doc}".rstrip())
        return "\n".join(lines)

    __str__ = describe


def _as_parameter(p: Parameter | tuple) -> Parameter:
    return p if isinstance(p, Parameter) else Parameter(*p)


def _as_column(c: OutputColumn | tuple) -> OutputColumn:
    return c if isinstance(c, OutputColumn) else OutputColumn(*c)


def declare(name: str, fn: Callable, parameters: Sequence[Parameter | tuple] = (),
            output: Sequence[OutputColumn | tuple] = (), doc: str | None = None) -> Procedure:
    """A validated :class:`Procedure`: unique parameter names, required ones first, one output column at least.

    ``parameters`` are :class:`Parameter` objects or ``(name, type, required, default, doc)`` tuples;
    ``output`` are :class:`OutputColumn` objects or ``(name, type, nullable, doc)`` tuples.
    """
    params = tuple(_as_parameter(p) for p in parameters)
    seen = set()
    for p in params:
        if p.name in seen:
            raise ValidationError(f"Procedure {name} declares parameter {p.name} twice")
        seen.add(p.name)
    required_after_optional = [p.name for i, p in enumerate(params) if p.required and any(
        not q.required for q in params[:i])]
    if required_after_optional:
        raise ValidationError(
            f"Procedure {name}: required parameters {required_after_optional} must come before optional ones"
        )
    if not output:
        raise ValidationError(f"Procedure {name} must declare at least one output column")
    return Procedure(name, params, tuple(_as_column(c) for c in output), fn, doc or (fn.__doc__ or ""))
