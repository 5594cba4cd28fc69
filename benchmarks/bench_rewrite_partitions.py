"""rewrite_data_files on tables with many small partitions: ours beside Iceberg Java 1.10.2, same run.

Three table shapes (issue 37), each built twice by the same Spark SQL through Iceberg Java (one twin
for us, one for Java, so both start from the same layout of files), then compacted with the default
bin-pack options by each side:

* ``days``: ``--tables`` tables (default 4) of ``--appends`` appends (default 30) of 5,000 rows spread
  over 30 days, partitioned by ``days(ts)``, then one merge-on-read DELETE; the figure is the time of
  rewriting every table, one after the other;
* ``mor``: one unpartitioned merge-on-read table of 2,000,000 rows in 240 files with 5% of its rows
  deleted by position deletes;
* ``partitions``: ``--partitions`` identity partitions (default 1,000) of 5 small files each.

Outputs are compared first (files rewritten and added, and the rows of each table afterwards).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import Figure, arg_parser, hadoop_pair, print_figures, time_pair, timing_figures  # noqa: E402

from procedures.frontend import runner  # noqa: E402

CASES = ("days", "mor", "partitions")


def _days_tables(spark, names: list[str], appends: int, rows: int) -> None:
    for name in names:
        spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name} PURGE")
        spark.sql(f"CREATE TABLE jcat.db.{name} (id bigint, ts timestamp, data string) USING iceberg "
                  "PARTITIONED BY (days(ts)) TBLPROPERTIES ('format-version'='2', "
                  "'write.delete.mode'='merge-on-read')")
        for i in range(appends):
            spark.sql(f"INSERT INTO jcat.db.{name} SELECT id + {i * rows}, "
                      "timestamp_seconds(1700000000 + (id % 30) * 86400), concat('row-', id) "
                      f"FROM range({rows})")
        spark.sql(f"DELETE FROM jcat.db.{name} WHERE id % 97 = 3")


def _mor_table(spark, name: str, rows: int, files: int) -> None:
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name} PURGE")
    spark.sql(f"CREATE TABLE jcat.db.{name} (id bigint, v double, data string) USING iceberg "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    (spark.range(rows).selectExpr("id", "id * 0.5 AS v", "concat('row-', id) AS data")
     .repartition(files).writeTo(f"jcat.db.{name}").append())
    spark.sql(f"DELETE FROM jcat.db.{name} WHERE id % 20 = 7")


def _partitions_table(spark, name: str, partitions: int, files_per_partition: int) -> None:
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name} PURGE")
    spark.sql(f"CREATE TABLE jcat.db.{name} (id bigint, p int, data string) USING iceberg "
              "PARTITIONED BY (p) TBLPROPERTIES ('format-version'='2', "
              "'write.distribution-mode'='none', 'write.spark.fanout.enabled'='false')")
    for i in range(files_per_partition):
        # one file per partition per append: one task writes rows sorted by p, so Java's clustered
        # writer holds one file open at a time (its fanout writer, 1,000 files open with a
        # compressor buffer each, ran the JVM out of heap)
        (spark.range(partitions * 20).selectExpr(f"id + {i * partitions * 20} AS id", f"CAST(id % {partitions} AS INT) AS p",
                                                 "concat('row-', id) AS data")
         .repartition(1).sortWithinPartitions("p").writeTo(f"jcat.db.{name}").append())


def _rows(spark, name: str) -> tuple:
    return tuple(spark.sql(f"SELECT count(*), sum(id), sum(hash(data)) FROM jcat.db.{name}").collect()[0])


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {','.join(CASES)}")
    parser.add_argument("--tables", type=int, default=4, help="tables of the days case (default 4)")
    parser.add_argument("--appends", type=int, default=30, help="appends per table of the days case (default 30)")
    parser.add_argument("--partitions", type=int, default=1000, help="partitions of the partitions case")
    args = parser.parse_args()
    _, spark, _ = hadoop_pair(args, "bench-rewrite-partitions-")
    conf = {k: v for k, v in spark.sparkContext.getConf().getAll() if k.startswith("spark.sql.catalog.ours.")}
    figures: list[Figure] = []

    def ours_rewrite(names: list[str]) -> tuple:
        out = [runner.run("rewrite_data_files", kwargs={"table": f"db.{n}"}, catalog="ours", conf=conf,
                          spark=spark).rows[0] for n in names]
        for n in names:
            spark.sql(f"REFRESH TABLE jcat.db.{n}")
        return tuple(sum(int(r[i]) for r in out) for i in (0, 1)), tuple(_rows(spark, n) for n in names)

    def java_rewrite(names: list[str]) -> tuple:
        out = [tuple(spark.sql(f"CALL jcat.system.rewrite_data_files(table => 'db.{n}')").collect()[0])
               for n in names]
        return tuple(sum(int(r[i]) for r in out) for i in (0, 1)), tuple(_rows(spark, n) for n in names)

    for case in args.cases.split(","):
        if case == "days":
            label = f"{args.tables} tables x {args.appends} appends, days, MOR"
            mine = [f"days_ours_{i}" for i in range(args.tables)]
            theirs = [f"days_java_{i}" for i in range(args.tables)]
            setup_ours = lambda: _days_tables(spark, mine, args.appends, 5000 * args.scale)  # noqa: E731
            setup_java = lambda: _days_tables(spark, theirs, args.appends, 5000 * args.scale)  # noqa: E731
        elif case == "mor":
            rows = 2_000_000 * args.scale
            label = f"{rows // 1_000_000}M rows in 240 files, MOR 5%"
            mine, theirs = ["mor_ours"], ["mor_java"]
            setup_ours = lambda: _mor_table(spark, mine[0], rows, 240)  # noqa: E731
            setup_java = lambda: _mor_table(spark, theirs[0], rows, 240)  # noqa: E731
        elif case == "partitions":
            label = f"{args.partitions} partitions x 5 files"
            mine, theirs = ["parts_ours"], ["parts_java"]
            setup_ours = lambda: _partitions_table(spark, mine[0], args.partitions, 5)  # noqa: E731
            setup_java = lambda: _partitions_table(spark, theirs[0], args.partitions, 5)  # noqa: E731
        else:
            raise SystemExit(f"unknown case {case!r}; choose from {', '.join(CASES)}")
        ours, java = time_pair(lambda: ours_rewrite(mine), lambda: java_rewrite(theirs),
                               repeat=args.repeat, warmup=args.warmup,
                               setup_ours=setup_ours, setup_reference=setup_java)
        if ours.result != java.result:
            raise SystemExit(f"{label}: outputs differ: ours {ours.result} vs Java {java.result}")
        figures += timing_figures(label, ours, java)
        figures.append(Figure(label, "files rewritten", float(ours.result[0][0]), float(java.result[0][0]), "files"))
        figures.append(Figure(label, "files added", float(ours.result[0][1]), float(java.result[0][1]), "files"))
    print_figures(figures, title="rewrite_data_files on many-partition tables: ours vs Iceberg Java 1.10.2")
    spark.stop()


if __name__ == "__main__":
    main()
