"""The maintenance planner outside Python calls: ``procedures-sql plan`` and ``sql/plan_maintenance.sql``
in subprocesses, and ``docs/maintenance.ipynb`` executed top to bottom with nbclient (its cells assert
what they show).  Each starts its own small Spark (local[2])."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.references import import_reference

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable}


def console(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "procedures.frontend.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env=ENV)


@pytest.mark.pyspark35_only  # pyspark 4: the clean-install flows run `plan --execute`; test_connect_frontend the planner
def test_scheduled_script_then_plan_command(tmp_path):
    # the quickstart's table, then the scheduled script: health, plan executed, health again
    script = tmp_path / "run.sql"
    script.write_text((REPO / "sql" / "quickstart.sql").read_text() + "\n"
                      + (REPO / "sql" / "plan_maintenance.sql").read_text())
    run = console(tmp_path, "--master", "local[2]", "-f", str(script))
    assert run.returncode == 0, run.stderr
    # the quickstart leaves no statistics: the plan computes them
    assert "CALL local.system.compute_table_stats(table => 'db.events')" in run.stdout
    assert "statistics_file=" in run.stdout
    plan = console(tmp_path, "plan", "local.db.events", "--execute", "--master", "local[2]")
    assert plan.returncode == 0, plan.stderr
    # a maintained table: the header of an empty plan and nothing else
    assert plan.stdout.split()[:7] == ["step", "procedure", "arguments", "call", "reason", "executed", "result"]
    assert "Fetched 0 row(s)" in plan.stderr
    missing = console(tmp_path, "plan", "db.missing", "--master", "local[2]")
    assert missing.returncode == 1 and "Couldn't load table 'db.missing' in catalog 'local'" in missing.stderr


@pytest.mark.pyspark4_only  # pyspark 3.5: .ci/clean_install_check.sh runs the notebook on a plain install
def test_maintenance_notebook_runs_top_to_bottom(tmp_path, monkeypatch):
    nbformat = import_reference("nbformat", "nbformat not installed: pip install -e '.[test]'")
    nbclient = import_reference("nbclient", "nbclient not installed: pip install -e '.[test]'")
    import_reference("ipykernel", "ipykernel not installed: pip install -e '.[test]'")
    nb = nbformat.read(REPO / "docs" / "maintenance.ipynb", as_version=4)
    # kernel "python3" is started with this interpreter (jupyter_client swaps a bare "python" for
    # sys.executable), and inherits PYTHONPATH so it imports this checkout
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "rewrite_data_files" in outputs and "orphan_files" in outputs
    # the before/after report displays itself: HTML with the pictures
    pages = [o["data"]["text/html"] for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
             if "text/html" in o.get("data", {})]
    assert any('id="health-figures"' in page and page.count("data:image/png;base64,") == 10 for page in pages)
    assert (tmp_path / "warehouse" / "catalog.db").is_file()


def test_the_saved_notebook_shows_its_outputs():
    """docs/maintenance.ipynb is committed executed (a reader sees the tables and pictures without
    running it): every code cell but the last (spark.stop()) has outputs, the report among them."""
    cells = [c for c in json.loads((REPO / "docs" / "maintenance.ipynb").read_text())["cells"] if c["cell_type"] == "code"]
    assert all(c["outputs"] for c in cells[:-1]) and all(c["execution_count"] for c in cells)
    html = [o["data"]["text/html"] for c in cells for o in c["outputs"] if "text/html" in o.get("data", {})]
    assert any("data:image/png;base64," in "".join(h) for h in html)
