"""Every skip for a missing library goes through ``tests.helpers.references`` so that ``CI=true`` turns
it into a failure: a bare ``pytest.importorskip`` would let CI pass with the tests that need the library
silently skipped (as the datasketches tests once were)."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
HELPER = TESTS / "helpers" / "references.py"
# a call of pytest.importorskip, or an ImportError turned into a plain skip
BARE_SKIP = re.compile(r"\bimportorskip\s*\(|except\s+(ModuleNotFoundError|ImportError)[^\n]*:\s*\n\s*pytest\.skip\(")


def offending_places(root: Path) -> list[str]:
    """``file:line`` of each bare missing-library skip under ``root`` (the helper itself excepted)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path in (HELPER, Path(__file__).resolve()):
            continue
        text = path.read_text(encoding="utf-8")
        for match in BARE_SKIP.finditer(text):
            found.append(f"{path.relative_to(root)}:{text.count(chr(10), 0, match.start()) + 1}")
    return found


def test_no_bare_importorskip_in_the_suite():
    assert offending_places(TESTS) == [], (
        "skip for a missing library through tests.helpers.references.import_reference, which fails under CI=true")


def test_the_check_finds_a_bare_importorskip(tmp_path):
    (tmp_path / "test_x.py").write_text('import pytest\nds = pytest.importorskip("datasketches")\n')
    (tmp_path / "test_y.py").write_text('try:\n    import duckdb\nexcept ImportError:\n    pytest.skip("no")\n')
    assert offending_places(tmp_path) == ["test_x.py:2", "test_y.py:3"]


def test_test_file_names_are_unique():
    """tests/unit, tests/spark and tests/conformance are no packages: two test files of one name make
    the whole run fail at collection (as a report test once did)."""
    names = [p.name for p in TESTS.rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
