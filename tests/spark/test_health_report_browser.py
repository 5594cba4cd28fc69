"""The HTML health report end to end: a neglected table examined, maintained and examined again;
the numbers the page plots equal the metadata tables' (before and after), and the page renders in a
real headless browser (Debian's chromium) with every picture loaded."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from procedures.core.kernel.builder import new_table_metadata
from procedures.frontend.report import health_report
from procedures.spark.dml import append, delete_where
from procedures.spark.metadata_tables import metadata_table
from procedures.spark.session import catalog_for
from procedures.spec.partitioning import PartitionSpecBuilder
from procedures.spec.schema import Schema
from procedures.spec.types import LONG, STRING, NestedField
from tests.helpers.files import touch
from tests.helpers.references import import_reference, skip_missing_reference

pytestmark = pytest.mark.spark

SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "cat", STRING)))
NAME = "health_report_t"


def _neglected(spark):
    cat = catalog_for(spark, "jcat")
    ident = ("db", NAME)
    if not cat.namespace_exists(("db",)):
        cat.create_namespace(("db",))
    if cat.table_exists(ident):
        cat.drop_table(ident, purge=True)
    spec = PartitionSpecBuilder(SCHEMA).identity("cat").build()
    md, _ = new_table_metadata(schema=SCHEMA, location=cat.default_table_location(ident), spec=spec,
                               format_version=2, properties={"history.expire.max-snapshot-age-ms": "1",
                                                             "write.delete.mode": "merge-on-read"})
    t = cat.create_table(ident, md)
    for i in range(6):
        rows = [(i * 10 + k, "a" if k < 5 else "b") for k in range(10)]
        t = append(spark, t, spark.createDataFrame(rows, "id bigint, cat string").repartition(1, "cat"))
    t = delete_where(spark, t, "id IN (1, 2, 11)")
    touch(f"{t.location}/data/cat=a/orphan-from-a-failed-job.parquet")
    return t


def _metadata_numbers(spark, table):
    files = metadata_table(spark, table, "files").collect()
    snapshots = metadata_table(spark, table, "snapshots").collect()
    return {
        "data_file_sizes": sorted(r["file_size_in_bytes"] for r in files if r["content"] == 0),
        "delete_files": sum(1 for r in files if r["content"] != 0),
        "snapshot_ids": sorted(r["snapshot_id"] for r in snapshots),
        "current_manifests": len(metadata_table(spark, table, "manifests").collect()),
    }


def _plotted(figures):
    return {
        "data_file_sizes": figures["data_file_sizes"],
        "delete_files": figures["delete_files"],
        "snapshot_ids": sorted(s[1] for s in figures["snapshots"]),
        "current_manifests": sum(figures["manifests_per_snapshot"][-1][2:]),
    }


def test_report_plots_the_metadata_tables_numbers_and_renders_in_chromium(spark, tmp_path):
    import_reference("matplotlib", "the report extra (matplotlib) is not installed: pip install '.[report]'")
    t = _neglected(spark)
    before = _metadata_numbers(spark, f"jcat.db.{NAME}")
    report = health_report(spark, f"jcat.db.{NAME}", maintain=True, include_orphans=True)
    after = _metadata_numbers(spark, f"jcat.db.{NAME}")
    data = json.loads(re.search(r'id="health-figures">(.*?)</script>', report.html, re.S).group(1).replace("<\\/", "</"))
    [table] = data["tables"]
    assert table["table"] == f"db.{NAME}"
    assert _plotted(table["before"]) == before and _plotted(table["after"]) == after
    assert before != after and len(after["data_file_sizes"]) == 2  # compacted to one file per partition
    assert table["before"]["orphan_files"] == 1 and table["after"]["orphan_files"] == 0
    assert table["before"]["delete_ratio_by_partition"] == {"cat=a": pytest.approx(3 / 30)}  # ids 1, 2 and 11
    steps = [s["procedure"] for s in report.tables[0].steps]
    assert steps[0] == "rewrite_data_files" and "remove_orphan_files" in steps
    assert all(s["status"] == "done" for s in report.tables[0].steps)
    assert t.location  # the table still exists

    page = report.save(str(tmp_path / "report.html"))
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        skip_missing_reference("Debian's chromium is not installed (apt-get install chromium): the report is "
                               "checked in a real headless browser")
    shot = tmp_path / "report.png"
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--screenshot={shot}", "--window-size=1200,3400", f"file://{page}"],
                          capture_output=True, text=True, timeout=120)
    assert shot.is_file(), done.stderr
    image = import_reference("PIL.Image", "Pillow (a matplotlib dependency) is not installed")
    with image.open(shot) as png:
        assert png.size == (1200, 3400)
        colors = png.convert("RGB").getcolors(maxcolors=1_000_000) or []
    # the pictures drew: many colours (text alone would give a few greys), with the bars' blue among them
    assert len(colors) > 500
    assert any(abs(r - 0x4c) < 12 and abs(g - 0x72) < 12 and abs(b - 0xb0) < 12 for _, (r, g, b) in colors)
    shutil.copy(shot, tmp_path.parent / "last-health-report.png")  # for a person to look at
