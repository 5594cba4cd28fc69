"""A FileIO that reads storage and writes nothing: the storage side of a procedure's ``dry_run``.

A dry run goes through the same code as a real run -- planning, writing data, delete, manifest
and statistics files, building the commit, deleting -- but every write and delete lands in this
FileIO instead of storage:

* files written whole (``write``: manifests, manifest lists, statistics, deletion vectors) are
  kept in memory, so later steps of the same run read them back (a second commit's manifests, the
  expired files found from a planned commit);
* streamed files (``new_output(...).create()``: Parquet data and delete files) go to a sink that
  only counts bytes, so writers see the same sizes and roll files at the same points, and memory
  holds nothing of the data;
* deletes are recorded, and the file reads as absent afterwards; storage keeps it.

Spark tasks build their FileIO from the table FileIO's ``properties`` (:func:`file_io`), which
carry :data:`SANDBOX_PROPERTY`, so executor-side writes are discarded the same way.  Reading a
streamed-only file (its bytes were never kept) raises ``FileNotFoundInStorageError`` naming the
dry run, which no step of a procedure does.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Iterator, Mapping

import pyarrow as pa

from procedures.core.kernel.paths import join_path
from procedures.core.kernel.properties import parse_bool
from procedures.io.fileio import (
    FileAlreadyExistsError, FileInfo, FileIO, FileNotFoundInStorageError, InputFile, OutputFile,
)

__all__ = ["SandboxFileIO", "SANDBOX_PROPERTY", "file_io", "is_sandbox"]

#: io property marking a sandboxed FileIO; tasks rebuilding a FileIO from properties honour it
SANDBOX_PROPERTY = "procedures.dry-run"

#: what a streamed file holds in memory: its size only
_STREAMED = object()


def file_io(properties: Mapping[str, str]) -> FileIO:
    """The FileIO that ``properties`` describe: a :class:`SandboxFileIO` over storage when they
    come from one (a dry run's Spark tasks), else a plain :class:`FileIO`."""
    props = dict(properties)
    if parse_bool(props.get(SANDBOX_PROPERTY), False):
        return SandboxFileIO.over(FileIO({k: v for k, v in props.items() if k != SANDBOX_PROPERTY}))
    return FileIO(props)


def is_sandbox(io: object) -> bool:
    """Whether ``io`` is a dry run's FileIO."""
    return isinstance(io, SandboxFileIO)


class _MemoryInput(InputFile):
    """A file written by the dry run, read back from memory."""

    __slots__ = ("_data",)

    def __init__(self, io: "SandboxFileIO", path: str, data: bytes) -> None:
        super().__init__(io, path)
        self._data = data

    def read(self) -> bytes:
        """The bytes written."""
        return self._data

    def open(self) -> pa.NativeFile:
        """A seekable stream over the bytes written."""
        return pa.BufferReader(self._data)

    def size(self) -> int:
        """The number of bytes written."""
        return len(self._data)


class _MissingInput(InputFile):
    """A file the dry run deleted, or streamed without keeping its bytes."""

    __slots__ = ("_size",)

    def __init__(self, io: "SandboxFileIO", path: str, size: int | None) -> None:
        super().__init__(io, path)
        self._size = size

    def _missing(self) -> FileNotFoundInStorageError:
        return FileNotFoundInStorageError(f"{self.path} (deleted or written without content by a dry run)")

    def read(self) -> bytes:
        """Raises: the content is not available."""
        raise self._missing()

    def open(self) -> pa.NativeFile:
        """Raises: the content is not available."""
        raise self._missing()

    def size(self) -> int:
        """The size a streamed file reached; raises for a deleted file."""
        if self._size is None:
            raise self._missing()
        return self._size


class _CountingStream(pa.MockOutputStream):
    """Counts the bytes of a streamed file and records its size in the sandbox when closed."""

    def __init__(self, io: "SandboxFileIO", path: str) -> None:
        super().__init__()
        self._sandbox_io = io
        self._path = path

    def close(self) -> None:
        """Record the file's size, then close."""
        self._sandbox_io._store(self._path, self.tell(), streamed=True)
        super().close()

    def __exit__(self, *exc: object) -> None:
        self.close()


class _SandboxOutput(OutputFile):
    """An output file of the sandbox: writes land in memory, streams in a byte counter."""

    __slots__ = ()

    def create(self, overwrite: bool = False) -> pa.NativeFile:
        """A stream that counts bytes (see :class:`SandboxFileIO`)."""
        if not overwrite and self._io.exists(self.path):
            raise FileAlreadyExistsError(self.path)
        return _CountingStream(self._io, self.path)


@dataclass(repr=False)
class SandboxFileIO(FileIO):
    """Reads through to ``base``; keeps writes and deletes to itself (see the module doc)."""

    base: FileIO = field(default_factory=FileIO)
    _files: dict[str, object] = field(default_factory=dict)
    _sizes: dict[str, int] = field(default_factory=dict)
    _deleted: set[str] = field(default_factory=set)
    _sandbox_lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def over(cls, base: FileIO) -> "SandboxFileIO":
        """A sandbox reading ``base`` (a sandbox over a sandbox shares nothing with it)."""
        if isinstance(base, SandboxFileIO):
            base = base.base
        return cls(properties={**base.properties, SANDBOX_PROPERTY: "true"}, base=base)

    def __repr__(self) -> str:
        return f"SandboxFileIO({self.base!r})"

    # -- what the dry run did ------------------------------------------------------------------

    @property
    def written(self) -> list[str]:
        """Paths the run wrote (none of them reached storage)."""
        with self._sandbox_lock:
            return sorted(self._sizes)

    @property
    def deleted(self) -> list[str]:
        """Paths the run deleted (storage still has them)."""
        with self._sandbox_lock:
            return sorted(self._deleted)

    def _store(self, path: str, data: object, *, streamed: bool = False) -> None:
        with self._sandbox_lock:
            self._files[path] = _STREAMED if streamed else data
            self._sizes[path] = int(data) if streamed else len(data)  # type: ignore[arg-type]
            self._deleted.discard(path)

    # -- reading -------------------------------------------------------------------------------

    def _resolve(self, path: str):
        return self.base._resolve(path)

    def new_input(self, path: str) -> InputFile:
        """The file as this run sees it: written here, deleted here, or storage's."""
        with self._sandbox_lock:
            data = self._files.get(path)
            size = self._sizes.get(path)
            deleted = path in self._deleted
        if data is _STREAMED:
            return _MissingInput(self, path, size)
        if data is not None:
            return _MemoryInput(self, path, data)  # type: ignore[arg-type]
        if deleted:
            return _MissingInput(self, path, None)
        return self.base.new_input(path)

    def new_output(self, path: str) -> OutputFile:
        """An output file whose content never reaches storage."""
        return _SandboxOutput(self, path)

    def exists(self, path: str) -> bool:
        """Whether the run sees a file or directory at ``path``."""
        with self._sandbox_lock:
            if path in self._sizes:
                return True
            if path in self._deleted:
                return False
        return self.base.exists(path)

    def is_dir(self, path: str) -> bool:
        """Whether storage has a directory at ``path`` (the sandbox makes none)."""
        return self.base.is_dir(path)

    # -- writing -------------------------------------------------------------------------------

    def write(self, path: str, data: bytes, overwrite: bool = False) -> None:
        """Keep ``data`` in memory; create-if-absent against what the run sees."""
        if not overwrite and self.exists(path):
            raise FileAlreadyExistsError(path)
        self._store(path, bytes(data))

    def rename_if_absent(self, src: str, dst: str) -> None:
        """Move a file the run wrote; refuses to move a file of storage."""
        with self._sandbox_lock:
            data = self._files.get(src)
        if data is None:
            raise FileNotFoundInStorageError(f"{src} (a dry run moves only files it wrote)")
        if self.exists(dst):
            raise FileAlreadyExistsError(dst)
        with self._sandbox_lock:
            self._files[dst] = self._files.pop(src)
            self._sizes[dst] = self._sizes.pop(src)

    def make_dirs(self, path: str) -> None:
        """Nothing: the sandbox makes no directories."""

    # -- deleting ------------------------------------------------------------------------------

    def delete(self, path: str) -> bool:
        """Record the delete; False when the run sees no file there."""
        existed = self.exists(path)
        with self._sandbox_lock:
            self._files.pop(path, None)
            self._sizes.pop(path, None)
            self._deleted.add(path)
        return existed

    def delete_dir(self, path: str) -> bool:
        """Record the delete of every file the run sees below ``path``."""
        files = [f.path for f in self.list_prefix(path)]
        for p in files:
            self.delete(p)
        return bool(files) or self.base.is_dir(path)

    def remove_empty_dir(self, path: str) -> bool:
        """Nothing is removed in a dry run: False."""
        return False

    # -- listing -------------------------------------------------------------------------------

    def list_prefix(self, path: str) -> Iterator[FileInfo]:
        """Storage's files below ``path`` minus the deleted ones, plus the ones written here."""
        with self._sandbox_lock:
            deleted = set(self._deleted)
            sizes = dict(self._sizes)
        for info in self.base.list_prefix(path):
            if info.path not in deleted and info.path not in sizes:
                yield info
        prefix = path.rstrip("/") + "/"
        for p, size in sorted(sizes.items()):
            if p.startswith(prefix):
                yield FileInfo(p, size, None)

    def list_dir(self, path: str) -> list[tuple[str, bool]]:
        """Storage's children of ``path`` minus deleted files, plus files written directly in it."""
        with self._sandbox_lock:
            deleted = set(self._deleted)
            written = [p for p in self._sizes if p.rsplit("/", 1)[0] == path.rstrip("/")]
        out = {(n, d) for n, d in self.base.list_dir(path) if d or join_path(path, n) not in deleted}
        out.update((p.rsplit("/", 1)[1], False) for p in written)
        return sorted(out)
