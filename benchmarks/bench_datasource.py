"""The ``iceberg-procedures`` data source beside ``read_table`` on a table of many files (pyspark 4).

Both read the same table: ``--files`` data files (default 20,000) in manifests of
``--files-per-manifest`` (default 100), each manifest one partition of ``p`` (its files in folder
``data/p=<p>``), committed through our core, a hundred manifests a snapshot.  Every data file is a hard
link to a small Parquet file (100 rows, ids 0 to 99; a new one every 50,000 links, under the file
system's limit of links to one file), so even 1M files are built in minutes and the work is planning
plus opening files, the part the two paths do differently: ``read_table`` reads the data manifests in a
Spark job of their own past its rule (more than 200 of them listing more than 20,000 files,
``scan_planning.reads_manifests_in_tasks``), the data source then in its read tasks
(``planning-min-manifests``).  Cases (``--cases``): ``all``, a count of every row; ``partition``, a
count of one partition (``p = 7``, pruned by the manifest list); ``planning``, a count of ``id > 1000``,
which every file's metrics prune, so it is planning alone (every manifest read, no file opened).  No
Iceberg Java here: its runtime jar is for Spark 3.5; the reference column is ``read_table``.  Counts
are compared before anything is timed.
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

from _common import BulkAppend, Figure, arg_parser, print_figures, scratch_dir, time_pair, timing_figures  # noqa: E402

import procedures  # noqa: E402
from procedures.spark.catalog_conf import load_catalog  # noqa: E402
from procedures.core.kernel.transaction import commit  # noqa: E402
from procedures.spark.read import read_table  # noqa: E402
from procedures.spec.conversions import to_bytes  # noqa: E402
from procedures.spec.manifest.model import DataFile, FileFormat  # noqa: E402
from procedures.spec.types import INT, LONG  # noqa: E402

CAT = "ours"


#: hard links to one source file: ext4 allows 65,000
LINKS_PER_SOURCE = 50_000
#: manifests a snapshot of the build appends
MANIFESTS_PER_COMMIT = 100
#: case -> (label, filter)
CASES = {"all": ("count all", None), "partition": ("count p = 7", "p = 7"),
         "planning": ("count id > 1000 (planning alone)", "id > 1000")}


def build(spark, folder: Path, files: int, per_manifest: int) -> str:
    """The table ``ours.db.ds``; returns its name."""
    procedures.sql(spark, f"CREATE NAMESPACE IF NOT EXISTS {CAT}.db")
    procedures.sql(spark, f"DROP TABLE IF EXISTS {CAT}.db.ds PURGE")
    procedures.sql(spark, f"CREATE TABLE {CAT}.db.ds (id bigint, p int) USING iceberg PARTITIONED BY (p) "
                          "TBLPROPERTIES ('format-version'='2')")
    catalog = load_catalog(CAT, spark)
    t = catalog.load_table(("db", "ds"))
    rows = pa.table({"id": pa.array(range(100), pa.int64()), "p": pa.array([0] * 100, pa.int32())})
    sources: list[Path] = []
    data = Path(t.location.replace("file:", "")) / "data"
    partitions = max(1, files // per_manifest)
    started = time.perf_counter()
    n = 0
    for first in range(0, partitions, MANIFESTS_PER_COMMIT):
        groups = []
        for m in range(first, min(partitions, first + MANIFESTS_PER_COMMIT)):
            folder_m = data / f"p={m}"
            folder_m.mkdir(parents=True, exist_ok=True)
            group = []
            for _ in range(per_manifest):
                if n // LINKS_PER_SOURCE >= len(sources):
                    sources.append(folder / f"source-{len(sources)}.parquet")
                    pq.write_table(rows, sources[-1])
                path = folder_m / f"f-{n}.parquet"
                os.link(sources[n // LINKS_PER_SOURCE], path)
                group.append(DataFile(str(path), FileFormat.PARQUET, (m,), 100, sources[0].stat().st_size,
                                      lower_bounds={1: to_bytes(0, LONG), 2: to_bytes(m, INT)},
                                      upper_bounds={1: to_bytes(99, LONG), 2: to_bytes(m, INT)}))
                n += 1
            groups.append(group)
        t = commit(t, [BulkAppend(groups)])
        if files >= 100_000 and (first // MANIFESTS_PER_COMMIT) % 20 == 19:
            print(f"  {n:,} files ({time.perf_counter() - started:.0f} s)", flush=True)
    return f"{CAT}.db.ds"


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--files-per-manifest", type=int, default=100)
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {','.join(CASES)}")
    args = parser.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    for case in cases:
        if case not in CASES:
            raise SystemExit(f"unknown case {case!r}; choose from {', '.join(CASES)}")
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
    for case in cases:
        what, where = CASES[case]
        label = f"{args.files:,} files, {what}"

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
