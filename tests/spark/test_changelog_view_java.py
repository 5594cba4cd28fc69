"""create_changelog_view against Iceberg Java 1.10.2.

Copy-on-write tables written by Java: Java's CALL and ours run on the same table (the procedure
only reads) and the two views must hold the same rows, for plain changes, update images, net
changes and snapshot/timestamp ranges, partitioned and unpartitioned.  Merge-on-read tables (which
Java refuses): our view must equal the changes found independently by diffing the rows Java reads
at consecutive snapshots (``VERSION AS OF``).
"""

from __future__ import annotations

import os
import time
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.errors import AnalysisException, IllegalArgumentException

from procedures.spark.catalog_conf import load_catalog
from procedures.core.kernel.operations import RowDelta
from procedures.core.kernel.transaction import commit
from procedures.errors import NoSuchSnapshotError, ValidationError
from procedures.frontend import runner
from procedures.io.arrow_schema import schema_to_arrow
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
from procedures.spec.schema import Schema

pytestmark = [pytest.mark.spark, pytest.mark.java]

META = ("_change_type", "_change_ordinal", "_commit_snapshot_id")


def _conf(java_warehouse) -> dict:
    return {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(java_warehouse)}


def _ours(spark, java_warehouse, **kwargs):
    return runner.run("create_changelog_view", kwargs=kwargs, catalog="ours", conf=_conf(java_warehouse),
                      spark=spark).rows


def _rows(spark, view: str) -> list[tuple]:
    return sorted((tuple(r) for r in spark.sql(f"SELECT * FROM {view}").collect()), key=repr)


def _snapshots(spark, name: str) -> list[tuple[int, int]]:
    """(snapshot id, commit millis) of the table's history, oldest first."""
    return [(r.snapshot_id, int(r.committed_at.timestamp() * 1000)) for r in spark.sql(
        f"SELECT snapshot_id, committed_at FROM jcat.db.{name}.snapshots ORDER BY committed_at").collect()]


def _build_cow(spark, name: str, partitioned: bool) -> None:
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
    part = "PARTITIONED BY (cat)" if partitioned else ""
    spark.sql(f"CREATE TABLE jcat.db.{name} (id int, data string, cat string) USING iceberg {part} "
              "TBLPROPERTIES ('format-version'='2')")
    statements = [
        "INSERT INTO {t} VALUES (1, 'a', 'x'), (2, 'b', 'x'), (3, 'c', 'y'), (4, 'd', 'y')",
        "INSERT INTO {t} VALUES (5, 'e', 'x'), (6, 'f', 'y')",
        "UPDATE {t} SET data = 'a2' WHERE id = 1",  # copy-on-write: carry-overs of id 2
        "DELETE FROM {t} WHERE id = 3",
        "CALL jcat.system.rewrite_data_files(table => 'db.{n}', options => map('rewrite-all', 'true'))",  # replace
        "INSERT INTO {t} VALUES (3, 'c', 'y'), (7, 'g', 'x')",  # 3 comes back: no net change for it
        "MERGE INTO {t} USING (SELECT 5 AS id, 'e2' AS data UNION ALL SELECT 8, 'h') s ON {t}.id = s.id "
        "WHEN MATCHED THEN UPDATE SET data = s.data WHEN NOT MATCHED THEN INSERT (id, data, cat) VALUES (s.id, s.data, 'x')",
        "DELETE FROM {t} WHERE id = 7",
    ]
    for stmt in statements:
        spark.sql(stmt.format(t=f"jcat.db.{name}", n=name))
        time.sleep(0.01)  # distinct commit millis for the timestamp ranges


def _compare(spark, java_warehouse, name: str, label: str, **kwargs) -> list[tuple]:
    java_args = ", ".join([f"table => 'db.{name}'", "changelog_view => 'java_changes'"]
                          + [f"{k} => {v[1]}" for k, v in kwargs.items()])
    java_view = spark.sql(f"CALL jcat.system.create_changelog_view({java_args})").collect()[0][0]
    ours = _ours(spark, java_warehouse, table=f"db.{name}", changelog_view="our_changes",
                 **{k: v[0] for k, v in kwargs.items()})
    assert ours == [("our_changes",)] and java_view == "java_changes"
    assert spark.table("our_changes").schema == spark.table("java_changes").schema, label
    got, want = _rows(spark, "our_changes"), _rows(spark, "java_changes")
    assert got == want, f"{label}: ours {got} != java {want}"
    return got


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
def test_changelog_view_matches_java(spark, java_warehouse, partitioned):
    name = f"chg_cow_{int(partitioned)}"
    _build_cow(spark, name, partitioned)
    history = _snapshots(spark, name)
    ids = [s for s, _ in history]

    plain = _compare(spark, java_warehouse, name, "plain")
    types = Counter(r[3] for r in plain)
    # carry-overs are gone (id 2, never changed, only has its insert) and the replace snapshot has no ordinal
    assert [r[3:5] for r in plain if r[0] == 2] == [("INSERT", 0)] and set(types) == {"INSERT", "DELETE"}
    assert sorted({r[4] for r in plain}) == list(range(7))

    updates = _compare(spark, java_warehouse, name, "compute_updates",
                       identifier_columns=(["id"], "array('id')"))
    assert {r[3] for r in updates} >= {"UPDATE_BEFORE", "UPDATE_AFTER"}
    _compare(spark, java_warehouse, name, "compute_updates explicit",
             compute_updates=(True, "true"), identifier_columns=(["id", "cat"], "array('id', 'cat')"))
    _compare(spark, java_warehouse, name, "identifier columns without updates",
             compute_updates=(False, "false"), identifier_columns=(["id"], "array('id')"))

    net = _compare(spark, java_warehouse, name, "net_changes", net_changes=(True, "true"))
    # id 7 was inserted and deleted: no net change; id 3 deleted and re-inserted: only its first insert
    assert not any(r[0] == 7 for r in net) and [r[3] for r in net if r[0] == 3] == ["INSERT"]

    rng = {"start-snapshot-id": str(ids[1]), "end-snapshot-id": str(ids[4])}
    ranged = _compare(spark, java_warehouse, name, "snapshot range", options=(rng, _map_sql(rng)))
    assert {r[5] for r in ranged} <= set(ids[2:5]) and ranged
    _compare(spark, java_warehouse, name, "snapshot range net", options=(rng, _map_sql(rng)),
             net_changes=(True, "true"))
    start = {"start-snapshot-id": str(ids[2])}
    _compare(spark, java_warehouse, name, "start only", options=(start, _map_sql(start)))

    ts = {"start-timestamp": str(history[1][1]), "end-timestamp": str(history[5][1])}
    timed = _compare(spark, java_warehouse, name, "timestamp range", options=(ts, _map_sql(ts)))
    assert timed and {r[5] for r in timed} <= set(ids[2:6])
    ts_between = {"start-timestamp": str(history[1][1] + 1), "end-timestamp": str(history[3][1] - 1)}
    _compare(spark, java_warehouse, name, "timestamp range between commits", options=(ts_between, _map_sql(ts_between)))
    late = {"start-timestamp": str(history[-1][1] + 1000)}
    assert _compare(spark, java_warehouse, name, "start after the last commit", options=(late, _map_sql(late))) == []


def _map_sql(options: dict) -> str:
    return "map(" + ", ".join(f"'{k}', '{v}'" for k, v in options.items()) + ")"


def test_default_view_name_and_replace(spark, java_warehouse):
    name = "chg_default"
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
    spark.sql(f"CREATE TABLE jcat.db.{name} (id int, data string) USING iceberg")
    # a table without snapshots: an empty view of the same schema as Java's
    _compare(spark, java_warehouse, name, "empty table")
    spark.sql(f"INSERT INTO jcat.db.{name} VALUES (1, 'a')")
    java = spark.sql(f"CALL jcat.system.create_changelog_view(table => 'db.{name}')").collect()
    java_rows = _rows(spark, f"{name}_changes")
    spark.sql(f"INSERT INTO jcat.db.{name} VALUES (2, 'b')")
    ours = _ours(spark, java_warehouse, table=f"db.{name}")
    assert ours == [tuple(r) for r in java] == [(f"`{name}_changes`",)]
    # the view of the same name is replaced, now with both commits
    got = _rows(spark, f"{name}_changes")
    assert len(got) == 2 and java_rows[0] in got


def test_changelog_view_refusals(spark, java_warehouse):
    name = "chg_refuse"
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
    spark.sql(f"CREATE TABLE jcat.db.{name} (id int, data string, m map<string, int>) USING iceberg")
    spark.sql(f"INSERT INTO jcat.db.{name} VALUES (1, 'a', map('k', 1))")
    spark.sql(f"INSERT INTO jcat.db.{name} VALUES (2, 'b', map('k', 2))")
    ids = [s for s, _ in _snapshots(spark, name)]
    before = spark.sql(f"SELECT count(*) FROM jcat.db.{name}.snapshots").collect()[0][0]
    t = f"db.{name}"
    cases = [
        (dict(), ValidationError, "unorderable columns: [m]"),
        (dict(identifier_columns=["id"], net_changes=True), ValidationError, "Not support net changes with update images"),
        (dict(identifier_columns=[]), ValidationError, "unorderable columns"),
        (dict(identifier_columns=["nope"]), ValidationError, "'nope'"),
        (dict(identifier_columns=["id"], changelog_view="a.b.c"), ValidationError, "a.b.c"),
    ]
    # Java refuses these in the CALL
    java_refused = [
        ("", IllegalArgumentException, "Identifier field is required as table contains unorderable columns: \\[m\\]"),
        (", identifier_columns => array('id'), net_changes => true", IllegalArgumentException,
         "Not support net changes with update images"),
        (", identifier_columns => array('nope')", AnalysisException, "UNRESOLVED_COLUMN.*`nope` cannot be resolved"),
        (", identifier_columns => array('id'), changelog_view => 'a.b.c'", AnalysisException,
         "TEMP_VIEW_NAME_TOO_MANY_NAME_PARTS.*a.b.c"),
    ]
    for extra, java_error, java_text in java_refused:
        with pytest.raises(java_error, match=java_text):
            spark.sql(f"CALL jcat.system.create_changelog_view(table => '{t}'{extra})").collect()
    # range options: Java refuses them when the view is read, with the same messages
    option_cases = [
        ({"start-snapshot-id": "1", "start-timestamp": "2"}, ValidationError,
         "Cannot set both start-snapshot-id and start-timestamp"),
        ({"end-snapshot-id": "1", "end-timestamp": "2"}, ValidationError, "Cannot set both end-snapshot-id and end-timestamp"),
        ({"start-timestamp": "5", "end-timestamp": "5"}, ValidationError, "greater than end-timestamp"),
        ({"snapshot-id": str(ids[0])}, ValidationError, "Cannot set neither snapshot-id"),
        ({"end-snapshot-id": "12345"}, NoSuchSnapshotError, "Cannot find the end snapshot: 12345"),
        ({"start-snapshot-id": "12345"}, NoSuchSnapshotError, "12345"),
        ({"start-snapshot-id": str(ids[1]), "end-snapshot-id": str(ids[0])}, ValidationError, "not a parent ancestor"),
        ({"start-snapshot-id": str(ids[1])}, ValidationError, "not a parent ancestor"),
        ({"start-snapshot-id": "x"}, ValidationError, "start-snapshot-id"),
    ]
    for options, error, text in option_cases:
        cases.append((dict(identifier_columns=["id"], options=options), error, text))
        java_text = {"start-snapshot-id": "x"} == options and "For input string" or text
        if error is NoSuchSnapshotError and "end" not in text:
            java_text = "not a parent ancestor"
        spark.sql(f"CALL jcat.system.create_changelog_view(table => '{t}', changelog_view => 'java_bad', "
                  f"identifier_columns => array('id'), options => {_map_sql(options)})").collect()
        with pytest.raises(Exception, match=java_text):
            spark.sql("SELECT * FROM java_bad").collect()
    for kwargs, error, text in cases:
        with pytest.raises(error, match=text.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
            _ours(spark, java_warehouse, table=t, **kwargs)
    after = spark.sql(f"SELECT count(*) FROM jcat.db.{name}.snapshots").collect()[0][0]
    assert after == before
    # with identifier columns a map column is fine: update images of the two inserts
    _ours(spark, java_warehouse, table=t, identifier_columns=["id"], changelog_view="chg_map")
    assert sorted(r[0] for r in spark.sql("SELECT id FROM chg_map").collect()) == [1, 2]


def _expected_by_diff(spark, name: str) -> list[tuple]:
    """The changes of every non-replace snapshot: multiset diff of the rows at it and its parent."""
    snaps = spark.sql(f"SELECT snapshot_id, parent_id, operation FROM jcat.db.{name}.snapshots "
                      "ORDER BY committed_at").collect()
    out, ordinal = [], 0
    for s in snaps:
        if s.operation == "replace":
            continue
        now = Counter(tuple(r) for r in spark.sql(f"SELECT * FROM jcat.db.{name} VERSION AS OF {s.snapshot_id}").collect())
        then = Counter() if s.parent_id is None else Counter(
            tuple(r) for r in spark.sql(f"SELECT * FROM jcat.db.{name} VERSION AS OF {s.parent_id}").collect())
        for row, n in (now - then).items():
            out += [(*row, "INSERT", ordinal, s.snapshot_id)] * n
        for row, n in (then - now).items():
            out += [(*row, "DELETE", ordinal, s.snapshot_id)] * n
        ordinal += 1
    return sorted(out, key=repr)


@pytest.mark.parametrize("fv", [2, 3])
def test_changelog_view_merge_on_read(spark, java_warehouse, fv):
    name = f"chg_mor_v{fv}"
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
    spark.sql(f"CREATE TABLE jcat.db.{name} (id int, data string, cat string) USING iceberg PARTITIONED BY (cat) "
              f"TBLPROPERTIES ('format-version'='{fv}', 'write.delete.mode'='merge-on-read', "
              "'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')")
    t = f"jcat.db.{name}"
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a', 'x'), (2, 'b', 'x'), (3, 'c', 'y'), (4, 'd', 'y')")
    spark.sql(f"INSERT INTO {t} VALUES (5, 'e', 'x'), (6, 'f', 'y')")
    spark.sql(f"DELETE FROM {t} WHERE id = 2")
    spark.sql(f"UPDATE {t} SET data = 'c2' WHERE id = 3")
    spark.sql(f"DELETE FROM {t} WHERE id IN (1, 5)")  # a second delete on a file that already has one
    spark.sql(f"UPDATE {t} SET data = data WHERE id = 4")  # rewrites the row unchanged: no change
    spark.sql(f"DELETE FROM {t} WHERE cat = 'y'")  # removes whole files
    spark.sql(f"INSERT INTO {t} VALUES (2, 'b', 'x')")
    with pytest.raises(Exception, match="Delete files are currently not supported"):
        spark.sql(f"CALL jcat.system.create_changelog_view(table => 'db.{name}', changelog_view => 'j')")
        spark.sql("SELECT * FROM j").collect()

    _ours(spark, java_warehouse, table=f"db.{name}", changelog_view="mor_changes")
    got = _rows(spark, "mor_changes")
    want = _expected_by_diff(spark, name)
    assert got == want
    assert {r[3] for r in got} == {"INSERT", "DELETE"} and len(got) >= 10
    # update images on the same table: id 3's update is a pair
    _ours(spark, java_warehouse, table=f"db.{name}", changelog_view="mor_updates", identifier_columns=["id"])
    pairs = [r for r in _rows(spark, "mor_updates") if r[0] == 3]
    assert sorted(r[3] for r in pairs)[-2:] == ["UPDATE_AFTER", "UPDATE_BEFORE"]


def test_changelog_view_equality_deletes(spark, java_warehouse, tmp_path):
    """Equality deletes (Java's Spark writes none; ours are committed through our core): the rows
    they hide are deletes at their snapshot; same-commit data files are not affected."""
    name = "chg_eq"
    t = f"jcat.db.{name}"
    spark.sql(f"DROP TABLE IF EXISTS {t}")
    spark.sql(f"CREATE TABLE {t} (id bigint, cat string, name string) USING iceberg PARTITIONED BY (cat) "
              "TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a', 'x'), (2, 'a', NULL), (3, 'b', 'x'), (4, 'b', 'y'), (5, 'a', 'z')")
    table = load_catalog("jcat", spark).load_table(("db", name))
    md = table.metadata

    def eq_file(file_name: str, column: str, values: list, partition: tuple) -> DataFile:
        schema = Schema((md.schema().find_field(column),))
        path = f"{table.location}/data/{file_name}.parquet"
        pq.write_table(pa.Table.from_pydict({column: values}, schema=schema_to_arrow(schema)), path.removeprefix("file:"))
        return DataFile(path, FileFormat.PARQUET, partition, len(values), os.path.getsize(path.removeprefix("file:")),
                        content=FileContent.EQUALITY_DELETES, equality_ids=(schema.fields[0].field_id,),
                        spec_id=md.spec().spec_id)

    table = commit(table, [RowDelta(add_deletes=[eq_file("eq-a", "name", [None, "x"], ("a",))])])
    spark.sql(f"REFRESH TABLE {t}")
    spark.sql(f"INSERT INTO {t} VALUES (6, 'b', 'y'), (7, 'b', 'w')")
    table = table.refresh()
    table = commit(table, [RowDelta(add_deletes=[eq_file("eq-b", "id", [4, 6], ("b",))])])
    spark.sql(f"REFRESH TABLE {t}")
    spark.sql(f"INSERT INTO {t} VALUES (4, 'b', 'again')")  # same key after the delete: an insert

    _ours(spark, java_warehouse, table=f"db.{name}", changelog_view="eq_changes")
    got = _rows(spark, "eq_changes")
    assert got == _expected_by_diff(spark, name)
    deleted = sorted((r[0], r[4]) for r in got if r[3] == "DELETE")
    assert deleted == [(1, 1), (2, 1), (4, 3), (6, 3)]
