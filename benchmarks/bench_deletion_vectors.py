"""Deletion vectors: ``procedures.spec.deletion_vector`` (pyroaring / CRoaring) beside the pure-Python
Roaring codec it replaced, on the same position sets; outputs are compared before anything is timed.

The former codec is loaded from git history (``--baseline``, default the last commit that had it), so
the script needs the repository's history; without it only our figures are printed.

Cases (``--scale`` multiplies the sizes): sparse random positions, dense every-other-row positions
(bitmap containers), long runs, and the spec's whole-file delete (one run per container).
``serialize`` is ``serialize_dv`` from a sorted list; ``read -> list`` is ``deserialize_dv``;
``read -> array`` is the int64 array the scan reader needs (the old path: ``np.asarray`` of the list).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import Figure, arg_parser, module_at, print_figures, time_call  # noqa: E402

from procedures.spec import deletion_vector as ours  # noqa: E402

#: the last commit with the pure-Python Roaring codec
BASELINE = "170fac1"


def cases(scale: int) -> dict[str, list[int]]:
    """Position sets by name, each sorted and unique."""
    rng = np.random.default_rng(7)
    rows = 10_000_000 * scale

    def random_positions(n: int) -> list[int]:
        return np.unique(rng.integers(0, rows, n)).tolist()

    runs = np.arange(1000 * scale)[:, None] * 10_000 + np.arange(9_000)[None, :]
    return {
        "sparse 1k in 10M rows": random_positions(1_000 * scale),
        "sparse 100k in 10M rows": random_positions(100_000 * scale),
        "dense 1M, every other row": list(range(0, 2_000_000 * scale, 2)),
        "runs 9M, 1000 runs of 9000": runs.ravel().tolist(),
        "whole file 10M": list(range(10_000_000 * scale)),
    }


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE, help=f"git revision of the former codec (default {BASELINE})")
    args = parser.parse_args()
    old = module_at(args.baseline, "procedures/spec/deletion_vector.py")
    figures = []
    for name, positions in cases(args.scale).items():
        blob = ours.serialize_dv(positions)
        assert ours.deserialize_dv(blob) == positions, name
        assert ours.deserialize_dv_array(blob).tolist() == positions, name
        if old is not None:
            assert old.serialize_dv(positions) == blob, f"{name}: the two codecs write different bytes"
            assert old.deserialize_dv(blob) == positions, name

        def timed(fn):
            return time_call(fn, repeat=args.repeat, warmup=args.warmup).runs

        pairs = {
            "serialize": (lambda: ours.serialize_dv(positions), old and (lambda: old.serialize_dv(positions))),
            "read -> list": (lambda: ours.deserialize_dv(blob), old and (lambda: old.deserialize_dv(blob))),
            "read -> array": (lambda: ours.deserialize_dv_array(blob),
                              old and (lambda: np.asarray(old.deserialize_dv(blob), dtype=np.int64))),
        }
        for metric, (lib, hand) in pairs.items():
            figures.append(Figure(f"{name} ({len(blob):,} B)", f"{metric} min", min(timed(lib)) * 1e3,
                                  min(timed(hand)) * 1e3 if hand else None, "ms"))
    print_figures(figures, "deletion vectors: pyroaring (ours) vs the former pure-Python codec (reference)")


if __name__ == "__main__":
    main()
