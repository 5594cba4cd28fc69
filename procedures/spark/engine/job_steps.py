"""The one engine step several capabilities share beyond ``commit``: their Spark jobs described for
the UI and for cancellation (``described``)."""

from __future__ import annotations

import contextlib
from typing import Any

from procedures.spark.session import optional_job

__all__ = ["JobSteps"]


class JobSteps:
    """``described(description)`` on ``self.spark`` (nothing without a session)."""

    spark: Any

    def described(self, description: str) -> contextlib.AbstractContextManager[None]:
        """The session's jobs inside run under ``description``."""
        return optional_job(self.spark, description)
