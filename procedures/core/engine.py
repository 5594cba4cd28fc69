"""The engine a maintenance capability runs on, and the shape every capability has.

Each capability package under :mod:`procedures.core` (``gc``, ``manifest_rewrite``, ``health``, ...)
declares the engine steps it needs as a small :class:`typing.Protocol` in its own ``engine.py``;
:class:`Engine` is all of them at once, the one object the Spark layer implements
(:class:`procedures.spark.engine.spark_engine.SparkEngine`) -- the seam a different engine plugs into.

A capability's ``execute`` is typed with its own protocol, never with :class:`Engine`: this module
imports every capability's protocol, so a capability importing it would make a cycle.  The shape of
a capability is :class:`procedures.core.kernel.capability.Capability`.
"""

from __future__ import annotations

from typing import Protocol

from procedures.core.changelog.changelog_engine import ChangelogEngine
from procedures.core.data_rewrite.data_rewrite_engine import DataRewriteEngine
from procedures.core.file_import.file_import_engine import FileImportEngine
from procedures.core.gc.gc_engine import GcEngine
from procedures.core.health.health_engine import HealthEngine
from procedures.core.manifest_rewrite.manifest_rewrite_engine import ManifestRewriteEngine
from procedures.core.table_relocation.table_relocation_engine import TableRelocationEngine
from procedures.core.table_stats.table_stats_engine import TableStatsEngine

__all__ = ["Engine"]


class Engine(GcEngine, ManifestRewriteEngine, HealthEngine, DataRewriteEngine, TableStatsEngine,
             TableRelocationEngine, ChangelogEngine, FileImportEngine, Protocol):
    """Every engine step of every capability."""
