"""Which paths a table may write or delete: the one containment rule of every writer and deleter.

:mod:`procedures.core.kernel.paths` decides containment lexically (``.``/``..``, doubled slashes, ``file:``
spellings and percent-escapes), without touching storage.  That is not enough on a file system with
symbolic links: ``<table>/data/link/x`` is lexically inside the table, but when ``link`` points at a
folder elsewhere, deleting it deletes a file outside the table.  Here a local location (``/x``,
``file:/x``, ``file:///x``) is also *resolved* -- ``os.path.realpath``, every symlink followed --
and a path belongs to a folder only when it lies inside it both ways: as written, and once both
are resolved.  A path that is itself a symlink is never owned: deleting it would remove only the
link, but a listing that reports it would have followed it to name it.

Other schemes are compared lexically only: object stores have no links, and Hadoop disables HDFS
symlinks by default (``fs.client.resolve.remote.symlinks`` aside, pyarrow's HDFS listing reports
none), so there is nothing to resolve.

Unlike :mod:`procedures.core.kernel.paths`, this module reads the local file system (``lstat`` and
``readlink`` through ``realpath``); it never writes.
"""

from __future__ import annotations

import os
from typing import Iterable

from procedures.core.kernel.paths import is_within, keys_within, local_path, path_keys
from procedures.errors import ValidationError

__all__ = ["resolve_local", "resolved", "is_within_resolved", "is_link", "Ownership"]


def resolve_local(path: str) -> str | None:
    """The real OS path of a local location (symlinks followed, ``.``/``..`` resolved), or None for
    another scheme or a spelling no local file has (``file://host/x``)."""
    try:
        local = local_path(path)
    except ValidationError:
        return None
    return None if local is None else os.path.realpath(local)


def resolved(path: str) -> str:
    """``path`` with its local part resolved (:func:`resolve_local`); other paths unchanged."""
    real = resolve_local(path)
    return path if real is None else real


def is_within_resolved(location: str, path: str) -> bool:
    """Whether ``path`` lies inside ``location`` both as written (:func:`procedures.core.kernel.paths.is_within`)
    and once both are resolved: a symlink on the way cannot lead a path out of the folder, and one
    leading in from outside does not make a path belong to it."""
    return is_within(location, path) and is_within(resolved(location), resolved(path))


def is_link(path: str) -> bool:
    """Whether ``path`` is a local symlink (not followed: a dangling link is one too)."""
    try:
        local = local_path(path)
    except ValidationError:
        return False
    return local is not None and os.path.islink(local)


class Ownership:
    """The folders a table may write to and delete from (``roots``), answering :meth:`owns` for many
    paths: each root is normalised and resolved once, and a folder's real path is resolved once for
    all the files in it (garbage collection asks about thousands of files in a few folders)."""

    __slots__ = ("_roots", "_real_roots", "_real_dirs")

    def __init__(self, roots: Iterable[str]) -> None:
        roots = list(roots)
        self._roots = tuple(path_keys(r) for r in roots)
        # the real form of the local roots only: a remote root owns nothing local and vice versa
        self._real_roots = tuple(path_keys(real) for real in (resolve_local(r) for r in roots) if real is not None)
        self._real_dirs: dict[str, str] = {}

    def owns(self, path: str) -> bool:
        """Whether ``path`` lies inside a root as written and, when local, once resolved, and is not
        itself a symlink."""
        keys = path_keys(path)
        return any(keys_within(root, keys) for root in self._roots) and self.resolves_inside(path)

    def resolves_inside(self, path: str) -> bool:
        """The second half of :meth:`owns`, for a path already known to lie inside a root as written:
        True for a non-local path; for a local one, whether it is no symlink and its folder's real
        path places it inside a root's real path."""
        try:
            local = local_path(path)
        except ValidationError:
            return False  # a file:// URI with a host: no local file, and nothing of ours
        if local is None:
            return True
        if os.path.islink(local):
            return False
        parent, _, name = local.rstrip("/").rpartition("/")
        real_parent = self._real_dirs.get(parent)
        if real_parent is None:
            real_parent = self._real_dirs[parent] = os.path.realpath(parent or "/")
        real = path_keys(os.path.join(real_parent, name))
        return any(keys_within(root, real) for root in self._real_roots)
