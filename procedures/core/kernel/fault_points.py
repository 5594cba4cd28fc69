"""Fault points: the places where a change to a table writes a file, deletes one, or commits.

Storage (:mod:`procedures.io.fileio`) and the commit loop (:mod:`procedures.core.kernel.transaction`) call
:func:`reached` at each such place.  Nothing happens there unless a test installed an injector, so
production pays one global lookup per file operation.  No configuration key, property or
environment variable turns injection on: the driver installs an injector in code
(:func:`install`), and a Spark task installs one only when the job carries the local property
:data:`PLAN_PROPERTY`, which only ``SparkContext.setLocalProperty`` sets.

A :class:`FaultPlan` describes an injection that works across processes (the driver and Spark's
Python workers): every process appends the points it reaches to one log file under a lock, so "the
Nth write" counts the writes of the driver and of every task together, and the point that matches
raises :class:`InjectedFault` or kills its own process with SIGKILL.  The fault-injection harness
(``tests/spark/test_kill_anywhere.py``) counts the points of a procedure with a plan that only
logs, then reruns the procedure failing at each of them.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
from dataclasses import asdict, dataclass
from typing import Callable

__all__ = [
    "WRITE", "DELETE", "COMMIT", "SWAPPED", "KINDS", "PLAN_PROPERTY",
    "InjectedFault", "FaultPlan", "reached", "install", "installed", "install_plan", "read_log",
]

#: a file is about to be written (created, overwritten or renamed into place)
WRITE = "write"
#: a file or folder is about to be deleted
DELETE = "delete"
#: a commit is about to ask the catalog to swap the table's metadata
COMMIT = "commit"
#: the catalog swapped the metadata; the commit has not returned yet
SWAPPED = "swapped"
KINDS = (WRITE, DELETE, COMMIT, SWAPPED)

#: Spark local property naming a plan file; a task finding it installs the plan (tests only)
PLAN_PROPERTY = "procedures.testing.fault-plan"

Injector = Callable[[str, str], None]

_injector: Injector | None = None


class InjectedFault(OSError):
    """The failure a fault plan injects.  An ``OSError``, as a failing disk or store would raise,
    so the code under test handles it as it handles real storage errors."""


def reached(kind: str, path: str = "") -> None:
    """Mark that the caller is about to perform a ``kind`` step on ``path``; a no-op unless a test
    installed an injector."""
    injector = _injector
    if injector is not None:
        injector(kind, path)


def install(injector: Injector | None) -> Injector | None:
    """Install ``injector`` for this process (None removes it); returns the previous one."""
    global _injector
    previous, _injector = _injector, injector
    return previous


def installed() -> Injector | None:
    """The injector of this process, if any."""
    return _injector


@dataclass(frozen=True)
class FaultPlan:
    """Fail at the ``n``-th point of ``kind`` (1-based), counted over every process that logs to
    ``log_path``.  ``action`` is ``"raise"`` (an :class:`InjectedFault`), ``"interrupt"`` (a
    ``KeyboardInterrupt``, as Ctrl-C on the driver), ``"kill"`` (SIGKILL of the process reaching the
    point) or ``"count"`` (only log).  ``where`` is ``"any"``, or ``"driver"``
    / ``"task"`` to count only the points of the driver or of Spark tasks."""

    log_path: str
    kind: str = WRITE
    n: int = 0
    action: str = "count"
    where: str = "any"

    def to_json(self) -> str:
        """The plan as JSON (what a plan file holds)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "FaultPlan":
        """A plan from :meth:`to_json`'s output."""
        return cls(**json.loads(text))

    def injector(self, side: str) -> Injector:
        """The injector applying this plan in a process on ``side`` (``"driver"`` or ``"task"``)."""

        def inject(kind: str, path: str) -> None:
            if self.where not in ("any", side):
                return
            with open(self.log_path, "a+", encoding="utf-8") as log:
                fcntl.flock(log, fcntl.LOCK_EX)
                log.seek(0)
                seen = sum(1 for line in log if line.split("\t", 1)[0] == kind)
                log.write(f"{kind}\t{side}\t{os.getpid()}\t{path}\n")
                log.flush()
                os.fsync(log.fileno())
                hit = kind == self.kind and seen + 1 == self.n
            if not hit or self.action == "count":
                return
            if self.action == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if self.action == "interrupt":
                raise KeyboardInterrupt(f"injected interrupt at {kind} #{self.n} ({path})")
            raise InjectedFault(f"injected fault at {kind} #{self.n} ({path})")

        return inject


def install_plan(plan_file: str | None, side: str = "task") -> None:
    """Install the plan stored in ``plan_file`` for this process, or remove any injector when it is
    None (a reused Spark worker must not keep the previous job's plan)."""
    if not plan_file:
        if _injector is not None:
            install(None)
        return
    with open(plan_file, encoding="utf-8") as f:
        install(FaultPlan.from_json(f.read()).injector(side))


def read_log(log_path: str) -> list[tuple[str, str, int, str]]:
    """The points a plan logged, in order: ``(kind, side, pid, path)``."""
    if not os.path.exists(log_path):
        return []
    with open(log_path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t", 3) for line in f if line.strip()]
    return [(k, s, int(p), path) for k, s, p, path in rows]
