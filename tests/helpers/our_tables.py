"""Tables written by the package itself (no Iceberg Java), for tests that run on both session kinds:
built on the classic session, whatever session the test then runs a procedure on."""

from __future__ import annotations

from typing import Any

from procedures.core.builder import new_table_metadata
from procedures.spark.dml import append, delete_where
from procedures.spark.session import catalog_for
from procedures.spec.partitioning import PartitionSpecBuilder
from procedures.spec.schema import Schema
from procedures.spec.types import LONG, STRING, NestedField

#: ``id bigint NOT NULL, cat string``
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "cat", STRING)))


def merge_on_read_table(spark: Any, name: str, *, appends: int, rows: int, cats: int, delete: str | None,
                        fv: int = 2) -> Any:
    """``jcat.db.<name>`` (our hadoop catalog on the run's warehouse) partitioned by ``cat``, made by
    ``appends`` appends of ``rows`` rows (ids counting up, ``cat`` = ``c<id % cats>``), each append
    one file per partition, then a merge-on-read delete of the rows matching ``delete``; returns
    the table."""
    cat = catalog_for(spark, "jcat")
    if not cat.namespace_exists(("db",)):
        cat.create_namespace(("db",))
    ident = ("db", name)
    if cat.table_exists(ident):
        cat.drop_table(ident, purge=True)
    md, _ = new_table_metadata(schema=SCHEMA, location=cat.default_table_location(ident),
                               spec=PartitionSpecBuilder(SCHEMA).identity("cat").build(), format_version=fv,
                               properties={"write.delete.mode": "merge-on-read"})
    t = cat.create_table(ident, md)
    for i in range(appends):
        df = spark.range(i * rows, (i + 1) * rows, 1, 1).selectExpr("id", f"concat('c', CAST(id % {cats} AS string)) AS cat")
        t = append(spark, t, df)
    if delete is not None:
        t = delete_where(spark, t, delete)
    return t
