"""Every benchmark at a size that fits about 15 minutes on 2 cores, and one table of where we stand.

Runs each script of this folder in its own process (each starts its own Spark session), collects the
figures they print (``$BENCH_FIGURES``, JSON lines written by ``_common.print_figures``) and prints one
table: case, ours, Java (the script's reference), floor (Spark's plain Parquet reader or copy on the
same files, where the script measures one), ours/Java, the goal, and whether it is met.  Times are the
min of ``--repeat`` runs (default 3); the median is in each script's own output.

``--full`` runs the sizes the goals of issue 37 name (20M-row scans and appends, 5,000 snapshots, 20M-row
rewrites at data scale); it takes well over an hour here.  ``--only bench_scan,bench_expire`` runs a
subset.  A script that fails or times out is reported in the table, and the others still run.

``bench_connect`` (our own code on a Spark Connect session beside a classic one) and ``bench_datasource``
(the Spark 4 data source beside ``read_table``) need pyspark 4 with the ``connect`` extra: pass that
environment's Python as ``--spark4-python`` (they are skipped otherwise, and say so).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Bench:
    """One script run: its arguments at the quick and the full size, and the goals of its cases."""

    script: str
    quick: tuple[str, ...]
    full: tuple[str, ...]
    #: the most ours may take relative to the reference (1.0: no slower); None for the library
    #: micro-benchmarks that recorded why a codec was chosen (their figures are shown, not judged)
    goal: float | None
    #: the most ours may take relative to the floor, where the script measures one
    floor_goal: float | None = None
    #: the reference's name in the table's heading sense (Iceberg Java unless said)
    reference: str = "Java"
    timeout_s: int = 900
    #: runs on pyspark 4 (``--spark4-python``) rather than this interpreter's pyspark 3.5
    spark4: bool = False
    #: timed runs per side for this script, where ``--repeat`` would leave its verdict to noise
    min_repeat: int = 0


BENCHES = (
    Bench("bench_scan.py", ("--scale", "1"), ("--scale", "4"), goal=0.9, floor_goal=1.2),
    Bench("bench_append.py", ("--scale", "1"), ("--scale", "4"), goal=0.9),
    Bench("bench_expire.py", ("--sizes", "10,100,300"), ("--sizes", "10,100,1000,5000"), goal=0.5),
    Bench("bench_rewrite.py", (), ("--scale", "4"), goal=1.0, floor_goal=1.3),
    Bench("bench_rewrite_partitions.py", ("--partitions", "100", "--tables", "2", "--appends", "10"), (), goal=0.7),
    Bench("bench_data_scale.py", ("--rows", "1000000"), (), goal=1.0, floor_goal=1.3, timeout_s=1800),
    Bench("bench_metadata_scale.py", ("--files", "20000"), ("--files", "1000000"), goal=1.0, timeout_s=1800),
    Bench("bench_import.py", (), ("--scale", "4"), goal=1.0),
    Bench("bench_table_path.py", ("--sizes", "10,100"), (), goal=1.0),
    Bench("bench_manifests.py", ("--manifests", "200"), (), goal=1.0, reference="PyIceberg"),
    Bench("bench_deletion_vectors.py", (), (), goal=None, reference="former codec"),
    Bench("bench_avro_codecs.py", (), (), goal=None, reference="fastavro"),
    Bench("bench_orc_footer.py", (), (), goal=None, reference="former decoder"),
    Bench("bench_eq_deletes.py", (), (), goal=None, reference="former matching"),
    # its cases take 25-250 ms: with 3 or 5 runs the minimum of one side moves by 15% between runs
    Bench("bench_connect.py", ("--rows", "100000"), ("--rows", "1000000"), goal=1.15, reference="classic", spark4=True,
          min_repeat=9),
    # planning alone is the 1M-file case: at 2,000 files it times Spark's fixed cost of a Python data source
    Bench("bench_datasource.py", ("--files", "2000", "--cases", "all,partition"),
          ("--files", "1000000", "--cases", "partition,planning"), goal=1.0, reference="read_table",
          spark4=True, timeout_s=1800),
)


#: bench_scan's figure of ``mapInArrow`` handing the JVM as many rows with no reading behind them
HAND_OVER = " (hand-over)"


@dataclass
class Row:
    """One line of the summary table."""

    script: str
    case: str
    ours: float | None
    reference: float | None
    floor: float | None
    goal: float | None
    floor_goal: float | None
    reference_name: str

    @property
    def ratio(self) -> float | None:
        return self.ours / self.reference if self.ours is not None and self.reference else None

    @property
    def met(self) -> str:
        if self.ratio is None or self.goal is None:
            return "-"
        ok = self.ratio <= self.goal
        if self.floor_goal is not None and self.floor and self.ours is not None:
            ok = ok and self.ours / self.floor <= self.floor_goal
        return "yes" if ok else "NO"


def _rows(bench: Bench, figures: list[dict]) -> list[Row]:
    # a script that prints a progress table after each case records those figures again in its
    # final table: one row per (case, metric), the last recorded
    figures = list({(f["case"], f["metric"]): f for f in figures}.values())
    floors = {f["case"][: -len(" (plain spark)")]: f["reference"] for f in figures
              if f["metric"] == "wall min" and f["case"].endswith(" (plain spark)")}
    out = []
    for f in figures:
        if f["case"].endswith(" (plain spark)"):
            continue
        if f["metric"] in ("wall min",) or (f["unit"] in ("s", "ms", "us") and f["metric"].endswith(" min")):
            case = f["case"] if f["metric"] == "wall min" else f"{f['case']} {f['metric'][:-4]}"
            if case.endswith(HAND_OVER):
                # what the route's hand-over alone costs: shown beside ours, judged by no goal
                out.append(Row(bench.script, case, f["ours"], f["reference"], None, None, None, "hand-over"))
                continue
            out.append(Row(bench.script, case, f["ours"], f["reference"], floors.get(f["case"]), bench.goal,
                           bench.floor_goal if f["case"] in floors else None, bench.reference))
    return out


def _run(bench: Bench, full: bool, repeat: int, spark4_python: str | None,
         lock: str | None = None) -> tuple[list[Row], str | None]:
    python = spark4_python if bench.spark4 else sys.executable
    if not python:
        return [], "skipped: needs pyspark 4 with the connect extra (--spark4-python)"
    args = list(bench.full if full else bench.quick)
    results_json = Path(tempfile.mkdtemp(prefix="run-all-")) / "connect.json"
    if bench.script == "bench_connect.py":
        args += ["--json", str(results_json)]
    if bench.script not in ("bench_deletion_vectors.py", "bench_avro_codecs.py", "bench_orc_footer.py"):
        args += ["--repeat", str(max(repeat, bench.min_repeat))]
    with tempfile.NamedTemporaryFile("w+", suffix=".jsonl", delete=False) as sink:
        target = sink.name
    env = {**os.environ, "BENCH_FIGURES": target,
           "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    start = time.monotonic()
    try:
        # ``flock`` holds the lock for the script alone, so test runs sharing the machine slot in between
        # scripts rather than overlapping one
        command = (["flock", lock] if lock else []) + [python, str(HERE / bench.script), *args]
        done = subprocess.run(command, env=env, capture_output=True, text=True,
                              timeout=bench.timeout_s * (4 if full else 1))
        problem = None if done.returncode == 0 else f"failed (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:] or done.stdout.strip().splitlines()[-1:]}"
        if bench.script == "bench_connect.py" and done.returncode == 0:
            problem = _connect_figures(results_json, target)
    except subprocess.TimeoutExpired:
        problem = f"timed out after {time.monotonic() - start:.0f} s"
    figures = [json.loads(line) for line in Path(target).read_text().splitlines() if line.strip()]
    Path(target).unlink(missing_ok=True)
    return _rows(bench, figures), problem


def _connect_figures(results_json: Path, target: str) -> str | None:
    """bench_connect writes its own results (``--json``): each case's min on Connect beside classic."""
    if not results_json.exists():
        return "gave no results"
    with open(target, "a", encoding="utf-8") as out:
        for title, r in json.loads(results_json.read_text()).items():
            runs = r["runs"]
            out.write(json.dumps({"title": "connect", "case": f"{title} on Connect", "metric": "wall min",
                                  "ours": min(runs["connect"]) if runs.get("connect") else None,
                                  "reference": min(runs["classic"]), "unit": "s"}) + "\n")
    results_json.unlink()
    return None


def _fmt(value: float | None) -> str:
    return "-" if value is None else (f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}")


def render(rows: list[Row], problems: dict[str, str]) -> str:
    """The summary table, then one line per script that did not give figures."""
    header = ("case", "ours s", "ref s", "ref", "floor s", "ours/ref", "goal", "met")
    body = [(f"{r.script.removesuffix('.py')}: {r.case}", _fmt(r.ours), _fmt(r.reference), r.reference_name,
             _fmt(r.floor), "-" if r.ratio is None else f"{r.ratio:.2f}x",
             "-" if r.goal is None else
             f"<= {r.goal:g}x" + (f", floor <= {r.floor_goal:g}x" if r.floor_goal and r.floor else ""), r.met)
            for r in rows]
    widths = [max(len(str(x[i])) for x in (header, *body)) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in body]
    lines += [f"{script}: {why}" for script, why in problems.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks and print the summary table; exit status 1 when a goal is not met."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the sizes issue 37's goals name (over an hour)")
    parser.add_argument("--only", default="", help="comma-separated script names (with or without .py)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per side (default 3)")
    parser.add_argument("--spark4-python", default=None, help="a Python with pyspark 4 and its connect extra")
    parser.add_argument("--lock", default=None,
                        help="a lock file held (flock) while each script runs, on a machine shared with Spark tests")
    args = parser.parse_args(argv)
    wanted = {n if n.endswith(".py") else f"{n}.py" for n in args.only.split(",") if n}
    unknown = wanted - {b.script for b in BENCHES}
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    rows: list[Row] = []
    problems: dict[str, str] = {}
    started = time.monotonic()
    for bench in BENCHES:
        if wanted and bench.script not in wanted:
            continue
        t0 = time.monotonic()
        found, problem = _run(bench, args.full, args.repeat, args.spark4_python, args.lock)
        rows += found
        if problem:
            problems[bench.script] = problem
        print(f"[{time.monotonic() - started:6.0f} s] {bench.script}: {len(found)} cases in "
              f"{time.monotonic() - t0:.0f} s{'; ' + problem if problem else ''}", file=sys.stderr, flush=True)
    print(render(rows, problems))
    return 0 if all(r.met != "NO" for r in rows) and not problems else 1


if __name__ == "__main__":
    sys.exit(main())
