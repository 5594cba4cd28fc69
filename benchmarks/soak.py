"""Soak: appends, deletes and every maintenance procedure looping on one table while a reader checks it.

One writer thread loops, in order: an append of ``--rows`` rows, a DELETE of a tenth of that append,
rewrite_data_files (bin-pack), rewrite_position_delete_files, rewrite_manifests, expire_snapshots
(everything older than now but the last 5) and remove_orphan_files (with an orphan planted each round).  After every
commit it records the row count the new snapshot must have.  A reader thread keeps reading the table at
a recorded snapshot and compares the count (snapshots expired in between are skipped).  Every
``--report`` seconds it prints the driver's resident memory, split into the main malloc heap, anonymous
mappings and mapped files (``--trace`` adds, on stderr, the Python allocations that grew most since the
last report); at the end the final row count beside the
expected one, the number of reads and mismatches, and whether every file a snapshot references exists.

Not part of the test suite (the suite runs a short concurrent version:
``tests/spark/test_concurrent_writers.py``).  Exit status 1 on any mismatch or missing file.

    python benchmarks/soak.py --minutes 30
    python benchmarks/soak.py --minutes 30 --steady 5   # a table of constant size: memory must be flat
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import tracemalloc
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import arg_parser, scratch_dir, start_spark  # noqa: E402

import pyarrow as pa  # noqa: E402

import procedures  # noqa: E402
from procedures.core.gc import reachability as R  # noqa: E402
from procedures.core.kernel.paths import normalize_path  # noqa: E402
from procedures.spark.dml import append, delete_where  # noqa: E402
from procedures.spark.read import read_table  # noqa: E402
from procedures.spark.session import catalog_for  # noqa: E402

TABLE = "soak.db.events"


def rss_mb() -> float:
    """The driver process's current resident memory."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def rss_by_kind() -> dict[str, float]:
    """Resident MiB of the driver by kind of mapping: the main malloc heap, anonymous mappings (thread
    arenas, Arrow's allocator, large mallocs) and files (shared libraries' pages as they are touched)."""
    kinds = {"heap": 0.0, "anon": 0.0, "files": 0.0}
    kind = "anon"
    with open("/proc/self/smaps") as f:
        for line in f:
            first = line.split(maxsplit=6)
            if first and "-" in first[0] and len(first) >= 5:
                name = first[5].strip() if len(first) > 5 else ""
                kind = "heap" if name == "[heap]" else ("files" if name.startswith("/") else "anon")
            elif first and first[0] == "Rss:":
                kinds[kind] += int(first[1]) / 1024
    return kinds


def python_heap_report(previous):
    """The Python allocations that grew most since ``previous`` (a tracemalloc snapshot), printed to stderr,
    with the live heap, pyarrow's pool and the number of threads and gc-tracked objects; returns the new
    snapshot.  Tells a leak in Python objects from growth outside the Python heap (native pools, the JVM
    bridge)."""
    snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    current, _ = tracemalloc.get_traced_memory()
    print(f"  python heap {current / 2**20:.1f} MiB, pyarrow pool {pa.total_allocated_bytes() / 2**20:.1f} MiB, "
          f"threads {threading.active_count()}, gc objects {len(gc.get_objects())}", file=sys.stderr, flush=True)
    if previous is not None:
        for stat in snap.compare_to(previous, "traceback")[:8]:
            frames = " <- ".join(f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno}" for f in stat.traceback[:4])
            print(f"    {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} objs  {frames}", file=sys.stderr,
                  flush=True)
    return snap


class State:
    """Expected row counts by snapshot, shared by the writer and the reader."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.expected: dict[int, int] = {}
        self.rows = 0
        self.reads = 0
        self.mismatches: list[str] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def record(self, cat, rows: int) -> None:
        sid = cat.load_table(("db", "events")).metadata.current_snapshot_id
        with self.lock:
            self.rows = rows
            if sid is not None:
                self.expected[sid] = rows


def writer(spark, cat, state: State, rows_per_append: int, window: int = 0) -> None:
    next_id = 0
    total = 0
    round_no = 0
    remaining: list[int] = []  # rows each round still has (steady mode drops a round after `window`)
    location = normalize_path(cat.load_table(("db", "events")).location).path
    try:
        while not state.stop.is_set():
            round_no += 1
            df = spark.range(next_id, next_id + rows_per_append).selectExpr("id", "cast(id % 7 AS string) AS cat")
            append(spark, TABLE, df)
            total += rows_per_append
            state.record(cat, total)
            # a tenth of the append, spread over every partition (cat is id % 7)
            delete_where(spark, TABLE, f"id >= {next_id} AND id < {next_id + rows_per_append // 10}")
            total -= rows_per_append // 10
            state.record(cat, total)
            remaining.append(rows_per_append - rows_per_append // 10)
            if window and len(remaining) > window:
                # steady mode: the round `window` rounds back goes whole, so the table stops growing
                old = round_no - window - 1
                delete_where(spark, TABLE, f"id >= {old * rows_per_append} AND id < {(old + 1) * rows_per_append}")
                total -= remaining[old]
                remaining[old] = 0
                state.record(cat, total)
            next_id += rows_per_append
            for name, kwargs in (
                ("rewrite_data_files", {"options": {"min-input-files": "2"}}),
                ("rewrite_position_delete_files", {"options": {"rewrite-all": "true"}}),
                ("rewrite_manifests", {}),
                ("expire_snapshots", {"retain_last": 5}),
            ):
                if name == "expire_snapshots":
                    # everything older than now, keeping the last 5 (the default age limit is 5 days)
                    kwargs = {**kwargs, "older_than": datetime.now(timezone.utc)}
                procedures.call(name, spark=spark, table=TABLE, **kwargs)
                state.record(cat, total)
            orphan = f"{location}/data/orphan-{round_no}.parquet"
            with open(orphan, "wb") as f:
                f.write(b"x")
            old = time.time() - 4 * 24 * 3600
            os.utime(orphan, (old, old))
            procedures.call("remove_orphan_files", spark=spark, table=TABLE)
            if os.path.exists(orphan):
                state.mismatches.append(f"round {round_no}: orphan {orphan} not removed")
    except BaseException as e:  # noqa: BLE001 -- reported by main
        state.error = e
        state.stop.set()


def reader(spark, cat, state: State) -> None:
    while not state.stop.is_set():
        with state.lock:
            known = dict(state.expected)
        live = {s.snapshot_id for s in cat.load_table(("db", "events")).metadata.snapshots}
        candidates = [sid for sid in known if sid in live]
        if not candidates:
            time.sleep(0.5)
            continue
        sid = max(candidates)
        try:
            got = read_table(spark, TABLE, snapshot_id=sid).count()
        except Exception as e:  # noqa: BLE001 -- the snapshot may expire while it is read
            if sid in {s.snapshot_id for s in cat.load_table(("db", "events")).metadata.snapshots}:
                state.mismatches.append(f"read of snapshot {sid} failed: {e}")
            continue
        state.reads += 1
        if got != known[sid]:
            state.mismatches.append(f"snapshot {sid}: read {got} rows, expected {known[sid]}")
        time.sleep(0.2)


def main() -> int:
    p = arg_parser(__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=30.0, help="how long to loop (default 30)")
    p.add_argument("--rows", type=int, default=20_000, help="rows per append (default 20,000)")
    p.add_argument("--report", type=float, default=60.0, help="seconds between memory lines (default 60)")
    p.add_argument("--steady", type=int, default=0, metavar="ROUNDS",
                   help="keep only the last ROUNDS appends (deleting older rounds whole), so the table stops "
                        "growing and the driver's memory can be judged flat (default 0: the table grows)")
    p.add_argument("--trace", action="store_true",
                   help="also print, at every report, the Python allocations that grew most (tracemalloc; slower)")
    args = p.parse_args()
    if args.trace:
        tracemalloc.start(4)
    heap = None
    warehouse = Path(args.warehouse) if args.warehouse else scratch_dir("soak-")
    spark = start_spark(warehouse, app_name="iceberg-procedures-soak", extra_conf={
        "spark.sql.catalog.soak.type": "hadoop", "spark.sql.catalog.soak.warehouse": str(warehouse / "soak")})
    cat = catalog_for(spark, "soak")
    cat.create_namespace("db")
    procedures.sql(spark, f"CREATE TABLE {TABLE} (id bigint, cat string) USING iceberg PARTITIONED BY (cat) "
                          "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    state = State()
    threads = [threading.Thread(target=writer, args=(spark, cat, state, args.rows, args.steady), daemon=True),
               threading.Thread(target=reader, args=(spark, cat, state), daemon=True)]
    start = time.monotonic()
    for t in threads:
        t.start()
    print(f"{'minutes':>8} {'driver RSS MiB':>15} {'heap/anon/files':>16} {'rows':>10} {'reads':>7} "
          f"{'mismatches':>11}", flush=True)
    deadline = start + args.minutes * 60
    next_report = start
    while time.monotonic() < deadline and not state.stop.is_set():
        if time.monotonic() >= next_report:
            kinds = "/".join(f"{v:.0f}" for v in rss_by_kind().values())
            print(f"{(time.monotonic() - start) / 60:8.1f} {rss_mb():15.1f} {kinds:>16} {state.rows:10d} "
                  f"{state.reads:7d} {len(state.mismatches):11d}", flush=True)
            if args.trace:
                heap = python_heap_report(heap)
            next_report += args.report
        time.sleep(1)
    state.stop.set()
    for t in threads:
        t.join(timeout=600)
    t = cat.load_table(("db", "events"))
    final = read_table(spark, TABLE).count()
    sm = R.read_snapshot_manifests(t.io, t.metadata)
    missing = [f for f in R.content_paths_driver(t.io, sm.distinct().values()) if not t.io.exists(f)]
    kinds = "/".join(f"{v:.0f}" for v in rss_by_kind().values())
    print(f"{(time.monotonic() - start) / 60:8.1f} {rss_mb():15.1f} {kinds:>16} {state.rows:10d} {state.reads:7d} "
          f"{len(state.mismatches):11d}")
    print(f"final rows {final}, expected {state.rows}; snapshots {len(t.metadata.snapshots)}; "
          f"referenced files missing {len(missing)}")
    for m in state.mismatches[:20]:
        print("mismatch:", m)
    if state.error is not None:
        print(f"writer failed: {type(state.error).__name__}: {state.error}")
    spark.stop()
    ok = final == state.rows and not state.mismatches and not missing and state.error is None
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
