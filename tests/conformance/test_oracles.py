"""The oracles themselves: tables written by Iceberg Java must read back identically through Java, PyIceberg
and DuckDB, with the rows we expect, before any of them is trusted to judge our own writer.

What each reader cannot do (so later tests do not ask it to):

* Java through Spark 3.5 has no ``time``, ``timestamp_ns``/``timestamptz_ns``, ``variant``, ``geometry`` or
  ``unknown`` columns; Spark reads ``uuid`` as a string and ``fixed[L]`` as binary.  Tables with those types
  can be checked with PyIceberg and DuckDB only.
* PyIceberg 0.12 returns ``uuid`` as Arrow's ``arrow.uuid`` extension and ``fixed`` as fixed-size binary;
  ``sorted_rows`` normalizes both.  It reads v2 position deletes and v3 deletion vectors (checked below).
* DuckDB's iceberg extension names list elements ``l`` instead of ``element`` (values are unaffected), and
  takes the metadata JSON path directly (no catalog), so ``java_metadata_location`` finds it.
* None of the tests here use equality deletes; Spark does not write them, so their oracle coverage comes
  from tables our code writes.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from oracles import (
    assert_rows_equal,
    duckdb_read,
    java_metadata_location,
    java_read,
    normalize_value,
    pyiceberg_read,
    read_all,
    rows_equal,
    sorted_rows,
)

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc

# Several rows per (day, bucket) partition, so a single-row DELETE rewrites nothing and must produce a
# delete file (position deletes in v2, a deletion vector in v3) instead of dropping a whole data file.
ROWS_SQL = """
  (1, 'a', 1.500, DATE'2024-01-01', TIMESTAMP'2024-01-01 10:00:00', TIMESTAMP_NTZ'2024-01-01 10:00:00', X'0102', 1.0, true),
  (2, 'b', -2.250, DATE'2024-01-01', TIMESTAMP'2024-01-01 11:00:00', TIMESTAMP_NTZ'2024-01-01 11:00:00', X'', double('NaN'), false),
  (3, NULL, NULL, NULL, TIMESTAMP'2024-01-01 12:00:00', NULL, NULL, NULL, NULL),
  (4, 'd', 4.000, DATE'1969-12-31', TIMESTAMP'1969-12-31 23:59:59.999999', TIMESTAMP_NTZ'1969-12-31 23:59:59', X'ff', -0.5, true),
  (5, 'e', 99999999.999, DATE'2024-02-29', TIMESTAMP'2024-01-01 13:00:00', TIMESTAMP_NTZ'2024-02-29 00:00:00', X'00', 5.0, false),
  (6, 'f', 0.001, DATE'2024-01-01', TIMESTAMP'2024-01-01 14:00:00', TIMESTAMP_NTZ'2024-01-01 14:00:00', X'0a', 6.0, true),
  (7, 'g', 7.000, DATE'2024-01-01', TIMESTAMP'1969-12-31 22:00:00', TIMESTAMP_NTZ'1969-12-31 22:00:00', X'07', 7.0, true),
  (8, 'h', 8.000, DATE'2024-01-01', TIMESTAMP'1969-12-31 21:00:00', TIMESTAMP_NTZ'1969-12-31 21:00:00', X'08', 8.0, false)
"""


def _snapshot_ids(spark, ident: str) -> list[int]:
    return [r[0] for r in spark.sql(f"SELECT snapshot_id FROM {ident}.snapshots ORDER BY committed_at").collect()]


def _assert_all_agree(spark, ident: str, metadata: str, snapshot_id: int | None = None) -> list[dict]:
    tables = read_all(spark, ident, metadata, snapshot_id)
    # The path-based Java read (static metadata file) is the form used for tables written by our catalogs.
    tables["java-by-path"] = java_read(spark, metadata, snapshot_id)
    for name, table in tables.items():
        assert_rows_equal(tables["java"], table, key="id", label=f"java vs {name} at {snapshot_id}")
    return sorted_rows(tables["java"], key="id")


@pytest.fixture(params=[2, 3], ids=["v2-position-deletes", "v3-deletion-vectors"])
def mixed_table(request, spark, java_warehouse: Path):
    """A Java table partitioned by day(ts) and bucket(4, id): three snapshots (insert, delete, update)."""
    version = request.param
    name = f"oracle_mixed_v{version}"
    ident = f"jcat.db.{name}"
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    spark.sql(
        f"""CREATE TABLE {ident} (id bigint, name string, amount decimal(11,3), d date, ts timestamp,
              ntz timestamp_ntz, b binary, f double, flag boolean)
            USING iceberg PARTITIONED BY (days(ts), bucket(4, id))
            TBLPROPERTIES ('format-version'='{version}', 'write.delete.mode'='merge-on-read',
                           'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')"""
    )
    spark.sql(f"INSERT INTO {ident} VALUES {ROWS_SQL}")
    spark.sql(f"DELETE FROM {ident} WHERE id IN (2, 7)")
    spark.sql(f"UPDATE {ident} SET name = 'A', amount = amount * 2 WHERE id = 1")
    yield version, ident, java_metadata_location(java_warehouse, "db", name)
    spark.sql(f"DROP TABLE IF EXISTS {ident} PURGE")


@pytest.mark.java
def test_mixed_table_delete_files_are_of_the_version_kind(spark, mixed_table) -> None:
    version, ident, _ = mixed_table
    formats = {r[0] for r in spark.sql(f"SELECT file_format FROM {ident}.delete_files WHERE content = 1").collect()}
    # Without these the "after deletes" checks below would test nothing: no delete file, no merge on read.
    assert formats == ({"PARQUET"} if version == 2 else {"PUFFIN"})


@pytest.mark.java
def test_mixed_table_current_rows_agree(spark, mixed_table) -> None:
    _, ident, metadata = mixed_table
    rows = _assert_all_agree(spark, ident, metadata)
    assert [r["id"] for r in rows] == [1, 3, 4, 5, 6, 8]
    first = rows[0]
    assert first == {
        "id": 1,
        "name": "A",
        "amount": Decimal("3.000"),
        "d": dt.date(2024, 1, 1),
        "ts": dt.datetime(2024, 1, 1, 10, tzinfo=UTC),
        "ntz": dt.datetime(2024, 1, 1, 10),
        "b": b"\x01\x02",
        "f": 1.0,
        "flag": True,
    }
    assert rows[2]["ts"] == dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    assert rows[3]["amount"] == Decimal("99999999.999")
    assert rows[1]["name"] is None and rows[1]["b"] is None


@pytest.mark.java
def test_mixed_table_older_snapshots_agree(spark, mixed_table) -> None:
    _, ident, metadata = mixed_table
    inserted, deleted, updated = _snapshot_ids(spark, ident)
    at_insert = _assert_all_agree(spark, ident, metadata, inserted)
    assert [r["id"] for r in at_insert] == [1, 2, 3, 4, 5, 6, 7, 8]
    # NaN survives the round trip in every reader (normalized to "NaN" so equal rows compare equal).
    assert at_insert[1]["f"] == "NaN" and at_insert[1]["b"] == b""
    at_delete = _assert_all_agree(spark, ident, metadata, deleted)
    assert [r["id"] for r in at_delete] == [1, 3, 4, 5, 6, 8]
    assert at_delete[0]["name"] == "a"
    assert _assert_all_agree(spark, ident, metadata, updated)[0]["name"] == "A"


@pytest.mark.java
def test_java_metadata_location_is_the_current_metadata_file(spark, mixed_table) -> None:
    _, ident, metadata = mixed_table
    latest = spark.sql(f"SELECT file FROM {ident}.metadata_log_entries ORDER BY timestamp DESC LIMIT 1").collect()[0][0]
    assert Path(metadata).name == Path(latest.replace("file:", "")).name
    assert Path(metadata).name == "v4.metadata.json"  # create, insert, delete, update


NESTED_SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "required": True, "type": "long"},
        {"id": 2, "name": "u", "required": False, "type": "uuid"},
        {"id": 3, "name": "fx", "required": False, "type": "fixed[4]"},
        {
            "id": 4,
            "name": "s",
            "required": False,
            "type": {
                "type": "struct",
                "fields": [
                    {"id": 5, "name": "x", "required": False, "type": "int"},
                    {"id": 6, "name": "y", "required": False, "type": "string"},
                ],
            },
        },
        {
            "id": 7,
            "name": "l",
            "required": False,
            "type": {"type": "list", "element-id": 8, "element-required": False, "element": "int"},
        },
        {
            "id": 9,
            "name": "m",
            "required": False,
            "type": {"type": "map", "key-id": 10, "key": "string", "value-id": 11, "value-required": False, "value": "long"},
        },
    ],
}


@pytest.mark.java
@pytest.mark.parametrize("version", [2, 3])
def test_uuid_fixed_and_nested_types_agree(spark, java_warehouse: Path, version: int) -> None:
    # Spark SQL cannot declare uuid or fixed columns, so the table is created through the Java catalog API.
    name = f"oracle_nested_v{version}"
    ident = f"jcat.db.{name}"
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    jvm = spark._jvm
    catalog = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergCatalog(spark._jsparkSession, "jcat")
    props = jvm.java.util.HashMap()
    props.put("format-version", str(version))
    props.put("write.delete.mode", "merge-on-read")
    catalog.createTable(
        jvm.org.apache.iceberg.catalog.TableIdentifier.parse(f"db.{name}"),
        jvm.org.apache.iceberg.SchemaParser.fromJson(json.dumps(NESTED_SCHEMA)),
        jvm.org.apache.iceberg.PartitionSpec.unpartitioned(),
        props,
    )
    spark.sql(
        f"""INSERT INTO {ident} VALUES
          (1, '0f8fad5b-d9cb-469f-a165-70867728950e', X'01020304', named_struct('x', 1, 'y', 'a'),
              array(1, 2, NULL), map('k', 1L, 'z', NULL)),
          (2, NULL, NULL, NULL, NULL, NULL),
          (3, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', X'ffffffff', named_struct('x', NULL, 'y', 'c'),
              array(), map())"""
    )
    spark.sql(f"DELETE FROM {ident} WHERE id = 2")
    try:
        metadata = java_metadata_location(java_warehouse, "db", name)
        rows = _assert_all_agree(spark, ident, metadata)
        assert rows == [
            {
                "id": 1,
                "u": "0f8fad5b-d9cb-469f-a165-70867728950e",
                "fx": b"\x01\x02\x03\x04",
                "s": {"x": 1, "y": "a"},
                "l": [1, 2, None],
                "m": {"k": 1, "z": None},
            },
            {
                "id": 3,
                "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
                "fx": b"\xff\xff\xff\xff",
                "s": {"x": None, "y": "c"},
                "l": [],
                "m": {},
            },
        ]
        # The readers really differ in representation; the normalization is what makes them agree.
        assert pyiceberg_read(metadata).schema.field("u").type.extension_name == "arrow.uuid"
        assert duckdb_read(metadata).schema.field("u").type == pa.string()
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {ident} PURGE")


def test_rows_equal_reports_real_differences() -> None:
    base = pa.table({"id": [1, 2], "v": [1.5, float("nan")]})
    assert rows_equal(base, pa.table({"v": [float("nan"), 1.5], "id": [2, 1]}), key="id")
    assert not rows_equal(base, pa.table({"id": [1, 2], "v": [1.5, 2.0]}), key="id")
    assert not rows_equal(base, pa.table({"id": [1], "v": [1.5]}), key="id")
    assert not rows_equal(base, pa.table({"id": [1, 2], "w": [1.5, float("nan")]}), key="id")
    with pytest.raises(AssertionError, match="row 1 differs"):
        assert_rows_equal(base, pa.table({"id": [1, 2], "v": [1.5, 3.0]}), key="id")


def test_normalization_of_timestamps_uuids_and_maps() -> None:
    instant = dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert normalize_value(instant) == dt.datetime(2024, 1, 1, 10, tzinfo=UTC)
    # A naive timestamp never equals an aware one: timestamp vs timestamptz is a real type difference.
    assert normalize_value(dt.datetime(2024, 1, 1, 10)) != dt.datetime(2024, 1, 1, 10, tzinfo=UTC)
    value = uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e")
    as_ext = pa.table({"u": pa.array([value.bytes], type=pa.uuid())})
    assert sorted_rows(as_ext) == [{"u": str(value)}]
    as_map = pa.table({"m": pa.array([[], [("a", 1)]], type=pa.map_(pa.string(), pa.int64()))})
    rows = sorted_rows(as_map)  # unkeyed nested values sort by repr; order is not the point here
    assert len(rows) == 2 and {"m": {}} in rows and {"m": {"a": 1}} in rows
    assert sorted_rows([{"id": 2, "b": bytearray(b"x")}, {"id": 1, "b": None}], key="id") == [
        {"id": 1, "b": None},
        {"id": 2, "b": b"x"},
    ]
