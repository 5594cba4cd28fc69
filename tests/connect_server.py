"""A throwaway Spark Connect server on 127.0.0.1, started from pyspark 4's own jars
(``bin/spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer``), for the tests
that run the package on a Spark Connect session.

The server is a JVM of its own (``local[2]`` by default, or a standalone cluster's master): the
test process keeps its classic session beside the Connect client, as a user's notebook would talk
to a remote server.  Its Python workers run this interpreter with the repository on ``PYTHONPATH``
(a Connect server's workers need the package installed, as any cluster's do).  :func:`start`
returns once the gRPC port accepts connections; :func:`stop` ends the server's process group.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.processes import spawn_logged, stop_process_group, wait_ready
from tests.spark_cluster import free_port, spark_home

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ConnectServer:
    """A running server: ``url`` is ``sc://127.0.0.1:<port>``."""

    url: str
    port: int
    process: subprocess.Popen
    basedir: str

    def logs(self) -> str:
        """The tail of the server's log (for failure messages)."""
        path = Path(self.basedir, "server.log")
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""


def connect_jar() -> str | None:
    """pyspark's Spark Connect server jar (pyspark 4 ships it in ``jars``), else None."""
    home = spark_home()
    if home is None:
        return None
    found = sorted(Path(home, "jars").glob("spark-connect_*.jar"))
    return str(found[0]) if found else None


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        try:
            s.connect(("127.0.0.1", port))
        except OSError:
            return False
    return True


def start(conf: dict[str, str], *, master: str = "local[2]", timeout: float = 120) -> ConnectServer:
    """Start a Connect server with Spark conf ``conf`` (our catalogs' keys, warehouse...) and wait for
    its port; raises RuntimeError with the log's tail when it does not come up."""
    home = spark_home()
    if home is None or connect_jar() is None:
        raise RuntimeError("pyspark's Spark Connect server jar not found (pyspark 4 ships it)")
    port = free_port()
    basedir = tempfile.mkdtemp(prefix="connect-server-")
    env = dict(os.environ)
    env.pop("SPARK_REMOTE", None)
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    env["SPARK_HOME"] = home
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    args = [str(Path(home, "bin", "spark-submit")), "--master", master, "--class", SERVER_CLASS,
            "--name", "iceberg-procedures-tests-connect",
            "--conf", f"spark.connect.grpc.binding.port={port}",
            "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf", f"spark.pyspark.python={sys.executable}",
            "--conf", "spark.ui.enabled=false"]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    args.append(connect_jar())
    process = spawn_logged(args, str(Path(basedir, "server.log")), cwd=basedir, env=env)
    server = ConnectServer(f"sc://127.0.0.1:{port}", port, process, basedir)
    if wait_ready([process], lambda: _accepts(port), timeout):
        return server
    logs = server.logs()
    stop(server)
    raise RuntimeError(f"Spark Connect server did not start on port {port}: {logs[-2000:]}")


def stop(server: ConnectServer) -> None:
    """End the server (its process group: the JVM and its Python workers) and remove its folder."""
    stop_process_group(server.process)
    shutil.rmtree(server.basedir, ignore_errors=True)
