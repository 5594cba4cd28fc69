"""Tables written by the package itself (no Iceberg Java), for tests that run on both session kinds:
built on the classic session, whatever session the test then runs a procedure on."""

from __future__ import annotations

from typing import Any

from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.snapshot_producer import live_entries, snapshot_manifests
from procedures.spark.dml import append, delete_where
from procedures.spark.session import catalog_for
from procedures.spec.manifest.model import FileContent, ManifestContent
from procedures.spec.partitioning import PartitionSpecBuilder
from procedures.spec.schema import Schema
from procedures.spec.types import LONG, STRING, NestedField

#: ``id bigint NOT NULL, cat string``
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "cat", STRING)))


def fresh_table(spark: Any, name: str, schema: Schema, *, spec: Any = None, fv: int = 2,
                props: dict[str, str] | None = None, order: Any = None) -> Any:
    """An empty ``jcat.db.<name>`` (our hadoop catalog on the run's warehouse), dropped first if it exists."""
    cat = catalog_for(spark, "jcat")
    if not cat.namespace_exists(("db",)):
        cat.create_namespace(("db",))
    ident = ("db", name)
    if cat.table_exists(ident):
        cat.drop_table(ident, purge=True)
    md, _ = new_table_metadata(schema=schema, location=cat.default_table_location(ident), spec=spec,
                               sort_order=order, format_version=fv, properties=dict(props or {}))
    return cat.create_table(ident, md)


def merge_on_read_table(spark: Any, name: str, *, appends: int, rows: int, cats: int, delete: str | None,
                        fv: int = 2) -> Any:
    """``jcat.db.<name>`` partitioned by ``cat``, made by ``appends`` appends of ``rows`` rows (ids
    counting up, ``cat`` = ``c<id % cats>``), each append one file per partition, then a merge-on-read
    delete of the rows matching ``delete``; returns the table."""
    t = fresh_table(spark, name, SCHEMA, spec=PartitionSpecBuilder(SCHEMA).identity("cat").build(), fv=fv,
                    props={"write.delete.mode": "merge-on-read"})
    for i in range(appends):
        df = spark.range(i * rows, (i + 1) * rows, 1, 1).selectExpr("id", f"concat('c', CAST(id % {cats} AS string)) AS cat")
        t = append(spark, t, df)
    if delete is not None:
        t = delete_where(spark, t, delete)
    return t


def position_deletes(table: Any) -> tuple[set[str], list[Any]]:
    """The live data file paths of ``table``'s current snapshot and its live position delete files."""
    md = table.metadata
    manifests = snapshot_manifests(table.io, md.current_snapshot())
    data = [m for m in manifests if m.content == ManifestContent.DATA]
    delete = [m for m in manifests if m.content == ManifestContent.DELETES]
    live = {e.data_file.file_path for e in live_entries(table.io, md, data)}
    deletes = [e.data_file for e in live_entries(table.io, md, delete) if e.data_file.content == FileContent.POSITION_DELETES]
    return live, deletes
