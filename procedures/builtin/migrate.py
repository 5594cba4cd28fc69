"""``migrate`` (procedures.md §3.12): declaration, arguments to
:class:`~procedures.core.file_import.session_import.MigrateParams`, the uniform action on a
:class:`~procedures.core.file_import.session_import.NewTable`, the output row.

The table is a Parquet table of Spark's session catalog; the CALL's catalog must be a hive catalog
on the same metastore, where the Iceberg table takes the table's name."""

from __future__ import annotations

from procedures.builtin.snapshot import session_source
from procedures.core.file_import.session_import import MIGRATE, MigrateParams, NewTable
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import DRY_RUN, OutputColumn as Col, Parameter as P
from procedures.framework.registry import register
from procedures.spark.engine.action import Action

__all__ = ["migrate_procedure"]


@register(
    "migrate",
    parameters=[
        P("table", "STRING", True, doc="Parquet table of Spark's session catalog (db.tbl) to replace in place."),
        P("properties", "MAP<STRING,STRING>", doc="Extra properties of the new Iceberg table."),
        P("drop_backup", "BOOLEAN", doc="Drop the backup table after success (default false)."),
        P("backup_table_name", "STRING", doc="Name of the backup table in the same database (default <name>_backup_)."),
        P("parallelism", "INT", doc="Threads reading footers (> 0, default 1)."),
        DRY_RUN,
    ],
    output=(Col("migrated_files_count", "BIGINT", False, "Data files of the new table (total-data-files)."),),
)
def migrate_procedure(
    ctx: ProcedureContext, table: str, properties: dict[str, str] | None, drop_backup: bool | None,
    backup_table_name: str | None, parallelism: int | None, dry_run: bool,
) -> list[tuple]:
    """Replace a session-catalog Parquet table by an Iceberg table with the same name, over its files."""
    source = session_source(ctx, table, "table", "migrate")
    params = MigrateParams(source=source, properties=dict(properties or {}), drop_backup=bool(drop_backup),
                           backup_table_name=backup_table_name,
                           parallelism=None if parallelism is None else int(parallelism), dry_run=bool(dry_run))
    # checks read the catalog; a dry run creates in a sandbox over it.  Not ctx.commit: the create
    # commits on a staged table, which ctx.commit cannot tell from a dry run's
    target = NewTable(ctx.catalog, None, ctx.catalog_for(bool(dry_run)))
    result = Action(MIGRATE, ctx.spark).run(target, params)
    if not dry_run:
        ctx.note_changed(source)
    return [result.row()]
