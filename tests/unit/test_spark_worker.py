"""The Python-worker setup: unchanged zip archives are not re-read on every task (changed ones are),
objects alive at a task's start are frozen out of collections, and the worker's loopback links to
the JVM are switched to quick acknowledgements after every collection."""

from __future__ import annotations

import importlib
import os
import socket
import sys
import zipfile
import zipimport

import pytest

from procedures.spark import worker


@pytest.fixture
def fresh_zipimporter(monkeypatch):
    cls = zipimport.zipimporter
    monkeypatch.setattr(cls, "invalidate_caches", cls.invalidate_caches)
    if hasattr(cls, worker._MARK):
        monkeypatch.delattr(cls, worker._MARK)
    reads = []
    original = zipimport._read_directory

    def counting(archive):
        reads.append(archive)
        return original(archive)

    monkeypatch.setattr(zipimport, "_read_directory", counting)
    yield reads
    if hasattr(cls, worker._MARK):
        delattr(cls, worker._MARK)


def _zip(path, name, body):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}.py", body)


def test_unchanged_archives_are_read_once_and_changes_are_seen(tmp_path, fresh_zipimporter, monkeypatch):
    archive = tmp_path / "lib.zip"
    _zip(archive, "pw_mod_a", "VALUE = 1\n")
    monkeypatch.syspath_prepend(str(archive))
    importlib.invalidate_caches()
    assert importlib.import_module("pw_mod_a").VALUE == 1

    worker._skip_unchanged_archives()
    worker._skip_unchanged_archives()  # idempotent: one wrapper, not two
    fresh_zipimporter.clear()
    for _ in range(5):
        importlib.invalidate_caches()
    assert fresh_zipimporter.count(str(archive)) == 1  # the first check records the archive's stamp

    # a replaced archive (new size and time) is re-read, so its new module imports
    _zip(archive, "pw_mod_b", "VALUE = 2  # a longer body changes the size\n")
    st = os.stat(archive)
    os.utime(archive, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    importlib.invalidate_caches()
    assert importlib.import_module("pw_mod_b").VALUE == 2
    for name in ("pw_mod_a", "pw_mod_b"):
        sys.modules.pop(name, None)


def test_prepare_runs_every_step(monkeypatch):
    calls = []
    monkeypatch.setattr(worker, "_skip_unchanged_archives", lambda: calls.append("zip"))
    monkeypatch.setattr(worker, "_quick_acks_between_tasks", lambda: calls.append("acks"))
    monkeypatch.setattr(worker.gc, "freeze", lambda: calls.append("freeze"))
    worker.prepare_python_worker()
    assert calls == ["zip", "acks", "freeze"]


@pytest.fixture
def loopback_pair():
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    yield client, server, listener, udp
    for s in (client, server, listener, udp):
        s.close()


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK") or not os.path.isdir("/proc/self/fd"), reason="Linux only")
def test_loopback_links_get_quick_acks_after_each_collection(loopback_pair, monkeypatch):
    client, server, listener, udp = loopback_pair
    found = worker._loopback_tcp_sockets()
    try:
        # connected TCP sockets on loopback only: not the listener, not a UDP socket
        inodes = {os.fstat(s.fileno()).st_ino for s in found}
        assert os.fstat(client.fileno()).st_ino in inodes and os.fstat(server.fileno()).st_ino in inodes
        assert os.fstat(listener.fileno()).st_ino not in inodes
        assert os.fstat(udp.fileno()).st_ino not in inodes
    finally:
        for s in found:
            s.close()

    callbacks = []
    monkeypatch.setattr(worker.gc, "callbacks", callbacks)
    monkeypatch.setattr(worker, "_quick_acks_installed", False)
    worker._quick_acks_between_tasks()
    worker._quick_acks_between_tasks()  # once per process
    assert len(callbacks) == 1
    # a request/answer exchange leaves the receiving side delaying its acknowledgements
    for _ in range(3):
        client.sendall(b"task")
        server.recv(16)
        server.sendall(b"answer")
        client.recv(16)
    server.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 0)
    assert server.getsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK) == 0
    callbacks[0]("start", {})
    assert server.getsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK) == 0  # only after a collection
    callbacks[0]("stop", {})
    assert server.getsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK) == 1
