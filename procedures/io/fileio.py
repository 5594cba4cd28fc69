"""FileIO over ``pyarrow.fs``: the storage side of the spec's "File System Operations".

Iceberg needs very little from storage: read a whole file or a range, write a new file, test
existence, delete, list a prefix, and one atomic primitive -- *create a file only if it does not
exist yet* -- that path-based (hadoop) catalogs use as their commit.  This module provides those
over local files and the filesystems :mod:`procedures.io.storage` configures from the catalog's
properties (``s3.*`` for ``s3://``/``s3a://``/``s3n://``, ``gcs.*`` for ``gs://``, HDFS).

Paths keep the textual form they came in with.  Java's Hadoop ``Path`` writes local locations as
``file:/x``, other tools write ``file:///x`` or plain ``/x``; all three name the same local file,
and every path this module returns (``list_prefix``) is spelled in the form of the prefix it was
asked about, so strings compare equal to what the metadata files contain.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Iterable, Iterator
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from procedures.core.kernel import fault_points
from procedures.core.kernel.paths import join_path, local_path
from procedures.errors import AlreadyExistsError, NotFoundError
from procedures.io.storage import HADOOP_SCHEMES, OBJECT_STORE_SCHEMES, check_bucket, filesystem_for, redacted

__all__ = [
    "FileIO",
    "InputFile",
    "OutputFile",
    "FileInfo",
    "DeleteResult",
    "FileAlreadyExistsError",
    "FileNotFoundInStorageError",
    "local_path",
    "join_path",
]


class FileAlreadyExistsError(AlreadyExistsError, FileExistsError):
    """A create-if-absent write or rename found its target already present.  ``path`` names it."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"File already exists: {path}; it was not overwritten")


class FileNotFoundInStorageError(NotFoundError, FileNotFoundError):
    """A file that was read or renamed does not exist.  ``path`` names it."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"File does not exist: {path}")


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One listed file: its path (in the caller's spelling), size in bytes and modification time."""

    path: str
    size: int
    mtime_ms: int | None


@dataclass(frozen=True, slots=True)
class DeleteResult:
    """Outcome of :meth:`FileIO.delete_many`: how many files were removed and which deletes failed.

    Files that were already gone count neither as deleted nor as failures.
    """

    deleted: int
    failures: tuple[tuple[str, BaseException], ...] = ()


def _respell(original_prefix: str, os_prefix: str, os_path: str) -> str:
    """Spell ``os_path`` (under ``os_prefix``) the way ``original_prefix`` spells that prefix."""
    rel = os_path[len(os_prefix):].lstrip("/")
    return join_path(original_prefix, rel) if rel else original_prefix


class InputFile:
    """A readable file: ``read()`` the whole content, ``open()`` a seekable stream, ``size()``."""

    __slots__ = ("path", "_io")

    def __init__(self, io: "FileIO", path: str) -> None:
        self.path = path
        self._io = io

    def read(self) -> bytes:
        """The whole file as bytes; raises :class:`FileNotFoundInStorageError` when it is absent."""
        local = local_path(self.path)
        if local is not None:
            try:
                with open(local, "rb") as f:
                    return f.read()
            except FileNotFoundError:
                raise FileNotFoundInStorageError(self.path) from None
        with self.open() as f:
            return f.read()

    def open(self) -> pa.NativeFile:
        """A seekable pyarrow input stream (use as a context manager)."""
        fs, p = self._io._resolve(self.path)
        try:
            return fs.open_input_file(p)
        except FileNotFoundError:
            raise FileNotFoundInStorageError(self.path) from None

    def size(self) -> int:
        """File length in bytes."""
        fs, p = self._io._resolve(self.path)
        info = fs.get_file_info(p)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundInStorageError(self.path)
        return int(info.size)

    def exists(self) -> bool:
        """Whether the file exists."""
        return self._io.exists(self.path)


class OutputFile:
    """A file to be written: ``write(data)`` (create-if-absent unless ``overwrite``) or ``create()``."""

    __slots__ = ("path", "_io")

    def __init__(self, io: "FileIO", path: str) -> None:
        self.path = path
        self._io = io

    def write(self, data: bytes, overwrite: bool = False) -> None:
        """Write ``data``; see :meth:`FileIO.write`."""
        self._io.write(self.path, data, overwrite=overwrite)

    def create(self, overwrite: bool = False) -> pa.NativeFile:
        """An output stream for large files (data files, manifests).

        The existence check and the stream are not one atomic step: use :meth:`write` where a lost
        race must be detected (metadata commits).
        """
        fault_points.reached(fault_points.WRITE, self.path)
        if not overwrite and self._io.exists(self.path):
            raise FileAlreadyExistsError(self.path)
        fs, p = self._io._resolve(self.path)
        parent = p.rsplit("/", 1)[0]
        if parent:
            fs.create_dir(parent, recursive=True)
        return fs.open_output_stream(p)


@dataclass
class FileIO:
    """File access for one catalog or table, configured by the catalog's ``properties``.

    Local paths use the OS directly (atomic create via a hard link); everything else goes through
    the ``pyarrow.fs`` filesystem :func:`procedures.io.storage.filesystem_for` configures from the
    properties, cached per scheme and authority.  The first use of an object-store bucket checks
    that the bucket exists and answers (:func:`procedures.io.storage.check_bucket`), so a wrong
    endpoint, credentials or bucket fails with a :class:`~procedures.errors.StorageConfigError`
    before anything is written.  The repr hides secret property values.
    """

    properties: dict[str, str] = field(default_factory=dict, repr=False)
    _filesystems: dict[tuple[str, str], pafs.FileSystem] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # -- resolution ---------------------------------------------------------------------------

    def _resolve(self, path: str) -> tuple[pafs.FileSystem, str]:
        local = local_path(path)
        if local is not None:
            return self._filesystem("file", ""), local
        parts = urlsplit(path)
        key = (parts.scheme.lower(), parts.netloc)
        with self._lock:
            fs = self._filesystems.get(key)
        if fs is None:
            fs = filesystem_for(path, self.properties)
            if key[0] in OBJECT_STORE_SCHEMES:
                check_bucket(fs, path, self.properties)
            with self._lock:
                fs = self._filesystems.setdefault(key, fs)
        # HDFS takes the path alone; object stores take "bucket/key" without the scheme
        p = parts.path if key[0] in HADOOP_SCHEMES else f"{parts.netloc}{parts.path}"
        return fs, p

    def filesystem(self, path: str) -> tuple[pafs.FileSystem, str]:
        """The ``pyarrow.fs`` filesystem serving ``path`` and the path in that filesystem's form
        (``bucket/key`` for object stores, the OS path for local files)."""
        return self._resolve(path)

    def __repr__(self) -> str:
        return f"FileIO(properties={redacted(self.properties)!r})"

    def _filesystem(self, scheme: str, netloc: str) -> pafs.FileSystem:
        with self._lock:
            fs = self._filesystems.get((scheme, netloc))
            if fs is None:
                fs = pafs.LocalFileSystem()
                self._filesystems[(scheme, netloc)] = fs
            return fs

    # -- reading ------------------------------------------------------------------------------

    def new_input(self, path: str) -> InputFile:
        """An :class:`InputFile` for ``path``."""
        return InputFile(self, path)

    def new_output(self, path: str) -> OutputFile:
        """An :class:`OutputFile` for ``path``."""
        return OutputFile(self, path)

    def exists(self, path: str) -> bool:
        """Whether a file or directory exists at ``path``."""
        local = local_path(path)
        if local is not None:
            return os.path.exists(local)
        fs, p = self._resolve(path)
        return fs.get_file_info(p).type != pafs.FileType.NotFound

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a directory (for object stores: a non-empty prefix)."""
        local = local_path(path)
        if local is not None:
            return os.path.isdir(local)
        fs, p = self._resolve(path)
        return fs.get_file_info(p).type == pafs.FileType.Directory

    # -- writing ------------------------------------------------------------------------------

    def write(self, path: str, data: bytes, overwrite: bool = False) -> None:
        """Write ``data`` to ``path``, creating parent directories.

        With ``overwrite=False`` this is an atomic create-if-absent on local filesystems: the bytes
        go to a temporary file in the same directory which is then hard-linked to the target, so
        readers never see a partial file and exactly one of several racing writers wins; the
        losers get :class:`FileAlreadyExistsError`.  On object stores the check and the write are
        separate steps (those stores offer no conditional create through pyarrow).
        """
        fault_points.reached(fault_points.WRITE, path)
        local = local_path(path)
        if local is None:
            self._write_remote(path, data, overwrite)
            return
        directory = os.path.dirname(local) or "."
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{os.path.basename(local)}.{uuid.uuid4().hex}.tmp")
        try:
            with open(tmp, "xb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            if overwrite:
                os.replace(tmp, local)
                return
            try:
                os.link(tmp, local)
            except FileExistsError:
                raise FileAlreadyExistsError(path) from None
            except OSError as e:
                if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                    raise
                # no hard links here: exclusive create is still race-free, only not all-or-nothing
                try:
                    with open(local, "xb") as f:
                        f.write(data)
                except FileExistsError:
                    raise FileAlreadyExistsError(path) from None
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass

    def _write_remote(self, path: str, data: bytes, overwrite: bool) -> None:
        fs, p = self._resolve(path)
        if not overwrite and fs.get_file_info(p).type != pafs.FileType.NotFound:
            raise FileAlreadyExistsError(path)
        with fs.open_output_stream(p) as out:
            out.write(data)

    def rename_if_absent(self, src: str, dst: str) -> None:
        """Move ``src`` to ``dst`` unless ``dst`` exists (then :class:`FileAlreadyExistsError`).

        Atomic for local files (hard link, then unlink of the source).
        """
        fault_points.reached(fault_points.WRITE, dst)
        local_src, local_dst = local_path(src), local_path(dst)
        if local_src is not None and local_dst is not None:
            if not os.path.exists(local_src):
                raise FileNotFoundInStorageError(src)
            os.makedirs(os.path.dirname(local_dst) or ".", exist_ok=True)
            if os.path.isdir(local_src):
                if os.path.exists(local_dst):
                    raise FileAlreadyExistsError(dst)
                os.rename(local_src, local_dst)
                return
            try:
                os.link(local_src, local_dst)
            except FileExistsError:
                raise FileAlreadyExistsError(dst) from None
            os.unlink(local_src)
            return
        fs_src, p_src = self._resolve(src)
        fs_dst, p_dst = self._resolve(dst)
        if fs_dst.get_file_info(p_dst).type != pafs.FileType.NotFound:
            raise FileAlreadyExistsError(dst)
        if fs_src.get_file_info(p_src).type == pafs.FileType.NotFound:
            raise FileNotFoundInStorageError(src)
        fs_src.move(p_src, p_dst)

    def make_dirs(self, path: str) -> None:
        """Create the directory ``path`` and its parents (no-op on object stores)."""
        fs, p = self._resolve(path)
        fs.create_dir(p, recursive=True)

    # -- deleting -----------------------------------------------------------------------------

    def delete(self, path: str) -> bool:
        """Delete the file at ``path``; returns False when it did not exist."""
        fault_points.reached(fault_points.DELETE, path)
        local = local_path(path)
        if local is not None:
            try:
                os.unlink(local)
                return True
            except FileNotFoundError:
                return False
        fs, p = self._resolve(path)
        try:
            fs.delete_file(p)
            return True
        except FileNotFoundError:
            return False

    def delete_dir(self, path: str) -> bool:
        """Delete the directory ``path`` with everything below it; False when it did not exist."""
        fault_points.reached(fault_points.DELETE, path)
        fs, p = self._resolve(path)
        if fs.get_file_info(p).type == pafs.FileType.NotFound:
            return False
        fs.delete_dir(p)
        return True

    def remove_empty_dir(self, path: str) -> bool:
        """Remove the folder ``path`` only when it is empty (never recursively, never through a
        symlink); False when it holds anything, is a link or is gone.  Object stores have no folders
        to remove: False."""
        fault_points.reached(fault_points.DELETE, path)
        local = local_path(path)
        if local is not None:
            local = local.rstrip("/") or "/"
            if os.path.islink(local):
                return False
            try:
                os.rmdir(local)
                return True
            except OSError:
                return False  # not empty, gone, or not a folder
        if urlsplit(path).scheme.lower() not in HADOOP_SCHEMES:
            return False
        fs, p = self._resolve(path)
        base = p.rstrip("/") or "/"
        if fs.get_file_info(base).type != pafs.FileType.Directory:
            return False
        if fs.get_file_info(pafs.FileSelector(base, recursive=False, allow_not_found=True)):
            return False
        fs.delete_dir(base)
        return True

    def delete_many(self, paths: Iterable[str], max_workers: int = 8) -> DeleteResult:
        """Delete ``paths`` on ``max_workers`` threads; failures are collected, never raised."""
        unique = list(dict.fromkeys(paths))
        if not unique:
            return DeleteResult(0)

        def one(p: str) -> tuple[str, bool, BaseException | None]:
            try:
                return p, self.delete(p), None
            except Exception as e:  # noqa: BLE001 -- reported per file to the caller
                return p, False, e

        workers = max(1, min(max_workers, len(unique)))
        if workers == 1:
            outcomes = [one(p) for p in unique]
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fileio-delete") as pool:
                outcomes = list(pool.map(one, unique))
        deleted = sum(1 for _, ok, _ in outcomes if ok)
        failures = tuple((p, e) for p, _, e in outcomes if e is not None)
        return DeleteResult(deleted, failures)

    # -- listing ------------------------------------------------------------------------------

    def list_prefix(self, path: str) -> Iterator[FileInfo]:
        """Every file below the directory ``path`` (recursively), spelled like ``path``.

        A missing directory yields nothing; a file yields itself.  Local symlinks are neither
        followed nor listed (a linked folder's files lie elsewhere, and a listed link would be
        taken for a file of the folder).
        """
        local = local_path(path)
        if local is not None:
            yield from _list_local(path, local)
            return
        fs, p = self._resolve(path)
        base = p.rstrip("/") or "/"
        info = fs.get_file_info(base)
        if info.type == pafs.FileType.NotFound:
            return
        if info.type == pafs.FileType.File:
            yield FileInfo(path, int(info.size), _mtime_ms(info))
            return
        selector = pafs.FileSelector(base, recursive=True, allow_not_found=True)
        for entry in fs.get_file_info(selector):
            if entry.type != pafs.FileType.File:
                continue
            yield FileInfo(_respell(path, base, entry.path), int(entry.size), _mtime_ms(entry))

    def list_dir(self, path: str) -> list[tuple[str, bool]]:
        """Direct children of directory ``path`` as ``(name, is_directory)``; empty when missing."""
        fs, p = self._resolve(path)
        selector = pafs.FileSelector(p.rstrip("/") or "/", recursive=False, allow_not_found=True)
        try:
            entries = fs.get_file_info(selector)
        except NotADirectoryError:
            return []
        return sorted(
            (e.base_name, e.type == pafs.FileType.Directory)
            for e in entries
            if e.type in (pafs.FileType.File, pafs.FileType.Directory)
        )


def _list_local(path: str, local: str) -> Iterator[FileInfo]:
    """:meth:`FileIO.list_prefix` of a local folder: a walk that never follows a symlink (pyarrow's
    recursive listing does)."""
    base = local.rstrip("/") or "/"
    try:
        st = os.stat(base)  # the folder asked about is the caller's choice, link or not
    except (FileNotFoundError, NotADirectoryError):
        return
    if stat.S_ISREG(st.st_mode):
        yield FileInfo(path, st.st_size, st.st_mtime_ns // 1_000_000)
        return
    if not stat.S_ISDIR(st.st_mode):
        return
    pending = [base]
    while pending:
        folder = pending.pop()
        try:
            entries = os.scandir(folder)
        except (FileNotFoundError, NotADirectoryError):
            continue
        with entries:
            for e in entries:
                if e.is_symlink():
                    continue
                if e.is_dir(follow_symlinks=False):
                    pending.append(e.path)
                elif e.is_file(follow_symlinks=False):
                    info = e.stat(follow_symlinks=False)
                    yield FileInfo(_respell(path, base, e.path), info.st_size, info.st_mtime_ns // 1_000_000)


def _mtime_ms(info: pafs.FileInfo) -> int | None:
    ns = info.mtime_ns
    return None if ns is None else ns // 1_000_000
