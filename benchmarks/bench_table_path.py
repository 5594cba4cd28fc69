"""rewrite_table_path: ours beside Iceberg Java's procedure on the same table, in the same run.

For each size (default 10, 100 and 500 snapshots, times --scale) a table gets one small append per
snapshot (copies of one Java-written Parquet file, committed through our core, so every snapshot
adds a manifest) and then a merge-on-read DELETE by Java.  The procedure does not change the table,
so both sides restage the same table: a full rewrite into a fresh staging folder each run (removed
untimed before the next).  Both file lists are checked to hold the same lines apart from the
staging folder.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import Figure, append_snapshots_table, arg_parser, hadoop_pair, print_figures, time_pair, timing_figures  # noqa: E402

import procedures  # noqa: E402

CALL = ("CALL {cat}.system.rewrite_table_path(table => 'db.{name}', source_prefix => '{source}', "
        "target_prefix => '/copy/{name}', staging_location => '{staging}')")


def file_list(path: str, staging: str) -> list[str]:
    """The file list's lines with the staging folder taken out."""
    with open(path.replace("file:", "")) as f:
        return sorted(line.replace(staging, "<staging>/") for line in f)


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,500", help="snapshot counts (comma-separated)")
    args = parser.parse_args()
    warehouse, spark, ours = hadoop_pair(args, "bench-table-path-")
    figures: list[Figure] = []
    for size in (int(s) * args.scale for s in args.sizes.split(",")):
        name = f"tp_{size}"
        source = append_snapshots_table(spark, ours, name, size).metadata.location
        stages = {side: f"{warehouse}/stage-{side}-{name}/" for side in ("ours", "java")}

        def clear(side: str) -> None:
            shutil.rmtree(stages[side], ignore_errors=True)

        def run(side: str) -> tuple:
            cat = "ours" if side == "ours" else "jcat"
            call = CALL.format(cat=cat, name=name, source=source, staging=stages[side])
            rows = (procedures.sql(spark, call) if side == "ours" else spark.sql(call)).collect()
            return tuple(rows[0])

        mine, ref = time_pair(lambda: run("ours"), lambda: run("java"), repeat=args.repeat, warmup=args.warmup,
                              setup_ours=lambda: clear("ours"), setup_reference=lambda: clear("java"))
        assert file_list(mine.result[1], stages["ours"]) == file_list(ref.result[1], stages["java"])
        case = f"{size} snapshots"
        figures += timing_figures(case, mine, ref)
        figures.append(Figure(case, "manifests restaged", mine.result[2], None, "files"))
    print_figures(figures, title="rewrite_table_path: ours vs Iceberg Java 1.10.2 (reference), full rewrite")
    spark.stop()


if __name__ == "__main__":
    main()
