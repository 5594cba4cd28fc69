"""iceberg-procedures: the Apache Iceberg table format and its Spark maintenance procedures.

The public API is re-exported here; everything else is internal.
"""

from procedures import errors

__all__ = ["errors"]

# -- procedures: call / sql / describe / list_procedures / register (procedures.sqlcall, .maintenance.registry)
from procedures.maintenance.registry import list_procedures, register  # noqa: E402
from procedures.sqlcall import call, sql  # noqa: E402


def describe(name: str):
    """The registered procedure ``name``: parameters, output columns, doc (``print()`` it to read)."""
    from procedures.maintenance.registry import get_procedure

    return get_procedure(name.rsplit(".", 1)[-1])


__all__ += ["call", "sql", "describe", "list_procedures", "register"]


def read_table(spark, table, *args, **kwargs):
    """Read an Iceberg table as a Spark DataFrame; see :func:`procedures.spark.read.read_table`."""
    from procedures.spark.read import read_table as _read_table

    return _read_table(spark, table, *args, **kwargs)


__all__ += ["read_table"]
__version__ = "0.1.0"
