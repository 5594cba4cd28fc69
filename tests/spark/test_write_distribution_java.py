"""Appends honour ``write.distribution-mode`` and ``spark.sql.iceberg.distribution-mode`` as Iceberg
Java's do (procedures.core.kernel.distribution): twin tables, one appended by Java's ``INSERT`` and
one by our ``append``, end with the same data files per partition (hash, none), or with files that
each hold one sorted, non-overlapping id range of their partition (range)."""

from __future__ import annotations

import pytest

from procedures.errors import ValidationError
from procedures.spark.dml import append
from procedures.spark.write import DISTRIBUTION_MODE_CONF
from tests.helpers.catalogs import java_twins, ours_on_java_warehouse

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def ours(spark, java_warehouse):
    return ours_on_java_warehouse(spark, java_warehouse)


def _rows(spark):
    # four Spark partitions, each holding rows of every p: without a shuffle each writes 3 files
    return spark.range(0, 4000, 1, 4).selectExpr("id", "CAST(id % 3 AS int) AS p", "concat('r', id) AS s")


def _files(spark, name):
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    return spark.sql(f"SELECT partition.p AS p, readable_metrics.id.lower_bound AS lo, readable_metrics.id.upper_bound AS hi, "
                     f"sort_order_id FROM jcat.db.{name}.files").collect()


def _per_partition(files):
    out: dict[int, int] = {}
    for f in files:
        out[f["p"]] = out.get(f["p"], 0) + 1
    return out


def _twins(spark, name, props="", order=None):
    mine, java = java_twins(spark, name, "id bigint, p int, s string", "p", props)
    if order:
        for n in (mine, java):
            spark.sql(f"ALTER TABLE jcat.db.{n} WRITE ORDERED BY {order}")
    return mine, java


def _append_both(spark, mine, java):
    append(spark, f"ours.db.{mine}", _rows(spark))
    _rows(spark).createOrReplaceTempView("dist_src")
    spark.sql(f"INSERT INTO jcat.db.{java} SELECT * FROM dist_src")
    spark.sql(f"REFRESH TABLE jcat.db.{mine}")  # Java's catalog caches the table we committed to
    assert spark.table(f"jcat.db.{mine}").count() == spark.table(f"jcat.db.{java}").count() == 4000


@pytest.mark.java
@pytest.mark.parametrize("mode, per_partition", [("hash", 1), ("none", 4)])
def test_table_mode_gives_javas_files(spark, ours, mode, per_partition):
    mine, java = _twins(spark, f"dist_{mode}", f"'write.distribution-mode'='{mode}'")
    _append_both(spark, mine, java)
    assert _per_partition(_files(spark, mine)) == _per_partition(_files(spark, java)) == {0: per_partition, 1: per_partition,
                                                                                           2: per_partition}


@pytest.mark.java
def test_session_mode_wins_over_the_table(spark, ours):
    mine, java = _twins(spark, "dist_session", "'write.distribution-mode'='hash'")
    spark.conf.set(DISTRIBUTION_MODE_CONF, "none")
    try:
        _append_both(spark, mine, java)
    finally:
        spark.conf.unset(DISTRIBUTION_MODE_CONF)
    assert _per_partition(_files(spark, mine)) == _per_partition(_files(spark, java)) == {0: 4, 1: 4, 2: 4}


@pytest.mark.java
def test_range_mode_writes_sorted_ranges(spark, ours):
    # WRITE ORDERED BY sets the sort order and write.distribution-mode=range, as Java's ALTER does
    mine, java = _twins(spark, "dist_range", order="id")
    _append_both(spark, mine, java)
    for name in (mine, java):
        files = _files(spark, name)
        # sorted, yet claimed as unsorted (0), as Java's appends claim them
        assert {f["sort_order_id"] for f in files} == {0}, name
        # the id bounds of one partition's files never overlap: each file is one range
        for p in (0, 1, 2):
            ranges = sorted((f["lo"], f["hi"]) for f in files if f["p"] == p)
            assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:])), (name, p, ranges)


@pytest.mark.java
def test_bad_modes_are_refused_and_write_nothing(spark, ours):
    mine, _ = _twins(spark, "dist_bad", "'write.distribution-mode'='fanout'")
    with pytest.raises(ValidationError, match="write.distribution-mode='fanout' is not supported; use none, hash or range"):
        append(spark, f"ours.db.{mine}", _rows(spark))
    spark.conf.set(DISTRIBUTION_MODE_CONF, "roundrobin")
    try:
        with pytest.raises(ValidationError, match=f"'roundrobin' from {DISTRIBUTION_MODE_CONF}"):
            append(spark, f"ours.db.{mine}", _rows(spark))
    finally:
        spark.conf.unset(DISTRIBUTION_MODE_CONF)
    assert _files(spark, mine) == []
