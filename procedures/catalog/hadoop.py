"""The file-system catalog of the spec's "File System Tables", laid out like Iceberg Java's HadoopCatalog.

``<warehouse>/<ns1>/<ns2>/<table>/metadata/v<N>.metadata.json`` holds version N of a table;
``version-hint.text`` next to it names the newest version, but only as a hint: it may lag, so a
reader starts there and walks forward while ``v<N+1>`` exists, exactly as Java does.  Namespaces
are plain directories; a directory is a table when its ``metadata`` folder holds version files.

The commit is the file system's create-if-absent: version N+1 is written with
:meth:`FileIO.write` (never overwriting), so of two writers that both read version N exactly one
creates ``v<N+1>`` and the other gets :class:`CommitFailedError`.  Java's ``.crc`` side files
and its temporary ``<uuid>-version-hint.temp`` files are ignored.
"""

from __future__ import annotations

import logging
import re
from typing import Iterable, Mapping

from procedures.catalog.base import (
    Catalog,
    Identifier,
    IdentifierLike,
    NamespacePropertiesUpdate,
    Table,
    delete_removed_metadata_files,
    metadata_extension,
    metadata_file_bytes,
    parse_identifier,
    parse_namespace,
    plan_table_purge,
    purge_table_files,
)
from procedures.catalog.overlap import check_commit_folders, check_table_folders
from procedures.core.gc.purge import METADATA, PurgePlan, execute_purge
from procedures.core.kernel.properties import WRITE_METADATA_LOCATION
from procedures.errors import (
    CommitFailedError,
    CommitStateUnknownError,
    IcebergError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
    ValidationError,
)
from procedures.io.fileio import FileAlreadyExistsError, FileIO, join_path, local_path
from procedures.spec.metadata import read_table_metadata

__all__ = ["HadoopCatalog", "VERSION_HINT"]

log = logging.getLogger(__name__)

VERSION_HINT = "version-hint.text"
_VERSION_FILE = re.compile(r"^v(\d+)(\.gz)?\.metadata\.json(\.gz)?$")
_EXTENSIONS = (".metadata.json", ".gz.metadata.json", ".metadata.json.gz")


def _same_location(a: str, b: str) -> bool:
    """Whether two locations name the same place, whatever their ``file:`` spelling."""
    try:
        la, lb = local_path(a), local_path(b)
    except ValidationError:
        return a.rstrip("/") == b.rstrip("/")
    if la is not None and lb is not None:
        return la.rstrip("/") == lb.rstrip("/")
    return a.rstrip("/") == b.rstrip("/")


class HadoopCatalog(Catalog):
    """Path-based tables under ``warehouse``; interoperates with Java's ``type=hadoop`` catalog."""

    def __init__(
        self,
        name: str,
        warehouse: str,
        properties: Mapping[str, str] | None = None,
        io: FileIO | None = None,
    ) -> None:
        super().__init__(name, properties, io)
        if not warehouse:
            raise ValidationError(f"Catalog {name}: a hadoop catalog needs a warehouse location")
        local_path(warehouse)  # rejects relative paths early, with the offending value
        self.warehouse = warehouse.rstrip("/") or "/"

    # -- layout -------------------------------------------------------------------------------

    def _ns_path(self, namespace: Identifier) -> str:
        return join_path(self.warehouse, *namespace)

    def _table_path(self, identifier: Identifier) -> str:
        return join_path(self.warehouse, *identifier)

    def _versions(self, table_path: str) -> dict[int, str]:
        """Version number -> file name of every version file in the table's metadata folder."""
        found: dict[int, str] = {}
        for name, is_dir in self.io.list_dir(join_path(table_path, "metadata")):
            m = _VERSION_FILE.match(name)
            if m and not is_dir:
                found.setdefault(int(m.group(1)), name)
        return found

    def _is_table_dir(self, path: str) -> bool:
        return bool(self._versions(path))

    def _is_namespace_dir(self, path: str) -> bool:
        return self.io.is_dir(path) and not self._is_table_dir(path)

    def _version_file(self, table_path: str, version: int) -> str | None:
        meta = join_path(table_path, "metadata")
        for ext in _EXTENSIONS:
            candidate = join_path(meta, f"v{version}{ext}")
            if self.io.exists(candidate):
                return candidate
        return None

    def _read_hint(self, table_path: str) -> int | None:
        try:
            text = self.io.new_input(join_path(table_path, "metadata", VERSION_HINT)).read()
            return int(text.decode("utf-8").strip().splitlines()[0])
        except (OSError, ValueError, IndexError, UnicodeDecodeError):
            return None

    def _current_version(self, table_path: str) -> tuple[int, str] | None:
        """(version, file) of the newest metadata: hint first, then forward while files exist."""
        version = self._read_hint(table_path)
        path = self._version_file(table_path, version) if version is not None else None
        if path is None:
            versions = self._versions(table_path)
            if not versions:
                return None
            version = max(versions)
            path = join_path(table_path, "metadata", versions[version])
        assert version is not None
        while (nxt := self._version_file(table_path, version + 1)) is not None:
            version, path = version + 1, nxt
        return version, path

    def default_table_location(self, identifier: IdentifierLike) -> str:
        """``<warehouse>/<ns...>/<table>``; hadoop tables cannot live anywhere else."""
        return self._table_path(parse_identifier(identifier))

    # -- namespaces ---------------------------------------------------------------------------

    def create_namespace(self, namespace: IdentifierLike, properties: Mapping[str, str] | None = None) -> None:
        """Create the namespace directory (and missing parents); properties are not supported."""
        ns = parse_namespace(namespace)
        if properties:
            raise ValidationError(
                f"Cannot create namespace {'.'.join(ns)} with properties: "
                "a hadoop catalog stores no namespace properties"
            )
        path = self._ns_path(ns)
        if self.io.exists(path):
            raise NamespaceAlreadyExistsError(f"Namespace {'.'.join(ns)} already exists at {path}")
        self.io.make_dirs(path)

    def namespace_exists(self, namespace: IdentifierLike) -> bool:
        """Whether the namespace directory exists (and is not a table)."""
        return self._is_namespace_dir(self._ns_path(parse_namespace(namespace)))

    def _require_namespace(self, ns: Identifier) -> str:
        path = self._ns_path(ns)
        if not self._is_namespace_dir(path):
            raise NoSuchNamespaceError(f"Namespace {'.'.join(ns)} does not exist in catalog {self.name} ({path})")
        return path

    def list_namespaces(self, parent: IdentifierLike = ()) -> list[Identifier]:
        """Child directories of ``parent`` that are not tables."""
        ns = parse_namespace(parent) if parent else ()
        path = self._require_namespace(ns) if ns else self.warehouse
        return [
            (*ns, name)
            for name, is_dir in self.io.list_dir(path)
            if is_dir and not name.startswith(".") and not self._is_table_dir(join_path(path, name))
        ]

    def drop_namespace(self, namespace: IdentifierLike) -> None:
        """Delete an empty namespace directory."""
        ns = parse_namespace(namespace)
        path = self._require_namespace(ns)
        children = [n for n, _ in self.io.list_dir(path) if not n.endswith(".crc")]
        if children:
            raise NamespaceNotEmptyError(
                f"Cannot drop namespace {'.'.join(ns)}: it still contains {', '.join(children[:5])}"
            )
        self.io.delete_dir(path)

    def load_namespace_properties(self, namespace: IdentifierLike) -> dict[str, str]:
        """Only ``location``, as Java reports it."""
        ns = parse_namespace(namespace)
        return {"location": self._require_namespace(ns)}

    def update_namespace_properties(
        self,
        namespace: IdentifierLike,
        removals: Iterable[str] = (),
        updates: Mapping[str, str] | None = None,
    ) -> NamespacePropertiesUpdate:
        """Not supported by hadoop catalogs (as in Java)."""
        ns = parse_namespace(namespace)
        self._require_namespace(ns)
        raise ValidationError(
            f"Cannot set properties of namespace {'.'.join(ns)}: a hadoop catalog stores no namespace properties"
        )

    # -- tables -------------------------------------------------------------------------------

    def list_tables(self, namespace: IdentifierLike) -> list[Identifier]:
        """Child directories of the namespace that hold table metadata."""
        ns = parse_namespace(namespace)
        path = self._require_namespace(ns)
        return [
            (*ns, name)
            for name, is_dir in self.io.list_dir(path)
            if is_dir and self._is_table_dir(join_path(path, name))
        ]

    def load_table(self, identifier: IdentifierLike) -> Table:
        """Read the newest version of the table's metadata."""
        ident = parse_identifier(identifier)
        found = self._current_version(self._table_path(ident))
        if found is None:
            raise NoSuchTableError(f"Table {'.'.join(ident)} does not exist in catalog {self.name}")
        _, path = found
        return Table(ident, read_table_metadata(self.io, path), path, self.io, self)

    def current_metadata_location(self, identifier: IdentifierLike) -> str | None:
        """The newest version file (the hint, then forward while files exist), not read."""
        ident = parse_identifier(identifier)
        found = self._current_version(self._table_path(ident))
        if found is None:
            raise NoSuchTableError(f"Table {'.'.join(ident)} does not exist in catalog {self.name}")
        return found[1]

    def location_hint(self, identifier: IdentifierLike) -> str | None:
        """A hadoop table lies at its path, metadata or not."""
        return self._table_path(parse_identifier(identifier))

    def tables_inside(self, identifier: IdentifierLike) -> list[Identifier]:
        """Tables in child folders of the table's folder (``db.t.inner`` created before ``db.t``):
        ``list_namespaces`` does not descend into a table.  Lists the table's folder and each child
        other than ``metadata`` and ``data``."""
        ident = parse_identifier(identifier)
        path = self._table_path(ident)
        out = []
        try:
            children = self.io.list_dir(path)
        except OSError:
            return out  # dropped while we looked
        for name, is_dir in children:
            if is_dir and name not in ("metadata", "data") and not name.startswith(".") \
                    and self._is_table_dir(join_path(path, name)):
                out.append((*ident, name))
        return out

    def table_exists(self, identifier: IdentifierLike) -> bool:
        """Whether the table directory holds metadata versions."""
        return self._is_table_dir(self._table_path(parse_identifier(identifier)))

    def _check_layout(self, ident: Identifier, metadata) -> None:  # noqa: ANN001
        expected = self._table_path(ident)
        if not _same_location(metadata.location, expected):
            raise ValidationError(
                f"Cannot use location {metadata.location!r} for hadoop table {'.'.join(ident)}: "
                f"path-based tables must live at {expected}"
            )
        if WRITE_METADATA_LOCATION.is_set(metadata.properties):
            raise ValidationError(
                f"Cannot set {WRITE_METADATA_LOCATION.key} on hadoop table {'.'.join(ident)}: its metadata must stay "
                f"in {expected}/metadata"
            )

    def _write_version(self, table_path: str, version: int, data: bytes, ext: str) -> str:
        path = join_path(table_path, "metadata", f"v{version}{ext}")
        self.io.write(path, data, overwrite=False)
        return path

    def _write_hint(self, table_path: str, version: int) -> None:
        # best effort, like Java: readers walk forward from a lagging hint
        try:
            self.io.write(join_path(table_path, "metadata", VERSION_HINT), str(version).encode(), overwrite=True)
        except OSError:
            log.warning("Could not update %s of %s to %d", VERSION_HINT, table_path, version, exc_info=True)

    def create_table(self, identifier: IdentifierLike, metadata) -> Table:  # noqa: ANN001
        """Write ``v1.metadata.json`` (create-if-absent) and the version hint."""
        ident = parse_identifier(identifier)
        self._require_namespace(ident[:-1])
        self._check_layout(ident, metadata)
        table_path = self._table_path(ident)
        if self._is_table_dir(table_path):
            raise TableAlreadyExistsError(f"Table {'.'.join(ident)} already exists at {table_path}")
        check_table_folders(self, ident, metadata, action=f"create table {'.'.join(ident)}")
        ext = metadata_extension(metadata)
        path = join_path(table_path, "metadata", f"v1{ext}")
        data = metadata_file_bytes(metadata, path)
        try:
            self._write_version(table_path, 1, data, ext)
        except FileAlreadyExistsError:
            raise TableAlreadyExistsError(f"Table {'.'.join(ident)} already exists at {table_path}") from None
        self._write_hint(table_path, 1)
        return Table(ident, metadata, path, self.io, self)

    def register_table(self, identifier: IdentifierLike, metadata_location: str) -> Table:
        """Copy an existing metadata file in as ``v1`` of a table whose location is its hadoop path.

        Java's HadoopCatalog refuses registration; path-based tables can only adopt metadata
        that already points at the table's own directory.
        """
        ident = parse_identifier(identifier)
        self._require_namespace(ident[:-1])
        metadata = read_table_metadata(self.io, metadata_location)
        self._check_layout(ident, metadata)
        table_path = self._table_path(ident)
        if self._is_table_dir(table_path):
            raise TableAlreadyExistsError(f"Table {'.'.join(ident)} already exists at {table_path}")
        check_table_folders(self, ident, metadata, action=f"register table {'.'.join(ident)}")
        name = metadata_location.rsplit("/", 1)[-1]
        ext = next((e for e in reversed(_EXTENSIONS) if name.endswith(e)), ".metadata.json")
        data = self.io.new_input(metadata_location).read()
        try:
            path = self._write_version(table_path, 1, data, ext)
        except FileAlreadyExistsError:
            raise TableAlreadyExistsError(f"Table {'.'.join(ident)} already exists at {table_path}") from None
        self._write_hint(table_path, 1)
        return Table(ident, metadata, path, self.io, self)

    def drop_table(self, identifier: IdentifierLike, purge: bool = False) -> None:
        """Drop the table: its version files and ``version-hint.text`` go first (the table no longer
        exists), then every other file its metadata reaches -- with ``purge`` the data and delete
        files too -- and the folders this leaves empty, up to the table folder.

        Java's HadoopCatalog deletes the whole table folder, purge or not; here nothing is listed or
        deleted recursively: a file no metadata names (a user's own, or one through a symlink) stays,
        and so does its folder.  Metadata that cannot be read fails a purge with nothing changed
        (:class:`~procedures.errors.InvalidMetadataError`); without purge only the version files go.
        """
        ident = parse_identifier(identifier)
        table_path = self._table_path(ident)
        versions = self._versions(table_path)
        if not versions:
            raise NoSuchTableError(f"Table {'.'.join(ident)} does not exist in catalog {self.name}")
        meta = join_path(table_path, "metadata")
        # newest first: a drop cut short leaves an older version, never a gap readers stop at
        entry = [join_path(meta, VERSION_HINT)] + [join_path(meta, versions[v]) for v in sorted(versions, reverse=True)]
        try:
            table = self.load_table(ident)
            plan = plan_table_purge(table, content=purge, metadata_files=entry)
        except IcebergError:
            if purge:
                raise
            log.warning("Dropping %s without purge: its metadata cannot be read, so only its version files are "
                        "deleted", ".".join(ident), exc_info=True)
            table, plan = None, None
        execute_purge(self.io, PurgePlan(tuple((p, METADATA) for p in entry), (), (table_path,)))
        if table is not None and plan is not None:
            purge_table_files(table, plan)

    def rename_table(self, source: IdentifierLike, target: IdentifierLike) -> None:
        """Not supported: a hadoop table's identity is its path (Java refuses too)."""
        src, dst = parse_identifier(source), parse_identifier(target)
        raise ValidationError(
            f"Cannot rename {'.'.join(src)} to {'.'.join(dst)}: hadoop catalog tables are path-based and "
            "cannot be renamed; use a jdbc catalog, or create a new table and copy"
        )

    # -- commit -------------------------------------------------------------------------------

    def commit_table(self, table: Table, base, new) -> Table:  # noqa: ANN001
        """Create ``v<N+1>`` from base version N without overwriting; lost race -> CommitFailedError."""
        ident = table.identifier
        name = ".".join(ident)
        if base is not table.metadata and base != table.metadata:
            raise ValidationError(f"Cannot commit {name}: base metadata is not the metadata the table was loaded with")
        if not _same_location(base.location, new.location):
            raise ValidationError(
                f"Cannot commit {name}: hadoop tables cannot be relocated ({base.location} -> {new.location})"
            )
        self._check_layout(ident, new)
        check_commit_folders(self, ident, base, new)
        m = _VERSION_FILE.match(table.metadata_location.rsplit("/", 1)[-1])
        if m is None:
            raise ValidationError(
                f"Cannot commit {name}: {table.metadata_location} is not a hadoop version file (v<N>.metadata.json)"
            )
        base_version = int(m.group(1))
        table_path = self._table_path(ident)
        # A stale base whose successor was already cleaned up (delete-after-commit) would
        # otherwise recreate a missing old version: refuse unless base is still the newest.
        current = self._current_version(table_path)
        if current is None:
            raise NoSuchTableError(f"Table {name} was dropped from catalog {self.name}")
        if current[0] != base_version:
            raise CommitFailedError(
                f"Cannot commit {name}: base version {base_version} is stale, version {current[0]} is current",
                table=name,
            )
        next_version = base_version + 1
        ext = metadata_extension(new)
        path = join_path(table_path, "metadata", f"v{next_version}{ext}")
        data = metadata_file_bytes(new, path)
        try:
            self.io.write(path, data, overwrite=False)
        except FileAlreadyExistsError:
            raise CommitFailedError(
                f"Cannot commit {name}: version {next_version} was committed by another writer", table=name
            ) from None
        except OSError as e:
            self._resolve_failed_write(name, path, data, e)
        self._write_hint(table_path, next_version)
        delete_removed_metadata_files(self.io, base, new)
        return Table(ident, new, path, self.io, self)

    def _resolve_failed_write(self, name: str, path: str, data: bytes, error: OSError) -> None:
        """Decide a write that raised: ours on disk -> success; absent -> failed; else unknown."""
        try:
            if not self.io.exists(path):
                raise CommitFailedError(f"Cannot commit {name}: writing {path} failed: {error}", table=name) from error
            if self.io.new_input(path).read() == data:
                return
        except CommitFailedError:
            raise
        except OSError as check_error:
            raise CommitStateUnknownError(
                f"Cannot tell whether {path} was committed for {name}: {error}; check the table before retrying",
                table=name,
                cause=check_error,
            ) from error
        raise CommitStateUnknownError(
            f"Writing {path} for {name} failed and the file now holds other content: {error}",
            table=name,
            cause=error,
        ) from error
