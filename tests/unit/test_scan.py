"""Scan planning: snapshot choice, manifest/file pruning per spec, and the delete-matching rules of
section 10 of the on-disk notes (sequence-number edges included)."""

from __future__ import annotations

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel import updates as U
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.manage import ManageRef
from procedures.core.kernel.operations import FastAppend, RowDelta
from procedures.core.kernel.scan import (
    DeleteFileIndex,
    EntryFilter,
    partition_key,
    plan_files,
    scan_manifests,
    select_snapshot,
    snapshot_id_as_of_time,
)
from procedures.core.kernel.transaction import MetadataChange, RetryPolicy, commit
from procedures.errors import ExpressionError, NoSuchRefError, NoSuchSnapshotError, ValidationError
from procedures.spec.conversions import to_bytes
from procedures.spec.evaluators import InclusiveMetricsEvaluator
from procedures.spec.expression_parser import parse_filter
from procedures.spec.expressions import ALWAYS_TRUE, eq
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.metadata_columns import DELETE_FILE_PATH_ID
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.snapshots import SnapshotRefType
from procedures.spec.transforms import parse_transform
from procedures.spec.types import LONG, STRING, NestedField

FAST = RetryPolicy(num_retries=2, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=60_000)
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "data", STRING)))
IDENTITY_DATA = PartitionSpec(0, (PartitionField(2, 1000, parse_transform("identity"), "data"),))


# ------------------------------------------------------------------------------ delete index rules
def _data(path: str, part=("a",), spec_id=1) -> DataFile:
    return DataFile(path, FileFormat.PARQUET, part, 10, 100, spec_id=spec_id)


def _pos(path: str, part=("a",), ref: str | None = None, spec_id=1, bounds=None) -> DataFile:
    lo = hi = None
    if bounds is not None:
        lo = {DELETE_FILE_PATH_ID: bounds[0].encode()}
        hi = {DELETE_FILE_PATH_ID: bounds[1].encode()}
    return DataFile(path, FileFormat.PARQUET, part, 1, 10, content=FileContent.POSITION_DELETES,
                    referenced_data_file=ref, spec_id=spec_id, lower_bounds=lo, upper_bounds=hi)


def _dv(path: str, ref: str, part=("a",), spec_id=1, offset=4) -> DataFile:
    return DataFile(path, FileFormat.PUFFIN, part, 1, 100, content=FileContent.POSITION_DELETES,
                    referenced_data_file=ref, content_offset=offset, content_size_in_bytes=40, spec_id=spec_id)


def _eq(path: str, part=("a",), spec_id=1) -> DataFile:
    return DataFile(path, FileFormat.PARQUET, part, 1, 10, content=FileContent.EQUALITY_DELETES,
                    equality_ids=(1,), spec_id=spec_id)


def _paths(entries) -> list[str]:
    return sorted(e.data_file.file_path for e in entries)


def test_dv_applies_at_equal_and_later_sequence_numbers_only():
    idx = DeleteFileIndex([0])
    idx.add(_dv("p.puffin", "d.parquet"), 5)
    assert _paths(idx.for_data_file(_data("d.parquet"), 5)) == ["p.puffin"]
    assert _paths(idx.for_data_file(_data("d.parquet"), 4)) == ["p.puffin"]
    assert idx.for_data_file(_data("d.parquet"), 6) == ()
    assert idx.for_data_file(_data("other.parquet"), 1) == ()


def test_dv_hides_position_delete_files_but_not_equality_deletes():
    idx = DeleteFileIndex([0])
    idx.add(_pos("scoped.parquet", ref="d.parquet"), 3)
    idx.add(_pos("part.parquet"), 3)
    idx.add(_eq("eq.parquet"), 4)
    assert _paths(idx.for_data_file(_data("d.parquet"), 2)) == ["eq.parquet", "part.parquet", "scoped.parquet"]
    idx.add(_dv("p.puffin", "d.parquet"), 4)
    assert _paths(idx.for_data_file(_data("d.parquet"), 2)) == ["eq.parquet", "p.puffin"]
    # once the DV is older than the data file it is ignored, and so are the (older) position files
    assert _paths(idx.for_data_file(_data("d.parquet"), 5)) == []


def test_position_deletes_apply_at_equal_sequence_number_equality_deletes_only_strictly_later():
    idx = DeleteFileIndex([0])
    idx.add(_pos("pos.parquet", ref="d.parquet"), 7)
    idx.add(_eq("eq.parquet"), 7)
    assert _paths(idx.for_data_file(_data("d.parquet"), 7)) == ["pos.parquet"]
    assert _paths(idx.for_data_file(_data("d.parquet"), 6)) == ["eq.parquet", "pos.parquet"]
    assert _paths(idx.for_data_file(_data("d.parquet"), 8)) == []


def test_partition_scoped_deletes_need_same_spec_and_partition():
    idx = DeleteFileIndex([0])
    idx.add(_pos("pos.parquet", part=("a",), spec_id=1), 3)
    idx.add(_eq("eq.parquet", part=("a",), spec_id=1), 3)
    assert _paths(idx.for_data_file(_data("d", ("a",), 1), 1)) == ["eq.parquet", "pos.parquet"]
    assert idx.for_data_file(_data("d", ("b",), 1), 1) == ()
    assert idx.for_data_file(_data("d", ("a",), 2), 1) == ()


def test_global_equality_deletes_from_unpartitioned_spec_apply_everywhere():
    idx = DeleteFileIndex([0])
    idx.add(_eq("global.parquet", part=(), spec_id=0), 3)
    assert _paths(idx.for_data_file(_data("d", ("x",), 1), 2)) == ["global.parquet"]
    assert _paths(idx.for_data_file(_data("e", ("y",), 2), 2)) == ["global.parquet"]
    assert idx.for_data_file(_data("e", ("y",), 2), 3) == ()


def test_file_scoped_by_equal_path_bounds_and_bounds_prune_partition_scoped_files():
    idx = DeleteFileIndex([0])
    # equal bounds make a file-scoped delete even without referenced_data_file (indexed by path)
    idx.add(_pos("scoped.parquet", part=("zzz",), bounds=("s3://b/d1", "s3://b/d1")), 2)
    idx.add(_pos("ranged.parquet", bounds=("s3://b/d2", "s3://b/d5")), 2)
    assert _paths(idx.for_data_file(_data("s3://b/d1", ("a",)), 1)) == ["scoped.parquet"]
    assert _paths(idx.for_data_file(_data("s3://b/d3", ("a",)), 1)) == ["ranged.parquet"]
    assert _paths(idx.for_data_file(_data("s3://b/d9", ("a",)), 1)) == []


def test_two_dvs_for_one_data_file_are_refused():
    idx = DeleteFileIndex([0])
    idx.add(_dv("p1.puffin", "d.parquet"), 2)
    with pytest.raises(ValidationError, match="multiple DVs"):
        idx.add(_dv("p2.puffin", "d.parquet"), 3)


def test_partition_equality_uses_float_bits():
    assert partition_key(1, (0.0,)) != partition_key(1, (-0.0,))
    assert partition_key(1, (float("nan"),)) == partition_key(1, (float("nan"),))
    assert partition_key(1, ("a",)) != partition_key(2, ("a",))


# ------------------------------------------------------------------------------ end to end planning
@pytest.fixture()
def catalog(tmp_path):
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    return cat


def _table(catalog, spec=IDENTITY_DATA, fv=2):
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{catalog.warehouse}/db/t", spec=spec, format_version=fv)
    return catalog.create_table(("db", "t"), md)


def _file(t, name, part, lo=None, hi=None, spec_id=0, records=10):
    lower = None if lo is None else {1: to_bytes(lo, LONG)}
    upper = None if hi is None else {1: to_bytes(hi, LONG)}
    return DataFile(f"{t.location}/data/{name}.parquet", FileFormat.PARQUET, part, records, 100,
                    lower_bounds=lower, upper_bounds=upper, spec_id=spec_id)


def _planned(tasks) -> list[str]:
    return sorted(t.data_file.file_path.rsplit("/", 1)[1].removesuffix(".parquet") for t in tasks)


def test_filter_prunes_by_partition_and_metrics_and_keeps_residuals(catalog):
    t = _table(catalog)
    t = commit(t, [FastAppend([_file(t, "a1", ("a",), 0, 9), _file(t, "a2", ("a",), 10, 19),
                               _file(t, "b1", ("b",), 0, 9)])], policy=FAST)
    md = t.metadata
    assert _planned(plan_files(md, t.io)) == ["a1", "a2", "b1"]
    assert _planned(plan_files(md, t.io, filter="data = 'a'")) == ["a1", "a2"]
    assert _planned(plan_files(md, t.io, filter="data = 'a' AND id >= 12")) == ["a2"]
    assert _planned(plan_files(md, t.io, filter=eq("id", 3))) == ["a1", "b1"]
    tasks = plan_files(md, t.io, filter="data = 'a' AND id >= 12")
    # the identity partition proves "data = 'a'": only the id predicate remains
    assert str(tasks[0].residual) == str(plan_files(md, t.io, filter="id >= 12")[0].residual)
    assert "data" not in str(tasks[0].residual)
    assert plan_files(md, t.io, filter="data = 'a'")[0].residual is ALWAYS_TRUE
    with pytest.raises(ExpressionError):
        plan_files(md, t.io, filter="nope = 1")


def test_partition_evolution_projects_filter_through_each_manifests_spec(catalog):
    t = _table(catalog, spec=PartitionSpec(0, ()))
    t = commit(t, [FastAppend([_file(t, "old", (), 0, 100)])], policy=FAST)
    bucketed = PartitionSpec(1, (PartitionField(1, 1000, parse_transform("bucket[8]"), "id_bucket"),))
    t = commit(t, [MetadataChange((U.AddPartitionSpec(bucketed), U.SetDefaultSpec(-1)))], policy=FAST)
    b5 = parse_transform("bucket[8]").apply(5, LONG)
    t = commit(t, [FastAppend([_file(t, "new_hit", (b5,), 5, 5, spec_id=1),
                               _file(t, "new_miss", ((b5 + 1) % 8,), 5, 5, spec_id=1)])], policy=FAST)
    tasks = plan_files(t.metadata, t.io, filter="id = 5")
    assert _planned(tasks) == ["new_hit", "old"]
    assert {tk.spec_id for tk in tasks} == {0, 1}


def test_snapshot_selection_by_id_time_branch_and_tag(catalog):
    t = _table(catalog)
    t = commit(t, [FastAppend([_file(t, "one", ("a",))])], policy=FAST)
    s1 = t.metadata.current_snapshot()
    t = commit(t, [ManageRef("create", "tag1", SnapshotRefType.TAG, s1.snapshot_id)], policy=FAST)
    t = commit(t, [ManageRef("create", "br", SnapshotRefType.BRANCH, s1.snapshot_id)], policy=FAST)
    wider = Schema((*SCHEMA.fields, NestedField(3, "extra", LONG)), schema_id=1)
    t = commit(t, [MetadataChange((U.AddSchema(wider, 3), U.SetCurrentSchema(-1)))], policy=FAST)
    t = commit(t, [FastAppend([_file(t, "two", ("b",))])], policy=FAST)
    md = t.metadata
    s2 = md.current_snapshot()
    assert _planned(plan_files(md, t.io)) == ["one", "two"]
    assert _planned(plan_files(md, t.io, snapshot_id=s1.snapshot_id)) == ["one"]
    assert _planned(plan_files(md, t.io, ref="tag1")) == ["one"]
    assert _planned(plan_files(md, t.io, ref="br")) == ["one"]
    assert _planned(plan_files(md, t.io, ref="main")) == ["one", "two"]
    # time travel and tags read with the snapshot's schema, branches with the current one
    assert select_snapshot(md, snapshot_id=s1.snapshot_id).schema.schema_id == 0
    assert select_snapshot(md, ref="tag1").schema.schema_id == 0
    assert select_snapshot(md, ref="br").schema.schema_id == 1
    assert snapshot_id_as_of_time(md, s2.timestamp_ms) == s2.snapshot_id
    assert snapshot_id_as_of_time(md, s2.timestamp_ms - 1) in (s1.snapshot_id, s2.snapshot_id)
    assert _planned(plan_files(md, t.io, as_of_timestamp_ms=s1.timestamp_ms)) in (["one"], ["one", "two"])
    with pytest.raises(NoSuchSnapshotError):
        snapshot_id_as_of_time(md, s1.timestamp_ms - 1)
    with pytest.raises(NoSuchRefError):
        plan_files(md, t.io, ref="nope")
    with pytest.raises(NoSuchSnapshotError):
        plan_files(md, t.io, snapshot_id=12345)
    with pytest.raises(ValidationError, match="choose one"):
        plan_files(md, t.io, snapshot_id=s1.snapshot_id, ref="tag1")


def test_as_of_time_uses_the_last_log_entry_at_or_before(catalog):
    from dataclasses import replace

    from procedures.spec.snapshots import SnapshotLogEntry

    t = _table(catalog)
    t = commit(t, [FastAppend([_file(t, "one", ("a",))])], policy=FAST)
    t = commit(t, [FastAppend([_file(t, "two", ("a",))])], policy=FAST)
    s1, s2 = t.metadata.snapshots
    md = replace(t.metadata, snapshot_log=[SnapshotLogEntry(1000, s1.snapshot_id), SnapshotLogEntry(2000, s2.snapshot_id)])
    assert snapshot_id_as_of_time(md, 1999) == s1.snapshot_id
    assert snapshot_id_as_of_time(md, 2000) == s2.snapshot_id
    assert _planned(plan_files(md, t.io, as_of_timestamp_ms=1500)) == ["one"]


def test_committed_deletes_attach_by_sequence_number(catalog):
    t = _table(catalog)
    d1 = _file(t, "d1", ("a",))
    t = commit(t, [FastAppend([d1])], policy=FAST)  # seq 1
    pos = DataFile(f"{t.location}/data/pos.parquet", FileFormat.PARQUET, ("a",), 1, 10,
                   content=FileContent.POSITION_DELETES, referenced_data_file=d1.file_path, spec_id=0)
    eqd = DataFile(f"{t.location}/data/eq.parquet", FileFormat.PARQUET, ("a",), 1, 10,
                   content=FileContent.EQUALITY_DELETES, equality_ids=(1,), spec_id=0)
    d2 = _file(t, "d2", ("a",))
    t = commit(t, [RowDelta(add_rows=[d2], add_deletes=[pos, eqd])], policy=FAST)  # seq 2
    tasks = {tk.data_file.file_path.rsplit("/", 1)[1].removesuffix(".parquet"): tk for tk in plan_files(t.metadata, t.io)}
    assert tasks["d1"].data_sequence_number == 1 and tasks["d2"].data_sequence_number == 2
    assert sorted(d.data_file.file_path.rsplit("/", 1)[1] for d in tasks["d1"].deletes) == ["eq.parquet", "pos.parquet"]
    assert {d.data_sequence_number for d in tasks["d1"].deletes} == {2}
    # same-commit equality deletes never apply; the position delete targets d1 only
    assert tasks["d2"].deletes == ()
    # a filter that prunes the partition prunes its deletes too
    assert plan_files(t.metadata, t.io, filter="data = 'b'") == []


def test_empty_table_plans_nothing(catalog):
    t = _table(catalog)
    assert plan_files(t.metadata, t.io) == []


# ------------------------------------------------------------------------------ pieces for engines
def test_scan_manifests_prunes_by_summaries_and_entry_filter_travels_pickled(catalog):
    import pickle

    from procedures.core.kernel.scan import iter_file_scan_tasks, scan_manifests

    t = _table(catalog)
    t = commit(t, [FastAppend([_file(t, "a1", ("a",), 0, 9), _file(t, "a2", ("a",), 10, 19)])], policy=FAST)
    t = commit(t, [FastAppend([_file(t, "b1", ("b",), 0, 9)])], policy=FAST)
    pos = DataFile(f"{t.location}/data/pos.parquet", FileFormat.PARQUET, ("a",), 1, 10,
                   content=FileContent.POSITION_DELETES, spec_id=0)
    t = commit(t, [RowDelta(add_rows=[_file(t, "a3", ("a",), 30, 39)], add_deletes=[pos])], policy=FAST)
    md = t.metadata
    plan = scan_manifests(md, t.io, filter="data = 'a' AND id >= 12")
    # the manifest of b1 is pruned by its partition summary; the delete manifest is kept apart
    assert len(plan.data_manifests) == 2 and len(plan.delete_manifests) == 1
    assert len(scan_manifests(md, t.io).data_manifests) == 3
    # the filter rebuilt from its pickle keeps only what the metrics allow, manifest by manifest
    shipped = pickle.loads(pickle.dumps(plan.entry_filter))
    per_manifest = [[e.data_file.file_path.rsplit("/", 1)[1] for e in shipped.data_entries(t.io, m)]
                    for m in plan.data_manifests]
    assert sorted(per_manifest) == [["a2.parquet"], ["a3.parquet"]]

    # entries read elsewhere (pickled round trip) give the driver's tasks, in the driver's order
    calls = []

    def elsewhere(p):
        calls.append(len(p.data_manifests))
        f = pickle.loads(pickle.dumps(p.entry_filter))
        return [pickle.loads(pickle.dumps(f.data_entries(t.io, m))) for m in p.data_manifests]

    for flt in (None, "data = 'a'", "id >= 12", "data = 'a' AND id >= 12"):
        here = list(iter_file_scan_tasks(md, t.io, filter=flt))
        there = list(iter_file_scan_tasks(md, t.io, filter=flt, read_entries=elsewhere))
        assert there == here and here
    assert calls == [3, 2, 3, 2]
    tasks = {tk.data_file.file_path.rsplit("/", 1)[1]: tk for tk in iter_file_scan_tasks(md, t.io, read_entries=elsewhere)}
    assert [d.data_file.file_path for d in tasks["a2.parquet"].deletes] == [pos.file_path]
    # position deletes apply at an equal sequence number, and only within their partition
    assert [d.data_file.file_path for d in tasks["a3.parquet"].deletes] == [pos.file_path]
    assert tasks["b1.parquet"].deletes == ()
    assert scan_manifests(md, t.io, filter="data = 'zzz'").data_manifests == ()


@pytest.mark.parametrize("flt", ["data = 'a'", "data IS NULL", "data IS NOT NULL", "data != 'b'", "data IN ('b', 'c')",
                                 "data LIKE 'a%'", "data NOT IN ('a')", "data > 'a' OR data IS NULL"])
def test_a_filter_on_identity_partition_columns_plans_as_its_metrics_would(catalog, flt):
    # the partition values decide such a filter: planning reads those manifests without testing
    # each entry's metrics, and must keep what the metrics test keeps (files without rows dropped)
    t = _table(catalog)
    t = commit(t, [FastAppend([_file(t, "a1", ("a",)), _file(t, "a0", ("a",), records=0), _file(t, "ab", ("ab",)),
                               _file(t, "b1", ("b",)), _file(t, "n1", (None,)), _file(t, "n0", (None,), records=0),
                               _file(t, "u1", ("c",), records=-1)])], policy=FAST)
    md = t.metadata
    ef = EntryFilter(md.specs_by_id, md.schema(), parse_filter(flt), True)
    [manifest] = scan_manifests(md, t.io).data_manifests
    pev = ef.partition_evaluator(0)
    expected = [e.data_file for e in read_manifest(t.io, manifest, specs=md.specs_by_id, skip_deleted=True)
                if pev.eval(e.data_file.partition) and InclusiveMetricsEvaluator(md.schema(), parse_filter(flt)).eval(e.data_file)]
    assert [e.data_file for e in ef.data_entries(t.io, manifest)] == expected
    assert not any(f.record_count == 0 for f in expected)
