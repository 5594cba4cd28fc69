"""``create_changelog_view`` (procedures.md §3.16): declaration, Java's defaults (view name
``<table>_changes`` back-quoted, ``compute_updates`` true when ``identifier_columns`` is given),
the CALL's arguments as :class:`~procedures.core.changelog.changes.ChangelogParams`, the uniform action,
the output row."""

from __future__ import annotations

from procedures.core.changelog.changes import CREATE_CHANGELOG_VIEW, ChangelogParams
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import OutputColumn as Col, Parameter
from procedures.framework.registry import register
from procedures.spark.engine.action import Action
from procedures.spark.session import active_session

__all__ = ["create_changelog_view"]


@register(
    "create_changelog_view",
    parameters=[
        Parameter("table", "STRING", True, doc="Table whose changes the view shows."),
        Parameter("changelog_view", "STRING", doc="Name of the temporary view; default `<table name>_changes`."),
        Parameter("options", "MAP<STRING,STRING>",
          doc="Read options of the changes: start-snapshot-id (exclusive), end-snapshot-id, start-timestamp "
              "(exclusive), end-timestamp (ms)."),
        Parameter("compute_updates", "BOOLEAN",
          doc="Pair DELETE/INSERT rows with equal identifier values into UPDATE_BEFORE/UPDATE_AFTER; default "
              "true when identifier_columns is given."),
        Parameter("identifier_columns", "ARRAY<STRING>", doc="Columns identifying a row; default the table's identifier fields."),
        Parameter("net_changes", "BOOLEAN", doc="Collapse the changes of all snapshots into their net effect; default false."),
    ],
    output=(Col("changelog_view", "STRING", False, "Name of the view created."),),
)
def create_changelog_view(ctx: ProcedureContext, table: str, changelog_view: str | None, options: dict | None,
                          compute_updates: bool | None, identifier_columns: list | None,
                          net_changes: bool | None) -> list[tuple]:
    """Register a temporary view of the table's changed rows (carry-overs removed)."""
    t = ctx.load_table(table)
    params = ChangelogParams(
        table_name=t.identifier[-1], view_name=changelog_view,
        options=None if options is None else {str(k): str(v) for k, v in options.items() if v is not None},
        compute_updates=compute_updates,
        identifier_columns=None if identifier_columns is None else tuple(str(c) for c in identifier_columns),
        net_changes=bool(net_changes),
        case_sensitive=ctx.case_sensitive,
    )
    # the session first, as the view is registered in it
    return [Action(CREATE_CHANGELOG_VIEW, active_session(ctx.spark)).run(t, params).row()]
