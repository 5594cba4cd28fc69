"""Small files on local disk for the garbage-collection tests: planted with an old modification time
(past remove_orphan_files' default three-day cutoff) unless told otherwise."""

from __future__ import annotations

import hashlib
import os
import time

#: five days ago: older than the default ``older_than`` of remove_orphan_files
OLD = time.time() - 5 * 24 * 3600


def touch(path: str, mtime: float | None = OLD) -> str:
    """Create a one-byte file at ``path`` (and its folders) modified at ``mtime`` (None: now)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"x")
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def age_everything(root: str, mtime: float = OLD) -> None:
    """Set the modification time of every file below ``root`` to ``mtime``."""
    for d, _, fs in os.walk(root):
        for f in fs:
            os.utime(os.path.join(d, f), (mtime, mtime))


def all_files(root: str) -> set[str]:
    """Every file below ``root``."""
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}


def fingerprint(root: str) -> dict[str, str]:
    """Every file below ``root`` with its content hash."""
    out = {}
    for d, _, fs in os.walk(root):
        for f in fs:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def folder_state(root: str) -> tuple[dict[str, str], list[str]]:
    """Every file below ``root`` with its content hash, and every folder below it (an empty folder
    left behind counts too); empty when ``root`` does not exist."""
    if not os.path.exists(root):
        return {}, []
    return fingerprint(root), sorted(os.path.relpath(d, root) for d, _, _ in os.walk(root))
