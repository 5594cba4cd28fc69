"""``rewrite_data_files`` without an engine (procedures.md §3.9): strategy, commit manager, dangling deletes.

Follows Iceberg Java 1.10's procedure and ``RewriteDataFilesSparkAction``:

* the strategy decision table (binpack | sort, with the table's sort order, a column list or
  ``zorder(...)``) and its error texts;
* options validated up front (:mod:`procedures.core.rewrite.planner`), ``where`` parsed into an Iceberg filter and
  used for file selection only (whole files are rewritten);
* a pure plan from the starting snapshot (:mod:`procedures.core.rewrite.planner`), then groups
  rewritten by the engine's ``rewrite`` callable on a driver thread pool bounded by
  ``max-concurrent-file-group-rewrites`` (the Spark action is
  :mod:`procedures.spark.actions.rewrite_data_files`);
* the commit manager: one ``RewriteFiles`` commit (or, with ``partial-progress.enabled``, one per
  batch of ``ceil(groups / max-commits)`` groups) validated from the starting snapshot, new files
  taking the starting snapshot's data sequence number (``use-starting-sequence-number``), the DVs of
  rewritten files removed with them; every file written for a failed rewrite or commit is deleted;
* ``remove-dangling-deletes``: a second commit removing delete files that apply to no live file.

Concurrent appends never conflict.  A concurrent delete against a rewritten file fails the commit
that contains it (the whole call without partial progress) and leaves the table as it was.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from procedures.core.kernel.operations import RewriteFiles
from procedures.core.rewrite.planner import BIN_PACK, SORT, Z_ORDER, FileGroup, RewriteOptions, RewritePlan
from procedures.core.kernel.snapshot_producer import live_entries, snapshot_manifests
from procedures.core.kernel.summary import is_dv
from procedures.core.kernel.transaction import Table, commit
from procedures.errors import CommitFailedError, CommitStateUnknownError, IcebergError, ValidationError
from procedures.spec.expression_parser import parse_filter
from procedures.spec.expressions import bind
from procedures.spec.manifest.model import DataFile, FileContent, ManifestContent
from procedures.spec.metadata import TableMetadata
from procedures.spec.sorting import SortOrder, parse_sort_order

__all__ = [
    "Strategy", "RewriteResult", "GroupOutcome", "RewriteDataFilesAction", "compaction_rewrite", "parse_strategy",
    "sort_order_id", "find_dangling_deletes", "remove_dangling_deletes", "parse_where",
]

log = logging.getLogger(__name__)

PARTIAL_PROGRESS_HINT = (
    "This usually means that this rewrite has conflicted with another concurrent Iceberg operation. To reduce the "
    "likelihood of conflicts, set partial-progress.enabled which will break up the rewrite into multiple smaller "
    "commits controlled by partial-progress.max-commits. Separate smaller rewrite commits can succeed independently "
    "while any commits that conflict with another Iceberg operation will be ignored. This mode will create "
    "additional snapshots in the table history, one for each commit."
)


# ------------------------------------------------------------------------------ strategy
@dataclass(frozen=True)
class Strategy:
    """The rewriter chosen from ``strategy`` and ``sort_order``."""

    rewriter: str = BIN_PACK
    sort_order: SortOrder | None = None
    zorder_columns: tuple[str, ...] = ()


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


def parse_strategy(md: TableMetadata, table_name: str, strategy: str | None, sort_order: str | None,
                   *, case_sensitive: bool = False) -> Strategy:
    """Java's decision table: bin-pack by default, sort by the table's or the given order, Z-order."""
    if strategy is None and sort_order is None:
        return Strategy(BIN_PACK)
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
            return Strategy(Z_ORDER, zorder_columns=_zorder_columns(md, zorder_cols, case_sensitive))
        if plain:
            order = parse_sort_order(", ".join(plain), md.schema(), order_id=1, case_sensitive=case_sensitive)
            return Strategy(SORT, sort_order=order)
        if md.sort_order().is_unsorted():
            raise ValidationError(
                f"Cannot sort data without a valid sort order, table '{table_name}' is unsorted and no sort order is provided"
            )
        return Strategy(SORT, sort_order=md.sort_order())
    if strategy.lower() == "binpack":
        if sort_order is not None:
            raise ValidationError("Cannot set rewrite mode, it has already been set to BIN-PACK")
        return Strategy(BIN_PACK)
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


# ------------------------------------------------------------------------------ commits
def compaction_rewrite(*, remove_deletes: Iterable[DataFile] = (), remove_files: Iterable[DataFile] = (), **kwargs) -> RewriteFiles:
    """The ``RewriteFiles`` a compaction commits: data files and delete files it replaces (delete files
    by path and blob offset, so one DV leaves a shared Puffin file alone)."""
    return RewriteFiles(remove_files=[*remove_files, *remove_deletes], **kwargs)


@dataclass
class GroupOutcome:
    """A rewritten group and the files written for it."""

    group: FileGroup
    added: list[DataFile]


@dataclass
class RewriteResult:
    """The procedure's output row, with the groups behind it."""

    rewritten_data_files_count: int = 0
    added_data_files_count: int = 0
    rewritten_bytes_count: int = 0
    failed_data_files_count: int = 0
    removed_delete_files_count: int = 0
    committed: list[GroupOutcome] = field(default_factory=list)
    snapshot_ids: list[int] = field(default_factory=list)

    def row(self) -> tuple[int, int, int, int, int]:
        """``(rewritten_data_files_count, added_data_files_count, rewritten_bytes_count,
        failed_data_files_count, removed_delete_files_count)``."""
        return (self.rewritten_data_files_count, self.added_data_files_count, self.rewritten_bytes_count,
                self.failed_data_files_count, self.removed_delete_files_count)

    def add(self, outcome: GroupOutcome) -> None:
        self.committed.append(outcome)
        self.rewritten_data_files_count += outcome.group.input_file_count
        self.added_data_files_count += len(outcome.added)
        self.rewritten_bytes_count += outcome.group.input_size
        self.removed_delete_files_count += len(outcome.group.dangling_dvs())


def _delete_files(table: Table, files: Iterable[DataFile]) -> None:
    paths = [f.file_path for f in files]
    if not paths:
        return
    try:
        table.io.delete_many(paths)
    except Exception as e:  # cleanup must not hide the real failure
        log.warning("could not delete %d file(s) written by a failed rewrite of %s: %s", len(paths), table.name, e)


class RewriteDataFilesAction:
    """Plan, rewrite and commit; the engine behind the procedure (usable from Python directly).

    ``rewrite(group, plan) -> list[DataFile]`` writes a group's new files (the Spark action passes
    :func:`procedures.spark.rewrite.rewrite_group`).  ``committer(table, operations)`` commits
    (default :func:`procedures.core.kernel.transaction.commit`).
    """

    def __init__(
        self,
        table: Table,
        options: RewriteOptions,
        *,
        rewrite: Callable[[FileGroup, RewritePlan], list[DataFile]],
        committer: Callable[[Table, list], Table] | None = None,
        snapshot_properties: dict[str, str] | None = None,
    ) -> None:
        self.table = table
        self.options = options
        self.rewrite = rewrite
        self.committer = committer or (lambda t, ops: commit(t, ops))
        self.snapshot_properties = dict(snapshot_properties or {})
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- commit manager
    def _operation(self, outcomes: Sequence[GroupOutcome], start: TableMetadata, starting_id: int) -> RewriteFiles:
        removed: dict[str, DataFile] = {}
        added: list[DataFile] = []
        dvs: dict[tuple, DataFile] = {}
        for o in outcomes:
            for f in o.group.files:
                removed[f.file_path] = f
            added.extend(o.added)
            for d in o.group.dangling_dvs():
                dvs[(d.file_path, d.content_offset)] = d
        seq = None
        if self.options.use_starting_sequence_number and start.format_version > 1:
            seq = start.snapshot_by_id(starting_id).sequence_number
        return compaction_rewrite(
            remove_files=list(removed.values()), add_files=added, remove_deletes=list(dvs.values()),
            starting_snapshot_id=starting_id, data_sequence_number=seq,
            snapshot_properties=self.snapshot_properties,
        )

    def _commit_or_clean(self, outcomes: Sequence[GroupOutcome], start: TableMetadata, starting_id: int) -> None:
        op = self._operation(outcomes, start, starting_id)
        with self._lock:
            try:
                self.table = self.committer(self.table.refresh(), [op])
            except CommitStateUnknownError:
                log.error("Commit state unknown for a rewrite of %s; written files are kept", self.table.name)
                raise
            except IcebergError:
                # a typed refusal means the table did not change; anything else (an I/O error or an
                # interrupt) may have come after the swap, when the table references these files,
                # so they are left for remove_orphan_files, as Java cleans up only CleanableFailures
                for o in outcomes:
                    _delete_files(self.table, o.added)
                raise
        if op.snapshot is not None:
            self._snapshot_ids.append(op.snapshot.snapshot_id)

    # ---------------------------------------------------------------- execution
    def execute(self, plan: RewritePlan, starting_snapshot_id: int) -> RewriteResult:
        """Rewrite and commit ``plan`` made from ``starting_snapshot_id``."""
        self._snapshot_ids: list[int] = []
        if plan.total_group_count == 0 or not plan.groups:
            return RewriteResult()
        start = self.table.metadata
        if self.options.partial_progress:
            result = self._with_partial_progress(plan, start, starting_snapshot_id)
        else:
            result = self._all_at_once(plan, start, starting_snapshot_id)
        result.snapshot_ids = list(self._snapshot_ids)
        return result

    def _all_at_once(self, plan: RewritePlan, start: TableMetadata, starting_id: int) -> RewriteResult:
        done: list[GroupOutcome] = []
        with ThreadPoolExecutor(self.options.max_concurrent, thread_name_prefix="Rewrite-Service") as pool:
            futures = {pool.submit(self.rewrite, g, plan): g for g in plan.groups}
            error: BaseException | None = None
            for fut in _as_completed(futures):
                try:
                    done.append(GroupOutcome(futures[fut], fut.result()))
                except BaseException as e:  # noqa: BLE001 - re-raised below after cleanup
                    if error is None:
                        error = e
                        for other in futures:
                            other.cancel()
        if error is not None:
            log.error("Cannot complete rewrite of %s: a file group failed while writing; cleaning up %d finished "
                      "groups (partial-progress.enabled may help, but find the root cause)", self.table.name, len(done))
            for o in done:
                _delete_files(self.table, o.added)
            raise error
        try:
            self._commit_or_clean(done, start, starting_id)
        except (ValidationError, CommitFailedError) as e:
            raise ValidationError(
                f"Cannot commit rewrite because of a ValidationException or CommitFailedException. "
                f"{PARTIAL_PROGRESS_HINT} Cause: {e}"
            ) from e
        result = RewriteResult()
        for o in sorted(done, key=lambda o: o.group.global_index):
            result.add(o)
        return result

    def _with_partial_progress(self, plan: RewritePlan, start: TableMetadata, starting_id: int) -> RewriteResult:
        opts = self.options
        per_commit = math.ceil(plan.total_group_count / opts.max_commits)
        result = RewriteResult()
        pending: list[GroupOutcome] = []
        succeeded = 0

        def flush(batch: list[GroupOutcome]) -> None:
            nonlocal succeeded
            try:
                self._commit_or_clean(batch, start, starting_id)
            except CommitStateUnknownError:
                raise
            except IcebergError as e:
                log.error("Failure during rewrite commit of %d group(s) of %s: %s", len(batch), self.table.name, e)
                return
            succeeded += 1
            for o in batch:
                result.add(o)

        with ThreadPoolExecutor(opts.max_concurrent, thread_name_prefix="Rewrite-Service") as pool:
            futures = {pool.submit(self.rewrite, g, plan): g for g in plan.groups}
            for fut in _as_completed(futures):
                group = futures[fut]
                try:
                    pending.append(GroupOutcome(group, fut.result()))
                except Exception as e:  # noqa: BLE001 - a failed group fails only itself
                    log.error("Failure during rewrite group %s of %s: %s", group.global_index, self.table.name, e)
                    result.failed_data_files_count += group.input_file_count
                    continue
                if len(pending) >= per_commit:
                    batch, pending = pending, []
                    flush(batch)
        if pending:
            flush(pending)
        total_commits = min(plan.total_group_count, opts.max_commits)
        failed = total_commits - succeeded
        if failed > opts.max_failed_commits:
            raise ValidationError(
                f"partial-progress.enabled is true but {failed} rewrite commits failed. This is more than the maximum "
                f"allowed failures of {opts.max_failed_commits}. Check the logs to determine why the individual commits "
                "failed. If this is persistent it may help to increase partial-progress.max-commits which will split "
                "the rewrite operation into smaller commits."
            )
        if failed > 0:
            log.warning("partial-progress.enabled is true but %d rewrite commits failed for %s", failed, self.table.name)
        return result


def _as_completed(futures: dict[Future, Any]):
    pending = set(futures)
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for f in sorted(done, key=lambda f: futures[f].global_index):
            yield f


# ------------------------------------------------------------------------------ dangling deletes
def find_dangling_deletes(table: Table) -> list[DataFile]:
    """Live delete files of the current snapshot that can apply to no live data file.

    Per (spec, partition) the minimum data sequence number of live data files decides, as in Java's
    ``RemoveDanglingDeletesSparkAction``: position deletes older than it and equality deletes not newer
    than it are dangling, as is every delete of a partition without data files and every DV whose data
    file is gone.  Global equality deletes (unpartitioned spec) compare with the whole table's minimum
    instead of their own empty partition (Java would drop them whenever the data is partitioned).
    """
    md = table.metadata
    snap = md.current_snapshot()
    if snap is None:
        return []
    manifests = snapshot_manifests(table.io, snap)
    min_seq: dict[tuple, int] = {}
    live_data: set[str] = set()
    overall: int | None = None
    for e in live_entries(table.io, md, [m for m in manifests if m.content == ManifestContent.DATA]):
        f = e.data_file
        seq = e.sequence_number or 0
        key = (f.spec_id, tuple(f.partition))
        min_seq[key] = min(seq, min_seq.get(key, seq))
        overall = seq if overall is None else min(overall, seq)
        live_data.add(f.file_path)
    unpartitioned = {s.spec_id for s in md.partition_specs if s.is_unpartitioned()}
    out = []
    for e in live_entries(table.io, md, [m for m in manifests if m.content == ManifestContent.DELETES]):
        f = e.data_file
        seq = e.sequence_number or 0
        if is_dv(f):
            if f.referenced_data_file not in live_data:
                out.append(f)
                continue
        floor = overall if f.spec_id in unpartitioned else min_seq.get((f.spec_id, tuple(f.partition)))
        if floor is None:
            out.append(f)
        elif f.content == FileContent.POSITION_DELETES and seq < floor:
            out.append(f)
        elif f.content == FileContent.EQUALITY_DELETES and seq <= floor:
            out.append(f)
    return out


def remove_dangling_deletes(table: Table, committer: Callable[[Table, list], Table] | None = None) -> tuple[Table, int]:
    """Commit the removal of :func:`find_dangling_deletes`; returns the table and the count removed."""
    dangling = find_dangling_deletes(table)
    if not dangling:
        return table, 0
    op = compaction_rewrite(remove_deletes=dangling)
    table = (committer or (lambda t, ops: commit(t, ops)))(table, [op])
    return table, len(dangling)


# ------------------------------------------------------------------------------ where
def parse_where(md: TableMetadata, where: str | None, case_sensitive: bool):
    """The ``where`` argument as an Iceberg filter bound to the table schema (None for no filter)."""
    if where is None:
        return None
    try:
        expr = parse_filter(where)
        bind(expr, md.schema().as_struct(), case_sensitive)
    except IcebergError as e:
        raise ValidationError(f"Cannot parse predicates in where option: {where} ({e})") from e
    return expr
