"""Setup run at the start of every Python task function of the package (inside Spark's Python
workers, never on the driver's own path).

A reused PySpark worker pays three fixed costs per task that have nothing to do with the task's
data; together they made an empty Python task take about 60 ms against 2 ms for a JVM task:

* **Zip archives re-read.**  The worker calls ``importlib.invalidate_caches()`` before every task.
  Since Python 3.10 that makes every ``zipimporter`` re-read its archive's central directory, and a
  worker's ``sys.path`` holds ``pyspark.zip``, the py4j zip and the Spark core jar (5,000+ entries).
  From the worker's second task on an archive is only re-read when its size or modification time
  changed, which keeps ``invalidate_caches``' meaning (new or replaced archives are still seen).
* **A full garbage collection after each task.**  The daemon calls ``gc.collect()`` between tasks,
  walking every object of pyarrow, pandas and this package each time.  Objects alive when a task
  starts (modules, classes, caches) are frozen out of later collections; anything a task creates
  is still collected.
* **A delayed acknowledgement on every task start.**  The JVM sends a task in two writes; Nagle's
  algorithm holds the second until the first is acknowledged, and the worker's socket, having just
  answered the previous task, delays that acknowledgement by Linux's 40 ms minimum.  After the
  between-task collection (that is, after the previous answer went out) the worker's connection to
  the JVM is switched to quick acknowledgements, so the next task's first write is acknowledged at
  once.

With all three an empty task takes about 20 ms.

It also installs, or drops, the fault plan a test attached to the job
(:data:`procedures.core.kernel.fault_points.PLAN_PROPERTY`); without one that is a dictionary lookup.
"""

from __future__ import annotations

import gc
import os
import socket
import zipimport
from typing import Any

from procedures.core.kernel import fault_points

__all__ = ["prepare_python_worker"]

_MARK = "_procedures_stat_checked"
#: whether this process already switches its JVM links to quick acknowledgements
_quick_acks_installed = False


def _stamp(archive: str) -> tuple[int, int] | None:
    try:
        st = os.stat(archive)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def prepare_python_worker() -> None:
    """Remove the per-task fixed costs of a reused Python worker (idempotent; see the module)."""
    _skip_unchanged_archives()
    _quick_acks_between_tasks()
    _follow_fault_plan()
    gc.freeze()


def _follow_fault_plan() -> None:
    # a reused worker must drop the previous job's plan, hence a look at every task (a dict lookup)
    from pyspark import TaskContext  # noqa: PLC0415 -- pyspark is imported only where it runs

    context = TaskContext.get()
    plan = context.getLocalProperty(fault_points.PLAN_PROPERTY) if context is not None else None
    if plan or fault_points.installed() is not None:
        fault_points.install_plan(plan, side="task")


def _skip_unchanged_archives() -> None:
    cls: Any = zipimport.zipimporter
    if getattr(cls, _MARK, False) or not hasattr(cls, "invalidate_caches"):
        return
    reread = cls.invalidate_caches
    seen: dict[str, tuple[int, int]] = {}

    def invalidate_caches(self: Any) -> None:
        stamp = _stamp(self.archive)
        if stamp is not None and seen.get(self.archive) == stamp:
            return
        reread(self)
        if stamp is not None:
            seen[self.archive] = stamp

    cls.invalidate_caches = invalidate_caches
    setattr(cls, _MARK, True)


def _loopback_tcp_sockets() -> list[socket.socket]:
    """Duplicates of this process's TCP connections to a loopback address (a worker's link to its
    JVM; the duplicates keep addressing the same connections whatever the worker does with its
    own descriptors)."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            fd = int(name)
            s = socket.socket(fileno=os.dup(fd))
        except (ValueError, OSError):
            continue
        try:
            peer = s.getpeername() if s.family in (socket.AF_INET, socket.AF_INET6) and s.type == socket.SOCK_STREAM else None
        except OSError:
            peer = None
        if peer and peer[0] in ("127.0.0.1", "::1", "::ffff:127.0.0.1"):
            found.append(s)
        else:
            s.close()
    return found


def _quick_acks_between_tasks() -> None:
    global _quick_acks_installed
    # Linux only (TCP_QUICKACK and /proc); elsewhere the worker keeps the default behaviour
    if _quick_acks_installed or not hasattr(socket, "TCP_QUICKACK") or not os.path.isdir("/proc/self/fd"):
        return
    _quick_acks_installed = True
    links = _loopback_tcp_sockets()
    if not links:
        return

    def after_collection(phase: str, info: dict[str, int]) -> None:
        if phase != "stop":
            return
        for s in links:
            try:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            except OSError:
                pass

    gc.callbacks.append(after_collection)
