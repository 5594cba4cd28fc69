"""A throwaway Spark standalone cluster on 127.0.0.1: one master and one worker, started from the
running pyspark's own jars and scripts (``$SPARK_HOME/bin/spark-class``, ``SPARK_HOME`` = pyspark's
package folder), for the tests that run our procedures on executors in separate JVMs.

Every port is chosen free on loopback, the worker's and the daemons' logs and work dirs live in one
temporary directory, and the worker offers one core and a little memory (the test machine has two
cores and is shared).  :func:`start` returns once the master's JSON status lists the worker ALIVE;
:func:`stop` ends both daemons and everything they started (executors, Python workers: one process
group per daemon) by process group id, and removes the directory.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.processes import spawn_logged, stop_process_group, wait_ready

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


@dataclass(frozen=True)
class SparkCluster:
    """A running master (``url``: ``spark://127.0.0.1:<port>``) with one registered worker."""

    url: str
    web_url: str
    spark_home: str
    master: subprocess.Popen
    worker: subprocess.Popen
    basedir: str
    worker_cores: int
    worker_memory: str

    def logs(self) -> str:
        """The tail of both daemons' logs (for failure messages)."""
        parts = []
        for name in ("master.log", "worker.log"):
            path = Path(self.basedir, name)
            if path.exists():
                parts.append(f"--- {name}\n{path.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)


def spark_home() -> str | None:
    """pyspark's package folder when it ships ``bin/spark-class`` and ``jars`` (a pip install does)."""
    try:
        import pyspark
    except ImportError:
        return None
    home = Path(pyspark.__file__).resolve().parent
    if (home / "bin" / "spark-class").exists() and (home / "jars").is_dir():
        return str(home)
    return None


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _status(web_url: str) -> dict | None:
    try:
        with urllib.request.urlopen(f"{web_url}/json/", timeout=2) as response:
            return json.loads(response.read().decode())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _alive_workers(status: dict | None) -> list[dict]:
    return [w for w in (status or {}).get("workers", []) if w.get("state") == "ALIVE"]


def _daemon_env(home: str, basedir: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "SPARK_HOME": home,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": os.path.join(basedir, "local"),
        "SPARK_LOG_DIR": basedir,
        # the daemons only schedule; the executor's memory is the worker's --memory
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_NO_DAEMONIZE": "1",
    })
    # a conf dir of the caller's (spark-env.sh, spark-defaults.conf) must not change the test cluster
    env["SPARK_CONF_DIR"] = os.path.join(basedir, "conf")
    return env


def _spawn(home: str, basedir: str, name: str, args: list[str]) -> subprocess.Popen:
    # a session per daemon: stop() ends the daemon and its executors and Python workers by group
    return spawn_logged([os.path.join(home, "bin", "spark-class"), *args], os.path.join(basedir, f"{name}.log"),
                        cwd=basedir, env=_daemon_env(home, basedir))


def start(tmpdir: str | None = None, *, cores: int = 1, memory: str = "1g", timeout: float = 120.0) -> SparkCluster:
    """Start a master and one worker (``cores``, ``memory`` for its executors) on loopback and wait until
    the worker is registered; RuntimeError with both logs if that does not happen within ``timeout``."""
    home = spark_home()
    if home is None:
        raise FileNotFoundError("pyspark with bin/spark-class and jars/ is not installed (pip install pyspark)")
    basedir = tempfile.mkdtemp(prefix="spark-cluster-", dir=tmpdir)
    for sub in ("conf", "local", "work"):
        os.makedirs(os.path.join(basedir, sub))
    port, web_port, worker_port, worker_web_port = (free_port() for _ in range(4))
    url = f"spark://127.0.0.1:{port}"
    web_url = f"http://127.0.0.1:{web_port}"
    master = _spawn(home, basedir, "master", [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(port),
                                              "--webui-port", str(web_port)])
    worker = _spawn(home, basedir, "worker", [WORKER_CLASS, "--host", "127.0.0.1", "--port", str(worker_port),
                                              "--webui-port", str(worker_web_port), "--cores", str(cores),
                                              "--memory", memory, "--work-dir", os.path.join(basedir, "work"),
                                              url])
    cluster = SparkCluster(url, web_url, home, master, worker, basedir, cores, memory)
    if wait_ready([master, worker], lambda: _alive_workers(_status(web_url)), timeout):
        return cluster
    text = cluster.logs()
    stop(cluster)
    raise RuntimeError(f"the Spark standalone worker did not register with {url} within {timeout}s:\n{text}")


def stop(cluster: SparkCluster) -> None:
    """Stop the worker (with its executors) and the master, by process group id, and remove their files."""
    # executors and Python workers may outlive the worker that started them: the group goes too
    stop_process_group(cluster.worker, timeout=15)
    stop_process_group(cluster.master, timeout=15)
    shutil.rmtree(cluster.basedir, ignore_errors=True)
