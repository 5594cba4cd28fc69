"""The metadata-scale benchmark (``benchmarks/bench_metadata_scale.py``) at a tiny size, with the driver's
limits lowered so every case takes the path it takes at a million files (manifest lists, manifests and
scan manifests read in Spark tasks, rewrite_manifests written on the executors in parts): it builds its
table, finds ours and Iceberg Java's outputs equal for every case, and reports figures."""

from __future__ import annotations

import pytest

from procedures.core.manifest_rewrite import clustering as RM
from procedures.core.gc import reachability as R
from procedures.spark import scan_planning
from tests.helpers.benchmarks import load_benchmark

pytestmark = [pytest.mark.spark, pytest.mark.java]


def test_tiny_run_compares_outputs_and_reports_every_case(spark, table_name, monkeypatch):
    for module, name in ((R, "DRIVER_MAX_MANIFESTS"), (R, "DRIVER_MAX_LISTS"),
                         (scan_planning, "DRIVER_MAX_SCAN_MANIFESTS"), (scan_planning, "DRIVER_MAX_SCAN_ENTRIES"),
                         (RM, "MIN_PART_ENTRIES")):
        monkeypatch.setattr(module, name, 0 if name != "MIN_PART_ENTRIES" else 1)
    bench = load_benchmark("bench_metadata_scale")
    before = {k: spark.conf.get(k, None) for k in ("spark.sql.catalog.ours.type", "spark.sql.catalog.ours.warehouse")}
    figures = bench.main(["--files", "2000", "--files-per-manifest", "20", "--manifests-per-snapshot", "5",
                          "--orphans", "10", "--repeat", "1", "--warmup", "0", "--table", f"db.{table_name}"],
                         spark=spark)
    by_case: dict[str, dict] = {}
    for f in figures:
        by_case.setdefault(f.case.split(" (")[0], {})[f.metric] = f
    plans = [c for c in by_case if c.startswith("plan p = ")]
    assert len(plans) == 1 and set(by_case) == {plans[0], "plan id < 5000000", "expire_snapshots",
                                                "remove_orphan_files", "rewrite_manifests"}
    for case, metrics in by_case.items():
        assert metrics["wall min"].ours > 0 and metrics["wall min"].reference > 0, case
    assert by_case[plans[0]]["files planned"].ours == by_case[plans[0]]["files planned"].reference == 20
    # the session's own keys for our catalog are as they were
    assert {k: spark.conf.get(k, None) for k in before} == before
    spark.sql(f"DROP TABLE jcat.db.{table_name} PURGE")
