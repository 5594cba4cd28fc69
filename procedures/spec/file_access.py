"""The FileIO seam: what the format readers and writers, the commit kernel and the capabilities ask
of file access, as typed protocols.

The implementations live above (:class:`procedures.io.fileio.FileIO` and its dry-run
:class:`procedures.io.sandbox_fileio.SandboxFileIO`); the layers below ``io`` may not import them, so
they name this protocol instead of ``Any``.  The manifest readers and writers ask for less
(:class:`procedures.spec.manifest.avro_container.MetadataIO`), which a ``FileAccess`` is too.  The protocols are structural: any object with these
members is a FileIO here (tests check that the implementations are).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Protocol, Sequence, runtime_checkable

__all__ = ["FileAccess", "ReadableFile", "WritableFile", "ListedFile", "DeleteOutcome"]


@runtime_checkable
class ReadableFile(Protocol):
    """A file to read: all at once, as a seekable stream, or its size."""

    path: str

    def read(self) -> bytes:
        """The whole file; raises when it is absent."""
        ...

    def open(self) -> Any:
        """A seekable binary stream over the file (a ``pyarrow.NativeFile``)."""
        ...

    def size(self) -> int:
        """The file's size in bytes."""
        ...

    def exists(self) -> bool:
        """Whether the file exists."""
        ...


@runtime_checkable
class WritableFile(Protocol):
    """A file to write, all at once or as a stream."""

    path: str

    def write(self, data: bytes, overwrite: bool = False) -> None:
        """Write ``data``; without ``overwrite`` an existing file is refused."""
        ...

    def create(self, overwrite: bool = False) -> Any:
        """A binary output stream (a ``pyarrow.NativeFile``); closing it publishes the file."""
        ...


class ListedFile(Protocol):
    """One listed file."""

    path: str
    size: int
    mtime_ms: int | None


class DeleteOutcome(Protocol):
    """How a bulk delete went: files removed, and the deletes that failed."""

    deleted: int
    failures: Sequence[tuple[str, BaseException]]


@runtime_checkable
class FileAccess(Protocol):
    """File access for one catalog or table, configured by its ``properties`` (which also rebuild it
    in an engine's tasks)."""

    properties: dict[str, str]

    def new_input(self, path: str) -> ReadableFile:
        """The file at ``path`` to read."""
        ...

    def new_output(self, path: str) -> WritableFile:
        """The file at ``path`` to write."""
        ...

    def exists(self, path: str) -> bool:
        """Whether a file or directory exists at ``path``."""
        ...

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a directory."""
        ...

    def write(self, path: str, data: bytes, overwrite: bool = False) -> None:
        """Write ``data`` to ``path``; without ``overwrite`` an existing file is refused."""
        ...

    def rename_if_absent(self, src: str, dst: str) -> None:
        """Move ``src`` to ``dst``, refusing when ``dst`` exists."""
        ...

    def make_dirs(self, path: str) -> None:
        """Create the directory ``path`` and its parents."""
        ...

    def delete(self, path: str) -> bool:
        """Delete the file at ``path``; whether it was there."""
        ...

    def delete_dir(self, path: str) -> bool:
        """Delete the directory ``path`` and what it holds; whether it was there."""
        ...

    def remove_empty_dir(self, path: str) -> bool:
        """Remove the directory ``path`` when it is empty; whether it was removed."""
        ...

    def delete_many(self, paths: Iterable[str], max_workers: int = 8) -> DeleteOutcome:
        """Delete ``paths`` on up to ``max_workers`` threads."""
        ...

    def list_prefix(self, path: str) -> Iterator[ListedFile]:
        """Every file below ``path``, recursively."""
        ...

    def list_dir(self, path: str) -> list[tuple[str, bool]]:
        """The entries directly in directory ``path``: ``(name, is_dir)``."""
        ...
