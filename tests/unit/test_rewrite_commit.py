"""rewrite_data_files' commit manager without Spark: groups "rewritten" by a fake writer, then
committed with validation from the starting snapshot, starting sequence numbers, DV removal,
partial progress, cleanup of written files, and dangling-delete removal."""

from __future__ import annotations

import threading

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.operations import DeleteFiles, FastAppend, RowDelta
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.errors import ValidationError
from procedures.core.data_rewrite.compaction import find_dangling_deletes, remove_dangling_deletes
from procedures.core.data_rewrite.grouping import plan_rewrite
from procedures.core.data_rewrite.options import SORT, Z_ORDER, parse_rewrite_options
from procedures.core.data_rewrite.rewriter import choose_rewriter
from procedures.spec.manifest.manifest_list import read_manifest_list
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.sorting import SortOrder, SortField
from procedures.spec.transforms import parse_transform
from procedures.spec.types import LONG, STRING, NestedField
from tests.helpers.fake_rewrite import run_groups

FAST = RetryPolicy(num_retries=2, min_wait_ms=1, max_wait_ms=2)
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "cat", STRING)))
SPEC = PartitionSpec(0, (PartitionField(2, 1000, parse_transform("identity"), "cat"),))


@pytest.fixture()
def table(tmp_path):
    cat = HadoopCatalog("ours", str(tmp_path / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/t", spec=SPEC, format_version=3,
                               sort_order=SortOrder(1, (SortField(1),)))
    t = cat.create_table(("db", "t"), md)
    for i in range(10):
        f = DataFile(f"{t.location}/data/f{i}.parquet", FileFormat.PARQUET, ("ab"[i % 2],), 10, 100, spec_id=0)
        t = commit(t, [FastAppend([f])], policy=FAST)
    return t


class FakeWriter:
    """Writes one real (empty) file per group so cleanup can be observed."""

    def __init__(self, table, fail=()):
        self.table, self.fail, self.written, self.lock = table, set(fail), [], threading.Lock()

    def __call__(self, group, plan):
        if group.global_index in self.fail:
            raise RuntimeError(f"boom in group {group.global_index}")
        path = f"{self.table.location}/data/new-{group.global_index}.parquet"
        self.table.io.write(path, b"x", overwrite=True)
        f = DataFile(path, FileFormat.PARQUET, group.files[0].partition,
                     sum(x.record_count for x in group.files), 1, spec_id=0)
        with self.lock:
            self.written.append(path)
        return [f]


def live(t):
    md = t.metadata
    specs = {s.spec_id: s for s in md.partition_specs}
    out = {}
    for m in read_manifest_list(t.io, md.current_snapshot().manifest_list):
        for e in read_manifest(t.io, m, specs=specs, skip_deleted=True):
            out[e.data_file.file_path] = e
    return out


def _plan(t, **options):
    opts = parse_rewrite_options({"target-file-size-bytes": "1000", **options})
    return opts, plan_rewrite(t.metadata, t.io, opts)


def test_commit_uses_starting_sequence_number_and_keeps_concurrent_appends(table):
    opts, plan = _plan(table)
    assert [g.input_file_count for g in plan.groups] == [5, 5]
    start = table.metadata.current_snapshot()
    writer = FakeWriter(table)
    appended = DataFile(f"{table.location}/data/late.parquet", FileFormat.PARQUET, ("a",), 3, 100, spec_id=0)

    def write_then_append(group, p):
        out = writer(group, p)
        if group.global_index == 1:
            commit(table.refresh(), [FastAppend([appended])], policy=FAST)
        return out

    result = run_groups(table, opts, plan, start.snapshot_id, write_then_append, lambda t, ops: commit(t, ops, policy=FAST))
    assert result.row() == (10, 2, 1000, 0, 0)
    after = live(table.refresh())
    assert set(after) == set(writer.written) | {appended.file_path}
    assert {after[p].sequence_number for p in writer.written} == {start.sequence_number}
    snap = table.refresh().metadata.current_snapshot()
    assert snap.summary["operation"] == "replace" and snap.summary["deleted-data-files"] == "10"


def test_concurrent_delete_fails_cleanly_and_removes_written_files(table):
    opts, plan = _plan(table)
    victim = plan.groups[0].files[0]
    writer = FakeWriter(table)

    def write_then_delete(group, p):
        out = writer(group, p)
        if group.global_index == 2:
            dv = DataFile(f"{table.location}/data/dv.puffin", FileFormat.PUFFIN, victim.partition, 1, 60,
                          content=FileContent.POSITION_DELETES, referenced_data_file=victim.file_path,
                          content_offset=4, content_size_in_bytes=40, spec_id=0)
            commit(table.refresh(), [RowDelta(add_deletes=[dv])], policy=FAST)
        return out

    before = table.refresh().metadata.current_snapshot_id
    with pytest.raises(ValidationError, match="Cannot commit rewrite because of a ValidationException"):
        run_groups(table, opts, plan, before, write_then_delete, lambda t, ops: commit(t, ops, policy=FAST))
    t = table.refresh()
    assert t.metadata.current_snapshot().summary["operation"] == "delete"  # only the concurrent delete landed
    assert not any(t.io.exists(p) for p in writer.written)
    assert victim.file_path in live(t)


def test_partial_progress_fails_only_the_conflicting_group(table):
    # one group at a time: group 1's writer deletes a file of group 2 before group 2 is rewritten (with
    # concurrent groups, group 2 could commit first and the race would decide which group fails)
    opts, plan = _plan(table, **{"partial-progress.enabled": "true", "max-concurrent-file-group-rewrites": "1"})
    start = table.metadata.current_snapshot_id
    victim = plan.groups[1].files[0]
    writer = FakeWriter(table)

    def writer_with_concurrent_delete(group, p):
        if group.global_index == 1:
            commit(table.refresh(), [DeleteFiles([victim.file_path])], policy=FAST)
        return writer(group, p)

    result = run_groups(table, opts, plan, start, writer_with_concurrent_delete, lambda t, ops: commit(t, ops, policy=FAST))
    assert result.row() == (5, 1, 500, 0, 0) and len(result.snapshot_ids) == 1
    t = table.refresh()
    files = live(t)
    assert f"{t.location}/data/new-1.parquet" in files
    assert not t.io.exists(f"{t.location}/data/new-2.parquet")
    assert victim.file_path not in files and len(files) == 1 + 4  # group 1 rewritten, group 2 untouched minus victim


def test_failed_write_without_partial_progress_cleans_up(table):
    opts, plan = _plan(table, **{"max-concurrent-file-group-rewrites": "1"})
    writer = FakeWriter(table, fail={2})
    with pytest.raises(RuntimeError, match="boom in group 2"):
        run_groups(table, opts, plan, table.metadata.current_snapshot_id, writer)
    assert writer.written and not any(table.io.exists(p) for p in writer.written)
    # with partial progress the failing group is counted and the other one is committed
    opts, plan = _plan(table, **{"partial-progress.enabled": "true"})
    result = run_groups(table, opts, plan, table.metadata.current_snapshot_id, FakeWriter(table, fail={2}),
                        lambda t, ops: commit(t, ops, policy=FAST))
    assert result.row() == (5, 1, 500, 5, 0)
    # more failed commits than allowed is an error
    t = table.refresh()
    opts, plan = _plan(t, **{"partial-progress.enabled": "true", "partial-progress.max-failed-commits": "0",
                            "min-input-files": "1", "rewrite-all": "true"})
    with pytest.raises(ValidationError, match="rewrite commits failed. This is more than the maximum allowed failures of 0"):
        run_groups(t, opts, plan, t.metadata.current_snapshot_id, FakeWriter(t, fail={1}))


def test_dvs_of_rewritten_files_are_removed_and_counted(table):
    t = table
    target = f"{t.location}/data/f0.parquet"
    other = f"{t.location}/data/f1.parquet"
    dvs = [DataFile(f"{t.location}/data/dvs.puffin", FileFormat.PUFFIN, (p,), 2, 200,
                    content=FileContent.POSITION_DELETES, referenced_data_file=path, content_offset=off,
                    content_size_in_bytes=40, spec_id=0) for p, path, off in (("a", target, 4), ("b", other, 44))]
    t = commit(t, [RowDelta(add_deletes=dvs)], policy=FAST)
    opts, plan = _plan(t, **{"rewrite-all": "true"})
    group_a = [g for g in plan.groups if g.partition == ("a",)]
    sub = type(plan)(tuple(group_a), 1, {})
    result = run_groups(t, opts, sub, t.metadata.current_snapshot_id, FakeWriter(t))
    assert result.removed_delete_files_count == 1
    t = t.refresh()
    remaining = [e.data_file for e in live(t).values() if e.data_file.content != FileContent.DATA]
    # the DV of the untouched file (same Puffin path) must survive
    assert [(d.referenced_data_file, d.content_offset) for d in remaining] == [(other, 44)]


def test_dangling_deletes(table):
    t = table
    pos = DataFile(f"{t.location}/data/pos.parquet", FileFormat.PARQUET, ("a",), 1, 50,
                   content=FileContent.POSITION_DELETES, spec_id=0)
    eq = DataFile(f"{t.location}/data/eq.parquet", FileFormat.PARQUET, ("b",), 1, 50,
                  content=FileContent.EQUALITY_DELETES, equality_ids=(1,), spec_id=0)
    md3 = t.metadata
    if md3.format_version >= 3:
        # v3 refuses position delete files; check the equality delete only
        t = commit(t, [RowDelta(add_deletes=[eq])], policy=FAST)
        assert find_dangling_deletes(t) == []
        # rewrite every data file of partition b at the starting sequence number -> eq delete applies still
        t = commit(t, [DeleteFiles([f"{t.location}/data/f{i}.parquet" for i in (1, 3, 5, 7, 9)])], policy=FAST)
        assert [d.file_path for d in find_dangling_deletes(t)] == [eq.file_path]
        t, n = remove_dangling_deletes(t)
        assert n == 1 and find_dangling_deletes(t) == []
    assert pos.content == FileContent.POSITION_DELETES


def test_strategy_decisions(table):
    md = table.metadata
    assert choose_rewriter(md, "t", None, None).kind == "BIN-PACK"
    assert choose_rewriter(md, "t", "SORT", None).sort_order == md.sort_order()
    s = choose_rewriter(md, "t", None, "(cat DESC NULLS LAST, id)")
    assert s.kind == SORT and [f.source_id for f in s.sort_order.fields] == [2, 1]
    assert choose_rewriter(md, "t", "sort", "zorder(id), zorder(`id`)").zorder_columns == ("id", "id")
    assert choose_rewriter(md, "t", None, "zorder(id, cat)").kind == Z_ORDER
    for strategy, order, message in [
        ("binpack", "id", "Cannot set rewrite mode, it has already been set to BIN-PACK"),
        ("fast", None, "unsupported strategy: fast. Only binpack or sort is supported"),
        (None, "zorder(id), cat", "Cannot mix identity sort columns and a Zorder sort expression"),
        (None, "ZORDER(id, cat)", "Cannot convert transform with more than one column reference"),
        (None, "zorder(cat)", "all columns provided were identity partition columns"),
        (None, "zorder(nope)", "Cannot find column 'nope' in table schema"),
        (None, "nope ASC", "column 'nope' not found"),
        (None, "id ASC none", "Cannot parse sort order"),
    ]:
        with pytest.raises(ValidationError, match=message):
            choose_rewriter(md, "t", strategy, order)
    unsorted = type(md)(**{**{f: getattr(md, f) for f in md.__dataclass_fields__ if md.__dataclass_fields__[f].init},
                           "sort_orders": (SortOrder(0, ()),), "default_sort_order_id": 0})
    with pytest.raises(ValidationError, match="table 'cat.db.t' is unsorted and no sort order is provided"):
        choose_rewriter(unsorted, "cat.db.t", "sort", None)


def _v2_table_and_three_files(tmp_path):
    """A v2 table ``db.p`` partitioned by ``cat``, and three data files of partition ``a`` (not committed)."""
    cat = HadoopCatalog("ours", str(tmp_path / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/p", spec=SPEC, format_version=2)
    t = cat.create_table(("db", "p"), md)
    return t, [DataFile(f"{t.location}/data/cat=a/f{i}.parquet", FileFormat.PARQUET, ("a",), 10, 100, spec_id=0)
               for i in range(3)]


def test_position_delete_files_written_before_a_failure_are_deleted(tmp_path):
    """write_position_delete_files writes one file per data file; when a later one fails the caller
    never learns the earlier names, so the function deletes them before the error propagates."""
    from procedures.io.delete_writers import DeleteTarget, write_position_delete_files

    t, files = _v2_table_and_three_files(tmp_path)
    data_dir = tmp_path / "wh" / "db" / "p" / "data"
    # f0 and f1 get their files first (targets are written in order); f2's negative position fails
    deletes = {DeleteTarget.of(files[0]): [1], DeleteTarget.of(files[1]): [2], DeleteTarget.of(files[2]): [-1]}
    with pytest.raises(ValidationError, match="row positions must be non-negative"):
        write_position_delete_files(t.io, t.metadata, deletes, file_scoped=True)
    assert not data_dir.exists() or [p for p in data_dir.rglob("*") if p.is_file()] == []
    # the same targets without the bad one are written: the files would have been there
    written = write_position_delete_files(t.io, t.metadata, dict(list(deletes.items())[:2]), file_scoped=True)
    assert len(written) == 2
    assert sorted(str(p) for p in data_dir.rglob("*.parquet")) == sorted(f.file_path for f in written)


def test_rewrite_position_delete_files_drops_dangling_positions(tmp_path):
    from procedures.io.delete_writers import DeleteTarget, read_position_deletes, write_position_delete_files
    from procedures.core.data_rewrite import position_deletes
    from tests.helpers.fake_rewrite import DriverEngine

    def rewrite_position_deletes(t, options):
        params = position_deletes.RewritePositionDeletesParams(options=options)
        return position_deletes.execute(t, position_deletes.plan(t.metadata, params), DriverEngine()).row()

    t, files = _v2_table_and_three_files(tmp_path)
    t = commit(t, [FastAppend(files)], policy=FAST)
    for i in range(3):
        dels = write_position_delete_files(t.io, t.metadata, {DeleteTarget.of(files[i]): [i, i + 1],
                                                               DeleteTarget.of(files[0]): [9]}, file_scoped=False)
        t = commit(t, [RowDelta(add_deletes=dels)], policy=FAST)
    t = commit(t, [DeleteFiles([files[2].file_path])], policy=FAST)
    with pytest.raises(ValidationError, match=r"Cannot use options \[max-files-to-rewrite\]"):
        rewrite_position_deletes(t, {"max-files-to-rewrite": "1"})
    assert rewrite_position_deletes(t, {"min-input-files": "4"}) == (0, 0, 0, 0)
    rewritten, added, rbytes, abytes = rewrite_position_deletes(t, {"min-input-files": "2"})
    # one new file per live data file (write.delete.granularity defaults to file, as in Java)
    assert (rewritten, added) == (3, 2) and rbytes > 0 and abytes > 0
    t = t.refresh()
    new = [e.data_file for e in live(t).values() if e.data_file.content == FileContent.POSITION_DELETES]
    assert {f.referenced_data_file: read_position_deletes(t.io, f) for f in new} == {
        files[0].file_path: {files[0].file_path: [9]}, files[1].file_path: {files[1].file_path: [1, 2]}}
    assert t.metadata.current_snapshot().summary["operation"] == "replace"
