"""``create_changelog_view`` (procedures.md §3.16): declaration, Java's defaults (view name
``<table>_changes`` back-quoted, ``compute_updates`` true when ``identifier_columns`` is given),
the action (:func:`procedures.spark.actions.changelog.create_changelog_view`), the output row."""

from __future__ import annotations

from procedures.core.changelog import default_view_name
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import OutputColumn as Col, Parameter as P
from procedures.framework.registry import register
from procedures.spark.actions.changelog import ChangelogRequest, create_changelog_view as create_view
from procedures.spark.session import active_session

__all__ = ["create_changelog_view"]


@register(
    "create_changelog_view",
    parameters=[
        P("table", "STRING", True, doc="Table whose changes the view shows."),
        P("changelog_view", "STRING", doc="Name of the temporary view; default `<table name>_changes`."),
        P("options", "MAP<STRING,STRING>",
          doc="Read options of the changes: start-snapshot-id (exclusive), end-snapshot-id, start-timestamp "
              "(exclusive), end-timestamp (ms)."),
        P("compute_updates", "BOOLEAN",
          doc="Pair DELETE/INSERT rows with equal identifier values into UPDATE_BEFORE/UPDATE_AFTER; default "
              "true when identifier_columns is given."),
        P("identifier_columns", "ARRAY<STRING>", doc="Columns identifying a row; default the table's identifier fields."),
        P("net_changes", "BOOLEAN", doc="Collapse the changes of all snapshots into their net effect; default false."),
    ],
    output=(Col("changelog_view", "STRING", False, "Name of the view created."),),
)
def create_changelog_view(ctx: ProcedureContext, table: str, changelog_view: str | None, options: dict | None,
                          compute_updates: bool | None, identifier_columns: list | None,
                          net_changes: bool | None) -> list[tuple]:
    """Register a temporary view of the table's changed rows (carry-overs removed)."""
    t = ctx.load_table(table)
    request = ChangelogRequest(
        options=None if options is None else {str(k): str(v) for k, v in options.items() if v is not None},
        compute_updates=compute_updates,
        identifier_columns=None if identifier_columns is None else tuple(str(c) for c in identifier_columns),
        net_changes=bool(net_changes),
        case_sensitive=ctx.case_sensitive,
    )
    view = changelog_view if changelog_view is not None else default_view_name(t.identifier[-1])
    return [(create_view(active_session(ctx.spark), t, view, request),)]
