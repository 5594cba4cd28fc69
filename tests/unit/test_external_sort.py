"""Sorting in bounded memory (procedures.core.data_rewrite.external_sort): spilled runs merged by key ranges
give the order of a one-shot in-memory sort, hold at most about one budget of rows at a time, and
leave no spill file behind."""

from __future__ import annotations

import math
import os
import random

import pyarrow as pa
import pytest

from procedures.core.data_rewrite.arrow_sort import sort_indices
from procedures.core.data_rewrite.external_sort import ExternalSorter, sort_memory_pool
from procedures.spec.schema import Schema
from procedures.spec.sorting import parse_sort_order
from procedures.spec.types import DATE, DOUBLE, LONG, STRING, NestedField

SCHEMA = Schema((
    NestedField(1, "id", LONG, required=False),
    NestedField(2, "data", STRING, required=False),
    NestedField(3, "x", DOUBLE, required=False),
    NestedField(4, "d", DATE, required=False),
))


def random_rows(n: int, seed: int, distinct: int = 50) -> pa.Table:
    rnd = random.Random(seed)

    def maybe(v):
        return None if rnd.random() < 0.05 else v

    xs = [maybe(rnd.choice([float("nan"), -0.0, 0.0, rnd.uniform(-5, 5)])) for _ in range(n)]
    return pa.table({
        "id": pa.array([maybe(rnd.randrange(distinct)) for _ in range(n)], pa.int64()),
        "data": pa.array([maybe(rnd.choice(["a", "B", "é", "ab", ""]) + str(rnd.randrange(distinct))) for _ in range(n)]),
        "x": pa.array(xs, pa.float64()),
        "d": pa.array([maybe(rnd.randrange(-1000, 1000)) for _ in range(n)], pa.int32()).cast(pa.date32()),
    })


def key_of(row: dict, fields) -> tuple:
    """A comparable rendering of a row's sort key (NaN as a string, so equal keys compare equal)."""
    out = []
    for f in fields:
        v = row[SCHEMA.find_field(f.source_id).name]
        out.append("nan" if isinstance(v, float) and math.isnan(v) else v)
    return tuple(out)


def externally_sorted(table: pa.Table, order: str, tmp_path, **kwargs) -> tuple[pa.Table, ExternalSorter]:
    fields = parse_sort_order(order, SCHEMA).fields
    sorter = ExternalSorter(SCHEMA, fields, str(tmp_path), **kwargs)
    for batch in table.to_batches(max_chunksize=97):
        sorter.add(batch)
    out = pa.Table.from_batches(list(sorter.sorted_batches(max_rows=50)), schema=table.schema)
    return out, sorter


@pytest.mark.parametrize("order", [
    "data ASC NULLS LAST",
    "id DESC NULLS FIRST, x ASC NULLS LAST",
    "x DESC NULLS LAST, d ASC NULLS FIRST",
    "truncate(1, data) ASC NULLS FIRST, id DESC NULLS LAST, x DESC NULLS FIRST",
    "d DESC NULLS LAST",
])
def test_spilled_runs_merge_into_the_in_memory_order(order, tmp_path):
    table = random_rows(5_000, seed=len(order))
    fields = parse_sort_order(order, SCHEMA).fields
    out, sorter = externally_sorted(table, order, tmp_path, memory_bytes=8_000, batch_rows=64)
    assert sorter.spilled_runs > 5  # the test is about spilling
    expected = table.take(sort_indices(table, SCHEMA, fields))
    # same keys in the same sequence (ties may come in any order) and the same rows
    assert [key_of(r, fields) for r in out.to_pylist()] == [key_of(r, fields) for r in expected.to_pylist()]
    render = lambda t: sorted(map(repr, t.to_pylist()))  # noqa: E731
    assert render(out) == render(table)
    # every range sorted at once stays near the budget (rows of about 30 bytes: ~270 per budget)
    assert sorter.max_sorted_rows < 2_000
    sorter.close()
    assert os.listdir(tmp_path) == []


def test_one_key_everywhere_is_not_sorted_in_one_piece(tmp_path):
    # 20,000 rows with the same key but a few: a range holding them all would be sorted in one piece
    rnd = random.Random(7)
    ids = [5] * 20_000 + [rnd.randrange(10) for _ in range(300)]
    rnd.shuffle(ids)
    table = pa.table({"id": pa.array(ids, pa.int64()), "data": pa.array([str(i) for i in range(len(ids))]),
                      "x": pa.array([0.0] * len(ids)), "d": pa.array([0] * len(ids), pa.int32()).cast(pa.date32())})
    out, sorter = externally_sorted(table, "id ASC NULLS LAST", tmp_path, memory_bytes=20_000, batch_rows=100)
    assert out.column("id").to_pylist() == sorted(ids)
    assert sorted(out.column("data").to_pylist()) == sorted(table.column("data").to_pylist())
    assert sorter.max_sorted_rows < 5_000
    sorter.close()


def test_what_fits_is_sorted_in_memory_without_spilling(tmp_path):
    table = random_rows(500, seed=3)
    fields = parse_sort_order("id ASC NULLS FIRST", SCHEMA).fields
    out, sorter = externally_sorted(table, "id ASC NULLS FIRST", tmp_path)
    assert sorter.spilled_runs == 0 and os.listdir(tmp_path) == []
    assert out.column("id").to_pylist() == table.take(sort_indices(table, SCHEMA, fields)).column("id").to_pylist()


def test_close_removes_spill_files_even_when_reading_stops_early(tmp_path):
    table = random_rows(3_000, seed=11)
    fields = parse_sort_order("data ASC NULLS LAST", SCHEMA).fields
    with ExternalSorter(SCHEMA, fields, str(tmp_path), memory_bytes=8_000, batch_rows=64) as sorter:
        for batch in table.to_batches(max_chunksize=200):
            sorter.add(batch)
        assert sorter.spilled_runs > 0 and os.listdir(tmp_path)
        next(iter(sorter.sorted_batches()))
    assert os.listdir(tmp_path) == []


def test_handed_out_batches_do_not_hold_whole_run_batches(tmp_path):
    # few distinct keys over many runs: every range starts with rows equal to its lower boundary,
    # taken from each run as slices of its batches; a writer buffering those slices must not keep
    # the run batches (keys included) alive behind them
    table = random_rows(6_000, seed=5, distinct=8)
    fields = parse_sort_order("id ASC NULLS LAST", SCHEMA).fields
    sorter = ExternalSorter(SCHEMA, fields, str(tmp_path), memory_bytes=8_000, batch_rows=256)
    for batch in table.to_batches(max_chunksize=97):
        sorter.add(batch)
    batches = list(sorter.sorted_batches(max_rows=50))
    assert sorter.spilled_runs > 5
    held = sum(b.get_total_buffer_size() for b in batches)
    assert held <= 2 * table.nbytes, (held, table.nbytes)
    assert sum(b.num_rows for b in batches) == table.num_rows
    sorter.close()


def test_sorts_allocate_from_jemalloc_where_pyarrow_has_it():
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        pytest.skip("this pyarrow has no jemalloc")
    assert sort_memory_pool().backend_name == "jemalloc"
