"""Temporary views and cached tables after a procedure changes the table, against Iceberg Java 1.10.2
(issue 31).  A view made through :func:`procedures.sql` of one of our tables, and Java's view of its
twin, are read after ``rollback_to_snapshot`` / ``rollback_to_timestamp`` / ``set_current_snapshot``
(and after an ``INSERT`` through ours): both show the table's new current rows, cached or not.
"""

from __future__ import annotations

import pytest

import procedures
from tests.helpers.catalogs import ours_on_java_warehouse

pytestmark = [pytest.mark.spark, pytest.mark.java]


@pytest.fixture(scope="module")
def ours(spark, java_warehouse):
    return ours_on_java_warehouse(spark, java_warehouse)


def _rows(spark, view: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {view}").collect())


def _setup(spark, name: str) -> tuple[int, int]:
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
    spark.sql(f"CREATE TABLE jcat.db.{name} (id bigint, data string) USING iceberg")
    spark.sql(f"INSERT INTO jcat.db.{name} VALUES (1, 'a')")
    first = spark.sql(f"SELECT snapshot_id FROM jcat.db.{name}.snapshots").first().snapshot_id
    spark.sql(f"INSERT INTO jcat.db.{name} VALUES (2, 'b')")
    # rollback_to_timestamp goes to the last snapshot strictly older than the time: the second's
    second = spark.sql(f"SELECT committed_at FROM jcat.db.{name}.snapshots WHERE snapshot_id != {first}").first()
    return first, second.committed_at


@pytest.mark.parametrize("cached", [False, True], ids=["view", "cached"])
@pytest.mark.parametrize("procedure", ["rollback_to_snapshot", "rollback_to_timestamp", "set_current_snapshot"])
def test_view_follows_procedure(spark, ours, procedure, cached):
    seen = {}
    for catalog, run in (("jcat", spark.sql), ("ours", lambda q: procedures.sql(spark, q))):
        name, view = f"c31_view_{catalog}", f"c31_v_{catalog}"
        snapshot_id, committed_at = _setup(spark, name)
        run(f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT * FROM {catalog}.db.{name}")
        if cached:
            spark.sql(f"CACHE TABLE {view}")
        before = _rows(spark, view)
        arg = (f"timestamp => TIMESTAMP '{committed_at}'" if procedure == "rollback_to_timestamp"
               else f"snapshot_id => {snapshot_id}")
        run(f"CALL {catalog}.system.{procedure}(table => 'db.{name}', {arg})").collect()
        seen[catalog] = (before, _rows(spark, view), spark.catalog.isCached(view))
        spark.sql(f"DROP VIEW {view}")
    assert seen["ours"] == seen["jcat"]
    assert seen["jcat"][:2] == ([(1, "a"), (2, "b")], [(1, "a")])


def test_view_follows_insert_through_ours(spark, ours):
    _setup(spark, "c31_view_ins")
    procedures.sql(spark, "CREATE OR REPLACE TEMP VIEW c31_v_ins AS SELECT * FROM ours.db.c31_view_ins WHERE id > 1")
    procedures.sql(spark, "INSERT INTO ours.db.c31_view_ins VALUES (3, 'c')")
    assert _rows(spark, "c31_v_ins") == [(2, "b"), (3, "c")]
    spark.sql("DROP VIEW c31_v_ins")
