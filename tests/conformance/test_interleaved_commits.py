"""Issue 3: Iceberg Java's commits and ours interleaved on one hadoop table.

Java INSERT, our append of files, Java DELETE (merge-on-read), our rollback, Java UPDATE, our staged
append cherry-picked onto main; after each step Iceberg Java, PyIceberg and DuckDB read the expected rows.
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.manage import CherryPick, RollbackTo
from procedures.core.kernel.operations import FastAppend
from procedures.core.kernel.transaction import commit
from procedures.spec.manifest.model import DataFile, FileFormat
from tests.oracles import assert_rows_equal, read_all

# every test here reads or writes through Iceberg Java (deselected on pyspark 4)
pytestmark = [pytest.mark.spark, pytest.mark.java]


def _write_parquet(table, rows: list[tuple[int, str]]) -> DataFile:
    """A data file for schema (1: id long required, 2: data string): Parquet with field ids."""
    schema = pa.schema([
        pa.field("id", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"1"}),
        pa.field("data", pa.string(), metadata={b"PARQUET:field_id": b"2"}),
    ])
    data = pa.table({"id": [r[0] for r in rows], "data": [r[1] for r in rows]}, schema=schema)
    location = table.location
    local = location[len("file:"):] if location.startswith("file:") else location
    name = f"data/ours-{uuid.uuid4()}.parquet"
    pq.write_table(data, f"{local}/{name}")
    size = table.io.new_input(f"{location}/{name}").size()
    return DataFile(f"{location}/{name}", FileFormat.PARQUET, (), len(rows), size, spec_id=0)


def _expect(spark, warehouse, rows: list[tuple[int, str]], label: str) -> None:
    spark.sql("REFRESH TABLE jcat.db.inter")
    from tests.oracles import java_metadata_location

    expected = pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "data": [r[1] for r in rows]})
    for reader, got in read_all(spark, "jcat.db.inter", java_metadata_location(warehouse, "db", "inter")).items():
        assert_rows_equal(got, expected, key="id", label=f"{label} / {reader}")


def test_java_and_our_commits_interleave(spark, java_warehouse):
    wh = str(java_warehouse)
    spark.sql("DROP TABLE IF EXISTS jcat.db.inter")
    spark.sql(
        "CREATE TABLE jcat.db.inter (id bigint NOT NULL, data string) USING iceberg TBLPROPERTIES ("
        "'format-version'='2', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')"
    )
    ours = HadoopCatalog("ours", wh)

    spark.sql("INSERT INTO jcat.db.inter VALUES (1, 'a'), (2, 'b')")
    _expect(spark, wh, [(1, "a"), (2, "b")], "java insert")

    t = ours.load_table(("db", "inter"))
    t = commit(t, [FastAppend([_write_parquet(t, [(3, "c"), (4, "d")])])])
    after_our_append = t.metadata.current_snapshot_id
    _expect(spark, wh, [(1, "a"), (2, "b"), (3, "c"), (4, "d")], "our append")

    spark.sql("DELETE FROM jcat.db.inter WHERE id = 1")
    _expect(spark, wh, [(2, "b"), (3, "c"), (4, "d")], "java delete")

    t = commit(t.refresh(), [RollbackTo(after_our_append)])
    _expect(spark, wh, [(1, "a"), (2, "b"), (3, "c"), (4, "d")], "our rollback")

    spark.sql("UPDATE jcat.db.inter SET data = 'x' WHERE id = 2")
    _expect(spark, wh, [(1, "a"), (2, "x"), (3, "c"), (4, "d")], "java update")

    t = t.refresh()
    staged = FastAppend([_write_parquet(t, [(5, "e")])], stage_only=True, snapshot_properties={"wap.id": "w-1"})
    t = commit(t, [staged])
    _expect(spark, wh, [(1, "a"), (2, "x"), (3, "c"), (4, "d")], "our staged append is invisible")
    t = commit(t, [CherryPick(staged.snapshot_id)])
    _expect(spark, wh, [(1, "a"), (2, "x"), (3, "c"), (4, "d"), (5, "e")], "our cherry-pick")

    # Java keeps working on the table after all of this
    spark.sql("INSERT INTO jcat.db.inter VALUES (6, 'f')")
    _expect(spark, wh, [(1, "a"), (2, "x"), (3, "c"), (4, "d"), (5, "e"), (6, "f")], "java insert after ours")
    head = ours.load_table(("db", "inter")).metadata.current_snapshot()
    # totals carried through our commits stay exact: total-records counts data-file rows (2 + 2 + the
    # MOR update's new row + 1 + 1); position deletes do not subtract from it
    assert head.summary["total-records"] == "7"
    java_files = spark.sql("SELECT count(*) AS n FROM jcat.db.inter.data_files").collect()[0].n
    assert head.summary["total-data-files"] == str(java_files)
