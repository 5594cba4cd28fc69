"""Which retained manifests can name a file that only expired manifests name.

expire_snapshots' candidates are the live files of the manifests that only expired snapshots
reach; each must be checked against the live entries of the retained manifests.  Reading every
retained manifest makes that check cost the whole table, though most retained manifests cannot
hold a candidate.  :func:`retained_to_read` keeps only the ones that can, skipping a retained
manifest when its manifest-list row proves it holds none of them:

* it has no live entry: its added and existing file counts are both known to be 0 (Java's scan
  planning skips such manifests on the same counts);
* it is a data manifest of the same partition spec as every candidate manifest of that spec, all
  candidate manifests are data manifests, and for some partition field its summary's range does not
  meet the candidate manifests' ranges (nor, for nulls, their null flags).  A data file has one
  partition tuple in every manifest that lists it, inside each manifest's summary, so a file in
  both would put one value inside both ranges.

Anything else is read: delete manifests (one Puffin file of deletion vectors is named by entries of
several partitions), manifests of another spec, missing or undecodable summaries, and partition
fields whose order the summaries may not share with Python's (floating point, binary, non-ASCII
strings).  Skipping a manifest that could hold a candidate would delete a live file, so every
doubt reads it.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec.conversions import from_bytes
from procedures.spec.manifest.model import FieldSummary, ManifestContent, ManifestFile
from procedures.spec.metadata import TableMetadata
from procedures.spec.types import (
    DateType, DecimalType, IcebergType, IntegerType, LongType, StringType, TimestampNanoType, TimestampType,
    TimestamptzNanoType, TimestamptzType, TimeType,
)

__all__ = ["has_live_entries", "retained_to_read"]

#: partition result types whose summary bounds order as the decoded Python values do
_ORDERED = (IntegerType, LongType, DateType, TimeType, TimestampType, TimestamptzType, TimestampNanoType,
            TimestamptzNanoType, DecimalType, StringType)


def has_live_entries(m: ManifestFile) -> bool:
    """False only when the manifest is known to hold no ADDED or EXISTING entry."""
    return m.has_added_files() or m.has_existing_files()


@dataclass(frozen=True)
class _FieldRanges:
    """The candidate manifests' values of one partition field: merged, sorted, disjoint ranges."""

    lows: tuple[Any, ...]
    highs: tuple[Any, ...]
    has_null: bool

    def meets(self, s: FieldSummary, type_: IcebergType) -> bool:
        """Whether a manifest with summary ``s`` may hold a value of these ranges."""
        if s.contains_null and self.has_null:
            return True
        if s.lower_bound is None and s.upper_bound is None:
            # no bounds: only nulls when it says so, otherwise unknown
            return not s.contains_null
        if s.lower_bound is None or s.upper_bound is None:
            return True
        lo, hi = _decode(s.lower_bound, type_), _decode(s.upper_bound, type_)
        if lo is None or hi is None:
            return True
        i = bisect_left(self.highs, lo)  # the first range ending at or after lo
        return i < len(self.lows) and self.lows[i] <= hi


def _decode(raw: bytes, type_: IcebergType) -> Any:
    """A bound's value, or None when it cannot be compared safely."""
    try:
        value = from_bytes(raw, type_)
    except (InvalidMetadataError, ValidationError, ValueError):
        return None
    if isinstance(value, str) and not value.isascii():
        return None  # Java and Python may order other characters differently
    return value


def _field_ranges(summaries: Sequence[FieldSummary], type_: IcebergType) -> _FieldRanges | None:
    """The merged ranges of one field over the candidate manifests, or None when unusable."""
    if not isinstance(type_, _ORDERED):
        return None
    spans = []
    has_null = False
    for s in summaries:
        has_null = has_null or bool(s.contains_null)
        if s.lower_bound is None and s.upper_bound is None:
            if not s.contains_null:
                return None  # neither bounds nor nulls: nothing says where its values are
            continue
        if s.lower_bound is None or s.upper_bound is None:
            return None
        lo, hi = _decode(s.lower_bound, type_), _decode(s.upper_bound, type_)
        if lo is None or hi is None or lo > hi:
            return None
        spans.append((lo, hi))
    spans.sort()
    lows: list[Any] = []
    highs: list[Any] = []
    for lo, hi in spans:
        if highs and lo <= highs[-1]:
            highs[-1] = max(highs[-1], hi)
        else:
            lows.append(lo)
            highs.append(hi)
    return _FieldRanges(tuple(lows), tuple(highs), has_null)


def _spec_ranges(md: TableMetadata, spec_id: int, manifests: Sequence[ManifestFile]
                 ) -> tuple[list[tuple[int, _FieldRanges]], tuple[IcebergType, ...]] | None:
    """Per usable partition field (by position), the candidate ranges of one spec, and the
    spec's field types; None when no field can prune."""
    spec = md.spec_by_id(spec_id)
    if spec is None or not spec.fields:
        return None
    types = tuple(f.field_type for f in spec.partition_type(md.schema()).fields)
    if any(m.partitions is None or len(m.partitions) != len(types) for m in manifests):
        return None
    out = []
    for i, t in enumerate(types):
        ranges = _field_ranges([m.partitions[i] for m in manifests], t)  # type: ignore[index]
        if ranges is not None:
            out.append((i, ranges))
    return (out, types) if out else None


def retained_to_read(md: TableMetadata, candidates: Iterable[ManifestFile],
                     retained: Iterable[ManifestFile]) -> list[ManifestFile]:
    """The manifests of ``retained`` that may hold a live entry naming a live file of
    ``candidates`` (see the module doc).  ``md`` must know every spec of both sides (the
    metadata before expiry)."""
    cands = list(candidates)
    out = [m for m in retained if has_live_entries(m)]
    if not cands or any(c.content != ManifestContent.DATA for c in cands):
        return out
    by_spec: dict[int, list[ManifestFile]] = {}
    for c in cands:
        by_spec.setdefault(c.partition_spec_id, []).append(c)
    ranges = {sid: _spec_ranges(md, sid, ms) for sid, ms in by_spec.items()}

    def may_hold(m: ManifestFile) -> bool:
        if m.content != ManifestContent.DATA:
            return True
        spec = ranges.get(m.partition_spec_id)
        if spec is None:  # another spec, or one whose summaries cannot prune
            return True
        fields, types = spec
        if m.partitions is None or len(m.partitions) != len(types):
            return True
        return all(r.meets(m.partitions[i], types[i]) for i, r in fields)

    return [m for m in out if may_hold(m)]
