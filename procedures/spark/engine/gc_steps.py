"""The garbage-collection steps of :class:`~procedures.spark.engine.spark_engine.SparkEngine`
(:class:`procedures.core.gc.gc_engine.GcEngine`) on Spark through the DataFrame API -- and on the
driver alone when there is no session, so expire_snapshots and remove_orphan_files run without
Spark too.

Large inputs become Spark jobs (:mod:`procedures.spark.listing`): the content comparison of expire
when the manifests pass the driver's limits (:func:`procedures.core.gc.reachability.use_spark`),
the manifest lists of a table of many snapshots, the part of a directory tree the driver does not
walk itself, a ``file_list_view``, and the join of actual and valid files.  The frames a run reads
more than once are persisted until its :meth:`GcSteps.job` closes.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

from procedures.catalog.overlap import neighbours
from procedures.core.gc import reachability
from procedures.core.gc.gc_engine import EngineManifests, EngineRows, Listing, ValidFiles
from procedures.core.gc.hidden_paths import HiddenPathFilter
from procedures.core.gc.orphans import CONFLICTS, format_pairs
from procedures.core.kernel.table_overlap import TableFolders
from procedures.errors import ValidationError
from procedures.io.directory_walk import list_with_prefix, modified_before, walk
from procedures.spark import listing as spark_listing
from procedures.spark.dataframes import functions
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.model import ManifestFile
from procedures.spec.metadata import TableMetadata

__all__ = ["GcSteps", "DRIVER_MAX_DIRS", "DRIVER_MAX_FILES", "DRIVER_MIN_HANDED_DIRS"]

#: directories the driver lists before handing the rest of the tree to Spark tasks
DRIVER_MAX_DIRS = 64
#: files the driver's part of the listing holds at most (it hands the rest of the tree over once past
#: it), so the driver's memory does not follow the size of the first directories
DRIVER_MAX_FILES = 10_000
#: directories left for Spark tasks before the file limit stops the driver's walk (a table's
#: metadata folder listed first must not leave the whole data tree to one task)
DRIVER_MIN_HANDED_DIRS = 16


class GcSteps:
    """:class:`~procedures.core.gc.gc_engine.GcEngine` on ``spark`` (None: everything on the driver)."""

    spark: Any
    keep: spark_listing.FrameKeeper

    def neighbours(self, table: Any) -> tuple[Sequence[TableFolders], str | None]:
        """The catalog's other tables' folders and its warehouse root."""
        return neighbours(table)

    def unreached_content(self, io: FileAccess, candidates: Sequence[ManifestFile],
                          retained: Sequence[ManifestFile]) -> EngineRows | None:
        """A Spark job when the manifests pass the driver's limits; each side read once (kept)."""
        if not reachability.use_spark(self.spark, [*candidates, *retained]):
            return None
        props = dict(io.properties)
        return spark_listing.unreached_paths(
            self.keep(spark_listing.manifest_content_dataframe(self.spark, props, list(candidates))),
            self.keep(spark_listing.manifest_content_dataframe(self.spark, props, list(retained))))

    def materialize(self, rows: EngineRows) -> None:
        """Spark is lazy: run the reads now, kept for what follows."""
        self.keep(rows).count()

    def iterate(self, rows: EngineRows, *, prefetch: bool) -> Iterator[tuple[Any, ...]]:
        """A partition at a time (``toLocalIterator``), so the driver never holds every row."""
        for row in rows.toLocalIterator(prefetchPartitions=prefetch):
            yield tuple(row)

    def valid_content(self, io: FileAccess, manifests: Sequence[ManifestFile], schemes: Mapping[str, str],
                      auths: Mapping[str, str]) -> EngineRows | None:
        """The content files as normalised keys (:data:`procedures.spark.listing.VALID_KEYS`) in
        Spark when the manifests pass the driver's limits."""
        if not reachability.use_spark(self.spark, manifests):
            return None
        return spark_listing.valid_keys_dataframe(self.spark, dict(io.properties), list(manifests),
                                                  dict(schemes), dict(auths))

    def engine_manifests(self, io: FileAccess, md: TableMetadata, schemes: Mapping[str, str],
                         auths: Mapping[str, str]) -> EngineManifests | None:
        """For many or large lists (:func:`~procedures.core.gc.reachability.lists_in_engine`) the
        manifests read in Spark tasks and kept there, persisted: they feed the valid keys and, when
        the table changes during the run, the delete guard."""
        if self.spark is None or not reachability.lists_in_engine(io, md):
            return None
        props = dict(io.properties)
        manifests = self.keep(spark_listing.manifest_rows_dataframe(self.spark, props, md))

        def manifest_paths() -> Iterator[str]:
            return (r[0] for r in manifests.select("manifest_path").toLocalIterator())

        return EngineManifests(spark_listing.manifest_keys_dataframe(manifests, props, dict(schemes), dict(auths)),
                               manifest_paths)

    def list_files(self, io: FileAccess, location: str, older_than: int | None, path_filter: HiddenPathFilter, *,
                   prefix_listing: bool, file_list_view: str | None, schemes: Mapping[str, str],
                   auths: Mapping[str, str]) -> Listing:
        """The view's rows, the FileIO's prefix listing, or a walk of the tree: the driver walks the
        top, Spark tasks list the directories it hands over."""
        if file_list_view is not None:
            if self.spark is None:
                raise ValidationError(f"file_list_view {file_list_view!r} needs a Spark session to be read")
            assert older_than is not None  # a view is never a local walk, whose cutoff is deferred
            return Listing([], view=self._view_files(file_list_view, location, older_than))
        if prefix_listing:
            return Listing(list_with_prefix(io, location, older_than, path_filter))
        if self.spark is None:
            return Listing(walk([location], older_than, path_filter, io=io)[0])
        files, pending = walk([location], older_than, path_filter, max_dirs=DRIVER_MAX_DIRS,
                              max_files=DRIVER_MAX_FILES, min_pending=DRIVER_MIN_HANDED_DIRS, io=io)
        return Listing(files, tuple(pending), older_than=older_than, partition_prefixes=path_filter.partition_prefixes,
                       io_properties=dict(getattr(io, "properties", {}) or {}))

    def modified_before(self, io: FileAccess, paths: Sequence[str], older_than: int) -> Sequence[bool]:
        """A ``stat`` per path on the driver (:func:`procedures.io.directory_walk.modified_before`)."""
        return modified_before(paths, older_than, io)

    def _view_files(self, view: str, location: str, older_than: int) -> Any:
        from pyspark.sql import types as sql_types  # noqa: PLC0415 -- pyspark only with a session

        sql = functions(self.spark)
        df = self.spark.table(view)
        fields = {f.name: f.dataType for f in df.schema.fields}
        for col, kind, want in (("file_path", "string", sql_types.StringType),
                                ("last_modified", "timestamp", sql_types.TimestampType)):
            if col not in fields:
                raise ValidationError(
                    f"Invalid file_list_view {view}: it has no {col} column (columns: {', '.join(fields)})"
                )
            if not isinstance(fields[col], want):
                raise ValidationError(f"Invalid {col} column: {fields[col].simpleString()} is not a {kind}")
        young = df.where(sql.col("last_modified") < sql.expr(f"timestamp_micros({int(older_than) * 1000})"))
        # the view may list any spelling of any folder: keep what lies inside the location once normalised
        return spark_listing.within_dataframe(young.select("file_path"), "file_path", location)

    def match_orphans(self, listing: Listing, valid: ValidFiles, schemes: Mapping[str, str],
                      auths: Mapping[str, str], mode: str, *, stream: bool,
                      older_than: int | None) -> Iterator[str]:
        """A Spark join of the actual and the valid keys (:func:`procedures.spark.listing.find_orphans_dataframe`)."""
        if listing.view is not None:
            actual = spark_listing.uri_frame(self.keep(listing.view), "file_path", dict(schemes), dict(auths))
        else:
            actual = spark_listing.listed_keys_dataframe(
                self.spark, listing.files, list(listing.pending), listing.older_than, listing.partition_prefixes,
                dict(listing.io_properties), dict(schemes), dict(auths))
        known = spark_listing.driver_keys_dataframe(self.spark, valid.paths, dict(schemes), dict(auths), actual=False)
        if valid.content_frame is not None:
            known = known.unionByName(valid.content_frame)
        orphans, conflicts = spark_listing.find_orphans_dataframe(actual, known, mode, self.keep, older_than)
        if conflicts:
            raise ValidationError(CONFLICTS.format(format_pairs(conflicts)))
        rows = orphans.toLocalIterator() if stream else iter(orphans.collect())
        return (r[0] for r in rows)
