"""The procedure registry: declaration, argument binding, table resolution and execution.

This is the Python counterpart of Iceberg's ``SparkProcedures`` / ``BaseProcedure`` /
``ProcedureInput`` and of Spark 3.5's ``ResolveProcedures`` analyzer rule (procedures.md §1-§2):

* every procedure declares ordered, typed parameters and an output schema;
* :func:`bind` maps positional or named arguments onto the parameters with Spark 3.5's rules
  and messages (no mixing, case-insensitive names, duplicates, unknown names, too many
  arguments, missing required parameters) and coerces them (:mod:`.params`);
* :class:`ProcedureContext` resolves table arguments relative to the CALL's catalog exactly as
  Spark does (§1.5), refuses other catalogs, and commits only through
  :func:`procedures.core.transaction.commit`;
* :func:`register` is the public decorator: user procedures become callable from
  :func:`procedures.call`, :func:`procedures.sql` and the ``procedures-sql`` console alike.

Nothing here imports pyspark: a run returns a :class:`ProcedureResult` (columns and rows); the
callers in :mod:`procedures.sqlcall` turn it into a DataFrame.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from procedures.catalog.base import Catalog, Table, _split_dotted
from procedures.catalog.config import (
    SPARK_PREFIX, catalog_names, catalog_properties, conf_from_spark, default_catalog_name, load_catalog,
)
from procedures.errors import (
    CatalogConfigError, MissingParameterError, NoSuchCatalogError, NoSuchProcedureError, NoSuchTableError,
    ValidationError,
)
from procedures.maintenance.params import Literal, OutputColumn, Parameter, coerce, python_literal

__all__ = [
    "Procedure", "ProcedureContext", "ProcedureResult", "register", "unregister", "get_procedure",
    "list_procedures", "bind", "run", "known_catalogs", "open_catalog",
]

SYSTEM_NAMESPACE = "system"


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


@dataclass
class ProcedureResult:
    """The output of one run: the procedure's columns and its rows (tuples in column order)."""

    procedure: Procedure
    rows: list[tuple]
    #: ``(catalog, identifier)`` of every table the run committed to
    changed_tables: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    @property
    def columns(self) -> tuple[OutputColumn, ...]:
        """The output schema."""
        return self.procedure.output


_REGISTRY: dict[str, Procedure] = {}
_LOCK = threading.Lock()


def _as_parameter(p: Parameter | tuple) -> Parameter:
    return p if isinstance(p, Parameter) else Parameter(*p)


def _as_column(c: OutputColumn | tuple) -> OutputColumn:
    return c if isinstance(c, OutputColumn) else OutputColumn(*c)


def register(
    name: str | None = None,
    *,
    parameters: Sequence[Parameter | tuple] = (),
    output: Sequence[OutputColumn | tuple] = (),
    doc: str | None = None,
    replace: bool = False,
) -> Callable[[Callable], Callable]:
    """Decorator registering ``fn(ctx, **args) -> rows`` as procedure ``name`` (default: the function's name).

    ``parameters`` are :class:`Parameter` objects or ``(name, type, required, default, doc)`` tuples;
    ``output`` are :class:`OutputColumn` objects or ``(name, type, nullable, doc)`` tuples.  Names are
    lower-case; registering an existing name needs ``replace=True``.
    """

    def deco(fn: Callable) -> Callable:
        proc_name = (name or fn.__name__).lower()
        params = tuple(_as_parameter(p) for p in parameters)
        seen = set()
        for p in params:
            if p.name in seen:
                raise ValidationError(f"Procedure {proc_name} declares parameter {p.name} twice")
            seen.add(p.name)
        required_after_optional = [p.name for i, p in enumerate(params) if p.required and any(
            not q.required for q in params[:i])]
        if required_after_optional:
            raise ValidationError(
                f"Procedure {proc_name}: required parameters {required_after_optional} must come before optional ones"
            )
        if not output:
            raise ValidationError(f"Procedure {proc_name} must declare at least one output column")
        proc = Procedure(proc_name, params, tuple(_as_column(c) for c in output), fn, doc or (fn.__doc__ or ""))
        with _LOCK:
            if proc_name in _REGISTRY and not replace and _REGISTRY[proc_name].fn is not fn:
                raise ValidationError(f"A procedure named {proc_name} is already registered; pass replace=True")
            _REGISTRY[proc_name] = proc
        fn.procedure = proc  # type: ignore[attr-defined]
        return fn

    return deco


def unregister(name: str) -> None:
    """Remove a registered procedure (mainly for tests of user procedures)."""
    with _LOCK:
        _REGISTRY.pop(name.lower(), None)


def _load_builtins() -> None:
    # imported for their @register side effect; late so the registry module has no import cycle
    import procedures.maintenance.snapshot_management  # noqa: F401

    for module in ("expire_snapshots", "remove_orphan_files", "rewrite_data_files", "rewrite_manifests",
                   "rewrite_position_delete_files", "add_files", "migrate", "statistics", "rewrite_table_path",
                   "changelog"):
        try:
            __import__(f"procedures.maintenance.{module}")
        except ModuleNotFoundError as e:
            if e.name != f"procedures.maintenance.{module}":
                raise


def list_procedures() -> list[str]:
    """Names of every registered procedure, sorted."""
    _load_builtins()
    return sorted(_REGISTRY)


def get_procedure(name: str) -> Procedure:
    """The procedure registered as ``name`` (case-insensitive); NoSuchProcedureError otherwise."""
    _load_builtins()
    proc = _REGISTRY.get(name.lower())
    if proc is None:
        raise NoSuchProcedureError(
            f"Procedure system.{name} not found; available procedures: {', '.join(sorted(_REGISTRY))}"
        )
    return proc


# ------------------------------------------------------------------------------------ binding
def bind(
    proc: Procedure,
    positional: Sequence[Any] = (),
    named: Sequence[tuple[str, Any]] | Mapping[str, Any] = (),
    *,
    tz: str = "UTC",
    lenient: bool = False,
) -> dict[str, Any]:
    """Bind and coerce arguments as Spark 3.5's analyzer does; returns ``{parameter: value}``.

    Arguments are :class:`~procedures.maintenance.params.Literal` objects or plain Python values;
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


# ------------------------------------------------------------------------------------ catalogs
_CATALOG_CACHE: dict[tuple, Catalog] = {}


def open_catalog(name: str, conf: Mapping[str, str]) -> Catalog:
    """Our catalog ``name`` from ``conf`` (cached per configuration)."""
    props, _ = catalog_properties(name, conf)
    key = (name, tuple(sorted((k, str(v)) for k, v in props.items())))
    cat = _CATALOG_CACHE.get(key)
    if cat is None:
        try:
            cat = load_catalog(name, conf)
        except CatalogConfigError as e:
            raise CatalogConfigError(f"Cannot use catalog {name}: {e}") from e
        _CATALOG_CACHE[key] = cat
    return cat


def known_catalogs(conf: Mapping[str, str]) -> set[str]:
    """Every catalog name Spark would recognise: ours, Spark catalog plugins, and ``spark_catalog``."""
    names = set(catalog_names(conf)) | {"spark_catalog"}
    for key in conf:
        if key.startswith(SPARK_PREFIX):
            rest = key[len(SPARK_PREFIX):]
            names.add(rest.split(".", 1)[0])
    return names


class ProcedureContext:
    """What a procedure sees: its catalog, the configuration, the Spark session (may be None),
    the session time zone, and helpers to resolve/load tables and to commit."""

    def __init__(self, procedure: Procedure, catalog_name: str, conf: Mapping[str, str], spark: Any = None) -> None:
        self.procedure = procedure
        self.catalog_name = catalog_name
        self.conf = dict(conf)
        self.spark = spark
        self.tz = self.conf.get("spark.sql.session.timeZone") or _local_zone()
        self.changed_tables: list[tuple[str, tuple[str, ...]]] = []

    @property
    def catalog(self) -> Catalog:
        """The CALL's catalog (one of ours)."""
        return open_catalog(self.catalog_name, self.conf)

    def default_namespace(self) -> tuple[str, ...]:
        """The catalog's ``default-namespace`` option (Iceberg's SparkCatalog default: ``default``)."""
        raw = self.conf.get(f"{SPARK_PREFIX}{self.catalog_name}.default-namespace", "default")
        return tuple(_split_dotted(raw))

    def resolve(self, text: str | None, param: str = "table") -> tuple[str, ...]:
        """Resolve a table argument relative to the CALL's catalog (procedures.md §1.5); returns the identifier."""
        if text is None or not str(text).strip():
            raise ValidationError(f"Cannot handle an empty identifier for parameter '{param}'")
        try:
            parts = _split_dotted(text.strip())
        except ValidationError:
            raise ValidationError(f"Cannot parse identifier for parameter '{param}': {text}") from None
        if any(not p for p in parts):
            raise ValidationError(f"Cannot parse identifier for parameter '{param}': {text}")
        catalog = self.catalog_name
        if len(parts) > 1 and parts[0] in known_catalogs(self.conf):
            catalog, parts = parts[0], parts[1:]
        if catalog != self.catalog_name:
            raise ValidationError(
                f"Cannot run procedure in catalog '{self.catalog_name}': '{text}' is a table in catalog '{catalog}'"
            )
        if len(parts) == 1:
            parts = [*self.default_namespace(), parts[0]]
        return tuple(parts)

    def load_table(self, text: str | None, param: str = "table") -> Table:
        """Resolve and load a table argument; a missing table names the identifier and the catalog."""
        ident = self.resolve(text, param)
        try:
            return self.catalog.load_table(ident)
        except NoSuchTableError:
            raise NoSuchTableError(
                f"Couldn't load table '{'.'.join(ident)}' in catalog '{self.catalog_name}'"
            ) from None

    def commit(self, table: Table, operations: Sequence[Any]) -> Table:
        """Commit through the one transactional path and remember the table as changed."""
        from procedures.core.transaction import commit

        new = commit(table, list(operations))
        self.changed_tables.append((self.catalog_name, tuple(table.identifier)))
        return new


def _local_zone() -> str:
    import time

    return time.strftime("%z") or "UTC"


def _catalog_for_python_call(table_arg: Any, conf: Mapping[str, str]) -> str:
    """For ``procedures.call`` without a catalog: the table's catalog when it names one of ours."""
    if isinstance(table_arg, str):
        try:
            parts = _split_dotted(table_arg.strip())
        except ValidationError:
            parts = []
        if len(parts) >= 3 and parts[0] in catalog_names(conf):
            return parts[0]
    return default_catalog_name(conf)


def split_procedure_name(name: str) -> tuple[str | None, str]:
    """``[catalog.]system.<name>`` or a bare ``<name>`` -> ``(catalog or None, name)``."""
    parts = [p for p in _split_dotted(name.strip())]
    if len(parts) == 1:
        return None, parts[0]
    if len(parts) == 2 and parts[0].lower() == SYSTEM_NAMESPACE:
        return None, parts[1]
    if len(parts) == 3 and parts[1].lower() == SYSTEM_NAMESPACE:
        return parts[0], parts[2]
    raise NoSuchProcedureError(f"Procedure {name} not found: procedures live in the namespace <catalog>.system")


def run(
    name: str | Procedure,
    *,
    args: Sequence[Any] = (),
    kwargs: Sequence[tuple[str, Any]] | Mapping[str, Any] = (),
    catalog: str | None = None,
    conf: Mapping[str, str] | None = None,
    spark: Any = None,
    lenient: bool = False,
) -> ProcedureResult:
    """Bind, validate and run a procedure; returns its rows.

    ``name`` may be qualified (``ours.system.rollback_to_snapshot``).  ``catalog`` is the CALL's
    catalog; without one, a Python call uses the catalog its ``table`` argument names (when that is
    one of ours) and otherwise ``spark.sql.defaultCatalog`` / ``local``.  ``conf`` defaults to the
    Spark session's configuration.
    """
    if isinstance(name, Procedure):
        proc, qualified = name, None
    else:
        qualified, bare = split_procedure_name(name)
        proc = get_procedure(bare)
    if conf is None:
        conf = conf_from_spark(spark) if spark is not None else {}
    catalog = catalog or qualified
    if catalog is None:
        named = dict((k.lower(), v) for k, v in (kwargs.items() if isinstance(kwargs, Mapping) else kwargs))
        table_arg = named.get("table", args[0] if args else None)
        if isinstance(table_arg, Literal):
            table_arg = table_arg.value
        catalog = _catalog_for_python_call(table_arg, conf)
    # arguments first: a call without its table names the missing parameter, not a catalog
    tz = conf.get("spark.sql.session.timeZone") or _local_zone()
    values = bind(proc, args, kwargs, tz=tz, lenient=lenient)
    configured = catalog_names(conf)
    if catalog not in configured:
        shown = ", ".join(configured) if configured else "none"
        raise NoSuchCatalogError(
            f"Cannot use catalog {catalog}: not an iceberg-procedures catalog (configured: {shown}); "
            f"set {SPARK_PREFIX}{catalog}.type to hadoop or jdbc, or name one of the configured catalogs",
            catalog=catalog, configured=configured,
        )
    ctx = ProcedureContext(proc, catalog, conf, spark)
    rows = [tuple(r) for r in proc.fn(ctx, **values)]
    for row in rows:
        if len(row) != len(proc.output):
            raise ValidationError(
                f"Procedure {proc.name} returned a row of {len(row)} values; its output has {len(proc.output)} columns"
            )
        for col, v in zip(proc.output, row):
            if v is None and not col.nullable:
                raise ValidationError(f"Procedure {proc.name} returned NULL for non-nullable column {col.name}")
    return ProcedureResult(proc, rows, ctx.changed_tables)
