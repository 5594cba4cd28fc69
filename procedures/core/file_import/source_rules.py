"""The engine-free rules of ``add_files`` (procedures.md §3.11; Iceberg Java 1.10's
``AddFilesProcedure`` and ``SparkTableUtil`` import).

* :func:`source_kind` tells a path import (`` `parquet`.`/dir` ``) from a session-catalog table;
* :func:`check_partition_filter` refuses a ``partition_filter`` the target cannot use;
* :func:`match_identity_spec` finds the all-identity partition spec of the target whose field names
  are the source's partition columns (case-insensitively, in order);
* :func:`partition_tuple` converts a source partition's strings to the spec's types;
* :func:`filter_partitions` keeps the partitions whose values hold every filter entry;
* :func:`name_mapping_change` is the property change that gives the target a name mapping;
* :func:`duplicate_error` is the refusal naming files the table already has;
* :class:`AddFiles` is the append itself, with Java's summary: files added through manifests
  (every partitioned import, and every path import) count only files and records and no
  partitions when the table inherits snapshot ids (format v2+), as Java's appended manifests do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from procedures.core.kernel import updates as metadata_updates
from procedures.core.kernel.operations import MergeAppend
from procedures.core.kernel.properties import DEFAULT_NAME_MAPPING, SNAPSHOT_ID_INHERITANCE_ENABLED
from procedures.core.kernel.summary import SummaryBuilder
from procedures.core.kernel.transaction import CommitContext, MetadataChange
from procedures.errors import DuplicateFilesError, UnsupportedFileFormatError, ValidationError
from procedures.spec.manifest.model import DataFile, ManifestFile
from procedures.spec.metadata import TableMetadata
from procedures.spec.name_mapping import (
    NameMapping,
    create_mapping,
    name_mapping_to_json,
    parse_name_mapping,
)
from procedures.spec.partitioning import PartitionSpec, value_from_partition_string
from procedures.spec.transforms import IdentityTransform

__all__ = [
    "PATH_FORMATS",
    "SourcePartition",
    "source_kind",
    "file_format",
    "check_partition_filter",
    "match_identity_spec",
    "partition_tuple",
    "filter_partitions",
    "table_name_mapping",
    "name_mapping_change",
    "duplicate_error",
    "AddFiles",
]

#: the namespaces that make ``source_table`` a path import
PATH_FORMATS = ("parquet", "orc", "avro")

DUPLICATE_FILE_MESSAGE = (
    "Cannot complete import because data files to be imported already exist within the target table: {}.  "
    "This is disabled by default as Iceberg is not designed for multiple references to the same file within "
    "the same table.  If you are sure, you may set 'check_duplicate_files' to false to force the import."
)


@dataclass(frozen=True)
class SourcePartition:
    """One source partition: its ``column -> value string`` pairs (in source order), its
    directory and its file format (``parquet``, ``orc``, ``avro``)."""

    values: tuple[tuple[str, str | None], ...]
    location: str
    file_format: str

    def as_dict(self) -> dict[str, str | None]:
        """The values as a dict."""
        return dict(self.values)


def source_kind(parts: Sequence[str]) -> str | None:
    """The format of a path import (`` `parquet`.`/dir` `` parsed into two parts), else None."""
    if len(parts) == 2 and parts[0].lower() in PATH_FORMATS:
        return parts[0].lower()
    return None


def file_format(serde_or_provider: str) -> str:
    """The import format of a catalog table's serde or provider (Java picks it by substring)."""
    text = serde_or_provider.lower()
    for fmt in PATH_FORMATS:
        if fmt in text:
            return fmt
    raise UnsupportedFileFormatError(f"Unknown partition format: {serde_or_provider}", file_format=serde_or_provider)


def check_partition_filter(table_name: str, spec: PartitionSpec, partition_filter: Mapping[str, str]) -> None:
    """Java's checks of ``partition_filter`` against the target's current spec."""
    names = [f.name for f in spec.fields]
    if spec.fields and partition_filter:
        if len(partition_filter) > len(names):
            raise ValidationError(
                f"Cannot add data files to target table {table_name} because that table is partitioned, "
                f"but the number of columns in the provided partition filter ({len(partition_filter)}) "
                f"is greater than the number of partitioned columns in table ({len(names)})"
            )
        unknown = [k for k in partition_filter if k not in names]
        if unknown:
            raise ValidationError(
                f"Cannot add files to target table {table_name}. {table_name} is partitioned but the specified "
                f"partition filter refers to columns that are not partitioned: [{', '.join(unknown)}] . "
                f"Valid partition columns: [{', '.join(names)}]"
            )
    elif partition_filter:
        raise ValidationError(f"Cannot use partition filter with an unpartitioned table {table_name}")


def match_identity_spec(md: TableMetadata, columns: Sequence[str], table_name: str) -> PartitionSpec:
    """The target spec whose fields are identity transforms named like ``columns`` (case-insensitive,
    same order); the current spec first, then older ones."""
    wanted = [c.lower() for c in columns]
    specs = [md.spec()] + [s for s in md.partition_specs if s.spec_id != md.default_spec_id]
    for spec in specs:
        if [f.name.lower() for f in spec.fields] == wanted and all(isinstance(f.transform, IdentityTransform) for f in spec.fields):
            return spec
    raise ValidationError(
        f"Cannot find a partition spec in Iceberg table {table_name} that matches the partition columns "
        f"([{', '.join(columns)}]) in input table"
    )


def partition_tuple(spec: PartitionSpec, md: TableMetadata, values: Mapping[str, str | None]) -> tuple:
    """The partition tuple of a source partition: each spec field's value, found by name
    (case-insensitively), converted from its string to the source column's type."""
    lowered = {k.lower(): v for k, v in values.items()}
    schema = md.schema()
    out = []
    for f in spec.fields:
        text = lowered.get(f.name.lower())
        source = schema.find_field(f.source_id)
        out.append(value_from_partition_string(text, source.field_type))
    return tuple(out)


def filter_partitions(partitions: Iterable[SourcePartition], partition_filter: Mapping[str, str]) -> list[SourcePartition]:
    """The partitions whose values contain every ``partition_filter`` entry (values compared as strings)."""
    if not partition_filter:
        return list(partitions)
    return [p for p in partitions if all(p.as_dict().get(k) == v for k, v in partition_filter.items())]


def table_name_mapping(md: TableMetadata) -> NameMapping:
    """The table's name mapping, or the one add_files would set (from the current schema)."""
    text = DEFAULT_NAME_MAPPING.read(md.properties)
    return parse_name_mapping(text) if text is not None else create_mapping(md.schema())


def name_mapping_change(md: TableMetadata) -> MetadataChange | None:
    """The property change that sets ``schema.name-mapping.default`` when the table has none."""
    if DEFAULT_NAME_MAPPING.is_set(md.properties):
        return None
    text = name_mapping_to_json(create_mapping(md.schema()))
    return MetadataChange((metadata_updates.SetProperties(((DEFAULT_NAME_MAPPING.key, text),)),))


def duplicate_error(paths: Sequence[str]) -> DuplicateFilesError:
    """The refusal for files already live in the target (up to ten are named)."""
    shown = list(paths)[:10]
    return DuplicateFilesError(DUPLICATE_FILE_MESSAGE.format(",".join(shown)), paths=shown)


class AddFiles(MergeAppend):
    """Append imported files as one ``append`` snapshot.

    ``through_manifests`` mirrors Java's ``appendManifest`` path: when the table inherits
    snapshot ids (format v2+ or ``compatibility.snapshot-id-inheritance.enabled``), the summary
    counts only added files and records (no sizes, no ``changed-partition-count``) and the new
    manifests' entries have null snapshot ids, inherited from the manifest list; otherwise the
    files count like any append.  An import with no files commits an empty append whose
    ``changed-partition-count`` is 0, as Java's does.
    """

    def __init__(self, files: Iterable[DataFile], *, through_manifests: bool, **kwargs) -> None:
        super().__init__(files, **kwargs)
        self.through_manifests = through_manifests

    def new_manifests(self, base: TableMetadata, ctx: CommitContext, summary: SummaryBuilder) -> list[ManifestFile]:
        inherits = base.format_version >= 2 or SNAPSHOT_ID_INHERITANCE_ENABLED.read(base.properties)
        if not self.files:
            summary.set("changed-partition-count", "0")
            return []
        if not (self.through_manifests and inherits):
            return super().new_manifests(base, ctx, summary)
        scratch = SummaryBuilder()
        # Java writes these manifests with no snapshot id and appends them as they are: the
        # entries inherit the snapshot id (and sequence numbers) from the manifest list
        self.inherit_snapshot_id = True
        manifests = super().new_manifests(base, ctx, scratch)
        summary.partitions_known = False
        for key in ("added-data-files", "added-records"):
            if scratch.counts.get(key):
                summary.counts[key] = summary.counts.get(key, 0) + scratch.counts[key]
        return manifests
