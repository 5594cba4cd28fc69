"""The folders of every table a catalog knows, for checks that must keep writes out of all of them
(rewrite_table_path's staging folder).  One small helper, walking the catalog through its public
API: namespaces (nested ones too), their tables, each table's location and ``write.*.path`` folders
(:func:`procedures.core.gc.delete_guard.table_roots`)."""

from __future__ import annotations

import logging
from collections import deque
from typing import Any, Iterator

from procedures.catalog.base import Identifier, identifier_to_string
from procedures.core.gc.delete_guard import table_roots
from procedures.errors import IcebergError

__all__ = ["catalog_table_folders"]

log = logging.getLogger(__name__)


def _namespaces(catalog: Any) -> Iterator[Identifier]:
    """Every namespace of ``catalog``, parents before their children."""
    seen: set[Identifier] = set()
    queue: deque[Identifier] = deque(catalog.list_namespaces())
    while queue:
        ns = queue.popleft()
        if ns in seen:
            continue
        seen.add(ns)
        yield ns
        try:
            queue.extend(catalog.list_namespaces(ns))
        except (IcebergError, OSError, NotImplementedError):
            pass  # a catalog without nested namespaces: this one has no children


def catalog_table_folders(catalog: Any) -> list[tuple[str, str]]:
    """``(table name, folder)`` for every folder of every table of ``catalog``.  A table that cannot
    be loaded is logged and skipped (its folders are unknown; create-only writes still keep its
    files from being replaced)."""
    out: list[tuple[str, str]] = []
    for ns in _namespaces(catalog):
        for ident in catalog.list_tables(ns):
            name = identifier_to_string(ident)
            try:
                md = catalog.load_table(ident).metadata
            except (IcebergError, OSError) as e:
                log.warning("Cannot load table %s to learn its folders: %s", name, e)
                continue
            out.extend((name, root) for root in table_roots(md))
    return out
