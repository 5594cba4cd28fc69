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

from procedures.core.changelog.engine import ChangelogEngine
from procedures.core.data_rewrite.engine import DataRewriteEngine
from procedures.core.file_import.engine import FileImportEngine
from procedures.core.gc.engine import GcEngine
from procedures.core.health.engine import HealthEngine
from procedures.core.manifest_rewrite.engine import ManifestRewriteEngine
from procedures.core.table_relocation.engine import TableRelocationEngine
from procedures.core.table_stats.engine import TableStatsEngine

__all__ = ["Engine"]


class Engine(GcEngine, ManifestRewriteEngine, HealthEngine, DataRewriteEngine, TableStatsEngine,
             TableRelocationEngine, ChangelogEngine, FileImportEngine, Protocol):
    """Every engine step of every capability."""
