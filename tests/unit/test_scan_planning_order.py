"""Putting the results of the Spark job that reads a scan's manifests back in manifest order
(procedures.spark.scan_planning.in_manifest_order): any order works, a lost or repeated result
is a ScanPlanningError, never a wrong plan."""

from __future__ import annotations

import random

import pytest

from procedures.errors import IcebergError, ScanPlanningError
from procedures.spark.scan_planning import in_manifest_order, in_order


def test_results_in_any_order_come_back_in_manifest_order():
    pairs = [(i, f"m{i}") for i in range(50)]
    random.Random(3).shuffle(pairs)
    assert in_manifest_order(pairs, 50) == [f"m{i}" for i in range(50)]
    assert in_manifest_order([(1, None), (0, b"")], 2) == [b"", None]


@pytest.mark.parametrize("pairs, missing, repeated", [
    ([(0, "a"), (2, "c")], [1], []),
    ([(0, "a"), (1, "b"), (1, "b"), (2, "c")], [], [1]),
    ([(0, "a"), (1, "b"), (3, "d"), (-1, "z")], [2], [3, -1]),
])
def test_lost_or_repeated_results_are_a_typed_error(pairs, missing, repeated):
    with pytest.raises(ScanPlanningError, match="Planning the scan of db.t: .* returned") as info:
        in_manifest_order(pairs, 3, "db.t")
    assert (info.value.missing, info.value.repeated, info.value.table) == (missing, repeated, "db.t")
    assert isinstance(info.value, (IcebergError, RuntimeError))


def test_a_stream_in_order_passes_its_values_on():
    assert list(in_order(((i, f"m{i}") for i in range(5)), 5)) == [f"m{i}" for i in range(5)]
    assert list(in_order([], 0)) == []


@pytest.mark.parametrize("pairs, count, passed", [
    ([(0, "a"), (2, "c")], 3, ["a"]),           # a result lost
    ([(0, "a"), (1, "b"), (1, "b")], 3, ["a", "b"]),  # a result repeated
    ([(0, "a"), (1, "b")], 3, ["a", "b"]),      # the stream ends early
])
def test_a_stream_out_of_order_or_short_stops_with_a_typed_error(pairs, count, passed):
    got = []
    with pytest.raises(ScanPlanningError, match="Planning the scan of db.t: "):
        for value in in_order(pairs, count, "db.t"):
            got.append(value)
    assert got == passed
