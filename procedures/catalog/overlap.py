"""The overlap rule (:mod:`procedures.core.kernel.table_overlap`) applied to a catalog's tables.

The catalogs call :func:`check_table_folders` before they create or register a table and
:func:`check_commit_folders` before a commit that moves one of its folders (``SetLocation``, a
``write.*.path`` property set by ``ALTER TABLE ... SET TBLPROPERTIES`` or any other commit);
garbage collection asks :func:`known_table_folders` once per run for the folders it must keep out
of.  Each call lists the catalog's namespaces and tables and reads every table's current metadata
(one file per table, never anything per data file).  A table whose metadata cannot be read still
counts, at the location the catalog knows for it (:meth:`Catalog.location_hint`); one with no known
location is skipped with a warning.

A metadata file named with a UUID (``<NNNNN>-<uuid>.metadata.json``, as every catalog but ``hadoop``
names them) is written once and its name never again, so the folders it gives are kept in memory by
file (:func:`folders_of_metadata_file`): a catalog of thousands of tables then reads only the
metadata files that changed since the last check, not every table's on every CREATE TABLE.  Each
table's current metadata file is still looked up every time, so a commit elsewhere is always seen.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from typing import Any, Iterable, Mapping

from procedures.catalog.base import Catalog, Identifier, identifier_to_string
from procedures.core.kernel.table_overlap import TableFolders, check_no_overlap, table_folders, write_paths
from procedures.errors import IcebergError, NoSuchNamespaceError, NoSuchTableError
from procedures.io.sandbox_fileio import is_sandbox
from procedures.spec.metadata import read_table_metadata

__all__ = ["table_identifiers", "known_table_folders", "warehouse_root", "check_table_folders",
           "check_table_location", "check_commit_folders", "neighbours", "folders_of_metadata_file",
           "FOLDERS_KEPT"]

log = logging.getLogger(__name__)


def warehouse_root(catalog: Any) -> str | None:
    """The catalog's warehouse root (a dry run's sandbox answers for the catalog it wraps)."""
    root = getattr(catalog, "warehouse", None)
    if root is None and getattr(catalog, "base", None) is not None:
        root = getattr(catalog.base, "warehouse", None)
    return str(root) if root else None


def table_identifiers(catalog: Catalog) -> list[Identifier]:
    """Every table of ``catalog``: the tables of every namespace, at any depth, and the tables
    inside other tables' folders the catalog knows of (:meth:`Catalog.tables_inside`)."""
    return _tables_and_pointers(catalog)[0]


def _tables_and_pointers(catalog: Catalog) -> tuple[list[Identifier], dict[Identifier, str]]:
    """:func:`table_identifiers`, and the current metadata file of each table whose catalog lists
    a namespace's tables with them in one lookup (:meth:`Catalog.current_metadata_locations`:
    a query per namespace instead of one per table); a dry run's catalog gives none."""
    found: set[Identifier] = set()
    pointers: dict[Identifier, str] = {}
    todo: list[Identifier] = []
    try:
        todo = list(catalog.list_namespaces())
    except NoSuchNamespaceError:
        pass
    sandbox = is_sandbox(catalog.io)
    while todo:
        ns = todo.pop()
        try:
            listed = None if sandbox else catalog.current_metadata_locations(ns)
            if listed is None:
                tables = catalog.list_tables(ns)
            else:
                tables = list(listed)
                pointers.update(listed)
            todo.extend(catalog.list_namespaces(ns))
        except NoSuchNamespaceError:
            continue  # dropped while we looked
        nested = list(tables)
        while nested:
            ident = tuple(nested.pop())
            if ident not in found:
                found.add(ident)
                nested.extend(catalog.tables_inside(ident))
    return sorted(found), pointers


#: how many metadata files' folders are kept (a few hundred bytes each)
FOLDERS_KEPT = 100_000
#: a metadata file name that is never written twice: ``<version>-<uuid>`` (gzip spelled either way)
_UNIQUE_METADATA_NAME = re.compile(
    r"/\d+-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(\.gz)?\.metadata\.json(\.gz)?$", re.I)
_kept: "OrderedDict[str, tuple[str | None, tuple[tuple[str, str], ...]]]" = OrderedDict()
_kept_lock = threading.Lock()


def folders_of_metadata_file(catalog: Catalog, name: str, metadata_location: str) -> TableFolders:
    """The folders of table ``name`` as the metadata file at ``metadata_location`` gives them, read
    through the catalog's FileIO, or from memory when that file (a UUID-named one, never rewritten)
    was read before; a dry run's catalog always reads (its planned files are not in storage)."""
    keep = _UNIQUE_METADATA_NAME.search(metadata_location) is not None and not is_sandbox(catalog.io)
    if keep:
        with _kept_lock:
            hit = _kept.get(metadata_location)
            if hit is not None:
                _kept.move_to_end(metadata_location)
                return TableFolders(name, hit[0], hit[1])
    folders = table_folders(name, read_table_metadata(catalog.io, metadata_location))
    if keep:
        with _kept_lock:
            _kept[metadata_location] = (folders.location, folders.write_paths)
            while len(_kept) > FOLDERS_KEPT:
                _kept.popitem(last=False)
    return folders


def _current_folders(catalog: Catalog, ident: Identifier, name: str, pointer: str | None) -> TableFolders:
    # a dry run's planned commits name metadata files it never writes: only its load_table has them
    pointer = None if is_sandbox(catalog.io) else pointer or catalog.current_metadata_location(ident)
    if pointer:
        return folders_of_metadata_file(catalog, name, pointer)
    return table_folders(name, catalog.load_table(ident).metadata)


def known_table_folders(catalog: Catalog, *, exclude: Iterable[Identifier] = ()) -> list[TableFolders]:
    """:class:`~procedures.core.kernel.table_overlap.TableFolders` of every table of ``catalog`` but
    ``exclude``, named ``<namespace>.<table>``."""
    skip = {tuple(e) for e in exclude}
    out: list[TableFolders] = []
    identifiers, pointers = _tables_and_pointers(catalog)
    for ident in identifiers:
        if ident in skip:
            continue
        name = identifier_to_string(ident)
        try:
            out.append(_current_folders(catalog, ident, name, pointers.get(ident)))
            continue
        except NoSuchTableError:
            continue  # dropped while we looked
        except (IcebergError, OSError, ValueError) as e:
            hint = catalog.location_hint(ident)
            if hint:
                log.warning("Cannot read the metadata of table %s (%s): keeping clear of its location %s",
                            name, e, hint)
                out.append(TableFolders(name, hint))
            else:
                log.warning("Cannot read the metadata of table %s (%s) and its location is unknown: the overlap "
                            "check cannot see it", name, e)
    return out


def check_table_folders(catalog: Catalog, identifier: Identifier, metadata: Any, *, action: str) -> None:
    """Refuse (:class:`~procedures.errors.ValidationError`) to give table ``identifier`` the
    folders of ``metadata`` (anything with ``location`` and ``properties``) when they overlap
    another table of ``catalog`` or its warehouse root."""
    ident = tuple(identifier)
    candidate = table_folders(identifier_to_string(ident), metadata)
    check_no_overlap(candidate, known_table_folders(catalog, exclude=[ident]), warehouse_root(catalog),
                     action=action)


def check_table_location(catalog: Catalog, identifier: Identifier, location: str, properties: Mapping[str, str],
                         *, action: str) -> None:
    """:func:`check_table_folders` before any metadata exists: a table at ``location`` with
    ``properties``."""
    ident = tuple(identifier)
    candidate = TableFolders(identifier_to_string(ident), location, write_paths(properties))
    check_no_overlap(candidate, known_table_folders(catalog, exclude=[ident]), warehouse_root(catalog),
                     action=action)


def check_commit_folders(catalog: Catalog, identifier: Identifier, base: Any, new: Any) -> None:
    """:func:`check_table_folders` for the folders a commit gives the table: its location when it
    moves, each ``write.*.path`` it sets or changes (nothing is read for any other commit, and a
    folder the table already had is not judged again)."""
    ident = tuple(identifier)
    name = identifier_to_string(ident)
    before, after = table_folders(name, base), table_folders(name, new)
    old = set(before.folders())
    location = after.location if ("location", after.location) not in old else None
    changed = tuple(pair for pair in after.write_paths if pair not in old)
    if location is None and not changed:
        return
    check_no_overlap(TableFolders(name, location, changed), known_table_folders(catalog, exclude=[ident]),
                     warehouse_root(catalog), action=f"commit to table {name}")


def neighbours(table: Any) -> tuple[list[TableFolders], str | None]:
    """``(the folders of every other table of table's catalog, the warehouse root)`` for garbage
    collection, read once per run; nothing for a table without one of our catalogs."""
    catalog = getattr(table, "catalog", None)
    if not isinstance(catalog, Catalog):
        return [], None
    ident = tuple(table.identifier)
    return known_table_folders(catalog, exclude=[ident]), warehouse_root(catalog)
