"""A throwaway Hive metastore server (thrift) on 127.0.0.1, started from the Hive 2.3 jars that pyspark
ships, over its own embedded Derby database in a temporary folder; stopped and removed at the end.

It has no transaction tables, so it refuses metastore locks, like many small installations."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.references import skip_missing_reference

START_TIMEOUT_S = 120


@dataclass(frozen=True)
class MetastoreServer:
    """A running server: ``uri`` is its ``thrift://127.0.0.1:<port>``."""

    port: int
    home: str
    process: subprocess.Popen

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def start_metastore() -> MetastoreServer:
    """Start the server and wait until it accepts connections (skips, with the reason, without Java)."""
    import pyspark

    java = shutil.which("java")
    if java is None:
        skip_missing_reference("no java on PATH for the Hive metastore server")
    jars = Path(pyspark.__file__).parent / "jars"
    if not any(jars.glob("hive-metastore-*.jar")):
        skip_missing_reference(f"pyspark at {jars} ships no hive-metastore jar")
    home = tempfile.mkdtemp(prefix="hive-metastore-")
    port = _free_port()
    cmd = [
        java, "-Xmx384m",
        # the server's own log4j2 set-up wants an async logger whose library pyspark does not ship
        "-Dhive.async.log.enabled=false",
        f"-Dderby.system.home={home}",
        f"-Djavax.jdo.option.ConnectionURL=jdbc:derby:;databaseName={home}/db;create=true",
        "-Ddatanucleus.schema.autoCreateAll=true",
        "-Dhive.metastore.schema.verification=false",
        f"-Dhive.metastore.warehouse.dir={home}/warehouse",
        "-cp", f"{jars}/*", "org.apache.hadoop.hive.metastore.HiveMetaStore",
        "-p", str(port),
    ]
    log = open(os.path.join(home, "server.log"), "wb")
    process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _listening(port):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            tail = Path(home, "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"Hive metastore server did not start on port {port}:\n{tail}")
        time.sleep(0.5)
    return MetastoreServer(port, home, process)


def stop_metastore(server: MetastoreServer) -> None:
    """Stop the server and remove its folder."""
    server.process.terminate()
    try:
        server.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.process.kill()
    shutil.rmtree(server.home, ignore_errors=True)
