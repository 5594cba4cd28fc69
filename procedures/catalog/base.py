"""The catalog contract: tables by identifier, namespaces, and the atomic metadata swap.

The spec ("Metastore Tables", "File System Tables" and "Commit Conflict Resolution and Retry")
leaves one job to a catalog: map a table identifier to its current metadata file and swap that
pointer atomically from a base file to a new one.  Everything else (building the new metadata,
validating it, retrying) happens above, in ``procedures.core``.  This module holds what all
catalogs share: identifier parsing and validation, the :class:`Table` handle, the abstract
:class:`Catalog`, and the metadata-file helpers (names, compression, cleanup after commit).
"""

from __future__ import annotations

import abc
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence, Union

from procedures.core.gc.delete_guard import table_roots
from procedures.core.gc.purge import PurgePlan, PurgeResult, execute_purge, plan_purge
from procedures.core.kernel.ownership import Ownership
from procedures.core.kernel.properties import METADATA_COMPRESSION, METADATA_DELETE_AFTER_COMMIT_ENABLED
from procedures.core.kernel.snapshot_producer import metadata_dir
from procedures.core.kernel.updates import MetadataUpdate
from procedures.errors import CommitFailedError, IcebergError, NoSuchTableError, ValidationError
from procedures.io.fileio import FileIO, join_path
from procedures.spec.metadata import TableMetadata, metadata_file_data

__all__ = [
    "Identifier",
    "staged_create",
    "IdentifierLike",
    "Table",
    "Catalog",
    "NamespacePropertiesUpdate",
    "parse_identifier",
    "split_dotted",
    "parse_namespace",
    "identifier_to_string",
    "metadata_file_bytes",
    "metadata_extension",
    "metadata_dir",
    "next_metadata_location",
    "plan_table_purge",
    "purge_table_files",
    "parse_metadata_version",
    "removed_metadata_files",
    "delete_removed_metadata_files",
    "delete_quietly",
]

log = logging.getLogger(__name__)

Identifier = tuple[str, ...]
IdentifierLike = Union[str, Sequence[str]]

_FORBIDDEN = re.compile(r"[/\\\x00.]")


def split_dotted(text: str) -> list[str]:
    """Split on dots outside backticks; a doubled backtick inside quotes is a literal one."""
    parts: list[str] = []
    cur: list[str] = []
    i, quoted = 0, False
    while i < len(text):
        c = text[i]
        if quoted:
            if c == "`":
                if text[i + 1 : i + 2] == "`":
                    cur.append("`")
                    i += 1
                else:
                    quoted = False
            else:
                cur.append(c)
        elif c == "`":
            quoted = True
        elif c == ".":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    if quoted:
        raise ValidationError(f"Invalid identifier {text!r}: unbalanced backtick")
    parts.append("".join(cur))
    return parts


def _levels(value: IdentifierLike, what: str) -> Identifier:
    if isinstance(value, str):
        levels = split_dotted(value.strip())
    elif isinstance(value, Sequence) and all(isinstance(p, str) for p in value):
        levels = list(value)
    else:
        raise ValidationError(f"Invalid {what} {value!r}: expected a dotted string or a sequence of strings")
    for level in levels:
        if not level or not level.strip():
            raise ValidationError(f"Invalid {what} {value!r}: empty name part")
        if _FORBIDDEN.search(level):
            raise ValidationError(
                f"Invalid {what} {value!r}: name part {level!r} contains '.', '/', '\\' or NUL, "
                "which cannot be stored in a warehouse path or a JDBC namespace"
            )
    return tuple(levels)


def parse_namespace(value: IdentifierLike) -> Identifier:
    """A namespace as a tuple of levels (``"a.b"`` or ``("a", "b")``); malformed -> ValidationError."""
    levels = _levels(value, "namespace")
    if not levels:
        raise ValidationError(f"Invalid namespace {value!r}: at least one level is required")
    return levels


def parse_identifier(value: IdentifierLike) -> Identifier:
    """A table identifier as ``(*namespace, name)``; a namespace of at least one level is required."""
    levels = _levels(value, "table identifier")
    if len(levels) < 2:
        raise ValidationError(
            f"Invalid table identifier {value!r}: expected <namespace>.<table>, e.g. db.events"
        )
    return levels


def identifier_to_string(identifier: Sequence[str]) -> str:
    """The dotted form used in messages and in the JDBC ``table_namespace`` column."""
    return ".".join(identifier)


@dataclass(frozen=True, slots=True)
class NamespacePropertiesUpdate:
    """What :meth:`Catalog.update_namespace_properties` changed."""

    removed: tuple[str, ...]
    updated: tuple[str, ...]
    missing: tuple[str, ...]


class Table:
    """A loaded table: identifier, current metadata and its file, the FileIO and the catalog.

    ``refresh()`` reloads the current metadata from the catalog in place.
    """

    __slots__ = ("identifier", "metadata", "metadata_location", "io", "catalog")

    def __init__(
        self,
        identifier: Identifier,
        metadata: "TableMetadata",
        metadata_location: str,
        io: FileIO,
        catalog: "Catalog",
    ) -> None:
        self.identifier = tuple(identifier)
        self.metadata = metadata
        self.metadata_location = metadata_location
        self.io = io
        self.catalog = catalog

    @property
    def name(self) -> str:
        """``<catalog>.<namespace>.<table>``."""
        return identifier_to_string((self.catalog.name, *self.identifier))

    @property
    def location(self) -> str:
        """The table's base location."""
        return self.metadata.location

    def refresh(self) -> "Table":
        """Reload the current metadata; returns ``self``.

        When the catalog still points at the file this table was loaded from, nothing is read:
        a metadata file never changes once written, and parsing one of a long history costs time
        and memory (garbage collection refreshes before every batch of deletes)."""
        current = getattr(self.catalog, "current_metadata_location", None)
        if self.metadata_location is not None and callable(current) \
                and current(self.identifier) == self.metadata_location:
            return self
        fresh = self.catalog.load_table(self.identifier)
        self.metadata = fresh.metadata
        self.metadata_location = fresh.metadata_location
        return self

    def __repr__(self) -> str:
        return f"Table({self.name!r}, metadata_location={self.metadata_location!r})"


class _StagedCreate:
    """The catalog of a table not created yet: its first commit creates it (one metadata file)."""

    def __init__(self, catalog: "Catalog", identifier: Identifier) -> None:
        self.catalog = catalog
        self.identifier = identifier
        self.name = catalog.name

    def commit_table(self, table: Table, base: "TableMetadata", new: "TableMetadata") -> Table:
        try:
            return self.catalog.create_table(self.identifier, new)
        except IcebergError:
            raise
        except Exception as e:
            # A create that failed with the table still absent changed nothing: say so with a typed
            # error, so the commit deletes the manifests it wrote for the table (an untyped error
            # from a swap counts as an unknown outcome and keeps them).
            if self.catalog.table_exists(self.identifier):
                raise
            name = ".".join(self.identifier)
            raise CommitFailedError(f"Cannot create table {name}: {e}; nothing was created", table=name,
                                    retryable=False) from e

    def commit_changes(self, table: Table, base: "TableMetadata", new: "TableMetadata",
                       updates: Sequence["MetadataUpdate"]) -> Table:
        return self.commit_table(table, base, new)

    def load_table(self, identifier: IdentifierLike) -> Table:
        return self.catalog.load_table(identifier)


def staged_create(catalog: "Catalog", identifier: IdentifierLike, metadata: "TableMetadata") -> Table:
    """A table that exists only once committed: commit operations to it and the catalog creates it
    with the resulting metadata (as Java's staged create-and-commit); nothing is written before."""
    ident = parse_identifier(identifier)
    return Table(ident, metadata, None, catalog.io, _StagedCreate(catalog, ident))  # type: ignore[arg-type]


class Catalog(abc.ABC):
    """A named catalog: namespaces, tables, and ``commit_table`` -- the atomic swap.

    ``commit_table`` raises :class:`~procedures.errors.CommitFailedError` when another writer
    committed first (retry on fresh metadata) and
    :class:`~procedures.errors.CommitStateUnknownError` when the outcome cannot be known.
    """

    def __init__(self, name: str, properties: Mapping[str, str] | None = None, io: FileIO | None = None) -> None:
        if not name or not isinstance(name, str) or _FORBIDDEN.search(name):
            raise ValidationError(f"Invalid catalog name {name!r}")
        self.name = name
        self.properties: dict[str, str] = dict(properties or {})
        self.io = io if io is not None else FileIO(dict(self.properties))

    # -- namespaces ---------------------------------------------------------------------------

    @abc.abstractmethod
    def create_namespace(self, namespace: IdentifierLike, properties: Mapping[str, str] | None = None) -> None:
        """Create a namespace; NamespaceAlreadyExistsError if it exists."""

    @abc.abstractmethod
    def list_namespaces(self, parent: IdentifierLike = ()) -> list[Identifier]:
        """Namespaces directly below ``parent`` (top level by default), sorted."""

    @abc.abstractmethod
    def namespace_exists(self, namespace: IdentifierLike) -> bool:
        """Whether the namespace exists."""

    @abc.abstractmethod
    def drop_namespace(self, namespace: IdentifierLike) -> None:
        """Drop an empty namespace; NoSuchNamespaceError / NamespaceNotEmptyError otherwise."""

    @abc.abstractmethod
    def load_namespace_properties(self, namespace: IdentifierLike) -> dict[str, str]:
        """The namespace's properties."""

    @abc.abstractmethod
    def update_namespace_properties(
        self,
        namespace: IdentifierLike,
        removals: Iterable[str] = (),
        updates: Mapping[str, str] | None = None,
    ) -> NamespacePropertiesUpdate:
        """Remove and set namespace properties in one step."""

    # -- tables -------------------------------------------------------------------------------

    @abc.abstractmethod
    def create_table(self, identifier: IdentifierLike, metadata: "TableMetadata") -> Table:
        """Write ``metadata`` (built by the metadata builder) as the table's first file and register it."""

    @abc.abstractmethod
    def load_table(self, identifier: IdentifierLike) -> Table:
        """The table with its current metadata; NoSuchTableError when absent."""

    def current_metadata_location(self, identifier: IdentifierLike) -> str | None:
        """The table's current metadata file, looked up without reading it; None when this catalog
        cannot tell without loading the table (``Table.refresh`` then loads it).  Raises
        NoSuchTableError when the table is gone."""
        return None

    def current_metadata_locations(self, namespace: IdentifierLike) -> dict[Identifier, str] | None:
        """Every table of ``namespace`` with its current metadata file, in one lookup, files not
        read; None when this catalog has no such lookup (callers then ask table by table)."""
        return None

    def table_exists(self, identifier: IdentifierLike) -> bool:
        """Whether the table exists."""
        try:
            self.load_table(identifier)
            return True
        except NoSuchTableError:
            return False

    def location_hint(self, identifier: IdentifierLike) -> str | None:
        """Where a table lies when its metadata cannot be read (the overlap rule still keeps
        clear of it), or None when the catalog knows no location without the metadata."""
        return None

    def tables_inside(self, identifier: IdentifierLike) -> list[Identifier]:
        """Tables whose identifiers ``list_tables`` cannot reach because they lie inside the
        folder of table ``identifier`` (a path-based catalog's nested names); none by default."""
        return []

    @abc.abstractmethod
    def drop_table(self, identifier: IdentifierLike, purge: bool = False) -> None:
        """Remove the table from the catalog; with ``purge`` also delete its files."""

    @abc.abstractmethod
    def rename_table(self, source: IdentifierLike, target: IdentifierLike) -> None:
        """Rename a table (the metadata stays where it is)."""

    @abc.abstractmethod
    def register_table(self, identifier: IdentifierLike, metadata_location: str) -> Table:
        """Register an existing metadata file under a new identifier."""

    @abc.abstractmethod
    def list_tables(self, namespace: IdentifierLike) -> list[Identifier]:
        """Tables of a namespace, sorted."""

    @abc.abstractmethod
    def commit_table(self, table: Table, base: "TableMetadata", new: "TableMetadata") -> Table:
        """Atomically replace ``base`` (the metadata ``table`` was loaded with) by ``new``."""

    def commit_changes(self, table: Table, base: "TableMetadata", new: "TableMetadata",
                       updates: Sequence["MetadataUpdate"]) -> Table:
        """Commit a change the core expressed as ``updates`` on ``base`` (``new`` is their result).
        Catalogs that swap metadata files apply the updates locally -- ``new`` already holds them --
        and swap (:meth:`commit_table`); the REST catalog sends the updates with their requirements."""
        return self.commit_table(table, base, new)

    @abc.abstractmethod
    def default_table_location(self, identifier: IdentifierLike) -> str:
        """Where a new table's files go when no location is given."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


# -- metadata file helpers --------------------------------------------------------------------


def metadata_extension(md: "TableMetadata") -> str:
    """``.metadata.json`` or, for gzip, ``.gz.metadata.json`` (as Java names them)."""
    return ".gz.metadata.json" if METADATA_COMPRESSION.read(md.properties) == "gzip" else ".metadata.json"


def metadata_file_bytes(md: "TableMetadata", location: str) -> bytes:
    """The serialized file for ``location``: JSON, gzip-compressed when the name says so."""
    return metadata_file_data(md, location)


def parse_metadata_version(location: str | None) -> int:
    """The ``NNNNN`` of ``NNNNN-<uuid>.metadata.json`` (or ``N`` of ``vN.metadata.json``); -1 if none."""
    if not location:
        return -1
    name = location.rsplit("/", 1)[-1]
    m = re.match(r"^v?(\d+)[-.]", name)
    return int(m.group(1)) if m else -1


def next_metadata_location(md: "TableMetadata", previous_location: str | None) -> str:
    """A fresh ``<metadata dir>/<NNNNN>-<uuid><ext>`` following ``previous_location``'s version."""
    version = parse_metadata_version(previous_location) + 1
    return join_path(metadata_dir(md), f"{version:05d}-{uuid.uuid4()}{metadata_extension(md)}")


def removed_metadata_files(base: "TableMetadata | None", new: "TableMetadata") -> list[str]:
    """Previous metadata files that ``new``'s log dropped (``write.metadata.previous-versions-max``),
    when ``write.metadata.delete-after-commit.enabled`` is on, and that belong to the table
    (:class:`procedures.core.kernel.ownership.Ownership` over its folders): a log entry naming another
    table's file, a path outside the table or a symlink is kept and logged."""
    if base is None or not METADATA_DELETE_AFTER_COMMIT_ENABLED.read(new.properties):
        return []
    kept = {e.metadata_file for e in new.metadata_log}
    dropped = [e.metadata_file for e in base.metadata_log if e.metadata_file not in kept]
    owned = Ownership(table_roots(new))
    outside = [p for p in dropped if not owned.owns(p)]
    if outside:
        log.warning("Not deleting %d old metadata file(s) outside the table's folders: %s", len(outside),
                    ", ".join(outside[:5]))
    return [p for p in dropped if owned.owns(p)]


def delete_removed_metadata_files(io: FileIO, base: "TableMetadata | None", new: "TableMetadata") -> None:
    """The last step of every file-swap catalog's commit, once ``new`` is in place: delete the
    previous metadata files it dropped (:func:`removed_metadata_files`), quietly, as Java's
    ``deleteRemovedMetadataFiles`` does."""
    delete_quietly(io, removed_metadata_files(base, new))


def plan_table_purge(table: Table, *, content: bool = True, metadata_files: Iterable[str] = ()) -> PurgePlan:
    """What purging ``table`` deletes: every file its metadata reaches that is the table's
    (:func:`procedures.core.gc.purge.plan_purge`), read before the table is dropped so that unreadable
    metadata fails the drop (:class:`~procedures.errors.InvalidMetadataError`) with nothing changed."""
    return plan_purge(table.io, table.metadata, table.metadata_location, content=content,
                      metadata_files=metadata_files, table=table.name)


def purge_table_files(table: Table, plan: PurgePlan) -> PurgeResult:
    """Delete the files of ``plan`` (from :func:`plan_table_purge`) and the folders they leave empty;
    never a listing of the table's folder, never recursively.  Failures are logged, not raised."""
    result = execute_purge(table.io, plan)
    log.info("Purged %s: %d files deleted, %d empty folders removed, %d reached files outside the table kept",
             table.name, result.deleted, result.removed_dirs, len(plan.outside))
    return result


def delete_quietly(io: FileIO, paths: Iterable[str]) -> None:
    """Best-effort cleanup after a decided commit: failures are logged, never raised."""
    paths = list(paths)
    if not paths:
        return
    try:
        result = io.delete_many(paths)
    except Exception:  # noqa: BLE001 -- cleanup must not turn a success into a failure
        log.warning("Failed to delete %d old metadata files", len(paths), exc_info=True)
        return
    for path, error in result.failures:
        log.warning("Failed to delete %s: %s", path, error)
