"""iceberg-procedures: the Apache Iceberg table format and its Spark maintenance procedures.

The public API is re-exported here; everything else is internal.
"""

from procedures import errors

__all__ = ["errors"]
__version__ = "0.1.0"
