"""Setup run at the start of every Python task function of the package (inside Spark's Python
workers, never on the driver's own path).

PySpark's worker calls ``importlib.invalidate_caches()`` before every task.  Since Python 3.10 that
makes every ``zipimporter`` re-read its archive's central directory, and a worker's ``sys.path``
holds ``pyspark.zip``, the py4j zip and the Spark core jar (5,000+ entries): tens of milliseconds
per task, the largest part of a Python task's fixed cost.  Reused workers keep what we set here,
so from their second task on an archive is only re-read when its size or modification time
changed, which keeps ``invalidate_caches``' meaning (new or replaced archives are still seen).
"""

from __future__ import annotations

import os
import zipimport
from typing import Any

__all__ = ["prepare_python_worker"]

_MARK = "_procedures_stat_checked"


def _stamp(archive: str) -> tuple[int, int] | None:
    try:
        st = os.stat(archive)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def prepare_python_worker() -> None:
    """Make ``zipimporter.invalidate_caches`` skip archives that did not change (idempotent)."""
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
