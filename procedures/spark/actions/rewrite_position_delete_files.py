"""The ``rewrite_position_delete_files`` action (procedures.md §3.17): compact position delete files and
drop deletes that point at data files no longer in the table.

Follows Iceberg Java 1.10: live position delete files of the current snapshot (restricted by ``where``
on base-table columns through each file's partition) are bucketed per spec and partition,
bin-packed with the size rules of the data rewrite (target ``write.delete.target-file-size-bytes``),
and each kept group is rewritten into new files holding only the positions of *live* data files.
On a v3 table where every position delete is already a deletion vector there is nothing to do; v2
position delete files of a v3 table are rewritten into DVs (merged with a data file's existing DV,
which is replaced).  As in Java, a group keeps only the deletes of live data files of its own
partition.  With a Spark session every group is rewritten in one Spark job: the groups are dealt
over at most ``max-concurrent-file-group-rewrites`` tasks (and twice the cores), balanced by the
bytes of their delete files, each task rewriting its groups one after the other
(:func:`procedures.spark.group_writes.write_groups`: a group that fails is reported on its own, its
files deleted, and the other groups of its task go on with partial progress, or are skipped
without).  Without a session, groups are rewritten on the driver.  Commits go through the same
``RewriteFiles`` path as ``rewrite_data_files``, all at once or, with partial progress, in batches (a
failed group or batch is logged and skipped, as in Java).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from procedures.core.rewrite.data_files import compaction_rewrite
from procedures.core.rewrite.planner import FileGroup, parse_position_delete_options, plan_groups
from procedures.core.kernel.snapshot_producer import live_entries, snapshot_manifests
from procedures.core.kernel.summary import content_size, is_dv
from procedures.core.kernel.transaction import commit
from procedures.errors import CommitStateUnknownError, IcebergError, ValidationError
from procedures.io.delete_writers import (
    DeleteTarget, merged_positions, read_position_arrays, write_deletion_vectors, write_position_delete_files,
)
from procedures.io.parquet_writer import data_location
from procedures.io.sandbox_fileio import file_io
from procedures.spark.dataframes import parallelism
from procedures.spark.group_writes import GroupOutcome, write_groups
from procedures.spark.session import job_description
from procedures.spark.write import task_ids
from procedures.spec.evaluators import Evaluator
from procedures.spec.expressions import ALWAYS_TRUE
from procedures.spec.manifest.model import DataFile, FileContent, ManifestContent
from procedures.spec.projection import inclusive_projection

__all__ = ["rewrite_position_deletes"]

log = logging.getLogger(__name__)

#: the least a delete file weighs when groups are dealt over tasks (opening one costs a round trip)
_OPEN_FILE_COST = 4 * 1024 * 1024


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


def _rewrite_groups_in_spark(spark: Any, table: Any, inputs: list[_GroupInput], slots: int,
                             stop_on_failure: bool) -> list[GroupOutcome]:
    """Every group rewritten by one Spark job of at most ``slots`` tasks, balanced by the bytes of
    the groups' delete files; see :func:`~procedures.spark.group_writes.write_groups` for what a
    failing group means for the others."""
    md = table.metadata
    io_props = dict(getattr(table.io, "properties", {}) or {})
    operation_id = str(uuid.uuid4())

    def rewrite(index: int, group: _GroupInput) -> list[DataFile]:
        partition_id, task_id = task_ids()
        # one operation id per group keeps file names unique when a task rewrites several groups
        return _rewrite_group(file_io(io_props), md, group, partition_id=partition_id, task_id=task_id,
                              operation_id=f"{operation_id}-{index}")

    # reading a delete file costs at least a round trip however small it is
    weights = [sum(max(content_size(f), _OPEN_FILE_COST) for f in g.files) for g in inputs]
    n_files = sum(len(g.files) for g in inputs)
    text = (f"rewrite_position_delete_files: {table.name}: rewrite {n_files} position delete files "
            f"in {len(inputs)} file groups")
    with job_description(spark, text):
        return write_groups(spark, table.io, inputs, weights, slots, rewrite, stop_on_failure=stop_on_failure,
                            data_path=data_location(md.location, md.properties))


def _rewrite_groups_on_driver(table: Any, inputs: list[_GroupInput], max_concurrent: int) -> list[GroupOutcome]:
    """Every group rewritten on the driver, up to ``max_concurrent`` at once (no Spark session)."""
    def run(index: int) -> GroupOutcome:
        try:
            added = _rewrite_group(table.io, table.metadata, inputs[index])
        except Exception as e:  # noqa: BLE001 -- the caller decides by the partial-progress rules
            return GroupOutcome(index, error=e)
        log.info("Rewrote position delete file group %d/%d of %s", index + 1, len(inputs), table.name)
        return GroupOutcome(index, tuple(added))

    with ThreadPoolExecutor(max_concurrent, thread_name_prefix="Rewrite-Position-Delete-Service") as pool:
        return list(pool.map(run, range(len(inputs))))


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
    if spark is None:
        outcomes = _rewrite_groups_on_driver(table, inputs, opts.max_concurrent)
    else:
        # groups in flight at once: one per task, so the tasks are capped by the option (and by
        # twice the cores, which is enough to even out estimated weights)
        slots = max(1, min(opts.max_concurrent, 2 * parallelism(spark)))
        try:
            outcomes = _rewrite_groups_in_spark(spark, table, inputs, slots, stop_on_failure=not opts.partial_progress)
        except Exception as e:
            if not opts.partial_progress:
                raise
            # the job failed as a whole (its files are gone): every group failed, and with partial
            # progress a failed group is logged and skipped, as in Java
            log.error("Failure during rewrite of the position delete file groups of %s: %s", table.name, e)
            outcomes = []
        log.info("Rewrote %d of %d position delete file groups of %s in one Spark job",
                 sum(1 for o in outcomes if o.error is None), len(inputs), table.name)
    written = [(plan.groups[o.index], list(o.files), _replaced_dvs(inputs[o.index], list(o.files)))
               for o in outcomes if o.error is None]
    failures = [o for o in outcomes if o.error is not None]
    for o in failures:
        log.error("Failure during rewrite of position delete file group %d/%d of %s: %s\n%s", o.index + 1,
                  len(inputs), table.name, o.error, o.task_traceback)
    if failures and not opts.partial_progress:
        # nothing is committed: the files of the groups that did finish go too
        _cleanup(table, [f for _, added, _ in written for f in added])
        raise failures[0].error
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
