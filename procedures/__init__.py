"""iceberg-procedures: the Apache Iceberg table format and its Spark maintenance procedures.

The public API is re-exported here and resolved lazily, so importing ``procedures.spec`` or
``procedures.core`` (which never need Spark) does not load the procedure layer:

* ``call(name, *, spark=None, **params)``, ``sql(spark, text)``, ``describe(name)``,
  ``list_procedures()``, ``register`` (decorator for user procedures);
* ``read_table(spark, "cat.db.t", ...)``;
* ``register_data_source(spark)`` (pyspark 4+): the ``iceberg-procedures`` format of ``spark.read`` and
  ``df.write``;
* ``errors`` (the typed errors).
"""

from __future__ import annotations

import importlib
from typing import Any

from procedures import errors

__all__ = ["errors", "call", "sql", "describe", "list_procedures", "register", "read_table",
           "register_data_source"]
__version__ = "0.1.0"

_LAZY = {
    "call": ("procedures.frontend.sqlcall", "call"),
    "sql": ("procedures.frontend.sqlcall", "sql"),
    "describe": ("procedures.frontend.sqlcall", "describe"),
    "list_procedures": ("procedures.frontend.sqlcall", "list_procedures"),
    "register": ("procedures.framework.registry", "register"),
    "read_table": ("procedures.spark.table_reads", "read_table"),
    "register_data_source": ("procedures.spark.datasource", "register_data_source"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'procedures' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
