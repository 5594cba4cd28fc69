"""Equality-delete matching: the scan reader's per-batch match of data rows against one equality
delete file's keys (``procedures.io.parquet_reader._EqualityDeletes``) beside the same class at
``--baseline`` (default the commit before multi-column keys were numbered by binary search), on the
same inputs; each case's masks are compared before anything is timed.

Inputs (``--scale`` multiplies them): ``--rows`` data rows (default 5,000,000) in batches of the
reader's batch size, and a delete file holding every 20th row's key (250,000 keys at the default), a
few of them with nulls.  Cases: two integer-like columns (``id`` long, ``p`` int), three (adds a
date), a string and an int, and one string column (Arrow's ``is_in`` on both sides: the reference).
No Spark: the script runs the matching alone, in this process.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import Figure, arg_parser, module_at, print_figures, time_call, timing_figures  # noqa: E402

from procedures.io import parquet_reader as ours  # noqa: E402

#: the last commit whose multi-column keys hashed every column's values and re-sorted the row keys per batch
BASELINE = "a431f9a"


def columns(rows: int) -> dict[str, pa.Array]:
    """The data's key columns: unique ids, 16 partitions, 1,000 dates, 1M-distinct strings, some nulls."""
    ids = np.arange(rows, dtype=np.int64)
    p = pa.array((ids * 16 // rows).astype(np.int32), mask=ids % 1001 == 0)
    days = pa.array((ids % 1000).astype(np.int32)).cast(pa.date32())
    text = pa.array([f"row-{i * 7919 % 1_000_003:07d}" for i in range(rows)])
    return {"id": pa.array(ids), "p": p, "d": days, "s": text}


def cases(data: dict[str, pa.Array]) -> dict[str, list[str]]:
    """Key columns by case name."""
    return {"id, p (long, int)": ["id", "p"], "id, p, d (long, int, date)": ["id", "p", "d"],
            "s, p (string, int)": ["s", "p"], "s (one string)": ["s"]}


def matcher(module: object, data: dict[str, pa.Array], names: list[str]) -> object:
    """A fresh delete set of the module (nothing cached) holding every 20th row's key."""
    every = np.arange(0, len(data["id"]), 20)
    arrays = [data[n].take(pa.array(every)) for n in names]
    return module._EqualityDeletes(tuple(range(len(names))), arrays)


def run_all(module: object, data: dict[str, pa.Array], names: list[str], batch: int) -> np.ndarray:
    """The masks of every batch, concatenated (the first call builds what the delete set caches)."""
    eq = matcher(module, data, names)
    rows = len(data["id"])
    out = [eq.matches([data[n].slice(o, batch) for n in names], min(batch, rows - o)) for o in range(0, rows, batch)]
    return np.concatenate(out)


def main(argv: list[str] | None = None) -> list[Figure]:
    """Compare each case's masks, then time ours beside the baseline; print and return the figures."""
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000, help="data rows (default 5,000,000)")
    parser.add_argument("--baseline", default=BASELINE, help=f"git revision of the reference (default {BASELINE})")
    args = parser.parse_args(argv)
    rows = args.rows * args.scale
    old = module_at(args.baseline, "procedures/io/parquet_reader.py")
    if old is None:
        raise SystemExit("the baseline needs this repository's git history")
    data = columns(rows)
    batch = ours.DEFAULT_BATCH_SIZE
    figures: list[Figure] = []
    for case, names in cases(data).items():
        mine, theirs = run_all(ours, data, names, batch), run_all(old, data, names, batch)
        if not np.array_equal(mine, theirs):
            raise AssertionError(f"{case}: the masks differ ({int(mine.sum())} rows against {int(theirs.sum())})")
        t_ours = time_call(lambda: run_all(ours, data, names, batch), name=case, repeat=args.repeat, warmup=args.warmup)
        t_ref = time_call(lambda: run_all(old, data, names, batch), name=case, repeat=args.repeat, warmup=args.warmup)
        figures += timing_figures(f"{case}: {rows:,} rows, {int(mine.sum()):,} deleted", t_ours, t_ref)
    print_figures(figures, f"equality-delete matching, ours beside {args.baseline}")
    return figures


if __name__ == "__main__":
    main()
