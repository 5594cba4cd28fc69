"""Our procedures on a real Spark standalone cluster: executors in their own JVMs, Python workers that
are not the driver's process, and the package shipped the way a user ships it (``--py-files`` with a zip
of ``procedures``; the child's PYTHONPATH does not hold the checkout).  The same flow
(``tests/helpers/cluster_flow.py``) also runs on the test run's local[2] session; procedure outputs
and table rows must agree.

The cluster driver is a separate process (``spark-submit`` with this venv's Python): a process has one
SparkContext, and this run's is local[2]."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from procedures.core.gc import reachability
from procedures.spark.engine import gc_steps as orphans_action
from tests.helpers import cluster_flow

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
FLOW_SCRIPT = REPO / "tests" / "helpers" / "cluster_flow.py"


def package_zip(dest: Path) -> Path:
    """``procedures.zip``: the package's files at the zip's root, laid out like the wheel
    ``pip wheel --no-deps`` builds (files only, no directory entries), as ``--py-files`` wants it."""
    path = dest / "procedures.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for file in sorted((REPO / "procedures").rglob("*.py")):
            if "__pycache__" not in file.parts:
                z.write(file, file.relative_to(REPO).as_posix())
    return path


def _from_zip(modules: dict[str, str], zip_name: str = "procedures.zip") -> None:
    assert "procedures" in modules and len(modules) > 10, modules
    outside = {name: file for name, file in modules.items() if zip_name not in file}
    assert not outside, f"modules not imported from the shipped {zip_name}: {outside}"


def _child_env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    # the package must come from --py-files: drop the checkout (and the working folder) from PYTHONPATH
    kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
            if p and Path(p).resolve() != REPO and p != "."]
    env["PYTHONPATH"] = os.pathsep.join(kept)
    env.update({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_CONF_DIR": str(workdir / "conf")})
    (workdir / "conf").mkdir(exist_ok=True)
    return env


def submit_flow(cluster, workdir: Path, warehouse: Path) -> dict:
    """Run ``cluster_flow.py`` with spark-submit on ``cluster``; its JSON report."""
    shipped = package_zip(workdir)
    out = workdir / "report.json"
    command = [
        os.path.join(cluster.spark_home, "bin", "spark-submit"),
        "--master", cluster.url, "--deploy-mode", "client",
        "--py-files", str(shipped),
        # one small executor: the worker offers one core and 1g
        "--driver-memory", "512m", "--executor-memory", "512m", "--executor-cores", "1",
        "--total-executor-cores", "1",
        "--conf", f"spark.pyspark.python={sys.executable}",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", "spark.default.parallelism=2",
        "--conf", "spark.sql.session.timeZone=UTC",
        str(FLOW_SCRIPT), str(warehouse), str(out),
    ]
    proc = subprocess.run(command, cwd=workdir, env=_child_env(workdir), capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, (f"spark-submit failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                                  f"{proc.stderr[-6000:]}\n{cluster.logs()}")
    return json.loads(out.read_text())


@pytest.fixture()
def local_flow(spark, tmp_path, monkeypatch):
    """The flow on this run's local[2] session, with the same forced Spark steps."""
    warehouse = tmp_path / "local-warehouse"
    warehouse.mkdir()
    catalog = "flow_local"
    conf = cluster_flow.catalog_conf(str(warehouse), catalog)
    monkeypatch.setattr(reachability, "DRIVER_MAX_MANIFESTS", 0)
    monkeypatch.setattr(reachability, "DRIVER_MAX_LISTS", 0)
    monkeypatch.setattr(orphans_action, "DRIVER_MAX_DIRS", 1)
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield cluster_flow.run_flow(spark, str(warehouse), catalog)
    finally:
        for key in conf:
            spark.conf.unset(key)


def test_flow_on_a_standalone_cluster_matches_local(spark_cluster, local_flow, tmp_path):
    warehouse = tmp_path / "cluster-warehouse"
    warehouse.mkdir()
    report = submit_flow(spark_cluster, tmp_path, warehouse)

    where = report["where"]
    assert where["master"] == spark_cluster.url
    # the driver imported every module of the package from the shipped zip, not the checkout or an installed copy
    _from_zip(where["driver_modules"])
    assert "procedures.spark.engine.gc_steps" in where["driver_modules"]
    executors = where["executors"]
    assert executors
    for e in executors:
        # Python workers of an executor JVM of their own, not of the driver
        assert e["pid"] != where["driver_pid"], where
        assert e["jvm_pid"] is not None and e["jvm_pid"] != where["driver_jvm_pid"], where
        assert e["executor_jvm"], where
        assert "procedures.zip" in e["procedures_file"], where
        _from_zip(e["modules"])

    flow = report["flow"]
    # the flow did real work: compaction, a manifest rewrite, expiry and one orphan removed
    assert flow["rewrite_data_files"][0]["rewritten_data_files_count"] > 0, flow
    assert flow["rewrite_data_files"][0]["added_data_files_count"] == 3, flow
    assert flow["rewrite_sort"][0]["rewritten_data_files_count"] == 3, flow
    assert flow["rewrite_zorder"][0]["rewritten_data_files_count"] == 3, flow
    assert flow["expire_snapshots"][0]["deleted_data_files_count"] > 0, flow
    removed = [r["orphan_file_location"] for r in flow["remove_orphan_files"]]
    assert len(removed) == 1 and removed[0].endswith("<warehouse>/db/events/data/category=a/orphan.parquet"), flow
    assert flow["orphan_left"] is False
    assert len(flow["rows"]) == 400 and [r["id"] for r in flow["rows"]] == list(range(400))
    assert flow["snapshots"] == 1

    assert json.loads(json.dumps(local_flow, sort_keys=True, default=str)) == flow
