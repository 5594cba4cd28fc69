"""Read splits: cutting files at row groups, packing small files, and reading a split with the
right positions, deletes and row ids."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from procedures.core.kernel.scan import DeleteFileEntry, FileScanTask
from procedures.core.kernel.splits import (
    SplitOptions,
    plan_spread_groups,
    plan_task_groups,
    split_task,
    task_weight,
    valid_split_offsets,
)
from procedures.errors import ValidationError
from procedures.io.arrow_schema import schema_to_arrow
from procedures.io.fileio import FileIO
from procedures.io.parquet_reader import read_task_table
from procedures.spec.expressions import ALWAYS_TRUE
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
from procedures.spec.metadata_columns import POSITION_DELETE_SCHEMA
from procedures.spec.schema import Schema
from procedures.spec.types import LONG, STRING, NestedField

IO = FileIO()
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "s", STRING)))
MIB = 1024 * 1024


def _task(df: DataFile, deletes=()) -> FileScanTask:
    return FileScanTask(df, 1, tuple(deletes), ALWAYS_TRUE, 0, (), SCHEMA)


def _file(name: str, size: int, offsets=None) -> DataFile:
    return DataFile(f"/t/{name}.parquet", FileFormat.PARQUET, (), 10, size, split_offsets=offsets, spec_id=0)


def _multi_row_group_file(tmp_path, rows: int = 1000, per_group: int = 100) -> DataFile:
    path = tmp_path / "multi.parquet"
    table = pa.Table.from_pydict({"id": list(range(rows)), "s": [f"v{i:05d}" for i in range(rows)]},
                                 schema=schema_to_arrow(SCHEMA))
    pq.write_table(table, str(path), row_group_size=per_group, compression="none")
    meta = pq.ParquetFile(str(path)).metadata
    offsets = []
    for i in range(meta.num_row_groups):
        col = meta.row_group(i).column(0)
        d = col.dictionary_page_offset
        offsets.append(d if d is not None and 0 < d < col.data_page_offset else col.data_page_offset)
    return DataFile(str(path), FileFormat.PARQUET, (), rows, path.stat().st_size, split_offsets=tuple(offsets),
                    spec_id=0, first_row_id=5000)


def test_untrusted_offsets_leave_the_file_whole():
    assert valid_split_offsets(_task(_file("a", 1000, (4, 500, 300)))) is None  # not ascending
    assert valid_split_offsets(_task(_file("a", 1000, (4, 1000)))) is None  # past the end
    assert valid_split_offsets(_task(_file("a", 1000, None))) is None
    assert split_task(_task(_file("a", 10 * MIB, (4, 5, 1000, 10 * MIB))), MIB) == [_task(_file("a", 10 * MIB, (4, 5, 1000, 10 * MIB)))]
    assert valid_split_offsets(_task(_file("a", 1000, (4, 400)))) == (4, 400)


def test_split_ranges_are_contiguous_and_about_the_target():
    t = _task(_file("a", 100, (4, 20, 40, 60, 80)))
    pieces = split_task(t, 40)
    assert [(p.start, p.length) for p in pieces] == [(0, 40), (40, 40), (80, 20)]
    # a row group larger than the target stays whole
    pieces = split_task(_task(_file("b", 100, (4, 90))), 10)
    assert [(p.start, p.length) for p in pieces] == [(0, 90), (90, 10)]
    # small files and existing splits are left alone
    assert split_task(t, 1000) == [t]
    assert split_task(pieces[0], 1) == [pieces[0]]


def test_reading_every_split_reads_every_row_once_with_absolute_positions(tmp_path):
    df = _multi_row_group_file(tmp_path)
    delete_path = tmp_path / "pos.parquet"
    deleted = [0, 99, 100, 450, 999]
    pq.write_table(pa.Table.from_pydict({"file_path": [df.file_path] * len(deleted), "pos": deleted},
                                        schema=schema_to_arrow(POSITION_DELETE_SCHEMA)), str(delete_path))
    pos = DataFile(str(delete_path), FileFormat.PARQUET, (), len(deleted), delete_path.stat().st_size,
                   content=FileContent.POSITION_DELETES, spec_id=0)
    task = _task(df, [DeleteFileEntry(pos, 2)])
    pieces = split_task(task, df.file_size_in_bytes // 4)
    assert len(pieces) >= 3
    cols = ("_pos", "_row_id")
    parts = [read_task_table(IO, p, SCHEMA, metadata_columns=cols) for p in pieces]
    assert all(p.num_rows for p in parts)
    whole = read_task_table(IO, task, SCHEMA, metadata_columns=cols)
    joined = pa.concat_tables(parts)
    assert joined.to_pydict() == whole.to_pydict()
    assert joined.column("_pos").to_pylist() == [i for i in range(1000) if i not in deleted]
    assert joined.column("id").to_pylist() == joined.column("_pos").to_pylist()
    assert joined.column("_row_id").to_pylist() == [5000 + i for i in range(1000) if i not in deleted]
    # a range that holds no row group start reads nothing
    empty = dataclasses.replace(task, start=1, length=2)
    assert read_task_table(IO, empty, SCHEMA).num_rows == 0


def test_packing_respects_target_open_cost_and_lookback():
    small = [_task(_file(f"s{i}", MIB)) for i in range(20)]
    groups = plan_task_groups(small, SplitOptions(split_size=10 * MIB, open_file_cost=0, lookback=1))
    assert [len(g) for g in groups] == [10, 10]
    # each file counts at least the open cost: 4 MiB each -> two per 10 MiB bin
    groups = plan_task_groups(small, SplitOptions(split_size=10 * MIB, open_file_cost=4 * MIB, lookback=1))
    assert [len(g) for g in groups] == [2] * 10
    # every task exactly once, whatever the look-back
    mixed = [_task(_file(f"m{i}", (i % 7 + 1) * MIB)) for i in range(50)]
    for lookback in (1, 3, 10):
        groups = plan_task_groups(mixed, SplitOptions(split_size=8 * MIB, open_file_cost=0, lookback=lookback))
        flat = [t.data_file.file_path for g in groups for t in g]
        assert sorted(flat) == sorted(t.data_file.file_path for t in mixed)
        assert all(sum(task_weight(t, 0) for t in g) <= 8 * MIB for g in groups)
    # a longer look-back fills bins better
    few = len(plan_task_groups(mixed, SplitOptions(split_size=8 * MIB, open_file_cost=0, lookback=10)))
    many = len(plan_task_groups(mixed, SplitOptions(split_size=8 * MIB, open_file_cost=0, lookback=1)))
    assert few < many


def test_deletes_weigh_in_and_big_files_are_split_while_packing():
    big = _task(_file("big", 30 * MIB, (4, 10 * MIB, 20 * MIB)))
    pos = DataFile("/t/pos.parquet", FileFormat.PARQUET, (), 5, 3 * MIB, content=FileContent.POSITION_DELETES)
    with_deletes = _task(_file("d", 2 * MIB), [DeleteFileEntry(pos, 2)])
    assert task_weight(with_deletes, 0) == 5 * MIB
    groups = plan_task_groups([big, with_deletes], SplitOptions(split_size=10 * MIB, open_file_cost=0))
    assert sorted((t.data_file.file_path, t.start) for g in groups for t in g) == [
        ("/t/big.parquet", 0), ("/t/big.parquet", 10 * MIB), ("/t/big.parquet", 20 * MIB), ("/t/d.parquet", 0)]


def test_small_scans_are_dealt_evenly_over_the_cores():
    small = [_task(_file(f"s{i}", 1800 + (i % 7) * 10)) for i in range(1000)]
    opts = SplitOptions(open_file_cost=0)
    groups = plan_spread_groups(small, opts, 2)
    assert len(groups) == 2
    assert sorted(t.data_file.file_path for g in groups for t in g) == sorted(t.data_file.file_path for t in small)
    loads = [sum(task_weight(t, 0) for t in g) for g in groups]
    assert max(loads) - min(loads) <= sum(loads) // 100  # not 564 files against 436, as packing gave
    # with the open-file cost, tiny files weigh the same: dealt by count
    assert sorted(len(g) for g in plan_spread_groups(small[:40], SplitOptions(), 4)) == [10, 10, 10, 10]
    # a scan that already fills the cores, a single core, and a single file are planned as usual
    large = [_task(_file(f"l{i}", 100 * MIB)) for i in range(3)]
    assert plan_spread_groups(large, opts, 2) == plan_task_groups(large, opts)
    assert plan_spread_groups(small, opts, 1) == plan_task_groups(small, opts)
    assert len(plan_spread_groups(small[:1], opts, 8)) == 1
    assert plan_spread_groups([], opts, 2) == []


def test_split_options():
    opts = SplitOptions.from_properties({"read.split.target-size": "1000", "read.split.planning-lookback": "3"},
                                        open_file_cost=7)
    assert (opts.split_size, opts.open_file_cost, opts.lookback) == (1000, 7, 3)
    with pytest.raises(ValidationError, match="split_size"):
        SplitOptions(split_size=0)
    with pytest.raises(ValidationError, match="read.split.target-size"):
        SplitOptions.from_properties({"read.split.target-size": "big"})


def test_spread_groups_balances_by_weight_and_keeps_every_group_once():
    from procedures.core.kernel.splits import spread_groups

    groups = [[_task(_file(f"g{i}", w * MIB))] for i, w in enumerate([8, 1, 1, 1, 1, 4, 4])]
    slots = spread_groups(groups, 2)
    assert sorted(i for s in slots for i in s) == list(range(7))
    loads = [sum(groups[i][0].data_file.file_size_in_bytes for i in s) // MIB for s in slots]
    assert sorted(loads) == [10, 10]
    assert all(s == sorted(s) for s in slots)
    assert spread_groups(groups, 50) == [[0], [5], [6], [1], [2], [3], [4]]  # never more tasks than groups
    assert spread_groups([], 3) == []
    with pytest.raises(ValidationError, match="slots"):
        spread_groups(groups, 0)


def test_spread_weights_deals_items_by_weight():
    from procedures.core.kernel.splits import spread_weights

    weights = [8, 1, 1, 1, 1, 4, 4]
    slots = spread_weights(weights, 2)
    assert slots == [[0, 1, 3], [2, 4, 5, 6]]  # the heaviest first, each to the lighter task: 10 and 10
    assert [sum(weights[i] for i in s) for s in slots] == [10, 10]
    assert spread_weights([3, 3, 3], 5) == [[0], [1], [2]]  # never an empty task
    assert spread_weights([], 2) == []
    with pytest.raises(ValidationError, match="slots"):
        spread_weights([1], 0)
