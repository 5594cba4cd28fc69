"""The Spark steps of the ``table_relocation`` capability (:class:`TableRelocationSteps`, the Spark
side of :class:`procedures.core.table_relocation.table_relocation_engine.TableRelocationEngine`): position delete
files and manifests of ``rewrite_table_path`` rewritten one per Spark task when there are enough
manifests to be worth a job (the size rule of :func:`procedures.core.gc.reachability.use_spark`),
otherwise on driver threads.
"""

from __future__ import annotations

import functools
import logging
import pickle
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

import pyarrow as pa

from procedures.catalog.locations import catalog_table_folders
from procedures.core.gc.delete_guard import table_roots
from procedures.core.gc.reachability import use_spark
from procedures.core.table_relocation.relocation import ManifestRewrite, new_path, rewrite_manifest
from procedures.errors import ValidationError
from procedures.io.fileio import FileIO
from procedures.io.path_rewrite import rewrite_delete_file_paths
from procedures.spark.dataframes import slices_frame, struct_schema
from procedures.spark.session import optional_job
from procedures.spark.worker import prepare_python_worker
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.model import DataFile, ManifestFile

__all__ = ["TableRelocationSteps", "DRIVER_THREADS"]

log = logging.getLogger(__name__)

#: driver threads rewriting manifests and delete files when no Spark job is used
DRIVER_THREADS = 4


def _moved_reference(source: str, target: str, path: str) -> str:
    if not path.startswith(source):
        raise ValidationError(f"Expected delete file to be under the source prefix: {source} but was {path}")
    return new_path(path, source, target)


def _rewrite_delete(io: FileAccess, item: tuple[DataFile, str, str, str]) -> tuple[str, int]:
    delete_file, output, source, target = item
    size = rewrite_delete_file_paths(io, delete_file, output, functools.partial(_moved_reference, source, target))
    return delete_file.file_path, size


def _rewrite_one_manifest(io: FileAccess, item: tuple[ManifestFile, str, dict]) -> ManifestRewrite:
    manifest, output, kwargs = item
    return rewrite_manifest(io, manifest, output, **kwargs)


def _run(spark: Any, io: FileAccess, distributed: bool, items: Sequence[Any], fn: Callable[[Any, Any], Any],
         description: str) -> list[Any]:
    """``fn(io, item)`` for every item: one Spark task each when ``distributed``, else driver threads."""
    if not items:
        return []
    if not distributed:
        with ThreadPoolExecutor(max_workers=min(DRIVER_THREADS, len(items))) as pool:
            return list(pool.map(lambda item: fn(io, item), items))
    props = dict(getattr(io, "properties", {}) or {})

    def run(batches: Any) -> Any:
        prepare_python_worker()
        task_io = FileIO(props)
        for b in batches:
            out = [pickle.dumps(fn(task_io, pickle.loads(raw)), protocol=pickle.HIGHEST_PROTOCOL)
                   for raw in b.column(0).to_pylist()]
            yield pa.RecordBatch.from_arrays([pa.array(out, pa.binary())], names=["result"])

    with optional_job(spark, description):
        rows = slices_frame(spark, list(items)).mapInArrow(run, struct_schema("result binary")).collect()
    return [pickle.loads(r.result) for r in rows]


class TableRelocationSteps:
    """:class:`~procedures.core.table_relocation.table_relocation_engine.TableRelocationEngine` on ``self.spark``
    (None: on the driver)."""

    spark: Any

    def catalog_folders(self, table: Any) -> list[tuple[str, str]]:
        """``(table name, folder)`` of the source table and of every table its catalog knows."""
        own = [(table.name, root) for root in table_roots(table.metadata)]
        catalog = getattr(table, "catalog", None)
        return own + (catalog_table_folders(catalog) if catalog is not None else [])

    def relocate_in_tasks(self, manifests: Sequence[ManifestFile]) -> bool:
        """Spark tasks past the driver's manifest limits."""
        return use_spark(self.spark, manifests)

    def rewrite_delete_files(self, io: FileAccess, items: Sequence[tuple[DataFile, str, str, str]],
                             in_tasks: bool) -> dict[str, int]:
        """Delete files rewritten with their referenced paths moved; new sizes by original path."""
        return dict(_run(self.spark, io, in_tasks, items, _rewrite_delete,
                         f"rewrite_table_path: rewrite {len(items)} position delete files"))

    def rewrite_manifest_paths(self, io: FileAccess, items: Sequence[tuple[ManifestFile, str, dict]],
                               in_tasks: bool) -> list[ManifestRewrite]:
        """Manifests rewritten with their paths moved."""
        return _run(self.spark, io, in_tasks, items, _rewrite_one_manifest,
                    f"rewrite_table_path: rewrite {len(items)} manifests")
