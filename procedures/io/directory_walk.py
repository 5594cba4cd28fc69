"""Listing a table's folders for orphan-file detection: a breadth-first directory walk (local files
with ``os.scandir``, other file systems with the FileIO's ``pyarrow.fs`` filesystem, configured
from the catalog's properties) and the FileIO's recursive prefix listing.

Neither follows a symbolic link (local files): a linked folder is not entered and a linked file is
not listed, so no link ever becomes an orphan and nothing is found (or deleted) through one.  The
starting folder is checked by the caller (:func:`procedures.core.gc.orphans.listing_location`).

Both apply an age cutoff and a hidden-path filter (an object with ``accept(name)``, in practice
:class:`procedures.core.gc.hidden_paths.HiddenPathFilter`).  The same :func:`walk` runs on the driver
and, for the sub-trees the driver hands over, in Spark tasks (:func:`procedures.spark.listing.list_directories`).

A local listing learns a file's modification time only from a ``stat`` of its own (object stores and
HDFS list it with the name), and the age only matters for the few files no metadata references: a
walk without a cutoff (``older_than_ms=None``) lists local names without stat-ing them, and
:func:`modified_before` applies the cutoff afterwards to the candidates alone.
"""

from __future__ import annotations

import logging
import os
import stat
from collections import deque
from typing import Protocol, Sequence

import pyarrow.fs as pafs

from procedures.core.kernel.paths import local_path, relative_path
from procedures.io.fileio import FileIO
from procedures.spec.file_access import FileAccess

__all__ = ["PathFilter", "walk", "list_with_prefix", "modified_before"]

log = logging.getLogger(__name__)


class PathFilter(Protocol):
    """Whether one path segment is listed (not hidden)."""

    def accept(self, name: str) -> bool: ...  # pragma: no cover


def _list_one(directory: str, io: FileIO, with_mtime: bool) -> tuple[list[tuple[str, int | None]], list[str]]:
    """Direct children of ``directory``: files with mtimes (None for a local file unless
    ``with_mtime``: a stat each), and sub-directories."""
    local = local_path(directory)
    files: list[tuple[str, int | None]] = []
    dirs: list[str] = []
    if local is not None:
        try:
            entries = os.scandir(local)
        except (FileNotFoundError, NotADirectoryError):
            return files, dirs
        # Hadoop spells local files file:/x; the valid side matches whatever it spells
        prefix = "file:" + os.path.join(local, "")
        with entries:  # one entry at a time: a folder of 10,000 files is not held twice
            for e in entries:
                # a symlink is neither entered nor listed: its target may lie anywhere, and a
                # listed link would name files (or be deleted as an orphan) through it
                if e.is_symlink():
                    log.info("Not listing symlink %s%s: links are never followed nor deleted", prefix, e.name)
                elif e.is_dir(follow_symlinks=False):
                    dirs.append(prefix + e.name)
                elif e.is_file(follow_symlinks=False):
                    files.append((prefix + e.name, e.stat(follow_symlinks=False).st_mtime_ns // 1_000_000
                                  if with_mtime else None))
        return files, dirs
    fs, p = io.filesystem(directory)
    scheme, _, rest = directory.partition("://")
    # object stores list "bucket/key"; HDFS lists the path alone, without the authority
    prefix = f"{scheme}://" + (rest.split("/", 1)[0] if scheme in ("hdfs", "viewfs") else "")
    for info in fs.get_file_info(pafs.FileSelector(p, recursive=False, allow_not_found=True)):
        full = prefix + info.path
        if info.type == pafs.FileType.Directory:
            dirs.append(full)
        elif info.type == pafs.FileType.File:
            files.append((full, (info.mtime_ns or 0) // 1_000_000))
    return files, dirs


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def walk(dirs: Sequence[str], older_than_ms: int | None, path_filter: PathFilter, *,
         max_dirs: int | None = None, max_files: int | None = None, min_pending: int = 1,
         io: FileIO | None = None) -> tuple[list[str], list[str]]:
    """List ``dirs`` breadth-first: ``(files modified before older_than_ms, directories left unlisted)``.
    With ``older_than_ms=None`` every file is listed whatever its age (local files are not stat-ed):
    the caller applies the cutoff to the files it keeps (:func:`modified_before`).

    Remote directories are listed through ``io`` (the table's FileIO; a FileIO without properties
    when none is given).

    Hidden files and directories are skipped (hidden directories are not entered).  With
    ``max_dirs`` the walk stops after listing that many directories and returns the rest; with
    ``max_files`` it also stops once it holds that many files and at least ``min_pending``
    directories are left (the caller's memory stays bounded however large the directories it lists
    first are, and a tree whose big folder came first is still handed over in many parts).
    """
    io = io if io is not None else FileIO()
    queue = deque(dirs)
    files: list[str] = []
    listed = 0
    while queue:
        if max_dirs is not None and listed >= max_dirs:
            break
        if max_files is not None and len(files) >= max_files and len(queue) >= min_pending:
            break
        directory = queue.popleft()
        listed += 1
        found, subdirs = _list_one(directory, io, older_than_ms is not None)
        if older_than_ms is None:
            files.extend(p for p, _ in found if path_filter.accept(_name(p)))
        else:
            files.extend(p for p, mtime in found if mtime < older_than_ms and path_filter.accept(_name(p)))
        queue.extend(d for d in subdirs if path_filter.accept(_name(d)))
    return files, list(queue)


def list_with_prefix(io: FileAccess, location: str, older_than_ms: int, path_filter: PathFilter) -> list[str]:
    """``prefix_listing``: the FileIO's recursive listing, filtered by age and hidden segments."""
    out = []
    for info in io.list_prefix(location):
        rel = relative_path(location, info.path)
        if rel is None:
            continue
        if info.mtime_ms is not None and info.mtime_ms < older_than_ms and all(path_filter.accept(s) for s in rel.split("/")):
            out.append(info.path)
    return out


def modified_before(paths: Sequence[str], older_than_ms: int, io: FileIO | None = None) -> list[bool]:
    """For each of ``paths``, whether it is a file last modified before ``older_than_ms`` (a local
    ``stat``, or the file system's info for others); a file that is gone or is no longer a file
    answers False (it is nobody's orphan any more)."""
    out: list[bool] = []
    for path in paths:
        local = local_path(path)
        if local is not None:
            try:
                # a file replaced by a symlink since the listing is not a regular file: never old enough
                st = os.lstat(local)
            except (FileNotFoundError, NotADirectoryError):
                out.append(False)
                continue
            out.append(stat.S_ISREG(st.st_mode) and st.st_mtime_ns // 1_000_000 < older_than_ms)
            continue
        io = io if io is not None else FileIO()
        fs, p = io.filesystem(path)
        info = fs.get_file_info(p)
        # an unknown age is never old enough (as the prefix listing skips such files)
        out.append(info.type == pafs.FileType.File and info.mtime_ns is not None
                   and info.mtime_ns // 1_000_000 < older_than_ms)
    return out
