"""What a table name like ``cat.db.t.snapshots`` or ``cat.db.t.branch_dev`` reads, as Iceberg's Spark
catalog resolves it.

Iceberg Java's ``SparkCatalog`` first loads the name as a table; when there is none, it loads the name
without its last part and reads that part as a metadata table (``snapshots``, ``files``, ...; any case)
or a snapshot selector: ``branch_<name>``, ``tag_<name>``, ``snapshot_id_<id>`` or
``at_timestamp_<epoch millis>``.  A table that really is named ``snapshots`` therefore wins over the
metadata table of its namespace-named parent, as in Java.  Spark-free: the SQL front end and
``read_table`` both resolve names here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from procedures.errors import NoSuchRefError, NoSuchTableError, ValidationError

__all__ = ["METADATA_TABLE_NAMES", "TableSelection", "select_table", "with_version"]

#: every metadata table Iceberg Java has (``MetadataTableType``), lower case
METADATA_TABLE_NAMES = (
    "snapshots", "history", "refs", "metadata_log_entries", "manifests", "all_manifests", "files",
    "data_files", "delete_files", "all_files", "all_data_files", "all_delete_files", "entries",
    "all_entries", "partitions", "position_deletes",
)

_SELECTORS = (
    (re.compile(r"branch_(.+)"), "branch"),
    (re.compile(r"tag_(.+)"), "tag"),
    (re.compile(r"snapshot_id_(\d+)"), "snapshot"),
    (re.compile(r"at_timestamp_(\d+)"), "timestamp"),
)


@dataclass(frozen=True)
class TableSelection:
    """A loaded table and what to read of it: a metadata table (``metadata_table``) or its rows, at
    most one of ``snapshot_id``, ``ref`` (branch or tag) and ``as_of_ms`` choosing the snapshot."""

    table: Any  # a loaded catalog Table
    metadata_table: str | None = None
    snapshot_id: int | None = None
    ref: str | None = None
    as_of_ms: int | None = None

    @property
    def time_travel(self) -> bool:
        """True when a snapshot other than the current one of main is chosen."""
        return self.snapshot_id is not None or self.ref is not None or self.as_of_ms is not None


def select_table(catalog: Any, parts: Sequence[str], display: str | None = None) -> TableSelection:
    """Resolve ``parts`` (the name without its catalog: ``(db, t)``, ``(db, t, files)``, ...) in
    ``catalog`` as Iceberg's Spark catalog does.  Raises NoSuchTableError naming ``display`` (the name
    as the user wrote it) when neither the table nor a selector of its parent exists."""
    name = display or ".".join(parts)
    ident = tuple(parts)
    try:
        return TableSelection(catalog.load_table(ident))
    except (NoSuchTableError, ValidationError):
        # a catalog of two-level names (hive) refuses a longer name as invalid: it may name a
        # metadata table or selector of a table all the same
        if len(ident) < 3:
            raise
    last = ident[-1]
    try:
        parent = catalog.load_table(ident[:-1])
    except NoSuchTableError:
        raise NoSuchTableError(f"Table or view not found: {name}") from None
    if last.lower() in METADATA_TABLE_NAMES:
        return TableSelection(parent, metadata_table=last.lower())
    for pattern, kind in _SELECTORS:
        m = pattern.fullmatch(last)
        if m is None:
            continue
        value = m.group(1)
        if kind in ("branch", "tag"):
            ref = parent.metadata.refs.get(value)
            if ref is None or ref.is_branch != (kind == "branch"):
                raise NoSuchRefError(f"Cannot find {kind} {value!r} of table {name[: -len(last) - 1]}; "
                                     f"its refs: {', '.join(sorted(parent.metadata.refs)) or 'none'}")
            return TableSelection(parent, ref=value)
        if kind == "snapshot":
            return TableSelection(parent, snapshot_id=int(value))
        return TableSelection(parent, as_of_ms=int(value))
    raise NoSuchTableError(f"Table or view not found: {name}")


def with_version(sel: TableSelection, *, version: str | int | None = None, as_of_ms: int | None = None,
                 display: str = "") -> TableSelection:
    """``sel`` read ``VERSION AS OF version`` (a snapshot id, or a branch or tag name: refs first, as
    Java) or ``TIMESTAMP AS OF`` (``as_of_ms``).  A name that already selects a snapshot cannot time
    travel again (Java: "Cannot do time-travel based on both table identifier and AS OF")."""
    if version is None and as_of_ms is None:
        return sel
    if sel.time_travel:
        raise ValidationError(f"Cannot do time-travel based on both table identifier and AS OF: {display}")
    if as_of_ms is not None:
        return TableSelection(sel.table, sel.metadata_table, as_of_ms=as_of_ms)
    text = str(version)
    ref = sel.table.metadata.refs.get(text)
    if ref is not None:
        if ref.is_branch:
            return TableSelection(sel.table, sel.metadata_table, ref=text)
        return TableSelection(sel.table, sel.metadata_table, snapshot_id=ref.snapshot_id)
    try:
        return TableSelection(sel.table, sel.metadata_table, snapshot_id=int(text))
    except ValueError:
        raise NoSuchRefError(f"Cannot find matching snapshot ID or reference name for version {text} of "
                             f"{display}") from None
