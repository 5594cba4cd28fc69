"""``procedures-sql``: a spark-sql-like console that runs our CALL procedures and SQL scripts.

    procedures-sql -e "CALL local.system.ancestors_of('db.t')"
    procedures-sql -f sql/quickstart.sql --conf spark.sql.shuffle.partitions=4
    procedures-sql --properties-file spark-conf/spark-defaults.conf     # interactive prompt
    procedures-sql plan local.db.events [--execute]                       # maintenance plan
    procedures-sql maintain local --max-duration 2h --report run.json     # a whole catalog, scheduled
    procedures-sql health local.db --html report.html [--maintain]        # a report with pictures
    procedures-sql --remote sc://host:15002 -e "CALL ..."                 # on a Spark Connect server

Configuration, later wins: the embedded defaults (catalog ``local`` = JDBC/SQLite under
``./warehouse``, as in ``spark-conf/spark-defaults.conf``), ``--properties-file`` (spark-defaults
format), ``--master``, then each ``--conf k=v``.

``--remote`` (or ``SPARK_REMOTE``, as for ``pyspark --remote``) runs on Spark Connect (pyspark 4 with
the ``connect`` extra): ``sc://host:port`` is a running server, whose own settings win over the
embedded defaults (a default is set on the session only when the server has no value for it, a
catalog's keys only when the server configures no key of that catalog); ``local[N]`` starts pyspark's
local Connect server in this process with the settings above.  The first failing statement stops the run with
its message on stderr (no traceback unless ``--verbose``) and exit code 1; a maintenance plan whose
step failed prints every step, then the failed ones on stderr, and exits with 1.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import logging
import os
import re
import sys
import time
import warnings
from decimal import Decimal
from typing import Sequence

from procedures.catalog.base import split_dotted
from procedures.catalog.config import catalog_names, default_catalog_name
from procedures.spark.catalog_conf import conf_from_spark
from procedures.framework.call_text import render_call, table_reference
from procedures.errors import IcebergError, SqlSyntaxError, ValidationError, redact_text
from procedures.frontend.parser import split_statements, tokenize
from procedures.frontend.progress import ConsoleProgress
from procedures.frontend.report import health_report
from procedures.frontend.sqlcall import execute
from procedures.spark.environment import check_session

__all__ = ["main", "read_properties_file", "format_table", "failed_steps", "format_rows", "plan_statement", "subcommand_index",
           "maintain_statement", "maintenance_report",
           "configure_logging", "EMBEDDED_DEFAULTS", "REMOTE_KEY", "connect_session_defaults", "settings_of"]

EMBEDDED_DEFAULTS = {
    "spark.sql.catalog.local.type": "jdbc",
    "spark.sql.catalog.local.uri": "jdbc:sqlite:./warehouse/catalog.db",
    "spark.sql.catalog.local.warehouse": "./warehouse",
    "spark.master": "local[*]",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
}
#: the embedded defaults that configure Spark's driver itself: a Spark Connect server has its own
SPARK_CORE_DEFAULTS = ("spark.master", "spark.ui.enabled", "spark.ui.showConsoleProgress")
#: where the Spark Connect URL of --remote / SPARK_REMOTE is kept among the settings (pyspark's key)
REMOTE_KEY = "spark.remote"
HISTORY_FILE = os.path.expanduser("~/.procedures_sql_history")
#: the JVM logging of the console's session (errors only until --log-level changes it)
LOG4J2_CONSOLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resources", "log4j2-console.properties")
#: --log-level values (Spark's names)
LOG_LEVELS = ("ALL", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
_PYTHON_LEVELS = {"ALL": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
                  "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 1}


def read_properties_file(path: str) -> dict[str, str]:
    """``key value`` / ``key=value`` lines of a spark-defaults file; ``#`` comments and blank lines skipped."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith(("#", "!")):
                continue
            m = re.match(r"([^\s=:]+)\s*(?:[=:]\s*|\s+|$)(.*)$", line)
            key, value = (m.group(1), m.group(2)) if m else ("", "")
            if not key.strip():
                raise ValueError(f"{path}:{number}: expected 'key value', got {raw.rstrip()!r}")
            out[key.strip()] = value.strip()
    return out


def _value_text(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "{" + ",".join(f"{_value_text(k)}:{_value_text(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_value_text(x) for x in v) + "]"
    return str(v)


def format_table(columns: Sequence[str], rows: Sequence[Sequence]) -> str:
    """Rows as an aligned text table with a header line (numbers right-aligned)."""
    cells = [[_value_text(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(row[i], (int, float)) and not isinstance(row[i], bool) or row[i] is None
                   for row in rows) and bool(rows) for i in range(len(columns))]

    def line(values: Sequence[str], header: bool = False) -> str:
        parts = [v.rjust(w) if numeric[i] and not header else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths))]
        return "  ".join(parts).rstrip()

    out = [line(list(columns), True), "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in cells)
    return "\n".join(out)


def _prepare_local_catalogs(conf: dict[str, str]) -> None:
    """Create the folder of a local SQLite catalog file (SQLite creates the file, not its folder) and make a
    relative local warehouse absolute (Iceberg locations must be absolute; relative ones resolve against
    the working directory, as the spark-conf notes say)."""
    for key, value in list(conf.items()):
        if key.startswith("spark.sql.catalog.") and key.endswith(".warehouse") and value and ":" not in value \
                and not os.path.isabs(value):
            conf[key] = os.path.abspath(value)
        if key.startswith("spark.sql.catalog.") and key.endswith(".uri") and value.startswith("jdbc:sqlite:"):
            path = value[len("jdbc:sqlite:"):].split("?", 1)[0]
            if path.startswith("file:"):
                path = path[5:]
            folder = os.path.dirname(path)
            if path and path != ":memory:" and folder:
                os.makedirs(folder, exist_ok=True)


def _build_session(conf: dict[str, str], defaults: Sequence[str] = ()):
    """The console's session: classic (``spark.master``), or Spark Connect when ``conf`` holds a
    ``spark.remote`` URL; ``defaults`` are the keys of ``conf`` that are embedded defaults, not the
    user's (a remote server's own values win over them)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    remote = conf.get(REMOTE_KEY)
    if remote:
        return check_session(_connect_session(remote, conf, defaults))
    # --master (or a properties file) chose a classic session over the environment's SPARK_REMOTE,
    # which pyspark's builder would otherwise follow
    os.environ.pop("SPARK_REMOTE", None)
    from pyspark.sql import SparkSession  # noqa: PLC0415 -- after PYSPARK_PYTHON is set

    builder = SparkSession.builder.appName("procedures-sql")
    for k, v in _with_quiet_jvm(conf).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(conf.get("procedures.log.level", "ERROR"))
    return check_session(spark)


def _with_quiet_jvm(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with our log4j2 configuration for a JVM this process starts (quiet start-up lines);
    the user's own driver options or submit arguments win."""
    if "spark.driver.extraJavaOptions" in conf or os.environ.get("PYSPARK_SUBMIT_ARGS"):
        return dict(conf)
    return {**conf, "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J2_CONSOLE}"}


def _connect_session(url: str, conf: dict[str, str], defaults: Sequence[str]):
    """A Spark Connect session on ``url``: ``local[N]`` starts pyspark's local Connect server in this
    process (with all of ``conf``, as ``pyspark --remote local[N]`` does), ``sc://...`` connects to a
    running server and sets ``conf`` on the session (:func:`connect_session_defaults`)."""
    import pyspark  # noqa: PLC0415 -- the console loads without pyspark

    if int(pyspark.__version__.split(".")[0]) < 4:
        raise ValidationError(
            f"--remote / SPARK_REMOTE needs pyspark 4 (Spark Connect); pyspark {pyspark.__version__} is installed: "
            "pip install 'iceberg-procedures[connect]', or run without --remote on a classic session")
    try:
        import pyspark.sql.connect.session  # noqa: F401,PLC0415 -- the Connect client is installed
    except ImportError as e:  # pyspark names the missing module (grpcio, grpcio-status, googleapis...)
        raise ValidationError(f"the Spark Connect client is not installed ({e}): "
                              "pip install 'iceberg-procedures[connect]'") from e
    level = conf.get("procedures.log.level", "ERROR")
    sent = {k: v for k, v in conf.items() if k not in (REMOTE_KEY, "spark.master")}
    if url.startswith("local"):
        from pyspark.sql import SparkSession  # noqa: PLC0415 -- pyspark's builder starts the local server

        builder = SparkSession.builder.appName("procedures-sql").remote(url)
        for k, v in _with_quiet_jvm(sent).items():
            builder = builder.config(k, v)
        with warnings.catch_warnings():
            # the server took every key at its start; pyspark then also tries the driver's keys on the
            # Connect session, where Spark refuses them, and warns about each
            warnings.filterwarnings("ignore", message="Failed to set ", category=UserWarning)
            spark = builder.getOrCreate()
        # the local server runs in this process's JVM, under the classic SparkContext pyspark started for it
        from pyspark import SparkContext  # noqa: PLC0415

        SparkContext.getOrCreate().setLogLevel(level)
        return spark
    # pyspark's own builder: it also turns on the process's Connect mode, under which pyspark parses
    # DDL type strings (a mapInArrow schema) without a classic SparkContext
    from pyspark.sql import SparkSession  # noqa: PLC0415

    spark = SparkSession.builder.remote(url).getOrCreate()
    own = {k: v for k, v in sent.items() if k not in defaults}
    for key, value in {**connect_session_defaults(conf_from_spark(spark), {k: sent[k] for k in defaults
                                                                          if k in sent}), **own}.items():
        try:
            spark.conf.set(key, value)
        except Exception as e:  # noqa: BLE001 -- a static key the server fixed at its start
            logging.getLogger(__name__).warning("the Spark Connect server keeps its own %s (%s)", key,
                                                _error_text(e))
    if conf.get("procedures.log.level") and level != "ERROR":
        logging.getLogger(__name__).warning("--log-level %s applies to this console only: the Spark Connect "
                                            "server logs as its own configuration says", level)
    return spark


def connect_session_defaults(server: dict[str, str], defaults: dict[str, str]) -> dict[str, str]:
    """The embedded ``defaults`` to set on a session of a remote Spark Connect server whose conf is
    ``server``: none of the Spark driver's own (:data:`SPARK_CORE_DEFAULTS`), none the server has a
    value for, and a catalog's keys only when the server configures no key of that catalog (its
    ``local`` catalog is not patched with ours)."""
    out = {}
    for key, value in defaults.items():
        if key in SPARK_CORE_DEFAULTS or key in server:
            continue
        if key.startswith("spark.sql.catalog."):
            prefix = "spark.sql.catalog." + key[len("spark.sql.catalog."):].split(".", 1)[0]
            if any(k == prefix or k.startswith(prefix + ".") for k in server):
                continue
        out[key] = value
    return out


def configure_logging(level: str) -> None:
    """Log this package's messages at ``level`` and above to stderr, one line each (``WARN`` is
    Spark's spelling of ``WARNING``)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    logger = logging.getLogger("procedures")
    logger.handlers[:] = [handler]
    logger.setLevel(_PYTHON_LEVELS.get(level, logging.ERROR))
    logger.propagate = False


def quiet_library_warnings() -> None:
    """Hide the Future/Deprecation warnings pandas and pyspark print on start: a console user can do
    nothing about them (they concern the libraries' own calls)."""
    for module in ("pyspark", "pandas", "pyarrow", "py4j"):
        warnings.filterwarnings("ignore", category=FutureWarning, module=module)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=module)


def format_rows(columns: Sequence[str], rows: Sequence[Sequence], output: str = "table") -> str:
    """Rows as ``output`` says: ``table`` (aligned, for people), ``json`` (one JSON object per row,
    values as JSON types) or ``tsv`` (a header line, then tab-separated values; NULL as empty)."""
    if output == "json":
        return "\n".join(json.dumps(dict(zip(columns, r)), default=_json_value, ensure_ascii=False) for r in rows)
    if output == "tsv":
        def cell(v) -> str:
            return "" if v is None else _value_text(v).replace("\t", " ").replace("\n", " ")
        return "\n".join(["\t".join(columns)] + ["\t".join(cell(v) for v in r) for r in rows])
    return format_table(columns, rows)


def _json_value(v):
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if hasattr(v, "asDict"):  # a pyspark Row (a struct value)
        return v.asDict(recursive=True)
    return str(v)


def _print_result(df, out, started: float, output: str = "table", results: list | None = None) -> list[str]:
    """Print ``df``'s rows and the time since the statement ``started``; returns the failed steps when
    it is a maintenance plan's output."""
    if not df.columns:
        print(f"Time taken: {time.monotonic() - started:.3f} seconds", file=sys.stderr)
        return []
    rows = df.collect()
    if results is not None:
        results.append((list(df.columns), [tuple(r) for r in rows]))
    if rows or output == "table":
        print(format_rows(df.columns, [tuple(r) for r in rows], output), file=out)
    print(f"Time taken: {time.monotonic() - started:.3f} seconds, Fetched {len(rows)} row(s)", file=sys.stderr)
    return failed_steps(df.columns, rows)


def failed_steps(columns: Sequence[str], rows: Sequence[Sequence]) -> list[str]:
    """``step procedure: error`` of every failed step when ``columns`` are plan_maintenance's output,
    so that a scheduled plan whose step failed exits non-zero after printing every step."""
    if not {"step", "procedure", "status", "error"} <= set(columns):
        return []
    at = {name: i for i, name in enumerate(columns)}
    return [f"step {r[at['step']]} {r[at['procedure']]}: {r[at['error']]}" for r in rows
            if r[at["status"]] == "failed"]


def _error_text(e: BaseException) -> str:
    name = type(e).__name__
    text = str(e)
    # py4j/Spark errors carry a JVM stack trace after the first lines; the message is enough
    if name in ("AnalysisException", "ParseException", "IllegalArgumentException", "Py4JJavaError"):
        text = text.split("\n\tat ", 1)[0].strip()
    # a driver's or the JVM's message may quote a connection uri with its password
    return f"Error ({name}): {redact_text(text)}"


def _run_text(spark, text: str, out, options: argparse.Namespace | None = None,
              results: list | None = None) -> list[str]:
    """Run and print each statement (with progress on stderr unless ``--no-progress``); returns the
    failed maintenance steps reported on the way, and appends each result's ``(columns, rows)`` to
    ``results`` when given."""
    output = getattr(options, "output", "table")
    progress = not getattr(options, "no_progress", False)
    failed = []
    for stmt in split_statements(text):
        started = time.monotonic()
        with ConsoleProgress(spark) if progress else contextlib.nullcontext():
            df = execute(spark, stmt.text, script=text, offset=stmt.offset)
            failed += _print_result(df, out, started, output, results)
    return failed


def _health(spark, args: argparse.Namespace, out) -> int:
    """``procedures-sql health``: the findings (and with --maintain the steps run) as rows, and the
    HTML report when asked for."""
    started = time.monotonic()
    try:
        with ConsoleProgress(spark) if not args.no_progress else contextlib.nullcontext():
            report = health_report(spark, args.target, maintain=args.maintain, include_orphans=args.orphans,
                                   max_duration=args.max_duration)
    except Exception as e:  # noqa: BLE001 -- one message, no traceback, non-zero exit
        print(_error_text(e), file=sys.stderr)
        return 1
    columns = ["table", "severity", "check", "partition", "message", "call"]
    rows = [[t.table] + [f[c] for c in columns[1:]] for t in report.tables for f in t.findings]
    if rows or args.output == "table":
        print(format_rows(columns, rows, args.output), file=out)
    steps = [s for t in report.tables for s in t.steps]
    if args.html:
        report.save(args.html)
        print(f"Wrote {args.html} ({len(report.tables)} tables)", file=sys.stderr)
    print(f"Time taken: {time.monotonic() - started:.3f} seconds", file=sys.stderr)
    failed = [f"step {s['step']} {s['procedure']} of {s['table']}: {s['error']}" for s in steps if s["status"] == "failed"]
    for step in failed:
        print(f"Error: maintenance {step}", file=sys.stderr)
    return 1 if failed else 0


def _interactive(spark, out, options: argparse.Namespace | None = None) -> int:
    try:
        import readline

        try:
            readline.read_history_file(HISTORY_FILE)
        except OSError:
            pass
    except ImportError:  # pragma: no cover -- readline is missing on some platforms
        readline = None
    buffer: list[str] = []
    status = 0
    while True:
        try:
            line = input("procedures-sql> " if not buffer else "              > ")
        except EOFError:
            print(file=out)
            break
        except KeyboardInterrupt:
            print(file=out)
            buffer = []
            continue
        if not buffer and line.strip().lower() in ("quit", "exit", "quit;", "exit;"):
            break
        buffer.append(line)
        text = "\n".join(buffer)
        if not _complete(text):
            continue
        buffer = []
        try:
            _run_text(spark, text, out, options)
            status = 0
        except Exception as e:  # noqa: BLE001 -- the prompt survives any failing statement
            print(_error_text(e), file=sys.stderr)
            status = 1
    if readline is not None:
        try:
            readline.write_history_file(HISTORY_FILE)
        except OSError:
            pass
    return status


def _complete(text: str) -> bool:
    """A statement typed at the prompt is complete once it ends with ``;`` outside quotes and comments."""
    try:
        tokens = tokenize(text)
    except SqlSyntaxError:
        return False  # an open quote or comment: keep reading lines
    return len(tokens) > 1 and tokens[-2].text == ";"


def _common_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--conf", action="append", default=[], metavar="K=V", help="a Spark/catalog setting (repeatable)")
    p.add_argument("--properties-file", metavar="FILE", help="settings in spark-defaults.conf format")
    p.add_argument("--master", help="Spark master URL (default local[*])")
    p.add_argument("--remote", metavar="URL",
                   help="run on Spark Connect (pyspark 4): sc://host:port, or local[N] to start pyspark's local "
                        "Connect server; default $SPARK_REMOTE unless --master is given")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import a Python module first (to register your own procedures); repeatable")
    p.add_argument("--verbose", action="store_true", help="print tracebacks on errors")
    p.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, default=None,
                   help="log level of Spark and of this package on stderr (default ERROR)")
    p.add_argument("--output", choices=("table", "json", "tsv"), default="table",
                   help="how result rows are printed: aligned table (default), JSON lines or tab-separated")
    p.add_argument("--no-progress", action="store_true",
                   help="do not show the running step and Spark stage on stderr")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="procedures-sql", description=__doc__.split("\n\n")[0],
                                epilog="procedures-sql plan <table> [--execute]: plan (and run) the table's "
                                       "maintenance; procedures-sql maintain <catalog|namespace>: run the "
                                       "maintenance of every table; see procedures-sql plan|maintain --help")
    p.add_argument("-e", dest="execute", metavar="SQL", help="run the SQL text (statements separated by ';')")
    p.add_argument("-f", dest="file", metavar="FILE", help="run the SQL script file")
    _common_options(p)
    return p


#: options of the console that take a value (the word after them is never a subcommand)
_VALUED_OPTIONS = {"-e", "-f", "--conf", "--properties-file", "--master", "--remote", "--import", "--log-level", "--output",
                   "--max-duration", "--report"}


def subcommand_index(argv: Sequence[str], *names: str) -> int | None:
    """Where one of ``names`` stands as a subcommand in ``argv`` (options may come before it, as in
    ``--master local[2] plan t``), or None: the first bare word not taken as an option's value."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return None
        if word in _VALUED_OPTIONS:
            i += 2
            continue
        if not word.startswith("-"):
            return i if word in names else None
        i += 1
    return None


def _plan_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="procedures-sql plan",
        description="Show the maintenance a table needs (CALL <catalog>.system.plan_maintenance) and, with "
                    "--execute, run it.",
    )
    p.add_argument("table", help="the table: catalog.namespace.name, or namespace.name in the default catalog")
    p.add_argument("--execute", action="store_true", help="run the planned procedures in order")
    _plan_options(p)
    return p


def _plan_options(p: argparse.ArgumentParser) -> None:
    """The options of the planner's subcommands (plan, maintain) and the common ones."""
    p.add_argument("--no-orphans", action="store_true", help="do not list table locations for orphan files")
    p.add_argument("--continue-on-error", action="store_true",
                   help="after a failed step, run the table's remaining ones (default: they are not started)")
    _common_options(p)


def _maintain_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="procedures-sql maintain",
        description="Run the maintenance every table of a catalog or namespace needs (CALL "
                    "<catalog>.system.plan_maintenance(namespace => ..., execute => true)), most to gain first, "
                    "and write a JSON report; exits with 1 when a step failed.",
    )
    p.add_argument("target", help="a catalog (every table of it), or [catalog.]namespace")
    p.add_argument("--max-duration", metavar="DURATION", help="time budget, e.g. 45m or 2h: later steps are not started")
    p.add_argument("--report", metavar="FILE", help="write the run as JSON to FILE")
    p.add_argument("--plan-only", action="store_true", help="only plan: run nothing")
    _plan_options(p)
    return p


def _health_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="procedures-sql health",
        description="Report the health of a table, a namespace or a catalog (CALL <catalog>.system.table_health); "
                    "with --html also a page of pictures (needs the 'report' extra: matplotlib).",
    )
    p.add_argument("target", help="a table, a namespace or a catalog: [catalog.]namespace[.table]")
    p.add_argument("--html", metavar="FILE", help="write the HTML report with pictures to FILE")
    p.add_argument("--maintain", action="store_true",
                   help="run the maintenance plan and show the pictures before and after it")
    p.add_argument("--orphans", action="store_true", help="also list table locations for orphan files (slow)")
    p.add_argument("--max-duration", metavar="DURATION", help="time budget of --maintain, e.g. 45m")
    _common_options(p)
    return p


def maintain_statement(target: str, conf: dict[str, str], *, execute: bool = True, include_orphans: bool = True,
                       continue_on_error: bool = False, max_duration: str | None = None) -> str:
    """The CALL of plan_maintenance over ``target``: a catalog of ours (every table of it) or a
    ``[catalog.]namespace`` (in the default catalog when the first part names none of ours)."""
    parts = split_dotted(target.strip())
    catalog = parts[0] if parts and parts[0] in catalog_names(conf) else default_catalog_name(conf)
    namespace = parts[1:] if parts and parts[0] == catalog and parts[0] in catalog_names(conf) else parts
    args = [("namespace", ".".join(namespace) or "*"), ("execute", execute)]
    if not include_orphans:
        args.append(("include_orphans", False))
    if continue_on_error:
        args.append(("continue_on_error", True))
    if max_duration:
        args.append(("max_duration", max_duration))
    return render_call(catalog, "plan_maintenance", args)


def maintenance_report(statement: str, columns: Sequence[str], rows: Sequence[Sequence], started: float,
                       finished: float) -> dict:
    """The JSON report of a maintain run: when, what was called, the count per status and every step."""
    steps = [dict(zip(columns, (_json_ready(v) for v in r))) for r in rows]
    counts: dict[str, int] = {}
    for step in steps:
        counts[step["status"]] = counts.get(step["status"], 0) + 1
    return {
        "started": dt.datetime.fromtimestamp(started, dt.timezone.utc).isoformat(),
        "finished": dt.datetime.fromtimestamp(finished, dt.timezone.utc).isoformat(),
        "duration_seconds": round(finished - started, 3),
        "statement": statement,
        "tables": len({step["table"] for step in steps}),
        "status_counts": counts,
        "failed": [step for step in steps if step["status"] == "failed"],
        "steps": steps,
    }


def _json_ready(v):
    if isinstance(v, list):
        return [_json_ready(x) for x in v]
    if isinstance(v, dict):
        return {k: _json_ready(x) for k, x in v.items()}
    if hasattr(v, "asDict"):
        return v.asDict(recursive=True)
    return v


def plan_statement(table: str, conf: dict[str, str], *, execute: bool, include_orphans: bool = True,
                   continue_on_error: bool = False) -> str:
    """The CALL of plan_maintenance for ``table`` (``[catalog.]namespace.name``): in the table's
    catalog when its first part names one of ours, else in the default catalog."""
    parts = split_dotted(table.strip())
    catalog = parts[0] if len(parts) >= 3 and parts[0] in catalog_names(conf) else default_catalog_name(conf)
    rest = parts[1:] if len(parts) >= 3 and parts[0] == catalog else parts
    args = [("table", table_reference(rest)), ("execute", execute)]
    if not include_orphans:
        args.append(("include_orphans", False))
    if continue_on_error:
        args.append(("continue_on_error", True))
    return render_call(catalog, "plan_maintenance", args)


def _settings(args: argparse.Namespace) -> dict[str, str]:
    conf = dict(EMBEDDED_DEFAULTS)
    if args.properties_file:
        conf.update(read_properties_file(args.properties_file))
    if args.master:
        conf["spark.master"] = args.master
    if args.log_level:
        conf["procedures.log.level"] = args.log_level
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf expects key=value, got {item!r}")
        conf[key.strip()] = value.strip()
    if args.remote and args.master:
        raise ValueError("use either --master or --remote: a Spark Connect server has its own master")
    if args.remote:
        conf[REMOTE_KEY] = args.remote
    elif os.environ.get("SPARK_REMOTE", "").strip() and not args.master and REMOTE_KEY not in conf:
        conf[REMOTE_KEY] = os.environ["SPARK_REMOTE"].strip()
    return conf


def _default_keys(conf: dict[str, str]) -> list[str]:
    """The keys of ``conf`` still holding their embedded default (read before local paths are made
    absolute)."""
    return [k for k, v in EMBEDDED_DEFAULTS.items() if conf.get(k) == v]


def _parse(argv: Sequence[str]) -> tuple[str | None, argparse.Namespace]:
    """The subcommand (None for the console itself) and its parsed options."""
    argv = list(argv)
    at = subcommand_index(argv, "plan", "maintain", "health")
    command = argv[at] if at is not None else None
    rest = argv[:at] + argv[at + 1:] if at is not None else argv
    parser = {"plan": _plan_parser, "maintain": _maintain_parser, "health": _health_parser}.get(command, _parser)()
    return command, parser.parse_args(rest)


def settings_of(argv: Sequence[str]) -> dict[str, str]:
    """The Spark settings the console would start its session with for command line ``argv``
    (embedded defaults, properties file, --master/--remote or SPARK_REMOTE, --conf)."""
    return _settings(_parse(argv)[1])


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; returns the exit status (0 ok, 1 failed statement, 2 bad usage)."""
    command, args = _parse(sys.argv[1:] if argv is None else argv)
    if command is None and args.execute is not None and args.file is not None:
        print("Error: use either -e or -f, not both", file=sys.stderr)
        return 2
    try:
        conf = _settings(args)
        text = None
        if command == "plan":
            text = plan_statement(args.table, conf, execute=args.execute, include_orphans=not args.no_orphans,
                                  continue_on_error=args.continue_on_error)
        elif command == "health":
            text = ""
        elif command == "maintain":
            text = maintain_statement(args.target, conf, execute=not args.plan_only,
                                      include_orphans=not args.no_orphans, continue_on_error=args.continue_on_error,
                                      max_duration=args.max_duration)
        elif args.file is not None:
            with open(args.file, encoding="utf-8") as f:
                text = f.read()
        elif args.execute is not None:
            text = args.execute
    except (OSError, ValueError, IcebergError) as e:
        print(f"Error: {redact_text(e)}", file=sys.stderr)
        return 2
    out = sys.stdout
    quiet_library_warnings()
    configure_logging(conf.get("procedures.log.level", "ERROR").upper())
    try:
        import importlib

        for module in args.imports:
            importlib.import_module(module)
        defaults = _default_keys(conf)
        _prepare_local_catalogs(conf)
        spark = _build_session(conf, defaults)
    except Exception as e:  # noqa: BLE001
        print(_error_text(e), file=sys.stderr)
        return 1
    if command == "health":
        return _health(spark, args, out)
    if text is None:
        return _interactive(spark, out, args)
    results: list[tuple[list[str], list]] = []
    started = time.time()
    try:
        failed = _run_text(spark, text, out, args, results)
    except Exception as e:  # noqa: BLE001 -- one message, no traceback, non-zero exit
        if args.verbose:
            import traceback

            traceback.print_exc()
        print(_error_text(e), file=sys.stderr)
        return 1
    if command == "maintain" and args.report:
        columns, rows = results[-1]
        with open(args.report, "w", encoding="utf-8") as f:
            json.dump(maintenance_report(text, columns, rows, started, time.time()), f, indent=2, default=_json_value)
            f.write("\n")
    for step in failed:
        print(f"Error: maintenance {step}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
