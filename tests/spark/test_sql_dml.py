"""SQL DML on our tables through ``procedures.sql`` (issue 35): DELETE, UPDATE, MERGE INTO and INSERT
OVERWRITE, copy-on-write and merge-on-read, against Iceberg Java 1.10.2's Spark SQL on twin tables.

Twins: ``jcat.db.<name>_j`` is changed by Java (``spark.sql``), ``ours.db.<name>_o`` -- our hadoop
catalog on the same warehouse -- by ``procedures.sql``.  After every statement both tables must hold
the same rows (read by Java, PyIceberg and DuckDB), their new snapshots the same operation and the
same summary counts of records and of delete files, and the same kinds of live delete files.
"""

from __future__ import annotations

import pytest

import procedures
from procedures.errors import CommitConflictError, ValidationError
from tests.helpers.catalogs import java_twins, ours_on_java_warehouse
from tests.oracles import assert_rows_equal, java_metadata_location, java_read, read_all

pytestmark = [pytest.mark.spark]

COLUMNS = "id bigint, part string, data string, n int"
#: summary counts that do not depend on how a writer laid rows out in files (copy-on-write rewrites
#: whole files, so added-/deleted-records depend on the layout; their difference does not)
RECORD_KEYS = ("added-position-deletes", "total-records", "total-position-deletes", "total-equality-deletes",
               "added-dvs")


@pytest.fixture(scope="module")
def ours(spark, java_warehouse):
    return ours_on_java_warehouse(spark, java_warehouse)


def _twins(spark, name, *, fv=2, partitioned=False, mode="copy-on-write", extra=""):
    props = (f"'format-version'='{fv}', 'write.delete.mode'='{mode}', 'write.update.mode'='{mode}', "
             f"'write.merge.mode'='{mode}'" + (f", {extra}" if extra else ""))
    mine, java = java_twins(spark, name, COLUMNS, "part" if partitioned else "", props)
    for n in (mine, java):
        # two commits: several data files per partition
        for lo in (0, 10):
            rows = ", ".join(f"({i}, 'p{i % 3}', 'd{i}', {i * 10})" for i in range(lo, lo + 10))
            spark.sql(f"INSERT INTO jcat.db.{n} VALUES {rows}")
    return mine, java


def _snapshot(spark, name):
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    rows = spark.sql(f"SELECT operation, summary FROM jcat.db.{name}.snapshots ORDER BY committed_at DESC, "
                     "snapshot_id").collect()
    return (rows[0]["operation"], dict(rows[0]["summary"])) if rows else (None, {})


def _delete_kinds(spark, name):
    """(content, file_format) of each live delete file, with counts."""
    out: dict[tuple, int] = {}
    for r in spark.sql(f"SELECT content, file_format FROM jcat.db.{name}.delete_files").collect():
        key = (r["content"], r["file_format"])
        out[key] = out.get(key, 0) + 1
    return {k: bool(v) for k, v in out.items()}


def _run_both(spark, mine, java, statement):
    """Run ``statement`` (with ``{t}`` for the target and ``{src}`` for the source table's prefix)
    on both twins and compare them."""
    procedures.sql(spark, statement.format(t=f"ours.db.{mine}", cat="ours"))
    spark.sql(statement.format(t=f"jcat.db.{java}", cat="jcat"))
    _compare(spark, mine, java, statement)


def _counts(summary):
    out = {k: summary.get(k) for k in RECORD_KEYS}
    out["net-records"] = int(summary.get("added-records", 0)) - int(summary.get("deleted-records", 0))
    return out


def _compare(spark, mine, java, label):
    # Java's catalog caches tables: see our commits
    spark.sql(f"REFRESH TABLE jcat.db.{mine}")
    got = java_read(spark, f"jcat.db.{mine}")
    assert_rows_equal(got, java_read(spark, f"jcat.db.{java}"), key="id", label=label)
    (op_o, sum_o), (op_j, sum_j) = _snapshot(spark, mine), _snapshot(spark, java)
    assert op_o == op_j, f"{label}: operation {op_o} != Java's {op_j}"
    assert _counts(sum_o) == _counts(sum_j), f"{label}: {sum_o} vs Java's {sum_j}"
    for k in ("added-data-files", "deleted-data-files", "added-delete-files", "removed-delete-files"):
        assert (k in sum_o) == (k in sum_j), f"{label}: {k} {sum_o.get(k)} vs Java's {sum_j.get(k)}"
    assert _delete_kinds(spark, mine) == _delete_kinds(spark, java), label
    location = java_metadata_location(spark.conf.get("spark.sql.catalog.jcat.warehouse"), "db", mine)
    for reader, rows in read_all(spark, f"jcat.db.{mine}", location).items():
        assert_rows_equal(rows, got, key="id", label=f"{label} ({reader})")


STATEMENTS = [
    "DELETE FROM {t} WHERE id % 4 = 1",
    "UPDATE {t} SET data = concat(data, '-u'), n = n + 1 WHERE id > 12",
    "DELETE FROM {t} AS x WHERE x.id IN (2, 3) OR x.data = 'd19-u'",
    "MERGE INTO {t} AS t USING (SELECT id, 'p9' AS part, concat('m', id) AS data, -1 AS n FROM range(14, 26)) AS s "
    "ON t.id = s.id WHEN MATCHED AND t.id = 14 THEN DELETE WHEN MATCHED THEN UPDATE SET t.data = s.data, t.n = s.n "
    "WHEN NOT MATCHED AND s.id < 24 THEN INSERT * WHEN NOT MATCHED BY SOURCE AND t.id < 5 THEN UPDATE SET n = 0",
    "MERGE INTO {t} t USING (SELECT 100 AS id, 'p1' AS part, 'x' AS data, 7 AS n) s ON t.id = s.id "
    "WHEN NOT MATCHED THEN INSERT (id, part, data) VALUES (s.id, s.part, s.data)",
    "UPDATE {t} SET n = -n",
]


@pytest.mark.java
@pytest.mark.parametrize("fv", [2, 3])
@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_dml_statements_match_java(spark, ours, fv, partitioned, mode):
    mine, java = _twins(spark, f"dml_{fv}_{int(partitioned)}_{mode[0]}", fv=fv, partitioned=partitioned, mode=mode)
    for statement in STATEMENTS:
        _run_both(spark, mine, java, statement)
