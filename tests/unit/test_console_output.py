"""The console's output formats, progress lines and logging set-up, without Spark (the progress
reads a fake stage source; the step comes from the job descriptions open in spark.session)."""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
from decimal import Decimal

import pytest

from procedures.frontend.cli import (
    EMBEDDED_DEFAULTS,
    REMOTE_KEY,
    configure_logging,
    connect_session_defaults,
    format_rows,
    settings_of,
    subcommand_index,
)
from procedures.frontend.progress import ConsoleProgress, StageProgress, render_bar, render_line
from procedures.spark.session import active_descriptions, job_description


class _FakeContext:
    def __init__(self):
        self.props = {}

    def getLocalProperty(self, key):  # noqa: N802 -- pyspark's name
        return self.props.get(key)

    def setLocalProperty(self, key, value):  # noqa: N802
        self.props[key] = value

    def setJobDescription(self, text):  # noqa: N802
        self.props["spark.job.description"] = text


class _FakeSession:
    def __init__(self):
        self.sparkContext = _FakeContext()


def test_formats():
    columns = ["id", "name", "when", "amount", "tags"]
    rows = [(1, "a\tb", dt.datetime(2024, 1, 2, 3, 4, 5), Decimal("1.50"), {"k": "v"}), (2, None, None, None, None)]
    lines = format_rows(columns, rows, "json").splitlines()
    assert [json.loads(x) for x in lines] == [
        {"id": 1, "name": "a\tb", "when": "2024-01-02T03:04:05", "amount": "1.50", "tags": {"k": "v"}},
        {"id": 2, "name": None, "when": None, "amount": None, "tags": None}]
    tsv = format_rows(columns, rows, "tsv").splitlines()
    assert tsv[0] == "id\tname\twhen\tamount\ttags"
    assert tsv[1].split("\t") == ["1", "a b", "2024-01-02 03:04:05", "1.50", "{k:v}"]
    assert tsv[2].split("\t") == ["2", "", "", "", ""]
    table = format_rows(columns, rows).splitlines()
    assert table[0].split() == columns and "NULL" in table[3]


def test_progress_bar_and_lines():
    stages = [StageProgress(3, 40, 10), StageProgress(4, 10, 10)]
    assert render_bar("rewrite_data_files: group 1/2", stages) == \
        "rewrite_data_files: group 1/2 [########............] 20/50 tasks (stage 3,4)"
    assert render_bar(None, []) == "running"
    assert len(render_bar("x" * 300, stages, width=80)) == 80
    assert render_line("expire_snapshots: delete", stages[:1]) == "progress: expire_snapshots: delete: stage 3 (40 tasks)"


def test_progress_names_the_open_step_and_writes_a_line_per_change():
    spark, out = _FakeSession(), io.StringIO()
    current = [[StageProgress(1, 4, 0)]]
    progress = ConsoleProgress(spark, out, tty=False, stages=lambda: current[0])
    with job_description(spark, "remove_orphan_files: list files"):
        assert active_descriptions() == ["remove_orphan_files: list files"]
        progress.poll()
        progress.poll()  # unchanged: no second line
        current[0] = [StageProgress(2, 8, 3)]
        progress.poll()
    assert active_descriptions() == []
    assert out.getvalue().splitlines() == ["progress: remove_orphan_files: list files: stage 1 (4 tasks)",
                                           "progress: remove_orphan_files: list files: stage 2 (8 tasks)"]
    # the job description is restored
    assert spark.sparkContext.props["spark.job.description"] is None


def test_progress_on_a_terminal_redraws_one_line_and_clears_it():
    spark, out = _FakeSession(), io.StringIO()
    with job_description(spark, "step"):
        with ConsoleProgress(spark, out, tty=True, interval=3600, stages=lambda: [StageProgress(0, 2, 1)]) as p:
            p.poll()
    text = out.getvalue()
    assert text.startswith("\rstep [##########..........] 1/2 tasks (stage 0)") and text.endswith("\r")
    assert "\n" not in text


def test_new_options_take_values_before_the_subcommand():
    assert subcommand_index(["--output", "json", "--log-level", "info", "plan", "t"], "plan") == 4


@pytest.mark.parametrize("level, expected", [("WARN", logging.WARNING), ("OFF", logging.CRITICAL + 1),
                                             ("ALL", logging.DEBUG)])
def test_log_levels(level, expected):
    configure_logging(level)
    logger = logging.getLogger("procedures")
    try:
        assert logger.level == expected and len(logger.handlers) == 1 and not logger.propagate
    finally:
        logger.handlers[:] = []
        logger.setLevel(logging.NOTSET)
        logger.propagate = True


class _FakeConnectSession:
    """Looks like pyspark 4's Connect session to ``is_connect`` (its class's module) and holds the
    progress handlers and job tags the console and ``job_description`` use there."""

    def __init__(self):
        self.handlers, self.tags = [], set()

    def registerProgressHandler(self, handler):  # noqa: N802 -- pyspark's name
        self.handlers.append(handler)

    def removeProgressHandler(self, handler):  # noqa: N802
        self.handlers.remove(handler)

    def getTags(self):  # noqa: N802
        return set(self.tags)

    def addTag(self, tag):  # noqa: N802
        self.tags.add(tag)

    def removeTag(self, tag):  # noqa: N802
        self.tags.discard(tag)


_FakeConnectSession.__module__ = "pyspark.sql.connect.session"


class _Stage:
    def __init__(self, stage_id, num_tasks, num_completed_tasks, done=False):
        self.stage_id, self.num_tasks, self.num_completed_tasks, self.done = stage_id, num_tasks, num_completed_tasks, done


def test_progress_on_spark_connect_reads_the_servers_progress_messages():
    """A Connect session has no status tracker: the console registers a progress handler for the
    statement, shows the stages the server reports (finished ones left out) under our step, and
    removes the handler afterwards."""
    spark, out = _FakeConnectSession(), io.StringIO()
    with job_description(spark, "expire_snapshots: delete files"):
        with ConsoleProgress(spark, out, tty=False, interval=3600) as progress:
            assert len(spark.handlers) == 1
            handler = spark.handlers[0]
            # as pyspark's client calls it, by keyword, from the thread running the operation
            handler(stages=[_Stage(0, 2, 2, done=True), _Stage(1, 4, 1)], inflight_tasks=3, operation_id="op-1",
                    done=False)
            progress.poll()
            handler(stages=[_Stage(1, 4, 4, done=True)], inflight_tasks=0, operation_id="op-1", done=True)
            progress.poll()
        assert spark.handlers == []
        assert spark.tags == {"expire_snapshots: delete files"}
    assert out.getvalue().splitlines() == ["progress: expire_snapshots: delete files: stage 1 (4 tasks)",
                                           "progress: expire_snapshots: delete files"]


def test_remote_option_and_spark_remote_choose_spark_connect(monkeypatch):
    """--remote (as pyspark --remote) or SPARK_REMOTE put the Connect URL in the settings; --master
    given alone wins over the environment's SPARK_REMOTE, and both options together are refused."""
    monkeypatch.setenv("SPARK_REMOTE", "sc://env-host:15002")
    assert settings_of(["-e", "SELECT 1"])[REMOTE_KEY] == "sc://env-host:15002"
    assert REMOTE_KEY not in settings_of(["--master", "local[1]", "-e", "SELECT 1"])
    assert settings_of(["--remote", "local[2]"])[REMOTE_KEY] == "local[2]"
    with pytest.raises(ValueError, match="either --master or --remote"):
        settings_of(["--remote", "sc://h:1", "--master", "local[1]"])
    monkeypatch.delenv("SPARK_REMOTE")
    assert REMOTE_KEY not in settings_of(["-e", "SELECT 1"])
    assert subcommand_index(["--remote", "sc://h:1", "plan", "t"], "plan") == 2


def test_a_remote_servers_own_settings_win_over_the_embedded_defaults():
    server = {"spark.sql.catalog.local.type": "hadoop", "spark.sql.catalog.local.warehouse": "s3://bucket/wh",
              "spark.sql.session.timeZone": "Europe/Paris"}
    chosen = connect_session_defaults(server, dict(EMBEDDED_DEFAULTS))
    # the server's `local` catalog is not patched with our JDBC uri, its time zone stays, the driver's
    # own keys (master, UI) are the server's
    assert chosen == {"spark.sql.shuffle.partitions": "8"}
    # a server configuring no `local` catalog gets the embedded one whole
    assert connect_session_defaults({}, dict(EMBEDDED_DEFAULTS)) == {
        k: v for k, v in EMBEDDED_DEFAULTS.items() if k not in ("spark.master", "spark.ui.enabled",
                                                               "spark.ui.showConsoleProgress")}
