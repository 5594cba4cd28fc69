"""The DataFrame-only primitives (procedures.spark.dataframes), the worker check and job labels on
both session kinds."""

from __future__ import annotations

import pytest

from procedures.spark.dataframes import is_connect, parallelism, run_slices, iter_slices
from procedures.spark.environment import check_python_workers
from procedures.spark.session import job_description, job_group, in_caller_context

pytestmark = pytest.mark.both_sessions


def test_kind_is_told(spark, request):
    assert is_connect(spark) == ("[connect]" in request.node.name)


def test_parallelism_from_conf(spark):
    # both fixtures set spark.default.parallelism=2
    assert parallelism(spark) == 2
    spark.conf.set("spark.procedures.parallelism", "7")
    try:
        assert parallelism(spark) == 7
    finally:
        spark.conf.unset("spark.procedures.parallelism")


def test_run_slices_one_task_per_slice(spark):
    def work(slice_):
        import os
        for item in slice_:
            yield (item * 10, os.getpid())
    slices = [[1, 2], [3], [4, 5, 6]]
    out = run_slices(spark, slices, work)
    assert sorted(v for v, _ in out) == [10, 20, 30, 40, 50, 60]
    assert sorted(v for v, _ in iter_slices(spark, slices, work)) == [10, 20, 30, 40, 50, 60]
    assert run_slices(spark, [], work) == []


def test_slices_land_in_distinct_tasks(spark):
    from procedures.spark.dataframes import functions, slices_frame
    F = functions(spark)
    df = slices_frame(spark, [[i] for i in range(5)])
    ids = [r[0] for r in df.select(F.spark_partition_id()).collect()]
    assert sorted(ids) == [0, 1, 2, 3, 4]


def test_worker_check_runs(spark):
    check_python_workers(spark)


def test_job_labels_restore(spark):
    with job_group(spark, "grp-1", "a group"):
        with job_description(spark, "proc: step, 1/2"):
            assert spark.range(3).count() == 3
            if is_connect(spark):
                assert "proc: step; 1/2" in spark.getTags()
                assert in_caller_context(spark, lambda: set(spark.getTags()))() >= {"grp-1"}
    if is_connect(spark):
        assert not spark.getTags()


def test_parallelism_measured_when_the_conf_says_nothing(spark, monkeypatch):
    """Without any parallelism key the session's default parallelism is measured by a JVM-only job
    (Spark 4 refuses the partition id inside an aggregate: it is projected first)."""
    from procedures.spark import dataframes

    monkeypatch.setattr(dataframes, "_SPARK_PARALLELISM_KEYS", ())
    monkeypatch.setattr(dataframes, "_measured", {})
    assert parallelism(spark) == 2  # local[2] on both fixtures
