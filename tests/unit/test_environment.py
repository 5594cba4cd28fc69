"""Set-up mistakes fail with typed errors naming the fix: unsupported pyspark/Java versions, Spark
Python workers that cannot run the package, a procedure call without its table, unknown catalogs and
catalogs without warehouse/uri.  No Spark: sessions are stand-ins, workers are local executables."""

from __future__ import annotations

import os
import stat
import sys
from types import SimpleNamespace

import pytest

from procedures.catalog.config import load_catalog
from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.errors import (
    CatalogConfigError, IcebergError, MissingParameterError, NoSuchCatalogError, PythonWorkerError,
    SparkEnvironmentError, UnsupportedVersionError,
)
from procedures.frontend import runner
from procedures.spark import environment as env
from procedures.spec.schema import Schema
from procedures.spec.types import LONG, NestedField
from tests.helpers.other_python import other_minor_python, other_minor_version


# ------------------------------------------------------------------------------------ versions
def _accepted(version: str) -> bool:
    try:
        env.check_pyspark_version(version)
    except UnsupportedVersionError:
        return False
    return True


@pytest.mark.parametrize("version, supported", [
    ("3.5.0", True), ("3.5.8", True), ("3.5.9", True), ("4.0.1", True), ("4.1.0", True), ("4.3.0", True),
    ("4.1.0.dev1", True), ("3.4.4", False), ("3.6.0", False), ("3.50.0", False), ("5.0.0", False), ("2.4.8", False),
])
def test_pyspark_versions_on_either_side_of_the_supported_lines(version, supported):
    assert _accepted(version) is supported


@pytest.mark.parametrize("version", ["3.4.4", "3.3.0", "2.4.8", "5.0.0"])
def test_unsupported_pyspark_versions_name_the_supported_ones(version):
    with pytest.raises(UnsupportedVersionError) as e:
        env.check_pyspark_version(version)
    assert isinstance(e.value, SparkEnvironmentError) and isinstance(e.value, IcebergError)
    assert e.value.component == "pyspark" and e.value.version == version
    assert f"pyspark {version} is not supported" in str(e.value) and "3.5.x or 4.x" in str(e.value)


@pytest.mark.parametrize("text, major", [("1.8.0_392", 8), ("11.0.2", 11), ("17.0.15", 17), ("21", 21), ("25-ea", 25)])
def test_java_major(text, major):
    assert env.java_major(text) == major


@pytest.mark.parametrize("java, pyspark, ok", [
    ("17.0.15", "3.5.8", True), ("17.0.15", "4.1.0", True), ("21.0.2", "4.3.0", True),
    ("1.8.0_392", "3.5.8", False), ("11.0.2", "3.5.8", False), ("11.0.2", "4.1.0", False),
    ("21.0.2", "3.5.8", False), ("25.0.1", "4.1.0", False),
])
def test_java_versions_per_pyspark_line(java, pyspark, ok):
    if ok:
        env.check_java_version(java, pyspark)
        return
    with pytest.raises(UnsupportedVersionError) as e:
        env.check_java_version(java, pyspark)
    assert e.value.component == "java"
    assert f"Java {java} is not supported with pyspark {pyspark}" in str(e.value) and "JAVA_HOME" in str(e.value)


def fake_session(java: str, app: str):
    system = SimpleNamespace(getProperty=lambda key: java if key == "java.version" else None)
    jvm = SimpleNamespace(java=SimpleNamespace(lang=SimpleNamespace(System=system)))
    return SimpleNamespace(sparkContext=SimpleNamespace(_jvm=jvm, applicationId=app))


def test_check_session_refuses_an_unsupported_java_every_time(monkeypatch):
    monkeypatch.delenv(env.SKIP_ENV, raising=False)
    bad = fake_session("11.0.2", "app-java11")
    for _ in range(2):  # a failed check is not cached as passed
        with pytest.raises(UnsupportedVersionError, match="Java 11.0.2 is not supported"):
            env.check_session(bad)
    good = fake_session("17.0.15", "app-java17")
    assert env.check_session(good) is good
    monkeypatch.setenv(env.SKIP_ENV, "1")
    assert env.check_session(bad) is bad


def test_check_session_refuses_an_unsupported_pyspark(monkeypatch):
    import pyspark

    monkeypatch.delenv(env.SKIP_ENV, raising=False)
    monkeypatch.setattr(pyspark, "__version__", "3.4.1")
    with pytest.raises(UnsupportedVersionError, match=r"pyspark 3\.4\.1 is not supported"):
        env.check_session(fake_session("17.0.15", "app-old-pyspark"))


# ------------------------------------------------------------------------------------ Python workers
def test_diagnose_worker_accepts_the_drivers_own_python():
    driver = env.driver_info()
    assert driver["missing"] == {} and driver["procedures_version"]
    assert env.diagnose_worker(dict(driver), driver) is None


def test_diagnose_worker_names_the_setting_to_fix():
    driver = {"python": "3.11.7", "executable": "/venv/bin/python", "missing": {}, "procedures_version": "0.1.0"}
    other_minor = {**driver, "python": "3.10.13", "executable": "/usr/bin/python3.10"}
    err = env.diagnose_worker(other_minor, driver)
    assert isinstance(err, PythonWorkerError) and isinstance(err, SparkEnvironmentError)
    assert "Python 3.10.13" in str(err) and "3.11.7" in str(err)
    assert "PYSPARK_PYTHON" in str(err) and "spark.pyspark.python" in str(err) and "/venv/bin/python" in str(err)
    without = {**driver, "executable": "/usr/bin/python3", "missing": {"procedures": "ModuleNotFoundError: x"}}
    del without["procedures_version"]
    err = env.diagnose_worker(without, driver)
    assert "cannot import procedures" in str(err) and "PYSPARK_PYTHON" in str(err) and err.worker is without
    # the driver's own Python without a dependency: an incomplete installation, not a wrong PYSPARK_PYTHON
    incomplete = {**driver, "missing": {"pandas": "ModuleNotFoundError: No module named 'pandas'"}}
    err = env.diagnose_worker(incomplete, {**driver, "missing": dict(incomplete["missing"])})
    assert "cannot import pandas" in str(err) and "/venv/bin/python -m pip install pandas" in str(err)
    assert "PYSPARK_PYTHON" not in str(err)
    older = {**driver, "procedures_version": "0.0.9"}
    assert "iceberg-procedures 0.0.9" in str(env.diagnose_worker(older, driver))


def test_check_python_executable_that_does_not_exist(tmp_path):
    with pytest.raises(PythonWorkerError, match="cannot be started.*PYSPARK_PYTHON"):
        env.check_python_executable(str(tmp_path / "no-such-python"))


def wrapper(tmp_path, target: str, *flags: str) -> str:
    """An executable that runs ``target`` with ``flags`` and without this checkout on PYTHONPATH."""
    path = tmp_path / "python-wrapper"
    path.write_text(f"#!/bin/sh\nunset PYTHONPATH\nexec {target} {' '.join(flags)} \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_check_python_executable_without_the_package(tmp_path):
    # -S: no site-packages, so neither this package nor its dependencies can be imported
    exe = wrapper(tmp_path, sys.executable, "-S")
    with pytest.raises(PythonWorkerError) as e:
        env.check_python_executable(exe)
    assert "cannot import procedures" in str(e.value) and "PYSPARK_PYTHON" in str(e.value)


def test_check_python_executable_of_another_minor_version(tmp_path):
    # the run's own interpreter reporting another minor version: no second Python needs installing
    major, minor = other_minor_version()
    with pytest.raises(PythonWorkerError, match=r"differ from the driver's Python") as e:
        env.check_python_executable(wrapper(tmp_path, other_minor_python(tmp_path)))
    assert f"Python {major}.{minor}.0)" in str(e.value) and env.driver_info()["python"] in str(e.value)
    assert e.value.worker["python"] == f"{major}.{minor}.0"


def test_check_python_executable_of_the_driver_passes():
    report = env.check_python_executable(sys.executable)
    assert report["missing"] == {} and report["python"] == env.driver_info()["python"]


# ------------------------------------------------------------------------------------ procedure calls
@pytest.fixture()
def hadoop(tmp_path):
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(tmp_path / "wh"),
            "spark.sql.catalog.other.type": "jdbc",
            "spark.sql.catalog.other.uri": f"jdbc:sqlite:{tmp_path / 'sub' / 'dir' / 'catalog.db'}"}
    catalog = HadoopCatalog("ours", str(tmp_path / "wh"))
    catalog.create_namespace(("db",))
    schema = Schema((NestedField(1, "id", LONG, True),))
    md, _ = new_table_metadata(schema=schema, location=str(tmp_path / "wh" / "db" / "t"))
    catalog.create_table(("db", "t"), md)
    return conf, catalog


def state(catalog):
    t = catalog.load_table(("db", "t"))
    return t.metadata_location, sorted(os.listdir(os.path.join(t.metadata.location, "metadata")))


@pytest.mark.parametrize("catalog", [None, "ours", "nope"])
def test_a_call_without_table_names_the_missing_parameter(hadoop, catalog):
    conf, cat = hadoop
    before = state(cat)
    with pytest.raises(MissingParameterError) as e:
        runner.run("expire_snapshots", kwargs={"retain_last": 1}, catalog=catalog, conf=conf, lenient=True)
    assert e.value.procedure == "expire_snapshots" and e.value.parameters == ["table"]
    assert "Missing required parameters: [table] for expire_snapshots(" in str(e.value)
    assert "table =>" in str(e.value)
    # also without any catalog configured at all
    with pytest.raises(MissingParameterError):
        runner.run("rewrite_data_files", conf={})
    assert state(cat) == before


def test_an_unknown_catalog_lists_the_configured_ones(hadoop):
    conf, cat = hadoop
    before = state(cat)
    with pytest.raises(NoSuchCatalogError) as e:
        runner.run("expire_snapshots", kwargs={"table": "db.t"}, catalog="nope", conf=conf)
    assert isinstance(e.value, CatalogConfigError) and e.value.configured == ["other", "ours"]
    assert "Cannot use catalog nope" in str(e.value) and "configured: other, ours" in str(e.value)
    assert "spark.sql.catalog.nope.type" in str(e.value)
    with pytest.raises(NoSuchCatalogError, match="configured catalogs: other, ours"):
        load_catalog("nope", conf)
    with pytest.raises(NoSuchCatalogError, match=r"configured: none"):
        runner.run("expire_snapshots", kwargs={"table": "db.t"}, conf={})
    assert state(cat) == before


def test_a_catalog_without_warehouse_or_uri_names_the_key(hadoop):
    conf, cat = hadoop
    before = state(cat)
    no_warehouse = {k: v for k, v in conf.items() if k != "spark.sql.catalog.ours.warehouse"}
    with pytest.raises(CatalogConfigError) as e:
        runner.run("expire_snapshots", kwargs={"table": "db.t"}, catalog="ours", conf=no_warehouse)
    assert "set spark.sql.catalog.ours.warehouse" in str(e.value)
    no_uri = {k: v for k, v in conf.items() if k != "spark.sql.catalog.other.uri"}
    with pytest.raises(CatalogConfigError) as e:
        load_catalog("other", no_uri)
    assert "set spark.sql.catalog.other.uri" in str(e.value) and "jdbc:sqlite:" in str(e.value)
    assert state(cat) == before


def test_a_sqlite_catalog_creates_its_folder(hadoop, tmp_path):
    conf, _ = hadoop
    load_catalog("other", conf).create_namespace(("db",))
    assert (tmp_path / "sub" / "dir" / "catalog.db").is_file()
