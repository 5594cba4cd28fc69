"""add_files and migrate of a 1,000-file partitioned Parquet table (20 partitions x 50 files).

Both procedures run in the same Spark session as Iceberg Java 1.10.2's, alternating (time_pair):

* add_files: ``CALL ours.system.add_files`` (our hadoop catalog) and ``CALL jcat.system.add_files``
  (Java's, same warehouse) import `` `parquet`.`<dir>` `` into fresh twin tables partitioned like
  the source; every run starts from an empty target (recreated untimed).
* migrate: ``CALL ohive.system.migrate`` (our hive catalog on the session's metastore) and
  ``CALL spark_catalog.system.migrate`` (Java's, through Iceberg's ``SparkSessionCatalog``, which
  this session installs as ``spark_catalog``) each convert their own ``USING parquet`` table over a
  fresh copy of the same 1,000 files (copied and registered untimed).

Before any timing, one run of each side is compared: output rows, and the snapshot summaries
(files, records, bytes) of the tables they produce.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import (  # noqa: E402
    Figure, arg_parser, print_figures, scratch_dir, start_spark, time_pair, timing_figures,
)

import procedures  # noqa: E402

COLUMNS = "id bigint, data string, v double"
SUMMARY_KEYS = ("added-data-files", "added-records", "added-files-size", "total-data-files", "total-records",
                "total-files-size")


def main() -> None:
    args = arg_parser(__doc__).parse_args()
    warehouse = args.warehouse or scratch_dir("bench-import-")
    hive_home = Path(tempfile.mkdtemp(prefix="bench-import-hive-"))
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(warehouse)}
    spark = start_spark(warehouse, extra_conf={
        **conf,
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={hive_home / 'metastore_db'};create=true",
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        "spark.hadoop.iceberg.engine.hive.lock-enabled": "false",
        "spark.sql.warehouse.dir": str(hive_home / "warehouse"),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={hive_home}",
        "spark.sql.catalog.spark_catalog": "org.apache.iceberg.spark.SparkSessionCatalog",
        "spark.sql.catalog.spark_catalog.type": "hive",
        "spark.sql.catalog.ohive.type": "hive",
    })
    partitions, per_partition = 20, 50 * args.scale
    n_files = partitions * per_partition
    source = Path(scratch_dir("bench-import-src-")) / "src"
    rows = spark.range(n_files * 100).selectExpr(
        "id", "concat('row-', cast(id % 997 as string)) as data", "cast(id / 7 as double) as v", f"cast(id % {partitions} as int) as p")
    for p in range(partitions):  # exactly per_partition files in each p=<n> folder
        rows.where(f"p = {p}").drop("p").repartition(per_partition).write.parquet(str(source / f"p={p}"))
    written = sum(1 for f in source.rglob("*.parquet"))
    if written != n_files:
        raise SystemExit(f"setup wrote {written} files, expected {n_files}")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.db")
    spark.sql("CREATE DATABASE IF NOT EXISTS spark_catalog.bdb")
    figures: list[Figure] = []

    # ------------------------------------------------------------------ add_files
    def target(name: str) -> None:
        spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
        spark.sql(f"CREATE TABLE jcat.db.{name} ({COLUMNS}, p int) USING iceberg PARTITIONED BY (p)")

    def add_files(catalog: str, name: str) -> tuple:
        sql = f"CALL {catalog}.system.add_files(table => 'db.{name}', source_table => '`parquet`.`{source}`')"
        df = spark.sql(sql) if catalog == "jcat" else procedures.sql(spark, sql)
        return tuple(df.collect()[0])

    def summary(ident: str) -> dict:
        row = spark.sql(f"SELECT summary FROM {ident}.snapshots ORDER BY committed_at DESC LIMIT 1").collect()[0]
        return {k: row.summary.get(k) for k in SUMMARY_KEYS}

    target("af_o")
    target("af_j")
    got, want = add_files("ours", "af_o"), add_files("jcat", "af_j")
    spark.sql("REFRESH TABLE jcat.db.af_o")
    if got != want or summary("jcat.db.af_o") != summary("jcat.db.af_j"):
        raise SystemExit(f"add_files outputs differ: ours {got} {summary('jcat.db.af_o')}, "
                         f"Java {want} {summary('jcat.db.af_j')}")
    ours, java = time_pair(lambda: add_files("ours", "af_o"), lambda: add_files("jcat", "af_j"),
                           repeat=args.repeat, warmup=args.warmup,
                           setup_ours=lambda: target("af_o"), setup_reference=lambda: target("af_j"))
    case = f"add_files {n_files} files"
    figures += timing_figures(case, ours, java)
    figures.append(Figure(case, "files added", float(ours.result[0]), float(java.result[0]), "files"))

    # ------------------------------------------------------------------ migrate
    runs = {"n": 0}
    current: dict[str, str] = {}

    def fresh_source(side: str) -> str:
        runs["n"] += 1
        name = f"mg_{side}_{runs['n']}"
        location = Path(scratch_dir("bench-import-mg-")) / name
        shutil.copytree(source, location)
        spark.sql(f"CREATE TABLE spark_catalog.bdb.{name} ({COLUMNS}, p int) USING parquet PARTITIONED BY (p) "
                  f"LOCATION '{location}'")
        spark.sql(f"ALTER TABLE spark_catalog.bdb.{name} RECOVER PARTITIONS")
        current[side] = name
        return name

    def migrate(side: str) -> tuple:
        name = current[side]
        if side == "ours":
            df = procedures.sql(spark, f"CALL ohive.system.migrate(table => 'bdb.{name}')")
        else:
            df = spark.sql(f"CALL spark_catalog.system.migrate(table => 'bdb.{name}')")
        return tuple(df.collect()[0])

    fresh_source("ours")
    fresh_source("java")
    got, want = migrate("ours"), migrate("java")
    s_ours, s_java = summary(f"spark_catalog.bdb.{current['ours']}"), summary(f"spark_catalog.bdb.{current['java']}")
    if got != want or s_ours != s_java:
        raise SystemExit(f"migrate outputs differ: ours {got} {s_ours}, Java {want} {s_java}")
    ours, java = time_pair(lambda: migrate("ours"), lambda: migrate("java"), repeat=args.repeat, warmup=args.warmup,
                           setup_ours=lambda: fresh_source("ours"), setup_reference=lambda: fresh_source("java"))
    case = f"migrate {n_files} files"
    figures += timing_figures(case, ours, java)
    figures.append(Figure(case, "files migrated", float(ours.result[0]), float(java.result[0]), "files"))
    print_figures(figures, title=f"add_files and migrate, {partitions} partitions x {per_partition} Parquet files")
    spark.stop()


if __name__ == "__main__":
    main()
