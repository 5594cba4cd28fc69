"""iceberg-procedures: the Apache Iceberg table format and its Spark maintenance procedures.

The public API is re-exported here and resolved lazily, so importing ``procedures.spec`` or
``procedures.core`` (which never need Spark) does not load the procedure layer:

* ``call(name, *, spark=None, **params)``, ``sql(spark, text)``, ``describe(name)``,
  ``list_procedures()``, ``register`` (decorator for user procedures);
* ``read_table(spark, "cat.db.t", ...)``;
* ``errors`` (the typed errors).
"""

from __future__ import annotations

import importlib
from typing import Any

from procedures import errors

__all__ = ["errors", "call", "sql", "describe", "list_procedures", "register", "read_table"]
__version__ = "0.1.0"

_LAZY = {
    "call": ("procedures.sqlcall", "call"),
    "sql": ("procedures.sqlcall", "sql"),
    "list_procedures": ("procedures.maintenance.registry", "list_procedures"),
    "register": ("procedures.maintenance.registry", "register"),
    "read_table": ("procedures.spark.read", "read_table"),
}


def describe(name: str):
    """The registered procedure ``name``: parameters, output columns, doc (``print()`` it to read)."""
    from procedures.maintenance.registry import get_procedure

    return get_procedure(name.rsplit(".", 1)[-1])


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'procedures' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
