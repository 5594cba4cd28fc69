"""``rewrite_position_delete_files`` (procedures.md §3.17): compact position delete files and drop
deletes that point at data files no longer in the table.

Follows Iceberg Java 1.10: live position delete files of the current snapshot (restricted by ``where``
on base-table columns through each file's partition) are bucketed per spec and partition,
bin-packed with the size rules of the data rewrite (target ``write.delete.target-file-size-bytes``),
and each kept group is rewritten into new files holding only the positions of *live* data files.
On a v3 table where every position delete is already a deletion vector there is nothing to do; v2
position delete files of a v3 table are rewritten into DVs (merged with a data file's existing DV,
which is replaced).  Each group's rows are small (path, position), so groups are rewritten on the
driver with :mod:`procedures.io.delete_writers`; commits go through the same ``RewriteFiles`` path as
``rewrite_data_files``, all at once or, with partial progress, in batches (a failed batch is logged
and skipped, as in Java).
"""

from __future__ import annotations

import logging
import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from procedures.core.snapshot_producer import live_entries, snapshot_manifests
from procedures.core.summary import content_size, is_dv
from procedures.core.transaction import commit
from procedures.errors import CommitStateUnknownError, IcebergError, ValidationError
from procedures.io.delete_writers import (
    DeleteTarget, merge_positions, read_position_deletes, write_deletion_vectors, write_position_delete_files,
)
from procedures.maintenance.params import OutputColumn as Col, Parameter as P
from procedures.maintenance.registry import ProcedureContext, register
from procedures.maintenance.rewrite_data_files import compaction_rewrite, _filter
from procedures.maintenance.rewrite_planner import FileGroup, parse_position_delete_options, plan_groups
from procedures.spec.evaluators import Evaluator
from procedures.spec.expressions import ALWAYS_TRUE
from procedures.spec.manifest import DataFile, FileContent, ManifestContent
from procedures.spec.projection import inclusive_projection

__all__ = ["rewrite_position_delete_files", "rewrite_position_deletes"]

log = logging.getLogger(__name__)


class _DeleteTask:
    """A position delete file as a planning item (the planner only needs ``data_file``)."""

    __slots__ = ("data_file",)

    def __init__(self, f: DataFile) -> None:
        self.data_file = f


def _write_group(table: Any, group: FileGroup, data_files: dict[str, DataFile], dvs: dict[str, DataFile]
                 ) -> tuple[list[DataFile], list[DataFile]]:
    """New delete files for a group, and the existing DVs they replace."""
    md = table.metadata
    positions: dict[str, list[int]] = {}
    for f in group.files:
        for path, pos in read_position_deletes(table.io, f).items():
            if path in data_files:  # deletes of removed data files are dangling: dropped
                positions[path] = merge_positions(positions.get(path, ()), pos)
    if not positions:
        return [], []
    targets = {DeleteTarget.of(data_files[p]): pos for p, pos in positions.items()}
    if md.format_version >= 3:
        replaced = []
        merged = {}
        for target, pos in targets.items():
            old = dvs.get(target.file_path)
            if old is not None:
                replaced.append(old)
                pos = merge_positions(pos, read_position_deletes(table.io, old).get(target.file_path, ()))
            merged[target] = pos
        return write_deletion_vectors(table.io, md, merged), replaced
    return write_position_delete_files(table.io, md, targets), []


def rewrite_position_deletes(table: Any, options: dict | None = None, where=None, *, committer=None,
                             case_sensitive: bool = False) -> tuple[int, int, int, int]:
    """Plan, rewrite and commit; returns the procedure's output row."""
    md = table.metadata
    snap = md.current_snapshot()
    if snap is None:
        return (0, 0, 0, 0)
    opts = parse_position_delete_options(options, table_properties=md.properties)
    expr = where if where is not None else ALWAYS_TRUE
    manifests = snapshot_manifests(table.io, snap)
    data_files = {e.data_file.file_path: e.data_file
                  for e in live_entries(table.io, md, [m for m in manifests if m.content == ManifestContent.DATA])}
    deletes = [e.data_file for e in live_entries(table.io, md, [m for m in manifests if m.content == ManifestContent.DELETES])
               if e.data_file.content == FileContent.POSITION_DELETES]
    dvs = {f.referenced_data_file: f for f in deletes if is_dv(f)}
    candidates = [f for f in deletes if not is_dv(f)]
    if md.format_version >= 3 and not candidates:
        log.info("v2 deletes in %s have already been rewritten to v3 DVs", table.name)
        return (0, 0, 0, 0)
    if expr is not ALWAYS_TRUE:
        evaluators: dict[int, Evaluator] = {}

        def matches(f: DataFile) -> bool:
            if f.spec_id not in evaluators:
                spec = md.spec_by_id(f.spec_id)
                evaluators[f.spec_id] = Evaluator(spec.partition_type(md.schema()),
                                                  inclusive_projection(spec, md.schema(), expr, case_sensitive))
            return evaluators[f.spec_id].eval(f.partition)

        candidates = [f for f in candidates if matches(f)]
    if md.format_version >= 3:
        from dataclasses import replace  # noqa: PLC0415

        opts = replace(opts, rewrite_all=True)  # every v2 file must become DVs
    plan = plan_groups([_DeleteTask(f) for f in candidates], opts,
                       bucket_of=lambda t: (t.data_file.spec_id,) + tuple(t.data_file.partition))
    if not plan.groups:
        return (0, 0, 0, 0)
    do_commit = committer or (lambda t, ops: commit(t, ops))
    starting = snap.snapshot_id
    results: list[tuple[FileGroup, list[DataFile]]] = []

    def run(group: FileGroup):
        return group, *_write_group(table, group, data_files, dvs)

    with ThreadPoolExecutor(opts.max_concurrent, thread_name_prefix="Rewrite-Position-Delete-Service") as pool:
        written = list(pool.map(run, plan.groups))
    per_commit = math.ceil(plan.total_group_count / opts.max_commits) if opts.partial_progress else len(written)
    current = table
    for start in range(0, len(written), max(1, per_commit)):
        batch = written[start:start + per_commit]
        removed = [f for g, _, _ in batch for f in g.files] + [d for _, _, r in batch for d in r]
        added = [f for _, a, _ in batch for f in a]
        op = compaction_rewrite(remove_deletes=removed, add_files=added, starting_snapshot_id=starting)
        try:
            current = do_commit(current.refresh(), [op])
        except CommitStateUnknownError:
            raise
        except IcebergError as e:
            _cleanup(table, added)
            if not opts.partial_progress:
                raise ValidationError(f"Cannot commit rewrite because of a ValidationException or "
                                      f"CommitFailedException: {e}") from e
            log.error("Failure during position delete rewrite commit of %s: %s", table.name, e)
            continue
        results.extend((g, a) for g, a, _ in batch)
    rewritten = [f for g, _ in results for f in g.files]
    added = [f for _, a in results for f in a]
    return (len(rewritten), len(added), sum(content_size(f) for f in rewritten), sum(content_size(f) for f in added))


def _cleanup(table: Any, files: list[DataFile]) -> None:
    try:
        table.io.delete_many(sorted({f.file_path for f in files}))
    except Exception as e:  # noqa: BLE001 - cleanup must not hide the failure
        log.warning("could not delete files of a failed position delete rewrite of %s: %s", table.name, e)


@register(
    "rewrite_position_delete_files",
    parameters=[
        P("table", "STRING", True, doc="Table whose position delete files are compacted."),
        P("options", "MAP<STRING,STRING>", doc="Rewrite options (target-file-size-bytes, min-input-files, ...)."),
        P("where", "STRING", doc="Predicate on base-table columns selecting delete files by partition."),
    ],
    output=(
        Col("rewritten_delete_files_count", "INT", False, "Delete files replaced."),
        Col("added_delete_files_count", "INT", False, "Delete files written."),
        Col("rewritten_bytes_count", "BIGINT", False, "Bytes of the replaced delete files."),
        Col("added_bytes_count", "BIGINT", False, "Bytes of the new delete files."),
    ),
)
def rewrite_position_delete_files(ctx: ProcedureContext, table: str, options: dict | None, where: str | None) -> list[tuple]:
    """Compact position delete files, dropping deletes of data files that are gone."""
    t = ctx.load_table(table)
    cs = str(ctx.conf.get("spark.sql.caseSensitive", "false")).lower() == "true"
    expr = _filter(t.metadata, where, cs)
    return [rewrite_position_deletes(t, options, expr, committer=ctx.commit, case_sensitive=cs)]
