"""The ``iceberg-procedures`` data source beside ``read_table`` on a table of many files (pyspark 4).

Both read the same table: ``--files`` data files (default 20,000) in manifests of
``--files-per-manifest`` (default 100), each manifest one partition of ``p``, committed through our core.
Every data file is a hard link to one small Parquet file (100 rows), so the table is built in seconds
and the work is planning plus opening files, the part the two paths do differently: ``read_table`` reads
the data manifests in a Spark job of their own past its rule (more than 200 of them listing more than
20,000 files, ``scan_planning.reads_manifests_in_tasks``), the data source then in its read tasks
(``planning-min-manifests``).  Cases: a count of every row, and a count of one partition (``p = 7``,
pruned by the manifest list).  No Iceberg Java here: its runtime jar is for Spark 3.5; the reference
column is ``read_table``.  Counts are compared before anything is timed.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from _common import Figure, arg_parser, print_figures, scratch_dir, time_pair, timing_figures  # noqa: E402

import procedures  # noqa: E402
from procedures.spark.catalog_conf import load_catalog  # noqa: E402
from procedures.core.kernel.operations import FastAppend  # noqa: E402
from procedures.core.kernel.transaction import commit  # noqa: E402
from procedures.spark.read import read_table  # noqa: E402
from procedures.spec.conversions import to_bytes  # noqa: E402
from procedures.spec.manifest.model import DataFile, FileFormat  # noqa: E402
from procedures.spec.types import INT, LONG  # noqa: E402

CAT = "ours"


def build(spark, folder: Path, files: int, per_manifest: int) -> str:
    """The table ``ours.db.ds``; returns its name."""
    procedures.sql(spark, f"CREATE NAMESPACE IF NOT EXISTS {CAT}.db")
    procedures.sql(spark, f"DROP TABLE IF EXISTS {CAT}.db.ds PURGE")
    procedures.sql(spark, f"CREATE TABLE {CAT}.db.ds (id bigint, p int) USING iceberg PARTITIONED BY (p) "
                          "TBLPROPERTIES ('format-version'='2')")
    catalog = load_catalog(CAT, spark)
    t = catalog.load_table(("db", "ds"))
    source = folder / "source.parquet"
    pq.write_table(pa.table({"id": pa.array(range(100), pa.int64()), "p": pa.array([0] * 100, pa.int32())}), source)
    size = source.stat().st_size
    data = Path(t.location.replace("file:", "")) / "data"
    data.mkdir(parents=True, exist_ok=True)
    partitions = max(1, files // per_manifest)
    n = 0
    for m in range(partitions):
        group = []
        for _ in range(per_manifest):
            path = data / f"f-{n}.parquet"
            os.link(source, path)
            group.append(DataFile(str(path), FileFormat.PARQUET, (m,), 100, size,
                                  lower_bounds={1: to_bytes(0, LONG), 2: to_bytes(m, INT)},
                                  upper_bounds={1: to_bytes(99, LONG), 2: to_bytes(m, INT)}))
            n += 1
        t = commit(t, [FastAppend(group)])
    return f"{CAT}.db.ds"


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--files-per-manifest", type=int, default=100)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    warehouse = args.warehouse or scratch_dir("bench-datasource-")
    spark = (SparkSession.builder.master("local[2]").appName("bench-datasource")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.default.parallelism", "2").config("spark.pyspark.python", sys.executable)
             .config(f"spark.sql.catalog.{CAT}.type", "hadoop")
             .config(f"spark.sql.catalog.{CAT}.warehouse", str(warehouse)).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    started = time.perf_counter()
    ident = build(spark, Path(warehouse), args.files, args.files_per_manifest)
    print(f"built {args.files:,} files in {time.perf_counter() - started:.0f} s", flush=True)
    procedures.register_data_source(spark)
    figures: list[Figure] = []
    for label, where in ((f"{args.files:,} files, count all", None), (f"{args.files:,} files, count p = 7", "p = 7")):
        def ours(where=where) -> int:
            df = spark.read.format("iceberg-procedures").load(ident)
            return (df.where(where) if where else df).count()

        def reference(where=where) -> int:
            return read_table(spark, ident, filter=where).count()

        t_ours, t_ref = time_pair(ours, reference, repeat=args.repeat, warmup=args.warmup)
        if t_ours.result != t_ref.result:
            raise SystemExit(f"{label}: counts differ: data source {t_ours.result}, read_table {t_ref.result}")
        figures += timing_figures(label, t_ours, t_ref)
    print_figures(figures, title="the iceberg-procedures data source (ours) beside read_table (reference)")
    spark.stop()


if __name__ == "__main__":
    main()
