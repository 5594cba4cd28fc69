"""The rewriter of ``rewrite_data_files`` (procedures.md §3.9), chosen once from ``strategy`` and
``sort_order``: bin-pack, sort (by the table's order or the given one) or Z-order, with Iceberg Java
1.10's decision table and error texts.  Every later step (group planning, the engine's group
rewrite, the files' ``sort_order_id``) reads this one :class:`Rewriter`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Sequence

from procedures.core.data_rewrite.options import BIN_PACK, SORT, Z_ORDER
from procedures.errors import ValidationError
from procedures.spec.metadata import TableMetadata
from procedures.spec.sorting import SortOrder, parse_sort_order

__all__ = ["Rewriter", "choose_rewriter", "sort_order_id"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rewriter:
    """How groups are rewritten: ``kind`` (BIN-PACK, SORT or Z-ORDER), the sort order (SORT), the
    z-order columns (Z-ORDER) and the sort order id new files record (0: not marked as sorted)."""

    kind: str = BIN_PACK
    sort_order: SortOrder | None = None
    zorder_columns: tuple[str, ...] = ()
    sort_order_id: int = 0


def _split_terms(text: str) -> list[str]:
    terms, depth, start, quote = [], 0, 0, False
    for i, ch in enumerate(text):
        if ch == "`":
            quote = not quote
        elif quote:
            continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t.strip() for t in terms]


def _unwrap(text: str) -> str:
    t = text.strip()
    while t.startswith("(") and t.endswith(")"):
        depth = 0
        for i, ch in enumerate(t):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i < len(t) - 1:
                return t
        t = t[1:-1].strip()
    return t


_ZORDER = re.compile(r"^(zorder)\s*\((.*)\)$", re.IGNORECASE | re.DOTALL)


def choose_rewriter(md: TableMetadata, table_name: str, strategy: str | None, sort_order: str | None,
                    *, case_sensitive: bool = False) -> Rewriter:
    """Java's decision table: bin-pack by default, sort by the table's or the given order, Z-order."""
    if strategy is None and sort_order is None:
        return Rewriter(BIN_PACK)
    zorder_cols: list[str] = []
    plain: list[str] = []
    if sort_order is not None:
        if not sort_order.strip():
            raise ValidationError(f"Unable to parse sortOrder: {sort_order}")
        for term in _split_terms(_unwrap(sort_order)):
            m = _ZORDER.match(term)
            if m is None:
                plain.append(term)
                continue
            args = [a.strip().strip("`") for a in _split_terms(m.group(2))]
            if m.group(1) != "zorder" and len(args) > 1:
                raise ValidationError(f"Cannot convert transform with more than one column reference: {term}")
            if not all(args):
                raise ValidationError(f"Unable to parse sortOrder: {sort_order}")
            zorder_cols.extend(args)
        if zorder_cols and plain:
            raise ValidationError(f"Cannot mix identity sort columns and a Zorder sort expression: {sort_order}")
    if strategy is None or strategy.lower() == "sort":
        if zorder_cols:
            return Rewriter(Z_ORDER, zorder_columns=_zorder_columns(md, zorder_cols, case_sensitive))
        if plain:
            order = parse_sort_order(", ".join(plain), md.schema(), order_id=1, case_sensitive=case_sensitive)
            return Rewriter(SORT, sort_order=order, sort_order_id=sort_order_id(md, order))
        if md.sort_order().is_unsorted():
            raise ValidationError(
                f"Cannot sort data without a valid sort order, table '{table_name}' is unsorted and no sort order is provided"
            )
        return Rewriter(SORT, sort_order=md.sort_order(), sort_order_id=sort_order_id(md, md.sort_order()))
    if strategy.lower() == "binpack":
        if sort_order is not None:
            raise ValidationError("Cannot set rewrite mode, it has already been set to BIN-PACK")
        return Rewriter(BIN_PACK)
    raise ValidationError(f"unsupported strategy: {strategy}. Only binpack or sort is supported")


def _zorder_columns(md: TableMetadata, names: Sequence[str], case_sensitive: bool) -> tuple[str, ...]:
    schema = md.schema()
    if schema.find_field_or_none("ICEZVALUE", True) is not None:
        raise ValidationError("Cannot ZOrder: the table has a column named ICEZVALUE, which Z-ordering uses internally")
    identity_sources = {pf.source_id for pf in md.spec().fields if str(pf.transform) == "identity"}
    out = []
    for name in names:
        f = schema.find_field_or_none(name, case_sensitive)
        if f is None:
            raise ValidationError(
                f"Cannot find column '{name}' in table schema (case sensitive = {str(case_sensitive).lower()}): "
                f"{[c.name for c in schema.fields]}"
            )
        if f.field_id in identity_sources:
            log.warning("Ignoring '%s' as such values are constant within a partition", name)
            continue
        if schema.find_field(f.field_id) is not f and "." in name:
            raise ValidationError(f"Cannot Z-order by nested column {name!r}; use top-level columns")
        out.append(f.name)
    if not out:
        raise ValidationError("Cannot ZOrder, all columns provided were identity partition columns and cannot be used")
    return tuple(out)


def sort_order_id(md: TableMetadata, order: SortOrder | None) -> int:
    """The id of the table's sort order with the same fields, else 0 (files are not tagged as sorted)."""
    if order is None:
        return 0
    for o in md.sort_orders:
        if o.fields and o.same_order(order):
            return o.order_id
    log.warning("Sort order %s is not one of the table's sort orders; new files are not marked as sorted", order)
    return 0
