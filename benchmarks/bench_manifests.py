"""Reading manifests: entries per second, ours beside PyIceberg's, in the same run.

Writes ``--manifests`` manifests of ``--entries`` entries each (default 1,000 x 1,000, times --scale)
for a partitioned v2 table with full column metrics, plus one manifest list, then reads every entry
back with ``procedures.spec.manifest.reader.read_manifest`` and with PyIceberg's ``fetch_manifest_entry``.
Goal (issue 2): at least PyIceberg's rate.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import Figure, arg_parser, driver_peak_rss_mb, print_figures, scratch_dir, time_call  # noqa: E402

from procedures.io.fileio import FileIO  # noqa: E402
from procedures.spec.conversions import to_bytes  # noqa: E402
from procedures.spec.manifest.manifest_list import read_manifest_list, write_manifest_list  # noqa: E402
from procedures.spec.manifest.model import DataFile, FileFormat, ManifestContent  # noqa: E402
from procedures.spec.manifest.reader import read_manifest  # noqa: E402
from procedures.spec.manifest.writer import ManifestWriter  # noqa: E402
from procedures.spec.partitioning import PartitionField, PartitionSpec  # noqa: E402
from procedures.spec.schema import Schema  # noqa: E402
from procedures.spec.transforms import parse_transform  # noqa: E402
from procedures.spec.types import DATE, LONG, STRING, NestedField  # noqa: E402

SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "data", STRING), NestedField(3, "d", DATE)))
SPEC = PartitionSpec(0, (PartitionField(3, 1000, parse_transform("day"), "d_day"),))


def build(root: Path, manifests: int, entries: int) -> str:
    """Write the manifests and a manifest list; returns the list's path."""
    io = FileIO()
    written = []
    for m in range(manifests):
        path = f"{root}/m{m}.avro"
        w = ManifestWriter(io, path, SPEC, SCHEMA, 2, ManifestContent.DATA, snapshot_id=1)
        for i in range(entries):
            n = m * entries + i
            w.add(DataFile(
                f"{root}/data/d_day={n % 365}/file-{n}.parquet", FileFormat.PARQUET, (n % 365,), 1000 + i, 4096 + i,
                column_sizes={1: 800, 2: 1200, 3: 300}, value_counts={1: 1000, 2: 1000, 3: 1000},
                null_value_counts={1: 0, 2: 3, 3: 0},
                lower_bounds={1: to_bytes(n, LONG), 2: b"aaaa", 3: to_bytes(n % 365, DATE)},
                upper_bounds={1: to_bytes(n + 999, LONG), 2: b"zzzz", 3: to_bytes(n % 365, DATE)},
                split_offsets=(4,), sort_order_id=0, spec_id=0,
            ))
        written.append(w.close())
    list_path = f"{root}/snap-1.avro"
    write_manifest_list(io, list_path, 2, 1, None, 1, None, written)
    return list_path


def read_ours(list_path: str) -> int:
    """Entries read by our streaming reader."""
    io = FileIO()
    n = 0
    for m in read_manifest_list(io, list_path):
        for _ in read_manifest(io, m, specs={0: SPEC}):
            n += 1
    return n


def read_pyiceberg(list_path: str) -> int:
    """Entries read by PyIceberg 0.12."""
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import read_manifest_list as py_read_list

    io = PyArrowFileIO()
    n = 0
    for m in py_read_list(io.new_input(list_path)):
        n += len(m.fetch_manifest_entry(io, discard_deleted=True))
    return n


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--manifests", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=1000)
    args = parser.parse_args()
    manifests, entries = args.manifests * args.scale, args.entries
    root = Path(args.warehouse) if args.warehouse else scratch_dir("bench-manifests-")
    root.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    list_path = build(root, manifests, entries)
    print(f"wrote {manifests} manifests x {entries} entries in {time.perf_counter() - start:.1f}s under {root}")
    total = manifests * entries
    ours = time_call(lambda: read_ours(list_path), name="ours", repeat=args.repeat, warmup=args.warmup)
    assert ours.result == total, ours.result
    ours_rss = driver_peak_rss_mb()
    ref = time_call(lambda: read_pyiceberg(list_path), name="pyiceberg", repeat=args.repeat, warmup=args.warmup)
    assert ref.result == total, ref.result
    case = f"{manifests}x{entries} manifest entries"
    print_figures([
        Figure(case, "entries/s (best)", total / ours.min, total / ref.min, "entries/s"),
        Figure(case, "wall min", ours.min, ref.min),
        Figure(case, "wall median", ours.median, ref.median),
        Figure(case, "driver peak RSS after ours", ours_rss, None, "MiB"),
    ], title="Manifest reading: ours vs PyIceberg 0.12 (reference); for entries/s a ratio above 1 is better")


if __name__ == "__main__":
    main()
