"""expire_snapshots: ours beside Iceberg Java's procedure on the same table state, in the same run.

For each size (default 10, 100, 1,000 and 5,000 snapshots, times --scale) a table gets one small append per
snapshot (copies of one Java-written Parquet file, committed through our core) and then a
merge-on-read DELETE by Java.  The table folder is saved; before every timed run it is restored, so
Java's ``CALL jcat.system.expire_snapshots`` and ours (``CALL ours.system.expire_snapshots``)
expire exactly the same snapshots (``older_than`` in the future, ``retain_last => 1``) and delete
the same files.  Both outputs are checked to be equal.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import (  # noqa: E402
    Figure, append_snapshots_table, arg_parser, hadoop_pair, jvm_peak_rss_mb, print_figures, reset_peak_rss, time_call,
    timing_figures,
)

import procedures  # noqa: E402

CALL = "CALL {cat}.system.expire_snapshots(table => 'db.{name}', older_than => TIMESTAMP '2100-01-01 00:00:00', retain_last => 1)"


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000,5000", help="snapshot counts (comma-separated)")
    args = parser.parse_args()
    warehouse, spark, ours = hadoop_pair(args, "bench-expire-")
    figures: list[Figure] = []
    for size in (int(s) * args.scale for s in args.sizes.split(",")):
        name = f"expire_{size}"
        folder = Path(append_snapshots_table(spark, ours, name, size).location.replace("file:", ""))
        saved = warehouse / f"saved-{name}"
        shutil.rmtree(saved, ignore_errors=True)
        shutil.copytree(folder, saved)

        def restore() -> None:
            shutil.rmtree(folder)
            shutil.copytree(saved, folder)
            spark.sql(f"REFRESH TABLE jcat.db.{name}")

        reset_peak_rss(spark)
        ref = time_call(lambda: [tuple(r) for r in spark.sql(CALL.format(cat="jcat", name=name)).collect()],
                        name="java", repeat=args.repeat, warmup=args.warmup, setup=restore)
        java_rss = jvm_peak_rss_mb(spark)
        reset_peak_rss(spark)
        mine = time_call(lambda: [tuple(r) for r in procedures.sql(spark, CALL.format(cat="ours", name=name)).collect()],
                         name="ours", repeat=args.repeat, warmup=args.warmup, setup=restore)
        ours_rss = jvm_peak_rss_mb(spark)
        assert mine.result == ref.result, (mine.result, ref.result)
        case = f"{size} snapshots"
        figures += timing_figures(case, mine, ref)
        figures.append(Figure(case, "files deleted", sum(mine.result[0]), sum(ref.result[0]), "files"))
        figures.append(Figure(case, "JVM peak RSS", ours_rss, java_rss, "MiB"))
    print_figures(figures, title="expire_snapshots: ours vs Iceberg Java 1.10.2 (reference) on the same table state")
    spark.stop()


if __name__ == "__main__":
    main()
