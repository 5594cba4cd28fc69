"""A throwaway PostgreSQL cluster on 127.0.0.1 for the ``postgres``-marked tests.

``initdb`` into a temporary directory, ``pg_ctl start`` on a free port, trust authentication on
loopback only, stopped and removed at the end of the session.  When running as root the cluster
runs as the ``postgres`` system user (PostgreSQL refuses root).  Tests are skipped, with the
reason, only when the server binaries are not installed (``apt-get install postgresql``).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PostgresServer:
    """A running cluster: ``uri`` is the JDBC uri of database ``dbname``."""

    host: str
    port: int
    user: str
    dbname: str
    datadir: str

    @property
    def uri(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.dbname}"


def find_bindir() -> str | None:
    """Directory holding ``initdb`` and ``pg_ctl``, or None when PostgreSQL is not installed."""
    candidates = []
    if shutil.which("pg_config"):
        try:
            candidates.append(subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip())
        except OSError:
            pass
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    which = shutil.which("initdb")
    if which:
        candidates.append(str(Path(which).resolve().parent))
    for d in candidates:
        if d and os.path.exists(os.path.join(d, "initdb")) and os.path.exists(os.path.join(d, "pg_ctl")):
            return d
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_user() -> tuple[int | None, int | None]:
    """uid/gid to run the server binaries as: PostgreSQL refuses to run as root."""
    if os.geteuid() != 0:
        return None, None
    import pwd

    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        raise RuntimeError("running as root and there is no 'postgres' user to run the server as") from None
    return pw.pw_uid, pw.pw_gid


#: datadir -> (bindir, runner) of the clusters this process started
_STARTED: dict = {}


def start(tmpdir: str | None = None) -> PostgresServer:
    """Start a fresh cluster; raise RuntimeError (with the server log) if it does not come up."""
    bindir = find_bindir()
    if bindir is None:
        raise FileNotFoundError("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    uid, gid = _server_user()
    base = tempfile.mkdtemp(prefix="pgtest-", dir=tmpdir)
    datadir = os.path.join(base, "data")
    sockdir = os.path.join(base, "sock")
    os.makedirs(sockdir)
    if uid is not None:
        for path in (base, sockdir):
            os.chown(path, uid, gid)

    def run(*args: str) -> subprocess.CompletedProcess:
        def demote() -> None:
            if uid is not None:
                os.setgid(gid)
                os.setuid(uid)

        return subprocess.run(
            list(args), capture_output=True, text=True, preexec_fn=demote, cwd=base, timeout=120,
            env={**os.environ, "LC_ALL": "C", "LANG": "C"},
        )

    user = "postgres" if uid is not None else (os.environ.get("USER") or "postgres")
    r = run(os.path.join(bindir, "initdb"), "-D", datadir, "-U", user, "--auth=trust", "-E", "UTF8", "--no-sync")
    if r.returncode != 0:
        raise RuntimeError(f"initdb failed: {r.stderr or r.stdout}")
    port = _free_port()
    logfile = os.path.join(base, "server.log")
    opts = f"-h 127.0.0.1 -p {port} -k {sockdir} -c fsync=off -c max_connections=100"
    r = run(os.path.join(bindir, "pg_ctl"), "-D", datadir, "-l", logfile, "-o", opts, "-w", "-t", "60", "start")
    if r.returncode != 0:
        log = Path(logfile).read_text() if os.path.exists(logfile) else ""
        raise RuntimeError(f"pg_ctl start failed: {r.stderr or r.stdout}\n{log}")
    server = PostgresServer("127.0.0.1", port, user, "postgres", datadir)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            time.sleep(0.2)
    _STARTED[datadir] = (bindir, run)
    return server


def create_database(server: PostgresServer, name: str) -> str:
    """Create database ``name`` and return its JDBC uri."""
    import psycopg

    with psycopg.connect(
        host=server.host, port=server.port, user=server.user, dbname=server.dbname, autocommit=True
    ) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"jdbc:postgresql://{server.host}:{server.port}/{name}"


def stop(server: PostgresServer) -> None:
    """Stop the cluster and delete its directory."""
    bindir, run = _STARTED.pop(server.datadir, (None, None))
    if bindir is not None:
        run(os.path.join(bindir, "pg_ctl"), "-D", server.datadir, "-m", "immediate", "-w", "stop")
    shutil.rmtree(os.path.dirname(server.datadir), ignore_errors=True)
