"""rewrite_data_files with Iceberg's system functions in ``where`` (``system.bucket(4, id) = 1``,
``system.truncate``, ``system.years/months/days/hours``) against Iceberg Java 1.10.2 (issue 31).

Java's Spark turns such a call into a transform term (``SparkV2Filters``): it selects exactly the
partitions of a partition field with that transform; otherwise the file metrics decide, through an
order-preserving transform of a file's bounds (bucket has none: every file).  Twin tables get the
same rows in the same commits; each side rewrites with the same ``where`` (``rewrite-all``, so the filter alone chooses the files) and the rows of the files each
replaced, the procedure's output and the table's rows must agree.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

import procedures
from procedures.errors import ValidationError
from tests.helpers.catalogs import java_twins, ours_on_java_warehouse
from tests.oracles import java_read

pytestmark = [pytest.mark.spark, pytest.mark.java]

COLUMNS = "id bigint, data string, ts timestamp"
TIMES = ["2023-01-15 01:00:00", "2023-06-30 23:30:00", "2024-01-01 00:10:00", "2024-03-01 05:00:00",
         "2024-03-01 06:00:00", "2024-03-02 05:00:00", "2025-12-31 23:59:00", "1969-12-31 23:00:00"]
PREFIXES = ["abcd", "abcz", "bcde", "bcdf"]


def _hour(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()) // 3600


@pytest.fixture(scope="module")
def ours(spark, java_warehouse):
    return ours_on_java_warehouse(spark, java_warehouse)


def _fill(spark, names: tuple[str, str]) -> None:
    """Three commits of eight rows each, spread over every partition of the cases below."""
    for b in range(3):
        rows = ", ".join(f"({b * 8 + k}, '{PREFIXES[k % 4]}{b}', TIMESTAMP '{TIMES[k]}')" for k in range(8))
        for n in names:
            spark.sql(f"INSERT INTO jcat.db.{n} VALUES {rows}")


def _files(spark, name: str) -> dict[str, set[int]]:
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    out: dict[str, set[int]] = {}
    for r in spark.sql(f"SELECT id, _file FROM jcat.db.{name}").collect():
        out.setdefault(r["_file"], set()).add(r["id"])
    return out


def _rewrite_twins(spark, name: str, partitioned_by: str, ours_where: str, java_where: str):
    """Rewrite both twins; returns (ours' output, Java's output, rows of the files ours replaced,
    rows of the files Java replaced, how many files ours had), each replaced file's rows as a sorted
    tuple."""
    mine, java = java_twins(spark, name, COLUMNS, partitioned_by)
    _fill(spark, (mine, java))
    before = {n: _files(spark, n) for n in (mine, java)}
    opts = "options => map('rewrite-all', 'true')"
    got = [tuple(r) for r in procedures.sql(
        spark, f"CALL ours.system.rewrite_data_files(table => 'db.{mine}', where => '{ours_where}', {opts})").collect()]
    want = [tuple(r) for r in spark.sql(
        f"CALL jcat.system.rewrite_data_files(table => 'db.{java}', where => '{java_where}', {opts})").collect()]
    replaced = []
    for n in (mine, java):
        after = _files(spark, n)
        replaced.append(sorted(tuple(sorted(ids)) for f, ids in before[n].items() if f not in after))
    assert java_read(spark, f"jcat.db.{mine}").sort_by("id").to_pylist() == \
        java_read(spark, f"jcat.db.{java}").sort_by("id").to_pylist()
    return got, want, replaced[0], replaced[1], len(before[mine])


CASES = [
    # partitioned by the function: exactly its partitions (some files stay)
    ("c31_sf_bucket", "bucket(4, id)", "system.bucket(4, id) = 1", "jcat.system.bucket(4, id) = 1"),
    ("c31_sf_bucket_in", "bucket(4, id)", "ours.system.bucket(4, id) IN (0, 3)", "jcat.system.bucket(4, id) IN (0, 3)"),
    ("c31_sf_trunc", "truncate(4, data)", "system.truncate(4, data) = \"abcd\"",
     "jcat.system.truncate(4, data) = \"abcd\""),
    ("c31_sf_years", "years(ts)", "system.years(ts) = 54", "jcat.system.years(ts) = 54"),
    ("c31_sf_months", "months(ts)", "system.months(ts) >= 650", "jcat.system.months(ts) >= 650"),
    ("c31_sf_days", "days(ts)", "system.days(ts) < date(\"2024-03-02\")",
     "jcat.system.days(ts) < date(\"2024-03-02\")"),
    ("c31_sf_hours", "hours(ts)", f"system.hours(ts) IN ({_hour(TIMES[3])}, -1)",
     f"jcat.system.hours(ts) IN ({_hour(TIMES[3])}, -1)"),
    ("c31_sf_years_not", "years(ts)", "NOT system.years(ts) = 54", "NOT jcat.system.years(ts) = 54"),
    # not partitioned by the function: every file may match, column predicates beside it still prune
    ("c31_sf_unpart", "", "system.bucket(4, id) = 1", "jcat.system.bucket(4, id) = 1"),
    ("c31_sf_other_width", "bucket(8, id)", "system.bucket(4, id) = 1", "jcat.system.bucket(4, id) = 1"),
    # Java 1.10 applies an order-preserving transform to the file's bounds: the metrics decide
    ("c31_sf_other_time", "days(ts)", "system.months(ts) = 650 AND id < 8", "jcat.system.months(ts) = 650 AND id < 8"),
]


@pytest.mark.parametrize("name, partitioned_by, ours_where, java_where", CASES, ids=[c[0] for c in CASES])
def test_rewrite_where_system_function_selects_javas_files(spark, ours, name, partitioned_by, ours_where, java_where):
    got, want, ours_replaced, java_replaced, total = _rewrite_twins(spark, name, partitioned_by, ours_where, java_where)
    assert ours_replaced == java_replaced
    assert got[0][:3] == want[0][:3]
    if partitioned_by in ("", "bucket(8, id)"):
        # nothing to project onto: every file is rewritten, as Java does
        assert len(ours_replaced) == total
    else:
        # as Java's testRewriteDataFilesWithFilterOnOnBucketExpression: only the matching partitions
        assert 0 < len(ours_replaced) < total


def test_where_system_function_of_a_wrong_type_fails_as_java(spark, ours):
    mine, java = java_twins(spark, "c31_sf_bad", COLUMNS, "years(ts)")
    _fill(spark, (mine, java))
    before = _files(spark, mine)
    with pytest.raises(Exception):
        spark.sql(f"CALL jcat.system.rewrite_data_files(table => 'db.{java}', where => 'jcat.system.years(data) = 1')")
    with pytest.raises(ValidationError, match="year cannot transform string values from 'data'"):
        procedures.sql(spark, f"CALL ours.system.rewrite_data_files(table => 'db.{mine}', "
                              "where => 'system.years(data) = 1')")
    # without ``system.`` Java cannot convert the call (Spark resolves no Iceberg function); ours refuses
    # it too, naming the right one
    with pytest.raises(Exception, match="Cannot parse predicates in where option: bucket"):
        spark.sql(f"CALL jcat.system.rewrite_data_files(table => 'db.{java}', where => 'bucket(4, id) = 1')")
    with pytest.raises(ValidationError, match="Iceberg's function is system.bucket"):
        procedures.sql(spark, f"CALL ours.system.rewrite_data_files(table => 'db.{mine}', where => 'bucket(4, id) = 1')")
    assert _files(spark, mine) == before


def test_where_system_function_on_an_identity_partition(spark, ours):
    """Java 1.10's identity projection copies a transform predicate onto the identity field as it is
    (``day(ts) = 19783`` becomes ``ts = 19783``), which here fails to bind (and for an int column
    would select the partitions equal to the bucket number); ours learns nothing from an identity
    field of another transform and lets the metrics decide: only the files of that day."""
    mine, java = java_twins(spark, "c31_sf_identity", COLUMNS, "ts")
    _fill(spark, (mine, java))
    before = _files(spark, mine)
    where = "ts > TIMESTAMP \"2023-01-01 00:00:00\" AND system.days(ts) = date(\"2024-03-01\")"
    java_where = where.replace("system.", "jcat.system.")
    with pytest.raises(Exception, match="Invalid value for conversion to type timestamptz"):
        spark.sql(f"CALL jcat.system.rewrite_data_files(table => 'db.{java}', where => '{java_where}', "
                  "options => map('rewrite-all', 'true'))")
    got = procedures.sql(spark, f"CALL ours.system.rewrite_data_files(table => 'db.{mine}', where => '{where}', "
                                "options => map('rewrite-all', 'true'))").collect()
    after = _files(spark, mine)
    replaced = sorted(tuple(sorted(ids)) for f, ids in before.items() if f not in after)
    # ids 3 and 4 (2024-03-01 05:00 and 06:00) of each of the three commits, one file each
    assert replaced == [(3,), (4,), (11,), (12,), (19,), (20,)]
    assert tuple(got[0])[:2] == (6, 2)
