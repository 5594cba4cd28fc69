"""ORC footer statistics: ``procedures.io.orc_footer.parse_file_tail`` (the protobuf runtime) beside the
pure-Python protobuf wire decoder it replaced and beside pyorc, on the same files; outputs compared first.

* ``former decoder``: ``procedures/io/orc_footer.py`` as of ``--baseline`` (loaded from git history;
  without it that column is left out), decoding the same ``FileTail`` bytes pyarrow hands out.
* ``pyorc`` (``--libs DIR`` holding ``pip install --target DIR pyorc``): ``pyorc.Reader(f)[column]
  .statistics`` (ORC's C++ reader) has no ``bytesOnDisk`` (Java's column sizes) and gives timestamps
  as datetimes (microseconds, the millisecond's nanoseconds lost), so its figures are not the same
  numbers; timed for scale only, open included on both sides.

Opening the file and reading its tail through pyarrow is common to ours and the former decoder and
is reported apart.  Files: pyarrow-written ORC with ``10 / 100 / 1000 x --scale`` columns of mixed
kinds and several stripes.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
if "--libs" in sys.argv:
    sys.path.insert(0, sys.argv[sys.argv.index("--libs") + 1])

import pyarrow as pa  # noqa: E402
import pyarrow.orc as po  # noqa: E402
from _common import Figure, arg_parser, module_at, print_figures, scratch_dir, time_call  # noqa: E402

from procedures.io.orc_footer import parse_file_tail  # noqa: E402

KINDS = ("long", "double", "string", "decimal", "date", "timestamp", "boolean")
#: the last commit with the pure-Python wire decoder
BASELINE = "170fac1"


def pyorc_statistics(path: str, columns: int) -> list[dict]:
    import pyorc  # noqa: PLC0415

    with open(path, "rb") as f:
        reader = pyorc.Reader(f)
        return [reader[i].statistics for i in range(columns + 1)]


def write_orc(path: str, columns: int, rows: int = 20_000) -> None:
    """A pyarrow ORC file of ``columns`` columns cycling through KINDS, with nulls, in several stripes."""
    base = datetime.datetime(2024, 1, 1, 0, 0, 0, 123456)
    data = {}
    for c in range(columns):
        kind = KINDS[c % len(KINDS)]
        vals = [None if (i + c) % 17 == 0 else i + c for i in range(rows)]
        if kind == "long":
            arr = pa.array(vals, pa.int64())
        elif kind == "double":
            arr = pa.array([None if v is None else v / 3 for v in vals], pa.float64())
        elif kind == "string":
            arr = pa.array([None if v is None else f"value-{v:08d}" for v in vals])
        elif kind == "decimal":
            arr = pa.array([None if v is None else decimal.Decimal(v) / 100 for v in vals], pa.decimal128(12, 2))
        elif kind == "date":
            arr = pa.array([None if v is None else v % 20000 for v in vals], pa.date32())
        elif kind == "timestamp":
            arr = pa.array([None if v is None else base + datetime.timedelta(seconds=v, microseconds=v) for v in vals],
                           pa.timestamp("us"))
        else:
            arr = pa.array([None if v is None else v % 3 == 0 for v in vals], pa.bool_())
        data[f"c{c}"] = arr
    po.write_table(pa.table(data), path, stripe_size=256 * 1024)


_FIRST_CALL = """
import sys, time
sys.path[:0] = {paths!r}
from procedures.io.orc_footer import parse_file_tail
tail = open({tail!r}, "rb").read()
start = time.perf_counter()
parse_file_tail(tail)
print(time.perf_counter() - start)
"""


def first_call_ms(tail_path: str, libs: str | None) -> float:
    """The first ``parse_file_tail`` in a fresh interpreter: the protobuf runtime's import and the
    message classes' construction, paid once per process (Spark's Python workers included)."""
    paths = [p for p in (libs, str(Path(__file__).resolve().parents[1])) if p]
    out = subprocess.run([sys.executable, "-c", _FIRST_CALL.format(paths=paths, tail=tail_path)],
                         check=True, capture_output=True, text=True).stdout
    return float(out) * 1e3


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--libs", default=None, help="folder with pyorc")
    parser.add_argument("--baseline", default=BASELINE, help=f"git revision of the former decoder (default {BASELINE})")
    args = parser.parse_args()
    old = module_at(args.baseline, "procedures/io/orc_footer.py")
    try:
        import pyorc  # noqa: F401, PLC0415
        has_pyorc = True
    except ImportError:
        has_pyorc = False
    root = scratch_dir("bench-orc-footer")
    figures = []

    def best(fn):
        return min(time_call(fn, repeat=args.repeat, warmup=args.warmup).runs) * 1e3

    for columns in (10 * args.scale, 100 * args.scale, 1000 * args.scale):
        path = f"{root}/c{columns}.orc"
        write_orc(path, columns, rows=200_000 // columns)
        with pa.OSFile(path) as f:
            orc = po.ORCFile(f)
            tail, stripes = orc.reader.serialized_file_tail(), orc.nstripes
        ours = parse_file_tail(tail)
        case = f"{columns} columns, {stripes} stripes ({len(tail):,} B tail)"

        def open_tail():
            with pa.OSFile(path) as f:
                return po.ORCFile(f).reader.serialized_file_tail()

        figures.append(Figure(case, "open + tail (both) min", best(open_tail), None, "ms"))
        if columns == 10 * args.scale:
            tail_path = f"{root}/c{columns}.tail"
            Path(tail_path).write_bytes(tail)
            figures.append(Figure(case, "first call, new process", min(first_call_ms(tail_path, args.libs)
                                                                      for _ in range(args.repeat)), None, "ms"))
        if old is not None:
            # the former module has its own (equal) dataclasses: compare field by field
            assert dataclasses.astuple(old.parse_file_tail(tail)) == dataclasses.astuple(ours), f"{case}: decoders differ"
            figures.append(Figure(case, "decode vs former min", best(lambda: parse_file_tail(tail)),
                                  best(lambda: old.parse_file_tail(tail)), "ms"))
        if has_pyorc:
            stats = pyorc_statistics(path, len(ours.types) - 1)
            assert [s["number_of_values"] for s in stats] == [s.number_of_values for s in ours.statistics]
            assert "bytes_on_disk" not in stats[1]
            figures.append(Figure(case, "open+decode vs pyorc min", best(open_tail) + best(lambda: parse_file_tail(tail)),
                                  best(lambda: pyorc_statistics(path, len(ours.types) - 1)), "ms"))
    print_figures(figures, "ORC footer statistics: ours (protobuf runtime) vs the former decoder / pyorc (reference)")


if __name__ == "__main__":
    main()
