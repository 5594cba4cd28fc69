"""Checks of the Spark set-up, each failing with a typed error that names the fix.

* :func:`check_versions` -- pyspark 3.5.x or 4.x, and the Java the session's JVM runs (17 on pyspark
  3.5; 17 or 21 on pyspark 4); :class:`~procedures.errors.UnsupportedVersionError` otherwise.
* :func:`check_python_workers` -- one one-partition Spark job that reports the Python of Spark's
  Python workers: the same minor version as the driver, and able to import this package (and its
  runtime dependencies); :class:`~procedures.errors.PythonWorkerError` otherwise, naming
  ``PYSPARK_PYTHON`` / ``spark.pyspark.python``.
* :func:`check_python_executable` -- the same check of a Python executable on this machine, without Spark.

:func:`check_session` runs the version check once per SparkContext and is called wherever the package
picks up a session; the worker check runs once per SparkContext and worker executable, before the
package first builds a Python task.  ``PROCEDURES_SKIP_ENV_CHECKS=1`` turns both off (at your own risk).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
import weakref
from typing import Any

from procedures.errors import PythonWorkerError, UnsupportedVersionError
from procedures.spark.dataframes import functions, is_connect, session_key

__all__ = [
    "SUPPORTED_PYSPARK", "SUPPORTED_JAVA", "check_session", "check_versions", "check_pyspark_version",
    "check_java_version", "java_major", "check_python_workers", "check_python_executable", "diagnose_worker",
    "driver_info", "worker_python",
]

SUPPORTED_PYSPARK = "3.5.x or 4.x"
#: Java major versions per pyspark major.minor line ("4" covers every 4.x)
SUPPORTED_JAVA = {"3.5": (17,), "4": (17, 21)}
SKIP_ENV = "PROCEDURES_SKIP_ENV_CHECKS"
#: modules a Python task of the package imports besides the package itself
WORKER_MODULES = ("procedures", "pyarrow", "numpy", "pandas", "fastavro", "mmh3")

_LOCK = threading.Lock()
_versions_checked: set[tuple] = set()
_workers_checked: set[tuple] = set()
#: a Connect session's ``spark.pyspark.python`` (a static key: one round trip per session object, not
#: one per job)
_connect_executables: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()

# The probe is compiled under a module name that is not importable, so cloudpickle ships it by value:
# a worker without this package can still run it and say so.
_PROBE_SOURCE = f'''
def probe(_=None):
    import sys
    info = {{"python": "%d.%d.%d" % tuple(sys.version_info[:3]), "executable": sys.executable, "missing": {{}}}}
    for name in {WORKER_MODULES!r}:
        try:
            module = __import__(name)
        except Exception as e:
            info["missing"][name] = "%s: %s" % (type(e).__name__, e)
        else:
            if name == "procedures":
                info["procedures_version"] = getattr(module, "__version__", None)
    return info


def probe_json(_):
    import json
    return json.dumps(probe())
'''
_PROBE_NAMESPACE: dict[str, Any] = {"__name__": "procedures_worker_probe"}
exec(compile(_PROBE_SOURCE, "<procedures worker probe>", "exec"), _PROBE_NAMESPACE)  # noqa: S102


def _skipped() -> bool:
    return os.environ.get(SKIP_ENV, "").strip().lower() in ("1", "true", "yes")


# ------------------------------------------------------------------------------------ versions
def _major_minor(version: str) -> tuple[int, int]:
    parts = []
    for piece in str(version).split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit()) if piece else ""
        if not digits:
            break
        parts.append(int(digits))
    while len(parts) < 2:
        parts.append(0)
    return parts[0], parts[1]


def _line(pyspark_version: str) -> str:
    major, minor = _major_minor(pyspark_version)
    return "4" if major == 4 else f"{major}.{minor}"


def check_pyspark_version(version: str) -> None:
    """UnsupportedVersionError unless ``version`` is a pyspark 3.5.x or 4.x."""
    if _line(version) not in SUPPORTED_JAVA:
        raise UnsupportedVersionError(
            f"pyspark {version} is not supported: iceberg-procedures runs on pyspark {SUPPORTED_PYSPARK}; "
            "install one, e.g. pip install 'pyspark>=3.5,<5'",
            component="pyspark", version=str(version), supported=SUPPORTED_PYSPARK,
        )


def java_major(version: str) -> int:
    """The major version of a ``java.version`` / ``java.specification.version`` text ("1.8.0_392" -> 8)."""
    major, minor = _major_minor(version)
    return minor if major == 1 else major


def check_java_version(java_version: str, pyspark_version: str) -> None:
    """UnsupportedVersionError unless the JVM's Java is one the pyspark line supports here."""
    supported = SUPPORTED_JAVA.get(_line(pyspark_version))
    if supported is None:
        check_pyspark_version(pyspark_version)
        return
    major = java_major(java_version)
    if major not in supported:
        names = " or ".join(str(v) for v in supported)
        raise UnsupportedVersionError(
            f"Java {java_version} is not supported with pyspark {pyspark_version}: use Java {names} "
            "(point JAVA_HOME at it before starting Spark)",
            component="java", version=str(java_version), supported=names,
        )


def _context(spark: Any) -> Any:
    if spark is None or is_connect(spark):
        return None
    try:
        return getattr(spark, "sparkContext", None)
    except Exception:  # noqa: BLE001 -- a stopped or stand-in session has no SparkContext
        return None


def check_versions(spark: Any) -> None:
    """Check the installed pyspark and the Java of ``spark``'s JVM (classic sessions; a Spark Connect
    session has no local JVM and only pyspark is checked)."""
    import pyspark  # noqa: PLC0415

    check_pyspark_version(pyspark.__version__)
    try:
        sc = _context(spark)
        jvm = getattr(sc, "_jvm", None)
        java = str(jvm.java.lang.System.getProperty("java.version")) if jvm is not None else None
    except Exception:  # noqa: BLE001 -- no readable JVM (Connect, a stopped context): nothing to check
        java = None
    if java:
        check_java_version(java, pyspark.__version__)


def _key(sc: Any) -> tuple:
    try:
        app = sc.applicationId
    except Exception:  # noqa: BLE001
        app = None
    return id(sc), app


def check_session(spark: Any) -> Any:
    """Run :func:`check_versions` once per SparkContext (Connect: once per application); returns
    ``spark``."""
    if spark is None or _skipped():
        return spark
    if is_connect(spark):
        key = session_key(spark)
    else:
        sc = _context(spark)
        if sc is None:
            return spark
        key = _key(sc)
    if key in _versions_checked:
        return spark
    check_versions(spark)
    with _LOCK:
        _versions_checked.add(key)
    return spark


# ------------------------------------------------------------------------------------ Python workers
@functools.lru_cache(maxsize=1)
def _driver_info() -> dict:
    return _PROBE_NAMESPACE["probe"]()


def driver_info() -> dict:
    """The driver's side of the comparison (what the probe reports, for this process)."""
    return dict(_driver_info())


def worker_python(spark: Any) -> str:
    """The Python executable Spark starts workers with (``spark.pyspark.python``, ``PYSPARK_PYTHON``,
    else ``python3``).  On Spark Connect the server decides; its ``spark.pyspark.python`` when it
    says, else ``python3`` (the server's environment is not visible from here)."""
    if spark is not None and is_connect(spark):
        try:
            return _connect_executables[spark]
        except (KeyError, TypeError):
            pass
        try:
            exe = spark.conf.get("spark.pyspark.python", None)
        except Exception:  # noqa: BLE001 -- the server may refuse to show a static key
            exe = None
        try:
            _connect_executables[spark] = str(exe or "python3")
        except TypeError:  # not weakly referable: read again next time
            pass
        return str(exe or "python3")
    sc = _context(spark)
    exe = getattr(sc, "pythonExec", None)
    return str(exe or os.environ.get("PYSPARK_PYTHON") or "python3")


def _fix(driver: dict) -> str:
    return (f"set PYSPARK_PYTHON (before starting Spark) or spark.pyspark.python to a Python {_minor(driver)} "
            f"that has iceberg-procedures installed, e.g. the driver's own {driver.get('executable') or sys.executable}")


def _minor(info: dict) -> str:
    return ".".join(str(info.get("python", "")).split(".")[:2])


def diagnose_worker(worker: dict, driver: dict | None = None, *, executable: str | None = None) -> PythonWorkerError | None:
    """The error for a worker's probe report that cannot run the package's tasks, or None when it can."""
    driver = driver or driver_info()
    where = f"Spark's Python workers ({worker.get('executable') or executable or '?'}, Python {worker.get('python', '?')})"
    if _minor(worker) != _minor(driver):
        return PythonWorkerError(
            f"{where} differ from the driver's Python {driver.get('python')}; {_fix(driver)}",
            worker=worker, driver=driver,
        )
    missing = worker.get("missing") or {}
    if missing:
        what = "; ".join(f"{k} ({v})" for k, v in missing.items())
        if set(missing) <= set(driver.get("missing") or {}):
            # the driver cannot import them either: the installation lacks them, not the worker set-up
            exe = worker.get("executable") or executable or "python"
            fix = (f"the installation is incomplete: {exe} -m pip install {' '.join(sorted(missing))} "
                   "(a plain pip install of iceberg-procedures brings all of them)")
            return PythonWorkerError(f"{where} cannot import {what}; {fix}", worker=worker, driver=driver)
        return PythonWorkerError(f"{where} cannot import {what}; {_fix(driver)}", worker=worker, driver=driver)
    if worker.get("procedures_version") != driver.get("procedures_version"):
        return PythonWorkerError(
            f"{where} import iceberg-procedures {worker.get('procedures_version')} but the driver runs "
            f"{driver.get('procedures_version')}; {_fix(driver)}",
            worker=worker, driver=driver,
        )
    return None


def _failure(exc: BaseException, executable: str, driver: dict) -> PythonWorkerError:
    text = str(exc)
    first = next((line.strip() for line in text.splitlines()
                  if "Error" in line or "error" in line or "version" in line), text.strip()[:300])
    if "PYTHON_VERSION_MISMATCH" in text or "different version" in text:
        reason = "run a different Python minor version than the driver"
    elif "Cannot run program" in text or "No such file" in text:
        reason = "cannot be started"
    else:
        reason = "failed to run a probe task"
    return PythonWorkerError(
        f"Spark's Python workers ({executable}) {reason} (driver: Python {driver.get('python')}); {_fix(driver)}. "
        f"Spark said: {first[:500]}",
        worker={"executable": executable}, driver=driver,
    )


def check_python_workers(spark: Any) -> None:
    """Run the probe as a one-partition Spark job (once per application and worker executable) and
    raise PythonWorkerError when the workers cannot run the package's Python tasks.  The job is a plain
    (pickled, not Arrow) Python UDF over one row: it runs on classic and Spark Connect sessions alike,
    and on a worker without pyarrow, which it then reports missing."""
    if spark is None or _skipped() or not hasattr(spark, "range"):
        return
    executable = worker_python(spark)
    key = (*session_key(spark), executable)
    if key in _workers_checked:
        return
    driver = driver_info()
    try:
        from pyspark.sql.types import StringType  # noqa: PLC0415 -- the package loads without pyspark

        fns = functions(spark)
        # a DataType, not "string": a Connect client without the Connect mode flag parses type strings
        # through a classic SparkContext, which a process holding only a Connect session lacks
        probe = fns.udf(_PROBE_NAMESPACE["probe_json"], StringType(), useArrow=False)
        rows = spark.range(0, 1, 1, 1).select(probe(fns.col("id")).alias("report")).collect()
    except Exception as e:  # noqa: BLE001 -- any failure of the probe is a worker set-up problem
        raise _failure(e, executable, driver) from e
    reports = [json.loads(row[0]) for row in rows]
    for report in reports:
        error = diagnose_worker(report, driver, executable=executable)
        if error is not None:
            raise error
    with _LOCK:
        _workers_checked.add(key)


def check_python_executable(executable: str, *, env: dict | None = None, timeout: float = 60) -> dict:
    """Run the probe with ``executable`` on this machine (no Spark) and return its report; raises
    PythonWorkerError when that Python could not run the package's tasks."""
    driver = driver_info()
    code = _PROBE_SOURCE + "\nimport json\nprint(json.dumps(probe()))\n"
    try:
        # from the root folder: a checkout in the working directory must not stand in for an install
        run = subprocess.run([executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                             env=env if env is not None else os.environ.copy(), cwd=os.path.abspath(os.sep))
    except (OSError, subprocess.TimeoutExpired) as e:
        raise _failure(e, executable, driver) from e
    if run.returncode != 0:
        raise _failure(RuntimeError(run.stderr.strip() or f"exit code {run.returncode}"), executable, driver)
    report = json.loads(run.stdout.strip().splitlines()[-1])
    error = diagnose_worker(report, driver, executable=executable)
    if error is not None:
        raise error
    return report
