"""``add_files`` as a capability (procedures.md §3.11; Iceberg Java 1.10's ``AddFilesProcedure`` with
``SparkTableUtil.importSparkTable`` / ``importSparkPartitions``): :class:`AddFilesParams` ->
:func:`plan` -> :func:`execute` on a :class:`~procedures.core.file_import.file_import_engine.FileImportEngine`.

Order of work:

1. check ``parallelism`` and ``partition_filter`` against the target's spec
   (:func:`procedures.core.file_import.source_rules.check_partition_filter`), in :func:`plan`;
2. have the engine find the source partitions (a path import's ``k=v`` directories, or a table of
   the engine's session catalog);
3. match the source's partition columns to an all-identity spec of the target, keep the
   partitions ``partition_filter`` selects;
4. have the engine list the files directly in each partition directory and read their metrics;
5. refuse files already live in the target (unless ``check_duplicate_files`` is false);
6. commit one ``append`` snapshot, together with the name mapping when the table has none (Java
   commits the mapping first, on its own; here a refusal leaves the table unchanged).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Mapping

from procedures.core.file_import import source_rules
from procedures.core.file_import.file_import_engine import FileImportEngine
from procedures.core.kernel.capability import Capability
from procedures.core.kernel.snapshot_producer import live_entries, snapshot_manifests
from procedures.errors import ValidationError
from procedures.spec.metadata import TableMetadata

__all__ = ["AddFilesParams", "AddFilesPlan", "AddFilesResult", "plan", "execute", "ADD_FILES"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AddFilesParams:
    """The procedure's arguments; ``table_name`` names the target in messages."""

    source_table: str
    partition_filter: Mapping[str, str] = field(default_factory=dict)
    check_duplicate_files: bool = True
    parallelism: int = 1
    table_name: str = "table"


@dataclass(frozen=True)
class AddFilesPlan:
    """The checked arguments."""

    params: AddFilesParams


@dataclass(frozen=True)
class AddFilesResult:
    """The output row: ``added-data-files`` and ``changed-partition-count`` of the new snapshot."""

    added_files_count: int
    changed_partition_count: int | None

    def row(self) -> tuple:
        """The procedure's output row."""
        return (self.added_files_count, self.changed_partition_count)


def plan(metadata: TableMetadata, params: AddFilesParams) -> AddFilesPlan:
    """Check ``parallelism`` and the partition filter against the target's spec."""
    if params.parallelism is not None and params.parallelism <= 0:
        raise ValidationError("Parallelism should be larger than 0")
    source_rules.check_partition_filter(params.table_name, metadata.spec(), params.partition_filter)
    return AddFilesPlan(params)


def execute(table: Any, plan: AddFilesPlan, engine: FileImportEngine) -> AddFilesResult:
    """Add the files of ``source_table`` to ``table`` in one append; see the module docstring.

    Raises ValidationError (table unchanged) for a filter or layout the target cannot take,
    DuplicateFilesError for files the table already has, UnsupportedFileFormatError for a source
    format other than Parquet, ORC and Avro, and NotFoundError / NoSuchTableError for a missing source.
    """
    params = plan.params
    md = table.metadata
    name = params.table_name
    source = engine.resolve_import_source(table.io, params.source_table)
    spec = source_rules.match_identity_spec(md, source.columns, name)
    partitions = source_rules.filter_partitions(source.partitions, params.partition_filter)
    if source.path_import and source.partitioned and not partitions:
        raise ValidationError(f"Cannot find any matching partitions in table {name}")
    files = engine.read_data_files(table.io, md, spec, partitions, params.parallelism or 1,
                                   f"add_files: read the footers of {{n}} file(s) of {source.description} for {name}")
    if params.check_duplicate_files and files:
        live = {e.data_file.file_path for e in live_entries(table.io, md, snapshot_manifests(table.io, md.current_snapshot()))}
        duplicates = sorted(f.file_path for f in files if f.file_path in live)
        if duplicates:
            raise source_rules.duplicate_error(duplicates)
    ops: list[Any] = []
    change = source_rules.name_mapping_change(md)
    if change is not None:
        ops.append(change)
    op = source_rules.AddFiles(files, through_manifests=source.path_import or source.partitioned)
    ops.append(op)
    with engine.job(f"add_files: commit {len(files)} file(s) of {source.description} to {name}"):
        engine.commit(table, ops)
    summary = op.snapshot.summary if op.snapshot is not None else {}
    changed = summary.get("changed-partition-count")
    log.info("add_files on %s: added %d file(s) from %s", name, len(files), source.description)
    return AddFilesResult(int(summary.get("added-data-files", "0")), int(changed) if changed is not None else None)


#: the capability as the Spark action runs it
ADD_FILES: Capability[AddFilesParams, AddFilesPlan, AddFilesResult] = Capability("add_files", plan, execute)
