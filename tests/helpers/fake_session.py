"""A stand-in for a SparkSession in unit tests of statements that need a session only for their
empty result (:func:`procedures.spark.dataframes.no_result`: ``range(...).select().where(...)``)."""

from __future__ import annotations

from typing import Any


class NoRows:
    """What ``no_result`` builds on a :class:`FakeSession`: every step of the chain returns it."""

    def select(self, *columns: Any) -> "NoRows":
        return self

    def where(self, condition: Any) -> "NoRows":
        return self

    def collect(self) -> list:
        return []


class FakeSession:
    """Answers ``range`` with :class:`NoRows`; subclasses add what else their statements ask."""

    def range(self, *args: Any) -> NoRows:
        return NoRows()
