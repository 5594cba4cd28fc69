"""How a write's rows are shuffled before data files are written: Iceberg's distribution modes.

``none`` writes each task's rows as they come (a task holding rows of many partitions writes a file
for each), ``hash`` first gathers each partition's rows into as few tasks as the engine's shuffle
allows, ``range`` orders the rows by the partition and the table's sort order across tasks (each
task then writes sorted files of its own range).

Iceberg Java's Spark writes read the mode from the write, the session, then the table property
``write.distribution-mode``, and treat ``hash`` on an unpartitioned table, and ``range`` on a table
neither partitioned nor sorted, as ``none``.  Unset everywhere, Java derives one (``range`` for a
sorted table, ``hash`` for a partitioned one); this package then writes without a shuffle
(``none``), so an append costs no shuffle unless asked for one (docs/sql/ddl.md, "Write order and
distribution").
"""

from __future__ import annotations

from typing import Mapping

from procedures.core.kernel.properties import (
    DELETE_DISTRIBUTION_MODE,
    MERGE_DISTRIBUTION_MODE,
    UPDATE_DISTRIBUTION_MODE,
    WRITE_DISTRIBUTION_MODE,
    ChoiceProperty,
)
from procedures.errors import ValidationError

__all__ = ["NONE", "HASH", "RANGE", "MODES", "append_distribution", "row_change_distribution"]

NONE, HASH, RANGE = "none", "hash", "range"
MODES = (NONE, HASH, RANGE)


#: the table property of each row-level operation's mode
_ROW_CHANGE_PROPERTIES = {"delete": DELETE_DISTRIBUTION_MODE, "update": UPDATE_DISTRIBUTION_MODE,
                          "merge": MERGE_DISTRIBUTION_MODE}


def append_distribution(properties: Mapping[str, str], requested: str | None, *, partitioned: bool,
                        sorted_: bool, requested_by: str = "the write") -> str:
    """The mode of an append or overwrite: ``requested`` (the write's or the session's mode, named
    by ``requested_by`` in an error), else the table's ``write.distribution-mode``, adjusted as
    Java adjusts it; ``none`` when neither is set."""
    mode = _requested(requested, requested_by) or _property(properties, WRITE_DISTRIBUTION_MODE) or NONE
    return _adjusted(mode, partitioned, sorted_)


def row_change_distribution(properties: Mapping[str, str], requested: str | None, op: str, *, partitioned: bool,
                            sorted_: bool, requested_by: str = "the write") -> str:
    """The mode of the rows a DELETE, UPDATE or MERGE (``op``) writes: ``requested``, else the
    table's ``write.<op>.distribution-mode``, else ``hash`` as Java's Spark writes default (a MERGE
    on an unpartitioned table: :func:`append_distribution`'s mode).  The engine shuffles by the
    partition only, so ``hash`` on an unpartitioned table (Java: by data file) writes as ``none``."""
    mode = _requested(requested, requested_by) or _property(properties, _ROW_CHANGE_PROPERTIES[op])
    if mode is None:
        if op == "merge" and not partitioned:
            return append_distribution(properties, None, partitioned=partitioned, sorted_=sorted_)
        mode = HASH
    return _adjusted(mode, partitioned, sorted_)


def _requested(requested: str | None, requested_by: str) -> str | None:
    if requested is None or not str(requested).strip():
        return None
    mode = str(requested).strip().lower()
    if mode not in MODES:
        raise ValidationError(f"Invalid distribution mode {requested!r} from {requested_by}; use none, hash or range")
    return mode


def _property(properties: Mapping[str, str], prop: ChoiceProperty) -> str | None:
    return prop.read(properties) if prop.is_set(properties) else None


def _adjusted(mode: str, partitioned: bool, sorted_: bool) -> str:
    if mode == HASH and not partitioned:
        return NONE
    if mode == RANGE and not partitioned and not sorted_:
        return NONE
    return mode
