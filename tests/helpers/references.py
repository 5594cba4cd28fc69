"""Skips for a missing reference (an engine, server, library or shared file a conformance test
compares against).  They carry one recognizable prefix so ``tests/conftest.py`` can list them at the
end of every run and fail the session when ``CI=true``: a green CI run means the conformance tests
really ran.  Skips for other reasons (a platform without a feature) use ``pytest.skip`` directly."""

from __future__ import annotations

import importlib.metadata
import types
from pathlib import Path
from typing import NoReturn

import pytest

MISSING_REFERENCE = "missing reference:"

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The shared reference folder beside the clone (``../shared`` from the repository root).
SHARED = REPO_ROOT.parent / "shared"

#: pyspark 4.x: the Iceberg Java 1.10.2 runtime jar (Spark 3.5 / Scala 2.12) cannot load there, so tests
#: marked ``java`` are deselected (not skipped), ``read_all`` has no Java reader, and PyIceberg and
#: DuckDB remain the oracles.
SPARK4 = int(importlib.metadata.version("pyspark").split(".")[0]) >= 4


def skip_missing_reference(reason: str) -> NoReturn:
    """Skip the current test (or, called at module level, the whole module) because a reference it
    compares against is not installed or present; under ``CI=true`` the run then fails."""
    pytest.skip(f"{MISSING_REFERENCE} {reason}", allow_module_level=True)


def import_reference(module: str, reason: str | None = None) -> types.ModuleType:
    """``pytest.importorskip`` for a reference library, with the missing-reference prefix (the only way
    a test may skip for a missing library: ``tests/unit/test_skips.py`` refuses ``importorskip``)."""
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:
        skip_missing_reference(reason or f"Python module {module!r} not importable ({exc})")


def shared_file(relative: str) -> Path:
    """A file of the shared reference folder, or a missing-reference skip naming where it was looked for."""
    path = SHARED / relative
    if not path.exists():
        skip_missing_reference(f"shared file {path} not present (the shared folder belongs at ../shared "
                               "beside the repository)")
    return path


#: The JDBC drivers Iceberg Java's JdbcCatalog needs in the test session, from Debian's packages
#: (``.ci/run`` installs them): dialect -> (jar, package).  The SQLite driver's native library comes with
#: its ``-jni`` package, a dependency of the jar's package, on the JVM's default library path.
JDBC_DRIVER_JARS = {
    "sqlite": (Path("/usr/share/java/sqlite-jdbc.jar"), "libxerial-sqlite-jdbc-java"),
    "postgresql": (Path("/usr/share/java/postgresql.jar"), "libpostgresql-jdbc-java"),
}


def present_jdbc_driver_jars() -> list[str]:
    """The JDBC driver jars of :data:`JDBC_DRIVER_JARS` installed here (for ``spark.jars``)."""
    return [str(jar) for jar, _ in JDBC_DRIVER_JARS.values() if jar.is_file()]


def require_jdbc_driver(dialect: str) -> str:
    """The driver jar of ``dialect`` (``sqlite`` or ``postgresql``), or a missing-reference skip naming
    the Debian package to install.  The shared session puts present jars on ``spark.jars`` when it
    starts, so installing one later needs a new run."""
    jar, package = JDBC_DRIVER_JARS[dialect]
    if not jar.is_file():
        skip_missing_reference(f"the {dialect} JDBC driver for Iceberg Java's JdbcCatalog is not installed at "
                               f"{jar}: apt-get install {package}")
    return str(jar)


def is_missing_reference(reason: str) -> bool:
    return MISSING_REFERENCE in reason
