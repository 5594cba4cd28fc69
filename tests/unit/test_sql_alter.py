"""Iceberg's DDL without Spark: the grammar of procedures.frontend.sqlalter and the metadata changes
of procedures.core.alter (partition evolution ids and names, write order, properties, REPLACE TABLE)."""

from __future__ import annotations

import pytest

from procedures.core.alter import (
    EvolveSchema, EvolveSpec, SetTableProperties, SetWriteOrder, evolution_partition_name, replacement_updates,
)
from procedures.core.kernel.builder import MetadataBuilder, new_table_metadata
from procedures.errors import SchemaEvolutionError, SqlSyntaxError, ValidationError
from procedures.frontend import sqlalter
from procedures.frontend.sqlalter import AlterParser
from procedures.frontend.sqlddl import parse_partition_term
from procedures.spec.partitioning import PartitionSpecBuilder
from procedures.spec.schema import Schema
from procedures.spec.sorting import NullOrder, SortDirection
from procedures.spec.transforms import parse_transform
from procedures.spec.types import LONG, STRING, TIMESTAMP, NestedField
from tests.helpers.fake_session import FakeSession

SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "data", STRING), NestedField(3, "ts", TIMESTAMP)))


def table(fv: int = 2, partition: tuple[str, str] | None = ("data", "identity")):
    spec = None
    if partition:
        spec = PartitionSpecBuilder(SCHEMA).add(*partition).build()
    md, _ = new_table_metadata(schema=SCHEMA, spec=spec, location="/t", format_version=fv)
    return md


def applied(md, op):
    b = MetadataBuilder(md)
    b.apply_all(op.apply(md, None))
    return b.build()


# ------------------------------------------------------------------ grammar
@pytest.mark.parametrize("text, term", [
    ("id", ("id", "identity")), ("bucket(16, id)", ("id", "bucket[16]")), ("truncate(data, 4)", ("data", "truncate[4]")),
    ("truncate(4, data)", ("data", "truncate[4]")), ("days(ts)", ("ts", "day")), ("hours(ts)", ("ts", "hour")),
    ("years(ts)", ("ts", "year")), ("months(ts)", ("ts", "month")), ("`a b`.c", ("a b.c", "identity")),
])
def test_partition_terms(text, term):
    p = AlterParser(text)
    assert parse_partition_term(p) == term
    p.end()


def test_unknown_transform_is_a_located_syntax_error():
    with pytest.raises(SqlSyntaxError, match="unsupported transform zorder"):
        parse_partition_term(AlterParser("zorder(id, data)"))


def test_column_type_stops_at_the_column_clauses():
    p = AlterParser("map<string, struct<a: int>> NOT NULL COMMENT 'x', next int")
    t = p.spark_type()
    assert str(t).startswith("map<string, struct<")
    assert p.take("NOT", "NULL") and p.take("COMMENT")


def test_statements_not_on_our_catalogs_are_not_ours():
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": "/tmp/x"}
    assert sqlalter.execute(None, None, "ALTER TABLE spark_catalog.db.t ADD COLUMN x int", conf) is None
    assert sqlalter.execute(None, None, "CREATE TABLE ours.db.t (id int)", conf) is None  # plain CREATE: the dispatcher's
    assert sqlalter.execute(None, None, "SELECT 1", conf) is None


# ------------------------------------------------------------------ partition evolution
def test_evolution_names_are_javas():
    assert evolution_partition_name("id", parse_transform("bucket[16]")) == "id_bucket_16"
    assert evolution_partition_name("data", parse_transform("truncate[4]")) == "data_trunc_4"
    assert evolution_partition_name("ts", parse_transform("day")) == "ts_day"
    assert evolution_partition_name("p.x", parse_transform("identity")) == "p.x"


def test_v2_add_drop_and_re_add_recycles_the_field_id():
    md = table()
    md = applied(md, EvolveSpec((("add", "id", "bucket[16]", None),)))
    assert [(f.field_id, f.name) for f in md.spec().fields] == [(1000, "data"), (1001, "id_bucket_16")]
    md = applied(md, EvolveSpec((("remove", "id", "bucket[16]"),)))
    assert [f.name for f in md.spec().fields] == ["data"]
    md = applied(md, EvolveSpec((("add", "id", "bucket[16]", None),)))
    assert [(f.field_id, f.name) for f in md.spec().fields] == [(1000, "data"), (1001, "id_bucket_16")]
    assert md.last_partition_id == 1001


def test_v1_drop_keeps_a_void_field():
    md = applied(table(fv=1), EvolveSpec((("remove_name", "data"), ("add", "data", "bucket[8]", "data_b"))))
    assert [(f.field_id, f.name, str(f.transform)) for f in md.spec().fields] == [
        (1000, "data", "void"), (1001, "data_b", "bucket[8]")]


@pytest.mark.parametrize("steps, message", [
    ((("add", "data", "identity", None),), "duplicate partition field"),
    ((("remove", "id", "bucket[4]"),), "Cannot find partition field to remove"),
    ((("remove_name", "nope"),), "nope"),
    ((("add", "nope", "identity", None),), "nope"),
    ((("add", "id", "bucket[4]", "ts"),), "exists in schema"),
    ((("add", "id", "bucket[4]", None), ("remove", "id", "bucket[4]")), "newly added"),
])
def test_refused_spec_changes(steps, message):
    with pytest.raises(ValidationError, match=message):
        EvolveSpec(steps).apply(table(), None)


# ------------------------------------------------------------------ schema, order, properties
def test_dropping_a_partition_source_is_refused():
    with pytest.raises(SchemaEvolutionError, match="partition field 'data'"):
        EvolveSchema((("delete_column", ("data",), ()),)).apply(table(), None)


def test_write_order_sets_the_distribution_mode():
    md = applied(table(), SetWriteOrder((("id", "identity", "desc", None), ("ts", "day", "asc", "nulls-last")), "range"))
    f = md.sort_order().fields
    assert md.sort_order().order_id == 1 and md.properties["write.distribution-mode"] == "range"
    assert (f[0].direction, f[0].null_order) == (SortDirection.DESC, NullOrder.NULLS_LAST)
    assert (str(f[1].transform), f[1].null_order) == ("day", NullOrder.NULLS_LAST)
    md = applied(md, SetWriteOrder((("id", "identity", "asc", None),), None))
    assert md.properties["write.distribution-mode"] == "range"  # LOCALLY ORDERED BY leaves the mode
    md = applied(md, SetWriteOrder((), "none"))
    assert md.sort_order().is_unsorted() and md.properties["write.distribution-mode"] == "none"


def test_properties_set_unset_and_format_upgrade():
    md = applied(table(), SetTableProperties((("a", "1"), ("format-version", "3"))))
    assert md.properties["a"] == "1" and md.format_version == 3 and "format-version" not in md.properties
    with pytest.raises(ValidationError, match="IF EXISTS"):
        SetTableProperties(removals=("zz",), if_exists=False).apply(md, None)
    with pytest.raises(ValidationError, match="WRITE ORDERED BY"):
        SetTableProperties((("sort-order", "id"),)).apply(md, None)
    assert SetTableProperties(removals=("zz",)).apply(md, None) == []


def test_replacement_keeps_ids_of_kept_columns_and_history():
    md = table()
    new = Schema((NestedField(1, "data", STRING), NestedField(2, "extra", LONG)))
    b = MetadataBuilder(md)
    b.apply_all(replacement_updates(md, new, [("extra", "bucket[4]")], {"k": "v"}))
    out = b.build()
    assert out.table_uuid == md.table_uuid and out.current_snapshot_id is None
    assert [(f.field_id, f.name) for f in out.schema().fields] == [(2, "data"), (4, "extra")]
    assert out.last_column_id == 4 and out.properties["k"] == "v"
    assert [(f.field_id, f.name) for f in out.spec().fields] == [(1001, "extra_bucket")]


# ------------------------------------------------------------------ statements end to end (no Spark needed)
class _NoSpark(FakeSession):
    """Stands for a session: ALTER TABLE statements need one only for their empty result."""


@pytest.fixture()
def loc(tmp_path):
    from procedures.catalog.hadoop import HadoopCatalog

    conf = {"spark.sql.catalog.loc.type": "hadoop", "spark.sql.catalog.loc.warehouse": str(tmp_path / "wh")}
    cat = HadoopCatalog("loc", str(tmp_path / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=cat.default_table_location(("db", "t")))
    cat.create_table(("db", "t"), md)
    return conf, cat


def run(conf, text):
    return sqlalter.execute(_NoSpark(), None, text, conf)


def test_a_new_branch_of_an_empty_table_gets_an_empty_snapshot(loc):
    conf, cat = loc
    run(conf, "ALTER TABLE loc.db.t CREATE BRANCH dev RETAIN 2 DAYS")
    md = cat.load_table(("db", "t")).metadata
    assert md.current_snapshot_id is None and len(md.snapshots) == 1
    assert md.refs["dev"].snapshot_id == md.snapshots[0].snapshot_id and md.refs["dev"].max_ref_age_ms == 2 * 86_400_000
    with pytest.raises(ValidationError, match="main has no snapshot"):
        run(conf, "ALTER TABLE loc.db.t CREATE TAG v1")


@pytest.mark.parametrize("text, error, message", [
    ("ALTER TABLE loc.db.t ALTER COLUMN data TYPE bigint", SchemaEvolutionError, "data"),
    ("ALTER TABLE loc.db.t ADD COLUMN id int", SchemaEvolutionError, "id"),
    ("ALTER TABLE loc.db.t DROP PARTITION FIELD data", ValidationError, "data"),
    ("ALTER TABLE loc.db.t WRITE SIDEWAYS", SqlSyntaxError, "WRITE"),
    ("ALTER TABLE loc.db.t SET IDENTIFIER FIELDS data", SchemaEvolutionError, "data"),
    ("ALTER TABLE loc.db.t ADD COLUMN x nosuchtype", ValidationError, "nosuchtype"),
    ("ALTER TABLE loc.db.t FROB", SqlSyntaxError, "unsupported ALTER TABLE"),
])
def test_refused_statements_leave_the_table_unchanged(loc, text, error, message):
    conf, cat = loc
    before = cat.load_table(("db", "t")).metadata_location
    with pytest.raises(error, match=message):
        run(conf, text)
    assert cat.load_table(("db", "t")).metadata_location == before


def test_a_statement_is_one_metadata_commit(loc):
    conf, cat = loc
    before = len(cat.load_table(("db", "t")).metadata.metadata_log)
    run(conf, "ALTER TABLE loc.db.t ADD COLUMNS (a int, b string FIRST, c double AFTER id)")
    md = cat.load_table(("db", "t")).metadata
    assert len(md.metadata_log) == before + 1
    assert [f.name for f in md.schema().fields] == ["b", "id", "c", "data", "ts", "a"]
    assert [f.field_id for f in md.schema().fields] == [5, 1, 6, 2, 3, 4]


@pytest.mark.parametrize("fv", [2, 3])
def test_replacement_without_a_partition_source_keeps_the_old_spec(fv):
    """As Java's replace transaction: the old spec (and sort order) stay in the metadata naming the dropped
    column; the new schema and spec are current."""
    md = applied(table(fv), SetWriteOrder((("data", "identity", "asc", None),), None))
    b = MetadataBuilder(md)
    b.apply_all(replacement_updates(md, Schema((NestedField(1, "id", LONG),)), [("id", "bucket[2]")]))
    out = b.build()
    assert [f.name for f in out.schema().fields] == ["id"]
    assert [f.name for f in out.spec().fields] == ["id_bucket"] and out.sort_order().is_unsorted()
    assert [f.name for f in out.spec_by_id(0).fields] == ["data"]


def test_replacement_of_a_v1_table_without_a_partition_source_keeps_a_void_field():
    """v1 specs cannot drop fields: as Java, the new spec keeps the old one as ``void`` of the dropped
    column (source id 2, no longer in the schema) beside the new terms."""
    md = table(1)
    b = MetadataBuilder(md)
    b.apply_all(replacement_updates(md, Schema((NestedField(1, "id", LONG),)), [("id", "bucket[2]")]))
    out = b.build()
    assert [(f.source_id, str(f.transform), f.name, f.field_id) for f in out.spec().fields] == [
        (2, "void", "data", 1000), (1, "bucket[2]", "id_bucket", 1001)]
    assert out.schema().find_field_or_none(2) is None
    assert [str(f.field_type) for f in out.spec().partition_type(out.schema()).fields] == ["unknown", "int"]


def test_write_order_back_to_an_earlier_order_sets_it_by_id():
    md = applied(table(), SetWriteOrder((("id", "identity", "asc", None),), "range"))
    md = applied(md, SetWriteOrder((), "none"))
    ups = SetWriteOrder((("id", "identity", "asc", None),), "range").apply(md, None)
    assert [type(u).__name__ for u in ups] == ["SetDefaultSortOrder", "SetProperties"] and ups[0].sort_order_id == 1
