"""Iceberg's DDL through ``procedures.sql`` on tables of our catalogs, compared with Iceberg Java's Spark
SQL (with its SQL extensions) on twin tables: both tables are created and filled by Java, then the same
statement runs on one through Java (``spark.sql``) and on the other through us (``procedures.sql``);
the resulting metadata (schemas, specs, sort orders, refs, properties) must be what Java writes, and
rows written after the change read back the same through Java, PyIceberg and DuckDB."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pytest

import procedures
from procedures.errors import NoSuchRefError, SchemaEvolutionError, ValidationError
from procedures.spark.session import catalog_for
from procedures.spec.partitioning import spec_to_json
from procedures.spec.schema import schema_to_json
from procedures.spec.sorting import sort_order_to_json
from tests.helpers.catalogs import SHARED_KINDS, SharedCatalog, shared_catalog
from tests.oracles import assert_rows_equal, read_all, spark_df_to_arrow

pytestmark = [pytest.mark.spark, pytest.mark.java]

KINDS = [k for k in SHARED_KINDS if k != "postgres"] + ["rest"]


@pytest.fixture()
def cat(request, spark) -> SharedCatalog:
    kind = getattr(request, "param", "hadoop")
    if kind == "rest":
        server = request.getfixturevalue("rest_server")
        spark.conf.set("spark.sql.catalog.orest.type", "rest")
        spark.conf.set("spark.sql.catalog.orest.uri", server.uri)
        spark.conf.set("spark.sql.catalog.jrest", "org.apache.iceberg.spark.SparkCatalog")
        spark.conf.set("spark.sql.catalog.jrest.type", "rest")
        spark.conf.set("spark.sql.catalog.jrest.uri", server.uri)
        shared = SharedCatalog("rest", "jrest", "orest", catalog_for(spark, "orest"))
    else:
        shared = shared_catalog(spark, kind, request)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {shared.java}.ddl")
    return shared


class Twins:
    """``<java catalog>.ddl.<name>_j`` changed by Java and ``<our catalog>.ddl.<name>_o`` changed by us."""

    def __init__(self, spark: Any, cat: SharedCatalog, columns: str, *, partitioned_by: str = "", fv: int = 2,
                 rows: str | None = None, props: str = "") -> None:
        self.spark, self.cat = spark, cat
        self.name = f"t{uuid.uuid4().hex[:8]}"
        for n in (self.java, self.ours_in_java):
            spark.sql(f"CREATE TABLE {n} ({columns}) USING iceberg"
                      + (f" PARTITIONED BY ({partitioned_by})" if partitioned_by else "")
                      + f" TBLPROPERTIES ('format-version'='{fv}'{', ' + props if props else ''})")
            if rows:
                spark.sql(f"INSERT INTO {n} VALUES {rows}")

    @property
    def java(self) -> str:
        return f"{self.cat.java}.ddl.{self.name}_j"

    @property
    def ours_in_java(self) -> str:
        return f"{self.cat.java}.ddl.{self.name}_o"

    @property
    def ours(self) -> str:
        return f"{self.cat.ours}.ddl.{self.name}_o"

    def run(self, statement: str) -> None:
        """``statement`` (``{t}`` for the table) on both tables: Java's, then ours."""
        self.spark.sql(statement.format(t=self.java))
        procedures.sql(self.spark, statement.format(t=self.ours))

    def table(self, which: str) -> Any:
        return self.cat.catalog.load_table(("ddl", f"{self.name}_{which}"))

    def assert_same_metadata(self) -> None:
        assert shape(self.table("o").metadata) == shape(self.table("j").metadata)

    def refused(self, statement: str, error: type = ValidationError, match: str | None = None) -> None:
        """Java refuses ``statement`` and so do we, with a typed error, our table left as it was."""
        with pytest.raises(Exception):
            self.spark.sql(statement.format(t=self.java))
        before = self.table("o").metadata_location
        with pytest.raises(error, match=match) as e:
            procedures.sql(self.spark, statement.format(t=self.ours))
        assert "__procedures_" not in str(e.value) and "at org.apache" not in str(e.value)
        assert self.table("o").metadata_location == before

    def write_and_read(self, values: str) -> None:
        """``INSERT INTO`` both (Java's by Java, ours by us), then our table read by Java, PyIceberg and
        DuckDB equals Java's table read by Java."""
        self.spark.sql(f"INSERT INTO {self.java} VALUES {values}")
        procedures.sql(self.spark, f"INSERT INTO {self.ours} VALUES {values}")
        expected = spark_df_to_arrow(self.spark.table(self.java))
        t = self.table("o")
        for reader, got in read_all(self.spark, t.metadata_location, t.metadata_location).items():
            assert_rows_equal(got, expected, label=reader)


def _ref_shape(md, ref) -> tuple:
    order = [s.snapshot_id for s in sorted(md.snapshots, key=lambda s: s.sequence_number)]
    return (ref.ref_type.value, order.index(ref.snapshot_id), ref.min_snapshots_to_keep, ref.max_snapshot_age_ms,
            ref.max_ref_age_ms)


#: the snapshot summary keys a DDL statement decides (the writers' own keys aside)
#: (file counts follow Spark's task split, which differs between two writers of the same rows)
_DECIDED = ("operation", "added-records", "deleted-records", "total-records")


def _summary(summary: dict) -> dict:
    return {k: summary.get(k) for k in _DECIDED}


def shape(md) -> dict:
    """What Java's DDL decides in a table's metadata (no uuids, paths, times or snapshot ids)."""
    return {
        "format_version": md.format_version,
        "schemas": [schema_to_json(s) for s in md.schemas],
        "current_schema_id": md.current_schema_id,
        "last_column_id": md.last_column_id,
        "specs": [spec_to_json(s) for s in md.partition_specs],
        "default_spec_id": md.default_spec_id,
        "last_partition_id": md.last_partition_id,
        "sort_orders": [sort_order_to_json(o) for o in md.sort_orders],
        "default_sort_order_id": md.default_sort_order_id,
        "properties": dict(md.properties),
        "refs": {name: _ref_shape(md, ref) for name, ref in md.refs.items()},
        "snapshots": [_summary(s.summary) for s in sorted(md.snapshots, key=lambda s: s.sequence_number)],
    }


# ---------------------------------------------------------------------------------- every catalog
@pytest.mark.parametrize("cat", KINDS, indirect=True)
def test_one_statement_of_each_family_on_each_catalog(spark, cat):
    tw = Twins(spark, cat, "id bigint NOT NULL, data string, ts timestamp",
               rows="(1, 'a', timestamp'2024-01-01 10:00:00'), (2, 'b', timestamp'2024-01-02 11:00:00')")
    for statement in [
        "ALTER TABLE {t} SET TBLPROPERTIES ('k1' = 'v1', 'write.metadata.previous-versions-max' = '7')",
        "ALTER TABLE {t} UNSET TBLPROPERTIES ('k1')",
        # at the end: the Hive metastore refuses a column of another type moving into an old position
        "ALTER TABLE {t} ADD COLUMN extra int COMMENT 'new'",
        "ALTER TABLE {t} ALTER COLUMN extra TYPE bigint",
        "ALTER TABLE {t} ADD PARTITION FIELD days(ts)",
        "ALTER TABLE {t} WRITE ORDERED BY id DESC NULLS LAST",
        "ALTER TABLE {t} SET IDENTIFIER FIELDS id",
        "ALTER TABLE {t} CREATE BRANCH audit RETAIN 3 DAYS WITH SNAPSHOT RETENTION 2 SNAPSHOTS",
        "ALTER TABLE {t} CREATE TAG v1",
    ]:
        tw.run(statement)
        tw.assert_same_metadata()
    tw.write_and_read("(3, 'c', timestamp'2024-01-03 12:00:00', 30)")
    if cat.kind != "hadoop":
        new = f"{tw.name}_renamed"
        # Spark takes the new name within the table's catalog: namespace.table
        spark.sql(f"ALTER TABLE {tw.java} RENAME TO ddl.{new}_j")
        procedures.sql(spark, f"ALTER TABLE {tw.ours} RENAME TO ddl.{new}_o")
        tw.name = new
        tw.assert_same_metadata()
    # CREATE TABLE ... AS SELECT and REPLACE TABLE ... AS SELECT, each statement on its own side
    ctas = f"t{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE TABLE {cat.java}.ddl.{ctas}_j USING iceberg PARTITIONED BY (bucket(4, id)) "
              f"AS SELECT id, data FROM {tw.java}")
    procedures.sql(spark, f"CREATE TABLE {cat.ours}.ddl.{ctas}_o USING iceberg PARTITIONED BY (bucket(4, id)) "
                          f"AS SELECT id, data FROM {tw.ours}")
    tw2 = Twins.__new__(Twins)
    tw2.spark, tw2.cat, tw2.name = spark, cat, ctas
    uuid_before = tw2.table("o").metadata.table_uuid
    spark.sql(f"REPLACE TABLE {cat.java}.ddl.{ctas}_j USING iceberg AS SELECT id, data, id * 2 AS twice FROM {tw.java}")
    procedures.sql(spark, f"REPLACE TABLE {cat.ours}.ddl.{ctas}_o USING iceberg "
                          f"AS SELECT id, data, id * 2 AS twice FROM {tw.ours}")
    assert _ctas_shape(tw2.table("o").metadata) == _ctas_shape(tw2.table("j").metadata)
    assert tw2.table("o").metadata.table_uuid == uuid_before
    expected = spark_df_to_arrow(spark.table(tw2.java))
    t = tw2.table("o")
    for reader, got in read_all(spark, t.metadata_location, t.metadata_location).items():
        assert_rows_equal(got, expected, label=reader)


def _ctas_shape(md) -> dict:
    out = shape(md)
    # Java's Spark catalog adds its own keys on create (owner, codec; on REST the server's created-at
    # for Java's create request); ours has those the statement asked for
    out["properties"] = {k: v for k, v in out["properties"].items()
                         if k not in ("owner", "write.parquet.compression-codec", "created-at")}
    return out


# ---------------------------------------------------------------------------------- columns
def test_column_changes_match_java(spark, cat):
    tw = Twins(spark, cat, "id bigint NOT NULL, data string, f float, d decimal(9, 2), "
                           "point struct<x: int, y: int>, tags array<string>",
               rows="(1, 'a', 1.5, 1.25, named_struct('x', 1, 'y', 2), array('t'))")
    for statement in [
        "ALTER TABLE {t} ADD COLUMNS (c1 int, c2 string COMMENT 'second' FIRST)",
        "ALTER TABLE {t} ADD COLUMN point.z double AFTER x",
        "ALTER TABLE {t} ADD COLUMN s struct<a: int, b: map<string, int>>",
        "ALTER TABLE {t} ALTER COLUMN c1 TYPE bigint",
        "ALTER TABLE {t} ALTER COLUMN f TYPE double",
        "ALTER TABLE {t} ALTER COLUMN d TYPE decimal(18, 2)",
        "ALTER TABLE {t} ALTER COLUMN point.x TYPE bigint",
        "ALTER TABLE {t} ALTER COLUMN data COMMENT 'the data'",
        "ALTER TABLE {t} ALTER COLUMN id DROP NOT NULL",
        "ALTER TABLE {t} ALTER COLUMN data FIRST",
        "ALTER TABLE {t} ALTER COLUMN point.y AFTER x",
        "ALTER TABLE {t} RENAME COLUMN point.x TO px",
        "ALTER TABLE {t} RENAME COLUMN c1 TO count1",
        "ALTER TABLE {t} DROP COLUMN point.z",
        "ALTER TABLE {t} DROP COLUMNS c2, s",
    ]:
        tw.run(statement)
        tw.assert_same_metadata()
    tw.write_and_read("('b', 2, 2.5, 3.50, named_struct('px', 3, 'y', 4), array('u'), 7)")


def test_refused_column_changes_leave_the_table_unchanged(spark, cat):
    tw = Twins(spark, cat, "id bigint NOT NULL, data string, n int, ts timestamp", partitioned_by="days(ts)",
               rows="(1, 'a', 1, timestamp'2024-01-01 10:00:00')")
    tw.run("ALTER TABLE {t} SET IDENTIFIER FIELDS id")
    tw.refused("ALTER TABLE {t} ALTER COLUMN data TYPE int", SchemaEvolutionError, "data")
    tw.refused("ALTER TABLE {t} ALTER COLUMN n TYPE string", SchemaEvolutionError, "n")
    tw.refused("ALTER TABLE {t} ALTER COLUMN id TYPE int", SchemaEvolutionError, "id")
    tw.refused("ALTER TABLE {t} DROP COLUMN nope", SchemaEvolutionError, "nope")
    tw.refused("ALTER TABLE {t} ADD COLUMN data string", SchemaEvolutionError, "data")
    tw.refused("ALTER TABLE {t} ADD COLUMN req int NOT NULL", SchemaEvolutionError, "req")
    tw.refused("ALTER TABLE {t} ALTER COLUMN n SET NOT NULL", SchemaEvolutionError, "n")
    tw.refused("ALTER TABLE {t} DROP COLUMN id", SchemaEvolutionError, "identifier field 'id'")
    tw.refused("ALTER TABLE {t} DROP COLUMN ts", SchemaEvolutionError, "ts")
    tw.refused("ALTER TABLE {t} RENAME COLUMN data TO n", SchemaEvolutionError, "n")
    tw.assert_same_metadata()


# ---------------------------------------------------------------------------------- partition evolution
@pytest.mark.parametrize("fv", [1, 2])
def test_partition_evolution_matches_java(spark, cat, fv):
    tw = Twins(spark, cat, "id bigint, data string, ts timestamp, cat string", partitioned_by="cat", fv=fv,
               rows="(1, 'a', timestamp'2024-01-01 10:00:00', 'x')")
    for statement in [
        "ALTER TABLE {t} ADD PARTITION FIELD bucket(16, id)",
        "ALTER TABLE {t} ADD PARTITION FIELD truncate(4, data) AS prefix",
        "ALTER TABLE {t} ADD PARTITION FIELD days(ts)",
        "ALTER TABLE {t} REPLACE PARTITION FIELD ts_day WITH hours(ts)",
        "ALTER TABLE {t} DROP PARTITION FIELD bucket(16, id)",
        "ALTER TABLE {t} DROP PARTITION FIELD prefix",
        "ALTER TABLE {t} REPLACE PARTITION FIELD cat WITH bucket(8, cat) AS cat_bucket",
        "ALTER TABLE {t} ADD PARTITION FIELD bucket(16, id)",
    ]:
        tw.run(statement)
        tw.assert_same_metadata()
    tw.refused("ALTER TABLE {t} ADD PARTITION FIELD bucket(16, id)", ValidationError, "duplicate")
    tw.refused("ALTER TABLE {t} DROP PARTITION FIELD nope", ValidationError, "nope")
    tw.refused("ALTER TABLE {t} DROP PARTITION FIELD truncate(3, data)", ValidationError, "truncate")
    # Java lets a day field join an hour field of the same column (its evolved specs skip that check)
    tw.run("ALTER TABLE {t} ADD PARTITION FIELD days(ts)")
    tw.assert_same_metadata()
    tw.write_and_read("(2, 'bbbbb', timestamp'2024-02-01 01:00:00', 'y')")


# ---------------------------------------------------------------------------------- write order
def test_write_order_and_distribution_match_java(spark, cat):
    tw = Twins(spark, cat, "id bigint, data string, ts timestamp", partitioned_by="days(ts)",
               props="'write.distribution-mode'='hash'")
    for statement in [
        "ALTER TABLE {t} WRITE ORDERED BY id",
        "ALTER TABLE {t} WRITE ORDERED BY data DESC, bucket(4, id) ASC NULLS LAST, days(ts)",
        "ALTER TABLE {t} WRITE LOCALLY ORDERED BY id DESC",
        "ALTER TABLE {t} WRITE DISTRIBUTED BY PARTITION",
        "ALTER TABLE {t} WRITE DISTRIBUTED BY PARTITION LOCALLY ORDERED BY truncate(2, data)",
        "ALTER TABLE {t} WRITE UNORDERED",
        "ALTER TABLE {t} WRITE ORDERED BY data DESC, bucket(4, id) ASC NULLS LAST, days(ts)",
    ]:
        tw.run(statement)
        tw.assert_same_metadata()
    tw.refused("ALTER TABLE {t} WRITE ORDERED BY nope", ValidationError, "nope")
    tw.refused("ALTER TABLE {t} SET TBLPROPERTIES ('sort-order' = 'id')", ValidationError, "WRITE ORDERED BY")
    tw.write_and_read("(1, 'a', timestamp'2024-01-01 10:00:00'), (2, 'b', timestamp'2024-01-01 11:00:00')")


# ---------------------------------------------------------------------------------- identifier fields
def test_identifier_fields_match_java(spark, cat):
    tw = Twins(spark, cat, "id bigint NOT NULL, k string NOT NULL, data string, s struct<n: int NOT NULL> NOT NULL")
    for statement in [
        "ALTER TABLE {t} SET IDENTIFIER FIELDS id, k",
        "ALTER TABLE {t} DROP IDENTIFIER FIELDS k",
        "ALTER TABLE {t} SET IDENTIFIER FIELDS id, s.n",
        "ALTER TABLE {t} DROP IDENTIFIER FIELDS id, s.n",
    ]:
        tw.run(statement)
        tw.assert_same_metadata()
    tw.refused("ALTER TABLE {t} SET IDENTIFIER FIELDS data", SchemaEvolutionError, "data")
    tw.refused("ALTER TABLE {t} DROP IDENTIFIER FIELDS k", ValidationError, "not an identifier field")
    tw.write_and_read("(1, 'k', 'a', named_struct('n', 1))")


# ---------------------------------------------------------------------------------- branches and tags
def test_branches_and_tags_match_java(spark, cat):
    tw = Twins(spark, cat, "id bigint, data string", rows="(1, 'a')")
    spark.sql(f"INSERT INTO {tw.java} VALUES (2, 'b')")
    procedures.sql(spark, f"INSERT INTO {tw.ours} VALUES (2, 'b')")
    first_o = min((s for s in tw.table("o").metadata.snapshots), key=lambda s: s.sequence_number).snapshot_id
    first_j = min((s for s in tw.table("j").metadata.snapshots), key=lambda s: s.sequence_number).snapshot_id
    for clause in [
        "CREATE BRANCH b1",
        "CREATE BRANCH IF NOT EXISTS b1 RETAIN 1 DAYS",
        "CREATE OR REPLACE BRANCH b2 AS OF VERSION {first} RETAIN 2 HOURS WITH SNAPSHOT RETENTION 3 SNAPSHOTS 4 DAYS",
        "REPLACE BRANCH b1 AS OF VERSION {first} WITH SNAPSHOT RETENTION 5 MINUTES",
        "CREATE TAG t1 AS OF VERSION {first} RETAIN 10 DAYS",
        "CREATE OR REPLACE TAG t1 RETAIN 11 DAYS",
        "CREATE TAG IF NOT EXISTS t1",
        "DROP BRANCH b2",
        "DROP BRANCH IF EXISTS nope",
        "DROP TAG IF EXISTS t1",
    ]:
        spark.sql(f"ALTER TABLE {tw.java} " + clause.format(first=first_j))
        procedures.sql(spark, f"ALTER TABLE {tw.ours} " + clause.format(first=first_o))
        tw.assert_same_metadata()
    tw.refused("ALTER TABLE {t} CREATE BRANCH b1", ValidationError, "b1")
    tw.refused("ALTER TABLE {t} DROP BRANCH nope", NoSuchRefError, "nope")
    tw.refused("ALTER TABLE {t} DROP BRANCH main", ValidationError, "main")
    tw.refused("ALTER TABLE {t} CREATE TAG t9 AS OF VERSION 12345", Exception, "12345")
    # a branch on a table without snapshots: Java gives it an empty snapshot of its own
    empty = Twins(spark, cat, "id bigint")
    empty.run("ALTER TABLE {t} CREATE BRANCH dev")
    empty.assert_same_metadata()


# ---------------------------------------------------------------------------------- properties
def test_properties_match_java(spark, cat):
    tw = Twins(spark, cat, "id bigint", rows="(1)")
    for statement in [
        "ALTER TABLE {t} SET TBLPROPERTIES ('a' = '1', 'b' = '2', 'commit.retry.num-retries' = '7')",
        "ALTER TABLE {t} SET TBLPROPERTIES ('a' = '3')",
        "ALTER TABLE {t} UNSET TBLPROPERTIES ('b')",
        "ALTER TABLE {t} UNSET TBLPROPERTIES IF EXISTS ('b', 'zz')",
        "ALTER TABLE {t} SET TBLPROPERTIES ('format-version' = '3')",
    ]:
        tw.run(statement)
        tw.assert_same_metadata()
    tw.write_and_read("(2)")


# ---------------------------------------------------------------------------------- CTAS / REPLACE
@pytest.mark.parametrize("fv", [1, 2])
def test_replace_table_keeps_history_as_java(spark, cat, fv):
    tw = Twins(spark, cat, "id bigint, data string, ts timestamp", partitioned_by="bucket(4, id)", fv=fv,
               rows="(1, 'a', timestamp'2024-01-01 10:00:00')")
    tw.run("ALTER TABLE {t} CREATE TAG before_replace")
    uuid_before = tw.table("o").metadata.table_uuid
    tw.run("REPLACE TABLE {t} (id bigint, extra string, ts timestamp) USING iceberg PARTITIONED BY (days(ts)) "
           "TBLPROPERTIES ('r' = 'x')")
    tw.assert_same_metadata()
    assert tw.table("o").metadata.table_uuid == uuid_before
    assert procedures.sql(spark, f"SELECT count(*) FROM {tw.ours}").first()[0] == 0
    tw.run("CREATE OR REPLACE TABLE {t} USING iceberg PARTITIONED BY (bucket(4, id)) "
           "AS SELECT 5 AS id, 'e' AS data, timestamp'2024-03-01 00:00:00' AS ts")
    tw.assert_same_metadata()
    assert tw.table("o").metadata.table_uuid == uuid_before
    tw.write_and_read("(6, 'f', timestamp'2024-03-02 00:00:00')")


@pytest.mark.parametrize("fv", [1, 2, 3])
def test_replace_table_dropping_a_partition_source_matches_java(spark, cat, fv):
    """REPLACE TABLE / CREATE OR REPLACE whose schema drops a column the current spec and sort order use:
    Java keeps the old spec and order in the metadata (naming the dropped column) and makes the new
    ones current; so do we.  On v1, whose specs cannot drop fields, the new spec carries the old field
    as a ``void`` transform of the dropped column (its partition values null)."""
    tw = Twins(spark, cat, "id bigint, data string, ts timestamp", partitioned_by="days(ts)", fv=fv,
               rows="(1, 'a', timestamp'2024-01-01 10:00:00')")
    tw.run("ALTER TABLE {t} WRITE ORDERED BY data")
    tw.run("REPLACE TABLE {t} (id bigint, extra string) USING iceberg PARTITIONED BY (bucket(4, id))")
    tw.assert_same_metadata()
    tw.run("CREATE OR REPLACE TABLE {t} USING iceberg AS SELECT 5 AS id")
    tw.assert_same_metadata()
    tw.write_and_read("(6)")
    if fv == 1:
        # partitioned again beside the void field of the dropped column: Java's writers cannot bind
        # that field ("Cannot build accessor") and fail the insert; ours write null for it, and Java,
        # PyIceberg and DuckDB read the rows
        tw.run("REPLACE TABLE {t} (id bigint) USING iceberg PARTITIONED BY (bucket(4, id))")
        tw.assert_same_metadata()
        with pytest.raises(Exception, match="Cannot build accessor"):
            spark.sql(f"INSERT INTO {tw.java} VALUES (7), (8)")
        procedures.sql(spark, f"INSERT INTO {tw.ours} VALUES (7), (8)")
        expected = pa.table({"id": pa.array([7, 8], pa.int64())})
        t = tw.table("o")
        for reader, got in read_all(spark, t.metadata_location, t.metadata_location).items():
            assert_rows_equal(got, expected, label=reader)


@pytest.mark.parametrize("cat", ["hadoop", "sqlite"], indirect=True)
def test_create_table_as_select_matches_java(spark, cat):
    src = Twins(spark, cat, "id bigint, data string, n smallint", rows="(1, 'a', 1), (2, 'b', 2)")
    name = f"t{uuid.uuid4().hex[:8]}"
    # a path-based (hadoop) table cannot live anywhere but its path: LOCATION on the JDBC catalog only
    statement = ("CREATE TABLE {t} USING iceberg PARTITIONED BY (truncate(1, data)) "
                 + ("LOCATION '{loc}' " if cat.kind != "hadoop" else "")
                 + "TBLPROPERTIES ('p' = 'q', 'format-version' = '2') "
                 "AS SELECT id, data, n, CAST(id AS decimal(10, 2)) AS amount FROM {src} WHERE id > 0")
    locations = {}
    for which, catalog, source, run in [("j", cat.java, src.java, spark.sql),
                                        ("o", cat.ours, src.ours, lambda q: procedures.sql(spark, q))]:
        loc = f"{cat.catalog.default_table_location(('ddl', name + '_x' + which))}"
        locations[which] = loc
        run(statement.format(t=f"{catalog}.ddl.{name}_{which}", loc=loc, src=source))
    tw = Twins.__new__(Twins)
    tw.spark, tw.cat, tw.name = spark, cat, name
    assert _ctas_shape(tw.table("o").metadata) == _ctas_shape(tw.table("j").metadata)
    if cat.kind != "hadoop":
        assert tw.table("o").metadata.location == locations["o"]
    tw.refused("CREATE TABLE {t} AS SELECT 1 AS id", Exception, "already exists")
    tw.write_and_read("(3, 'c', 3, 3.00)")
