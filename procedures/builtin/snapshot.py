"""``snapshot`` (procedures.md §3.13): declaration, arguments to
:class:`~procedures.core.file_import.session_import.SnapshotParams`, the uniform action on a
:class:`~procedures.core.file_import.session_import.NewTable`, the output row.

The source is a Parquet table of Spark's session catalog (``db.tbl`` or ``spark_catalog.db.tbl``);
the new Iceberg table is created in the CALL's catalog."""

from __future__ import annotations

from procedures.catalog.base import split_dotted
from procedures.core.file_import.session_import import SNAPSHOT, NewTable, SnapshotParams
from procedures.errors import ValidationError
from procedures.framework.context import ProcedureContext, known_catalogs
from procedures.framework.declaration import DRY_RUN, OutputColumn as Col, Parameter as P
from procedures.framework.registry import register
from procedures.spark.engine.action import Action

__all__ = ["snapshot_procedure", "session_source"]


def session_source(ctx: ProcedureContext, text: str | None, param: str, action: str) -> tuple[str, ...]:
    """A table argument naming a table of Spark's session catalog: ``db.tbl``, ``tbl`` or
    ``spark_catalog.db.tbl`` (the CALL's own catalog prefix is accepted too, the table being in the
    same metastore); another catalog is refused."""
    if text is None or not str(text).strip():
        raise ValidationError(f"Cannot handle an empty identifier for argument {param}")
    parts = split_dotted(str(text).strip())
    if len(parts) > 1 and parts[0] in known_catalogs(ctx.conf):
        if parts[0] not in ("spark_catalog", ctx.catalog_name):
            raise ValidationError(
                f"Cannot {action} a table that isn't in the session catalog (i.e. spark_catalog). "
                f"Found source catalog: {parts[0]}.")
        parts = parts[1:]
    return tuple(parts)


@register(
    "snapshot",
    parameters=[
        P("source_table", "STRING", True, doc="Parquet table of Spark's session catalog (db.tbl) to snapshot."),
        P("table", "STRING", True, doc="The new Iceberg table (relative to the CALL's catalog)."),
        P("location", "STRING", doc="Location of the new table (default: the catalog's default location)."),
        P("properties", "MAP<STRING,STRING>", doc="Extra properties of the new table."),
        P("parallelism", "INT", doc="Threads reading footers (> 0, default 1)."),
        DRY_RUN,
    ],
    output=(Col("imported_files_count", "BIGINT", False, "Data files of the new table (total-data-files)."),),
)
def snapshot_procedure(
    ctx: ProcedureContext, source_table: str, table: str, location: str | None,
    properties: dict[str, str] | None, parallelism: int | None, dry_run: bool,
) -> list[tuple]:
    """Create an Iceberg table over a session-catalog table's Parquet files, leaving the source as it is."""
    if source_table == table:
        raise ValidationError("Cannot create a snapshot with the same name as the source of the snapshot.")
    source = session_source(ctx, source_table, "source_table", "snapshot")
    ident = ctx.resolve(table)
    params = SnapshotParams(source=source, location=location, properties=dict(properties or {}),
                            parallelism=None if parallelism is None else int(parallelism))
    catalog = ctx.catalog_for(dry_run)
    # not ctx.commit: the create commits on a staged table, which ctx.commit cannot tell from a dry run's
    result = Action(SNAPSHOT, ctx.spark).run(NewTable(catalog, ident), params)
    ctx.note_changed(ident, catalog)
    return [result.row()]
