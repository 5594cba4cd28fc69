"""Shared fixtures.  One Spark session per test run (local[2], UI off, two shuffle partitions) with the
Iceberg Java 1.10.2 runtime on ``spark.jars`` and a Java ``hadoop`` catalog named ``jcat`` whose
warehouse is a temporary folder.  Unit tests never touch these fixtures, so they run without a JVM."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parents[1].parent / "shared" / "golden" / "iceberg-java"


def iceberg_runtime_jar() -> str:
    """Path of the Iceberg Java 1.10.2 Spark 3.5 runtime jar shipped by the test extra."""
    import snowpark_connect_deps_iceberg as pkg

    jar = Path(list(pkg.__path__)[0]) / "jars" / "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
    if not jar.exists():
        pytest.skip(f"Iceberg runtime jar not installed at {jar}")
    return str(jar)


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    """Iceberg Java's golden test files (read in place, never copied)."""
    if not GOLDEN.is_dir():
        pytest.skip(f"golden files not found at {GOLDEN}")
    return GOLDEN


@pytest.fixture(scope="session")
def java_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Warehouse folder of the Java ``jcat`` hadoop catalog (and of our own catalogs in tests)."""
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def spark(java_warehouse: Path):
    """The one Spark session of the run."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("iceberg-procedures-tests")
        .config("spark.jars", iceberg_runtime_jar())
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.sql.catalog.jcat", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.jcat.type", "hadoop")
        .config("spark.sql.catalog.jcat.warehouse", str(java_warehouse))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.pyspark.python", sys.executable)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture()
def table_name(request: pytest.FixtureRequest) -> str:
    """A table name unique to the test, for ``jcat.db.<name>``."""
    import re

    return "t_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")[:60]
