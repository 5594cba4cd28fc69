"""Tables written by Iceberg Java, read by us at every snapshot, must equal Java's own read row for
row: every Spark-writable type, every transform (with pruning filters), v2 position deletes, v3
deletion vectors, equality deletes (written by us, committed through our catalog, read by Java),
schema evolution and partition evolution mid-history.  Metadata tables are compared with Java's."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from oracles import assert_rows_equal, java_read, spark_df_to_arrow
from procedures.spark.read import read_files, read_table

# every test here reads or writes through Iceberg Java (deselected on pyspark 4)
pytestmark = [pytest.mark.spark, pytest.mark.java]


def _snapshots(spark, ident: str) -> list[int]:
    return [r[0] for r in spark.sql(f"SELECT snapshot_id FROM {ident}.snapshots ORDER BY committed_at").collect()]


def _ours(spark, ident: str, **kw) -> pa.Table:
    return spark_df_to_arrow(read_table(spark, ident, **kw))


def _check_every_snapshot(spark, ident: str, key: str = "id") -> int:
    snaps = _snapshots(spark, ident)
    assert snaps, f"{ident} has no snapshots"
    for sid in snaps:
        assert_rows_equal(java_read(spark, ident, sid), _ours(spark, ident, snapshot_id=sid), key=key,
                          label=f"{ident}@{sid}")
    assert_rows_equal(java_read(spark, ident), _ours(spark, ident), key=key, label=f"{ident}@current")
    return len(snaps)


def _fresh(spark, ident: str, ddl: str) -> None:
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    spark.sql(ddl)


ALL_TYPES_ROWS = """
  (1, true, 1, 1.5, 2.5, 12.345, DATE'2024-01-01', TIMESTAMP'2024-01-01 10:00:00', TIMESTAMP_NTZ'2024-01-01 10:00:00',
   'a', X'0102', named_struct('x', 1, 'y', 'p'), array(1, 2), map('k', 1.0D)),
  (2, false, -2, float('NaN'), -0.0D, -0.001, DATE'1969-12-31', TIMESTAMP'1969-12-31 23:59:59.999999',
   TIMESTAMP_NTZ'1900-01-01 00:00:00', '', X'', named_struct('x', NULL, 'y', NULL), array(), map()),
  (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (4, true, 2147483647, 3.4e38, 1.7e308, 99999999.999, DATE'9999-12-31', TIMESTAMP'2262-04-11 23:47:16',
   TIMESTAMP_NTZ'2262-04-11 23:47:16', 'üñí©ødé', X'ff00', named_struct('x', -1, 'y', 'q'), array(NULL, 3),
   map('a', NULL, 'b', 2.0D))
"""


@pytest.mark.parametrize("version", [1, 2, 3])
def test_every_type(spark, version):
    ident = f"jcat.db.read_types_v{version}"
    _fresh(spark, ident, f"""CREATE TABLE {ident} (id bigint, b boolean, i int, f float, d double, dec decimal(11,3),
        dt date, ts timestamp, ntz timestamp_ntz, s string, bin binary, st struct<x:int, y:string>,
        arr array<int>, m map<string, double>) USING iceberg TBLPROPERTIES ('format-version'='{version}')""")
    spark.sql(f"INSERT INTO {ident} VALUES {ALL_TYPES_ROWS}")
    spark.sql(f"INSERT INTO {ident} SELECT id + 10, b, i, f, d, dec, dt, ts, ntz, s, bin, st, arr, m FROM {ident}")
    assert _check_every_snapshot(spark, ident) == 2
    ours = _ours(spark, ident)
    assert ours.num_rows == 8
    assert ours.schema.field("ntz").type == pa.timestamp("us") and ours.schema.field("ts").type.tz is not None


def test_every_transform_with_pruning_filters(spark):
    ident = "jcat.db.read_transforms"
    _fresh(spark, ident, f"""CREATE TABLE {ident} (id bigint, s string, n int, dec decimal(9,2), ts timestamp,
        ntz timestamp_ntz, d date, bin binary, h timestamp) USING iceberg
        PARTITIONED BY (s, bucket(3, id), truncate(2, n), truncate(1, dec), years(ts), months(ntz), days(d),
                        hours(h), truncate(2, bin))
        TBLPROPERTIES ('format-version'='2')""")
    spark.sql(f"""INSERT INTO {ident}
        SELECT id, concat('s', id % 3), cast(id * 7 - 50 as int), cast(id / 4 as decimal(9,2)),
               TIMESTAMP'2023-12-31 22:00:00' + make_interval(0, 0, 0, 0, cast(id * 5 as int), 0, 0),
               TIMESTAMP_NTZ'2024-01-31 00:00:00' + make_interval(0, 0, 0, cast(id as int), 0, 0, 0),
               date_add(DATE'1969-12-25', cast(id as int)), unhex(hex(id)),
               TIMESTAMP'1969-12-31 20:00:00' + make_interval(0, 0, 0, 0, cast(id as int), 0, 0)
        FROM range(40)""")
    assert _check_every_snapshot(spark, ident) == 1
    for where in ["id = 7", "s = 's1' AND n > 0", "d >= DATE'1970-01-01'", "ts < TIMESTAMP'2024-01-01 10:00:00'",
                  "ntz > TIMESTAMP_NTZ'2024-02-20 00:00:00'", "dec BETWEEN 1.5 AND 3", "n IN (-50, 6, 1000)",
                  "s LIKE 's2%'", "bin = X'05'", "s IS NULL OR id > 38", "h >= TIMESTAMP'1970-01-01 03:00:00'"]:
        java = spark_df_to_arrow(spark.table(ident).where(where))
        ours = _ours(spark, ident, filter=where)
        assert_rows_equal(java, ours, key="id", label=where)
    # pruning really happens: a bucket + identity filter plans fewer files than the table has
    from procedures.core.kernel.scan import plan_files
    from procedures.spark.read import load_table

    t = load_table(spark, ident)
    assert 0 < len(plan_files(t.metadata, t.io, filter="id = 7")) < len(plan_files(t.metadata, t.io))


@pytest.mark.parametrize("version", [2, 3], ids=["v2-position-deletes", "v3-deletion-vectors"])
def test_merge_on_read_deletes_at_every_snapshot(spark, version):
    ident = f"jcat.db.read_mor_v{version}"
    _fresh(spark, ident, f"""CREATE TABLE {ident} (id bigint, cat string, v double) USING iceberg
        PARTITIONED BY (cat) TBLPROPERTIES ('format-version'='{version}', 'write.delete.mode'='merge-on-read',
        'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')""")
    spark.sql(f"INSERT INTO {ident} SELECT id, concat('c', id % 3), id * 1.5 FROM range(60)")
    spark.sql(f"DELETE FROM {ident} WHERE id % 5 = 0")
    spark.sql(f"UPDATE {ident} SET v = -1 WHERE id % 7 = 0")
    spark.sql(f"INSERT INTO {ident} SELECT id, 'c9', 0.0 FROM range(60, 70)")
    spark.sql(f"DELETE FROM {ident} WHERE id % 5 = 1")  # second delete on the same files: merged DV / 2nd file
    assert _check_every_snapshot(spark, ident) == 5
    ours = _ours(spark, ident, metadata_columns=("_file", "_pos", "_spec_id"))
    java = spark_df_to_arrow(spark.sql(f"SELECT *, _file, _pos, _spec_id FROM {ident}"))
    assert_rows_equal(java, ours, key="id", label="metadata columns")
    # the write half's entry point: rows of chosen files with deletes applied, with their positions
    some_file = ours.column("_file")[0].as_py()
    got = spark_df_to_arrow(read_files(spark, ident, [some_file], filter="v > 10"))
    want = spark_df_to_arrow(spark.sql(f"SELECT *, _file, _pos FROM {ident} WHERE _file = '{some_file}' AND v > 10"))
    assert_rows_equal(want, got, key="id", label="read_files")


def test_equality_deletes_written_by_us_read_by_java_and_us(spark, java_warehouse: Path):
    from procedures.spark.catalog_conf import load_catalog
    from procedures.core.kernel.operations import RowDelta
    from procedures.core.kernel.transaction import commit
    from procedures.io.arrow_schema import schema_to_arrow
    from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
    from procedures.spec.schema import Schema

    ident = "jcat.db.read_eq_deletes"
    _fresh(spark, ident, f"""CREATE TABLE {ident} (id bigint, cat string, name string) USING iceberg
        PARTITIONED BY (cat) TBLPROPERTIES ('format-version'='2')""")
    spark.sql(f"""INSERT INTO {ident} VALUES (1, 'a', 'x'), (2, 'a', NULL), (3, 'b', 'x'), (4, 'b', 'y'),
                  (5, 'a', 'z')""")
    table = load_catalog("jcat", spark).load_table(("db", "read_eq_deletes"))
    md = table.metadata
    spec = md.spec()

    def eq_file(name: str, field_names: list[str], rows: dict, partition: tuple, spec_id: int) -> DataFile:
        schema = Schema(tuple(md.schema().find_field(n) for n in field_names))
        path = f"{table.location}/data/{name}.parquet"
        pq.write_table(pa.Table.from_pydict(rows, schema=schema_to_arrow(schema)), path.removeprefix("file:"))
        return DataFile(path, FileFormat.PARQUET, partition, len(rows[field_names[0]]),
                        Path(path.removeprefix("file:")).stat().st_size, content=FileContent.EQUALITY_DELETES,
                        equality_ids=tuple(schema.find_field(n).field_id for n in field_names), spec_id=spec_id)

    # partition 'a': delete name = NULL (null-safe) and name = 'x'; partition 'b' is untouched by it
    d1 = eq_file("eq-a", ["name"], {"name": [None, "x"]}, ("a",), spec.spec_id)
    table = commit(table, [RowDelta(add_deletes=[d1])])
    spark.sql(f"REFRESH TABLE {ident}")
    spark.sql(f"INSERT INTO {ident} VALUES (6, 'b', 'y')")  # newer than the next delete? no: older
    table.refresh()
    d2 = eq_file("eq-b", ["id"], {"id": [4, 6]}, ("b",), spec.spec_id)
    table = commit(table, [RowDelta(add_deletes=[d2])])
    spark.sql(f"REFRESH TABLE {ident}")
    spark.sql(f"INSERT INTO {ident} VALUES (4, 'b', 'again')")  # same key after the delete: survives
    assert _check_every_snapshot(spark, ident) == 5
    assert sorted(r["id"] for r in _ours(spark, ident).to_pylist()) == [3, 4, 5]


def test_schema_and_partition_evolution_mid_history(spark):
    ident = "jcat.db.read_evolution"
    _fresh(spark, ident, f"""CREATE TABLE {ident} (id int, name string, gone string, d date) USING iceberg
        PARTITIONED BY (bucket(2, id)) TBLPROPERTIES ('format-version'='2')""")
    spark.sql(f"INSERT INTO {ident} VALUES (1, 'a', 'g', DATE'2024-01-01'), (2, 'b', 'h', DATE'2024-02-01')")
    spark.sql(f"ALTER TABLE {ident} RENAME COLUMN name TO full_name")
    spark.sql(f"ALTER TABLE {ident} ALTER COLUMN id TYPE bigint")
    spark.sql(f"ALTER TABLE {ident} ADD COLUMN extra double")
    spark.sql(f"ALTER TABLE {ident} DROP COLUMN gone")
    spark.sql(f"INSERT INTO {ident} VALUES (3000000000, 'c', DATE'2024-03-01', 1.5)")
    spark.sql(f"ALTER TABLE {ident} ADD PARTITION FIELD months(d)")
    spark.sql(f"ALTER TABLE {ident} DROP PARTITION FIELD bucket(2, id)")
    spark.sql(f"INSERT INTO {ident} VALUES (4, 'd', DATE'2024-03-15', 2.5), (5, NULL, DATE'2024-04-01', NULL)")
    spark.sql(f"ALTER TABLE {ident} SET TBLPROPERTIES ('write.delete.mode'='merge-on-read')")
    spark.sql(f"DELETE FROM {ident} WHERE id = 2 OR id = 4")
    assert _check_every_snapshot(spark, ident) == 4
    for where in ["d >= DATE'2024-03-01'", "id = 1", "full_name = 'c'"]:
        assert_rows_equal(spark_df_to_arrow(spark.table(ident).where(where)), _ours(spark, ident, filter=where),
                          key="id", label=where)
    meta = _ours(spark, ident, metadata_columns=("_spec_id", "_partition"))
    java = spark_df_to_arrow(spark.sql(f"SELECT *, _spec_id, _partition FROM {ident}"))
    assert_rows_equal(java, meta, key="id", label="_spec_id/_partition")


METADATA_KEYS = {
    "snapshots": ["snapshot_id", "parent_id", "operation", "manifest_list", "summary"],
    "history": ["snapshot_id", "parent_id", "is_current_ancestor", "made_current_at"],
    "refs": ["name", "type", "snapshot_id"],
    "manifests": ["content", "path", "length", "partition_spec_id", "added_snapshot_id", "added_data_files_count",
                  "existing_data_files_count", "deleted_data_files_count", "added_delete_files_count",
                  "existing_delete_files_count", "deleted_delete_files_count", "partition_summaries"],
    "files": ["content", "file_path", "file_format", "spec_id", "partition", "record_count", "file_size_in_bytes",
              "column_sizes", "value_counts", "null_value_counts", "lower_bounds", "upper_bounds",
              "referenced_data_file", "content_offset", "content_size_in_bytes"],
    "data_files": ["content", "file_path", "record_count", "partition"],
    "delete_files": ["content", "file_path", "record_count", "referenced_data_file"],
    "entries": ["status", "snapshot_id", "sequence_number", "file_sequence_number"],
    "partitions": ["partition", "spec_id", "record_count", "file_count", "total_data_file_size_in_bytes",
                   "position_delete_record_count", "position_delete_file_count", "equality_delete_record_count",
                   "equality_delete_file_count", "last_updated_snapshot_id", "last_updated_at"],
}


@pytest.mark.parametrize("version", [2, 3])
def test_metadata_tables_match_java(spark, version):
    from procedures.spark.metadata_tables import metadata_table

    ident = f"jcat.db.read_meta_v{version}"
    _fresh(spark, ident, f"""CREATE TABLE {ident} (id bigint, d date, s string) USING iceberg
        PARTITIONED BY (days(d)) TBLPROPERTIES ('format-version'='{version}', 'write.delete.mode'='merge-on-read')""")
    spark.sql(f"INSERT INTO {ident} SELECT id, date_add(DATE'2024-01-01', cast(id % 3 as int)), 'x' FROM range(30)")
    spark.sql(f"DELETE FROM {ident} WHERE id % 4 = 0")
    spark.sql(f"ALTER TABLE {ident} CREATE TAG t1")
    spark.sql(f"ALTER TABLE {ident} ADD PARTITION FIELD bucket(2, id)")
    spark.sql(f"INSERT INTO {ident} VALUES (100, DATE'2024-02-01', 'y')")
    for name, keys in METADATA_KEYS.items():
        ours_df = metadata_table(spark, ident, name)
        java_df = spark.table(f"{ident}.{name}")
        assert ours_df.columns == java_df.columns, name
        ours = spark_df_to_arrow(ours_df.select(*keys))
        java = spark_df_to_arrow(java_df.select(*keys))
        assert ours.num_rows == java.num_rows and ours.num_rows > 0, name
        assert_rows_equal(java, ours, label=name)
