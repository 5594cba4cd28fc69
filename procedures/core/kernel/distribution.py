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

from procedures.core.kernel.properties import WRITE_DISTRIBUTION_MODE
from procedures.errors import ValidationError

__all__ = ["NONE", "HASH", "RANGE", "MODES", "append_distribution"]

NONE, HASH, RANGE = "none", "hash", "range"
MODES = (NONE, HASH, RANGE)


def append_distribution(properties: Mapping[str, str], requested: str | None, *, partitioned: bool,
                        sorted_: bool, requested_by: str = "the write") -> str:
    """The mode of an append or overwrite: ``requested`` (the write's or the session's mode, named
    by ``requested_by`` in an error), else the table's ``write.distribution-mode``, adjusted as
    Java adjusts it; ``none`` when neither is set."""
    if requested is not None and str(requested).strip():
        mode = str(requested).strip().lower()
        if mode not in MODES:
            raise ValidationError(f"Invalid distribution mode {requested!r} from {requested_by}; use none, hash or range")
    else:
        mode = WRITE_DISTRIBUTION_MODE.read(properties) if WRITE_DISTRIBUTION_MODE.is_set(properties) else NONE
    if mode == HASH and not partitioned:
        return NONE
    if mode == RANGE and not partitioned and not sorted_:
        return NONE
    return mode
