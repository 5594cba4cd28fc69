"""procedures.sql on tables whose names Spark would not take as a view name: a space, a quote, a
non-ASCII letter.  Reads go through temporary views with generated names; messages name the table."""

from __future__ import annotations

import pyarrow as pa
import pytest

import procedures
from procedures.spark.catalog_conf import load_catalog
from procedures.core.kernel.operations import FastAppend
from procedures.core.kernel.transaction import commit
from procedures.errors import ValidationError
from procedures.io.parquet_writer import WriteSettings, write_data_files

# the tests marked both_sessions run on classic and Spark Connect sessions (their rows are written
# without Spark); the INSERT test writes through Spark
pytestmark = pytest.mark.spark

NAMES = ["my table", "it's", "tablé"]


@pytest.fixture()
def names_catalog(spark, tmp_path):
    spark.conf.set("spark.sql.catalog.names.type", "hadoop")
    spark.conf.set("spark.sql.catalog.names.warehouse", str(tmp_path / "wh"))
    procedures.sql(spark, "CREATE NAMESPACE names.db")
    yield "names"
    spark.conf.unset("spark.sql.catalog.names.type")
    spark.conf.unset("spark.sql.catalog.names.warehouse")


def _append_without_spark(spark, catalog, name, rows):
    t = load_catalog(catalog, spark).load_table(("db", name))
    arrow = pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "data": [r[1] for r in rows]})
    commit(t, [FastAppend(write_data_files(t.io, WriteSettings.from_metadata(t.metadata), [arrow]))])


@pytest.mark.both_sessions
@pytest.mark.parametrize("name", NAMES)
def test_select_from_a_table_with_an_awkward_name(spark, names_catalog, name):
    table = f"names.db.`{name}`"
    procedures.sql(spark, f"CREATE TABLE {table} (id bigint, data string)")
    _append_without_spark(spark, names_catalog, name, [(1, "a"), (2, "b")])
    rows = procedures.sql(spark, f"SELECT id, data FROM {table} ORDER BY id").collect()
    assert [tuple(r) for r in rows] == [(1, "a"), (2, "b")]
    # a self-join names the table twice: two views, one query
    assert procedures.sql(spark, f"SELECT count(*) FROM {table} x JOIN {table} y ON x.id = y.id").collect()[0][0] == 2


@pytest.mark.parametrize("name", NAMES)
def test_insert_into_a_table_with_an_awkward_name(spark, names_catalog, name):
    table = f"names.db.`{name}`"
    procedures.sql(spark, f"CREATE TABLE {table} (id bigint, data string)")
    procedures.sql(spark, f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b')")
    rows = procedures.sql(spark, f"SELECT id, data FROM {table} ORDER BY id").collect()
    assert [tuple(r) for r in rows] == [(1, "a"), (2, "b")]
    # an INSERT reading the table itself
    procedures.sql(spark, f"INSERT INTO {table} SELECT id + 10, data FROM {table}")
    assert procedures.sql(spark, f"SELECT count(*) FROM {table}").collect()[0][0] == 4


@pytest.mark.both_sessions
def test_an_error_names_the_table_not_the_internal_view(spark, names_catalog):
    table = "names.db.`my table`"
    procedures.sql(spark, f"CREATE TABLE {table} (id bigint)")
    with pytest.raises(ValidationError) as err:
        procedures.sql(spark, f"SELECT nope FROM {table}")
    assert "__procedures_" not in str(err.value)
    assert "nope" in str(err.value) and "my table" in str(err.value)
