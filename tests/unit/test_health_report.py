"""The health report's numbers (core.health_figures) and its page (frontend.report) without Spark:
the figures equal what the metadata holds, and the page embeds them and draws every picture."""

from __future__ import annotations

import json
import re

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.health.figures import health_figures
from procedures.core.kernel.operations import FastAppend, RowDelta
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.frontend.report import TableReport, render_html
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.transforms import parse_transform
from procedures.spec.types import LONG, STRING, NestedField
from tests.helpers.references import import_reference

SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "cat", STRING)))
SPEC = PartitionSpec(0, (PartitionField(2, 1000, parse_transform("identity"), "cat"),))
FAST = RetryPolicy(num_retries=2, min_wait_ms=1, max_wait_ms=2)


@pytest.fixture()
def table(tmp_path):
    cat = HadoopCatalog("ours", str(tmp_path / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/t", spec=SPEC, format_version=2,
                               properties={"write.target-file-size-bytes": str(64 * 1024 * 1024)})
    t = cat.create_table(("db", "t"), md)
    files = []
    for i, (part, size, rows) in enumerate([("a", 1000, 10), ("a", 3000, 30), ("b", 5_000_000, 500)]):
        f = DataFile(f"{t.location}/data/cat={part}/f{i}.parquet", FileFormat.PARQUET, (part,), rows, size, spec_id=0)
        files.append(f)
        t = commit(t, [FastAppend([f])], policy=FAST)
    d = DataFile(f"{t.location}/data/cat=a/d0.parquet", FileFormat.PARQUET, ("a",), 8, 400,
                 content=FileContent.POSITION_DELETES, referenced_data_file=files[1].file_path, spec_id=0)
    return commit(t, [RowDelta(add_deletes=[d])], policy=FAST)


def test_figures_equal_the_metadata(table):
    figures = health_figures(table.io, table.metadata, "db.t", orphans=[100, 250])
    assert figures.data_file_sizes == [1000, 3000, 5_000_000]
    assert figures.target_file_size == 64 * 1024 * 1024
    assert figures.rows_by_partition == {"cat=a": [40, 8], "cat=b": [500, 0]}
    assert figures.delete_ratio_by_partition() == {"cat=a": 0.2}
    assert figures.delete_files == 1
    md = table.metadata
    assert [s[1] for s in figures.snapshots] == [s.snapshot_id for s in sorted(md.snapshots, key=lambda s: s.timestamp_ms)]
    assert [s[2] for s in figures.snapshots] == ["append", "append", "append", "delete"]
    assert len(figures.metadata_files) == len(md.metadata_log) + 1
    # one data manifest per append, kept by each later fast append; the row delta adds a delete manifest
    assert [(m[2], m[3]) for m in figures.manifests_per_snapshot] == [(1, 0), (2, 0), (3, 0), (3, 1)]
    assert (figures.orphan_files, figures.orphan_bytes) == (2, 350)


def test_page_embeds_the_figures_and_draws_every_picture(table):
    import_reference("matplotlib", "the report extra (matplotlib) is not installed: pip install '.[report]'")
    before = health_figures(table.io, table.metadata, "db.t")
    page = render_html("Table health: ours.db.t", [TableReport("db.t", before, before, steps=[
        {"step": 1, "procedure": "rewrite_data_files", "status": "done", "duration_seconds": 1.5,
         "error": None, "result": "rewritten_data_files_count=3"}])])
    data = json.loads(re.search(r'<script type="application/json" id="health-figures">(.*?)</script>', page, re.S)
                      .group(1).replace("<\\/", "</"))
    assert data["tables"][0]["before"]["data_file_sizes"] == [1000, 3000, 5_000_000]
    assert data["tables"][0]["after"]["delete_ratio_by_partition"] == {"cat=a": 0.2}
    # five pictures, before and after each, as PNG images
    assert page.count('src="data:image/png;base64,') == 10
    assert "rewritten_data_files_count=3" in page and "<h2>db.t</h2>" in page


def test_names_are_escaped(table):
    import_reference("matplotlib", "the report extra (matplotlib) is not installed: pip install '.[report]'")
    before = health_figures(table.io, table.metadata, "db.<script>x</script>")
    page = render_html("<b>t</b>", [TableReport("db.<script>x</script>", before)])
    assert "<script>x</script>" not in page.split('id="health-figures">')[0]
    assert "&lt;b&gt;t&lt;/b&gt;" in page


def test_without_matplotlib_the_page_keeps_tables_and_numbers(table, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # `from matplotlib.figure import` fails
    before = health_figures(table.io, table.metadata, "db.t")
    page = render_html("t", [TableReport("db.t", before)])
    assert "data:image/png" not in page and "pip install 'iceberg-procedures[report]'" in page.replace("&#x27;", "'")
    assert '"data_file_sizes": [1000, 3000, 5000000]' in page
