"""``rewrite_table_path`` (procedures.md §3.20): stage copies of a table's metadata with paths moved
from one prefix to another, and a ``source,target`` list of every file to copy.

Parameters and output follow Iceberg Java's Spark procedure (1.10.2's six parameters plus the later
``create_file_list``; the later output columns with the rewritten manifest and delete file counts);
the work is :func:`procedures.spark.actions.rewrite_table_path.rewrite_table_path`.  The table is
not changed.
"""

from __future__ import annotations

from procedures.core.table_path import RewriteTablePathParams
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import OutputColumn as Col, Parameter as P
from procedures.framework.registry import register
from procedures.spark.actions.rewrite_table_path import rewrite_table_path as rewrite

__all__ = ["rewrite_table_path"]


@register(
    "rewrite_table_path",
    parameters=[
        P("table", "STRING", True, doc="Table whose metadata is restaged (relative to the CALL's catalog)."),
        P("source_prefix", "STRING", True, doc="Path prefix to replace; every path of the table must start with it."),
        P("target_prefix", "STRING", True, doc="Prefix that replaces it."),
        P("start_version", "STRING", doc="File name of a metadata file in the metadata log; only later changes are "
                                         "restaged. Default: everything."),
        P("end_version", "STRING", doc="File name of the last metadata file to restage; default the current one."),
        P("staging_location", "STRING", doc="Folder for the rewritten files, outside every table and holding no "
                                            "metadata (files are never overwritten); default "
                                            "<metadata folder>/copy-table-staging-<uuid>/."),
        P("create_file_list", "BOOLEAN", default=True, doc="Write the copy plan (file-list) under the staging location."),
    ],
    output=(
        Col("latest_version", "STRING", True, "File name of the end metadata file."),
        Col("file_list_location", "STRING", True, "Path of the CSV copy plan, or N/A without one."),
        Col("rewritten_manifest_file_paths_count", "INT", True, "Manifests restaged."),
        Col("rewritten_delete_file_paths_count", "INT", True, "Position delete files (and DVs) restaged."),
    ),
)
def rewrite_table_path(
    ctx: ProcedureContext, table: str, source_prefix: str, target_prefix: str, start_version: str | None,
    end_version: str | None, staging_location: str | None, create_file_list: bool | None,
) -> list[tuple]:
    """Stage the metadata of the versions in range with paths moved, and write the copy plan."""
    t = ctx.load_table(table)
    params = RewriteTablePathParams(
        source_prefix=source_prefix or "", target_prefix=target_prefix or "", start_version=start_version,
        end_version=end_version, staging_location=staging_location,
        create_file_list=True if create_file_list is None else bool(create_file_list),
    )
    r = rewrite(t, params, spark=ctx.spark)
    return [(r.latest_version, r.file_list_location, r.rewritten_manifest_file_paths_count,
             r.rewritten_delete_file_paths_count)]
