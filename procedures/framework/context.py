"""What a running procedure sees: :class:`ProcedureContext`, and the catalogs it opens.

Python counterpart of Iceberg's ``BaseProcedure`` helpers: the context resolves table arguments
relative to the CALL's catalog exactly as Spark does (procedures.md §1.5), refuses other catalogs,
loads tables and commits only through :func:`procedures.core.kernel.transaction.commit`.
:func:`open_catalog` caches our catalogs per configuration.  Nothing here imports pyspark.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

from procedures.catalog.base import Catalog, Table, split_dotted
from procedures.catalog.config import SPARK_PREFIX, catalog_names, catalog_properties
from procedures.catalog.sandbox import is_sandboxed, sandboxed
from procedures.core.kernel.transaction import commit
from procedures.errors import CatalogConfigError, NoSuchTableError, ValidationError
from procedures.framework.declaration import Procedure
from procedures.spark.catalog_conf import load_catalog
from procedures.spark.session import record_engine

__all__ = ["ProcedureContext", "open_catalog", "known_catalogs", "local_zone"]

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

    def __init__(self, procedure: Procedure, catalog_name: str, conf: Mapping[str, str], spark: Any = None,
                 call: Callable[[str, Sequence[tuple[str, Any]]], Any] | None = None) -> None:
        self.procedure = procedure
        # the front end's runner, handed down so a procedure can run others (this layer is below it)
        self._call = call
        self.catalog_name = catalog_name
        self.conf = dict(conf)
        self.spark = spark
        if spark is not None:
            # commits of the procedure name Spark as their engine, as Java's procedures do
            record_engine(spark)
        self.tz = self.conf.get("spark.sql.session.timeZone") or local_zone()
        self.changed_tables: list[tuple[str, tuple[str, ...]]] = []

    @property
    def case_sensitive(self) -> bool:
        """Spark's ``spark.sql.caseSensitive`` for the CALL's session (default false)."""
        return str(self.conf.get("spark.sql.caseSensitive", "false")).lower() == "true"

    @property
    def catalog(self) -> Catalog:
        """The CALL's catalog (one of ours)."""
        return open_catalog(self.catalog_name, self.conf)

    def default_namespace(self) -> tuple[str, ...]:
        """The catalog's ``default-namespace`` option (Iceberg's SparkCatalog default: ``default``)."""
        raw = self.conf.get(f"{SPARK_PREFIX}{self.catalog_name}.default-namespace", "default")
        return tuple(split_dotted(raw))

    def resolve(self, text: str | None, param: str = "table") -> tuple[str, ...]:
        """Resolve a table argument relative to the CALL's catalog (procedures.md §1.5); returns the identifier."""
        if text is None or not str(text).strip():
            raise ValidationError(f"Cannot handle an empty identifier for parameter '{param}'")
        try:
            parts = split_dotted(text.strip())
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

    def catalog_for(self, dry_run: bool = False) -> Catalog:
        """The CALL's catalog, or with ``dry_run`` a sandbox over it that plans commits and
        writes nothing (:mod:`procedures.catalog.sandbox`)."""
        return sandboxed(self.catalog) if dry_run else self.catalog

    def load_table(self, text: str | None, param: str = "table", *, dry_run: bool = False) -> Table:
        """Resolve and load a table argument; a missing table names the identifier and the catalog.
        With ``dry_run`` the table is loaded through :meth:`catalog_for`: commits to it and writes
        through its FileIO are planned, never made."""
        ident = self.resolve(text, param)
        try:
            return self.catalog_for(dry_run).load_table(ident)
        except NoSuchTableError:
            raise NoSuchTableError(
                f"Couldn't load table '{'.'.join(ident)}' in catalog '{self.catalog_name}'"
            ) from None

    def call_procedure(self, name: str, arguments: Sequence[tuple[str, Any]]) -> Any:
        """Run procedure ``name`` in this CALL's catalog with named ``arguments`` (Python values)
        through the runner, so binding and validation are those of any call; returns its
        ``ProcedureResult``.  Tables it changed count as changed by this call too."""
        if self._call is None:
            raise ValidationError(
                f"Procedure {self.procedure.name} cannot run {name}: this context was built without a runner; "
                "call procedures through procedures.call, CALL statements or frontend.runner.run"
            )
        result = self._call(name, arguments)
        self.changed_tables.extend(result.changed_tables)
        return result

    def commit(self, table: Table, operations: Sequence[Any]) -> Table:
        """Commit through the one transactional path and remember the table as changed (a dry
        run's table is planned, not changed)."""
        new = commit(table, list(operations))
        self.note_changed(table.identifier, table)
        return new

    def note_changed(self, identifier: Sequence[str], table_or_catalog: Any = None) -> None:
        """Remember a table the call changed, unless it belongs to a dry run."""
        if not is_sandboxed(table_or_catalog):
            self.changed_tables.append((self.catalog_name, tuple(identifier)))


def local_zone() -> str:
    """The machine's UTC offset (``+0100``), the session time zone when Spark's conf names none."""
    return time.strftime("%z") or "UTC"
