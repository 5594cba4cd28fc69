"""The metrics evaluators against the rows they describe.

Random files of a few rows get the metrics a writer would give them, then lose some (missing counts,
missing or NaN bounds), get truncated string bounds or bounds written before a type promotion.  For
random filters, every answer must agree with the rows themselves:

* inclusive (compiled comparison functions and the visitor alike): False only when no row matches;
* strict: True only when every row matches;
* manifest summaries built from the same rows: False only when no row matches.

Rows are judged by :func:`matches` below, written from the spec's semantics and not from the
evaluators: a null or NaN value satisfies no comparison, ``IN`` or ``starts_with``, and satisfies
their negations; a NOT applies to the predicates below it (``NOT d >= 0.5`` is ``d < 0.5``).
"""

from __future__ import annotations

import math
import random

import pytest

from procedures.spec.conversions import to_bytes, truncate_lower_bound, truncate_upper_bound
from procedures.spec.evaluators import InclusiveMetricsEvaluator, ManifestEvaluator, StrictMetricsEvaluator
from procedures.spec.expressions import Operation, and_, not_, or_, predicate
from procedures.spec.manifest.model import DataFile, FieldSummary, FileFormat
from procedures.spec.schema import Schema
from procedures.spec.types import DATE, DOUBLE, INT, LONG, STRING, TIMESTAMP, NestedField, StructType

DAY = 86_400_000_000
FIELDS = (
    NestedField(1, "id", LONG),
    NestedField(2, "d", DOUBLE),
    NestedField(3, "s", STRING),
    NestedField(4, "ts", TIMESTAMP),
)
SCHEMA = Schema(list(FIELDS))
NAMES = {f.name: f for f in FIELDS}

#: the values rows draw from (small sets, so literals often meet values and bounds)
POOLS = {
    "id": [-3, 0, 1, 2, 5, 7, 2**40],
    "d": [-1.5, 0.0, 0.5, 1.0, 2.5, 100.0],
    "s": ["", "a", "ab", "abc", "abcd", "abd", "b", "zz", "\u00e9t\u00e9"],
    # midnights (their bounds may be written as dates) and a few instants between them
    "ts": [17_000 * DAY, 17_001 * DAY, 17_001 * DAY + 1, 17_003 * DAY, 17_003 * DAY + 5 * 3_600_000_000],
}
PREFIXES = ["", "a", "ab", "abc", "abcd", "abce", "b", "\u00e9", "zz", "zzz"]
COMPARISONS = (Operation.LT, Operation.LT_EQ, Operation.GT, Operation.GT_EQ, Operation.EQ, Operation.NOT_EQ)


def matches(pred, row: dict) -> bool:
    """Whether ``row`` satisfies a generated filter (see the module doc)."""
    kind = pred[0]
    if kind == "and":
        return matches(pred[1], row) and matches(pred[2], row)
    if kind == "or":
        return matches(pred[1], row) or matches(pred[2], row)
    if kind == "not":
        return matches(negation(pred[1]), row)
    op, name, arg = pred
    v = row[name]
    missing = v is None or (isinstance(v, float) and math.isnan(v))
    if op is Operation.IS_NULL:
        return v is None
    if op is Operation.NOT_NULL:
        return v is not None
    if op is Operation.IS_NAN:
        return v is not None and math.isnan(v)
    if op is Operation.NOT_NAN:
        return v is None or not math.isnan(v)
    negated = {Operation.NOT_EQ: Operation.EQ, Operation.NOT_IN: Operation.IN,
               Operation.NOT_STARTS_WITH: Operation.STARTS_WITH}
    if op in negated:
        return not matches((negated[op], name, arg), row)
    if missing:
        return False
    if op is Operation.IN:
        return v in arg
    if op is Operation.STARTS_WITH:
        return v.startswith(arg)
    if name == "s":  # strings order by their UTF-8 bytes
        v, arg = v.encode(), arg.encode()
    return {Operation.LT: v < arg, Operation.LT_EQ: v <= arg, Operation.GT: v > arg, Operation.GT_EQ: v >= arg,
            Operation.EQ: v == arg}[op]


def negation(pred):
    """``NOT pred`` with the NOT pushed onto the predicates, as Iceberg reads a NOT: ``NOT d >= 0.5`` is
    ``d < 0.5``, which a NaN does not satisfy."""
    kind = pred[0]
    if kind in ("and", "or"):
        return ("or" if kind == "and" else "and"), negation(pred[1]), negation(pred[2])
    if kind == "not":
        return pred[1]
    return pred[0].negate(), pred[1], pred[2]


def expression(pred):
    kind = pred[0]
    if kind in ("and", "or"):
        return (and_ if kind == "and" else or_)(expression(pred[1]), expression(pred[2]))
    if kind == "not":
        return not_(expression(pred[1]))
    op, name, arg = pred
    if op.is_unary:
        return predicate(op, name)
    if op.is_set:
        return predicate(op, name, *sorted(arg, key=repr))
    return predicate(op, name, arg)


def random_leaf(rnd: random.Random):
    name = rnd.choice(list(POOLS))
    ops = [Operation.IS_NULL, Operation.NOT_NULL, Operation.IN, Operation.NOT_IN, *COMPARISONS]
    if name == "d":
        ops += [Operation.IS_NAN, Operation.NOT_NAN]
    if name == "s":
        ops += [Operation.STARTS_WITH, Operation.NOT_STARTS_WITH] * 2
    op = rnd.choice(ops)
    if op.is_unary:
        return op, name, None
    if op in (Operation.STARTS_WITH, Operation.NOT_STARTS_WITH):
        return op, name, rnd.choice(PREFIXES)
    pool = POOLS[name] + (["abcz", "abcdz", "ac"] if name == "s" else [3, 6] if name == "id" else [])
    if op.is_set:
        return op, name, frozenset(rnd.sample(pool, rnd.randint(1, 3)))
    return op, name, rnd.choice(pool)


def random_filter(rnd: random.Random, depth: int = 0):
    roll = rnd.random()
    if depth < 2 and roll < 0.15:
        return "and", random_filter(rnd, depth + 1), random_filter(rnd, depth + 1)
    if depth < 2 and roll < 0.3:
        return "or", random_filter(rnd, depth + 1), random_filter(rnd, depth + 1)
    if depth < 2 and roll < 0.35:
        return "not", random_filter(rnd, depth + 1)
    return random_leaf(rnd)


def random_rows(rnd: random.Random) -> list[dict]:
    shape = {name: rnd.choice(["values", "some_nulls", "nulls", "some_nans", "nans", "nans_and_nulls"])
             for name in POOLS}
    rows = []
    for _ in range(rnd.randint(1, 6)):
        row = {}
        for name, pool in POOLS.items():
            kind = shape[name] if name == "d" else shape[name].replace("nans", "nulls")
            choices = [rnd.choice(pool)] if kind in ("values", "some_nulls", "some_nans") else []
            if "nulls" in kind:
                choices.append(None)
            if "nans" in kind and name == "d":
                choices.append(float("nan"))
            row[name] = rnd.choice(choices)
        rows.append(row)
    return rows


def metrics_of(rows: list[dict], rnd: random.Random) -> tuple[DataFile, bool]:
    """The file's metrics as a writer gives them, then damaged; and whether NaN counts are missing
    while NaN values exist (strict evaluation trusts a missing NaN count as none, as Java)."""
    counts: dict[str, dict[int, int]] = {"values": {}, "nulls": {}, "nans": {}}
    lower: dict[int, bytes] = {}
    upper: dict[int, bytes] = {}
    for name, field in NAMES.items():
        fid, values = field.field_id, [r[name] for r in rows]
        counts["values"][fid] = len(values)
        counts["nulls"][fid] = sum(v is None for v in values)
        if name == "d":
            counts["nans"][fid] = sum(v is not None and math.isnan(v) for v in values)
        ordered = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
        if not ordered:
            if name == "d" and counts["nans"][fid] and rnd.random() < 0.3:
                lower[fid] = upper[fid] = to_bytes(float("nan"), DOUBLE)  # an old writer's NaN bounds
            continue
        key = (lambda v: v.encode()) if name == "s" else None
        lo, hi = min(ordered, key=key), max(ordered, key=key)
        ftype = field.field_type
        if name == "s" and rnd.random() < 0.5:
            width = rnd.randint(1, 3)
            lo, hi = truncate_lower_bound(lo, ftype, width), truncate_upper_bound(hi, ftype, width)
        if name == "id" and all(-2**31 <= v < 2**31 for v in (lo, hi)) and rnd.random() < 0.5:
            ftype = INT  # written before the column was promoted to long
        if name == "ts" and lo % DAY == 0 and hi % DAY == 0 and rnd.random() < 0.7:
            ftype, lo, hi = DATE, lo // DAY, hi // DAY  # written while the column was a date
        if name == "d" and counts["nans"][fid] and rnd.random() < 0.4:
            # a writer that did not leave NaN out, ordering it above or below every number
            lo, hi = (lo, float("nan")) if rnd.random() < 0.5 else (float("nan"), hi)
        lower[fid] = to_bytes(lo, ftype)
        if hi is not None:
            upper[fid] = to_bytes(hi, ftype)
    maps = {"value_counts": counts["values"], "null_value_counts": counts["nulls"],
            "nan_value_counts": counts["nans"], "lower_bounds": lower, "upper_bounds": upper}
    for key in list(maps):
        if rnd.random() < 0.15:
            maps[key] = None
        elif rnd.random() < 0.15 and maps[key]:
            maps[key] = {k: v for k, v in maps[key].items() if rnd.random() < 0.5}
    nans_unknown = any(r["d"] is not None and math.isnan(r["d"]) for r in rows) and (
        2 not in (maps["nan_value_counts"] or {}))
    return DataFile(file_path="f.parquet", file_format=FileFormat.PARQUET, partition=(), record_count=len(rows),
                    file_size_in_bytes=1, **maps), nans_unknown


def summaries_of(rows: list[dict], rnd: random.Random) -> list[FieldSummary]:
    """The partition field summaries of a manifest whose files hold these values (identity fields);
    an old writer may have let a NaN be the upper bound."""
    out = []
    for name, field in NAMES.items():
        values = [r[name] for r in rows]
        nan = any(v is not None and isinstance(v, float) and math.isnan(v) for v in values)
        ordered = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
        key = (lambda v: v.encode()) if name == "s" else None
        lo = to_bytes(min(ordered, key=key), field.field_type) if ordered else None
        hi = to_bytes(max(ordered, key=key), field.field_type) if ordered else None
        if nan and rnd.random() < 0.3:
            hi = to_bytes(float("nan"), DOUBLE)
        out.append(FieldSummary(None in values, nan if name == "d" else None, lo, hi))
    return out


@pytest.mark.parametrize("seed", range(8))
def test_answers_agree_with_the_rows(seed):
    rnd = random.Random(seed)
    files = []
    for _ in range(60):
        rows = random_rows(rnd)
        files.append((rows, *metrics_of(rows, rnd), summaries_of(rows, rnd)))
    for _ in range(60):
        flt = random_filter(rnd)
        expr = expression(flt)
        inclusive = InclusiveMetricsEvaluator(SCHEMA, expr)
        strict = StrictMetricsEvaluator(SCHEMA, expr)
        manifest = ManifestEvaluator(StructType(FIELDS), expr)
        for rows, data_file, nans_unknown, stats in files:
            hits = [matches(flt, r) for r in rows]
            where = f"{expr} on {rows} with {data_file}"
            compiled = inclusive.eval(data_file)
            assert compiled is inclusive._visited(data_file, inclusive.expr), where
            if any(hits):
                assert compiled, where
                assert manifest.eval(stats), where
            if strict.eval(data_file) and not nans_unknown:
                assert all(hits), where
