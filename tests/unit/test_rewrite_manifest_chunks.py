"""The chunk cut an engine uses for rewrite_manifests (assign_chunks, chunk_of_position) must be the
cut the driver makes on the sorted entries, or the two paths would write different manifests; and a
manifest is placed from its partition summaries only when they prove a single partition."""

from __future__ import annotations

import math
import random

import pytest

from procedures.core.rewrite_manifests_op import assign_chunks, chunk_of_position, order_key, uniform_partition
from procedures.spec.conversions import to_bytes
from procedures.spec.manifest import FieldSummary, ManifestFile
from procedures.spec.types import DOUBLE, INT, STRING, NestedField, StructType


def _driver_cut(entries: list, n: int, keyed: bool) -> list[int]:
    """The driver's rule, on the expanded entry list: a new part starts at a key change once the
    current part holds ``ceil(len / n)`` entries, never more than ``n`` parts."""
    if n <= 1 or len(entries) <= 1:
        return [0] * len(entries)
    per = math.ceil(len(entries) / n)
    out, size, part = [], 0, 0
    for i, e in enumerate(entries):
        if size >= per and (not keyed or e != entries[i - 1]) and part < n - 1:
            part, size = part + 1, 0
        out.append(part)
        size += 1
    return out


@pytest.mark.parametrize("seed", range(40))
def test_assign_chunks_cuts_where_the_driver_cuts(seed):
    rng = random.Random(seed)
    keys = [(rng.choice([None, rng.randint(-5, 50)]), rng.choice(["a", "b", "c"])) for _ in range(rng.randint(1, 40))]
    counts = {k: rng.randint(1, 30) for k in keys}
    n = rng.randint(1, 12)
    sort_key = lambda k: tuple(order_key(v) for v in k)  # noqa: E731
    placed = assign_chunks(counts, n, sort_key)
    expanded = [k for k in sorted(counts, key=sort_key) for _ in range(counts[k])]
    assert [placed[k][0] for k in expanded] == _driver_cut(expanded, n, keyed=True)
    ranks = [placed[k][1] for k in sorted(counts, key=sort_key)]
    assert ranks == list(range(len(counts)))
    assert max(c for c, _ in placed.values()) < max(n, 1)


@pytest.mark.parametrize("total,n", [(1, 3), (10, 1), (10, 3), (10, 10), (97, 8), (1000, 7)])
def test_chunk_of_position_cuts_where_the_driver_cuts(total, n):
    assert [chunk_of_position(i, total, n) for i in range(total)] == _driver_cut(list(range(total)), n, keyed=False)


def _summarised(*summaries: FieldSummary) -> ManifestFile:
    return ManifestFile("m.avro", 1, 0, partitions=tuple(summaries))


PTYPE = StructType((NestedField(1000, "p", INT, False), NestedField(1001, "s", STRING, False),
                    NestedField(1002, "d", DOUBLE, False)))


def test_uniform_partition_only_when_the_summaries_prove_one_value():
    """A manifest is placed without reading it only when every field has one value (or only nulls);
    anything the summaries leave open (two values, null beside a value, NaN unknown, an unreadable
    bound, no summaries) means reading it."""
    one = FieldSummary(False, None, to_bytes(7, INT), to_bytes(7, INT))
    text = FieldSummary(False, None, b"ab", b"ab")
    dbl = FieldSummary(False, False, to_bytes(1.5, DOUBLE), to_bytes(1.5, DOUBLE))
    nulls = FieldSummary(True, False, None, None)
    assert uniform_partition(_summarised(one, text, dbl), PTYPE) == (7, "ab", 1.5)
    assert uniform_partition(_summarised(one, text, nulls), PTYPE) == (7, "ab", None)
    assert uniform_partition(_summarised(FieldSummary(False, None, to_bytes(7, INT), to_bytes(8, INT)), text, dbl), PTYPE) is None
    assert uniform_partition(_summarised(FieldSummary(True, None, to_bytes(7, INT), to_bytes(7, INT)), text, dbl), PTYPE) is None
    assert uniform_partition(_summarised(one, text, FieldSummary(False, None, dbl.lower_bound, dbl.upper_bound)), PTYPE) is None
    assert uniform_partition(_summarised(one, text, FieldSummary(False, True, dbl.lower_bound, dbl.upper_bound)), PTYPE) is None
    assert uniform_partition(_summarised(FieldSummary(False, None, b"\x01", b"\x01"), text, dbl), PTYPE) is None
    assert uniform_partition(_summarised(FieldSummary(False, None, None, None), text, dbl), PTYPE) is None
    assert uniform_partition(_summarised(one, text), PTYPE) is None
    assert uniform_partition(ManifestFile("m.avro", 1, 0), PTYPE) is None
    assert uniform_partition(ManifestFile("m.avro", 1, 0, partitions=()), StructType(())) == ()
