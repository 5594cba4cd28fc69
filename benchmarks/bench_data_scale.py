"""Rewrites at data scale: rewrite_data_files (bin-pack and sort) and rewrite_position_delete_files on a
partitioned merge-on-read table of ``--rows`` rows (default 20,000,000) with position deletes, ours beside
Iceberg Java 1.10.2 in the same run, with a plain Spark Parquet copy of the same rows as the floor.

The table ``jcat.<--table>`` (format v2, ``write.delete.mode=merge-on-read``, identity-partitioned by
``p``) is written once by Iceberg Java: ``--partitions`` partitions of ``--files-per-partition`` data
files each, then Java's ``DELETE ... WHERE id % k = 0`` (``k = round(1 / --delete-fraction)``) writes
position delete files.  Its metadata folder and the list of its files are saved; before every run (both
sides, warm-up and timed) the metadata is put back and every file a rewrite added is removed, so both
sides start from exactly the same state.

Cases (``--cases``), all with ``rewrite-all=true`` so both sides rewrite every file:

* ``binpack``: rewrite_data_files, bin-pack, deletes applied;
* ``sort``: rewrite_data_files, sort strategy on ``--sort-order`` (default ``data ASC NULLS LAST``);
* ``posdeletes``: rewrite_position_delete_files.

Before anything is timed, each side runs once and the outputs are compared (this run is also the
warm-up): the procedure's counts that must agree (files and bytes rewritten, failures, delete files
removed), the table's rows after the call as a count and an order-free hash sum read through Iceberg
Java (equal to the rows before the call), and for ``posdeletes`` the ``position_deletes`` metadata
table.  A difference ends the run with :class:`OutputsDiffer`.

The floor (``plain``) is what any engine pays to move the same bytes, timed in the same session:

* ``binpack``: ``spark.read.schema(<theirs>).parquet(<the table's data files>)`` (listed on the
  driver, as the procedures know their files), minus the deleted rows by the DELETE's own predicate
  ``id % k = 0`` (cheaper than reading delete files), written with ``DataFrame.write.parquet`` to a
  scratch folder (one output file per input split);
* ``sort``: the same rows range-partitioned into one partition per table partition on ``(p, <sort
  columns>)``, sorted within partitions, written the same way;
* ``posdeletes``: ``spark.read.parquet(<the delete files>)`` written the same way.

Memory: the peak RSS (``VmHWM``, reset before each run) of the Python driver and of Spark's driver JVM,
the worst over runs, for each side (the Python driver idles while Java runs: its figure there is the
baseline).
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import (  # noqa: E402
    Figure, arg_parser, jvm_peak_rss_mb, print_figures, python_peak_rss_mb, reset_peak_rss, reset_worker_peak_rss,
    scratch_dir, start_spark, time_call, time_pair, timing_figures, worker_peak_rss_mb,
)

from procedures.core.kernel.paths import local_path  # noqa: E402
from procedures.frontend import runner  # noqa: E402

CASES = ("binpack", "sort", "posdeletes")
OURS = "ours"


class OutputsDiffer(AssertionError):
    """Ours and Iceberg Java disagreed on a case's output: no figure for it is worth printing."""


def parse_args(argv: Sequence[str] | None) -> Any:
    """The shared benchmark options plus the table's shape and the cases to run."""
    parser = arg_parser(__doc__.splitlines()[0])
    parser.set_defaults(repeat=2, warmup=0)
    parser.add_argument("--rows", type=int, default=20_000_000, help="rows in the table (default 20,000,000)")
    parser.add_argument("--partitions", type=int, default=16, help="identity partitions of p (default 16)")
    parser.add_argument("--files-per-partition", type=int, default=8, help="data files per partition (default 8)")
    parser.add_argument("--delete-fraction", type=float, default=0.05,
                        help="fraction of rows position-deleted by Java's DELETE (default 0.05)")
    parser.add_argument("--sort-order", default="data ASC NULLS LAST", help="sort order of the sort case")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {','.join(CASES)}")
    parser.add_argument("--table", default="db.data_scale", help="table name in the warehouse (default db.data_scale)")
    args = parser.parse_args(argv)
    args.rows *= args.scale
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(args.cases) - set(CASES))
    if unknown:
        parser.error(f"unknown cases {unknown}; choose from {','.join(CASES)}")
    if not 0 < args.delete_fraction < 1:
        parser.error("--delete-fraction must be between 0 and 1")
    return args


class TableState:
    """The built table saved once and put back exactly before every run."""

    def __init__(self, spark: Any, table: str, folder: Path) -> None:
        self.spark = spark
        self.table = table
        self.folder = folder
        self.saved = folder.parent / f".{folder.name}-saved-metadata"
        shutil.rmtree(self.saved, ignore_errors=True)
        shutil.copytree(folder / "metadata", self.saved)
        self.files = {str(p) for p in folder.rglob("*") if p.is_file()}

    def restore(self) -> None:
        """Metadata back from the saved copy; every file written since the save removed (rewrites
        never delete their inputs, so nothing is missing)."""
        shutil.rmtree(self.folder / "metadata")
        shutil.copytree(self.saved, self.folder / "metadata")
        for p in (self.folder / "data").rglob("*"):
            if p.is_file() and str(p) not in self.files:
                p.unlink()
        self.spark.sql(f"REFRESH TABLE jcat.{self.table}")

    def drop_saved(self) -> None:
        """Remove the saved metadata copy."""
        shutil.rmtree(self.saved, ignore_errors=True)


def build(spark: Any, args: Any, warehouse: Path) -> tuple[TableState, int]:
    """Write the table with Iceberg Java and delete a fraction of its rows (merge-on-read); returns the
    saved state and ``k`` of the DELETE's predicate ``id % k = 0``."""
    started = time.perf_counter()
    t = args.table
    namespace = t.rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS jcat.{namespace}")
    spark.sql(f"DROP TABLE IF EXISTS jcat.{t} PURGE")
    spark.sql(f"CREATE TABLE jcat.{t} (id bigint, p int, data string, value double) USING iceberg "
              "PARTITIONED BY (p) TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', "
              "'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read', "
              "'write.distribution-mode'='none')")
    n_files = args.partitions * args.files_per_partition
    # spark.range cuts ids into contiguous slices, one a task; p = id * partitions // rows keeps every
    # slice inside one partition, so each task writes one data file of its partition
    (spark.range(0, args.rows, 1, n_files)
     .selectExpr("id", f"cast(id * {args.partitions} div {args.rows} as int) as p",
                 "concat('row-', lpad(cast(id * 7919 % 1000003 as string), 7, '0')) as data",
                 "cast(id % 10007 as double) / 7.0 as value")
     .writeTo(f"jcat.{t}").append())
    k = max(2, round(1 / args.delete_fraction))
    spark.sql(f"DELETE FROM jcat.{t} WHERE id % {k} = 0")
    folder = warehouse.joinpath(*t.split("."))
    state = TableState(spark, t, folder)
    files = spark.sql(f"SELECT content, count(*) FROM jcat.{t}.files GROUP BY content ORDER BY content").collect()
    print(f"  table jcat.{t}: {args.rows:,} rows, {args.partitions} partitions, files by content "
          f"{[tuple(r) for r in files]}, 1 row in {k} deleted (built in {time.perf_counter() - started:.0f} s)",
          flush=True)
    return state, k


def rows_digest(spark: Any, table: str) -> tuple:
    """The table's live rows as ``(count, sum of 64-bit row hashes)``, read through Iceberg Java."""
    spark.sql(f"REFRESH TABLE jcat.{table}")
    row = spark.sql(f"SELECT count(*), sum(cast(xxhash64(id, p, data, value) as decimal(38, 0))) "
                    f"FROM jcat.{table}").collect()[0]
    return tuple(row)


def deletes_digest(spark: Any, table: str) -> tuple:
    """The position deletes as ``(count, hash sum of (data file path, pos))``, read through Iceberg Java."""
    row = spark.sql(f"SELECT count(*), sum(cast(xxhash64(regexp_replace(file_path, '^file:', ''), pos) "
                    f"as decimal(38, 0))) FROM jcat.{table}.position_deletes").collect()[0]
    return tuple(row)


def java_options(options: dict[str, str]) -> str:
    """A Spark SQL ``map(...)`` literal of ``options``."""
    return "map(" + ", ".join(f"'{k}', '{v}'" for k, v in options.items()) + ")"


def case_calls(case: str, args: Any, conf: dict[str, str]) -> tuple[Callable[[], tuple], Callable[[], tuple], tuple]:
    """``(ours, java, must_agree)`` for a case: two callables returning the procedure's output row, and
    the indexes of the output columns both sides must agree on."""
    spark = args.spark
    options = {"rewrite-all": "true"}
    if case == "posdeletes":
        name, extra, java_extra = "rewrite_position_delete_files", {}, ""
        # rewritten_delete_files_count, rewritten_bytes_count
        agree = (0, 2)
    else:
        name = "rewrite_data_files"
        extra = {"strategy": "sort", "sort_order": args.sort_order} if case == "sort" else {}
        java_extra = "".join(f", {k} => '{v}'" for k, v in extra.items())
        # rewritten_data_files_count, rewritten_bytes_count, failed_data_files_count, removed_delete_files_count
        agree = (0, 2, 3, 4)

    def ours() -> tuple:
        return tuple(runner.run(name, kwargs={"table": args.table, "options": options, **extra},
                                catalog=OURS, conf=conf, spark=spark).rows[0])

    def java() -> tuple:
        return tuple(spark.sql(f"CALL jcat.system.{name}(table => '{args.table}', "
                               f"options => {java_options(options)}{java_extra})").collect()[0])

    return ours, java, agree


def plain_copy(case: str, args: Any, k: int, out_dir: Path) -> Callable[[], None]:
    """The floor of a case: a plain Spark Parquet read + write of the same rows (module docstring)."""
    spark = args.spark
    content = 1 if case == "posdeletes" else 0
    files = [local_path(r[0]) for r in
             spark.sql(f"SELECT file_path FROM jcat.{args.table}.files WHERE content = {content}").collect()]
    sort_columns = [part.split()[0] for part in args.sort_order.split(",")]

    # the schema given and listing kept on the driver: no footer-reading or listing job that the
    # procedures (which know their files) do not run either
    schema = spark.read.parquet(files[0]).schema

    def run() -> None:
        shutil.rmtree(out_dir, ignore_errors=True)
        key = "spark.sql.sources.parallelPartitionDiscovery.threshold"
        before = spark.conf.get(key)
        spark.conf.set(key, str(len(files) + 1))
        try:
            df = spark.read.schema(schema).parquet(*files)
        finally:
            spark.conf.set(key, before)
        if case != "posdeletes":
            df = df.where(f"id % {k} != 0")
        if case == "sort":
            df = df.repartitionByRange(args.partitions, "p", *sort_columns).sortWithinPartitions("p", *sort_columns)
        df.write.parquet(str(out_dir))

    return run


def main(argv: Sequence[str] | None = None, spark: Any = None) -> list[Figure]:
    """Build the table, compare each case's outputs, time ours, Java and the floor; print and return
    the figures.  With ``spark`` given (a session with Iceberg Java's ``jcat`` hadoop catalog, as the
    test fixture has) the table goes into ``jcat``'s warehouse and the session is left running."""
    args = parse_args(argv)
    own_session = spark is None
    if own_session:
        warehouse = Path(args.warehouse) if args.warehouse else scratch_dir("bench-data-scale-")
        spark = start_spark(warehouse)
    else:
        warehouse = Path(local_path(spark.conf.get("spark.sql.catalog.jcat.warehouse")))
    args.spark = spark
    conf = {f"spark.sql.catalog.{OURS}.type": "hadoop", f"spark.sql.catalog.{OURS}.warehouse": str(warehouse)}
    state, k = build(spark, args, warehouse)
    expected_rows = rows_digest(spark, args.table)
    expected_deletes = deletes_digest(spark, args.table)
    out_dir = scratch_dir("bench-data-scale-plain-")
    memory: dict[tuple[str, str], dict[str, float]] = {}

    def measured(side: str, case: str, fn: Callable[[], tuple]) -> Callable[[], tuple]:
        def run() -> tuple:
            reset_peak_rss(spark)
            reset_peak_rss(None)
            reset_worker_peak_rss(spark)
            result = fn()
            seen = memory.setdefault((case, side), {"py": 0.0, "jvm": 0.0, "workers": 0.0})
            seen["py"] = max(seen["py"], python_peak_rss_mb())
            seen["jvm"] = max(seen["jvm"], jvm_peak_rss_mb(spark) or 0.0)
            seen["workers"] = max(seen["workers"], worker_peak_rss_mb(spark))
            return result
        return run

    size = f"{args.rows / 1e6:g}M rows"
    figures: list[Figure] = []
    try:
        for case in args.cases:
            ours_fn, java_fn, agree = case_calls(case, args, conf)
            ours_fn, java_fn = measured("ours", case, ours_fn), measured("java", case, java_fn)
            results = {}
            for side, fn in (("java", java_fn), ("ours", ours_fn)):
                state.restore()
                started = time.perf_counter()
                out = fn()
                results[side] = (out, rows_digest(spark, args.table), deletes_digest(spark, args.table))
                print(f"  {case} {side}: {out} in {time.perf_counter() - started:.1f} s", flush=True)
            compare(case, results, agree, expected_rows, expected_deletes)
            ours, java = time_pair(ours_fn, java_fn, repeat=args.repeat, warmup=args.warmup,
                                   setup_ours=state.restore, setup_reference=state.restore)
            state.restore()
            floor = time_call(plain_copy(case, args, k, out_dir), name="plain", repeat=args.repeat, warmup=0)
            label = f"{case} ({size})"
            figures += timing_figures(label, ours, java)
            figures += timing_figures(f"{label} (plain spark)", ours, floor)
            figures.append(Figure(label, "python driver peak RSS", memory[(case, "ours")]["py"],
                                  memory[(case, "java")]["py"], "MiB"))
            figures.append(Figure(label, "JVM driver peak RSS", memory[(case, "ours")]["jvm"],
                                  memory[(case, "java")]["jvm"], "MiB"))
            # (Java runs no Python worker: its column shows what idle workers of earlier runs hold)
            figures.append(Figure(label, "python worker peak RSS", memory[(case, "ours")]["workers"],
                                  memory[(case, "java")]["workers"], "MiB"))
            figures.append(Figure(label, "files rewritten", float(ours.result[0]), float(java.result[0]), "files"))
            figures.append(Figure(label, "files added", float(ours.result[1]), float(java.result[1]), "files"))
            print_figures(figures[-9:], title=f"  {case}: done")
        state.restore()
    finally:
        state.drop_saved()
    print_figures(figures, title=f"rewrites at data scale: ours vs Iceberg Java 1.10.2 (reference), {size}, "
                                 f"{args.partitions} partitions x {args.files_per_partition} files, "
                                 f"1 row in {k} position-deleted")
    if own_session:
        spark.stop()
    return figures


def compare(case: str, results: dict[str, tuple], agree: tuple, expected_rows: tuple, expected_deletes: tuple) -> None:
    """Raise :class:`OutputsDiffer` unless both sides' outputs agree (module docstring)."""
    (ours, ours_rows, ours_deletes), (java, java_rows, java_deletes) = results["ours"], results["java"]
    problems = []
    if [ours[i] for i in agree] != [java[i] for i in agree]:
        problems.append(f"procedure output ours {ours} vs Java {java} (columns {agree} must agree)")
    if ours_rows != expected_rows or java_rows != expected_rows:
        problems.append(f"table rows (count, hash) before {expected_rows}, after ours {ours_rows}, after Java {java_rows}")
    if case == "posdeletes" and (ours_deletes != expected_deletes or java_deletes != expected_deletes):
        problems.append(f"position deletes before {expected_deletes}, after ours {ours_deletes}, "
                        f"after Java {java_deletes}")
    if problems:
        raise OutputsDiffer(f"{case}: " + "; ".join(problems))
    print(f"  {case}: outputs equal", flush=True)


if __name__ == "__main__":
    main()
