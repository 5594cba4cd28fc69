"""The engine steps the ``changelog`` capability needs: a typed protocol, implemented once per
engine (Spark: :class:`procedures.spark.engine.changelog_steps.ChangelogSteps`)."""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from procedures.core.changelog.change_model import ChangeRule, ChangeTask
from procedures.core.kernel.capability import JobScope

__all__ = ["ChangelogEngine"]


class ChangelogEngine(JobScope, Protocol):
    """Engine steps of ``create_changelog_view``."""

    def register_changelog_view(self, table: Any, tasks: Sequence[ChangeTask], rule: ChangeRule,
                                view_name: str) -> str:
        """Read the raw changes of ``tasks`` lazily, apply ``rule`` and register the result as the
        session's temporary view ``view_name``; returns the name."""
        ...
