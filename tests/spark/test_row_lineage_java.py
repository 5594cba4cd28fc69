"""v3 row lineage through rewrite_data_files (issue 31), against Iceberg Java on twin tables.

Java builds two identical v3 tables (appends, a copy-on-write delete and update, which write the
lineage columns into their files with a null ``_last_updated_sequence_number`` for updated rows, and a
merge-on-read delete, whose deletion vectors the rewrite applies).  We rewrite one, Java the twin,
with the same strategy.  Every row must keep the ``_row_id`` and ``_last_updated_sequence_number`` it
had, read by Java and by us; our new files must hold the same lineage values as Java's; and the commit
must consume row ids as Java's does (snapshot ``added-rows``, table ``next-row-id``).  Java's rewritten
twin is read by us too, and rows appended after our rewrite get fresh ids.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.scan import FileScanTask
from procedures.core.kernel.snapshot_producer import live_entries, snapshot_manifests
from procedures.frontend import runner
from procedures.io.parquet_reader import read_task_table
from procedures.spark.engine import data_rewrite_steps as spark_rewrite
from procedures.spark.dml import delete_where
from procedures.spark.read import read_table
from procedures.spec.expressions import ALWAYS_TRUE
from procedures.spec.manifest.model import ManifestContent
from procedures.spec.metadata_columns import LAST_UPDATED_SEQUENCE_NUMBER_ID, ROW_ID_ID, schema_with_row_lineage

# every test here reads or writes through Iceberg Java (deselected on pyspark 4)
pytestmark = [pytest.mark.spark, pytest.mark.java]

LINEAGE = ("_row_id", "_last_updated_sequence_number")


def _conf(warehouse) -> dict:
    return {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(warehouse)}


def _twins(spark, name: str, ddl: str, inserts: list[str], statements: list[str]) -> str:
    """``jcat.db.<name>`` and its twin built alike by Java: ``CREATE TABLE <t> <ddl>``, one INSERT per
    VALUES list, then the statements (``{t}`` names the table).  Returns the twin's name."""
    for n in (name, name + "_twin"):
        t = f"jcat.db.{n}"
        spark.sql(f"DROP TABLE IF EXISTS {t}")
        spark.sql(f"CREATE TABLE {t} {ddl}")
        for values in inserts:
            spark.sql(f"INSERT INTO {t} VALUES {values}")
        for statement in statements:
            spark.sql(statement.format(t=t))
    return name + "_twin"


def _values(batches: int, row: str) -> list[str]:
    """VALUES lists of ten rows each; ``row`` formats one row from ``i`` (its id), ``j`` (i % 10) and
    ``k`` (i % 2)."""
    return [", ".join(row.format(i=b * 10 + j, j=j, k=j % 2) for j in range(10)) for b in range(batches)]


def _java_lineage(spark, name: str) -> dict[int, tuple]:
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    rows = spark.sql(f"SELECT id, v, _row_id, _last_updated_sequence_number FROM jcat.db.{name}").collect()
    return {r[0]: tuple(r[1:]) for r in rows}


def _our_lineage(spark, warehouse, name: str) -> dict[int, tuple]:
    table = HadoopCatalog("ours", str(warehouse)).load_table(("db", name))
    rows = read_table(spark, table, columns=["id", "v"], metadata_columns=LINEAGE).collect()
    return {r[0]: tuple(r[1:]) for r in rows}


def _table(warehouse, name: str):
    return HadoopCatalog("ours", str(warehouse)).load_table(("db", name))


def _stored_lineage(table) -> tuple[list, int]:
    """(id, _row_id, _last_updated_sequence_number) as stored in the live data files, and how many
    of those files lack the lineage columns (by their reserved field ids)."""
    md = table.metadata
    manifests = [m for m in snapshot_manifests(table.io, md.current_snapshot()) if m.content == ManifestContent.DATA]
    rows, without = [], 0
    for e in live_entries(table.io, md, manifests):
        data = pq.read_table(e.data_file.file_path)
        ids = {int(f.metadata[b"PARQUET:field_id"]): f.name for f in data.schema if f.metadata}
        if ROW_ID_ID not in ids or LAST_UPDATED_SEQUENCE_NUMBER_ID not in ids:
            without += 1
            continue
        rows += zip(*(data.column(n).to_pylist() for n in ("id", ids[ROW_ID_ID], ids[LAST_UPDATED_SEQUENCE_NUMBER_ID])))
    return sorted(rows), without


STRATEGIES = {
    "binpack": ({}, ""),
    "sort": ({"strategy": "sort", "sort_order": "id DESC NULLS LAST"},
             ", strategy => 'sort', sort_order => 'id DESC NULLS LAST'"),
    # two shuffle partitions per file and no in-task sort: the rows go through Spark's range shuffle
    # (DataFrame read and write), not one Python task
    "sort-shuffled": ({"strategy": "sort", "sort_order": "v ASC NULLS FIRST",
                       "options": {"shuffle-partitions-per-file": "2"}},
                      ", strategy => 'sort', sort_order => 'v ASC NULLS FIRST'"),
    "zorder": ({"strategy": "sort", "sort_order": "zorder(v, id)"},
               ", strategy => 'sort', sort_order => 'zorder(v, id)'"),
}


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_rewrite_keeps_row_lineage_like_java(spark, java_warehouse, strategy, monkeypatch):
    name = f"lineage_{strategy.replace('-', '_')}"
    twin = _twins(spark, name, "(id bigint, cat string, v string) USING iceberg PARTITIONED BY (cat) "
                  "TBLPROPERTIES ('format-version'='3', 'write.delete.mode'='copy-on-write', "
                  "'write.update.mode'='copy-on-write')",
                  _values(4, "({i}, 'c{k}', 'v{i}')"),
                  ["DELETE FROM {t} WHERE id % 7 = 0", "UPDATE {t} SET v = 'updated' WHERE id % 5 = 1",
                   "ALTER TABLE {t} SET TBLPROPERTIES ('write.delete.mode'='merge-on-read')",
                   "DELETE FROM {t} WHERE id % 11 = 0"])
    before = _java_lineage(spark, name)
    # the premise: both twins hold the same rows with the same lineage, explicit values among them
    assert before == _java_lineage(spark, twin) == _our_lineage(spark, java_warehouse, name)
    assert len(before) == 40 - 6 - 3 and len({r[1] for r in before.values()}) == len(before)
    assert {r[2] for r in before.values()} == {1, 2, 3, 4, 6}  # appends 1-4, the update 6
    next_before = _table(java_warehouse, name).metadata.next_row_id

    kwargs, java_args = STRATEGIES[strategy]
    if strategy == "sort-shuffled":
        monkeypatch.setattr(spark_rewrite, "IN_TASK_SORT_MAX_BYTES", 0)
    options = {"rewrite-all": "true", **kwargs.get("options", {})}
    ours = runner.run("rewrite_data_files", kwargs={"table": f"db.{name}", **kwargs, "options": options},
                      catalog="ours", conf=_conf(java_warehouse), spark=spark).rows[0]
    option_map = ", ".join(f"'{k}', '{v}'" for k, v in options.items())
    java = spark.sql(f"CALL jcat.system.rewrite_data_files(table => 'db.{twin}'{java_args}, "
                     f"options => map({option_map}))").collect()[0]
    assert ours[0] == java[0] > 0 and ours[3] == java[3] == 0

    # every row kept its lineage: read by Java and by us, on our rewrite and on Java's
    assert _java_lineage(spark, name) == before
    assert _our_lineage(spark, java_warehouse, name) == before
    assert _java_lineage(spark, twin) == before
    assert _our_lineage(spark, java_warehouse, twin) == before

    # our files store the same lineage values as Java's (explicit, none left to inheritance)
    ours_t, java_t = _table(java_warehouse, name), _table(java_warehouse, twin)
    stored, without = _stored_lineage(ours_t)
    java_stored, java_without = _stored_lineage(java_t)
    assert without == java_without == 0
    assert stored == java_stored == sorted((i, r[1], r[2]) for i, r in before.items())
    # the commit consumes row ids as Java's does
    snap, java_snap = ours_t.metadata.current_snapshot(), java_t.metadata.current_snapshot()
    assert snap.first_row_id == java_snap.first_row_id == next_before
    assert snap.added_rows == java_snap.added_rows
    assert ours_t.metadata.next_row_id == java_t.metadata.next_row_id == next_before + snap.added_rows

    # rows appended after the rewrite get fresh ids from next-row-id, the sequence number of their commit
    spark.sql(f"INSERT INTO jcat.db.{name} VALUES (100, 'c0', 'new')")
    after = _our_lineage(spark, java_warehouse, name)
    assert after.pop(100)[1:] == (ours_t.metadata.next_row_id, snap.sequence_number + 1)
    assert after == before == {k: v for k, v in _java_lineage(spark, name).items() if k != 100}


def test_rewrite_of_v2_table_writes_no_lineage(spark, java_warehouse):
    """Before v3 there is no lineage: rewritten files carry only the table's columns, as Java's."""
    name = "lineage_v2"
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
    spark.sql(f"CREATE TABLE jcat.db.{name} (id bigint) USING iceberg TBLPROPERTIES ('format-version'='2')")
    for i in range(3):
        spark.sql(f"INSERT INTO jcat.db.{name} VALUES ({i})")
    rows = runner.run("rewrite_data_files", kwargs={"table": f"db.{name}", "options": {"rewrite-all": "true"}},
                      catalog="ours", conf=_conf(java_warehouse), spark=spark).rows
    assert rows[0][0] == 3 and rows[0][1] == 1
    table = _table(java_warehouse, name)
    stored, without = _stored_lineage(table)
    assert stored == [] and without == 1
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    assert sorted(r[0] for r in spark.sql(f"SELECT id FROM jcat.db.{name}").collect()) == [0, 1, 2]


def test_copy_on_write_delete_keeps_row_lineage_like_java(spark, java_warehouse):
    """Our copy-on-write DELETE (procedures.spark.dml) copies the rows it keeps with their lineage, as
    Java's DELETE on the twin does; the deleted rows' ids are gone, no other id changes."""
    name = "lineage_cow"
    # Java's copy-on-write DELETE leaves explicit lineage in its files
    twin = _twins(spark, name, "(id bigint, v string) USING iceberg "
                  "TBLPROPERTIES ('format-version'='3', 'write.delete.mode'='copy-on-write')",
                  _values(3, "({i}, 'v{j}')"), ["DELETE FROM {t} WHERE id % 4 = 0"])
    before = _java_lineage(spark, name)
    assert before == _java_lineage(spark, twin)

    # rows of two files: both are partly matched, so both are rewritten
    delete_where(spark, _table(java_warehouse, name), "id >= 5 AND id < 15")
    spark.sql(f"DELETE FROM jcat.db.{twin} WHERE id >= 5 AND id < 15")

    expected = {k: v for k, v in before.items() if not 5 <= k < 15}
    assert _java_lineage(spark, name) == _our_lineage(spark, java_warehouse, name) == expected
    assert _java_lineage(spark, twin) == expected
    ours_t, java_t = _table(java_warehouse, name), _table(java_warehouse, twin)
    stored, without = _stored_lineage(ours_t)
    assert without == 0 and stored == _stored_lineage(java_t)[0]
    assert ours_t.metadata.current_snapshot().added_rows == java_t.metadata.current_snapshot().added_rows
    assert ours_t.metadata.next_row_id == java_t.metadata.next_row_id


@pytest.mark.parametrize("procedure", ["rewrite_data_files", "rewrite_position_delete_files"])
def test_table_upgraded_to_v3_gets_the_ids_java_gives(spark, java_warehouse, procedure):
    """A v2 table with position deletes, upgraded to v3: no file has a first_row_id yet, so rows read
    null lineage and a rewrite copies them with null lineage columns, as Java's.  The procedure's commit
    (the table's first v3 commit) numbers the rows as Java's does on the twin: the same ids, the same
    sequence numbers by either reader, the same added-rows and next-row-id."""
    name = f"lineage_upgraded_{procedure}"
    twin = _twins(spark, name, "(id bigint, v string) USING iceberg PARTITIONED BY (v) "
                  "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')",
                  _values(3, "({i}, 'c{k}')"),
                  ["DELETE FROM {t} WHERE id % 3 = 0", "ALTER TABLE {t} SET TBLPROPERTIES ('format-version'='3')"])
    before = _java_lineage(spark, name)
    assert {r[1:] for r in before.values()} == {(None, None)}

    options = {"rewrite-all": "true"}
    runner.run(procedure, kwargs={"table": f"db.{name}", "options": options}, catalog="ours",
               conf=_conf(java_warehouse), spark=spark)
    spark.sql(f"CALL jcat.system.{procedure}(table => 'db.{twin}', options => map('rewrite-all', 'true'))")

    ours, java = _java_lineage(spark, name), _java_lineage(spark, twin)
    ours_read, java_read = _our_lineage(spark, java_warehouse, name), _our_lineage(spark, java_warehouse, twin)
    assert set(ours) == set(before) == set(java) == set(ours_read) == set(java_read)
    # the same ids (each row its own), read alike by Java and by us
    assert sorted(r[1] for r in ours.values()) == sorted(r[1] for r in java.values())
    assert len({r[1] for r in ours.values()}) == len(ours)
    assert {k: r[1] for k, r in ours.items()} == {k: r[1] for k, r in ours_read.items()}
    assert {k: r[1] for k, r in java.items()} == {k: r[1] for k, r in java_read.items()}
    # the same sequence numbers on both twins, by either reader
    assert {k: r[2] for k, r in ours.items()} == {k: r[2] for k, r in java.items()}
    assert {k: r[2] for k, r in ours_read.items()} == {k: r[2] for k, r in java_read.items()}
    if procedure == "rewrite_position_delete_files":
        assert ours == java == ours_read == java_read  # no data file moved: every row has Java's id
    else:
        # (a rewrite's new files are numbered in the order they are listed, Java's planning order of
        # partitions, which is a hash map's; ids may go to the rows of another partition first.)
        # The rewritten rows store no lineage and their files keep the starting snapshot's data
        # sequence number: we inherit that (the spec's rule), Java 1.10 the file sequence number of
        # the rewrite's commit (apache/iceberg#17039)
        snap = _table(java_warehouse, name).metadata.current_snapshot()
        assert {r[2] for r in ours_read.values()} == {snap.sequence_number - 1}
        assert {r[2] for r in ours.values()} == {snap.sequence_number}
    ours_t, java_t = _table(java_warehouse, name), _table(java_warehouse, twin)
    assert ours_t.metadata.current_snapshot().added_rows == java_t.metadata.current_snapshot().added_rows
    assert ours_t.metadata.next_row_id == java_t.metadata.next_row_id


@pytest.mark.parametrize("fmt", ["orc", "avro"])
def test_rewrite_keeps_row_lineage_in_orc_and_avro_files(spark, java_warehouse, fmt):
    """The lineage columns written into ORC and Avro data files (with their reserved ids) read back as
    the rows' lineage before the rewrite: here, and in Java for Avro.  Java 1.10's ORC lineage is not a
    reference: its reader returns the file's first_row_id and sequence number for every row of an ORC
    file, and its ORC copy-on-write and rewrite store wrong ids (seen on its own twin), so the ORC case
    checks our reader and the values our files store."""
    name = f"lineage_{fmt}"
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
    spark.sql(f"CREATE TABLE jcat.db.{name} (id bigint, v string) USING iceberg TBLPROPERTIES "
              f"('format-version'='3', 'write.format.default'='{fmt}', 'write.delete.mode'='merge-on-read')")
    for values in _values(3, "({i}, 'v{j}')"):
        spark.sql(f"INSERT INTO jcat.db.{name} VALUES {values}")
    spark.sql(f"DELETE FROM jcat.db.{name} WHERE id % 4 = 0")
    before = _our_lineage(spark, java_warehouse, name)
    assert {k: r[1:] for k, r in before.items()} == {k: (k, 1 + k // 10) for k in range(30) if k % 4}
    rows = runner.run("rewrite_data_files", kwargs={"table": f"db.{name}", "options": {"rewrite-all": "true"}},
                      catalog="ours", conf=_conf(java_warehouse), spark=spark).rows
    assert rows[0][1] == 1
    assert _our_lineage(spark, java_warehouse, name) == before
    # the new file stores every row's lineage (read as stored: the columns projected as plain columns)
    md = _table(java_warehouse, name).metadata
    io = _table(java_warehouse, name).io
    [entry] = live_entries(io, md, [m for m in snapshot_manifests(io, md.current_snapshot())
                                    if m.content == ManifestContent.DATA])
    stored = read_task_table(io, FileScanTask(entry.data_file, 0, (), ALWAYS_TRUE, 0, (), md.schema()),
                             schema_with_row_lineage(md.schema()))
    assert sorted(zip(*(stored.column(n).to_pylist() for n in ("id", *LINEAGE)))) == sorted(
        (k, r[1], r[2]) for k, r in before.items())
    if fmt == "avro":
        assert _java_lineage(spark, name) == before
