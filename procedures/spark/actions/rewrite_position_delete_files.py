"""The ``rewrite_position_delete_files`` action (procedures.md §3.17): compact position delete files and
drop deletes that point at data files no longer in the table.

Follows Iceberg Java 1.10: live position delete files of the current snapshot (restricted by ``where``
on base-table columns through each file's partition) are bucketed per spec and partition,
bin-packed with the size rules of the data rewrite (target ``write.delete.target-file-size-bytes``),
and each kept group is rewritten into new files holding only the positions of *live* data files.
On a v3 table where every position delete is already a deletion vector there is nothing to do; v2
position delete files of a v3 table are rewritten into DVs (merged with a data file's existing DV,
which is replaced).  As in Java, a group keeps only the deletes of live data files of its own
partition.  With a Spark session each group is rewritten by one Spark task (groups run as concurrent
jobs, up to ``max-concurrent-file-group-rewrites``; files of a failed job are deleted); without one,
on the driver.  Commits go through the same ``RewriteFiles`` path as ``rewrite_data_files``, all at
once or, with partial progress, in batches (a failed batch is logged and skipped, as in Java).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import pickle
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from procedures.core.rewrite.data_files import compaction_rewrite
from procedures.core.rewrite.planner import FileGroup, parse_position_delete_options, plan_groups
from procedures.core.snapshot_producer import live_entries, snapshot_manifests
from procedures.core.summary import content_size, is_dv
from procedures.core.transaction import commit
from procedures.errors import CommitStateUnknownError, IcebergError, ValidationError
from procedures.io.delete_writers import (
    DeleteTarget, merged_positions, read_position_arrays, write_deletion_vectors, write_position_delete_files,
)
from procedures.io.sandbox import file_io
from procedures.spark.session import in_caller_context, job_description
from procedures.spark.write import task_ids, write_payloads
from procedures.spec.evaluators import Evaluator
from procedures.spec.expressions import ALWAYS_TRUE
from procedures.spec.manifest import DataFile, FileContent, ManifestContent
from procedures.spec.projection import inclusive_projection

__all__ = ["rewrite_position_deletes"]

log = logging.getLogger(__name__)


class _DeleteTask:
    """A position delete file as a planning item (the planner only needs ``data_file``)."""

    __slots__ = ("data_file",)

    def __init__(self, f: DataFile) -> None:
        self.data_file = f


@dataclasses.dataclass(frozen=True)
class _GroupInput:
    """What rewriting one group needs: its delete files, the live data files they may keep deletes
    for (those of the group's partition), and those files' current DVs (v3)."""

    files: tuple[DataFile, ...]
    targets: dict[str, DeleteTarget]
    dvs: dict[str, DataFile]


def _rewrite_group(io: Any, md: Any, group: _GroupInput, *, partition_id: int = 0, task_id: int = 0,
                   operation_id: str | None = None) -> list[DataFile]:
    """New delete files for a group; deletes of data files that are not live targets are dangling
    and dropped.  On v3 each new DV absorbs the data file's current DV (see :func:`_replaced_dvs`)."""
    found: dict[str, list[Any]] = {}
    for f in group.files:
        for path, pos in read_position_arrays(io, f).items():
            if path in group.targets:
                found.setdefault(path, []).append(pos)
    positions = {path: merged_positions(*runs) for path, runs in found.items()}
    if not positions:
        return []
    names = {"partition_id": partition_id, "task_id": task_id, "operation_id": operation_id}
    if md.format_version >= 3:
        merged = {}
        for path, pos in positions.items():
            old = group.dvs.get(path)
            if old is not None:
                pos = merged_positions(pos, read_position_arrays(io, old).get(path, ()))
            merged[group.targets[path]] = pos
        return write_deletion_vectors(io, md, merged, **names)
    return write_position_delete_files(io, md, {group.targets[p]: pos for p, pos in positions.items()}, **names)


def _replaced_dvs(group: _GroupInput, added: list[DataFile]) -> list[DataFile]:
    """The current DVs that the group's new DVs absorbed (every new DV replaces its file's old one)."""
    return [group.dvs[f.referenced_data_file] for f in added
            if f.referenced_data_file is not None and f.referenced_data_file in group.dvs]


def _rewrite_group_in_spark(spark: Any, table: Any, group: _GroupInput, description: str) -> list[DataFile]:
    """:func:`_rewrite_group` as a one-task Spark job; its files are deleted if the job fails."""
    md = table.metadata
    io_props = dict(getattr(table.io, "properties", {}) or {})
    operation_id = str(uuid.uuid4())

    def rewrite(payload: bytes) -> list[list[DataFile]]:
        partition_id, task_id = task_ids()
        return [_rewrite_group(file_io(io_props), md, pickle.loads(payload), partition_id=partition_id,
                               task_id=task_id, operation_id=operation_id)]

    with job_description(spark, description):
        return write_payloads(spark, table.io, [pickle.dumps(group, protocol=pickle.HIGHEST_PROTOCOL)], rewrite)


def _group_inputs(md: Any, groups: list[FileGroup], data_files: list[DataFile], dvs: dict[str, DataFile]
                  ) -> list[_GroupInput]:
    # Java keeps a group's deletes only for live data files of the same partition (and spec)
    by_partition: dict[tuple, dict[str, DeleteTarget]] = {}
    for f in data_files:
        by_partition.setdefault((f.spec_id, tuple(f.partition)), {})[f.file_path] = DeleteTarget.of(f)
    out = []
    for g in groups:
        key = (g.files[0].spec_id, tuple(g.files[0].partition)) if g.files else (md.default_spec_id, ())
        targets = by_partition.get(key, {})
        out.append(_GroupInput(tuple(g.files), targets, {p: dvs[p] for p in targets if p in dvs}))
    return out


def rewrite_position_deletes(table: Any, options: dict | None = None, where=None, *, committer=None,
                             case_sensitive: bool = False, spark: Any = None) -> tuple[int, int, int, int]:
    """Plan, rewrite (in Spark tasks when ``spark`` is given, else on the driver) and commit;
    returns the procedure's output row."""
    md = table.metadata
    snap = md.current_snapshot()
    if snap is None:
        return (0, 0, 0, 0)
    opts = parse_position_delete_options(options, table_properties=md.properties)
    expr = where if where is not None else ALWAYS_TRUE
    manifests = snapshot_manifests(table.io, snap)
    data_files = [e.data_file for e in live_entries(table.io, md, [m for m in manifests if m.content == ManifestContent.DATA])]
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
        opts = dataclasses.replace(opts, rewrite_all=True)  # every v2 file must become DVs
    plan = plan_groups([_DeleteTask(f) for f in candidates], opts,
                       bucket_of=lambda t: (t.data_file.spec_id,) + tuple(t.data_file.partition))
    if not plan.groups:
        return (0, 0, 0, 0)
    do_commit = committer or (lambda t, ops: commit(t, ops))
    starting = snap.snapshot_id
    results: list[tuple[FileGroup, list[DataFile]]] = []

    inputs = _group_inputs(md, plan.groups, data_files, dvs)

    def run(index: int) -> tuple[FileGroup, list[DataFile], list[DataFile]]:
        group, given = plan.groups[index], inputs[index]
        if spark is None:
            added = _rewrite_group(table.io, md, given)
        else:
            text = (f"Rewriting {len(given.files)} position delete files (file group {index + 1}/{len(inputs)}) "
                    f"in {table.name}")
            added = _rewrite_group_in_spark(spark, table, given, text)
        log.info("Rewrote position delete file group %d/%d of %s", index + 1, len(inputs), table.name)
        return group, added, _replaced_dvs(given, added)

    with ThreadPoolExecutor(opts.max_concurrent, thread_name_prefix="Rewrite-Position-Delete-Service") as pool:
        in_context = in_caller_context(spark, run)
        futures = [pool.submit(in_context, i) for i in range(len(plan.groups))]
        outcomes = [(f.result() if f.exception() is None else f.exception()) for f in futures]
    written = [o for o in outcomes if not isinstance(o, BaseException)]
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    if failures and not opts.partial_progress:
        # nothing is committed: the files of the groups that did finish go too
        _cleanup(table, [f for _, added, _ in written for f in added])
        raise failures[0]
    for error in failures:
        log.error("Failure during rewrite of a position delete file group of %s: %s", table.name, error)
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
