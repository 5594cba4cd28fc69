"""Stopping the throwaway servers the tests start (SeaweedFS, a Spark standalone cluster): each runs in a
session of its own, so it and everything it started are ended together, by process group id."""

from __future__ import annotations

import os
import signal
import subprocess


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
