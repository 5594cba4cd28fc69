"""Many independent file groups written by one Spark job.

A maintenance action that rewrites groups of files (each group its own unit of success and of
commit) could run one Spark job per group, but a job's fixed cost (scheduling, a Python worker round
trip) then dominates when groups are small.  :func:`write_groups` deals the groups over a few tasks
balanced by weight instead, each task writing its groups one after the other, and reports per group
what it wrote or why it failed, so the action keeps its per-group rules (partial progress) while
paying for one job.

How a failing group is handled (why it never fails the job):

* while Spark may still retry the task (``spark.task.maxFailures``, 1 in ``local[n]``), the group's
  error fails the task as usual: the task's files are deleted and Spark runs it again;
* on the task's last allowed attempt the error is caught: the group is reported failed and the task
  goes on with its other groups (or, with ``stop_on_failure``, skips them), so a deterministic
  failure of one group neither cancels the other tasks nor loses their work.

If the job fails anyway (a worker lost more often than Spark allows, a cancelled job), every file
any task wrote is deleted and the error propagates, as for any write job (:class:`WrittenFiles`).
"""

from __future__ import annotations

import dataclasses
import pickle
import re
import threading
import traceback
from typing import Any, Callable, Iterator, Sequence

from procedures.core.kernel.splits import spread_weights
from procedures.errors import IcebergError
from procedures.spark.worker import prepare_python_worker
from procedures.spark.dataframes import app_id, is_connect, map_slices, scoped_conf, slices_frame
from procedures.spark.environment import check_python_workers
from procedures.spark.write import WrittenFiles
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.model import DataFile

__all__ = ["GroupOutcome", "write_groups", "task_attempts", "portable_error"]

#: ``local[N]`` / ``local[*]`` (one attempt per task) and ``local[N, F]`` (F attempts)
_LOCAL = re.compile(r"local(\[\s*(\d+|\*)\s*\])?")
_LOCAL_WITH_FAILURES = re.compile(r"local\[\s*(\d+|\*)\s*,\s*(\d+)\s*\]")
#: :func:`task_attempts` per application (session kind and ``spark.app.id``): both keys are static,
#: fixed when the application starts, and on Spark Connect each read is a round trip
_ATTEMPTS: dict[tuple, int] = {}
_ATTEMPTS_LOCK = threading.Lock()


@dataclasses.dataclass(frozen=True)
class GroupOutcome:
    """What one group of a :func:`write_groups` job came to: the files it wrote, or the error that
    failed it on its task's last attempt (then none of its files is left)."""

    index: int
    files: tuple[DataFile, ...] = ()
    error: BaseException | None = None
    #: the error's traceback in the task, for the driver's log
    task_traceback: str = ""


def task_attempts(spark: Any) -> int:
    """How many attempts Spark gives a task: 1 in ``local`` and ``local[N]``, F in ``local[N, F]``,
    else ``spark.task.maxFailures`` (default 4), as Spark's scheduler decides.  Read through
    ``spark.conf`` (a session's conf holds its context's), which Connect sessions have too; once
    per application."""
    app = app_id(spark)
    # a session without an application id (a stand-in) is read every time: an id() key could be reused
    key = (is_connect(spark), app) if app else None
    with _ATTEMPTS_LOCK:
        known = _ATTEMPTS.get(key) if key else None
    if known is not None:
        return known
    master = str(_conf(spark, "spark.master") or "").strip()
    m = _LOCAL_WITH_FAILURES.fullmatch(master)
    if m:
        attempts = max(1, int(m.group(2)))
    elif _LOCAL.fullmatch(master):
        attempts = 1
    else:
        attempts = max(1, int(_conf(spark, "spark.task.maxFailures") or "4"))
    if key:
        with _ATTEMPTS_LOCK:
            _ATTEMPTS[key] = attempts
    return attempts


def _conf(spark: Any, key: str) -> str | None:
    # the running statement's conf read answers first (a round trip less on Spark Connect)
    scoped = scoped_conf(spark)
    if scoped is not None and key in scoped:
        return scoped[key]
    try:
        return spark.conf.get(key, None)
    except Exception:  # noqa: BLE001 -- a Connect server may refuse a static key: Spark's default then
        return None


def write_groups(spark: Any, io: FileAccess, groups: Sequence[Any], weights: Sequence[int], slots: int,
                 write_group: Callable[[int, Any], list[DataFile]], *, data_path: str,
                 stop_on_failure: bool = False) -> list[GroupOutcome]:
    """Write ``groups`` in one Spark job of at most ``slots`` tasks and return an outcome per group
    that ran, in group order.

    The groups (picklable) are dealt over the tasks balanced by ``weights``
    (:func:`~procedures.core.kernel.splits.spread_weights`); a task calls ``write_group(index, group)`` for
    each of its groups in turn.  A group that fails on its task's last attempt gets an outcome with
    ``error`` (the module docstring says why this never fails the job); with ``stop_on_failure`` the
    rest of that task's groups are skipped and get no outcome.  ``write_group`` must leave no file
    behind when it raises.  If the job fails, every file written is deleted and the error propagates
    (the job's journal, :class:`~procedures.spark.write.WrittenFiles`, goes under ``data_path``).
    """
    if not groups:
        return []
    check_python_workers(spark)
    written = WrittenFiles(io, data_path)
    journal = written.journal
    attempts = task_attempts(spark)
    slices = [[(i, groups[i]) for i in members] for members in spread_weights(weights, slots)]

    def run(members: list[tuple[int, Any]]) -> Iterator[GroupOutcome]:
        prepare_python_worker()
        last_attempt = _attempt_number() + 1 >= attempts
        with journal.recording() as paths:
            for index, group in members:
                try:
                    files = write_group(index, group)
                except Exception as e:
                    if not last_attempt:
                        raise  # Spark runs the task again
                    yield GroupOutcome(index, error=portable_error(e), task_traceback=traceback.format_exc())
                    if stop_on_failure:
                        return
                    continue
                paths.extend(f.file_path for f in files)
                yield GroupOutcome(index, tuple(files))

    outcomes = written.collect(map_slices(slices_frame(spark, slices), run), files_of=lambda o: o.files)
    return sorted(outcomes, key=lambda o: o.index)


def _attempt_number() -> int:
    from pyspark import TaskContext  # noqa: PLC0415 -- the package loads without pyspark

    ctx = TaskContext.get()
    return ctx.attemptNumber() if ctx is not None else 0


def portable_error(e: Exception) -> BaseException:
    """``e`` if it survives a pickle round trip (the driver raises it as it is), else an
    IcebergError carrying its type and message."""
    try:
        pickle.loads(pickle.dumps(e, protocol=pickle.HIGHEST_PROTOCOL))
        return e
    except Exception:  # noqa: BLE001 -- any exception type that does not pickle is described instead
        return IcebergError(f"{type(e).__name__}: {e}")
