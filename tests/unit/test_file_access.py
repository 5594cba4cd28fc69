"""The FileIO seam (:mod:`procedures.spec.file_access`): the implementations in ``procedures/io`` are
``FileAccess`` objects, and no layer types a FileIO parameter ``Any``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from procedures.io.fileio import FileIO
from procedures.io.sandbox_fileio import SandboxFileIO
from procedures.spec.file_access import FileAccess, ReadableFile, WritableFile

ROOT = Path(__file__).resolve().parents[2] / "procedures"


@pytest.mark.parametrize("io", [FileIO({}), SandboxFileIO(base=FileIO({}))], ids=["FileIO", "SandboxFileIO"])
def test_the_implementations_are_file_access(io, tmp_path):
    assert isinstance(io, FileAccess)
    path = str(tmp_path / "f.bin")
    out = io.new_output(path)
    assert isinstance(out, WritableFile)
    out.write(b"abc")
    readable = io.new_input(path)
    assert isinstance(readable, ReadableFile) and readable.read() == b"abc"


def test_no_untyped_file_io():
    untyped = [f"{p.relative_to(ROOT)}:{i}" for p in sorted(ROOT.rglob("*.py"))
               for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\bio: Any\b", line)]
    assert untyped == []
