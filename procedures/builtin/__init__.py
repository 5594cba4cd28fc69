"""The built-in procedures: one thin module per procedure (declare parameters and output, turn the
arguments into the action's parameters, call the action, build rows).

Importing this package registers every one of them; the front end
(:mod:`procedures.frontend.runner`) imports it.  The list is explicit: a module that fails to import
is a bug and fails loudly.
"""

from procedures.builtin import (  # imported for their @register side effect
    add_files,
    compute_partition_stats,
    compute_table_stats,
    create_changelog_view,
    expire_snapshots,
    migrate,
    plan_maintenance,
    remove_orphan_files,
    rewrite_data_files,
    rewrite_manifests,
    rewrite_position_delete_files,
    rewrite_table_path,
    snapshot,
    snapshot_management,
    table_health,
)

__all__ = [
    "add_files", "compute_partition_stats", "compute_table_stats", "create_changelog_view",
    "expire_snapshots", "migrate", "plan_maintenance", "remove_orphan_files",
    "rewrite_data_files", "rewrite_manifests",
    "rewrite_position_delete_files", "rewrite_table_path", "snapshot", "snapshot_management",
    "table_health",
]
