"""The SQL front end's tree rewriting (issue 35), without Spark: our tables found in any construct and
replaced by temporary views, time travel and selectors resolved as Iceberg's Spark catalog resolves
them, statements naming none of our catalogs passed on untouched, unsupported ones refused."""

from __future__ import annotations

import json
import uuid

import pyarrow as pa
import pytest

from procedures.catalog import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.operations import DeleteFiles, FastAppend
from procedures.core.kernel.transaction import commit
from procedures.core.table_selectors import METADATA_TABLE_NAMES
from procedures.frontend.sqlshow import ddl_columns
from procedures.io.parquet_writer import WriteSettings, write_data_files
from procedures.spark.metadata_tables import METADATA_TABLES, metadata_table_rows, metadata_table_schema
from procedures.spec import types as T
from procedures.spec.partitioning import PartitionSpecBuilder
from procedures.spec.schema import Schema
from procedures.core.table_selectors import TableSelection, select_table, with_version
from procedures.errors import NoSuchRefError, NoSuchTableError, UnsupportedStatementError, ValidationError
from procedures.frontend import sqlddl
from procedures.frontend.sqltext import parse_statement
from procedures.spec.metadata import metadata_from_json
from tests.helpers.fake_session import FakeSession, NoRows

S1, S2, S3 = 101, 202, 303


def _metadata(location: str):
    snap = lambda sid, parent, ms, seq: {  # noqa: E731 -- three snapshots of one shape
        "snapshot-id": sid, "parent-snapshot-id": parent, "timestamp-ms": ms, "sequence-number": seq,
        "summary": {"operation": "append"}, "manifest-list": f"{location}/metadata/snap-{sid}.avro", "schema-id": 0}
    doc = {
        "format-version": 2, "table-uuid": str(uuid.uuid4()), "location": location,
        "last-sequence-number": 3, "last-updated-ms": 1_700_000_003_000, "last-column-id": 1,
        "current-schema-id": 0,
        "schemas": [{"type": "struct", "schema-id": 0,
                     "fields": [{"id": 1, "name": "id", "required": False, "type": "long"}]}],
        "default-spec-id": 0, "partition-specs": [{"spec-id": 0, "fields": []}], "last-partition-id": 999,
        "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}], "properties": {},
        "current-snapshot-id": S2,
        "snapshots": [snap(S1, None, 1_700_000_001_000, 1), snap(S2, S1, 1_700_000_002_000, 2),
                      snap(S3, S1, 1_700_000_003_000, 3)],
        "snapshot-log": [{"snapshot-id": S1, "timestamp-ms": 1_700_000_001_000},
                         {"snapshot-id": S2, "timestamp-ms": 1_700_000_002_000}],
        "refs": {"main": {"snapshot-id": S2, "type": "branch"}, "b1": {"snapshot-id": S3, "type": "branch"},
                 "t1": {"snapshot-id": S1, "type": "tag"}},
    }
    return metadata_from_json(json.dumps(doc))


@pytest.fixture()
def catalog(tmp_path):
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    for name in ("t", "my table"):
        cat.create_table(("db", name), _metadata(cat.default_table_location(("db", name))))
    return cat


@pytest.fixture()
def conf(catalog):
    return {"spark.sql.catalog.local.type": "hadoop", "spark.sql.catalog.local.warehouse": catalog.warehouse}


class _Frame:
    def __init__(self, sel: TableSelection, views: dict):
        self.sel, self.views = sel, views

    def createOrReplaceTempView(self, name):  # noqa: N802 -- pyspark's name
        self.views[name] = self.sel


class _Spark(FakeSession):
    """Records what reaches ``spark.sql``; answers the TIMESTAMP AS OF evaluation."""

    def __init__(self):
        self.sql_texts: list[str] = []

    def sql(self, text):
        self.sql_texts.append(text)
        if text.startswith("SELECT unix_micros("):
            return _Row((1_700_000_002_500_000,))
        return "frame"


class _Row:
    def __init__(self, values):
        self.values = values

    def first(self):
        return self.values


def _rewrite(monkeypatch, conf, text):
    views: dict = {}
    monkeypatch.setattr(sqlddl, "read_selection", lambda spark, sel: _Frame(sel, views))
    query, names = sqlddl.substitute_reads(_Spark(), parse_statement(text), conf, {"local"})
    return query, names, views


def test_every_reference_in_any_construct_becomes_a_view(monkeypatch, conf):
    query, names, views = _rewrite(monkeypatch, conf, (
        "WITH x AS (SELECT * FROM local.db.t) SELECT x.id FROM x JOIN `local`.`db`.`my table` y ON x.id = y.id "
        "WHERE x.id IN (SELECT id FROM local.db.t VERSION AS OF 't1') "
        "UNION SELECT t.id FROM local.db.t WHERE EXISTS (SELECT 1 FROM local.db.t.snapshots)"))
    assert "local" not in query and "VERSION AS OF" not in query
    # one view per distinct read: the current table, `my table`, the tag, the snapshots table
    assert len(views) == 4
    sels = {(tuple(s.table.identifier), s.metadata_table, s.snapshot_id) for s in views.values()}
    assert sels == {(("db", "my table"), None, None), (("db", "t"), None, None), (("db", "t"), None, S1),
                    (("db", "t"), "snapshots", None)}
    # a reference without an alias keeps its table's name as alias, so `t.id` still resolves
    assert " AS t " in query and " AS y " in query
    assert sorted(set(names.values())) == ["`local`.`db`.`my table`", "local.db.t", "local.db.t.snapshots"]


def test_time_travel_clauses_and_selectors(monkeypatch, conf, catalog):
    cases = {
        "SELECT * FROM local.db.t VERSION AS OF 202": (None, S2, None, None),
        "SELECT * FROM local.db.t FOR SYSTEM_VERSION AS OF 't1'": (None, S1, None, None),  # a tag: its snapshot
        "SELECT * FROM local.db.t VERSION AS OF 'b1'": (None, None, "b1", None),  # a branch: its head, current schema
        "SELECT * FROM local.db.t TIMESTAMP AS OF '2023-11-14 22:13:22.5'": (None, None, None, 1_700_000_002_500),
        "SELECT * FROM local.db.t FOR SYSTEM_TIME AS OF '2023-11-14 22:13:22.5'": (None, None, None, 1_700_000_002_500),
        "SELECT * FROM local.db.t.branch_b1": (None, None, "b1", None),
        "SELECT * FROM local.db.t.tag_t1": (None, None, "t1", None),
        "SELECT * FROM local.db.t.snapshot_id_101": (None, S1, None, None),
        "SELECT * FROM local.db.t.at_timestamp_1700000001500": (None, None, None, 1_700_000_001_500),
        "SELECT * FROM local.db.t.FILES VERSION AS OF 101": ("files", S1, None, None),
    }
    for text, want in cases.items():
        _, _, views = _rewrite(monkeypatch, conf, text)
        (sel,) = views.values()
        assert (sel.metadata_table, sel.snapshot_id, sel.ref, sel.as_of_ms) == want, text


def test_selector_errors(catalog):
    with pytest.raises(NoSuchTableError, match="db.t.nope"):
        select_table(catalog, ("db", "t", "nope"))
    with pytest.raises(NoSuchRefError, match="branch 't1'"):
        select_table(catalog, ("db", "t", "branch_t1"))
    with pytest.raises(NoSuchRefError, match="version nope"):
        with_version(select_table(catalog, ("db", "t")), version="nope", display="local.db.t")
    with pytest.raises(ValidationError, match="both table identifier and AS OF"):
        with_version(select_table(catalog, ("db", "t", "branch_b1")), version="101", display="local.db.t.branch_b1")


def test_statements_naming_none_of_our_catalogs_reach_spark_as_written(conf):
    spark = _Spark()
    for text in ("SELECT  1 -- as written", "SHOW TABLES", "SELECT * FROM other.db.t", "SOME STATEMENT sqlglot cannot read ((",
                 "SELECT local FROM other.db.t"):
        assert sqlddl.execute(spark, text, conf) == "frame"
        assert spark.sql_texts[-1] == text


def test_drop_table_and_namespace(conf, catalog):
    spark = _Spark()
    assert isinstance(sqlddl.execute(spark, "DROP TABLE IF EXISTS local.db.t", conf), NoRows)
    assert isinstance(sqlddl.execute(spark, "DROP TABLE IF EXISTS local.db.t", conf), NoRows)
    with pytest.raises(NoSuchTableError):
        sqlddl.execute(spark, "DROP TABLE local.db.t", conf)
    sqlddl.execute(spark, "DROP TABLE local.db.`my table`", conf)
    assert isinstance(sqlddl.execute(spark, "DROP NAMESPACE local.db", conf), NoRows)
    assert not catalog.namespace_exists(("db",))
    assert isinstance(sqlddl.execute(spark, "DROP NAMESPACE IF EXISTS local.db", conf), NoRows)
    assert spark.sql_texts == []


def test_unsupported_statements_list_what_is_supported(conf):
    for text in ("TRUNCATE TABLE local.db.t", "EXPLAIN SELECT * FROM local.db.t", "ALTER TABLE local.db.t ADD PARTITION FIELD id",
                 "CREATE TABLE local.db.u AS SELECT 1", "INSERT INTO local.db.t PARTITION (id = 1) SELECT 1"):
        with pytest.raises(UnsupportedStatementError, match="Supported: SELECT .*SHOW TBLPROPERTIES"):
            sqlddl.execute(_Spark(), text, conf)


def test_user_messages_name_tables_not_views():
    message = ("[AMBIGUOUS_REFERENCE] Reference `id` is ambiguous, could be: [`__procedures_1_ab`.`id`].\n"
               "JVM stacktrace:\norg.apache.spark.sql.AnalysisException\n\tat org.apache.Foo(Foo.scala:1)")
    out = sqlddl.user_message(message, {"__procedures_1_ab": "local.db.t"})
    assert out == "[AMBIGUOUS_REFERENCE] Reference `id` is ambiguous, could be: [local.db.t.`id`]."


# ----------------------------------------------------------------------------- metadata table rows
def test_every_metadata_table_has_rows_of_its_schema(tmp_path):
    assert set(METADATA_TABLES) == set(METADATA_TABLE_NAMES)
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    schema = Schema((T.NestedField(1, "id", T.LONG, False), T.NestedField(2, "data", T.STRING, False)))
    md, _ = new_table_metadata(schema=schema, spec=PartitionSpecBuilder(schema).add("data", "identity").build(),
                               location=cat.default_table_location(("db", "t")))
    t = cat.create_table(("db", "t"), md)
    files = []
    for i in range(2):
        t = cat.load_table(("db", "t"))
        new = write_data_files(t.io, WriteSettings.from_metadata(t.metadata),
                               [pa.table({"id": pa.array([i], pa.int64()), "data": [f"p{i}"]})])
        files += new
        commit(t, [FastAppend(new)])
    t = cat.load_table(("db", "t"))
    commit(t, [DeleteFiles([files[0].file_path])])
    t = cat.load_table(("db", "t"))
    first = t.metadata.snapshots[0].snapshot_id
    for name in METADATA_TABLES:
        columns = ddl_columns(metadata_table_schema(name, t.metadata))
        for row in metadata_table_rows(t, name):
            assert len(row) == len(columns), name
    assert len(metadata_table_rows(t, "files")) == 1 and len(metadata_table_rows(t, "all_files")) == 2
    assert len(metadata_table_rows(t, "files", snapshot_id=first)) == 1
    assert {r[-1] for r in metadata_table_rows(t, "all_manifests")} == {s.snapshot_id for s in t.metadata.snapshots}
    log = metadata_table_rows(t, "metadata_log_entries")
    assert log[-1][1] == t.metadata_location and log[-1][2] == t.metadata.current_snapshot_id
    assert [r[0] for r in metadata_table_rows(t, "entries")].count(2) == 1  # the deleted file's entry


def test_a_catalog_name_inside_a_dotted_key_is_not_a_table_of_ours():
    """``SET spark.sql.catalog.local.type = hadoop`` goes to Spark as written (the console sets catalogs so)."""
    from procedures.frontend import sqlddl

    class Spark:
        def __init__(self):
            self.seen = []

        def sql(self, text):
            self.seen.append(text)
            return "spark's"

    spark = Spark()
    conf = {"spark.sql.catalog.local.type": "hadoop", "spark.sql.catalog.local.warehouse": "/tmp/w"}
    # a SET that only shows a value, and one whose value sqlglot cannot read
    texts = ["SET spark.sql.catalog.local.type", "SET spark.sql.catalog.local.warehouse=/tmp/x"]
    assert [sqlddl.execute(spark, text, conf) for text in texts] == ["spark's", "spark's"]
    assert spark.seen == texts


def test_create_table_with_names_sqlglot_refuses_is_read_by_our_grammar(tmp_path):
    """Spark takes keywords as name parts and nested namespaces; sqlglot does not, our grammar does."""
    from procedures.framework.context import open_catalog
    from procedures.frontend import sqlddl

    class Spark(FakeSession):
        pass

    conf = {"spark.sql.catalog.c.type": "hadoop", "spark.sql.catalog.c.warehouse": str(tmp_path)}
    open_catalog("c", conf).create_namespace(("db",))
    sqlddl.execute(Spark(), "CREATE TABLE c.db.outer (id bigint) USING iceberg", conf)
    assert open_catalog("c", conf).load_table(("db", "outer")).metadata.schema().fields[0].name == "id"


def test_readable_metrics_describe_primitive_columns_by_dotted_name_in_name_order():
    """Java's layout: one struct per primitive leaf (list elements, map keys/values by their path names),
    sorted by name; a variant column (no primitive to Java, no Spark 3.5 type) has none."""
    schema = Schema((
        T.NestedField(1, "z", T.LONG), T.NestedField(2, "v", T.VARIANT),
        T.NestedField(3, "s", T.StructType((T.NestedField(4, "b.c", T.STRING),))),
        T.NestedField(5, "l", T.ListType(6, T.LONG)),
    ))
    md, _ = new_table_metadata(schema=schema, location="/t", format_version=3)
    ddl = metadata_table_schema("files", md)
    metrics = ddl[ddl.index("readable_metrics struct<"):]
    names = [n for n in ("`l.element`", "`s.b.c`", "`z`", "`v`") if n in metrics]
    assert names == ["`l.element`", "`s.b.c`", "`z`"]
    assert metrics.index("`l.element`") < metrics.index("`s.b.c`") < metrics.index("`z`")
