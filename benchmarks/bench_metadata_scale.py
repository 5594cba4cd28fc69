"""Metadata at scale: expire_snapshots, remove_orphan_files, rewrite_manifests and filtered scan planning
on a table of ``--files`` data files (default 100,000; issue 18 asks for 1,000,000), ours beside Iceberg
Java 1.10.2 in the same run, with the driver's peak memory for each.

The table is built fast by committing manifests directly through our core (no Spark writes): every
snapshot appends ``--manifests-per-snapshot`` manifests of ``--files-per-manifest`` files (so 1M files
are 10k manifests over 1,000 snapshots with the defaults), each manifest one partition of ``p``.  The
data files are empty files on disk (metadata work never opens them).  Then one snapshot deletes the
files of the first tenth of the partitions, and ``--orphans`` unreferenced files are dropped into the
data folder.  Every file's modification time is set ten days back so remove_orphan_files' default
``older_than`` (three days) applies to all of them.

Before every timed run the table is put back exactly (the metadata folder from a saved copy, deleted
data and orphan files recreated), so both sides see the same state; their outputs are compared before
any figure is printed.  Memory: peak RSS of the Python driver (``VmHWM``, reset before each run) and of
Spark's driver JVM.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import (  # noqa: E402
    BulkAppend, Figure, Timing, arg_parser, jvm_peak_rss_mb, print_figures, reset_peak_rss, scratch_dir, start_spark,
    time_call, time_pair, timing_figures,
)

import procedures  # noqa: E402
from procedures.core.kernel.operations import DeleteFiles  # noqa: E402
from procedures.core.kernel.paths import local_path  # noqa: E402
from procedures.core.kernel.transaction import commit  # noqa: E402
from procedures.framework.context import open_catalog  # noqa: E402
from procedures.spark.scan_planning import iter_scan_tasks  # noqa: E402
from procedures.spec.conversions import to_bytes  # noqa: E402
from procedures.spec.manifest.model import DataFile, FileFormat  # noqa: E402
from procedures.spec.types import INT, LONG  # noqa: E402

TABLE = "db.meta"
TEN_DAYS_S = 10 * 24 * 3600
CALLS = {
    "expire_snapshots": "CALL {cat}.system.expire_snapshots(table => '{table}', "
                        "older_than => TIMESTAMP '2100-01-01 00:00:00', retain_last => 1)",
    "remove_orphan_files": "CALL {cat}.system.remove_orphan_files(table => '{table}')",
    "rewrite_manifests": "CALL {cat}.system.rewrite_manifests(table => '{table}')",
}


class JavaFailed:
    """The reference side's failure (its first error line), kept as the run's result."""

    def __init__(self, message: str) -> None:
        self.message = message

    def __repr__(self) -> str:
        return f"JavaFailed({self.message!r})"


def vm_hwm_mb(pid: int | None = None, key: str = "VmHWM") -> float:
    """Peak RSS (``VmHWM``; ``key="VmRSS"`` for the current RSS) of ``pid`` (default this process) in
    MiB; reset the peak with ``reset_peak_rss``."""
    for line in Path(f"/proc/{pid or os.getpid()}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key} in /proc status")


def driver_figures(label: str, memory: dict[str, float], *, java: bool) -> list[Figure]:
    """Our Python driver's peak RSS, its growth over what the process held when the call started (the
    procedure's own share: the process's baseline differs between runs and sizes), and the JVM's peak."""
    return [
        Figure(label, "python driver peak RSS", memory["ours py"], None, "MiB"),
        Figure(label, "python driver peak above start", memory["ours py"] - memory["ours py before"], None, "MiB"),
        Figure(label, "JVM driver peak RSS", memory["ours jvm"], memory["java jvm"] if java else None, "MiB"),
    ]


#: the child process that puts the saved metadata back and recreates the deletable files, dated old
RESTORE = """
import os, shutil, sys
saved, metadata, deletable, when = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
shutil.rmtree(metadata)
shutil.copytree(saved, metadata)
with open(deletable) as lines:
    for line in lines:
        path = line.rstrip("\\n")
        if path and not os.path.exists(path):
            open(path, "wb").close()
            os.utime(path, (when, when))
"""


def touch_old(path: str, when: float) -> None:
    """Create an empty file dated ``when``."""
    with open(path, "wb"):
        pass
    os.utime(path, (when, when))


def build(spark, ours, args) -> tuple[Path, list[str], int]:
    """The table; returns its folder, the data files a run may delete (deleted-snapshot files, orphans)
    and the first partition the delete kept."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.db")
    spark.sql(f"DROP TABLE IF EXISTS jcat.{args.table} PURGE")
    spark.sql(f"CREATE TABLE jcat.{args.table} (id bigint, p int) USING iceberg PARTITIONED BY (p) "
              "TBLPROPERTIES ('format-version'='2')")
    t = ours.load_table(args.table)
    folder = Path(t.location.replace("file:", ""))
    old = time.time() - TEN_DAYS_S
    per_manifest, per_snapshot = args.files_per_manifest, args.manifests_per_snapshot
    snapshots = max(1, args.files // (per_manifest * per_snapshot))
    partitions = min(1000, snapshots * per_snapshot)
    n = 0
    started = time.perf_counter()
    for s in range(snapshots):
        groups = []
        for j in range(per_snapshot):
            p = (s * per_snapshot + j) % partitions
            pdir = folder / "data" / f"p={p}"
            pdir.mkdir(parents=True, exist_ok=True)
            group = []
            for _ in range(per_manifest):
                path = f"{pdir}/f-{n}.parquet"
                touch_old(path, old)
                low, high = n * 100, n * 100 + 99
                group.append(DataFile(
                    path, FileFormat.PARQUET, (p,), 100, 1024,
                    column_sizes={1: 400, 2: 100}, value_counts={1: 100, 2: 100}, null_value_counts={1: 0, 2: 0},
                    lower_bounds={1: to_bytes(low, LONG), 2: to_bytes(p, INT)},
                    upper_bounds={1: to_bytes(high, LONG), 2: to_bytes(p, INT)},
                ))
                n += 1
            groups.append(group)
        t = commit(t, [BulkAppend(groups)])
        if (s + 1) % max(1, snapshots // 10) == 0:
            print(f"  built {s + 1}/{snapshots} snapshots, {n:,} files ({time.perf_counter() - started:.0f} s)", flush=True)
    cut = max(1, partitions // 10)
    doomed = [f"{folder}/data/p={p}/f-{i}.parquet" for i in range(n)
              for p in [((i // per_manifest) % partitions)] if p < cut]
    t = commit(t, [DeleteFiles(row_filter=f"p < {cut}")])
    orphans = []
    for k in range(args.orphans):
        path = f"{folder}/data/p={k % partitions}/orphan-{k}.parquet"
        touch_old(path, old)
        orphans.append(path)
    for root, _, names in os.walk(folder):
        for name in names:
            os.utime(os.path.join(root, name), (old, old))
    print(f"  table: {n:,} data files, {snapshots * per_snapshot:,} manifests, {snapshots + 1} snapshots, "
          f"{len(doomed):,} deleted by the last snapshot, {len(orphans):,} orphans "
          f"(built in {time.perf_counter() - started:.0f} s)", flush=True)
    spark.sql(f"REFRESH TABLE jcat.{args.table}")
    return folder, doomed + orphans, cut


def main(argv: Sequence[str] | None = None, spark: Any = None) -> list[Figure]:
    """Build (or reuse) the table, compare each case's outputs, time ours and Java; print and return
    the figures.  With ``spark`` given (a session with Iceberg Java's ``jcat`` hadoop catalog, as the
    test fixture has) the table goes into ``jcat``'s warehouse, its saved state into a scratch folder,
    and the session is left running."""
    parser = arg_parser(__doc__.splitlines()[0])
    parser.set_defaults(repeat=1, warmup=0)
    parser.add_argument("--files", type=int, default=100_000, help="data files in the table (default 100,000)")
    parser.add_argument("--files-per-manifest", type=int, default=100)
    parser.add_argument("--manifests-per-snapshot", type=int, default=10)
    parser.add_argument("--orphans", type=int, default=1_000)
    parser.add_argument("--cases", default="plan,expire_snapshots,remove_orphan_files,rewrite_manifests")
    parser.add_argument("--java-cases", default=None,
                        help="cases Iceberg Java also runs (default: every case); the others time ours alone "
                             "(at 1M files Java's procedures can fail or spend minutes in garbage collection)")
    parser.add_argument("--master", default="local[2]",
                        help="Spark master (default local[2], where the executors live in the driver's JVM and its "
                             "peak counts their work; a spark:// standalone master gives the driver JVM alone)")
    parser.add_argument("--table", default=TABLE, help=f"namespace.table in the warehouse (default {TABLE})")
    parser.add_argument("--reuse", action="store_true",
                        help="with --warehouse: reuse the table an earlier run built there with the same sizes "
                             "(restored from its saved metadata) instead of building it again")
    args = parser.parse_args(argv)
    args.files *= args.scale
    own_session = spark is None
    if own_session:
        warehouse = Path(args.warehouse) if args.warehouse else scratch_dir("bench-metadata-")
        state_dir = warehouse
    else:
        warehouse = Path(local_path(spark.conf.get("spark.sql.catalog.jcat.warehouse")))
        state_dir = scratch_dir("bench-metadata-state-")  # not beside the session's namespaces
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(warehouse)}
    previous_conf = {}
    if own_session:
        spark = start_spark(warehouse, master=args.master, extra_conf=conf)
    else:
        # procedures.sql reads our catalog's keys from the session: set for this run, put back after
        previous_conf = {k: spark.conf.get(k, None) for k in conf}
        for k, v in conf.items():
            spark.conf.set(k, v)
    try:
        return run_cases(spark, args, warehouse, state_dir, conf)
    finally:
        if own_session:
            spark.stop()
        for k, v in previous_conf.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def run_cases(spark: Any, args: Any, warehouse: Path, state_dir: Path, conf: dict[str, str]) -> list[Figure]:
    """:func:`main`'s work on a running session: the table, then every case of ``args.cases``."""
    ours = open_catalog("ours", conf)
    table_name = args.table
    saved = state_dir / "saved-metadata"
    # the table's description is small; the paths a run may delete (100k at 1M files) live in a text
    # file read line by line, never parsed into this process, whose memory is measured: a parsed list
    # of them left the 1M run's baseline 3 MiB above the 100k run's
    table_file, deletable_file = state_dir / "bench-table.json", state_dir / "bench-deletable.txt"
    legacy_file = state_dir / "bench-state.json"  # what earlier versions wrote: the list inside the JSON
    # (the default table's state files, written before --table existed, name no table)
    sizes = [args.files, args.files_per_manifest, args.manifests_per_snapshot, args.orphans]
    sizes += [table_name] if table_name != TABLE else []
    state = None
    if args.reuse and table_file.exists() and deletable_file.exists():
        state = json.loads(table_file.read_text())
    elif args.reuse and legacy_file.exists():
        legacy = json.loads(legacy_file.read_text())
        deletable_file.write_text("\n".join(legacy.pop("deletable")))
        table_file.write_text(json.dumps(legacy))
        state = legacy
        del legacy
        print(f"  converted {legacy_file.name} to {table_file.name} + {deletable_file.name}: this run's baseline "
              "holds the parsed list, the next runs' do not", flush=True)
    reused = state is not None and state["sizes"] == sizes and saved.is_dir()
    if reused:
        folder, kept = Path(state["folder"]), state["kept"]
        print(f"  reusing the table in {folder} ({args.files:,} files)", flush=True)
    else:
        table_file.unlink(missing_ok=True)
        legacy_file.unlink(missing_ok=True)
        folder, deletable, kept = build(spark, ours, args)
        shutil.rmtree(saved, ignore_errors=True)
        shutil.copytree(folder / "metadata", saved)
        deletable_file.write_text("\n".join(deletable))
        table_file.write_text(json.dumps({"sizes": sizes, "folder": str(folder), "kept": kept}))
        del deletable
    old = time.time() - TEN_DAYS_S
    del state
    gc.collect()

    def restore() -> None:
        # in a child process: listing and copying 12,000 metadata files here would leave the measured
        # process's baseline larger at 1M files than at 100k
        subprocess.run([sys.executable, "-c", RESTORE, str(saved), str(folder / "metadata"), str(deletable_file),
                        str(old)], check=True)
        spark.sql(f"REFRESH TABLE jcat.{table_name}")

    jvm = spark._jvm
    figures: list[Figure] = []
    size = f"{args.files:,} files"
    memory: dict[str, dict[str, float]] = {}

    def probes(side: str, case: str, setup=None):
        """``(before, after)``: the memory probes of one run, untimed around it (resetting and reading
        the peaks costs milliseconds, as much as a small plan), ``setup`` first."""
        def before():
            if setup is not None:
                setup()
            reset_peak_rss(spark)
            reset_peak_rss(None)
            # what the process held before (the build's leftovers grow with the table), beside the peak
            memory.setdefault(case, {})[f"{side} py before"] = vm_hwm_mb(key="VmRSS")

        def after():
            memory.setdefault(case, {})[f"{side} jvm"] = jvm_peak_rss_mb(spark)
            memory[case][f"{side} py"] = vm_hwm_mb()
        return before, after

    if reused:
        restore()
    for case in filter(None, args.cases.split(",")):
        if case == "plan":
            print("  plan: ours counts the tasks as iter_scan_tasks streams them, Java as it iterates planFiles(); "
                  "both load the table first (ours from its metadata file, Java from Spark's catalog cache)", flush=True)
            for label, ours_filter, java_filter in (
                (f"plan p = {kept}", f"p = {kept}", jvm.org.apache.iceberg.expressions.Expressions.equal("p", kept)),
                ("plan id < 5000000", "id < 5000000", jvm.org.apache.iceberg.expressions.Expressions.lessThan("id", 5_000_000)),
            ):
                def ours_plan(flt=ours_filter):
                    t = ours.load_table(table_name)
                    # past the driver's limits the data manifests are read in Spark tasks; the tasks
                    # are counted as they stream in (iter_scan_tasks), as Java's side iterates planFiles()
                    return sum(1 for _ in iter_scan_tasks(spark, t, filter=flt))

                def java_plan(flt=java_filter):
                    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, f"jcat.{table_name}")
                    tasks = table.newScan().filter(flt).planFiles()
                    count = 0
                    it = tasks.iterator()
                    while it.hasNext():
                        it.next()
                        count += 1
                    tasks.close()
                    return count

                (ours_before, ours_after), (java_before, java_after) = probes("ours", label), probes("java", label)
                mine, ref = time_pair(ours_plan, java_plan, repeat=args.repeat, warmup=args.warmup,
                                      setup_ours=ours_before, setup_reference=java_before,
                                      teardown_ours=ours_after, teardown_reference=java_after)
                assert mine.result == ref.result, (label, mine.result, ref.result)
                figures += timing_figures(f"{label} ({size})", mine, ref)
                figures.append(Figure(f"{label} ({size})", "files planned", mine.result, ref.result, "files"))
                figures.append(Figure(f"{label} ({size})", "python driver peak RSS", memory[label]["ours py"], None, "MiB"))
                figures.append(Figure(f"{label} ({size})", "python driver RSS before", memory[label]["ours py before"],
                                      None, "MiB"))
                figures.append(Figure(f"{label} ({size})", "JVM driver peak RSS", memory[label]["ours jvm"],
                                      memory[label]["java jvm"], "MiB"))
                print_figures(figures[-6:], title=f"  {label}: done")
            continue
        call = CALLS[case]

        def java_call(call=call):
            # at a million files Java's procedures can fail (a StackOverflowError in expire_snapshots
            # was seen here): report it instead of losing the whole run
            try:
                return sorted(tuple(r) for r in spark.sql(call.format(cat="jcat", table=table_name)).collect())
            except Exception as e:  # noqa: BLE001
                first = str(e).strip().splitlines()
                return JavaFailed(next((x for x in first if "Error" in x or "Exception" in x), first[0] if first else ""))

        def ours_call(call=call):
            return sorted(tuple(r) for r in procedures.sql(spark, call.format(cat="ours", table=table_name)).collect())

        (ours_before, ours_after), (java_before, java_after) = probes("ours", case, restore), probes("java", case, restore)
        if args.java_cases is not None and case not in args.java_cases.split(","):
            mine = time_call(ours_call, repeat=args.repeat, warmup=args.warmup, setup=ours_before, teardown=ours_after)
            ref = Timing("reference", (), JavaFailed("not run (--java-cases)"))
        else:
            mine, ref = time_pair(ours_call, java_call, repeat=args.repeat, warmup=args.warmup,
                                  setup_ours=ours_before, setup_reference=java_before,
                                  teardown_ours=ours_after, teardown_reference=java_after)
        if isinstance(ref.result, JavaFailed):
            print(f"  {case}: Iceberg Java failed: {ref.result.message[:300]}", flush=True)
            figures += timing_figures(f"{case} ({size})", mine, None)
            figures += driver_figures(f"{case} ({size})", memory[case], java=False)
            print_figures(figures[-5:], title=f"  {case}: done (Java failed)")
            restore()
            continue
        if case == "remove_orphan_files":
            same = [r[0].replace("file:", "") for r in mine.result] == [r[0].replace("file:", "") for r in ref.result]
        else:
            same = mine.result == ref.result
        assert same, (case, mine.result[:5], ref.result[:5])
        figures += timing_figures(f"{case} ({size})", mine, ref)
        figures += driver_figures(f"{case} ({size})", memory[case], java=True)
        print_figures(figures[-5:], title=f"  {case}: done")
        restore()
    print_figures(figures, title=f"metadata at scale: ours vs Iceberg Java 1.10.2 (reference), {size}")
    return figures


if __name__ == "__main__":
    main()
