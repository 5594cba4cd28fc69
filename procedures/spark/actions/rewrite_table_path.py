"""The ``rewrite_table_path`` action (procedures.md §3.20; Iceberg Java's
``RewriteTablePathSparkAction``): stage copies of a table's metadata with every path moved from
``source_prefix`` to ``target_prefix``, and write the plan of files to copy.  The table is never
changed and no data file is copied.

Order of work: plan on the driver (versions, rewritten metadata, manifests; refusals here write
nothing), stage the metadata files, rewrite the position delete files and DVs (their new sizes go
into the manifests), rewrite the manifests (their new lengths go into the manifest lists), stage
the manifest lists, write the file list.  Delete files and manifests are rewritten one per Spark
task when there are enough manifests to be worth a job (the size rule of
:func:`procedures.core.gc.reachability.use_spark`), otherwise on driver threads.  If anything
fails, the files staged so far are removed.

Staged files never replace anything: a staging_location the caller names must lie outside every
table of the catalog, the source table's included however its location is spelled, and must hold
no table metadata nor any file this run would stage (checked before the first write); every write
is create-only (Iceberg Java overwrites).  So the failure cleanup removes only files this run
created.
"""

from __future__ import annotations

import functools
import logging
import pickle
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

import pyarrow as pa

from procedures.catalog.base import Table
from procedures.catalog.locations import catalog_table_folders
from procedures.core.gc.delete_guard import table_roots
from procedures.core.gc.reachability import use_spark
from procedures.core.table_path import (
    FILE_LIST, NOT_APPLICABLE, ManifestRewrite, RewriteTablePathParams, RewriteTablePathResult, check_staged_files,
    check_staging, check_staging_location, copy_plan, default_staging_location, file_list_text, file_name, maybe_append_separator, new_path,
    plan_table_path, position_deletes_to_rewrite, rewrite_manifest, staged_paths, staging_path,
    write_manifest_lists, write_version_files,
)
from procedures.errors import ValidationError
from procedures.io.fileio import FileAlreadyExistsError, FileIO
from procedures.io.path_rewrite import rewrite_delete_file_paths
from procedures.spark.dataframes import slices_frame, struct_schema
from procedures.spark.session import optional_job
from procedures.spark.worker import prepare_python_worker
from procedures.spec.manifest.model import DataFile, ManifestFile

__all__ = ["rewrite_table_path", "DRIVER_THREADS"]

log = logging.getLogger(__name__)

#: driver threads rewriting manifests and delete files when no Spark job is used
DRIVER_THREADS = 4


def _moved_reference(source: str, target: str, path: str) -> str:
    if not path.startswith(source):
        raise ValidationError(f"Expected delete file to be under the source prefix: {source} but was {path}")
    return new_path(path, source, target)


def _rewrite_delete(io: Any, item: tuple[DataFile, str, str, str]) -> tuple[str, int]:
    delete_file, output, source, target = item
    size = rewrite_delete_file_paths(io, delete_file, output, functools.partial(_moved_reference, source, target))
    return delete_file.file_path, size


def _rewrite_one_manifest(io: Any, item: tuple[ManifestFile, str, dict]) -> ManifestRewrite:
    manifest, output, kwargs = item
    return rewrite_manifest(io, manifest, output, **kwargs)


def _run(spark: Any, io: Any, distributed: bool, items: Sequence[Any], fn: Callable[[Any, Any], Any],
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


def _remove_staged(io: Any, paths: Sequence[str]) -> None:
    for p in paths:
        try:
            io.delete(p)
        except Exception as e:  # noqa: BLE001 -- cleanup after a failure must not hide it
            log.warning("rewrite_table_path: could not remove staged file %s: %s", p, e)


def _staging(table: Table, params: RewriteTablePathParams) -> str:
    if params.staging_location is None:
        return default_staging_location(table.metadata_location, str(uuid.uuid4()))
    staging = maybe_append_separator(params.staging_location)
    bare = staging.rstrip("/")
    if bare and table.io.exists(bare) and not table.io.is_dir(bare):
        raise ValidationError(f"Staging location {params.staging_location} is a file; pass a folder")
    return staging


def _table_folders(table: Table) -> list[tuple[str, str]]:
    """``(table name, folder)`` of the source table and of every table its catalog knows."""
    own = [(table.name, root) for root in table_roots(table.metadata)]
    catalog = getattr(table, "catalog", None)
    return own + (catalog_table_folders(catalog) if catalog is not None else [])


def rewrite_table_path(table: Table, params: RewriteTablePathParams, spark: Any = None) -> RewriteTablePathResult:
    """Stage ``table``'s metadata with paths moved from ``params.source_prefix`` to
    ``params.target_prefix`` and write the copy plan; Spark tasks when worth it, else the driver."""
    md, io = table.metadata, table.io
    staging = _staging(table, params)
    plan = plan_table_path(io, md, table.metadata_location, params, staging)
    specs = md.specs_by_id
    source, target = params.source_prefix, params.target_prefix
    deletes = position_deletes_to_rewrite(io, plan, specs)
    check_staging(plan, deletes)
    existing: list[str] = []
    if params.staging_location is not None:
        # the default folder is new (a fresh uuid); a folder the caller names may be anything
        check_staging_location(staging, _table_folders(table))
        existing = [f.path for f in io.list_prefix(staging)]
    check_staged_files(staging, staged_paths(plan, deletes), existing)
    distributed = use_spark(spark, plan.manifests.values())
    try:
        with optional_job(spark, f"rewrite_table_path: stage {len(plan.versions)} metadata files of {table.identifier}"):
            write_version_files(io, plan)
        items = [(f, staging_path(f.file_path, source, staging), source, target)
                 for f in {f.file_path: f for f in deletes}.values()]
        sizes = dict(_run(spark, io, distributed, items, _rewrite_delete,
                          f"rewrite_table_path: rewrite {len(items)} position delete files"))
        kwargs = {"format_version": plan.end.format_version, "specs": specs, "schema": md.schema(), "source": source,
                  "target": target, "staging": staging, "delta_ids": plan.delta_ids, "delete_sizes": sizes}
        manifests = [(m, staging_path(p, source, staging), kwargs) for p, m in sorted(plan.manifests.items())]
        rewrites = _run(spark, io, distributed, manifests, _rewrite_one_manifest,
                        f"rewrite_table_path: rewrite {len(manifests)} manifests")
        write_manifest_lists(io, plan, {r.manifest_path: r.length for r in rewrites})
        pairs = copy_plan(plan, rewrites)
        file_list = NOT_APPLICABLE
        if params.create_file_list:
            file_list = staging + FILE_LIST
            io.write(file_list, file_list_text(pairs).encode("utf-8"), overwrite=False)
    except BaseException as e:
        # a file that appeared at a staged path after the checks (create-only refused it) is not ours
        clash = e.path if isinstance(e, FileAlreadyExistsError) else None
        _remove_staged(io, [p for p in staged_paths(plan, deletes) if p != clash])
        raise
    return RewriteTablePathResult(
        latest_version=file_name(plan.end_location),
        file_list_location=file_list,
        staging_location=staging,
        rewritten_manifest_file_paths_count=len(plan.manifests),
        rewritten_delete_file_paths_count=len(deletes),
        copy_plan=tuple(pairs),
    )
