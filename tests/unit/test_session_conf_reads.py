"""Opening a table by name reads the session's conf once: on Spark Connect every read of it is a
round trip to the server, and resolving the name and then opening its catalog used to read it twice."""

from __future__ import annotations

from typing import Any

import pytest

from procedures.catalog import load_catalog as load_catalog_from_conf
from procedures.spark import read, session, table_reads
from tests.unit.test_catalog_hadoop import make_metadata


class CountingConf:
    """A session's ``conf`` whose ``getAll`` (the one read of the whole conf) is counted."""

    def __init__(self, entries: dict[str, str]) -> None:
        self.entries = entries
        self.reads = 0

    def getAll(self) -> dict[str, str]:  # noqa: N802 -- pyspark's name
        self.reads += 1
        return dict(self.entries)


class ConfSession:
    """A stand-in session with only a conf (no SparkContext: the version check and engine name skip it)."""

    def __init__(self, entries: dict[str, str]) -> None:
        self.conf = CountingConf(entries)


@pytest.fixture()
def spark(tmp_path: Any) -> ConfSession:
    entries = {"spark.sql.catalog.cat.type": "hadoop", "spark.sql.catalog.cat.warehouse": str(tmp_path / "wh")}
    catalog = load_catalog_from_conf("cat", entries)
    catalog.create_namespace(("db",))
    catalog.create_table("db.t", make_metadata(catalog.default_table_location(("db", "t"))))
    return ConfSession(entries)


@pytest.mark.parametrize("open_table", [
    pytest.param(lambda spark, name: read.load_table(spark, name), id="read.load_table"),
    pytest.param(lambda spark, name: table_reads.selection_of(spark, name).table, id="table_reads.selection_of"),
    pytest.param(lambda spark, name: session.load_table(spark, name), id="session.load_table"),
])
@pytest.mark.parametrize("name", ["cat.db.t", "db.t"])
def test_opening_a_table_by_name_reads_the_session_conf_once(spark: ConfSession, open_table: Any, name: str) -> None:
    if name == "db.t":
        spark.conf.entries["spark.sql.defaultCatalog"] = "cat"
    table = open_table(spark, name)
    assert table.name.endswith("db.t")
    assert spark.conf.reads == 1


def test_catalog_for_the_default_catalog_reads_the_session_conf_once(spark: ConfSession) -> None:
    spark.conf.entries["spark.sql.defaultCatalog"] = "cat"
    assert session.catalog_for(spark).load_table(("db", "t")).name.endswith("db.t")
    assert spark.conf.reads == 1
