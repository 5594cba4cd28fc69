"""The SQL wrapper (``procedures.sql``: our DDL/DML, temporary views of our tables and their refresh
after a procedure) on both session kinds.  The tables are set up on the classic session (the catalog
and warehouse are shared with the Connect server); the steps under test run on ``spark``."""

from __future__ import annotations

import pytest

import procedures
from procedures.frontend.sqlddl import cached_views_on

pytestmark = pytest.mark.both_sessions

CATALOG = "sqlw"


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    return tmp_path_factory.mktemp("sql-wrapper")


@pytest.fixture()
def ours(spark, classic_spark, warehouse):
    """Our hadoop catalog ``sqlw`` configured on both sessions (runtime keys of each session)."""
    for session in {id(spark): spark, id(classic_spark): classic_spark}.values():
        session.conf.set(f"spark.sql.catalog.{CATALOG}.type", "hadoop")
        session.conf.set(f"spark.sql.catalog.{CATALOG}.warehouse", str(warehouse))
    procedures.sql(classic_spark, f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.db")
    return CATALOG


def _two_snapshots(classic_spark, name: str) -> int:
    procedures.sql(classic_spark, f"DROP TABLE IF EXISTS {CATALOG}.db.{name} PURGE")
    procedures.sql(classic_spark, f"CREATE TABLE {CATALOG}.db.{name} (id bigint, data string) USING iceberg")
    procedures.sql(classic_spark, f"INSERT INTO {CATALOG}.db.{name} VALUES (1, 'a')")
    first = procedures.call("ancestors_of", spark=classic_spark, table=f"{CATALOG}.db.{name}").collect()[-1]
    procedures.sql(classic_spark, f"INSERT INTO {CATALOG}.db.{name} VALUES (2, 'b')")
    return first.snapshot_id


def _rows(spark, view: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {view}").collect())


def test_cached_views_are_found_by_their_plan(spark):
    """A cached temporary view built on one of our views' names is found from its analyzed plan, on
    both kinds (a Connect session has no ``_jdf`` to read the plan from)."""
    spark.range(3).createOrReplaceTempView("__procedures_cv_base")
    spark.sql("CREATE OR REPLACE TEMP VIEW cv_on_base AS SELECT id FROM __procedures_cv_base WHERE id > 0")
    spark.sql("CREATE OR REPLACE TEMP VIEW cv_other AS SELECT 1 AS one")
    spark.sql("CACHE TABLE cv_on_base")
    spark.sql("CACHE TABLE cv_other")
    try:
        assert cached_views_on(spark, {"__procedures_cv_base"}) == ["cv_on_base"]
        assert cached_views_on(spark, {"__procedures_cv_none"}) == []
    finally:
        for view in ("cv_on_base", "cv_other", "__procedures_cv_base"):
            spark.sql(f"DROP VIEW IF EXISTS {view}")


@pytest.mark.parametrize("cached", [False, True], ids=["view", "cached"])
def test_a_view_of_our_table_follows_a_rollback(spark, classic_spark, ours, request, cached):
    name = f"sw_view_{'c' if cached else 'p'}"
    first = _two_snapshots(classic_spark, name)
    procedures.sql(spark, f"CREATE OR REPLACE TEMP VIEW sw_v AS SELECT * FROM {ours}.db.{name}")
    if cached:
        spark.sql("CACHE TABLE sw_v")
    try:
        assert _rows(spark, "sw_v") == [(1, "a"), (2, "b")]
        procedures.sql(spark, f"CALL {ours}.system.rollback_to_snapshot(table => 'db.{name}', snapshot_id => {first})")
        assert _rows(spark, "sw_v") == [(1, "a")]
        assert spark.catalog.isCached("sw_v") == cached
    finally:
        spark.sql("DROP VIEW IF EXISTS sw_v")


def test_insert_select_from_our_table(spark, classic_spark, ours, request):
    """``INSERT INTO ours SELECT ... FROM ours`` casts the query's columns with the session's own
    functions module (a process holding both kinds has two)."""
    _two_snapshots(classic_spark, "sw_src")
    procedures.sql(classic_spark, f"DROP TABLE IF EXISTS {ours}.db.sw_dst PURGE")
    procedures.sql(classic_spark, f"CREATE TABLE {ours}.db.sw_dst (id bigint, data string) USING iceberg")
    procedures.sql(spark, f"INSERT INTO {ours}.db.sw_dst SELECT id * 10, upper(data) FROM {ours}.db.sw_src")
    assert sorted(tuple(r) for r in procedures.sql(classic_spark, f"SELECT * FROM {ours}.db.sw_dst").collect()) == \
        [(10, "A"), (20, "B")]
