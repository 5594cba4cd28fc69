"""read_table through Spark's own Parquet reader (procedures.spark.native_read): the route is taken only
where a by-name read is exactly the by-field-id read, and every read, native or not, gives the rows the
Python reader gives.

One small table (tests/helpers/evolved_table.py), in a directory whose name holds a space and
``%``, with evolved columns and position deletes.  Runs on classic and Spark Connect sessions."""

from __future__ import annotations

import contextlib
import logging

import pytest

from procedures.core.alter import SetTableProperties
from procedures.core.kernel.transaction import commit
from procedures.spark.native_read import NATIVE_POSITION_DELETES_CONF, NATIVE_READ_CONF
from procedures.spark.read import read_table
from tests.helpers.evolved_table import LIVE, evolved_table, expected

pytestmark = [pytest.mark.spark, pytest.mark.both_sessions]


#: the route is off by default (see test_the_route_is_off_by_default); the module's table turns it on
ON = (("read.native-parquet.enabled", "true"),)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return commit(evolved_table(tmp_path_factory.mktemp("native")), [SetTableProperties(updates=ON)])


@pytest.fixture(autouse=True)
def native_position_deletes(spark):
    spark.conf.set(NATIVE_POSITION_DELETES_CONF, "true")
    yield
    spark.conf.unset(NATIVE_POSITION_DELETES_CONF)


def _read(spark, t, caplog, columns, **kwargs) -> tuple[list[dict], str]:
    """The rows of a read (sorted by id) and the route it logged."""
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="procedures.spark.read"):
        df = read_table(spark, t, columns=columns, **kwargs)
    routes = [r.getMessage() for r in caplog.records if r.name == "procedures.spark.read"]
    rows = sorted((r.asDict(recursive=True) for r in df.collect()), key=lambda r: r["id"])
    return rows, routes[-1]


@contextlib.contextmanager
def _session_switch(spark, value: str):
    """The session's native-route switch set to ``value`` within the block, unset after it."""
    spark.conf.set(NATIVE_READ_CONF, value)
    try:
        yield
    finally:
        spark.conf.unset(NATIVE_READ_CONF)


def _want(columns, ids) -> list[dict]:
    return [{c: expected(i)[c] for c in columns} for i in ids]


def test_added_column_reads_null_from_old_files_natively_with_deletes(spark, table, caplog):
    rows, route = _read(spark, table, caplog, ["id", "added", "p"])
    assert "Spark's Parquet reader" in route and "2 position delete file(s)" in route, route
    assert rows == _want(["id", "added", "p"], LIVE)
    python, route = _read(spark, table, caplog, ["id", "added", "p"], native=False)
    assert "Python reader" in route and python == rows
    df = read_table(spark, table, columns=["id", "added"])
    assert not df.schema["id"].nullable and df.schema["added"].nullable


def test_position_deletes_read_through_python_unless_switched_on(spark, table, caplog):
    spark.conf.unset(NATIVE_POSITION_DELETES_CONF)
    rows, route = _read(spark, table, caplog, ["id", "added", "p"])
    assert "Python reader" in route and "deletes" in route and rows == _want(["id", "added", "p"], LIVE)


def test_filter_applies_on_the_native_route(spark, table, caplog):
    rows, route = _read(spark, table, caplog, ["id", "added"], filter="id >= 4 AND added IS NULL")
    assert "Spark's Parquet reader" in route
    assert rows == _want(["id", "added"], [4, 5])


@pytest.mark.parametrize("column, why", [("label", "renamed"), ("old", "belonged to other field ids"),
                                         ("n", "changed type"), ("s", "renamed")])
def test_evolved_columns_fall_back_and_read_right(spark, table, caplog, column, why):
    rows, route = _read(spark, table, caplog, ["id", column])
    assert "Python reader" in route and why in route, route
    assert rows == _want(["id", column], LIVE)


def test_switches_turn_the_route_off(spark, table, caplog):
    _, route = _read(spark, table, caplog, ["id", "added"], native=False)
    assert "turned off" in route
    with _session_switch(spark, "false"):
        rows, route = _read(spark, table, caplog, ["id", "added"])
        assert "turned off" in route and rows == _want(["id", "added"], LIVE)
    off = commit(table, [SetTableProperties(updates=(("read.native-parquet.enabled", "false"),))])
    try:
        _, route = _read(spark, off, caplog, ["id"])
        assert "turned off" in route
    finally:  # the table is shared by the tests of both session kinds
        commit(off, [SetTableProperties(updates=ON)])


def test_the_route_is_off_by_default_and_a_session_turns_it_on(spark, table, caplog):
    plain = commit(table, [SetTableProperties(removals=("read.native-parquet.enabled",))])
    try:
        rows, route = _read(spark, plain, caplog, ["id", "added"])
        assert "turned off" in route and rows == _want(["id", "added"], LIVE)
        with _session_switch(spark, "true"):
            rows, route = _read(spark, plain, caplog, ["id", "added"])
            assert "Spark's Parquet reader" in route and rows == _want(["id", "added"], LIVE)
    finally:
        commit(plain, [SetTableProperties(updates=ON)])


def test_name_mapped_table_falls_back(spark, table, caplog):
    key = "schema.name-mapping.default"
    mapped = commit(table, [SetTableProperties(updates=((key, '[{"field-id": 1, "names": ["id"]}]'),))])
    try:
        _, route = _read(spark, mapped, caplog, ["id", "added"], native=True)
        assert "name mapping" in route
    finally:
        commit(mapped, [SetTableProperties(removals=(key,))])
