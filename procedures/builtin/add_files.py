"""``add_files`` (procedures.md §3.11): declaration, arguments to
:class:`~procedures.core.file_import.import_files.AddFilesParams`, the uniform action, the output row.

Parameters and output follow Iceberg Java 1.10's Spark 3.5 procedure.  Parquet sources only so far:
a path import `` `parquet`.`/dir` `` or a Parquet table of Spark's session catalog."""

from __future__ import annotations

from procedures.core.file_import.import_files import ADD_FILES, AddFilesParams
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import DRY_RUN, OutputColumn as Col, Parameter as P
from procedures.framework.registry import register
from procedures.spark.engine.action import Action

__all__ = ["add_files_procedure"]


@register(
    "add_files",
    parameters=[
        P("table", "STRING", True, doc="Iceberg table receiving the files (relative to the CALL's catalog)."),
        P("source_table", "STRING", True,
          doc="`parquet`.`<dir>` for a directory of files, or a table of Spark's session catalog (db.tbl)."),
        P("partition_filter", "MAP<STRING,STRING>", doc="Only source partitions whose values match (compared as strings)."),
        P("check_duplicate_files", "BOOLEAN", doc="Refuse files already live in the table (default true)."),
        P("parallelism", "INT", doc="Threads reading footers per task or on the driver (> 0, default 1)."),
        DRY_RUN,
    ],
    output=(
        Col("added_files_count", "BIGINT", False, "Files added (summary added-data-files)."),
        Col("changed_partition_count", "BIGINT", True,
            "Partitions changed (summary changed-partition-count); NULL when files were added through manifests on v2+."),
    ),
)
def add_files_procedure(
    ctx: ProcedureContext, table: str, source_table: str, partition_filter: dict[str, str] | None,
    check_duplicate_files: bool | None, parallelism: int | None, dry_run: bool,
) -> list[tuple]:
    """Add existing Parquet files of a directory or a session-catalog table to an Iceberg table."""
    t = ctx.load_table(table, dry_run=dry_run)
    params = AddFilesParams(
        source_table=source_table,
        partition_filter=dict(partition_filter or {}),
        check_duplicate_files=True if check_duplicate_files is None else bool(check_duplicate_files),
        parallelism=1 if parallelism is None else int(parallelism),
        table_name=getattr(t, "name", "table"),
    )
    return [Action(ADD_FILES, ctx.spark, committer=ctx.commit).run(t, params).row()]
