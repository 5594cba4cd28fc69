"""A catalog that plans commits without making them: the catalog side of a procedure's ``dry_run``.

:class:`SandboxCatalog` wraps one of our catalogs.  Tables load from the real catalog but come
back with a :class:`~procedures.io.sandbox_fileio.SandboxFileIO` and the sandbox as their catalog, so a
procedure runs its usual code -- the core's commit loop, its operations, the metadata builder --
and reaches ``commit_table``, where the sandbox keeps the new metadata for the rest of the run
(``refresh()`` and later commits see it) instead of swapping it in.  Nothing is written to the
catalog or to storage; the planned metadata file's location is computed, never written.
"""

from __future__ import annotations

import threading
from typing import Any, Iterable, Mapping

from procedures.catalog.base import (
    Catalog, IdentifierLike, NamespacePropertiesUpdate, Table, next_metadata_location, parse_identifier,
)
from procedures.catalog.overlap import check_commit_folders, check_table_folders
from procedures.errors import ValidationError
from procedures.io.sandbox_fileio import SandboxFileIO

__all__ = ["SandboxCatalog", "sandboxed", "is_sandboxed"]


class SandboxCatalog(Catalog):
    """Reads ``base``; keeps table creations and commits to itself (see the module doc)."""

    def __init__(self, base: Catalog) -> None:
        if isinstance(base, SandboxCatalog):
            base = base.base
        self.base = base
        super().__init__(base.name, base.properties, SandboxFileIO.over(base.io))
        self._planned: dict[tuple[str, ...], Table] = {}
        self._lock = threading.Lock()

    def _table(self, ident: tuple[str, ...], md: Any, location: str | None) -> Table:
        return Table(ident, md, location, self.io, self)  # type: ignore[arg-type]

    def _refused(self, what: str) -> ValidationError:
        return ValidationError(f"Cannot {what} in a dry run of catalog {self.name}: a dry run changes nothing")

    # -- tables: planned or read through ----------------------------------------------------------

    def load_table(self, identifier: IdentifierLike) -> Table:
        """The planned table when this run committed to it, else the real one over the sandbox."""
        ident = tuple(parse_identifier(identifier))
        with self._lock:
            planned = self._planned.get(ident)
        if planned is not None:
            return self._table(ident, planned.metadata, planned.metadata_location)
        real = self.base.load_table(ident)
        return self._table(ident, real.metadata, real.metadata_location)

    def current_metadata_location(self, identifier: IdentifierLike) -> str | None:
        """The planned metadata file when this run committed to the table, else the real one's."""
        ident = tuple(parse_identifier(identifier))
        with self._lock:
            planned = self._planned.get(ident)
        if planned is not None:
            return planned.metadata_location
        return self.base.current_metadata_location(ident)

    def table_exists(self, identifier: IdentifierLike) -> bool:
        """Whether the run sees the table (planned or real)."""
        with self._lock:
            if tuple(parse_identifier(identifier)) in self._planned:
                return True
        return self.base.table_exists(identifier)

    def create_table(self, identifier: IdentifierLike, metadata: Any) -> Table:
        """Plan the table's creation: it exists for the rest of the run only (refused, as a real
        creation would be, when its folders overlap another table's)."""
        ident = tuple(parse_identifier(identifier))
        check_table_folders(self, ident, metadata, action=f"create table {'.'.join(ident)}")
        table = self._table(ident, metadata, next_metadata_location(metadata, None))
        with self._lock:
            self._planned[ident] = table
        return self._table(ident, metadata, table.metadata_location)

    def commit_table(self, table: Table, base: Any, new: Any) -> Table:
        """Plan the commit: later loads of the table see ``new``; nothing is written."""
        ident = tuple(table.identifier)
        check_commit_folders(self, ident, base, new)
        planned = self._table(ident, new, next_metadata_location(new, table.metadata_location))
        with self._lock:
            self._planned[ident] = planned
        return self._table(ident, new, planned.metadata_location)

    def default_table_location(self, identifier: IdentifierLike) -> str:
        """The real catalog's default location."""
        return self.base.default_table_location(identifier)

    def list_tables(self, namespace: IdentifierLike) -> list[tuple[str, ...]]:
        """The real catalog's tables."""
        return self.base.list_tables(namespace)

    def location_hint(self, identifier: IdentifierLike) -> str | None:
        """The real catalog's answer."""
        return self.base.location_hint(identifier)

    def tables_inside(self, identifier: IdentifierLike) -> list[tuple[str, ...]]:
        """The real catalog's answer."""
        return self.base.tables_inside(identifier)

    def drop_table(self, identifier: IdentifierLike, purge: bool = False) -> None:
        """Refused: a dry run drops nothing."""
        raise self._refused("drop a table")

    def rename_table(self, source: IdentifierLike, target: IdentifierLike) -> None:
        """Refused: a dry run renames nothing."""
        raise self._refused("rename a table")

    def register_table(self, identifier: IdentifierLike, metadata_location: str) -> Table:
        """Refused: a dry run registers nothing."""
        raise self._refused("register a table")

    # -- namespaces: read through, never changed -------------------------------------------------

    def create_namespace(self, namespace: IdentifierLike, properties: Mapping[str, str] | None = None) -> None:
        """Refused: a dry run creates nothing."""
        raise self._refused("create a namespace")

    def list_namespaces(self, parent: IdentifierLike = ()) -> list[tuple[str, ...]]:
        """The real catalog's namespaces."""
        return self.base.list_namespaces(parent)

    def namespace_exists(self, namespace: IdentifierLike) -> bool:
        """Whether the real catalog has the namespace."""
        return self.base.namespace_exists(namespace)

    def drop_namespace(self, namespace: IdentifierLike) -> None:
        """Refused: a dry run drops nothing."""
        raise self._refused("drop a namespace")

    def load_namespace_properties(self, namespace: IdentifierLike) -> dict[str, str]:
        """The real catalog's namespace properties."""
        return self.base.load_namespace_properties(namespace)

    def update_namespace_properties(self, namespace: IdentifierLike, removals: Iterable[str] = (),
                                    updates: Mapping[str, str] | None = None) -> NamespacePropertiesUpdate:
        """Refused: a dry run changes nothing."""
        raise self._refused("change namespace properties")


def sandboxed(catalog: Catalog) -> SandboxCatalog:
    """A dry-run view of ``catalog``."""
    return SandboxCatalog(catalog)


def is_sandboxed(table_or_catalog: Any) -> bool:
    """Whether a table or catalog belongs to a dry run."""
    catalog = getattr(table_or_catalog, "catalog", table_or_catalog)
    return isinstance(catalog, SandboxCatalog)
