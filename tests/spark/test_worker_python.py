"""Spark's Python workers on a Python that cannot run the package: the first Python task the package
would start fails with PythonWorkerError naming PYSPARK_PYTHON / spark.pyspark.python, and the table
is unchanged.  The run's one session is reused: the test points ``sparkContext.pythonExec`` (what
``spark.pyspark.python`` sets) at a wrapper executable and restores it afterwards."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

import procedures
from procedures.errors import PythonWorkerError
from procedures.frontend import runner
from procedures.spark import environment as env
from tests.helpers.other_python import other_minor_python
from tests.oracles import java_metadata_location

pytestmark = pytest.mark.spark

REPO = str(Path(__file__).resolve().parents[2])


def _wrapper(tmp_path: Path, target: str, *flags: str) -> str:
    """Runs ``target`` with ``flags`` in ``tmp_path``, with this checkout removed from PYTHONPATH (Spark's
    own pyspark.zip entries stay, so the worker daemon still starts; ``-m pyspark.daemon`` puts the
    working folder on sys.path, which must not be the checkout)."""
    path = tmp_path / "worker-python"
    path.write_text(
        "#!/bin/sh\n"
        f"PYTHONPATH=$(printf '%s' \"$PYTHONPATH\" | tr ':' '\\n' | grep -vxF '{REPO}' | paste -sd: -)\n"
        "export PYTHONPATH\n"
        f"cd '{tmp_path}'\n"
        f"exec {target} {' '.join(flags)} \"$@\"\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture()
def table(spark, java_warehouse, table_name):
    # written by our own hadoop catalog on jcat's warehouse, so the test needs no Iceberg Java (pyspark 4)
    procedures.sql(spark, "CREATE NAMESPACE IF NOT EXISTS jcat.db")
    procedures.sql(spark, f"DROP TABLE IF EXISTS jcat.db.{table_name}")
    procedures.sql(spark, f"CREATE TABLE jcat.db.{table_name} (id bigint, data string) USING iceberg")
    for i in range(3):
        procedures.sql(spark, f"INSERT INTO jcat.db.{table_name} VALUES ({i}, 'row {i}')")
    return table_name


def _run_rewrite(spark, java_warehouse, table_name):
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(java_warehouse),
            "spark.sql.session.timeZone": "UTC"}
    return runner.run("rewrite_data_files", kwargs={"table": f"db.{table_name}", "options": {"min-input-files": "2"}},
                        catalog="ours", conf=conf, spark=spark, lenient=True)


def _with_worker_python(spark, executable: str):
    sc = spark.sparkContext
    previous = sc.pythonExec
    sc.pythonExec = executable
    return previous


def test_the_sessions_own_workers_pass(spark):
    assert env.check_python_workers(spark) is None
    # what passed is a real probe of the workers' Python: the driver's version and package, nothing missing
    report = env.check_python_executable(env.worker_python(spark))
    driver = env.driver_info()
    assert (report["python"], report["missing"]) == (driver["python"], {})
    assert report["procedures_version"] == driver["procedures_version"] == procedures.__version__


def test_workers_without_the_package(spark, java_warehouse, table, tmp_path):
    before = java_metadata_location(java_warehouse, "db", table)
    # -S: no site-packages, so neither this package (once off PYTHONPATH) nor pyarrow can be imported
    previous = _with_worker_python(spark, _wrapper(tmp_path, sys.executable, "-S"))
    try:
        with pytest.raises(PythonWorkerError) as e:
            _run_rewrite(spark, java_warehouse, table)
    finally:
        spark.sparkContext.pythonExec = previous
    assert "cannot import procedures" in str(e.value), str(e.value)
    assert "PYSPARK_PYTHON" in str(e.value) and "spark.pyspark.python" in str(e.value)
    assert java_metadata_location(java_warehouse, "db", table) == before
    # with the right Python again the same call works
    assert _run_rewrite(spark, java_warehouse, table).rows[0][0] == 3


def test_workers_on_another_python_minor_version(spark, java_warehouse, table, tmp_path):
    # the run's own interpreter reporting another minor version: no second Python needs installing
    other = other_minor_python(tmp_path)
    before = java_metadata_location(java_warehouse, "db", table)
    previous = _with_worker_python(spark, _wrapper(tmp_path, other))
    try:
        with pytest.raises(PythonWorkerError) as e:
            _run_rewrite(spark, java_warehouse, table)
    finally:
        spark.sparkContext.pythonExec = previous
    assert "PYSPARK_PYTHON" in str(e.value) and sys.executable in str(e.value)
    assert "different Python minor version" in str(e.value) or "differ from the driver" in str(e.value), str(e.value)
    assert java_metadata_location(java_warehouse, "db", table) == before
