"""Starting and stopping the throwaway servers the tests start (SeaweedFS, a Spark standalone cluster,
Spark Connect, the REST catalog): each runs in a session of its own, so it and everything it started are
ended together, by process group id."""

from __future__ import annotations

import os
import signal
import subprocess
import time


def stop_process_group(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM the group led by ``proc`` (started with ``start_new_session=True``), wait up to ``timeout``
    seconds, then SIGKILL whatever of the group is left (children may outlive their parent)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def spawn_logged(args: list[str], log_path: str, *, cwd: str, env: dict | None = None) -> subprocess.Popen:
    """Start ``args`` in a session of its own (so :func:`stop_process_group` ends it and all it
    starts), its output in ``log_path``, no stdin."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                                env=env, start_new_session=True)


def wait_ready(processes: list[subprocess.Popen], ready, timeout: float, interval: float = 0.5):
    """Poll ``ready()`` until it returns something truthy (returned), a process exits or ``timeout``
    seconds pass (None)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            return None
        found = ready()
        if found:
            return found
        time.sleep(interval)
    return None
