"""rewrite_data_files: 1,000 small files -> 10 (bin-pack), and the sort strategy on the same table.

Per case, three sides run in the same Spark session: ours (on one table), Iceberg Java 1.10.2's
CALL (on a twin table with the same files), and a plain Spark Parquet read + write of the same
bytes into 10 files (the floor any rewrite pays).

The 1,000 source files are written once (by Java); before every timed run the table under test is
recreated untimed and given those same files by one fast-append commit, so setup costs seconds, not
a 1,000-task write.  Rewrites never delete their input files, so every run starts from identical bytes.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import (  # noqa: E402
    Figure, arg_parser, print_figures, scratch_dir, start_spark, time_call, time_pair, timing_figures,
)

from procedures.catalog.config import load_catalog  # noqa: E402
from procedures.core.kernel.operations import FastAppend  # noqa: E402
from procedures.core.kernel.scan import iter_file_scan_tasks  # noqa: E402
from procedures.core.kernel.transaction import commit  # noqa: E402
from procedures.frontend import runner  # noqa: E402


def main() -> None:
    args = arg_parser(__doc__).parse_args()
    warehouse = args.warehouse or scratch_dir("bench-rewrite-")
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(warehouse)}
    spark = start_spark(warehouse, extra_conf=conf)
    n_files = 1000 * args.scale
    rows = 200 * n_files

    catalog = load_catalog("ours", conf)

    def create(name: str) -> None:
        # no PURGE: the shared source files must survive dropping a table that references them
        spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
        spark.sql(f"CREATE TABLE jcat.db.{name} (id bigint, data string) USING iceberg "
                  "TBLPROPERTIES ('format-version'='2')")

    create("src")
    (spark.range(rows).selectExpr("id", "concat('row-', cast(id * 7 % 1000 as string)) as data")
     .repartition(n_files).writeTo("jcat.db.src").append())
    src = catalog.load_table(("db", "src"))
    src_files = [task.data_file for task in iter_file_scan_tasks(src.metadata, src.io)]
    if len(src_files) != n_files:
        raise SystemExit(f"setup wrote {len(src_files)} files, expected {n_files}")

    def build(name: str) -> None:
        create(name)
        commit(catalog.load_table(("db", name)), [FastAppend(src_files)])
        spark.sql(f"REFRESH TABLE jcat.db.{name}")

    def total_bytes(name: str) -> int:
        row = spark.sql(f"SELECT sum(file_size_in_bytes) FROM jcat.db.{name}.files").collect()[0]
        return int(row[0])

    target = total_bytes("src") // 10 + 1
    options = {"target-file-size-bytes": str(target)}
    java_options = f"map('target-file-size-bytes', '{target}')"
    files = [r[0] for r in spark.sql("SELECT file_path FROM jcat.db.src.files").collect()]
    out_dir = scratch_dir("bench-rewrite-plain-")

    figures: list[Figure] = []
    for case, ours_args, java_args, plain in (
        ("binpack 1000->10", {}, "", lambda df: df.coalesce(10)),
        ("sort 1000->10", {"strategy": "sort", "sort_order": "data ASC NULLS FIRST, id DESC"},
         ", strategy => 'sort', sort_order => 'data ASC NULLS FIRST, id DESC'",
         lambda df: df.repartitionByRange(10, "data", df.id.desc()).sortWithinPartitions("data", df.id.desc())),
    ):
        ours, java = time_pair(
            lambda: runner.run("rewrite_data_files", kwargs={"table": "db.ours", "options": options, **ours_args},
                                 catalog="ours", conf=conf, spark=spark).rows[0],
            lambda: tuple(spark.sql(f"CALL jcat.system.rewrite_data_files(table => 'db.twin', "
                                    f"options => {java_options}{java_args})").collect()[0]),
            repeat=args.repeat, warmup=args.warmup,
            setup_ours=lambda: build("ours"), setup_reference=lambda: build("twin"))

        def plain_run() -> None:
            shutil.rmtree(out_dir, ignore_errors=True)
            plain(spark.read.parquet(*files)).write.parquet(str(out_dir))

        floor = time_call(plain_run, name="plain", repeat=args.repeat, warmup=args.warmup)
        figures += timing_figures(case, ours, java)
        figures += timing_figures(f"{case} (plain spark)", ours, floor)
        figures.append(Figure(case, "files in -> out", float(ours.result[0]), float(java.result[0]), "files"))
        figures.append(Figure(case, "files added", float(ours.result[1]), float(java.result[1]), "files"))
    print_figures(figures, title=f"rewrite_data_files, {n_files} files of ~{rows // n_files} rows")
    spark.stop()


if __name__ == "__main__":
    main()
