"""The native Parquet route's decision (procedures.core.native_route.plan_native_read): it is taken
only where a by-name read of the planned files is exactly the by-field-id read."""

from __future__ import annotations

from dataclasses import replace

import pytest

from procedures.core.kernel.scan import iter_file_scan_tasks
from procedures.core.native_route import native_path, plan_native_read
from procedures.spec.manifest.model import FileContent, FileFormat
from procedures.spec.schema import Schema
from procedures.spec.types import LONG, UUID, ListType, NestedField, StructType
from tests.helpers.evolved_table import evolved_table


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return evolved_table(tmp_path_factory.mktemp("native-unit"))


def _plan(t, columns, tasks=None, md=None, **kwargs):
    md = md or t.metadata
    tasks = list(iter_file_scan_tasks(t.metadata, t.io)) if tasks is None else tasks
    return plan_native_read(md, md.schema().select(columns), tasks, position_deletes=True, **kwargs)


def test_unchanged_and_added_columns_read_natively_with_their_deletes(table):
    plan = _plan(table, ["id", "added", "p"])
    assert plan.native, plan.reason
    assert len(plan.data_files) == 4 and all(p.startswith("file:/") for p in plan.native_paths)
    # each delete file is paired with the one data file the planner matched it to
    # (ids 1 and 3 in the first append's p=1 file, 6 in the second's p=0 file)
    assert len(plan.position_deletes) == 2 and len(plan.delete_files) == 2
    assert {d for _, d in plan.position_deletes} < set(plan.data_files)
    # unless asked for, a scan with deletes reads through Python
    off = plan_native_read(table.metadata, table.metadata.schema().select(["id"]),
                           list(iter_file_scan_tasks(table.metadata, table.io)))
    assert not off.native and "deletes" in off.reason


@pytest.mark.parametrize("column, why", [("label", "renamed"), ("s", "renamed"), ("old", "other field ids"),
                                         ("n", "changed type")])
def test_evolved_columns_fall_back(table, column, why):
    plan = _plan(table, ["id", column])
    assert not plan.native and why in plan.reason


def test_case_insensitive_name_collision_falls_back(table):
    md = table.metadata
    schema = Schema(md.schema().fields + (NestedField(99, "ID", LONG),), schema_id=99)
    plan = plan_native_read(replace(md, schemas=md.schemas + (schema,)), md.schema().select(["id"]),
                            list(iter_file_scan_tasks(md, table.io)))
    assert not plan.native and "other field ids [99]" in plan.reason


def test_nested_field_added_to_an_existing_struct_falls_back(table):
    md = table.metadata
    s = md.schema().find_field("s")
    grown = replace(s, field_type=StructType(s.field_type.fields + (NestedField(98, "z", LONG),)))
    schema = Schema(tuple(grown if f.name == "s" else f for f in md.schema().fields), schema_id=98)
    plan = plan_native_read(replace(md, schemas=md.schemas + (schema,)), schema.select(["s.z"]),
                            list(iter_file_scan_tasks(md, table.io)))
    assert not plan.native and "was added after the column" in plan.reason


def test_types_defaults_metadata_columns_and_required_nested_fields_fall_back(table):
    md = table.metadata
    tasks = list(iter_file_scan_tasks(md, table.io))
    for field, why in [(NestedField(50, "u", UUID), "type uuid"),
                       (NestedField(51, "d", LONG, initial_default=7), "initial default"),
                       (NestedField(52, "l", ListType(53, LONG, element_required=True)), "required nested")]:
        plan = plan_native_read(md, Schema((field,)), tasks)
        assert not plan.native and why in plan.reason, plan.reason
    assert "metadata columns" in plan_native_read(md, md.schema().select(["id"]), tasks, ("_file",)).reason
    assert "no files" in plan_native_read(md, md.schema().select(["id"]), []).reason
    mapped = replace(md, properties={**md.properties, "schema.name-mapping.default": "[]"})
    assert "name mapping" in plan_native_read(mapped, md.schema().select(["id"]), tasks).reason


def test_files_spark_cannot_read_as_named_fall_back(table):
    md = table.metadata
    tasks = list(iter_file_scan_tasks(md, table.io))
    projected = md.schema().select(["id"])

    def with_data(**changes):
        return [replace(tasks[0], data_file=replace(tasks[0].data_file, **changes))] + tasks[1:]

    assert "not a local file" in plan_native_read(md, projected, with_data(file_path="s3://b/k.parquet")).reason
    assert "not a local file" in plan_native_read(md, projected, with_data(file_path="/tmp/a[1].parquet")).reason
    assert "ORC" in plan_native_read(md, projected, with_data(file_format=FileFormat.ORC)).reason
    assert "splits" in plan_native_read(md, projected, [replace(tasks[0], length=10)]).reason
    with_del = next(tk for tk in tasks if tk.deletes)
    eq = replace(with_del.deletes[0], data_file=replace(with_del.deletes[0].data_file,
                                                         content=FileContent.EQUALITY_DELETES, equality_ids=(1,)))
    assert "equality deletes" in plan_native_read(md, projected, [replace(with_del, deletes=(eq,))],
                                                  position_deletes=True).reason


def test_native_path_spelling():
    assert native_path("/a b/x%41.parquet") == "file:/a b/x%41.parquet"
    assert native_path("file:///a/x.parquet") == "file:/a/x.parquet"
    assert native_path("file:/a/x.parquet") == "file:/a/x.parquet"
    assert native_path("hdfs://nn/a.parquet") is None and native_path("file://host/a") is None
    assert native_path("/a/*.parquet") is None
