"""The engine steps the ``file_import`` capability needs: a typed protocol, implemented once per
engine (Spark: :class:`procedures.spark.engine.file_import_steps.FileImportSteps`).

The capability checks the arguments, matches the source to the target and commits; the engine
resolves the source (a directory walk or a table of the engine's own catalog) and reads each file's
metrics (footers), in tasks when there are many.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from procedures.core.file_import.source_rules import SourcePartition
from procedures.core.file_import.table_creation import SourceTable
from procedures.core.kernel.capability import Committer, JobScope
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.model import DataFile
from procedures.spec.metadata import TableMetadata
from procedures.spec.partitioning import PartitionSpec

__all__ = ["FileImportEngine", "ImportSource"]


@dataclass(frozen=True)
class ImportSource:
    """What was resolved from ``source_table``: partitions, their columns, and how the files are committed."""

    description: str
    columns: tuple[str, ...]
    partitions: list[SourcePartition]
    path_import: bool
    partitioned: bool


class FileImportEngine(Committer, JobScope, Protocol):
    """Engine steps of ``add_files``, ``snapshot`` and ``migrate``."""

    def resolve_import_source(self, io: FileAccess, text: str) -> ImportSource:
        """The source named by ``source_table``: a path import (`` `parquet`.`/dir` ``) or a table
        of the engine's session catalog."""
        ...

    def read_data_files(self, io: FileAccess, md: TableMetadata, spec: PartitionSpec, partitions: Sequence[SourcePartition],
                        parallelism: int, job: str) -> list[DataFile]:
        """The ``DataFile`` of every file directly in ``partitions`` (metrics from the footers);
        ``job`` describes the engine's job, ``{n}`` the file count."""
        ...


    def describe_session_table(self, parts: Sequence[str]) -> SourceTable:
        """The table ``parts`` of the engine's session catalog (NoSuchTableError when missing):
        schema, partition columns, location, provider, properties, buckets."""
        ...

    def session_table_partitions(self, database: str, name: str) -> list[SourcePartition]:
        """The partitions of session-catalog table ``database.name`` (one, its location, when it
        is unpartitioned); a partition in an unknown format is refused (UnsupportedFileFormatError)."""
        ...

    def session_table_exists(self, database: str, name: str) -> bool:
        """Whether the session catalog has table ``database.name``."""
        ...

    def rename_session_table(self, database: str, name: str, new_name: str) -> None:
        """Rename session-catalog table ``database.name`` to ``database.new_name``."""
        ...

    def check_new_table(self, catalog: Any, ident: tuple[str, ...], md: TableMetadata, action: str) -> None:
        """Refuse (ValidationError) to create ``ident`` in ``catalog`` with the folders of ``md``
        when they overlap another table of the catalog or its warehouse root."""
        ...

    def create_table(self, catalog: Any, ident: tuple[str, ...], md: TableMetadata, operations: Sequence[Any]) -> Any:
        """Create ``ident`` in ``catalog`` with ``md`` and ``operations`` committed on it, in one
        commit (nothing is written when it fails); the new table."""
        ...

    def remove_created_table(self, catalog: Any, ident: tuple[str, ...], location: str) -> None:
        """Drop a half-made table: its catalog entry, the metadata files it wrote, and the folders
        at ``location`` it created when they hold nothing else."""
        ...
