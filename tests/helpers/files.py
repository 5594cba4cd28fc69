"""Small files on local disk for the garbage-collection tests: planted with an old modification time
(past remove_orphan_files' default three-day cutoff) unless told otherwise."""

from __future__ import annotations

import hashlib
import os
import time

from procedures.core.gc import reachability as R
from procedures.core.kernel.paths import normalize_path

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


def reached_paths(t) -> set[str]:
    """Every file ``t``'s metadata (as loaded) reaches, as local paths: manifest lists, manifests,
    content files, statistics files and metadata files (not ``version-hint.text``)."""
    md = t.metadata
    sm = R.read_snapshot_manifests(t.io, md)
    paths = [p for p in sm.manifest_lists.values() if p] + list(sm.distinct())
    paths += list(R.content_paths_driver(t.io, sm.distinct().values()))
    paths += list(R.statistics_paths(md))
    paths += [p for p in R.metadata_file_paths(md, t.metadata_location) if not p.endswith("version-hint.text")]
    return {normalize_path(p).path for p in paths}
