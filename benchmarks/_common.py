"""Shared helpers for the benchmark scripts: timing, peak memory, a Spark session with the Iceberg Java
runtime (the reference), and one uniform "ours vs reference" figures table.

A benchmark script builds its table, times our implementation and Iceberg Java's doing the same work in
the same Spark session, and prints ``print_figures(...)``.  Benchmarks are never run by pytest.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from procedures.core.kernel.operations import FastAppend
from procedures.core.kernel.snapshot_producer import SnapshotProducer, snapshot_manifests
from procedures.core.kernel.transaction import commit
from procedures.framework.context import open_catalog
from procedures.spec.manifest.manifest_list import read_manifest_list
from procedures.spec.manifest.model import DataFile, ManifestContent
from procedures.spec.manifest.reader import read_manifest

__all__ = [
    "Figure",
    "Timing",
    "append_snapshots_table",
    "hadoop_pair",
    "arg_parser",
    "driver_peak_rss_mb",
    "iceberg_runtime_jar",
    "module_at",
    "jvm_peak_rss_mb",
    "print_figures",
    "python_peak_rss_mb",
    "reset_peak_rss",
    "start_spark",
    "time_call",
    "time_pair",
    "timing_figures",
]

ICEBERG_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"


# --------------------------------------------------------------------------------------------- timing


@dataclass(frozen=True, slots=True)
class Timing:
    """Wall-clock seconds of each timed run of one callable, plus the last run's return value."""

    name: str
    runs: tuple[float, ...]
    result: Any = field(default=None, compare=False, repr=False)

    @property
    def min(self) -> float:
        """Fastest run: the least noisy estimate of the cost."""
        return min(self.runs)

    @property
    def median(self) -> float:
        """Median run."""
        return statistics.median(self.runs)


def time_call(
    fn: Callable[[], Any],
    *,
    name: str = "",
    repeat: int = 3,
    warmup: int = 0,
    setup: Callable[[], Any] | None = None,
    teardown: Callable[[], Any] | None = None,
) -> Timing:
    """Time ``fn()`` ``repeat`` times with ``time.perf_counter``.

    ``setup`` runs untimed before every run (warm-up runs included) -- procedures change the table, so a
    fair repeat rebuilds it -- and ``teardown`` untimed after it (e.g. reading a memory peak).  ``warmup``
    runs are discarded, which keeps JIT and class loading of the JVM out of the figures.
    """
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    for _ in range(warmup):
        if setup is not None:
            setup()
        fn()
        if teardown is not None:
            teardown()
    runs: list[float] = []
    result: Any = None
    for _ in range(repeat):
        if setup is not None:
            setup()
        start = time.perf_counter()
        result = fn()
        runs.append(time.perf_counter() - start)
        if teardown is not None:
            teardown()
    return Timing(name or getattr(fn, "__name__", "call"), tuple(runs), result)


def time_pair(
    ours: Callable[[], Any],
    reference: Callable[[], Any],
    *,
    repeat: int = 3,
    warmup: int = 1,
    setup_ours: Callable[[], Any] | None = None,
    setup_reference: Callable[[], Any] | None = None,
    between: Callable[[], Any] | None = None,
    teardown_ours: Callable[[], Any] | None = None,
    teardown_reference: Callable[[], Any] | None = None,
) -> tuple[Timing, Timing]:
    """Time two callables in alternation (reference, ours, ours, reference, ...), so JVM warm-up,
    page cache and background noise fall on both sides alike rather than on whichever ran second.

    All warm-up runs of the reference come first, then ``between()`` (e.g. to read a memory baseline),
    then ours' warm-ups, then the alternating timed runs.  ``setup_*`` run untimed before each run of
    their side and ``teardown_*`` untimed after it.
    """
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    sides = {"ours": (ours, setup_ours, teardown_ours, []),
             "reference": (reference, setup_reference, teardown_reference, [])}
    results: dict[str, Any] = {}

    def run(side: str, timed: bool) -> None:
        fn, setup, teardown, runs = sides[side]
        if setup is not None:
            setup()
        start = time.perf_counter()
        results[side] = fn()
        if timed:
            runs.append(time.perf_counter() - start)
        if teardown is not None:
            teardown()

    for _ in range(warmup):
        run("reference", False)
    if between is not None:
        between()
    for _ in range(warmup):
        run("ours", False)
    for i in range(repeat):
        order = ("reference", "ours") if i % 2 == 0 else ("ours", "reference")
        for side in order:
            run(side, True)
    return (Timing("ours", tuple(sides["ours"][3]), results["ours"]),
            Timing("reference", tuple(sides["reference"][3]), results["reference"]))


# --------------------------------------------------------------------------------------------- memory


def driver_peak_rss_mb() -> float:
    """Peak resident set size of this Python driver process, in MiB (``getrusage``; never decreases)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _jvm_pid(spark: Any) -> int:
    return int(spark._jvm.java.lang.ProcessHandle.current().pid())


def jvm_peak_rss_mb(spark: Any) -> float | None:
    """Peak RSS of Spark's driver JVM in MiB, or ``None`` off Linux.

    PySpark's JVM is a separate child process that is still running, so ``getrusage(RUSAGE_CHILDREN)``
    cannot see it; ``/proc/<pid>/status`` (VmHWM) can.
    """
    status = Path(f"/proc/{_jvm_pid(spark)}/status")
    if not status.exists():
        return None
    for line in status.read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None


def python_peak_rss_mb() -> float:
    """Peak RSS (``VmHWM``) of this Python process in MiB since the last ``reset_peak_rss(None)``
    (``driver_peak_rss_mb`` cannot be reset), or ``driver_peak_rss_mb()`` off Linux."""
    status = Path(f"/proc/{os.getpid()}/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return driver_peak_rss_mb()


def reset_peak_rss(spark: Any | None = None) -> bool:
    """Reset the kernel's peak-RSS mark (Linux ``clear_refs`` 5) for the JVM, or this process when
    ``spark`` is None, so the next reading covers only what follows.  Returns False when not possible."""
    pid = _jvm_pid(spark) if spark is not None else os.getpid()
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _python_workers(spark: Any) -> list[int]:
    """Pids of the Python processes under Spark's driver JVM (PySpark's worker daemon and the
    workers it forked), found through ``/proc/<pid>/stat`` parent links; empty off Linux."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents[int(stat.parent.name)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    jvm = _jvm_pid(spark)
    found, frontier = [], [jvm]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent:
                frontier.append(pid)
                try:
                    if "python" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                        found.append(pid)
                except OSError:
                    continue
    return found


def worker_peak_rss_mb(spark: Any) -> float:
    """The largest peak RSS (``VmHWM``) in MiB of Spark's Python workers since
    :func:`reset_worker_peak_rss` (local mode: the workers are the JVM's descendants); 0 if none."""
    peak = 0.0
    for pid in _python_workers(spark):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) / 1024)
        except OSError:
            continue
    return peak


def reset_worker_peak_rss(spark: Any) -> None:
    """Reset the peak-RSS mark of every Python worker of the session (see :func:`reset_peak_rss`)."""
    for pid in _python_workers(spark):
        try:
            Path(f"/proc/{pid}/clear_refs").write_text("5")
        except OSError:
            continue


# --------------------------------------------------------------------------------------------- Spark


def iceberg_runtime_jar() -> str:
    """Path of the Iceberg Java Spark runtime jar from the test extra (package snowpark-connect-deps-iceberg)."""
    try:
        import snowpark_connect_deps_iceberg as pkg
    except ImportError as exc:
        raise SystemExit("The Iceberg Java runtime is missing: pip install -e '.[test]'") from exc
    jar = Path(list(pkg.__path__)[0]) / "jars" / ICEBERG_JAR
    if not jar.is_file():
        raise SystemExit(f"Iceberg Java runtime jar not found at {jar}")
    return str(jar)


def scratch_dir(prefix: str) -> Path:
    """A new temporary folder, removed when the script exits (warehouses of thousands of files
    would otherwise pile up in /tmp run after run)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def start_spark(
    warehouse: str | Path | None = None,
    *,
    app_name: str = "iceberg-procedures-bench",
    master: str = "local[2]",
    driver_memory: str = "2g",
    extra_conf: dict[str, str] | None = None,
) -> Any:
    """A Spark session configured like the test fixture: Iceberg Java runtime jar, SQL extensions and a
    Java hadoop catalog ``jcat`` on ``warehouse`` (a new temporary folder when None), UTC, UI off.

    Our own catalog reads the same kind of keys; pass them in ``extra_conf`` (for example
    ``{"spark.sql.catalog.local.type": "hadoop", "spark.sql.catalog.local.warehouse": str(warehouse)}``).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    warehouse = Path(warehouse) if warehouse is not None else scratch_dir("bench-warehouse-")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.jars", iceberg_runtime_jar())
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.sql.catalog.jcat", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.jcat.type", "hadoop")
        .config("spark.sql.catalog.jcat.warehouse", str(warehouse))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.pyspark.python", sys.executable)
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def arg_parser(description: str) -> argparse.ArgumentParser:
    """The options every benchmark script shares: ``--repeat``, ``--warmup``, ``--scale``, ``--warehouse``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per side (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs per side first (default 1)")
    parser.add_argument("--scale", type=int, default=1, help="multiplies the script's table size (default 1)")
    parser.add_argument("--warehouse", type=Path, default=None, help="warehouse folder (default: a temp dir)")
    return parser


def module_at(rev: str, path: str) -> types.ModuleType | None:
    """The module in file ``path`` of this repository as of git revision ``rev`` (for timing a former
    implementation beside the current one), or None outside a git checkout."""
    root = Path(__file__).resolve().parents[1]
    try:
        source = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=root, check=True, capture_output=True,
                                text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    name = f"{Path(path).stem}_at_{rev}"
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    exec(compile(source, f"{rev}:{path}", "exec"), module.__dict__)  # noqa: S102
    return module


# --------------------------------------------------------------------------------------------- report


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured quantity for ours and for the reference (Iceberg Java), in ``unit``."""

    case: str
    metric: str
    ours: float | None
    reference: float | None
    unit: str = "s"


def timing_figures(case: str, ours: Timing | None, reference: Timing | None) -> list[Figure]:
    """Min and median wall time of both sides as two figures (either side may be missing)."""
    return [
        Figure(case, f"wall {stat}", getattr(ours, stat) if ours else None, getattr(reference, stat) if reference else None)
        for stat in ("min", "median")
    ]


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"


def print_figures(figures: Iterable[Figure], title: str = "", file: Any = None) -> str:
    """Print the figures as one aligned table ``case | metric | ours | reference | ours/ref`` and return it.

    A ratio above 1 means ours is slower (or bigger); ``-`` marks a side that was not measured.
    """
    header = ("case", "metric", "ours", "reference", "ours/ref", "unit")
    rows = []
    figures_list = list(figures)
    for f in figures_list:
        if not isinstance(f, Figure):
            raise TypeError(f"print_figures takes Figure objects, got {type(f).__name__}")
        ratio = f.ours / f.reference if f.ours is not None and f.reference else None
        rows.append((f.case, f.metric, _fmt(f.ours), _fmt(f.reference), "-" if ratio is None else f"{ratio:.2f}x", f.unit))
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    lines = []
    if title:
        lines.append(title)
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(str(c).rjust(w) if i >= 2 else str(c).ljust(w) for i, (c, w) in enumerate(zip(row, widths))))
    text = "\n".join(lines)
    print(text, file=file or sys.stdout, flush=True)
    _record(figures_list, title)
    return text


def _record(figures: list[Figure], title: str) -> None:
    """Append the figures as JSON lines to ``$BENCH_FIGURES`` when set: how ``run_all.py`` collects
    every script's figures without parsing their tables."""
    target = os.environ.get("BENCH_FIGURES")
    if not target:
        return
    with open(target, "a", encoding="utf-8") as out:
        for f in figures:
            out.write(json.dumps({"title": title, **asdict(f)}) + "\n")


# --------------------------------------------------------------------------------------------- tables


def hadoop_pair(args: argparse.Namespace, prefix: str) -> tuple[Path, Any, Any]:
    """``(warehouse, spark, ours)``: a session (``start_spark``) whose Java ``jcat`` and our ``ours``
    hadoop catalogs share one warehouse (``--warehouse`` or a fresh temporary folder), with namespace
    ``db`` created."""
    warehouse = Path(args.warehouse) if args.warehouse else scratch_dir(prefix)
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(warehouse)}
    spark = start_spark(warehouse, extra_conf=conf)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.db")
    return warehouse, spark, open_catalog("ours", conf)


class BulkAppend(SnapshotProducer):
    """An append of ready-made data files in several manifests (one per group), keeping the parent's."""

    operation = "append"

    def __init__(self, groups: list[list[DataFile]]) -> None:
        super().__init__()
        self.groups = groups

    def manifests(self, base, parent, ctx, summary):
        """The new manifests (one per group) followed by the parent's."""
        new = []
        for group in self.groups:
            def write(w, group=group) -> None:
                for f in group:
                    summary.added_file(f)
                    w.add(f)
            new.append(self.write_manifest(base, ctx, 0, ManifestContent.DATA, write))
        return new + snapshot_manifests(ctx.io, parent)


def append_snapshots_table(spark: Any, ours: Any, name: str, snapshots: int) -> Any:
    """``jcat.db.<name>``: ``snapshots`` small appends (copies of one Java-written Parquet file,
    committed through our core: fast even at thousands of snapshots) and then one merge-on-read
    DELETE by Java.  Returns our catalog's view of the table after the delete."""
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name} PURGE")
    spark.sql(f"CREATE TABLE jcat.db.{name} (id bigint, data string) USING iceberg "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    spark.sql(f"INSERT INTO jcat.db.{name} VALUES (0, 'a'), (1, 'b')")
    t = ours.load_table(("db", name))
    template = next(iter(t.metadata.snapshots))
    first = next(read_manifest(t.io, read_manifest_list(t.io, template.manifest_list)[0]))
    src = first.data_file.file_path.replace("file:", "")
    for i in range(snapshots - 1):
        dst = src.replace(".parquet", f"-copy{i}.parquet")
        shutil.copyfile(src, dst)
        f = first.data_file
        copy = type(f)(**{**{k: getattr(f, k) for k in f.__dataclass_fields__}, "file_path": dst})
        t = commit(t, [FastAppend([copy])])
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    spark.sql(f"DELETE FROM jcat.db.{name} WHERE id = 0")
    return ours.load_table(("db", name))
