"""``rewrite_table_path`` (procedures.md §3.20): stage copies of a table's metadata with paths moved
from one prefix to another, and a ``source,target`` list of every file to copy.

Parameters and output follow Iceberg Java's Spark procedure (1.10.2's six parameters plus the later
``create_file_list``; the later output columns with the rewritten manifest and delete file counts);
mapped onto :class:`~procedures.core.table_relocation.relocation.RewriteTablePathParams` (validated
in the capability's ``plan``) and run by the uniform action.  The table is not changed.
"""

from __future__ import annotations

from procedures.core.table_relocation.relocation import REWRITE_TABLE_PATH, RewriteTablePathParams
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import OutputColumn as Col, Parameter
from procedures.framework.registry import register
from procedures.spark.engine.action import Action

__all__ = ["rewrite_table_path"]


@register(
    "rewrite_table_path",
    parameters=[
        Parameter("table", "STRING", True, doc="Table whose metadata is restaged (relative to the CALL's catalog)."),
        Parameter("source_prefix", "STRING", True, doc="Path prefix to replace; every path of the table must start with it."),
        Parameter("target_prefix", "STRING", True, doc="Prefix that replaces it."),
        Parameter("start_version", "STRING", doc="File name of a metadata file in the metadata log; only later changes are "
                                         "restaged. Default: everything."),
        Parameter("end_version", "STRING", doc="File name of the last metadata file to restage; default the current one."),
        Parameter("staging_location", "STRING", doc="Folder for the rewritten files, outside every table and holding no "
                                            "metadata (files are never overwritten); default "
                                            "<metadata folder>/copy-table-staging-<uuid>/."),
        Parameter("create_file_list", "BOOLEAN", default=True, doc="Write the copy plan (file-list) under the staging location."),
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
    r = Action(REWRITE_TABLE_PATH, ctx.spark, committer=ctx.commit).run(t, params)
    return [(r.latest_version, r.file_list_location, r.rewritten_manifest_file_paths_count,
             r.rewritten_delete_file_paths_count)]
