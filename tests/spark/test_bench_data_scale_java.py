"""The data-scale rewrite benchmark (``benchmarks/bench_data_scale.py``) at a tiny size: it builds its
merge-on-read table, finds ours and Iceberg Java's outputs equal for every case, and reports figures."""

from __future__ import annotations

import pytest

from tests.helpers.benchmarks import load_benchmark

pytestmark = [pytest.mark.spark, pytest.mark.java]


def test_tiny_run_compares_outputs_and_reports_every_case(spark, table_name):
    bench = load_benchmark("bench_data_scale")
    figures = bench.main(["--rows", "3000", "--partitions", "2", "--files-per-partition", "2", "--repeat", "1",
                          "--delete-fraction", "0.1", "--table", f"db.{table_name}"], spark=spark)
    by_case = {}
    for f in figures:
        by_case.setdefault(f.case.split(" ")[0], {})[f.metric] = f
    assert set(by_case) == {"binpack", "sort", "posdeletes"}
    for case, metrics in by_case.items():
        rewritten = metrics["files rewritten"]
        # four data files (and, file-scoped, four delete files) rewritten on both sides
        assert rewritten.ours == rewritten.reference == 4, case
        assert metrics["wall min"].ours > 0 and metrics["wall min"].reference > 0
    # the table is left as it was built: 3000 rows, one in ten deleted
    assert spark.sql(f"SELECT count(*) FROM jcat.db.{table_name}").collect()[0][0] == 2700
    spark.sql(f"DROP TABLE jcat.db.{table_name} PURGE")


def test_compare_refuses_differing_outputs():
    bench = load_benchmark("bench_data_scale")
    rows, deletes = (10, 123), (1, 7)
    same = {"ours": ((4, 2, 100, 0, 0), rows, deletes), "java": ((4, 1, 100, 0, 0), rows, deletes)}
    bench.compare("binpack", same, (0, 2, 3, 4), rows, deletes)  # files added may differ
    for broken in (
        {**same, "ours": ((3, 2, 100, 0, 0), rows, deletes)},  # a file fewer rewritten
        {**same, "ours": ((4, 2, 100, 0, 0), (10, 124), deletes)},  # other rows after ours
    ):
        with pytest.raises(bench.OutputsDiffer):
            bench.compare("binpack", broken, (0, 2, 3, 4), rows, deletes)
    with pytest.raises(bench.OutputsDiffer):
        bench.compare("posdeletes", {**same, "java": ((4, 1, 100, 0, 0), rows, (1, 8))}, (0, 2), rows, deletes)
