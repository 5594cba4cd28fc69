"""The ``procedures-sql`` console end to end, in subprocesses (each starts its own Spark)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from procedures.frontend.cli import format_table, read_properties_file

# Each test starts Spark in a subprocess (about 15 s): run on pyspark 3.5 only. On pyspark 4 the console
# runs in CI's clean-install flows (a script and `plan --execute` on the newest 4.x and 4.1) and with
# --remote / SPARK_REMOTE in tests/spark/test_connect_frontend.py.
pytestmark = [pytest.mark.spark, pytest.mark.pyspark35_only]

REPO = Path(__file__).resolve().parents[2]


def console(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "procedures.frontend.cli", *args], cwd=cwd, input=stdin, capture_output=True, text=True,
        timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )


def test_script_on_the_embedded_default_catalog(tmp_path):
    script = tmp_path / "demo.sql"
    script.write_text(
        "CREATE NAMESPACE IF NOT EXISTS local.db;\n"
        "CREATE TABLE local.db.t (id bigint NOT NULL, data string) USING iceberg PARTITIONED BY (bucket(2, id));\n"
        "INSERT INTO local.db.t VALUES (1, 'a'), (2, 'b');  -- first snapshot\n"
        "/* a branch at the first snapshot */\n"
        "CALL local.system.fast_forward('db.t', 'audit', 'main');\n"
        "INSERT INTO local.db.t SELECT id + 10, upper(data) FROM local.db.t;\n"
        "SELECT id, data FROM local.db.t ORDER BY id;\n"
    )
    run = console(tmp_path, "-f", str(script))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-6:] == ["id  data", "--  ----", " 1  a", " 2  b", "11  A", "12  B"]
    assert "branch_updated  previous_ref  updated_ref" in run.stdout
    # the embedded default is a SQLite JDBC catalog under ./warehouse of the working directory
    assert (tmp_path / "warehouse" / "catalog.db").is_file()
    assert (tmp_path / "warehouse" / "db" / "t" / "metadata").is_dir()


def test_syntax_error_names_the_script_position_and_stops(tmp_path):
    script = tmp_path / "bad.sql"
    script.write_text("SELECT 1 AS one;\n\nCALL local.system.ancestors_of(\n  'db.t' 'x' => 1);\nSELECT 2;\n")
    run = console(tmp_path, "-f", str(script))
    assert run.returncode == 1
    assert "Syntax error at line 4, column 14 near '=>'" in run.stderr
    assert "Traceback" not in run.stderr
    assert "one" in run.stdout and "2" not in run.stdout.split("one", 1)[1]  # the statement after the error never ran


def test_procedure_error_and_conf_options(tmp_path):
    props = tmp_path / "my.conf"
    props.write_text(f"# ours on a hadoop warehouse\nspark.sql.catalog.ours.type   hadoop\n"
                     f"spark.sql.catalog.ours.warehouse={tmp_path / 'wh'}\n")
    assert read_properties_file(str(props))["spark.sql.catalog.ours.type"] == "hadoop"
    run = console(tmp_path, "--properties-file", str(props), "--master", "local[1]",
                  "--conf", "spark.sql.session.timeZone=UTC",
                  "-e", "CREATE NAMESPACE ours.db; CALL ours.system.ancestors_of(table => 'db.missing')")
    assert run.returncode == 1
    assert "Couldn't load table 'db.missing' in catalog 'ours'" in run.stderr
    assert "Traceback" not in run.stderr
    assert (tmp_path / "wh" / "db").is_dir()


def test_interactive_prompt_reads_multi_line_statements(tmp_path):
    run = console(tmp_path, stdin="SELECT 40 +\n 2 AS answer;\nCALL local.system.nope();\nSELECT 'still here' AS s;\nquit\n")
    assert "answer" in run.stdout and "42" in run.stdout
    assert "Procedure system.nope not found" in run.stderr
    assert "still here" in run.stdout  # the prompt survives a failing statement
    assert run.returncode == 0


def test_format_table_aligns_columns():
    assert format_table(["n", "name"], [(1, "a"), (100, None)]).splitlines() == [
        "n    name", "---  ----", "  1  a", "100  NULL",
    ]


def test_time_taken_progress_json_output_and_a_quiet_start(tmp_path):
    run = console(tmp_path, "--master", "local[2]", "--output", "json", "-e",
                  "CREATE NAMESPACE IF NOT EXISTS local.db; "
                  "CREATE TABLE local.db.p (id bigint, c string) USING iceberg PARTITIONED BY (c); "
                  "INSERT INTO local.db.p VALUES (1, 'a'), (2, 'b'); INSERT INTO local.db.p VALUES (3, 'a'); "
                  "CALL local.system.rewrite_data_files(table => 'db.p', options => map('min-input-files', '2')); "
                  "SELECT id, c FROM local.db.p ORDER BY id")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert [json.loads(x) for x in lines[-3:]] == [{"id": 1, "c": "a"}, {"id": 2, "c": "b"}, {"id": 3, "c": "a"}]
    assert json.loads(lines[0])["rewritten_data_files_count"] == 2
    # a time for every statement, also those without rows (CREATE, INSERT)
    assert run.stderr.count("Time taken: ") == 6
    # progress as plain lines (stderr is no terminal here), naming our job descriptions
    assert "progress: append to local.db.p" in run.stderr
    # nothing the user cannot act on: no JVM start-up warnings, no library FutureWarnings
    for noise in ("WARN ", "FutureWarning", "DeprecationWarning", "Setting default log level", "NativeCodeLoader"):
        assert noise not in run.stderr, run.stderr


def test_plan_options_before_the_subcommand_and_log_level(tmp_path):
    run = console(tmp_path, "--master", "local[1]", "--log-level", "info", "--output", "tsv", "-e",
                  "CREATE NAMESPACE IF NOT EXISTS local.db; CREATE TABLE local.db.q (id bigint) USING iceberg; "
                  "INSERT INTO local.db.q VALUES (1)")
    assert run.returncode == 0, run.stderr
    assert " INFO " in run.stderr  # Spark's INFO lines, at the level asked for
    plan = console(tmp_path, "--master", "local[1]", "--no-progress", "plan", "local.db.q", "--no-orphans")
    assert plan.returncode == 0, plan.stderr
    header, _, *steps = plan.stdout.splitlines()
    assert header.split()[:3] == ["step", "procedure", "arguments"]
    # a new table's one finding: no statistics; planned, not run (no --execute)
    assert len(steps) == 1 and "compute_table_stats" in steps[0] and " planned " in steps[0], plan.stdout


def test_maintain_a_whole_catalog_writes_a_json_report(tmp_path):
    setup = console(tmp_path, "--master", "local[2]", "--no-progress", "-e",
                    "CREATE NAMESPACE IF NOT EXISTS local.db; CREATE NAMESPACE IF NOT EXISTS local.ops; "
                    "CREATE TABLE local.db.a (id bigint) USING iceberg; CREATE TABLE local.ops.b (id bigint) USING iceberg; "
                    "INSERT INTO local.db.a VALUES (1); INSERT INTO local.db.a VALUES (2); INSERT INTO local.ops.b VALUES (3)")
    assert setup.returncode == 0, setup.stderr
    report = tmp_path / "run.json"
    run = console(tmp_path, "--no-progress", "maintain", "local", "--no-orphans", "--report", str(report),
                  "--max-duration", "30m", "--master", "local[2]")
    assert run.returncode == 0, run.stderr
    data = json.loads(report.read_text())
    assert data["tables"] == 2 and data["failed"] == [] and set(data["status_counts"]) == {"done"}
    by_table = {}
    for step in data["steps"]:
        by_table.setdefault(step["table"], []).append(step["procedure"])
    assert set(by_table) == {"db.a", "ops.b"} and all("compute_table_stats" in p for p in by_table.values())
    stats = [s for s in data["steps"] if s["procedure"] == "compute_table_stats"]
    assert all(s["output"][0]["statistics_file"].endswith(".stats") for s in stats)
    assert "plan_maintenance(namespace => '*', execute => true" in data["statement"]
    # the statistics were committed: a second run finds nothing to do
    again = console(tmp_path, "--no-progress", "--master", "local[1]", "maintain", "local", "--no-orphans",
                    "--plan-only", "--output", "json")
    assert again.returncode == 0 and again.stdout.strip() == "", again.stdout + again.stderr
