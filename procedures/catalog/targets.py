"""Which tables a ``table``/``namespace`` argument names when it is not one table: a table name with
``*`` as its last part (``db.*`` is every table of namespace ``db`` and of the namespaces below it,
``*`` every table of the catalog) or a namespace.  Used by ``table_health`` and ``plan_maintenance``
to examine many tables in one call."""

from __future__ import annotations

from typing import Iterator

from procedures.catalog.base import Catalog, Identifier, split_dotted
from procedures.errors import ValidationError

__all__ = ["parse_target", "iter_tables"]


def parse_target(table: str | None, namespace: str | None) -> Identifier | None:
    """The namespace whose tables a ``table``/``namespace`` pair names (``()`` for the whole catalog),
    or None when ``table`` names one table plainly (the caller resolves it as usual).  ``table`` may
    end in ``.*`` or be ``*``; ``namespace`` is a namespace name (``''`` or ``'*'``: the whole
    catalog).  Giving both is an error."""
    if table is not None and namespace is not None:
        raise ValidationError("Give either table (a table, 'db.*' or '*') or namespace, not both")
    if namespace is not None:
        text = namespace.strip()
        return () if text in ("", "*") else tuple(_parts(text, "namespace"))
    if table is None:
        return None
    text = table.strip()
    if text == "*":
        return ()
    if text.endswith(".*"):
        return tuple(_parts(text[:-2], "table"))
    return None


def _parts(text: str, param: str) -> list[str]:
    try:
        parts = split_dotted(text)
    except ValidationError:
        raise ValidationError(f"Cannot parse {param} '{text}'") from None
    if not parts or any(not p or p == "*" for p in parts):
        raise ValidationError(f"Cannot parse {param} '{text}': use 'db.*' for every table of namespace db, "
                              "'*' for every table of the catalog")
    return parts


def iter_tables(catalog: Catalog, namespace: Identifier = ()) -> Iterator[Identifier]:
    """Every table of ``namespace`` and of the namespaces below it (all of the catalog for ``()``),
    namespaces and tables in name order; a namespace that vanishes while listed is skipped."""
    if namespace:
        if not catalog.namespace_exists(namespace):
            raise ValidationError(f"Namespace {'.'.join(namespace)} does not exist in catalog {catalog.name}")
        yield from sorted(tuple(t) for t in catalog.list_tables(namespace))
    for child in sorted(tuple(n) for n in catalog.list_namespaces(namespace)):
        if tuple(child[:len(namespace)]) != tuple(namespace) or len(child) <= len(namespace):
            continue  # a catalog that lists every namespace at the top: only those below ours
        yield from iter_tables(catalog, child)
