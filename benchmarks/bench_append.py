"""Append of a 5M-row (x --scale) DataFrame: our ``append`` (``mapInArrow`` Parquet writers + one
commit) beside Iceberg Java's ``INSERT INTO`` of the same DataFrame, in the same session, with the
driver's peak RSS.

Each timed run appends to a freshly created empty table (setup, untimed); afterwards both tables
must hold the same rows (count and column sums), checked before figures are printed.  ``--cases``:
``partitioned`` (by ``day``, 8 partitions, ``write.distribution-mode=hash`` as Java derives it: both
sides shuffle and must write as many files), ``unpartitioned``, and ``overwrite``: a dynamic partition
overwrite of all 8 partitions of a table that already holds the same rows (our
``overwrite_partitions`` beside Java's ``overwritePartitions()``; each table is refilled by Java's
writer before every timed run, so both start from identical files).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import (  # noqa: E402
    Figure,
    arg_parser,
    driver_peak_rss_mb,
    jvm_peak_rss_mb,
    print_figures,
    reset_peak_rss,
    start_spark,
    time_pair,
    timing_figures,
)

from procedures.spark.dml import append, overwrite_partitions  # noqa: E402
from procedures.spark.read import read_table  # noqa: E402

AGG = ["count(*) AS n", "sum(id) AS s_id", "sum(v) AS s_v", "sum(length(s)) AS s_len", "count(distinct day) AS days"]
COLUMNS = "id bigint, v double, s string, day date"


CASES = ("partitioned", "unpartitioned", "overwrite")


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {','.join(CASES)}")
    args = parser.parse_args()
    rows = 5_000_000 * args.scale
    spark = start_spark(args.warehouse)
    df = spark.range(rows).selectExpr(
        "id", "id * 0.5 AS v", "concat('row-', id) AS s", "date_add(DATE'2024-01-01', CAST(id % 8 AS int)) AS day"
    ).cache()
    df.count()
    figures = []
    for case in args.cases.split(","):
        if case not in CASES:
            raise SystemExit(f"unknown case {case!r}; choose from {', '.join(CASES)}")
        figures += _case(spark, df, rows, case, args)
    print_figures(figures, title="DataFrame append and overwrite: ours vs Iceberg Java")
    spark.stop()


def _case(spark, df, rows: int, case_name: str, args) -> list[Figure]:
    """Figures of one append or overwrite case (the tables are created per timed run, untimed)."""
    partitioned = case_name != "unpartitioned"
    overwriting = case_name == "overwrite"
    suffix = {"partitioned": "", "unpartitioned": "_unpart", "overwrite": "_ow"}[case_name]
    ours_ident, java_ident = f"jcat.db.bench_append_ours{suffix}", f"jcat.db.bench_append_java{suffix}"

    def create(ident: str) -> None:
        spark.sql(f"DROP TABLE IF EXISTS {ident}")
        # both tables are created by Java with identical DDL; only the write path differs
        # the mode Java derives for a partitioned table, set so that ours shuffles as Java's does
        # (unset, ours writes without a shuffle: a file per task and partition)
        mode = ", 'write.distribution-mode'='hash'" if partitioned else ""
        spark.sql(f"CREATE TABLE {ident} ({COLUMNS}) USING iceberg {'PARTITIONED BY (day) ' if partitioned else ''}"
                  f"TBLPROPERTIES ('format-version'='2'{mode})")
        if overwriting:
            df.writeTo(ident).append()

    def ours():
        if overwriting:
            overwrite_partitions(spark, ours_ident, df)
        else:
            append(spark, ours_ident, df)

    def java():
        if overwriting:
            df.writeTo(java_ident).overwritePartitions()
        else:
            df.writeTo(java_ident).append()

    # Memory first, each side alone (peak RSS covers a whole phase); then timings in alternation.
    create(java_ident)
    reset_peak_rss(spark)
    java()
    jvm_ref = jvm_peak_rss_mb(spark)
    rss_before = driver_peak_rss_mb()
    create(ours_ident)
    reset_peak_rss(spark)
    ours()
    jvm_ours = jvm_peak_rss_mb(spark)
    rss_ours = driver_peak_rss_mb()
    t_ours, t_ref = time_pair(ours, java, repeat=args.repeat, warmup=args.warmup,
                              setup_ours=lambda: create(ours_ident), setup_reference=lambda: create(java_ident))
    spark.sql(f"REFRESH TABLE {ours_ident}")
    got_java = spark.table(ours_ident).selectExpr(*AGG).collect()[0]
    got_ours = read_table(spark, ours_ident).selectExpr(*AGG).collect()[0]
    ref = spark.table(java_ident).selectExpr(*AGG).collect()[0]
    if got_java != ref or got_ours != ref or ref["n"] != rows:
        raise SystemExit(f"results differ: ours read by Java {got_java}, by us {got_ours}; Java's table {ref}")
    files = [spark.sql(f"SELECT count(*) FROM {i}.data_files").first()[0] for i in (ours_ident, java_ident)]
    if partitioned and files[0] != files[1]:
        raise SystemExit(f"layouts differ: ours wrote {files[0]} data files, Java {files[1]}")
    what = "overwrite of" if overwriting else "append"
    case = f"{what} {rows // 1_000_000}M rows, {'8 partitions' if partitioned else 'unpartitioned'}"
    figures = timing_figures(case, t_ours, t_ref)
    figures.append(Figure(case, "driver (py) peak RSS", rss_ours, rss_before, "MiB"))
    figures.append(Figure(case, "JVM peak RSS", jvm_ours, jvm_ref, "MiB"))
    return figures


if __name__ == "__main__":
    main()
