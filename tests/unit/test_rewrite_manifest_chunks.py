"""The chunk cut an engine uses for rewrite_manifests (assign_chunks, chunk_of_position) must be the
cut the driver makes on the sorted entries, or the two paths would write different manifests; and a
manifest is placed from its partition summaries only when they prove a single partition."""

from __future__ import annotations

import math
import random

import pytest

from procedures.core.manifest_rewrite.clustering import (
    _chunks, assign_chunks, chunk_of_position, cut_chunk, order_key, parts_per_chunk, plan_write_tasks, uniform_partition,
)
from procedures.spec.conversions import to_bytes
from procedures.spec.manifest.model import FieldSummary, ManifestFile
from procedures.spec.types import DOUBLE, INT, STRING, NestedField, StructType


def _check_cut(chunks: list[int], counts: list[int], n: int) -> None:
    """Check a cut of the sorted keys (``chunks[i]`` for the key holding ``counts[i]`` entries)
    against the rule itself, not against a second implementation of it: chunks are consecutive from
    0, at most ``n``; with ``per = ceil(entries / n)``, every chunk but the last is closed at the
    first key boundary where it holds ``per`` entries or more -- so it holds at least ``per`` -- and
    no chunk, the last included, holds ``per`` before its last key (it would have closed there)."""
    if not counts:
        assert chunks == []
        return
    assert chunks[0] == 0 and all(b - a in (0, 1) for a, b in zip(chunks, chunks[1:]))
    assert chunks[-1] < max(n, 1)
    per = math.ceil(sum(counts) / n) if n > 1 else sum(counts)
    sizes: dict[int, list[int]] = {}
    for chunk, count in zip(chunks, counts):
        sizes.setdefault(chunk, []).append(count)
    for chunk, held in sizes.items():
        assert sum(held) - held[-1] < per, (chunk, held, per)
        if chunk < chunks[-1]:
            assert sum(held) >= per, (chunk, held, per)


def test_the_cut_checker_refuses_other_cuts():
    """The checker above is the oracle of the tests below: it must refuse near misses."""
    counts = [3, 3, 3, 3]  # per = 6 for n = 2
    _check_cut([0, 0, 1, 1], counts, 2)
    for wrong in ([0, 1, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0], [0, 0, 2, 2], [1, 1, 1, 1], [0, 1, 2, 3]):
        with pytest.raises(AssertionError):
            _check_cut(wrong, counts, 2)
    _check_cut([0, 0, 1, 1], [2, 2, 2, 2], 3)  # per = 3: a chunk closes once it holds 4, two are enough
    for wrong in ([0, 1, 2, 2], [0, 0, 0, 1]):  # closed below per; not closed at the first boundary past it
        with pytest.raises(AssertionError):
            _check_cut(wrong, [2, 2, 2, 2], 3)


@pytest.mark.parametrize("seed", range(40))
def test_assign_chunks_cuts_where_the_driver_cuts(seed):
    rng = random.Random(seed)
    keys = [(rng.choice([None, rng.randint(-5, 50)]), rng.choice(["a", "b", "c"])) for _ in range(rng.randint(1, 40))]
    counts = {k: rng.randint(1, 30) for k in keys}
    n = rng.randint(1, 12)
    sort_key = lambda k: tuple(order_key(v) for v in k)  # noqa: E731
    placed = assign_chunks(counts, n, sort_key)
    ordered = sorted(counts, key=sort_key)
    _check_cut([placed[k][0] for k in ordered], [counts[k] for k in ordered], n)
    # and the driver's own cut of the expanded, sorted entries is the same
    expanded = [k for k in ordered for _ in range(counts[k])]
    driver = _chunks(expanded, expanded, n)
    assert [placed[k][0] for k in expanded] == [c for c, part in enumerate(driver) for _ in part]
    ranks = [placed[k][1] for k in ordered]
    assert ranks == list(range(len(counts)))
    assert max(c for c, _ in placed.values()) < max(n, 1)


@pytest.mark.parametrize("total,n", [(1, 3), (10, 1), (10, 3), (10, 10), (97, 8), (1000, 7)])
def test_chunk_of_position_cuts_where_the_driver_cuts(total, n):
    placed = [chunk_of_position(i, total, n) for i in range(total)]
    _check_cut(placed, [1] * total, n)
    assert placed == [c for c, part in enumerate(_chunks(list(range(total)), None, n)) for _ in part]


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


def _random_chunk(rng: random.Random) -> tuple[list[tuple], list[int], dict[int, int], list[tuple]]:
    """A chunk's slices ``(rank, manifest, start, stop, ref)`` with their live counts, its loose
    entries per rank, and the loose entries' keys ``(rank, manifest, position)``."""
    items, counts, loose_keys = [], [], []
    for index in rng.sample(range(200), rng.randint(0, 30)):
        rank, n = rng.randint(0, 8), rng.randint(0, 40)
        if rng.random() < 0.3:  # read from a mixed manifest: its entries arrive one by one
            loose_keys += [(rng.randint(0, 8), index, p) for p in range(n)]
        else:
            start = rng.choice([0, rng.randint(0, 5)])
            items.append((rank, index, start, rng.choice([None, start + n]), f"ref{index}"))
            counts.append(n)
    loose: dict[int, int] = {}
    for rank, _, _ in loose_keys:
        loose[rank] = loose.get(rank, 0) + 1
    return items, counts, loose, loose_keys


def _keys_of(item: tuple, n: int) -> list[tuple]:
    rank, index, start, stop, _ = item
    return [(rank, index, p) for p in range(start, start + n if stop is None else stop)]


@pytest.mark.parametrize("seed", range(60))
def test_cut_chunk_parts_joined_in_order_are_the_chunk_sorted(seed):
    """Each part sorted, then the parts in order, must be the whole chunk sorted: a slice is cut at
    positions, never reordered; an entry arriving alone goes to the part whose key range holds it;
    and the parts stay near equal in entries."""
    rng = random.Random(seed)
    items, counts, loose, loose_keys = _random_chunk(rng)
    parts = rng.randint(1, 7)
    cut = cut_chunk(items, counts, loose, parts)
    assert len(cut.items) == len(cut.cuts) + 1 <= max(1, parts)
    assert list(cut.cuts) == sorted(cut.cuts)
    whole = sorted([k for item, n in zip(items, counts) for k in _keys_of(item, n)] + loose_keys)
    by_part: list[list[tuple]] = [[] for _ in cut.items]
    for p, part_items in enumerate(cut.items):
        for rank, index, start, stop, ref in part_items:
            assert ref == f"ref{index}"
            original = next(n for item, n in zip(items, counts) if item[1] == index)
            first = next(item for item in items if item[1] == index)
            end = (first[2] + original) if stop is None else stop
            assert stop is None or stop <= (first[2] + original if first[3] is None else first[3])
            by_part[p] += [(rank, index, q) for q in range(start, end)]
    for key in loose_keys:
        by_part[cut.part_of(key)].append(key)
    assert [k for part in by_part for k in sorted(part)] == whole
    total = sum(counts) + len(loose_keys)
    if parts > 1 and not loose_keys and total:
        per = math.ceil(total / parts)
        assert all(len(part) <= per for part in by_part[:-1])


def test_parts_per_chunk_shares_the_slots_only_when_worth_it():
    assert parts_per_chunk([100_000], 2) == [2]
    assert parts_per_chunk([100_000], 8) == [5]  # no part under 20,000 entries
    assert parts_per_chunk([30_000], 2) == [1]
    assert parts_per_chunk([90_000, 10_000], 4) == [4, 1]
    assert parts_per_chunk([50_000] * 8, 2) == [1] * 8  # the chunks alone keep the slots busy
    assert parts_per_chunk([0], 4) == [1]


def test_plan_write_tasks_numbers_parts_and_routes_loose_entries():
    groups = {0: [(0, 0, 0, None, "a"), (1, 1, 0, None, "b")], 1: [(2, 2, 0, None, "c")]}
    counts = {0: [4, 4], 1: [3]}
    items, plan = plan_write_tasks(groups, counts, {}, 2, 2, min_entries=1)
    assert not plan.split and plan.tasks == {0: (0, 0), 1: (1, 0)} and [t for t, _ in items] == [0, 1]
    items, plan = plan_write_tasks(groups, counts, {1: {2: 5}}, 2, 8, min_entries=2)
    assert plan.split
    # chunk 0 (8 entries) in 4 parts; chunk 1's 5 loose entries of rank 2 come first and are not cut,
    # its slice (3 entries) fills two more parts: 3 parts after chunk 0's
    assert [plan.tasks[t][0] for t in sorted(plan.tasks)] == [0] * 4 + [1] * 3
    assert [plan.tasks[t] for t, _ in items][:4] == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert items[0][1] == [(0, 0, 0, 2, "a")] and items[1][1] == [(0, 0, 2, None, "a")]
    first, cuts = plan.routes[1]
    assert first == 4 and plan.tasks[first + len(cuts)] == (1, len(cuts))
