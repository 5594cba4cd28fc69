"""Table scans of a 5M-row (x --scale) table: our ``read_table`` (driver planning + ``mapInArrow``
Parquet reads) beside Iceberg Java's Spark scan of the same table in the same session, and beside
Spark's plain Parquet reader on the same data files (the floor: no deletes applied, no planning).

Cases (``--cases``):

* ``posdel``: a v2 table with 5% of its rows deleted by position delete files, every column aggregated;
* ``dv``: the same rows in a v3 table, the 5% deleted by deletion vectors;
* ``filter``: the v2 table with a selective filter (1% of the ids; files hold id ranges, so metrics prune);
* ``eqdel``: the same rows in a v2 table whose 5% are deleted by an equality delete file on ``id``
  (written and committed by this package: Spark's SQL writes only position deletes);
* ``columns``: a 20-column v2 table with the same deletes, 3 of its columns read (``id``, the double
  ``c8`` and the string ``c13``).

Both sides compute the same aggregate, and the script checks they agree (and that the deleted rows are
gone) before printing figures; the floor's rows differ by the deleted ones and are not compared.  Driver peak RSS is printed for ``posdel``.

A third figure per case (not ``filter``), ``(hand-over)``, is what ``mapInArrow`` alone costs: a job
with a task per data file, as our read has on these tables, whose Python worker (set up as our
reader's are) reads one batch of its file's columns and hands the JVM that batch over and over until
it has sent the file's share of the live rows, under the same aggregate (its rows, repeats of one
batch, are not compared).  Our Python reader cannot be faster than that: what it takes beyond it is
its own reading and delete work (the two compete for the same cores).
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
    time_call,
    time_pair,
    timing_figures,
)

from dataclasses import replace  # noqa: E402

import pyarrow as pa  # noqa: E402

from procedures.catalog.hadoop import HadoopCatalog  # noqa: E402
from procedures.core.kernel.operations import RowDelta  # noqa: E402
from procedures.core.kernel.transaction import commit  # noqa: E402
from procedures.io.parquet_reader import DEFAULT_BATCH_SIZE  # noqa: E402
from procedures.io.parquet_writer import WriteSettings, write_data_files  # noqa: E402
from procedures.spark.read import read_table  # noqa: E402
from procedures.spark.worker import prepare_python_worker  # noqa: E402
from procedures.spec.manifest.model import FileContent  # noqa: E402
from procedures.spec.schema import Schema  # noqa: E402

CASES = ("posdel", "dv", "eqdel", "filter", "columns")
AGG = ["count(*) AS n", "sum(id) AS s_id", "sum(v) AS s_v", "sum(length(s)) AS s_len"]
# c8 is a double: the former sum(c7) summed a string column, null for every row, and spent most of
# the time on both sides parsing 5M strings as doubles
WIDE_AGG = ["count(*) AS n", "sum(id) AS s_id", "sum(c8) AS s_8", "sum(length(c13)) AS s_13"]


def _create(spark, ident: str, rows: int, version: int, wide: bool, equality: bool = False) -> None:
    spark.sql(f"DROP TABLE IF EXISTS {ident} PURGE")
    if wide:
        cols = ", ".join(f"c{i} {'string' if i % 2 else 'double'}" for i in range(1, 20))
        exprs = ", ".join(f"concat('c{i}-', id) AS c{i}" if i % 2 else f"id * {i}.5 AS c{i}" for i in range(1, 20))
        spark.sql(f"CREATE TABLE {ident} (id bigint, {cols}) USING iceberg "
                  f"TBLPROPERTIES ('format-version'='{version}', 'write.delete.mode'='merge-on-read')")
        spark.sql(f"INSERT INTO {ident} SELECT id, {exprs} FROM range({rows})")
    else:
        spark.sql(f"CREATE TABLE {ident} (id bigint, v double, s string) USING iceberg "
                  f"TBLPROPERTIES ('format-version'='{version}', 'write.delete.mode'='merge-on-read')")
        spark.sql(f"INSERT INTO {ident} SELECT id, id * 0.5, concat('row-', id) FROM range({rows})")
    if equality:
        _equality_delete(spark, ident, rows)
    else:
        spark.sql(f"DELETE FROM {ident} WHERE id % 20 = 7")  # 5% of rows, as position deletes or DVs


def _equality_delete(spark, ident: str, rows: int) -> None:
    """Delete the same 5% of rows (``id % 20 = 7``) with one equality delete file on ``id``."""
    warehouse = spark.conf.get("spark.sql.catalog.jcat.warehouse")
    table = HadoopCatalog("jcat", warehouse).load_table(tuple(ident.split(".")[1:]))
    md = table.metadata
    key = Schema((md.schema().find_field("id"),))
    settings = replace(WriteSettings.from_metadata(md), schema=key, dictionary_columns=())
    ids = pa.table({"id": pa.array(range(7, rows, 20), pa.int64())})
    files = [replace(f, content=FileContent.EQUALITY_DELETES, equality_ids=(key.fields[0].field_id,))
             for f in write_data_files(table.io, settings, [ids])]
    commit(table, [RowDelta(add_deletes=files)])
    spark.sql(f"REFRESH TABLE {ident}")


def _hand_over(spark, files: list[tuple[str, int]], columns: list[str], schema) -> object:
    """A ``mapInArrow`` DataFrame handing the JVM ``rows`` rows of ``columns`` per data file ``(path,
    rows)``, a task per file, the rows being the file's first batch repeated (no reading, no deletes)."""
    plan = list(files)

    def hand_over(batches):
        import pyarrow.parquet as pq

        prepare_python_worker()  # the per-task set-up our reader's tasks run
        for batch in batches:
            for index in batch.column(0).to_pylist():
                path, rows = plan[index]
                first = next(pq.ParquetFile(path).iter_batches(batch_size=DEFAULT_BATCH_SIZE, columns=columns))
                sent = 0
                while sent < rows:
                    part = first.slice(0, min(first.num_rows, rows - sent))
                    sent += part.num_rows
                    yield part

    return spark.range(0, len(plan), 1, len(plan)).mapInArrow(hand_over, schema)


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {','.join(CASES)}")
    args = parser.parse_args()
    rows = 5_000_000 * args.scale
    spark = start_spark(args.warehouse)
    figures: list[Figure] = []
    built: set[str] = set()

    def table(version: int, wide: bool, equality: bool = False) -> str:
        ident = f"jcat.db.bench_scan_v{version}{'_wide' if wide else ''}{'_eq' if equality else ''}"
        if ident not in built:
            _create(spark, ident, rows, version, wide, equality)
            built.add(ident)
        return ident

    for case in args.cases.split(","):
        if case not in CASES:
            raise SystemExit(f"unknown case {case!r}; choose from {', '.join(CASES)}")
        ident = table(3 if case == "dv" else 2, case == "columns", case == "eqdel")
        agg, where = (WIDE_AGG if case == "columns" else AGG), None
        if case == "filter":
            where = f"id < {rows // 100}"
        data_files = [r[0] for r in spark.sql(f"SELECT file_path FROM {ident}.data_files").collect()]

        # our API's projection and filter are read_table's ``columns`` and ``filter`` (a mapInArrow
        # DataFrame cannot see a later select or where); Java's and the floor's come from the plan
        columns = ["id", "c8", "c13"] if case == "columns" else None

        def ours(ident=ident, agg=agg, where=where, columns=columns):
            return read_table(spark, ident, filter=where, columns=columns).selectExpr(*agg).collect()[0]

        def java(ident=ident, agg=agg, where=where):
            df = spark.table(ident)
            return (df.where(where) if where else df).selectExpr(*agg).collect()[0]

        def floor(agg=agg, where=where, files=data_files):
            df = spark.read.parquet(*files)
            return (df.where(where) if where else df).selectExpr(*agg).collect()[0]

        label = {"posdel": "5% pos-deleted, all columns", "dv": "v3, 5% deleted by DVs, all columns",
                 "eqdel": "5% deleted by an equality delete, all columns",
                 "filter": "5% pos-deleted, 1% of ids", "columns": "20 columns, 3 read, 5% pos-deleted"}[case]
        label = f"scan {rows / 1e6:g}M, {label}"
        if case == "posdel":
            # memory first, each side alone (peak RSS covers a whole phase); then timings in alternation
            reset_peak_rss(spark)
            java()
            jvm_ref, rss_before = jvm_peak_rss_mb(spark), driver_peak_rss_mb()
            reset_peak_rss(spark)
            ours()
            jvm_ours, rss_ours = jvm_peak_rss_mb(spark), driver_peak_rss_mb()
        t_ours, t_ref = time_pair(ours, java, repeat=args.repeat, warmup=args.warmup)
        expected = rows - rows // 20 if where is None else None
        if t_ours.result != t_ref.result or (expected is not None and t_ours.result["n"] != expected):
            raise SystemExit(f"{label}: results differ: ours {t_ours.result} vs Java {t_ref.result}")
        t_floor = time_call(floor, name="plain parquet", repeat=args.repeat, warmup=args.warmup)
        figures += timing_figures(label, t_ours, t_ref)
        figures += timing_figures(f"{label} (plain spark)", t_ours, t_floor)
        if where is None:
            counts = {r[0]: r[1] for r in spark.sql(f"SELECT file_path, record_count FROM {ident}.data_files").collect()}
            live, total = t_ours.result["n"], sum(counts.values())
            shares = [(path, round(n * live / total)) for path, n in counts.items()]
            names = columns or [f.name for f in spark.table(ident).schema.fields]
            schema = spark.table(ident).select(*names).schema
            handed = _hand_over(spark, shares, names, schema)
            t_hand = time_call(lambda df=handed, agg=agg: df.selectExpr(*agg).collect()[0], name="hand-over",
                               repeat=args.repeat, warmup=args.warmup)
            figures += timing_figures(f"{label} (hand-over)", t_ours, t_hand)
        if case == "posdel":
            figures.append(Figure(label, "driver (py) peak RSS", rss_ours, rss_before, "MiB"))
            figures.append(Figure(label, "JVM peak RSS", jvm_ours, jvm_ref, "MiB"))
    print_figures(figures, title="Table scans: ours vs Iceberg Java (reference); (plain spark): ours vs Spark's Parquet "
                                 "reader; (hand-over): ours vs mapInArrow handing over as many rows with no reading")
    spark.stop()


if __name__ == "__main__":
    main()
