"""The Python-worker setup: unchanged zip archives are not re-read on every task, changed ones are."""

from __future__ import annotations

import importlib
import os
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

    worker.prepare_python_worker()
    worker.prepare_python_worker()  # idempotent: one wrapper, not two
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
