"""Table-level writes from Spark: append, overwrite (by filter and dynamic partition overwrite)
and delete by filter, built on :mod:`procedures.spark.write` and the commit path of
:mod:`procedures.core` (Java's ``AppendData``, ``OverwriteByExpression``,
``OverwritePartitionsDynamic`` and ``DeleteFromTable``).

Deletes and overwrites remove the files whose rows all match the filter (strict partition
projection or strict column metrics) without reading them.  Files that only partly match are
handled by ``write.delete.mode``: ``copy-on-write`` rewrites their remaining rows into new files;
``merge-on-read`` writes position delete files (v2) or deletion vectors (v3) for the matching
rows, found by reading the files' ``_file``/``_pos`` metadata columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from procedures.catalog.base import Table
from procedures.core.kernel.operations import MergeAppend, OverwriteFiles, ReplacePartitions, RowDelta
from procedures.core.kernel.properties import DELETE_MODE
from procedures.core.kernel.scan import iter_file_scan_tasks
from procedures.core.kernel.transaction import commit
from procedures.errors import ValidationError
from procedures.io.delete_writers import DeleteTarget, merge_positions, read_position_deletes, write_deletes
from procedures.spark.catalog_conf import statement_conf
from procedures.spark.read import read_files
from procedures.spark.scan_planning import SparkEntryReader
from procedures.spark.session import job_description, load_table, record_engine
from procedures.spark.write import distribution_of, write_dataframe
from procedures.spec.evaluators import Evaluator, StrictMetricsEvaluator
from procedures.spec.expression_parser import parse_filter
from procedures.spec.expressions import Expression
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
from procedures.spec.metadata_columns import row_lineage_names
from procedures.spec.projection import strict_projection
from procedures.spec.snapshots import SPARK_APP_ID

__all__ = ["append", "overwrite", "overwrite_partitions", "delete_where", "FilterMatch", "match_files",
           "write_position_changes", "file_scoped_deletes", "commit_write"]

COPY_ON_WRITE = "copy-on-write"
MERGE_ON_READ = "merge-on-read"


def commit_write(spark: Any, t: Table, ops: list[Any]) -> Table:
    """Commit a DataFrame write's operations with the Spark application id in the snapshot summary
    (``spark.app.id``, as Iceberg Java's Spark writes add it besides ``app-id``)."""
    app_id = record_engine(spark)
    for op in ops:
        if app_id:
            op.snapshot_properties.setdefault(SPARK_APP_ID, app_id)
    return commit(t, ops)


def _target(spark: Any, table: str | Table) -> tuple[Table, str]:
    """The table an append or overwrite writes to and its distribution mode, from one read of the
    session's conf (on Spark Connect a round trip each)."""
    with statement_conf(spark):
        t = load_table(spark, table)
        return t, distribution_of(spark, t)


def append(spark: Any, table: str | Table, df: Any, *, sort: bool = False,
           snapshot_properties: dict[str, str] | None = None, columns: Sequence[str] | None = None) -> Table:
    """Append the DataFrame's rows (``INSERT INTO``); returns the committed table.  ``columns``: the
    DataFrame's column names when known (:func:`~procedures.spark.write.write_dataframe`)."""
    t, distribution = _target(spark, table)
    files = write_dataframe(spark, t, df, sort=sort, description=f"append to {t.name}", columns=columns,
                            distribution=distribution)
    if not files:
        return t
    return commit_write(spark, t, [MergeAppend(files, snapshot_properties=dict(snapshot_properties or {}))])


def overwrite_partitions(spark: Any, table: str | Table, df: Any, *, sort: bool = False) -> Table:
    """Dynamic partition overwrite (``INSERT OVERWRITE`` with ``partitionOverwriteMode=dynamic``):
    every partition the DataFrame writes to is replaced; an unpartitioned table is replaced."""
    t, distribution = _target(spark, table)
    files = write_dataframe(spark, t, df, sort=sort, description=f"overwrite partitions of {t.name}",
                            distribution=distribution)
    if not files:
        return t
    start = t.metadata.current_snapshot_id
    return commit_write(spark, t, [ReplacePartitions(files, starting_snapshot_id=start)])


@dataclass
class FilterMatch:
    """The live data files of a snapshot split by how a filter matches them."""

    snapshot_id: int | None
    full: list[DataFile] = field(default_factory=list)
    partial: list[DataFile] = field(default_factory=list)
    #: data file path -> the delete files that apply to it
    deletes: dict[str, list[DataFile]] = field(default_factory=dict)


def _expression(filter: str | Expression) -> Expression:
    if isinstance(filter, Expression):
        return filter
    if isinstance(filter, str) and filter.strip():
        return parse_filter(filter)
    raise ValidationError(f"a filter is required (Spark SQL text such as \"id > 5\"), got {filter!r}")


def match_files(table: Table, filter: str | Expression, spark: Any = None) -> FilterMatch:
    """Files that may hold matching rows, split into those whose every row matches (by strict
    partition projection or strict metrics) and those that only may.  With ``spark``, many data
    manifests are read on the executors (:class:`SparkEntryReader`), as a scan plans them."""
    md = table.metadata
    expr = _expression(filter)
    schema = md.schema()
    strict_metrics = StrictMetricsEvaluator(schema, expr)
    strict_parts: dict[int, Evaluator] = {}
    out = FilterMatch(md.current_snapshot_id)
    # each task is used once here: streamed, so the driver never holds the whole task list
    reader = SparkEntryReader(spark, table.io, table.name, stream=True) if spark is not None else None
    for task in iter_file_scan_tasks(md, table.io, filter=expr, read_entries=reader):
        df = task.data_file
        spec = md.spec_by_id(df.spec_id)
        ev = strict_parts.get(df.spec_id)
        if ev is None and spec is not None:
            ev = strict_parts[df.spec_id] = Evaluator(spec.partition_type(schema), strict_projection(spec, schema, expr))
        full = (ev is not None and spec.fields and ev.eval(df.partition)) or strict_metrics.eval(df)
        (out.full if full else out.partial).append(df)
        out.deletes[df.file_path] = [d.data_file for d in task.deletes]
    return out


def _not_matching(filter: str) -> str:
    # rows where the filter is NULL are not deleted, as in SQL DELETE
    return f"NOT coalesce(({filter}), false)"


def _rewrite_remaining(spark: Any, t: Table, files: list[DataFile], filter: str | Expression, description: str,
                       ) -> list[DataFile]:
    """Copy-on-write: the rows of ``files`` that do not match ``filter``, written to new files.  They
    are not modified, so on a v3 table each keeps its ``_row_id`` and ``_last_updated_sequence_number``
    (written into the new files, as Java's copy-on-write does)."""
    if not isinstance(filter, str):
        raise ValidationError(
            f"{len(files)} file(s) of {t.name} only partly match the filter; rewriting them needs the filter as "
            "Spark SQL text, not an expression object"
        )
    lineage = row_lineage_names(t.metadata.format_version)
    kept = read_files(spark, t, files, metadata_columns=lineage).where(_not_matching(filter))
    return write_dataframe(spark, t, kept, description=description, row_lineage=bool(lineage))


def file_scoped_deletes(match: FilterMatch, removed: Iterable[DataFile]) -> list[str]:
    """Position delete files (not DVs, whose Puffin may hold other files' vectors) that only
    reference removed data files: they go with their data file."""
    out = []
    for df in removed:
        for d in match.deletes.get(df.file_path, ()):
            if d.file_format != FileFormat.PUFFIN and d.referenced_data_file == df.file_path:
                out.append(d.file_path)
    return out


def overwrite(spark: Any, table: str | Table, df: Any, filter: str | Expression, *, sort: bool = False) -> Table:
    """Replace the rows matching ``filter`` by the DataFrame's rows (``INSERT OVERWRITE ... WHERE``,
    ``DataFrameWriterV2.overwrite``).

    Files fully matched are removed; partly matched files are rewritten without the matching rows
    (copy-on-write), so the result is exact whatever the partitioning.
    """
    t, distribution = _target(spark, table)
    with job_description(spark, f"overwrite {t.name} where {filter}"):
        match = match_files(t, filter, spark)
        new_files = write_dataframe(spark, t, df, sort=sort, description=f"overwrite {t.name}: new rows",
                                    distribution=distribution)
        rewritten: list[DataFile] = []
        if match.partial:
            rewritten = _rewrite_remaining(spark, t, match.partial, filter,
                                           f"overwrite {t.name}: rewrite {len(match.partial)} file(s)")
    removed = match.full + match.partial
    remove_paths = [f.file_path for f in removed] + file_scoped_deletes(match, removed)
    if not remove_paths and not new_files and not rewritten:
        return t
    op = OverwriteFiles(
        add_files=new_files + rewritten, remove_paths=remove_paths, starting_snapshot_id=match.snapshot_id,
        validate_no_conflicting_deletes=True,
    )
    return commit_write(spark, t, [op])


def delete_where(spark: Any, table: str | Table, filter: str | Expression, *, mode: str | None = None) -> Table:
    """Delete the rows matching ``filter`` (``DELETE FROM t WHERE ...``).

    ``mode`` (default: table property ``write.delete.mode``, else copy-on-write) decides how partly
    matching files are handled; fully matching files are always just removed.
    """
    t = load_table(spark, table)
    md = t.metadata
    mode = mode.strip().lower() if mode else DELETE_MODE.read(md.properties)
    if mode not in (COPY_ON_WRITE, MERGE_ON_READ):
        raise ValidationError(f"{DELETE_MODE.key}={mode!r} on {t.name}: use {COPY_ON_WRITE} or {MERGE_ON_READ}")
    if mode == MERGE_ON_READ and md.format_version < 2:
        raise ValidationError(f"{t.name} is format v1: merge-on-read deletes need v2 or later")
    with job_description(spark, f"delete from {t.name} where {filter}"):
        match = match_files(t, filter, spark)
        if not match.full and not match.partial:
            return t
        if mode == COPY_ON_WRITE or not match.partial:
            rewritten: list[DataFile] = []
            if match.partial:
                rewritten = _rewrite_remaining(spark, t, match.partial, filter, f"delete from {t.name}: rewrite files")
            removed = match.full + match.partial
            op = OverwriteFiles(
                add_files=rewritten,
                remove_paths=[f.file_path for f in removed] + file_scoped_deletes(match, removed),
                starting_snapshot_id=match.snapshot_id, validate_no_conflicting_deletes=True,
            )
            return commit_write(spark, t, [op])
        return _merge_on_read_delete(spark, t, match, filter)


def _merge_on_read_delete(spark: Any, t: Table, match: FilterMatch, filter: str | Expression) -> Table:
    text = filter if isinstance(filter, str) else None
    if text is None:
        raise ValidationError("merge-on-read deletes of partly matching files need the filter as Spark SQL text")
    rows = read_files(spark, t, match.partial, filter=text, metadata_columns=("_file", "_pos"))
    hits: dict[str, list[int]] = {}
    for r in rows.select("_file", "_pos").collect():
        hits.setdefault(r[0], []).append(r[1])
    new_deletes, remove_deletes = write_position_changes(t, hits, match.partial, match.deletes)
    removed_data = match.full
    removed_data_scoped = file_scoped_deletes(match, removed_data)
    op = RowDelta(
        add_deletes=new_deletes,
        # fully matched data files go by path with the replaced deletes
        remove_deletes=remove_deletes + removed_data + [d for p in removed_data_scoped for d in _by_path(match, p)],
        starting_snapshot_id=match.snapshot_id,
    )
    return commit_write(spark, t, [op])


def write_position_changes(t: Table, hits: dict[str, list[int]], data_files: Iterable[DataFile],
                           deletes: dict[str, list[DataFile]], *, absorb_file_scoped: bool = False,
                           ) -> tuple[list[DataFile], list[DataFile]]:
    """Write the deletes marking positions ``hits`` (data file path -> row positions) of ``data_files``:
    position delete files on v2, deletion vectors on v3, where a data file's new DV absorbs its old
    DV or file-scoped position deletes (``deletes``: data file path -> the delete files applying to
    it); with ``absorb_file_scoped`` a v2 data file's new position delete file absorbs its old
    file-scoped ones too.  Returns ``(new delete files, replaced delete files to remove)``."""
    md = t.metadata
    by_path = {f.file_path: f for f in data_files}
    remove_deletes: list[DataFile] = []
    targets: dict[DeleteTarget, list[int]] = {}
    for path, positions in hits.items():
        # a DV holds all of its data file's deleted positions, so it absorbs the partition-scoped ones
        # too; a new file-scoped position delete file may absorb the old file-scoped ones, which go
        # (Java's Spark DML does so since 1.8, so a data file keeps one delete file)
        scopes = (None, path) if md.format_version >= 3 else ((path,) if absorb_file_scoped else ())
        old = [d for d in deletes.get(path, ()) if d.content == FileContent.POSITION_DELETES
               and d.referenced_data_file in scopes]
        if old:
            existing = [read_position_deletes(t.io, d).get(path, ()) for d in old]
            positions = merge_positions(positions, *existing)
            remove_deletes += [d for d in old if d.referenced_data_file == path]
        targets[DeleteTarget.of(by_path[path])] = positions
    new_deletes = write_deletes(t.io, md, targets) if targets else []
    # one DV per (Puffin file, blob offset): the core removes exactly those blobs and leaves the
    # neighbours that share the Puffin file in place
    return new_deletes, list({(d.file_path, d.content_offset): d for d in remove_deletes}.values())


def _by_path(match: FilterMatch, path: str) -> list[DataFile]:
    for ds in match.deletes.values():
        for d in ds:
            if d.file_path == path:
                return [d]
    return []
