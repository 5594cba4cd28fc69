"""Reads through ``procedures.sql`` on tables of our catalogs, against Iceberg Java's Spark SQL (issue 35):
time travel (``VERSION AS OF``, ``TIMESTAMP AS OF``, ``FOR SYSTEM_VERSION/SYSTEM_TIME AS OF``), the
``branch_``/``tag_`` selectors, every metadata table, ``SHOW NAMESPACES/TABLES/TBLPROPERTIES/CREATE
TABLE`` and ``DESCRIBE [EXTENDED]``.

Java and we read the SAME table: Java through its Spark catalog (``spark.sql``), we through ours on the
same warehouse, metastore, database or REST server (``procedures.sql``), so snapshot ids, paths and
times are equal and every value is compared, Java's derived ``readable_metrics`` column too."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import procedures
from procedures.core.kernel.operations import RowDelta
from procedures.core.kernel.scan import plan_files
from procedures.core.kernel.transaction import commit
from procedures.errors import NoSuchTableError, UnsupportedStatementError, ValidationError
from procedures.io.arrow_schema import schema_to_arrow
from procedures.io.delete_writers import POSITION_DELETE_SCHEMA
from procedures.io.parquet_writer import FULL, MetricsConfig, ParquetFileWriter, WriteSettings
from procedures.spec.manifest.model import FileContent
from procedures.spec.metadata_columns import delete_file_row
from procedures.spec.partitioning import PartitionSpec
from procedures.spec.schema import Schema
from tests.helpers.catalogs import shared_catalog

pytestmark = pytest.mark.spark

METADATA_TABLES = ("snapshots", "history", "refs", "metadata_log_entries", "manifests", "all_manifests", "files",
                   "data_files", "delete_files", "all_files", "all_data_files", "all_delete_files", "entries",
                   "all_entries", "partitions", "position_deletes")


#: the statements Iceberg Java failed on (printed; ours answered them)
JAVA_FAILS: list[str] = []


def _rows(df) -> list[tuple]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def _schema(df) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in df.schema.fields]


def _compare(spark, text: str, java: str, ours: str) -> list[str]:
    """Differences between Java's answer to ``text`` (``{cat}`` = its catalog) and ours.  Where Iceberg
    Java 1.10.2 itself fails (time travel on a files table of a bucketed spec: "Cannot find source
    column for partition field"), ours must still answer."""
    got = procedures.sql(spark, text.format(cat=ours))
    try:
        want = spark.sql(text.format(cat=java))
        want.collect()
    except Exception as e:  # noqa: BLE001 -- Java's failure is reported, ours is still read
        JAVA_FAILS.append(f"{text}: {str(e).splitlines()[0][:200]}")
        got.collect()
        return []
    if _schema(got) != _schema(want):
        return [f"{text}: schema {_schema(got)} != Java's {_schema(want)}"]
    w = [tuple(str(v).replace(java, "<cat>") if isinstance(v, str) else v for v in r) for r in _rows(want)]
    g = [tuple(str(v).replace(ours, "<cat>") if isinstance(v, str) else v for v in r) for r in _rows(got)]
    if g != w:
        return [f"{text}:\n  ours {g}\n  Java {w}"]
    return []


def _java_table(spark, java: str, ns: str, name: str, version: int = 2) -> None:
    """A partitioned merge-on-read table written by Java: two appends, a delete of one row of a file
    (a position delete or, on v3, a DV), a branch with a commit of its own and a tag."""
    t = f"{java}.{ns}.{name}"
    spark.sql(f"DROP TABLE IF EXISTS {t}")
    spark.sql(f"CREATE TABLE {t} (id bigint NOT NULL COMMENT 'the id', data string, ts timestamp) USING iceberg "
              f"PARTITIONED BY (bucket(4, id), days(ts)) TBLPROPERTIES ('format-version'='{version}', "
              "'write.delete.mode'='merge-on-read')")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a', timestamp'2024-01-01 10:00:00'), (5, 'e', timestamp'2024-01-01 11:00:00')")
    spark.sql(f"INSERT INTO {t} VALUES (2, 'b', timestamp'2024-01-02 00:00:00')")
    spark.sql(f"DELETE FROM {t} WHERE id = 1")
    spark.sql(f"ALTER TABLE {t} CREATE TAG t1")
    spark.sql(f"ALTER TABLE {t} CREATE BRANCH b1")
    spark.sql(f"INSERT INTO {t}.branch_b1 VALUES (3, 'c', timestamp'2024-01-03 00:00:00')")


def _reads(spark, cat, ns: str, name: str) -> list[str]:
    t = "{cat}." + f"{ns}.{name}"
    first = spark.sql(f"SELECT snapshot_id, committed_at FROM {cat.java}.{ns}.{name}.snapshots "
                      "ORDER BY committed_at").collect()
    after_first = (first[0].committed_at + dt.timedelta(milliseconds=1)).strftime("%Y-%m-%d %H:%M:%S.%f")
    queries = [
        f"SELECT * FROM {t}",
        f"SELECT * FROM {t} VERSION AS OF {first[0].snapshot_id}",
        f"SELECT * FROM {t} VERSION AS OF 't1'",
        f"SELECT * FROM {t} VERSION AS OF 'b1'",
        f"SELECT * FROM {t} FOR SYSTEM_VERSION AS OF {first[1].snapshot_id}",
        f"SELECT * FROM {t} TIMESTAMP AS OF '{after_first}'",
        f"SELECT * FROM {t} FOR SYSTEM_TIME AS OF '{after_first}'",
        f"SELECT * FROM {t}.branch_b1",
        f"SELECT * FROM {t}.tag_t1",
        f"SELECT * FROM {t}.snapshot_id_{first[0].snapshot_id}",
        # joins, CTEs, subqueries and set operations over time travel and metadata tables
        f"WITH s AS (SELECT snapshot_id FROM {t}.snapshots) SELECT a.id, s.snapshot_id FROM {t} a "
        f"JOIN {t}.branch_b1 b ON a.id = b.id CROSS JOIN s WHERE a.id IN (SELECT id FROM {t} VERSION AS OF 't1')",
        f"SELECT id FROM {t} UNION ALL SELECT id FROM {t} VERSION AS OF {first[0].snapshot_id}",
        f"SELECT {name}.id FROM {t} WHERE {name}.id > 1",
    ]
    queries += [f"SELECT * FROM {t}.{m}" for m in METADATA_TABLES]
    # the metadata tables Java reads from one snapshot, time travelled
    queries += [f"SELECT * FROM {t}.{m} VERSION AS OF {first[0].snapshot_id}"
                for m in ("files", "entries", "manifests", "partitions", "position_deletes")]
    queries += [f"SELECT * FROM {t}.files VERSION AS OF 'b1'"]
    out = []
    for q in queries:
        out += _compare(spark, q, cat.java, cat.ours)
    print("\n".join(JAVA_FAILS))
    return out


def _shows(spark, cat, ns: str, name: str) -> list[str]:
    t = "{cat}." + f"{ns}.{name}"
    queries = [
        "SHOW NAMESPACES IN {cat}", f"SHOW TABLES IN {{cat}}.{ns}", f"SHOW TABLES IN {{cat}}.{ns} LIKE '{name[:3]}*'",
        f"SHOW TBLPROPERTIES {t}", f"SHOW TBLPROPERTIES {t} ('format-version')", f"SHOW TBLPROPERTIES {t} ('nope')",
        f"SHOW CREATE TABLE {t}", f"DESCRIBE {t}", f"DESCRIBE TABLE {t}", f"DESCRIBE EXTENDED {t}",
        f"DESC TABLE EXTENDED {t}.snapshots",
    ]
    out = []
    for q in queries:
        out += _compare(spark, q, cat.java, cat.ours)
    return out


def _describe_metadata_tables(spark, cat, ns: str, name: str) -> list[str]:
    """DESCRIBE of every metadata table: Java's names, types and column comments (the spec's field docs
    Java's metadata table schemas carry: those of the data file fields, the partition counts, the
    position delete columns, ``readable_metrics``)."""
    out = []
    for m in METADATA_TABLES:
        out += _compare(spark, f"DESCRIBE {{cat}}.{ns}.{name}.{m}", cat.java, cat.ours)
    return out


@pytest.mark.java
@pytest.mark.parametrize("version", [2, 3])
def test_reads_and_metadata_tables_equal_java(spark, request, version):
    cat = shared_catalog(spark, "hadoop", request)
    _java_table(spark, cat.java, "db", f"reads_v{version}", version)
    assert _reads(spark, cat, "db", f"reads_v{version}") == []


@pytest.mark.java
@pytest.mark.parametrize("version", [2, 3])
def test_describe_metadata_tables_equal_java(spark, request, version):
    cat = shared_catalog(spark, "hadoop", request)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {cat.java}.descdb")
    _java_table(spark, cat.java, "descdb", f"desc_v{version}", version)
    problems = _describe_metadata_tables(spark, cat, "descdb", f"desc_v{version}")
    # an unpartitioned table: the metadata tables have no partition column
    t = f"{cat.java}.descdb.flat_v{version}"
    spark.sql(f"DROP TABLE IF EXISTS {t}")
    spark.sql(f"CREATE TABLE {t} (id bigint, data string) USING iceberg TBLPROPERTIES ('format-version'='{version}')")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a')")
    problems += _describe_metadata_tables(spark, cat, "descdb", f"flat_v{version}")
    assert problems == [], "\n".join(problems)


@pytest.mark.java
@pytest.mark.parametrize("version", [2, 3])
def test_readable_metrics_equal_java(spark, request, version):
    """``readable_metrics`` of the file and entries tables, Java's on the same table: one struct per
    primitive column (nested ones by their dotted names, list elements and map keys/values, in name
    order), bounds decoded to every type Spark reads (float NaN counted, decimal, date, timestamps with
    and without zone, binary, boolean), and nulls for a delete file's row, whose metrics are its own."""
    cat = shared_catalog(spark, "hadoop", request)
    t = f"{cat.java}.db.metrics_v{version}"
    spark.sql(f"DROP TABLE IF EXISTS {t}")
    spark.sql(f"CREATE TABLE {t} (id bigint NOT NULL, f float, d double, dec decimal(10,2), ts timestamp, dt date, "
              "s struct<x:int, `y.z`:string>, m map<string,int>, l array<int>, b binary, bo boolean, "
              f"tn timestamp_ntz, Up int) USING iceberg PARTITIONED BY (bucket(4, id)) "
              f"TBLPROPERTIES ('format-version'='{version}', 'write.delete.mode'='merge-on-read')")
    spark.sql(f"INSERT INTO {t} VALUES (1, float('NaN'), 1.5, 3.25, timestamp'2024-01-01 10:00:00', date'2024-01-01', "
              "named_struct('x', 1, 'y.z', 'a'), map('k', 1), array(1, 2), X'0102', true, "
              "timestamp_ntz'2024-01-01 00:00:00', 7), (2, 1.0, null, null, null, null, null, null, null, null, "
              "null, null, null), (9, -2.5, -1.0, -7.5, timestamp'2023-05-01 00:00:00', date'1969-12-31', "
              "named_struct('x', -3, 'y.z', 'zz'), map('a', 2), array(), X'ff', false, "
              "timestamp_ntz'1999-01-01 00:00:00', -1)")
    spark.sql(f"DELETE FROM {t} WHERE id = 2")
    problems = []
    for m in ("files", "data_files", "delete_files", "all_files", "all_data_files", "all_delete_files",
              "entries", "all_entries"):
        problems += _compare(spark, f"SELECT * FROM {{cat}}.db.metrics_v{version}.{m}", cat.java, cat.ours)
        problems += _compare(spark, f"SELECT readable_metrics.`s.y.z`.upper_bound, readable_metrics.f "
                                    f"FROM {{cat}}.db.metrics_v{version}.{m}", cat.java, cat.ours)
    assert problems == []


def _delete_file_with_rows(table, data_file, positions: list[int]):
    """A position delete file of ``positions`` in ``data_file`` that stores the deleted rows in the
    spec's optional ``row`` column (Spark's writers never do; other writers may), as our writer writes
    a delete file's other columns."""
    md = table.metadata
    row = delete_file_row(md.schema().as_struct())
    schema = Schema((*POSITION_DELETE_SCHEMA.fields, row))
    data = pq.read_table(data_file.file_path.removeprefix("file:")).to_pylist()
    arrow = schema_to_arrow(schema)
    rows = pa.Table.from_pylist([{"file_path": data_file.file_path, "pos": p, "row": data[p]} for p in positions],
                                schema=arrow)
    path = f"{md.location}/data/rows-{uuid.uuid4().hex}-deletes.parquet"
    settings = WriteSettings(schema=schema, spec=PartitionSpec(data_file.spec_id, ()), data_path="",
                             metrics=MetricsConfig(FULL))
    writer = ParquetFileWriter(table.io, path, settings, tuple(data_file.partition))
    writer.write(rows)
    return dataclasses.replace(writer.close(), content=FileContent.POSITION_DELETES, sort_order_id=None,
                               spec_id=data_file.spec_id, referenced_data_file=data_file.file_path)


@pytest.mark.java
def test_position_deletes_row_equal_java(spark, request):
    """``position_deletes.row`` holds the deleted row when the delete file stores it, projected onto
    the table's current schema (a column added since is null), as Java reads it; a delete file written
    by Spark (no ``row`` column) still gives null."""
    cat = shared_catalog(spark, "hadoop", request)
    t = f"{cat.java}.db.pos_rows"
    spark.sql(f"DROP TABLE IF EXISTS {t}")
    # no map column: Java 1.10.2 fails to read position_deletes of a table with one ("Invalid partition
    # field parent: map<string, int>")
    spark.sql(f"CREATE TABLE {t} (id bigint NOT NULL, data string, ts timestamp, dec decimal(9,2), "
              "s struct<x:int, l:array<string>>) USING iceberg PARTITIONED BY (bucket(2, id)) "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a', timestamp'2024-01-01 10:00:00', 1.25, named_struct('x', 1, 'l', "
              "array('p', 'q'))), (2, 'b', null, null, null), (3, 'c', timestamp'2023-01-01 00:00:00', -2.5, "
              "named_struct('x', null, 'l', array())), (4, 'd', null, 0.5, named_struct('x', 4, 'l', null))")
    spark.sql(f"DELETE FROM {t} WHERE id = 4")  # Spark's delete file: no rows stored
    table = cat.catalog.load_table(("db", "pos_rows"))
    positions = {task.data_file: sorted({0, task.data_file.record_count - 1})
                 for task in plan_files(table.metadata, table.io)}
    deletes = [_delete_file_with_rows(table, f, p) for f, p in positions.items()]
    commit(table, [RowDelta(add_deletes=deletes)])
    spark.sql(f"ALTER TABLE {t} ADD COLUMN added int")
    spark.sql(f"REFRESH TABLE {t}")
    problems = _compare(spark, "SELECT * FROM {cat}.db.pos_rows.position_deletes", cat.java, cat.ours)
    problems += _compare(spark, "SELECT pos, row.s.l, row.added FROM {cat}.db.pos_rows.position_deletes "
                                "WHERE row IS NOT NULL", cat.java, cat.ours)
    assert problems == [], "\n".join(problems)
    assert procedures.sql(spark, f"SELECT * FROM {cat.ours}.db.pos_rows.position_deletes WHERE row IS NOT NULL"
                          ).count() == sum(len(p) for p in positions.values()) > 0


@pytest.mark.java
def test_show_and_describe_equal_java(spark, request):
    cat = shared_catalog(spark, "hadoop", request)
    # a namespace of its own: SHOW TABLES lists what the namespace holds, not what other tests left in db
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {cat.java}.showsdb")
    _java_table(spark, cat.java, "showsdb", "shows")
    assert _shows(spark, cat, "showsdb", "shows") == []


@pytest.mark.java
def test_show_quotes_names_as_spark_does(spark, request):
    """Spark's quoteIfNeeded: a name of letters, digits and underscores is plain even when it starts
    with a digit, digits alone and any other character are back-quoted (``1col``, ``123``, ``a-b``,
    a back-quote doubled); a partitioning of plain columns is DESCRIBEd as partition columns."""
    cat = shared_catalog(spark, "hadoop", request)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {cat.java}.`123`")
    t = "{cat}.`123`.`7up`"
    spark.sql(f"DROP TABLE IF EXISTS {t.format(cat=cat.java)}")
    spark.sql(f"CREATE TABLE {t.format(cat=cat.java)} (`1col` int, `a-b` string, `_x` bigint, `42` int, `we``ird` int, "
              "`s` struct<`x.y`: int, `a,b`: string>) USING iceberg PARTITIONED BY (`1col`) "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    spark.sql(f"INSERT INTO {t.format(cat=cat.java)} VALUES (1, 'a', 1, 1, 1, named_struct('x.y', 1, 'a,b', 'p')), "
              "(1, 'b', 2, 2, 2, named_struct('x.y', 2, 'a,b', 'q')), (2, 'c', 3, 3, 3, null)")
    spark.sql(f"DELETE FROM {t.format(cat=cat.java)} WHERE `_x` = 2")
    out = []
    # the metadata tables' schemas name the table's columns and partition fields (the row of a
    # position delete, the partition struct, readable_metrics)
    for q in (f"SHOW CREATE TABLE {t}", f"DESCRIBE {t}", f"DESCRIBE EXTENDED {t}", f"SHOW TBLPROPERTIES {t} ('x')",
              "SHOW TABLES IN {cat}.`123`", "SHOW NAMESPACES IN {cat}", f"SELECT * FROM {t}",
              f"SELECT * FROM {t}.files", f"SELECT * FROM {t}.position_deletes", f"SELECT * FROM {t}.partitions",
              f"DESCRIBE {t}.position_deletes"):
        out += _compare(spark, q, cat.java, cat.ours)
    assert out == []


@pytest.mark.java
@pytest.mark.parametrize("kind", ["hive", "sqlite", "rest"])
def test_every_catalog_reads_and_shows_as_java(spark, request, kind):
    if kind == "rest":
        server = request.getfixturevalue("rest_server")
        spark.conf.set("spark.sql.catalog.orest.type", "rest")
        spark.conf.set("spark.sql.catalog.orest.uri", server.uri)
        spark.conf.set("spark.sql.catalog.jrest", "org.apache.iceberg.spark.SparkCatalog")
        spark.conf.set("spark.sql.catalog.jrest.type", "rest")
        spark.conf.set("spark.sql.catalog.jrest.uri", server.uri)
        spark.sql("CREATE NAMESPACE IF NOT EXISTS jrest.sqlreads")

        class cat:  # noqa: N801 -- the two names of one catalog, as SharedCatalog gives them
            java, ours = "jrest", "orest"
        ns = "sqlreads"
    else:
        cat = shared_catalog(spark, kind, request)
        ns = "sqlreads"
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {cat.java}.{ns}")
    _java_table(spark, cat.java, ns, "every")
    problems = _reads(spark, cat, ns, "every") + _shows(spark, cat, ns, "every")
    assert problems == []


# ----------------------------------------------------------------------------- without Java (and on Connect)
@pytest.fixture()
def rcat(spark, tmp_path):
    spark.conf.set("spark.sql.catalog.rcat.type", "hadoop")
    spark.conf.set("spark.sql.catalog.rcat.warehouse", str(tmp_path / "wh"))
    procedures.sql(spark, "CREATE NAMESPACE rcat.db")
    yield "rcat"
    spark.conf.unset("spark.sql.catalog.rcat.type")
    spark.conf.unset("spark.sql.catalog.rcat.warehouse")


@pytest.mark.both_sessions
def test_time_travel_and_selectors_through_procedures_sql(spark, rcat):
    procedures.sql(spark, "CREATE TABLE rcat.db.`my table` (id bigint, data string)")
    procedures.sql(spark, "INSERT INTO rcat.db.`my table` VALUES (1, 'a')")
    first = procedures.sql(spark, "SELECT snapshot_id FROM rcat.db.`my table`.snapshots").collect()[0][0]
    procedures.sql(spark, "INSERT INTO rcat.db.`my table` VALUES (2, 'b')")
    got = procedures.sql(spark, f"SELECT id FROM `rcat`.`db`.`my table` FOR SYSTEM_VERSION AS OF {first}").collect()
    assert [r.id for r in got] == [1]
    got = procedures.sql(spark, f"SELECT count(*) FROM rcat.db.`my table`.snapshot_id_{first}").collect()
    assert got[0][0] == 1
    assert procedures.sql(spark, "SELECT count(*) FROM rcat.db.`my table`").collect()[0][0] == 2
    # read_table reads the same names
    assert procedures.read_table(spark, "rcat.db.`my table`.history").count() == 2
    assert [r.id for r in procedures.read_table(spark, f"rcat.db.`my table`.snapshot_id_{first}").collect()] == [1]
    # SHOW and DESCRIBE
    assert [tuple(r) for r in procedures.sql(spark, "SHOW TABLES IN rcat.db").collect()] == [("db", "my table", False)]
    assert [tuple(r) for r in procedures.sql(spark, "SHOW NAMESPACES IN rcat").collect()] == [("db",)]
    assert [tuple(r)[:2] for r in procedures.sql(spark, "DESCRIBE rcat.db.`my table`").collect()] == [
        ("id", "bigint"), ("data", "string")]


@pytest.mark.both_sessions
def test_errors_name_the_users_table_and_list_what_is_supported(spark, rcat):
    procedures.sql(spark, "CREATE TABLE rcat.db.t (id bigint, data string)")
    procedures.sql(spark, "CREATE TABLE rcat.db.u (id bigint, data string)")
    with pytest.raises(ValidationError) as e:
        procedures.sql(spark, "SELECT id FROM rcat.db.t JOIN rcat.db.u ON t.id = u.id").collect()
    assert "__procedures_" not in str(e.value) and "`t`.`id`" in str(e.value) and "JVM" not in str(e.value)
    with pytest.raises(ValidationError) as e:
        procedures.sql(spark, "SELECT nope FROM rcat.db.t").collect()
    assert "__procedures_" not in str(e.value) and "nope" in str(e.value)
    with pytest.raises(UnsupportedStatementError) as e:
        procedures.sql(spark, "TRUNCATE TABLE rcat.db.t")
    assert "Supported:" in str(e.value) and "SHOW TBLPROPERTIES" in str(e.value)
    with pytest.raises(UnsupportedStatementError):
        procedures.sql(spark, "EXPLAIN SELECT * FROM rcat.db.t")
    with pytest.raises(NoSuchTableError, match="rcat.db.t.nope"):
        procedures.sql(spark, "SELECT * FROM rcat.db.t.nope")
    # a statement naming none of our catalogs reaches Spark as written
    assert procedures.sql(spark, "SELECT 1 AS one").collect()[0].one == 1
