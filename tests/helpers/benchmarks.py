"""The benchmark scripts as modules, for tests that run them at a tiny size (``benchmarks`` is not a
package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` loaded as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    # registered first: dataclasses resolve string annotations through sys.modules[cls.__module__]
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
