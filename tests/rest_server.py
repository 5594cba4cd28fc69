"""A throwaway Iceberg REST catalog server on 127.0.0.1 for the tests: Iceberg Java's own
``org.apache.iceberg.rest.CatalogHandlers`` over a ``JdbcCatalog`` on SQLite, behind the JDK's HTTP
server (``tests/rest/RestCatalogServer.java``, run by ``java``'s source-file launch with the Iceberg
runtime jar, pyspark's Hadoop jars and Debian's SQLite JDBC driver on the classpath).

:func:`start` returns once the server wrote its port; :func:`stop` ends it.  Options turn on OAuth2
client-credentials checking, a static token, a URL prefix, storage config returned with every
table, and commits refused with 503 (to test the client's unknown-state handling).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.processes import spawn_logged, stop_process_group, wait_ready
from tests.helpers.references import present_jdbc_driver_jars, skip_missing_reference

SOURCE = Path(__file__).resolve().parent / "rest" / "RestCatalogServer.java"


@dataclass(frozen=True)
class RestServer:
    """A running server: ``uri`` is ``http://127.0.0.1:<port>``; ``warehouse`` its root folder."""

    uri: str
    warehouse: str
    process: subprocess.Popen
    basedir: str
    options: dict = field(default_factory=dict)

    def logs(self) -> str:
        """The tail of the server's output (for failure messages)."""
        path = Path(self.basedir, "server.log")
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""


def runtime_jar() -> str | None:
    """The Iceberg Java runtime jar of the test extra, else None."""
    try:
        import snowpark_connect_deps_iceberg as pkg
    except ImportError:
        return None
    jar = Path(list(pkg.__path__)[0]) / "jars" / "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
    return str(jar) if jar.exists() else None


def hadoop_jars() -> list[str]:
    """Hadoop's client jars and what they need, from the installed pyspark."""
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    wanted = ("hadoop-client-api", "hadoop-client-runtime", "commons-", "slf4j-", "log4j-", "guava", "failureaccess")
    return sorted(str(p) for p in jars.glob("*.jar") if p.name.startswith(wanted))


def sqlite_jar() -> str | None:
    """Debian's SQLite JDBC driver (package libxerial-sqlite-jdbc-java), else None."""
    return next((j for j in present_jdbc_driver_jars() if "sqlite" in Path(j).name), None)


def start(warehouse: str | None = None, *, timeout: float = 90, **options: str) -> RestServer:
    """Start a server (``options`` are RestCatalogServer.java's key=value arguments, ``_`` for
    ``-``) and wait until it listens; raises RuntimeError with its log when it does not."""
    jar, sqlite = runtime_jar(), sqlite_jar()
    if jar is None or sqlite is None or shutil.which("java") is None:
        raise RuntimeError("needs java, the Iceberg runtime jar (pip install -e '.[test]') and the SQLite JDBC "
                           "driver (apt-get install libxerial-sqlite-jdbc-java)")
    basedir = tempfile.mkdtemp(prefix="rest-server-")
    warehouse = warehouse or str(Path(basedir, "warehouse"))
    if "://" not in warehouse:
        Path(warehouse).mkdir(parents=True, exist_ok=True)
    port_file = Path(basedir, "port")
    args = {"port-file": str(port_file), "warehouse": warehouse, "jdbc": f"jdbc:sqlite:{basedir}/catalog.db"}
    args.update({k.replace("_", "-"): str(v) for k, v in options.items()})
    classpath = ":".join([jar, *hadoop_jars(), sqlite])
    command = ["java", "-Xmx512m", "-cp", classpath, str(SOURCE), *(f"{k}={v}" for k, v in args.items())]
    process = spawn_logged(command, str(Path(basedir, "server.log")), cwd=basedir)
    if wait_ready([process], port_file.exists, timeout, interval=0.2):
        port = int(port_file.read_text().strip())
        return RestServer(f"http://127.0.0.1:{port}", warehouse, process, basedir, dict(args))
    server = RestServer("", warehouse, process, basedir, dict(args))
    text = server.logs()
    stop(server)
    raise RuntimeError(f"REST catalog server did not start: {text[-2000:]}")


def stop(server: RestServer) -> None:
    """End the server and remove its folder (its warehouse too, when it was the default one)."""
    stop_process_group(server.process)
    shutil.rmtree(server.basedir, ignore_errors=True)


@contextlib.contextmanager
def running(warehouse: str | None = None, **options: str):
    """A server with ``options`` for the block (:func:`start`, :func:`stop`); the test skips with the
    reason when it cannot start (and CI fails on that skip)."""
    try:
        server = start(warehouse, **options)
    except RuntimeError as e:
        skip_missing_reference(f"REST catalog server did not start: {e}")
    try:
        yield server
    finally:
        stop(server)
