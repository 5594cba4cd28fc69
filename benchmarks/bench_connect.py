"""Spark Connect beside a classic session: a write, a read, expire_snapshots, remove_orphan_files,
rewrite_data_files and rewrite_manifests, each timed on both kinds in the same run, outputs compared
first (the goal: Connect at most 1.15x classic).

Both sessions share one local[N] JVM, so they have the same cores and executors: the classic session is
this process's own, and its driver also runs the Spark Connect server plugin, to which a Connect client
session of this process connects over loopback.  Each case's table is set up again before every timed
run (untimed, on the classic session), so both kinds do identical work; their outputs (procedure rows,
with table locations replaced and the ``*_bytes_count`` columns left out, since file bytes depend on the
order rows reach a task) and the tables' contents must agree before any figure is printed.  The GC steps
are forced onto Spark (the size rules would keep a small table's on the driver), as the cluster test does;
the read case plans its scan with the size rules as shipped (on the driver, as a user's read of its table).

``--baseline-commit REV`` also runs the classic cases on the package as it was at REV (a ``git archive``
of REV in a temporary folder, the package imported from there and shipped to the workers through
PYTHONPATH): the "classic no slower than before" check of a change.  Then each side runs in a
long-lived worker process of its own (``--serve``: its own JVM, started the same way, both with the
Connect server plugin, each from a folder holding only its copy of the package) and the coordinator
interleaves their runs, rotating the order every attempt, so both sides meet the same machine load
and the same JVM warm-up; running the baseline first in a separate process made the figures depend
on what else ran on a shared machine at the time.  The table gives, beside each ratio of minimums,
the median of the attempt-by-attempt ratios (``paired``).  The read case's table is written once,
by this checkout, in a warehouse both workers share (catalog ``shared``): each side's writer lays
out its files its own way (4e2c9ce wrote the string column dictionary-encoded, in files 3.3 times as
large), and a read of other files is other work.
``--kinds classic`` runs the classic side alone (pyspark 3.5 has no Connect server).

    python benchmarks/bench_connect.py --rows 200000 --repeat 3
    python benchmarks/bench_connect.py --baseline-commit main --kinds classic
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
#: where ``procedures`` is imported from: this checkout, or a baseline commit's copy (--baseline-commit)
ROOT = Path(os.environ.get("BENCH_PROCEDURES_ROOT") or REPO)
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))


KINDS = ("classic", "connect")
CATALOG = "bench"
#: the catalog of the read case's table: a warehouse of its own that a baseline's worker shares, so
#: both sides read the same files (each side's writer lays them out its own way)
READ_CATALOG = "shared"


def read_source_dir(warehouse: Path, read_source: Path | None) -> Path:
    """The read case's warehouse: ``read_source`` when a coordinator shares one, else a folder of
    ``warehouse``."""
    return read_source or warehouse / "read-source"
GOAL = 1.15
AGG = ("count(*) AS n", "sum(id) AS s_id", "sum(v) AS s_v", "sum(length(s)) AS s_len", "count(DISTINCT p) AS parts")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall seconds of one ``fn()`` and its result (no import of ``_common``: a baseline commit's
    package may lack what it imports)."""
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------ sessions
def start_sessions(warehouse: Path, kinds: tuple[str, ...], cores: int, read_source: Path | None = None) -> dict[str, Any]:
    """The classic session (local[``cores``]) and, when asked, a Connect session on the Connect server
    plugin of the same driver; the read case's catalog is on ``read_source`` (default: a folder of
    ``warehouse``)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    # the workers import the same package as this driver (this checkout, or the baseline's copy)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(f"local[{cores}]").appName("bench-connect")
               .config(f"spark.sql.catalog.{CATALOG}.type", "hadoop")
               .config(f"spark.sql.catalog.{CATALOG}.warehouse", str(warehouse))
               .config(f"spark.sql.catalog.{READ_CATALOG}.type", "hadoop")
               .config(f"spark.sql.catalog.{READ_CATALOG}.warehouse", str(read_source_dir(warehouse, read_source)))
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(cores)).config("spark.default.parallelism", str(cores))
               .config("spark.driver.memory", "2g").config("spark.sql.session.timeZone", "UTC")
               .config("spark.pyspark.python", sys.executable))
    port = None
    if "connect" in kinds:
        port = free_port()
        builder = (builder.config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
                   .config("spark.connect.grpc.binding.address", "127.0.0.1")
                   .config("spark.connect.grpc.binding.port", str(port)))
    classic = builder.getOrCreate()
    classic.sparkContext.setLogLevel("ERROR")
    sessions = {"classic": classic}
    if port is not None:
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        sessions["connect"] = ConnectSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()
    return sessions


#: (module, attribute, value before forcing) of each size rule :func:`force_distributed_steps` changed
_FORCED: list[tuple[Any, str, Any]] = []


def force_distributed_steps() -> None:
    """GC steps as Spark jobs even on small tables (as tests/helpers/cluster_flow.py does); attributes a
    baseline commit lacks are left alone."""
    from procedures.core.gc import reachability

    # the directory limit lives in the GC steps of the Spark engine now, in the orphans action before
    orphans = []
    for module_name in ("procedures.spark.engine.gc_steps", "procedures.spark.actions.remove_orphan_files"):
        try:
            orphans.append(importlib.import_module(module_name))
        except ImportError:
            continue
    for module, name, value in ((reachability, "DRIVER_MAX_MANIFESTS", 0), (reachability, "DRIVER_MAX_LISTS", 0),
                                *((m, "DRIVER_MAX_DIRS", 1) for m in orphans)):
        if hasattr(module, name):
            _FORCED.append((module, name, getattr(module, name)))
            setattr(module, name, value)


@contextlib.contextmanager
def size_rules_as_shipped() -> Iterator[None]:
    """The size rules :func:`force_distributed_steps` changed, as the package ships them, for the
    block.  A scan plans its manifests in a Spark job past the GC's manifest limit too, so forced
    GC steps made the read case's scan of a 4-manifest table a planning job (about 70 ms a read
    since the DataFrame conversion, 30 ms before it), which no user's read of such a table runs."""
    forced = [(module, name, getattr(module, name)) for module, name, _ in _FORCED]
    for module, name, shipped in _FORCED:
        setattr(module, name, shipped)
    try:
        yield
    finally:
        for module, name, value in forced:
            setattr(module, name, value)


# ------------------------------------------------------------------------------------------ tables
def sql(spark: Any, text: str) -> Any:
    import procedures

    return procedures.sql(spark, text)


def create(spark: Any, name: str, partitions: bool = True, catalog: str = CATALOG) -> str:
    """An empty table ``bench.db.<name>`` (dropped first); its ``db.<name>`` for CALLs.

    Its appends are not shuffled (``write.distribution-mode`` ``none``), which is how commits before
    the package followed that property wrote too: a baseline commit's tables then have the same files
    as this checkout's.  With Java's default for a partitioned table (``hash``) this checkout wrote
    one 50k-row file per partition where the baseline wrote two of 25k (and its write did a shuffle
    the baseline's did not), so the two sides' reads and writes were not the same work."""
    sql(spark, f"CREATE NAMESPACE IF NOT EXISTS {catalog}.db")
    sql(spark, f"DROP TABLE IF EXISTS {catalog}.db.{name} PURGE")
    sql(spark, f"CREATE TABLE {catalog}.db.{name} (id bigint NOT NULL, v double, s string, p int) USING iceberg "
               + ("PARTITIONED BY (p) " if partitions else "")
               + "TBLPROPERTIES ('format-version' = '2', 'write.distribution-mode' = 'none')")
    return f"db.{name}"


def insert(spark: Any, name: str, start: int, rows: int, catalog: str = CATALOG) -> None:
    sql(spark, f"INSERT INTO {catalog}.db.{name} SELECT id, id * 0.5, concat('row-', id), CAST(id % 4 AS int) "
               f"FROM range({start}, {start + rows})")


def small_commits(spark: Any, name: str, commits: int, rows: int) -> str:
    """A table of ``commits`` small appends (a snapshot, a manifest and a few files each)."""
    short = create(spark, name)
    for i in range(commits):
        insert(spark, name, i * rows, rows)
    return short


def plant_orphans(warehouse: Path, name: str, count: int) -> None:
    """``count`` files no metadata references, old enough for remove_orphan_files' default (3 days)."""
    old = time.time() - 10 * 24 * 3600
    for i in range(count):
        path = warehouse / "db" / name / "data" / f"p={i % 4}" / f"orphan-{i:05d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"not referenced by any metadata")
        os.utime(path, (old, old))


def rows_of(df: Any, location: str) -> list[dict]:
    """Procedure output rows, comparable across tables: locations relative, byte counts left out."""
    out = []
    for row in df.collect():
        d = row.asDict(recursive=True)
        out.append({k: (v.replace(location, "<table>") if isinstance(v, str) else v)
                    for k, v in sorted(d.items()) if not k.endswith("bytes_count")})
    return sorted(out, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def contents(spark: Any, name: str, catalog: str = CATALOG) -> list:
    """The table's aggregate (``AGG``) read through ``read_table``."""
    from procedures.spark.read import read_table

    return [list(r) for r in read_table(spark, f"{catalog}.db.{name}").selectExpr(*AGG).collect()]


# ------------------------------------------------------------------------------------------ cases
class Case:
    """One benchmark case: ``setup(name)`` builds its table on the classic session (untimed) and
    returns the CALL's table argument; ``run(spark, name, short)`` is timed and returns the output to
    compare; afterwards the table's contents are compared too (``check``)."""

    def __init__(self, title: str, setup: Callable[[str], str], run: Callable[[Any, str, str], Any],
                 check: bool = True) -> None:
        self.title, self.setup, self.run, self.check = title, setup, run, check


def cases(classic: Any, warehouse: Path, args: argparse.Namespace, read_source: Path | None = None) -> list[Case]:
    rows, commits = args.rows, args.commits
    read_name = "read_src"

    def location(name: str) -> str:
        return str(warehouse / "db" / name)

    def call(spark: Any, name: str, text: str) -> list[dict]:
        return rows_of(sql(spark, f"CALL {CATALOG}.system.{text}"), location(name))

    def read_setup(_: str) -> str:
        # written once, by the first side to get here (this checkout's: it runs first in attempt 0)
        if not (read_source_dir(warehouse, read_source) / "db" / read_name / "metadata").is_dir():
            create(classic, read_name, catalog=READ_CATALOG)
            insert(classic, read_name, 0, rows, catalog=READ_CATALOG)
        return f"db.{read_name}"

    def read_run(spark: Any, _: str, __: str) -> list:
        with size_rules_as_shipped():
            return contents(spark, read_name, READ_CATALOG)

    return [
        Case(f"write {rows:,} rows", lambda name: create(classic, name),
             lambda spark, name, _: insert(spark, name, 0, rows)),
        Case(f"read {rows:,} rows", read_setup, read_run, check=False),
        Case(f"expire_snapshots ({commits} snapshots)", lambda name: small_commits(classic, name, commits, 10),
             lambda spark, name, short: call(spark, name, f"expire_snapshots(table => '{short}', "
                                                          "older_than => TIMESTAMP '2999-01-01 00:00:00', "
                                                          "retain_last => 1)")),
        Case(f"remove_orphan_files ({args.orphans} orphans)",
             lambda name: (small_commits(classic, name, 4, 10), plant_orphans(warehouse, name, args.orphans))[0],
             lambda spark, name, short: call(spark, name, f"remove_orphan_files(table => '{short}')")),
        Case(f"rewrite_data_files ({commits} commits)", lambda name: small_commits(classic, name, commits, rows // commits),
             lambda spark, name, short: call(spark, name, f"rewrite_data_files(table => '{short}', "
                                                          "options => map('min-input-files', '2'))")),
        Case(f"rewrite_manifests ({commits} manifests)", lambda name: small_commits(classic, name, commits, 10),
             lambda spark, name, short: call(spark, name, f"rewrite_manifests(table => '{short}')")),
    ]


# ------------------------------------------------------------------------------------------ running
def run_once(case: Case, index: int, sessions: dict[str, Any], kind: str, attempt: int) -> tuple[float, dict]:
    """One timed run of ``case`` on ``kind``: its table set up first (untimed, classic), its output
    (and the table's contents) afterwards, the table dropped."""
    name = f"c{index}_{kind}_{attempt}"
    short = case.setup(name)
    seconds, result = timed(lambda: case.run(sessions[kind], name, short))
    output = {"output": result}
    if case.check:
        output["contents"] = contents(sessions["classic"], name)
        sql(sessions["classic"], f"DROP TABLE IF EXISTS {CATALOG}.db.{name} PURGE")
    return seconds, output


def same(a: Any, b: Any) -> bool:
    """Outputs compared as JSON (a worker's come back through JSON, a tuple as a list)."""
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def measure(sessions: dict[str, Any], warehouse: Path, args: argparse.Namespace) -> dict:
    """``{case: {"outputs": {kind: output}, "runs": {kind: [seconds]}, "errors": {kind: text}}}``;
    stops at the first case whose outputs differ between the kinds.  A kind whose run raises is not
    run again for that case (its error is shown in the table: before the Spark layer's conversion is
    merged, the Connect side fails this way)."""
    if not args.local_gc:
        force_distributed_steps()
    results: dict[str, dict] = {}
    kinds = [k for k in KINDS if k in sessions]
    for index, case in enumerate(cases(sessions["classic"], warehouse, args)):
        outputs: dict[str, Any] = {}
        runs: dict[str, list[float]] = {k: [] for k in kinds}
        errors: dict[str, str] = {}
        for attempt in range(args.warmup + args.repeat):
            # alternate which kind goes first, so neither always meets a warmer JVM
            for kind in (kinds if attempt % 2 == 0 else kinds[::-1]):
                if kind in errors:
                    continue
                try:
                    seconds, output = run_once(case, index, sessions, kind, attempt)
                except Exception as e:  # noqa: BLE001 -- shown in the table, the other kind goes on
                    errors[kind] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
                    if kind == "classic":
                        raise
                    continue
                if attempt == 0:
                    outputs[kind] = output
                elif not same(output, outputs[kind]):
                    raise SystemExit(f"{case.title}: {kind} gave another output on run {attempt}: {output} "
                                     f"(first: {outputs[kind]})")
                if attempt >= args.warmup:
                    runs[kind].append(seconds)
            if attempt == 0 and len({json.dumps(o, sort_keys=True, default=str) for o in outputs.values()}) > 1:
                raise SystemExit(f"{case.title}: outputs differ between the session kinds: "
                                 + json.dumps(outputs, indent=1, default=str))
        results[case.title] = {"outputs": outputs, "runs": runs, "errors": errors}
        print(f"  {case.title}: " + ", ".join(f"{k} {min(v):.3f} s" if v else f"{k} {errors.get(k)}"
                                              for k, v in runs.items()), file=sys.stderr)
    return results


#: how a worker (``--serve``) marks its answer lines on stdout, among whatever else lands there
ANSWER = "BENCH-ANSWER "


def serve(args: argparse.Namespace) -> int:
    """Worker mode of the interleaved baseline: start the sessions once, then run the case runs the
    coordinator asks for on stdin (``{"case": i, "kind": k, "attempt": a}``, one JSON per line; an
    empty line ends), answering each with ``seconds`` and ``output`` (or ``error``)."""
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    warehouse = Path(tempfile.mkdtemp(prefix="bench-connect-"))
    sessions = start_sessions(warehouse, kinds, args.cores, args.read_source)
    if not args.local_gc:
        force_distributed_steps()
    all_cases = cases(sessions["classic"], warehouse, args, args.read_source)
    print(ANSWER + json.dumps({"ready": [c.title for c in all_cases]}), flush=True)
    try:
        for line in sys.stdin:
            if not line.strip():
                break
            ask = json.loads(line)
            try:
                seconds, output = run_once(all_cases[ask["case"]], ask["case"], sessions, ask["kind"], ask["attempt"])
                answer = {"seconds": seconds, "output": output}
            except Exception as e:  # noqa: BLE001 -- the coordinator shows it
                answer = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"}
            print(ANSWER + json.dumps(answer, default=str), flush=True)
    finally:
        for session in reversed(list(sessions.values())):
            session.stop()
        shutil.rmtree(warehouse, ignore_errors=True)
    return 0


class Worker:
    """A ``--serve`` subprocess running this script on the package found in ``root``."""

    def __init__(self, label: str, root: Path, kinds: str, args: argparse.Namespace, read_source: Path) -> None:
        command = [sys.executable, str(Path(__file__).resolve()), "--serve", "--kinds", kinds,
                   "--read-source", str(read_source),
                   "--rows", str(args.rows), "--commits", str(args.commits), "--orphans", str(args.orphans),
                   "--cores", str(args.cores)] + (["--local-gc"] if args.local_gc else [])
        env = {**os.environ, "BENCH_PROCEDURES_ROOT": str(root), "PYTHONPATH": str(root)}
        # run from ``root``: Spark's Python workers put their working directory first on sys.path
        # (``python -m pyspark.daemon``), so a checkout as the working directory would win
        self.label = label
        self.process = subprocess.Popen(command, env=env, cwd=root, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, bufsize=1)
        self.titles = self.read()["ready"]

    def read(self) -> dict:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(ANSWER):
                return json.loads(line[len(ANSWER):])
        raise SystemExit(f"{self.label}: the worker ended (exit code {self.process.wait()})")

    def ask(self, case: int, kind: str, attempt: int) -> dict:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"case": case, "kind": kind, "attempt": attempt}) + "\n")
        self.process.stdin.flush()
        return self.read()

    def close(self) -> None:
        if self.process.poll() is None and self.process.stdin is not None:
            self.process.stdin.write("\n")
            self.process.stdin.close()
        self.process.wait()


def interleaved(rev: str, kinds: tuple[str, ...], args: argparse.Namespace) -> tuple[dict, dict]:
    """The cases on this checkout (``kinds``) and the classic cases on the package as of ``rev`` (a
    ``git archive`` of it), each side in a long-lived worker process of its own with its own JVM,
    started alike (both with the Connect server plugin when Connect is measured), their runs
    interleaved: for every case and attempt each side runs once, the order rotating from attempt to
    attempt, so no side always meets a warmer JVM or a quieter machine.  Returns ``(current,
    baseline)`` results as :func:`measure` gives them."""
    folder = Path(tempfile.mkdtemp(prefix="bench-baseline-"))
    mine = Path(tempfile.mkdtemp(prefix="bench-current-"))
    # the read case's table, written by this checkout and read by both sides
    shared = Path(tempfile.mkdtemp(prefix="bench-read-source-"))
    workers: list[Worker] = []
    try:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", rev, "procedures"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
        print(f"baseline: the classic cases on {rev} ({folder}), interleaved with this checkout's", file=sys.stderr)
        kinds_text = ",".join(kinds)
        # this checkout's package runs from a copy laid out as the baseline's (a folder holding
        # ``procedures`` alone, also the Python workers' working directory), so the sides differ
        # in the package only
        shutil.copytree(REPO / "procedures", mine / "procedures",
                        ignore=shutil.ignore_patterns("__pycache__"))
        current = Worker("current", mine, kinds_text, args, shared)
        workers.append(current)
        # the baseline's JVM runs the Connect server plugin too (idle), so both JVMs carry the same load
        before = Worker(rev, folder, kinds_text, args, shared)
        workers.append(before)
        slots = [(current, k) for k in kinds] + [(before, "classic")]
        results: tuple[dict, dict] = ({}, {})
        for index, title in enumerate(current.titles):
            outputs: list[dict] = [{}, {}]
            runs: list[dict[str, list[float]]] = [{k: [] for k in kinds}, {"classic": []}]
            errors: list[dict[str, str]] = [{}, {}]
            for attempt in range(args.warmup + args.repeat):
                shift = attempt % len(slots)
                for worker, kind in slots[shift:] + slots[:shift]:
                    side = 0 if worker is current else 1
                    if kind in errors[side]:
                        continue
                    answer = worker.ask(index, kind, attempt)
                    if "error" in answer:
                        errors[side][kind] = answer["error"]
                        if kind == "classic":
                            raise SystemExit(f"{title}: {worker.label} classic failed: {answer['error']}")
                        continue
                    if attempt == 0:
                        outputs[side][kind] = answer["output"]
                    elif not same(answer["output"], outputs[side][kind]):
                        raise SystemExit(f"{title}: {worker.label} {kind} gave another output on run {attempt}")
                    if attempt >= args.warmup:
                        runs[side][kind].append(answer["seconds"])
                if attempt == 0 and len({json.dumps(o, sort_keys=True, default=str)
                                         for o in outputs[0].values()}) > 1:
                    raise SystemExit(f"{title}: outputs differ between the session kinds: "
                                     + json.dumps(outputs[0], indent=1, default=str))
            for side in (0, 1):
                results[side][title] = {"outputs": outputs[side], "runs": runs[side], "errors": errors[side]}
            print(f"  {title}: " + ", ".join(f"{k} {min(v):.3f} s" for k, v in runs[0].items() if v)
                  + f", {rev} classic {min(runs[1]['classic']):.3f} s", file=sys.stderr)
        return results
    finally:
        for worker in workers:
            worker.close()
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(mine, ignore_errors=True)
        shutil.rmtree(shared, ignore_errors=True)


def spread(runs: list[float]) -> str:
    """``min/median`` of a case's timed runs (a machine others load makes single runs noisy)."""
    return f"{min(runs):.3f}/{statistics.median(runs):.3f}"


def paired(runs: list[float], reference: list[float]) -> str:
    """The median of the attempt-by-attempt ratios ``runs[i] / reference[i]``: both ran in the same
    attempt, back to back, so they met the same machine load.  On this 2-core machine the minimum of
    one side moves by 15-25% from one run of the script to the next (an A/A run of a commit against
    itself gave 0.92x for the write); the paired median moves less."""
    if not runs or len(runs) != len(reference):
        return "-"
    return f"{statistics.median(r / b for r, b in zip(runs, reference)):.2f}x"


def table(results: dict, base: dict | None, repeat: int) -> str:
    """The figures: each case's fastest classic and Connect run and their ratio (and the baseline's),
    with the median of the runs beside each minimum and the paired median ratio (:func:`paired`)
    beside each ratio of minimums."""
    header = ["case", "classic s min/med", "connect s min/med", "connect/classic", "paired"]
    if base is not None:
        header += ["baseline classic s min/med", "classic/baseline", "paired"]
    lines = []
    for title, r in results.items():
        classic = min(r["runs"]["classic"])
        connect = min(r["runs"]["connect"]) if r["runs"].get("connect") else None
        failed = r.get("errors", {}).get("connect")
        row = [title, spread(r["runs"]["classic"]),
               "failed" if failed else "-" if connect is None else spread(r["runs"]["connect"]),
               "-" if connect is None else f"{connect / classic:.2f}x" + (" !" if connect / classic > GOAL else ""),
               "-" if connect is None else paired(r["runs"]["connect"], r["runs"]["classic"])]
        if base is not None:
            b = base.get(title)
            before = min(b["runs"]["classic"]) if b else None
            row += ["-" if before is None else spread(b["runs"]["classic"]),
                    "-" if before is None else f"{classic / before:.2f}x",
                    "-" if before is None else paired(r["runs"]["classic"], b["runs"]["classic"])]
            if b and b["outputs"].get("classic") != r["outputs"].get("classic"):
                row[0] += " (output differs from baseline)"
        lines.append(row)
    widths = [max(len(str(x[i])) for x in [header, *lines]) for i in range(len(header))]
    text = ["  ".join(h.ljust(w) for h, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
    text += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in lines]
    return "\n".join(text) + (f"\n(ratios of the minimums of {repeat} runs, 'paired': the median of the runs' "
                              f"ratios attempt by attempt; goal: connect/classic <= {GOAL}x, '!' marks a miss)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=200_000, help="rows of the write, read and rewrite cases")
    p.add_argument("--commits", type=int, default=20, help="snapshots / manifests / small commits per table")
    p.add_argument("--orphans", type=int, default=200, help="orphan files planted for remove_orphan_files")
    p.add_argument("--repeat", type=int, default=9,
                   help="timed runs per kind (the cases take 25-250 ms: with 3 to 5 runs the minimum of one "
                        "side moves by about 15%% from one run to the next)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs per kind first")
    p.add_argument("--cores", type=int, default=2, help="local[N] of the shared JVM")
    p.add_argument("--kinds", default="classic,connect", help="session kinds to run: classic,connect")
    p.add_argument("--local-gc", action="store_true", help="leave the GC size rules as they are (driver steps)")
    p.add_argument("--baseline-commit", metavar="REV", help="also run the classic cases at git revision REV")
    p.add_argument("--json", type=Path, help="write the results as JSON")
    p.add_argument("--warehouse", type=Path, help="warehouse folder (default: a temporary one)")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # a worker of --baseline-commit
    # the read case's warehouse, shared by the workers of --baseline-commit
    p.add_argument("--read-source", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    if not set(kinds) <= set(KINDS) or "classic" not in kinds:
        p.error("--kinds: classic, or classic,connect")
    if args.serve:
        return serve(args)
    base = None
    if args.baseline_commit:
        results, base = interleaved(args.baseline_commit, kinds, args)
    else:
        warehouse = args.warehouse or Path(tempfile.mkdtemp(prefix="bench-connect-"))
        sessions = start_sessions(warehouse, kinds, args.cores)
        try:
            results = measure(sessions, warehouse, args)
        finally:
            for session in reversed(list(sessions.values())):
                session.stop()
            if args.warehouse is None:
                shutil.rmtree(warehouse, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, default=str))
        if base is not None:
            args.json.with_name(f"{args.json.stem}.baseline.json").write_text(json.dumps(base, default=str))
    print(table(results, base, args.repeat))
    for title, r in results.items():
        for kind, error in r.get("errors", {}).items():
            print(f"{title}: {kind} failed: {error}")
    return 1 if any(r.get("errors") for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
