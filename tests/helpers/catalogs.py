"""Our catalogs opened beside the Java ones of the shared test session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from procedures.framework.context import open_catalog


def ours_on_java_warehouse(spark: Any, java_warehouse: str | Path, name: str = "ours") -> Any:
    """Our hadoop catalog ``name`` on the warehouse of Java's ``jcat`` (configured in the session too,
    so ``CALL <name>.system...`` finds it), with the namespace ``jcat.db`` created."""
    conf = {f"spark.sql.catalog.{name}.type": "hadoop", f"spark.sql.catalog.{name}.warehouse": str(java_warehouse)}
    for k, v in conf.items():
        spark.conf.set(k, v)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.db")
    return open_catalog(name, conf)
