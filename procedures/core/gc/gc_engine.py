"""The engine steps garbage collection needs (expire_snapshots, remove_orphan_files): the typed
seam between :mod:`procedures.core.gc` and whatever runs its large steps.

The capability decides *what* to read, compare and delete; an engine decides *where*: on the driver
for small metadata, as distributed jobs for large.  Every step that may run elsewhere returns an
engine-owned set of rows (:data:`EngineRows`, a DataFrame on Spark) or None when the input is small
enough for the driver, and the capability hands those rows back to the engine (:meth:`GcEngine.iterate`,
:meth:`GcEngine.match_orphans`) instead of touching them -- so nothing below the Spark layer knows
what a DataFrame is.  :class:`procedures.spark.engine.gc_steps.GcSteps` implements it on Spark (and
on the driver alone, without a session).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence

from procedures.core.gc.hidden_paths import HiddenPathFilter
from procedures.core.kernel.capability import Committer, JobScope
from procedures.core.kernel.table_overlap import TableFolders
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.model import ManifestFile
from procedures.spec.metadata import TableMetadata

__all__ = ["EngineRows", "Listing", "EngineManifests", "ValidFiles", "GcEngine"]

#: rows an engine computed and holds (a Spark DataFrame): opaque to the capability, handed back to
#: the engine to be iterated or joined
EngineRows = Any


@dataclass(frozen=True)
class Listing:
    """The actual files below a location: ``files`` the driver listed; ``pending`` directories it
    left for the engine to list (with ``older_than`` -- any age when None -- and the hidden-path
    ``partition_prefixes``, through a FileIO of ``io_properties``); or ``view``, the engine's rows of a
    ``file_list_view``."""

    files: list[str]
    pending: tuple[str, ...] = ()
    view: EngineRows | None = None
    older_than: int | None = None
    partition_prefixes: tuple[str, ...] = ()
    io_properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def in_engine(self) -> bool:
        """Whether the engine holds part of the listing (then it also matches)."""
        return bool(self.pending) or self.view is not None


@dataclass(frozen=True)
class EngineManifests:
    """Manifests an engine step read from the manifest lists in its own tasks: ``frame`` holds the
    normalised paths of the manifests and of their live content files, ``manifests`` produces the
    manifest paths when called (only :class:`~procedures.core.gc.delete_guard.DeleteGuard` asks,
    when the table changed during the run)."""

    frame: Any
    manifests: Callable[[], Iterable[str]]


@dataclass(frozen=True)
class ValidFiles:
    """Everything the metadata references: paths on the driver, content paths as a Spark DataFrame
    for large metadata (else None), and the manifest lists and manifests that were read (the
    manifests as a callable producing them when an engine read the lists)."""

    paths: list[str]
    content_frame: Any
    manifest_lists: tuple[str, ...]
    manifests: tuple[str, ...] | Callable[[], Iterable[str]]


class GcEngine(Committer, JobScope, Protocol):
    """The steps of expire_snapshots and remove_orphan_files that an engine runs."""

    def neighbours(self, table: Any) -> tuple[Sequence[TableFolders], str | None]:
        """The folders of the other tables of ``table``'s catalog and the warehouse root, read once."""
        ...

    def unreached_content(self, io: FileAccess, candidates: Sequence[ManifestFile],
                          retained: Sequence[ManifestFile]) -> EngineRows | None:
        """``(path, kind)`` rows of the live content files of ``candidates`` that no live entry of
        ``retained`` names, computed by the engine; None when the manifests suit the driver."""
        ...

    def materialize(self, rows: EngineRows) -> None:
        """Compute ``rows`` now (and keep them), so a read that fails fails before a commit."""
        ...

    def iterate(self, rows: EngineRows, *, prefetch: bool) -> Iterator[tuple[Any, ...]]:
        """``rows`` brought to the driver a part at a time; ``prefetch`` computes the next part while
        the caller works on the current one."""
        ...

    def valid_content(self, io: FileAccess, manifests: Sequence[ManifestFile], schemes: Mapping[str, str],
                      auths: Mapping[str, str]) -> EngineRows | None:
        """Normalised keys of the live content files of ``manifests``; None when they suit the driver."""
        ...

    def engine_manifests(self, io: FileAccess, md: TableMetadata, schemes: Mapping[str, str],
                         auths: Mapping[str, str]) -> EngineManifests | None:
        """The manifest lists of ``md`` read by the engine (many or large lists); None otherwise."""
        ...

    def list_files(self, io: FileAccess, location: str, older_than: int | None, path_filter: HiddenPathFilter, *,
                   prefix_listing: bool, file_list_view: str | None, schemes: Mapping[str, str],
                   auths: Mapping[str, str]) -> Listing:
        """The files below ``location`` modified before ``older_than`` (any age when None) that are not
        hidden, or the rows of ``file_list_view`` inside it."""
        ...

    def modified_before(self, io: FileAccess, paths: Sequence[str], older_than: int) -> Sequence[bool]:
        """For each of ``paths``, whether it was last modified before ``older_than`` (a gone file is not)."""
        ...

    def match_orphans(self, listing: Listing, valid: ValidFiles, schemes: Mapping[str, str],
                      auths: Mapping[str, str], mode: str, *, stream: bool,
                      older_than: int | None) -> Iterator[str]:
        """The orphans among ``listing`` when the engine holds either side (``listing.in_engine`` or
        ``valid.content_frame``): the engine's join of actual and valid files; ``older_than`` (when
        given) is applied to the orphans found."""
        ...
