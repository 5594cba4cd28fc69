"""Each family of statements ``procedures.sql`` runs on our tables -- DML (copy-on-write and
merge-on-read, v2 and v3), INSERT OVERWRITE, ALTER TABLE, CTAS / REPLACE, branches and tags, time travel
and metadata tables -- on a classic and (pyspark 4) a Spark Connect session, without Iceberg Java: rows
are checked against rows computed here, snapshots by their operations, summaries and file kinds, and
the ``[classic]`` and ``[connect]`` runs of a test must leave the same table contents (the comparison
with Java on twin tables is tests/spark/test_sql_dml.py and test_sql_ddl.py, pyspark 3.5 only)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

import procedures
from procedures.errors import IcebergError
from procedures.spark.session import catalog_for

pytestmark = [pytest.mark.spark, pytest.mark.both_sessions]

#: what the first session kind's run of a test left, keyed by the test's id: the next kind must match
_SEEN: dict[str, Any] = {}


def _same_on_every_kind(request, contents: Any) -> None:
    key = request.node.name.replace("[connect", "[").replace("[classic", "[")
    assert _SEEN.setdefault(key, contents) == contents


def _table(spark, columns: str, *, props: str = "", partitioned_by: str = "") -> str:
    procedures.sql(spark, "CREATE NAMESPACE IF NOT EXISTS jcat.db")
    t = f"jcat.db.s{uuid.uuid4().hex[:8]}"
    procedures.sql(spark, f"CREATE TABLE {t} ({columns}) USING iceberg"
                          + (f" PARTITIONED BY ({partitioned_by})" if partitioned_by else "")
                          + (f" TBLPROPERTIES ({props})" if props else ""))
    return t


def _rows(spark, query: str) -> list[tuple]:
    return sorted((tuple(r) for r in procedures.sql(spark, query).collect()), key=repr)


def _load(spark, t: str):
    return catalog_for(spark, "jcat").load_table(tuple(t.split(".")[1:]))


def _metadata(spark, t: str):
    return _load(spark, t).metadata


def _operations(spark, t: str) -> list[str]:
    return [r[0] for r in procedures.sql(spark, f"SELECT operation FROM {t}.snapshots ORDER BY committed_at").collect()]


def _files_on_disk(spark, t: str) -> list[str]:
    root = Path(_metadata(spark, t).location.removeprefix("file:"), "data")
    return sorted(str(p) for p in root.rglob("*") if p.is_file())


def _clean(error: BaseException) -> None:
    assert "__procedures_" not in str(error) and "at org.apache" not in str(error)


# ------------------------------------------------------------------------------------------------ DML
@pytest.mark.parametrize("fv, mode, partitioned", [(2, "copy-on-write", False), (2, "merge-on-read", True),
                                                   (3, "merge-on-read", False)], ids=["v2-cow", "v2-mor-part", "v3-mor"])
def test_delete_update_merge(spark, request, fv, mode, partitioned):
    props = ", ".join(f"'write.{op}.mode' = '{mode}'" for op in ("delete", "update", "merge"))
    t = _table(spark, "id bigint, cat string, n int", props=f"'format-version' = '{fv}', {props}",
               partitioned_by="cat" if partitioned else "")
    procedures.sql(spark, f"INSERT INTO {t} VALUES (1, 'a', 10), (2, 'a', 20), (3, 'a', 30), "
                          "(4, 'b', 40), (5, 'b', 50), (6, 'b', 60)")
    procedures.sql(spark, f"DELETE FROM {t} WHERE id = 2")
    procedures.sql(spark, f"UPDATE {t} SET n = n + 1 WHERE id IN (3, 4)")
    procedures.sql(spark, f"MERGE INTO {t} AS t USING (SELECT * FROM VALUES (4, 'b', 400), (7, 'c', 70) AS v(id, cat, n)) AS s "
                          "ON t.id = s.id WHEN MATCHED THEN UPDATE SET n = s.n WHEN NOT MATCHED THEN INSERT * "
                          "WHEN NOT MATCHED BY SOURCE AND t.id = 6 THEN DELETE")
    expected = [(1, "a", 10), (3, "a", 31), (4, "b", 400), (5, "b", 50), (7, "c", 70)]
    assert _rows(spark, f"SELECT * FROM {t}") == expected

    # a MERGE matching a target row twice fails and leaves the table as it was
    before = _load(spark, t).metadata_location
    with pytest.raises(IcebergError, match="MERGE_CARDINALITY_VIOLATION") as e:
        procedures.sql(spark, f"MERGE INTO {t} AS t USING (SELECT * FROM VALUES (1), (1) AS v(id)) AS s "
                              "ON t.id = s.id WHEN MATCHED THEN UPDATE SET n = 0")
    _clean(e.value)
    assert _load(spark, t).metadata_location == before
    # so does an UPDATE failing in its Spark job, and the files it wrote are gone
    files = _files_on_disk(spark, t)
    with pytest.raises(Exception, match="boom") as e:
        procedures.sql(spark, f"UPDATE {t} SET n = raise_error('boom') WHERE id = 3")
    _clean(e.value)
    assert _load(spark, t).metadata_location == before and _files_on_disk(spark, t) == files

    ops = _operations(spark, t)
    cow = mode == "copy-on-write"
    assert ops == ["append", "overwrite" if cow else "delete", "overwrite", "overwrite"]
    delete = _metadata(spark, t).snapshots[1].summary
    if cow:  # the file of id 2 rewritten without it
        assert int(delete["deleted-records"]) - int(delete["added-records"]) == 1
    else:
        assert delete["added-position-deletes"] == "1" and delete.get("added-records") is None
    kinds = sorted(set(_rows(spark, f"SELECT content, file_format FROM {t}.files")))
    assert kinds == ([(0, "PARQUET")] if cow else [(0, "PARQUET"), (1, "PARQUET" if fv == 2 else "PUFFIN")])
    _same_on_every_kind(request, (expected, ops, kinds))


# ------------------------------------------------------------------------------------ INSERT OVERWRITE
def test_insert_overwrite_static_and_dynamic(spark, request):
    t = _table(spark, "id bigint, cat string", partitioned_by="cat")
    procedures.sql(spark, f"INSERT INTO {t} VALUES (1, 'a'), (2, 'a'), (3, 'b')")
    procedures.sql(spark, f"INSERT OVERWRITE {t} PARTITION (cat = 'a') SELECT 10")
    assert _rows(spark, f"SELECT * FROM {t}") == [(10, "a"), (3, "b")]
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        procedures.sql(spark, f"INSERT OVERWRITE {t} VALUES (20, 'b'), (30, 'c')")
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
    after_dynamic = _rows(spark, f"SELECT * FROM {t}")
    assert after_dynamic == [(10, "a"), (20, "b"), (30, "c")]
    procedures.sql(spark, f"INSERT OVERWRITE TABLE {t} SELECT id + 1, cat FROM {t} WHERE cat = 'c'")
    assert _rows(spark, f"SELECT * FROM {t}") == [(31, "c")]
    ops = _operations(spark, t)
    assert ops == ["append", "overwrite", "overwrite", "overwrite"]
    summaries = [s.summary for s in sorted(_metadata(spark, t).snapshots, key=lambda s: s.sequence_number)]
    assert [(s.get("deleted-records"), s.get("added-records")) for s in summaries[1:]] == \
        [("2", "1"), ("1", "2"), ("3", "1")]
    _same_on_every_kind(request, (after_dynamic, ops))


# ----------------------------------------------------------------------------------------- ALTER TABLE
def test_alter_table_forms(spark, request):
    t = _table(spark, "id int NOT NULL, data string, ts timestamp")
    for statement in [
        "SET TBLPROPERTIES ('k' = 'v', 'write.metadata.previous-versions-max' = '7')",
        "UNSET TBLPROPERTIES ('k')",
        "ADD COLUMN point struct<x: double, y: double> COMMENT 'p'",
        "ADD COLUMN point.z double AFTER x",
        "RENAME COLUMN data TO payload",
        "ALTER COLUMN id TYPE bigint",
        "ALTER COLUMN id COMMENT 'key'",
        "ALTER COLUMN ts FIRST",
        "SET IDENTIFIER FIELDS id",
        "DROP IDENTIFIER FIELDS id",
        "ALTER COLUMN id DROP NOT NULL",
        "DROP COLUMN point.y",
        "ADD PARTITION FIELD bucket(4, id)",
        "ADD PARTITION FIELD days(ts)",
        "REPLACE PARTITION FIELD ts_day WITH hours(ts)",
        "DROP PARTITION FIELD bucket(4, id)",
        "WRITE DISTRIBUTED BY PARTITION LOCALLY ORDERED BY payload DESC NULLS LAST",
        "WRITE ORDERED BY id",
        "WRITE UNORDERED",
    ]:
        procedures.sql(spark, f"ALTER TABLE {t} {statement}")
    md = _metadata(spark, t)
    schema = md.schema()
    shape = ([(f.name, str(f.field_type), f.required, f.doc) for f in schema.fields],
             [str(f) for f in md.spec().fields], md.sort_order().is_unsorted(), sorted(schema.identifier_field_ids),
             {k: v for k, v in md.properties.items() if k.startswith(("k", "write.metadata"))})
    assert shape[0][:3] == [("ts", "timestamptz", False, None), ("id", "long", False, "key"),
                            ("payload", "string", False, None)]
    assert [f.name for f in schema.find_field("point").field_type.fields] == ["x", "z"]
    assert [f.name for f in md.spec().fields] == ["ts_hour"] and shape[2] and shape[3] == []
    assert shape[4] == {"write.metadata.previous-versions-max": "7"}
    with pytest.raises(IcebergError, match="payload") as e:
        procedures.sql(spark, f"ALTER TABLE {t} ALTER COLUMN payload TYPE int")
    _clean(e.value)
    procedures.sql(spark, f"INSERT INTO {t} VALUES (timestamp'2024-01-01 10:00:00', 1, 'a', named_struct('x', 1D, 'z', 2D))")
    rows = [(r.id, r.payload, r.point.x, r.point.z) for r in procedures.sql(spark, f"SELECT * FROM {t}").collect()]
    assert rows == [(1, "a", 1.0, 2.0)]
    _same_on_every_kind(request, (shape, rows))


# ------------------------------------------------------------------------------------ CTAS / REPLACE
def test_ctas_and_replace(spark, request):
    src = _table(spark, "id bigint, data string")
    procedures.sql(spark, f"INSERT INTO {src} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    t = f"{src}_c"
    procedures.sql(spark, f"CREATE TABLE {t} USING iceberg PARTITIONED BY (bucket(2, id)) "
                          f"TBLPROPERTIES ('format-version' = '3') AS SELECT id, upper(data) AS data FROM {src} WHERE id > 1")
    assert _rows(spark, f"SELECT * FROM {t}") == [(2, "B"), (3, "C")]
    procedures.sql(spark, f"CREATE OR REPLACE TABLE {t} USING iceberg AS SELECT id * 10 AS id, data, 'x' AS tag FROM {src}")
    after = _rows(spark, f"SELECT * FROM {t}")
    assert after == [(10, "a", "x"), (20, "b", "x"), (30, "c", "x")]
    procedures.sql(spark, f"REPLACE TABLE {t} (id bigint, note string) USING iceberg")
    assert _rows(spark, f"SELECT * FROM {t}") == []
    md = _metadata(spark, t)
    ops = [s.summary["operation"] for s in sorted(md.snapshots, key=lambda s: s.sequence_number)]
    assert ops == ["append", "overwrite"] and md.current_snapshot_id is None and md.format_version == 3
    assert [f.name for f in md.schema().fields] == ["id", "note"] and md.spec().is_unpartitioned()
    with pytest.raises(IcebergError, match="already exists") as e:
        procedures.sql(spark, f"CREATE TABLE {t} AS SELECT 1 AS id")
    _clean(e.value)
    # a query failing in its Spark job: no table is created, the source is unchanged
    before = _load(spark, src).metadata_location
    with pytest.raises(Exception, match="boom") as e:
        procedures.sql(spark, f"CREATE TABLE {t}_f AS SELECT id, CAST(raise_error('boom') AS int) AS x FROM {src}")
    _clean(e.value)
    with pytest.raises(Exception, match="boom") as e:
        procedures.sql(spark, f"INSERT INTO {src} SELECT id, CAST(raise_error('boom') AS string) FROM {src}")
    _clean(e.value)
    assert _load(spark, src).metadata_location == before
    assert not catalog_for(spark, "jcat").table_exists(tuple(f"{t}_f".split(".")[1:]))
    _same_on_every_kind(request, (after, ops))


# ------------------------------------------------------------- branches, tags, time travel, metadata
METADATA_TABLES = ["snapshots", "history", "refs", "metadata_log_entries", "manifests", "all_manifests", "files",
                   "data_files", "delete_files", "all_files", "all_data_files", "all_delete_files", "entries",
                   "all_entries", "partitions", "position_deletes"]


def test_refs_time_travel_and_metadata_tables(spark, request):
    t = _table(spark, "id bigint, cat string", partitioned_by="cat",
               props="'write.delete.mode' = 'merge-on-read'")
    procedures.sql(spark, f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')")
    first = _metadata(spark, t).current_snapshot_id
    procedures.sql(spark, f"ALTER TABLE {t} CREATE TAG t1 RETAIN 30 DAYS")
    procedures.sql(spark, f"ALTER TABLE {t} CREATE BRANCH b1 AS OF VERSION {first} RETAIN 7 DAYS "
                          "WITH SNAPSHOT RETENTION 2 SNAPSHOTS")
    # one file, so that deleting id 4 writes a position delete
    procedures.sql(spark, f"INSERT INTO {t} SELECT /*+ REPARTITION(1) */ * FROM VALUES (3, 'a'), (4, 'a') AS v(id, cat)")
    procedures.sql(spark, f"DELETE FROM {t} WHERE id = 4")
    committed = _metadata(spark, t).snapshot_by_id(first).timestamp_ms
    old, now = [(1, "a"), (2, "b")], [(1, "a"), (2, "b"), (3, "a")]
    reads = {
        f"SELECT * FROM {t} VERSION AS OF {first}": old,
        f"SELECT * FROM {t} VERSION AS OF 't1'": old,
        f"SELECT * FROM {t} FOR SYSTEM_VERSION AS OF 'b1'": old,
        f"SELECT * FROM {t}.tag_t1": old,
        f"SELECT * FROM {t}.branch_b1": old,
        f"SELECT * FROM {t}.at_timestamp_{committed}": old,
        f"SELECT * FROM {t} TIMESTAMP AS OF current_timestamp()": now,
        f"SELECT * FROM {t} FOR SYSTEM_TIME AS OF current_timestamp()": now,
        f"WITH o AS (SELECT * FROM {t}.tag_t1) SELECT n.* FROM {t} n LEFT ANTI JOIN o ON n.id = o.id": [(3, "a")],
    }
    for query, expected in reads.items():
        assert _rows(spark, query) == expected, query
    counts = {name: procedures.sql(spark, f"SELECT * FROM {t}.{name}").count() for name in METADATA_TABLES}
    assert counts == {"snapshots": 3, "history": 3, "refs": 3, "metadata_log_entries": 6, "manifests": 3,
                      "all_manifests": 6, "files": 4, "data_files": 3, "delete_files": 1, "all_files": 4,
                      "all_data_files": 3, "all_delete_files": 1, "entries": 4, "all_entries": 4,
                      "partitions": 2, "position_deletes": 1}
    assert _rows(spark, f"SELECT name, type, min_snapshots_to_keep FROM {t}.refs") == \
        [("b1", "BRANCH", 2), ("main", "BRANCH", None), ("t1", "TAG", None)]
    assert procedures.sql(spark, f"SELECT count(*) FROM {t}.files VERSION AS OF 't1'").first()[0] == 2
    assert procedures.read_table(spark, f"{t}.snapshots").count() == 3
    assert procedures.read_table(spark, f"{t}.files", snapshot_id=first).count() == 2
    assert sorted(tuple(r) for r in procedures.read_table(spark, f"{t}.branch_b1").collect()) == old
    assert _rows(spark, f"SELECT partition.cat, record_count FROM {t}.partitions") == [("a", 3), ("b", 1)]
    procedures.sql(spark, f"ALTER TABLE {t} DROP TAG t1")
    procedures.sql(spark, f"ALTER TABLE {t} DROP BRANCH IF EXISTS b1")
    assert _rows(spark, f"SELECT name FROM {t}.refs") == [("main",)]

    name = t.split(".")[-1]
    assert (name, False) in [(r.tableName, r.isTemporary) for r in procedures.sql(spark, "SHOW TABLES IN jcat.db").collect()]
    assert ("db",) in _rows(spark, "SHOW NAMESPACES IN jcat")
    props = dict(_rows(spark, f"SHOW TBLPROPERTIES {t}"))
    assert props["write.delete.mode"] == "merge-on-read" and props["format-version"] == "2"
    assert "PARTITIONED BY (cat)" in procedures.sql(spark, f"SHOW CREATE TABLE {t}").first()[0]
    described = [tuple(r)[:2] for r in procedures.sql(spark, f"DESCRIBE TABLE EXTENDED {t}").collect()]
    # a partitioning of identity fields only: Spark's partition columns (test_sql_reads checks Java's)
    assert described[:5] == [("id", "bigint"), ("cat", "string"), ("# Partition Information", ""),
                             ("# col_name", "data_type"), ("cat", "string")]
    _same_on_every_kind(request, (counts, now))
