"""The guarded delete loop both garbage collectors share (expire_snapshots, remove_orphan_files),
and the one argument check they share (``max_concurrent_deletes``)."""

from __future__ import annotations

import logging
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from typing import Callable, Iterable

from procedures.core.gc import reachability
from procedures.core.gc.delete_guard import DeleteGuard
from procedures.errors import ValidationError
from procedures.spec.file_access import FileAccess

__all__ = ["check_max_concurrent_deletes", "delete_files", "DELETE_BATCH", "DELETE_RETRIES"]

log = logging.getLogger(__name__)

#: paths handed to the delete pool at a time, so streamed results never pile up on the driver
DELETE_BATCH = 1_000
DELETE_RETRIES = 3


def check_max_concurrent_deletes(value: int | None) -> None:
    """``max_concurrent_deletes`` (of expire_snapshots and remove_orphan_files) must be positive when
    given; Java checks it before it even loads the table."""
    if value is not None and value <= 0:
        raise ValidationError(f"max_concurrent_deletes should have value > 0, value: {value}")


def _delete_one(io: FileAccess, path: str, retries: int) -> bool:
    for attempt in range(retries + 1):
        try:
            io.delete(path)  # a file already gone is not a failure (Java's HadoopFileIO neither)
            return True
        except FileNotFoundError:
            return True
        except Exception as e:  # noqa: BLE001 -- logged, retried, then counted as not deleted
            if attempt == retries:
                log.warning("Delete failed for %s: %s", path, e)
    return False


def delete_files(io: FileAccess, items: Iterable[tuple[str, str]], *, max_concurrent_deletes: int | None = None,
                 retries: int = DELETE_RETRIES, batch: int | None = None,
                 protect: Callable[[str], bool] | None = reachability.is_table_metadata_file,
                 guard: DeleteGuard | None = None, dry_run: bool = False,
                 accepted: Callable[[str, str], None] | None = None) -> Counter:
    """Delete ``(path, kind)`` items; returns the number of successful deletions per kind.

    Without ``max_concurrent_deletes`` the deletes run on the calling thread (Java's direct
    executor).  Paths ``protect`` selects (by default table metadata files, which snapshot
    expiration must never touch) are skipped whatever asked for them.  ``guard`` checks each
    batch right before it is deleted (:class:`DeleteGuard`); ``accepted(path, kind)`` is told of
    every item that passed, and with ``dry_run`` nothing is deleted after that point.
    """
    counts: Counter = Counter()
    pool = (ThreadPoolExecutor(max_workers=max_concurrent_deletes, thread_name_prefix="gc-delete")
            if max_concurrent_deletes and not dry_run else None)
    it = iter(items)
    try:
        size = batch or DELETE_BATCH
        while chunk := list(islice(it, size)):
            if protect is not None:
                chunk = [(p, k) for p, k in chunk if not protect(p)]
            if guard is not None:
                chunk = guard.check(chunk)
            if accepted is not None:
                for p, k in chunk:
                    accepted(p, k)
            if dry_run:
                continue
            if pool is None:
                outcomes: Iterable[bool] = [_delete_one(io, p, retries) for p, _ in chunk]
            else:
                outcomes = list(pool.map(lambda pk: _delete_one(io, pk[0], retries), chunk))
            for (_, kind), ok in zip(chunk, outcomes):
                if ok:
                    counts[kind] += 1
    finally:
        # a generator reading manifests ahead (expire's content stream) stops its readers now, not
        # whenever it is collected
        close = getattr(it, "close", None)
        if close is not None:
            close()
        if pool is not None:
            pool.shutdown(wait=True)
    return counts
