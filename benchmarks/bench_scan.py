"""Full scan of a 5M-row (x --scale) v2 table with 5% of its rows deleted by position deletes: our
``read_table`` (driver planning + ``mapInArrow`` Parquet reads) beside Iceberg Java's Spark scan of the
same table in the same session, plus driver peak RSS.

Both sides compute the same aggregate over every column, and the script checks they agree before
printing figures.
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

AGG = ["count(*) AS n", "sum(id) AS s_id", "sum(v) AS s_v", "sum(length(s)) AS s_len"]


def main() -> None:
    args = arg_parser(__doc__.splitlines()[0]).parse_args()
    rows = 5_000_000 * args.scale
    spark = start_spark(args.warehouse)
    from procedures.spark.read import read_table

    ident = "jcat.db.bench_scan"
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    spark.sql(f"""CREATE TABLE {ident} (id bigint, v double, s string) USING iceberg
        TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')""")
    spark.sql(f"INSERT INTO {ident} SELECT id, id * 0.5, concat('row-', id) FROM range({rows})")
    spark.sql(f"DELETE FROM {ident} WHERE id % 20 = 7")  # 5% of rows, as position delete files

    def ours():
        return read_table(spark, ident).selectExpr(*AGG).collect()[0]

    def java():
        return spark.table(ident).selectExpr(*AGG).collect()[0]

    # Memory first, each side alone (peak RSS covers a whole phase); then timings in alternation.
    reset_peak_rss(spark)
    java()
    jvm_ref = jvm_peak_rss_mb(spark)
    rss_before = driver_peak_rss_mb()
    reset_peak_rss(spark)
    ours()
    jvm_ours = jvm_peak_rss_mb(spark)
    rss_ours = driver_peak_rss_mb()
    t_ours, t_ref = time_pair(ours, java, repeat=args.repeat, warmup=args.warmup)
    if t_ours.result != t_ref.result or t_ours.result["n"] != rows - rows // 20:
        raise SystemExit(f"results differ: ours {t_ours.result} vs Java {t_ref.result}")
    case = f"scan {rows // 1_000_000}M, 5% pos-deleted"
    figures = timing_figures(case, t_ours, t_ref)
    figures.append(Figure(case, "driver (py) peak RSS", rss_ours, rss_before, "MiB"))
    figures.append(Figure(case, "JVM peak RSS", jvm_ours, jvm_ref, "MiB"))
    print_figures(figures, title="Full table scan with position deletes")
    spark.stop()


if __name__ == "__main__":
    main()
