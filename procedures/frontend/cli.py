"""``procedures-sql``: a spark-sql-like console that runs our CALL procedures and SQL scripts.

    procedures-sql -e "CALL local.system.ancestors_of('db.t')"
    procedures-sql -f sql/quickstart.sql --conf spark.sql.shuffle.partitions=4
    procedures-sql --properties-file spark-conf/spark-defaults.conf     # interactive prompt
    procedures-sql plan local.db.events [--execute]                       # maintenance plan

Configuration, later wins: the embedded defaults (catalog ``local`` = JDBC/SQLite under
``./warehouse``, as in ``spark-conf/spark-defaults.conf``), ``--properties-file`` (spark-defaults
format), ``--master``, then each ``--conf k=v``.  The first failing statement stops the run with
its message on stderr (no traceback unless ``--verbose``) and exit code 1.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from typing import Sequence

from procedures.catalog.base import split_dotted
from procedures.catalog.config import catalog_names, default_catalog_name
from procedures.core.health import render_call, table_reference
from procedures.errors import IcebergError, SqlSyntaxError, redact_text
from procedures.frontend.parser import split_statements, tokenize
from procedures.frontend.sqlcall import execute
from procedures.spark.environment import check_session

__all__ = ["main", "read_properties_file", "format_table", "plan_statement", "EMBEDDED_DEFAULTS"]

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
HISTORY_FILE = os.path.expanduser("~/.procedures_sql_history")


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


def _build_session(conf: dict[str, str]):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # noqa: PLC0415 -- after PYSPARK_PYTHON is set

    builder = SparkSession.builder.appName("procedures-sql")
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(conf.get("procedures.log.level", "ERROR"))
    return check_session(spark)


def _print_result(df, out) -> None:
    started = time.monotonic()
    if not df.columns:
        return
    rows = df.collect()
    print(format_table(df.columns, [tuple(r) for r in rows]), file=out)
    print(f"Time taken: {time.monotonic() - started:.3f} seconds, Fetched {len(rows)} row(s)", file=sys.stderr)


def _error_text(e: BaseException) -> str:
    name = type(e).__name__
    text = str(e)
    # py4j/Spark errors carry a JVM stack trace after the first lines; the message is enough
    if name in ("AnalysisException", "ParseException", "IllegalArgumentException", "Py4JJavaError"):
        text = text.split("\n\tat ", 1)[0].strip()
    # a driver's or the JVM's message may quote a connection uri with its password
    return f"Error ({name}): {redact_text(text)}"


def _run_text(spark, text: str, out) -> None:
    for stmt in split_statements(text):
        _print_result(execute(spark, stmt.text, script=text, offset=stmt.offset), out)


def _interactive(spark, out) -> int:
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
            _run_text(spark, text, out)
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
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import a Python module first (to register your own procedures); repeatable")
    p.add_argument("--verbose", action="store_true", help="print tracebacks on errors")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="procedures-sql", description=__doc__.split("\n\n")[0],
                                epilog="procedures-sql plan <table> [--execute]: plan (and run) the table's "
                                       "maintenance; see procedures-sql plan --help")
    p.add_argument("-e", dest="execute", metavar="SQL", help="run the SQL text (statements separated by ';')")
    p.add_argument("-f", dest="file", metavar="FILE", help="run the SQL script file")
    _common_options(p)
    return p


def _plan_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="procedures-sql plan",
        description="Show the maintenance a table needs (CALL <catalog>.system.plan_maintenance) and, with "
                    "--execute, run it.",
    )
    p.add_argument("table", help="the table: catalog.namespace.name, or namespace.name in the default catalog")
    p.add_argument("--execute", action="store_true", help="run the planned procedures in order")
    p.add_argument("--no-orphans", action="store_true", help="do not list the table location for orphan files")
    _common_options(p)
    return p


def plan_statement(table: str, conf: dict[str, str], *, execute: bool, include_orphans: bool = True) -> str:
    """The CALL of plan_maintenance for ``table`` (``[catalog.]namespace.name``): in the table's
    catalog when its first part names one of ours, else in the default catalog."""
    parts = split_dotted(table.strip())
    catalog = parts[0] if len(parts) >= 3 and parts[0] in catalog_names(conf) else default_catalog_name(conf)
    rest = parts[1:] if len(parts) >= 3 and parts[0] == catalog else parts
    args = [("table", table_reference(rest)), ("execute", execute)]
    if not include_orphans:
        args.append(("include_orphans", False))
    return render_call(catalog, "plan_maintenance", args)


def _settings(args: argparse.Namespace) -> dict[str, str]:
    conf = dict(EMBEDDED_DEFAULTS)
    if args.properties_file:
        conf.update(read_properties_file(args.properties_file))
    if args.master:
        conf["spark.master"] = args.master
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf expects key=value, got {item!r}")
        conf[key.strip()] = value.strip()
    return conf


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; returns the exit status (0 ok, 1 failed statement, 2 bad usage)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    plan = argv[:1] == ["plan"]
    args = _plan_parser().parse_args(argv[1:]) if plan else _parser().parse_args(argv)
    if not plan and args.execute is not None and args.file is not None:
        print("Error: use either -e or -f, not both", file=sys.stderr)
        return 2
    try:
        conf = _settings(args)
        text = None
        if plan:
            text = plan_statement(args.table, conf, execute=args.execute, include_orphans=not args.no_orphans)
        elif args.file is not None:
            with open(args.file, encoding="utf-8") as f:
                text = f.read()
        elif args.execute is not None:
            text = args.execute
    except (OSError, ValueError, IcebergError) as e:
        print(f"Error: {redact_text(e)}", file=sys.stderr)
        return 2
    out = sys.stdout
    try:
        import importlib

        for module in args.imports:
            importlib.import_module(module)
        _prepare_local_catalogs(conf)
        spark = _build_session(conf)
    except Exception as e:  # noqa: BLE001
        print(_error_text(e), file=sys.stderr)
        return 1
    if text is None:
        return _interactive(spark, out)
    try:
        _run_text(spark, text, out)
    except Exception as e:  # noqa: BLE001 -- one message, no traceback, non-zero exit
        if args.verbose:
            import traceback

            traceback.print_exc()
        print(_error_text(e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
