"""A Python executable of "another minor version" on any machine: the test run's own interpreter with a
``sitecustomize`` that makes ``sys.version_info`` report the minor version below (or above) its own.
Whatever asks the interpreter for its version -- the package's worker probe, pyspark's worker -- sees
the other version, so the version-mismatch paths are tested without a second Python installed."""

from __future__ import annotations

import stat
import sys
from pathlib import Path


def other_minor_version() -> tuple[int, int]:
    """The (major, minor) the fake interpreter reports: one minor version below the real one."""
    major, minor = sys.version_info[:2]
    return major, minor - 1 if minor > 0 else minor + 1


def other_minor_python(folder: Path) -> str:
    """Path of an executable in ``folder`` that runs this interpreter reporting another minor version
    (:func:`other_minor_version`); its own site folder is put first on PYTHONPATH."""
    site = folder / "other-minor-site"
    site.mkdir(parents=True, exist_ok=True)
    major, minor = other_minor_version()
    (site / "sitecustomize.py").write_text(
        "import collections, sys\n"
        # named fields as well as a tuple: pyspark's worker reads sys.version_info.major
        "_V = collections.namedtuple('version_info', 'major minor micro releaselevel serial')\n"
        f"sys.version_info = _V({major}, {minor}, 0, 'final', 0)\n"
        # sys.version stays: the platform module parses it and refuses a made-up one
    )
    path = folder / "python-other-minor"
    path.write_text(f"#!/bin/sh\nPYTHONPATH='{site}'${{PYTHONPATH:+:$PYTHONPATH}}\nexport PYTHONPATH\n"
                    f"exec '{sys.executable}' \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)
