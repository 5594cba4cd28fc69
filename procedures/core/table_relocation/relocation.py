"""``rewrite_table_path`` as a capability (procedures.md §3.20; Iceberg Java's
``RewriteTablePathUtil`` and ``RewriteTablePathSparkAction``): :class:`RewriteTablePathParams` ->
:func:`plan` (the parameters validated) -> :func:`execute` on a
:class:`~procedures.core.table_relocation.table_relocation_engine.TableRelocationEngine`; path prefix replacement, the choice
of metadata versions, snapshots and manifests to restage, the rewritten metadata objects, manifest
and manifest-list rewriting, and the copy plan (``source,target`` pairs).

Nothing here touches the table: every file is written below the staging location, and the caller
copies them.  Position delete file *contents* are rewritten by the engine
(:meth:`TableRelocationEngine.rewrite_delete_files`, which hands the sizes back); everything else is
metadata this module writes through the table's ``io``.

Order of work in :func:`execute`: plan on the driver (versions, rewritten metadata, manifests;
refusals here write nothing), stage the metadata files, rewrite the position delete files and DVs
(their new sizes go into the manifests), rewrite the manifests (their new lengths go into the
manifest lists), stage the manifest lists, write the file list.  The engine rewrites delete files
and manifests in tasks when there are enough manifests to be worth it, otherwise on driver
threads.  If anything fails, the files staged so far are removed.

Staged files never replace anything: a staging_location the caller names must lie outside every
table of the catalog, the source table's included however its location is spelled, and must hold
no table metadata nor any file this run would stage (checked before the first write); every write
is create-only (Iceberg Java overwrites).  So the failure cleanup removes only files this run
created.

Paths are compared as plain strings, as Java does: a path is under the source prefix when it
starts with ``<prefix>/`` (or equals the prefix).  Where the staged files go is checked after
normalisation and symlink resolution instead (:func:`check_staging_location`,
:func:`check_staged_files`), and every staged file is written create-only: a staged copy never
replaces an existing file (Java overwrites).  Deviations from Iceberg Java 1.10.2 (all
documented in ``docs/procedures/rewrite_table_path.md``): partition statistics files are relocated
(Java 1.10.2 refuses such tables; later Java relocates them), rewritten position delete files and
manifests are recorded with their new sizes, ``referenced_data_file`` of every position delete
file is moved to the target prefix, and a full rewrite copies every live content file (Java only
those added by snapshots still present in some metadata version of the range).
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from procedures.core.kernel.capability import Capability
from procedures.core.kernel.ownership import resolved
from procedures.core.kernel.paths import PathSet, is_table_metadata_file, is_within
from procedures.core.kernel.properties import WRITE_PATH_PROPERTIES
from procedures.core.table_relocation.table_relocation_engine import TableRelocationEngine
from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec.conversions import from_bytes, to_bytes
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.manifest_list import read_manifest_list, write_manifest_list
from procedures.spec.manifest.model import DataFile, FileContent, ManifestContent, ManifestEntry, ManifestFile
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.manifest.writer import ManifestWriter
from procedures.spec.metadata import TableMetadata, read_table_metadata, write_table_metadata
from procedures.spec.metadata_columns import DELETE_FILE_PATH_ID
from procedures.spec.snapshots import MetadataLogEntry, Snapshot
from procedures.spec.types import STRING

__all__ = [
    "FILE_LIST", "NOT_APPLICABLE", "SEPARATOR", "PATH_PROPERTIES",
    "RewriteTablePathParams", "RewriteTablePathResult", "TablePathPlan", "ManifestRewrite",
    "maybe_append_separator", "relativize", "new_path", "staging_path", "file_name", "metadata_dir",
    "default_staging_location", "resolve_version", "replace_paths", "plan_table_path",
    "write_version_files", "position_deletes_to_rewrite", "rewrite_manifest", "write_manifest_lists",
    "copy_plan", "file_list_text", "staged_paths", "check_staging", "check_staging_location", "check_staged_files",
    "RelocationPlan", "check_params", "plan", "execute", "REWRITE_TABLE_PATH",
]

log = logging.getLogger(__name__)

#: name of the copy plan written below the staging location
FILE_LIST = "file-list"
#: ``file_list_location`` when no file list is written
NOT_APPLICABLE = "N/A"
SEPARATOR = "/"
#: table properties holding locations, rewritten like every other path (Java's list)
PATH_PROPERTIES = tuple(p.key for p in WRITE_PATH_PROPERTIES)


# ----------------------------------------------------------------------------------------- parameters
@dataclass(frozen=True, slots=True)
class RewriteTablePathParams:
    """The procedure's options as the CALL gave them; :func:`plan` refuses what Java refuses."""

    source_prefix: str
    target_prefix: str
    start_version: str | None = None
    end_version: str | None = None
    staging_location: str | None = None
    create_file_list: bool = True


def check_params(params: RewriteTablePathParams) -> None:
    """Refuse what Java refuses, with Java's messages."""
    if not params.source_prefix:
        raise ValidationError(f"Source prefix('{params.source_prefix}') cannot be empty.")
    if not params.target_prefix:
        raise ValidationError(f"Target prefix('{params.target_prefix}') cannot be empty.")
    if params.source_prefix == params.target_prefix:
        raise ValidationError(f"Source prefix cannot be the same as target prefix ({params.source_prefix})")
    for label, value in (("Start", params.start_version), ("End", params.end_version)):
        if value is not None and not value.strip():
            raise ValidationError(f"{label} version('{value}') cannot be empty.")
    if params.staging_location is not None and not params.staging_location.strip():
        raise ValidationError(f"Staging location('{params.staging_location}') cannot be empty.")


@dataclass(frozen=True, slots=True)
class RewriteTablePathResult:
    """What the procedure reports, plus the staging folder and the copy plan itself."""

    latest_version: str
    file_list_location: str
    staging_location: str
    rewritten_manifest_file_paths_count: int
    rewritten_delete_file_paths_count: int
    copy_plan: tuple[tuple[str, str], ...] = ()


# ----------------------------------------------------------------------------------------------- paths
def maybe_append_separator(path: str) -> str:
    """``path`` ending in ``/``."""
    return path if path.endswith(SEPARATOR) else path + SEPARATOR


def relativize(path: str, prefix: str) -> str:
    """The part of ``path`` after ``prefix`` ('' for the prefix itself); both may end in ``/`` or not."""
    root = maybe_append_separator(prefix)
    normalized = maybe_append_separator(path)
    if not normalized.startswith(root):
        raise ValidationError(
            f"Path {normalized} does not start with {root}: every path of the table must be under the "
            "source_prefix; pass the prefix the table's files share"
        )
    return "" if normalized == root else path[len(root):]


def _combine(base: str, relative: str) -> str:
    return base if not relative else maybe_append_separator(base) + relative


def new_path(path: str, source_prefix: str, target_prefix: str) -> str:
    """``path`` with ``source_prefix`` replaced by ``target_prefix``."""
    return _combine(target_prefix, relativize(path, source_prefix))


def staging_path(path: str, source_prefix: str, staging_dir: str) -> str:
    """Where the rewritten copy of ``path`` is staged: its path relative to the source prefix, below
    the staging folder (so files of the same name in different folders do not collide)."""
    return _combine(staging_dir, relativize(path, source_prefix))


def file_name(path: str) -> str:
    """The last segment of ``path``."""
    return path.rsplit(SEPARATOR, 1)[-1]


def metadata_dir(metadata_location: str) -> str:
    """The folder of a metadata file, with a trailing ``/``."""
    cut = metadata_location.rfind(SEPARATOR)
    if cut <= 0:
        raise ValidationError(f"Failed to get the metadata file root directory of {metadata_location}")
    return metadata_location[:cut + 1]


def default_staging_location(metadata_location: str, token: str) -> str:
    """Java's default: ``copy-table-staging-<token>/`` next to the current metadata file."""
    return f"{metadata_dir(metadata_location)}copy-table-staging-{token}{SEPARATOR}"


def _under(path: str, prefix: str, message: str) -> None:
    if not path.startswith(prefix):
        raise ValidationError(message)


# ------------------------------------------------------------------------------------------ versions
def resolve_version(md: TableMetadata, metadata_location: str, version: str, exists: Callable[[str], bool]) -> str:
    """The metadata file named ``version`` (a file name) among the current file and the metadata log."""
    found = metadata_location if file_name(metadata_location) == version else None
    for entry in md.metadata_log:
        if file_name(entry.metadata_file) == version:
            found = entry.metadata_file
    if found is None:
        raise ValidationError(
            f"Cannot find provided version file {version} in metadata log. Pass the file name of the current "
            "metadata file or of one in the table's metadata log (e.g. v3.metadata.json)"
        )
    if not exists(found):
        raise ValidationError(f"Version file {found} does not exist.")
    return found


def _properties(props: Mapping[str, str], source: str, target: str) -> dict[str, str]:
    out = dict(props)
    for key in PATH_PROPERTIES:
        if key in out:
            out[key] = new_path(out[key], source, target)
    return out


def replace_paths(md: TableMetadata, source: str, target: str) -> TableMetadata:
    """``md`` with every path it holds moved from ``source`` to ``target``: the location, path
    properties, snapshots' manifest lists, the metadata log and the statistics files."""
    snapshots = tuple(
        s if s.manifest_list is None else dataclasses.replace(s, manifest_list=new_path(s.manifest_list, source, target))
        for s in md.snapshots
    )
    return dataclasses.replace(
        md,
        location=new_path(md.location, source, target),
        properties=_properties(md.properties, source, target),
        snapshots=snapshots,
        metadata_log=tuple(MetadataLogEntry(e.timestamp_ms, new_path(e.metadata_file, source, target))
                           for e in md.metadata_log),
        statistics=tuple(dataclasses.replace(s, statistics_path=new_path(s.statistics_path, source, target))
                         for s in md.statistics),
        partition_statistics=tuple(
            dataclasses.replace(s, statistics_path=new_path(s.statistics_path, source, target))
            for s in md.partition_statistics
        ),
    )


# ----------------------------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class TablePathPlan:
    """Everything decided before a file is written.

    ``versions`` are ``(path, metadata, rewritten metadata)`` from the end version back to (not
    including) the start version; ``delta_ids`` the snapshots new in the range (None for a full
    rewrite: every live content file is copied); ``snapshots`` those whose manifest lists are
    restaged; ``manifest_lists`` their rows by manifest-list path; ``manifests`` the manifests to
    restage, by path.
    """

    params: RewriteTablePathParams
    staging: str
    end_location: str
    end: TableMetadata
    versions: tuple[tuple[str, TableMetadata, TableMetadata], ...]
    delta_ids: frozenset[int] | None
    snapshots: tuple[Snapshot, ...]
    manifest_lists: dict[str, list[ManifestFile]]
    manifests: dict[str, ManifestFile]


def _version_chain(io: FileAccess, end_location: str, end: TableMetadata, start_location: str | None,
                   exists: Callable[[str], bool]) -> list[tuple[str, TableMetadata]]:
    chain = [(end_location, end)]
    for entry in reversed(end.metadata_log):
        path = entry.metadata_file
        if path == start_location:
            break
        if not exists(path):
            raise ValidationError(f"Version file {path} doesn't exist")
        chain.append((path, read_table_metadata(io, path)))
    return chain


def _read_list(io: FileAccess, path: str) -> list[ManifestFile]:
    try:
        return read_manifest_list(io, path)
    except (InvalidMetadataError, OSError) as e:
        raise ValidationError(
            "Unable to build the manifest files dataframe. The end version in use may contain invalid snapshots. "
            f"Please choose an earlier version without invalid snapshots. ({path}: {e})"
        ) from e


def plan_table_path(io: FileAccess, md: TableMetadata, metadata_location: str, params: RewriteTablePathParams,
                    staging: str) -> TablePathPlan:
    """Resolve the versions, rewrite their metadata in memory (refusing paths outside the source
    prefix) and choose the snapshots and manifests to restage.  Reads, never writes."""
    exists = io.exists
    source, target = params.source_prefix, params.target_prefix
    end_location = (metadata_location if params.end_version is None
                    else resolve_version(md, metadata_location, params.end_version, exists))
    start_location = (None if params.start_version is None
                      else resolve_version(md, metadata_location, params.start_version, exists))
    end = md if end_location == metadata_location else read_table_metadata(io, end_location)
    start = None if start_location is None else read_table_metadata(io, start_location)
    chain = _version_chain(io, end_location, end, start_location, exists)
    versions = tuple((path, m, replace_paths(m, source, target)) for path, m in chain)
    start_ids = frozenset(s.snapshot_id for s in start.snapshots) if start is not None else frozenset()
    delta_ids = None if start is None else frozenset(
        s.snapshot_id for _, m, _ in versions for s in m.snapshots if s.snapshot_id not in start_ids)
    lists: dict[str, list[ManifestFile]] = {}
    for s in end.snapshots:
        if s.manifest_list is not None and s.manifest_list not in lists:
            lists[s.manifest_list] = _read_list(io, s.manifest_list)
    snapshots = tuple(s for s in end.snapshots if s.snapshot_id not in start_ids and s.manifest_list is not None)
    manifests: dict[str, ManifestFile] = {}
    for s in snapshots:
        for m in lists[s.manifest_list]:
            _under(m.manifest_path, source,
                   f"Encountered manifest file {m.manifest_path} not under the source prefix {source}")
            if delta_ids is None or m.added_snapshot_id in delta_ids:
                manifests.setdefault(m.manifest_path, m)
    return TablePathPlan(params, staging, end_location, end, versions, delta_ids, snapshots,
                         {s.manifest_list: lists[s.manifest_list] for s in snapshots}, manifests)


def _stage(plan: TablePathPlan, path: str) -> str:
    return staging_path(path, plan.params.source_prefix, plan.staging)


def _target(plan: TablePathPlan, path: str) -> str:
    return new_path(path, plan.params.source_prefix, plan.params.target_prefix)


def staged_paths(plan: TablePathPlan, delete_files: Iterable[DataFile] = ()) -> list[str]:
    """Every file the rewrite may write below the staging folder (what a failed run removes)."""
    paths = [_stage(plan, p) for p, _, _ in plan.versions]
    paths += [_stage(plan, s.manifest_list) for s in plan.snapshots]
    paths += [_stage(plan, p) for p in plan.manifests]
    paths += [_stage(plan, f.file_path) for f in delete_files]
    paths.append(plan.staging + FILE_LIST)
    return paths


def check_staging(plan: TablePathPlan, delete_files: Iterable[DataFile] = ()) -> None:
    """Refuse a staging location whose copies would land on the table's own files (a staging
    location equal to the source prefix would overwrite the table's metadata in place)."""
    source = plan.params.source_prefix
    if maybe_append_separator(plan.staging) == maybe_append_separator(source):
        raise ValidationError(
            f"Staging location {plan.staging} is the source prefix: the rewritten metadata would overwrite the "
            "table's own files. Pass a staging_location outside the table (or leave it unset)"
        )
    originals = {p for p, _, _ in plan.versions} | {s.manifest_list for s in plan.snapshots} | set(plan.manifests)
    originals.update(f.file_path for f in delete_files)
    clash = sorted(originals.intersection(staged_paths(plan, delete_files)))
    if clash:
        raise ValidationError(
            f"Staging location {plan.staging} would overwrite the table's file {clash[0]}; pass a staging_location "
            "that holds none of the table's files"
        )


def check_staging_location(staging: str, tables: Iterable[tuple[str, str]]) -> None:
    """Refuse a staging folder inside the folder of any table: ``tables`` are ``(table name, folder)``
    pairs (every table the catalog knows, the source table's included).  The folders are compared
    after normalisation (``file:``, ``/./``, ``//``, ``..`` and percent-escapes) and, for local
    paths, once symlinks are resolved: either way inside is refused."""
    for name, folder in tables:
        if is_within(folder, staging) or is_within(resolved(folder), resolved(staging)):
            raise ValidationError(
                f"Staging location {staging} lies inside the folder {folder} of table {name}: staged files must "
                "never land among a table's files. Pass a staging_location outside every table (or leave it unset "
                "for a new folder next to the current metadata file)"
            )


def check_staged_files(staging: str, staged: Iterable[str], existing: Iterable[str]) -> None:
    """Refuse before anything is written when a staged copy would not land in a new file of the
    staging folder: a staged path outside it (a table path climbing out of the source prefix with
    ``..``), a staging folder already holding table metadata (``*.metadata.json``,
    ``version-hint.text``: a table's, or an earlier run's), or an existing file at a staged path.
    ``existing`` are the files already below the staging folder."""
    staged = list(staged)
    escaped = [p for p in staged if not is_within(staging, p)]
    if escaped:
        raise ValidationError(
            f"Cannot stage {escaped[0]}: it is not inside the staging location {staging} (a path of the table "
            "climbs out of the source prefix); pass a source_prefix that holds every path of the table as written"
        )
    existing = list(existing)
    metadata = sorted(p for p in existing if is_table_metadata_file(p))
    if metadata:
        raise ValidationError(
            f"Staging location {staging} already holds table metadata ({metadata[0]}): staged files are never "
            "written over existing ones. Pass a new or empty staging_location"
        )
    present = PathSet(existing)
    clash = sorted(p for p in staged if p in present)
    if clash:
        raise ValidationError(
            f"Staging location {staging} already holds {clash[0]}, which this rewrite would stage: staged files are "
            "never written over existing ones. Pass a new or empty staging_location"
        )


def write_version_files(io: FileAccess, plan: TablePathPlan) -> None:
    """Stage the rewritten metadata file of every version in range (create-only)."""
    for path, _, rewritten in plan.versions:
        write_table_metadata(io, _stage(plan, path), rewritten, overwrite=False)


# ---------------------------------------------------------------------------------------- manifests
def position_deletes_to_rewrite(io: FileAccess, plan: TablePathPlan, specs: Mapping[int, Any]) -> list[DataFile]:
    """Distinct live position delete files (and DVs) of the delete manifests to restage: their
    contents name data files, so they are rewritten too."""
    seen: dict[tuple, DataFile] = {}
    for m in plan.manifests.values():
        if m.content != ManifestContent.DELETES:
            continue
        for e in read_manifest(io, m, specs=specs, skip_deleted=True):
            f = e.data_file
            if f.content == FileContent.POSITION_DELETES:
                seen.setdefault((f.file_path, f.content_offset, f.content_size_in_bytes), f)
    return list(seen.values())


@dataclass(frozen=True, slots=True)
class ManifestRewrite:
    """A restaged manifest: its source path, staged length and the content files to copy."""

    manifest_path: str
    length: int
    copy_plan: tuple[tuple[str, str], ...]


def _path_bound(value: bytes | None) -> str | None:
    return None if value is None else from_bytes(value, STRING)


def _moved_bounds(f: DataFile, source: str, target: str) -> tuple[dict | None, dict | None]:
    """Position delete metrics with the ``file_path`` bound moved when lower and upper agree (a
    file-scoped delete, where readers use it) and dropped otherwise, as Java does."""
    lower = dict(f.lower_bounds) if f.lower_bounds is not None else None
    upper = dict(f.upper_bounds) if f.upper_bounds is not None else None
    lo = _path_bound((lower or {}).get(DELETE_FILE_PATH_ID))
    hi = _path_bound((upper or {}).get(DELETE_FILE_PATH_ID))
    if lo is not None and lo == hi and lo.startswith(source):
        moved = to_bytes(new_path(lo, source, target), STRING)
        lower[DELETE_FILE_PATH_ID] = moved
        upper[DELETE_FILE_PATH_ID] = moved
    else:
        for bounds in (lower, upper):
            if bounds is not None:
                bounds.pop(DELETE_FILE_PATH_ID, None)
    return lower, upper


def _moved_file(f: DataFile, source: str, target: str, delete_sizes: Mapping[str, int]) -> DataFile:
    path = f.file_path
    if f.content == FileContent.DATA:
        _under(path, source, f"Encountered data file {path} not under the source prefix {source}")
        return dataclasses.replace(f, file_path=new_path(path, source, target))
    if f.content == FileContent.EQUALITY_DELETES:
        _under(path, source, f"Expected delete file to be under the source prefix: {source} but was {path}")
        return dataclasses.replace(f, file_path=new_path(path, source, target))
    _under(path, source, f"Expected delete file {path} to start with prefix: {source}")
    lower, upper = _moved_bounds(f, source, target)
    ref = f.referenced_data_file
    if ref is not None and ref.startswith(source):
        ref = new_path(ref, source, target)
    return dataclasses.replace(
        f, file_path=new_path(path, source, target), file_size_in_bytes=delete_sizes.get(path, f.file_size_in_bytes),
        lower_bounds=lower, upper_bounds=upper, referenced_data_file=ref,
    )


def rewrite_manifest(io: FileAccess, manifest: ManifestFile, output_path: str, *, format_version: int, specs: Mapping[int, Any],
                     schema: Any, source: str, target: str, staging: str, delta_ids: frozenset[int] | None,
                     delete_sizes: Mapping[str, int]) -> ManifestRewrite:
    """Write ``manifest`` with every file path moved to ``target`` at ``output_path`` (a new file: an
    existing one is never replaced) and list the live content files to copy: those added by a snapshot of the
    range (every live one in a full rewrite).  Position delete files are copied from their staged
    rewrite, data and equality delete files from where they are."""
    spec = specs.get(manifest.partition_spec_id)
    if spec is None:
        raise InvalidMetadataError(f"manifest uses unknown partition spec {manifest.partition_spec_id}",
                                   location=manifest.manifest_path)
    plan: list[tuple[str, str]] = []
    writer = ManifestWriter(io, output_path, spec, schema, format_version, manifest.content,
                            manifest.added_snapshot_id)
    for e in read_manifest(io, manifest, specs=specs):
        f = e.data_file
        moved = _moved_file(f, source, target, delete_sizes)
        writer.add_entry(ManifestEntry(e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number, moved))
        if e.is_live and (delta_ids is None or e.snapshot_id in delta_ids):
            origin = (staging_path(f.file_path, source, staging) if f.content == FileContent.POSITION_DELETES
                      else f.file_path)
            plan.append((origin, moved.file_path))
    written = writer.close()
    return ManifestRewrite(manifest.manifest_path, written.manifest_length, tuple(plan))


def write_manifest_lists(io: FileAccess, plan: TablePathPlan, lengths: Mapping[str, int]) -> None:
    """Stage the manifest list of every restaged snapshot, manifests moved to the target prefix
    (with their restaged lengths where this run rewrote them)."""
    source, target = plan.params.source_prefix, plan.params.target_prefix
    fv = plan.end.format_version
    for s in plan.snapshots:
        rows = [dataclasses.replace(m, manifest_path=new_path(m.manifest_path, source, target),
                                    manifest_length=lengths.get(m.manifest_path, m.manifest_length))
                for m in plan.manifest_lists[s.manifest_list]]
        write_manifest_list(io, _stage(plan, s.manifest_list), fv, s.snapshot_id,
                            s.parent_snapshot_id, s.sequence_number, s.first_row_id, rows)


def copy_plan(plan: TablePathPlan, rewrites: Sequence[ManifestRewrite]) -> list[tuple[str, str]]:
    """Every ``(source, target)`` to copy, sorted: staged metadata files, manifest lists and
    manifests; statistics files; content files added in range."""
    pairs: set[tuple[str, str]] = set()
    for path, m, _ in plan.versions:
        pairs.add((_stage(plan, path), _target(plan, path)))
        for s in m.statistics:
            pairs.add((s.statistics_path, _target(plan, s.statistics_path)))
        for s in m.partition_statistics:
            pairs.add((s.statistics_path, _target(plan, s.statistics_path)))
    for s in plan.snapshots:
        pairs.add((_stage(plan, s.manifest_list), _target(plan, s.manifest_list)))
    for p in plan.manifests:
        pairs.add((_stage(plan, p), _target(plan, p)))
    for r in rewrites:
        pairs.update(r.copy_plan)
    return sorted(pairs)


def file_list_text(pairs: Iterable[tuple[str, str]]) -> str:
    """The copy plan as Java writes it: ``source,target`` lines."""
    return "".join(f"{src},{dst}\n" for src, dst in pairs)


# ----------------------------------------------------------------------------------------- capability
@dataclass(frozen=True, slots=True)
class RelocationPlan:
    """The validated parameters.  What is restaged (:class:`TablePathPlan`) is planned in
    :func:`execute`: it reads the metadata versions and manifest lists of the range."""

    params: RewriteTablePathParams


def plan(metadata: TableMetadata, params: RewriteTablePathParams) -> RelocationPlan:
    """Validate the parameters once (:func:`check_params`)."""
    check_params(params)
    return RelocationPlan(params)


def _staging(table: Any, params: RewriteTablePathParams) -> str:
    if params.staging_location is None:
        return default_staging_location(table.metadata_location, str(uuid.uuid4()))
    staging = maybe_append_separator(params.staging_location)
    bare = staging.rstrip("/")
    if bare and table.io.exists(bare) and not table.io.is_dir(bare):
        raise ValidationError(f"Staging location {params.staging_location} is a file; pass a folder")
    return staging


def _remove_staged(io: FileAccess, paths: Sequence[str]) -> None:
    for p in paths:
        try:
            io.delete(p)
        except Exception as e:  # noqa: BLE001 -- cleanup after a failure must not hide it
            log.warning("rewrite_table_path: could not remove staged file %s: %s", p, e)


def execute(table: Any, plan: RelocationPlan, engine: TableRelocationEngine) -> RewriteTablePathResult:
    """Stage ``table``'s metadata with paths moved from the source to the target prefix and write the
    copy plan; see the module docstring for the order of work and the staging rules."""
    params = plan.params
    md, io = table.metadata, table.io
    staging = _staging(table, params)
    path_plan = plan_table_path(io, md, table.metadata_location, params, staging)
    specs = md.specs_by_id
    source, target = params.source_prefix, params.target_prefix
    deletes = position_deletes_to_rewrite(io, path_plan, specs)
    check_staging(path_plan, deletes)
    existing: list[str] = []
    if params.staging_location is not None:
        # the default folder is new (a fresh uuid); a folder the caller names may be anything
        check_staging_location(staging, engine.catalog_folders(table))
        existing = [f.path for f in io.list_prefix(staging)]
    check_staged_files(staging, staged_paths(path_plan, deletes), existing)
    in_tasks = engine.relocate_in_tasks(list(path_plan.manifests.values()))
    try:
        with engine.job(f"rewrite_table_path: stage {len(path_plan.versions)} metadata files of "
                              f"{table.identifier}"):
            write_version_files(io, path_plan)
        items = [(f, staging_path(f.file_path, source, staging), source, target)
                 for f in {f.file_path: f for f in deletes}.values()]
        sizes = engine.rewrite_delete_files(io, items, in_tasks)
        kwargs = {"format_version": path_plan.end.format_version, "specs": specs, "schema": md.schema(),
                  "source": source, "target": target, "staging": staging, "delta_ids": path_plan.delta_ids,
                  "delete_sizes": sizes}
        manifests = [(m, staging_path(p, source, staging), kwargs) for p, m in sorted(path_plan.manifests.items())]
        rewrites = engine.rewrite_manifest_paths(io, manifests, in_tasks)
        write_manifest_lists(io, path_plan, {r.manifest_path: r.length for r in rewrites})
        pairs = copy_plan(path_plan, rewrites)
        file_list = NOT_APPLICABLE
        if params.create_file_list:
            file_list = staging + FILE_LIST
            io.write(file_list, file_list_text(pairs).encode("utf-8"), overwrite=False)
    except BaseException as e:
        # a file that appeared at a staged path after the checks (create-only refused it: the
        # FileIO's FileExistsError names it) is not ours
        clash = getattr(e, "path", None) if isinstance(e, FileExistsError) else None
        _remove_staged(io, [p for p in staged_paths(path_plan, deletes) if p != clash])
        raise
    return RewriteTablePathResult(
        latest_version=file_name(path_plan.end_location),
        file_list_location=file_list,
        staging_location=staging,
        rewritten_manifest_file_paths_count=len(path_plan.manifests),
        rewritten_delete_file_paths_count=len(deletes),
        copy_plan=tuple(pairs),
    )


#: the capability as the Spark action runs it
REWRITE_TABLE_PATH: Capability[RewriteTablePathParams, RelocationPlan, RewriteTablePathResult] = Capability(
    "rewrite_table_path", plan, execute)
