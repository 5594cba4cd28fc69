"""table_health and plan_maintenance without Spark: the core checks on metadata built through our
commit path (files are metadata only), the planner's order and merging, the rendered CALLs (they
parse back), and both procedures through the runner."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.health.findings import (
    MIN_SMALL_MANIFESTS, Finding, HealthThresholds, MaintenanceStep, analyze, orphan_finding, plan_steps,
)
from procedures.framework.call_text import render_call, sql_literal, table_reference
from procedures.core.health.fleet import parse_duration
from procedures.core.kernel.operations import DeleteFiles, FastAppend, RowDelta
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.builtin import plan_maintenance as plan_maintenance_module
from procedures.errors import CommitFailedError, MissingParameterError, NoSuchTableError, ValidationError
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import OutputColumn as Col, Parameter as P
from procedures.framework.registry import get_procedure, register, unregister
from procedures.frontend import runner
from procedures.frontend.cli import (
    failed_steps, maintain_statement, maintenance_report, plan_statement, subcommand_index,
)
from procedures.frontend.parser import parse_call
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.statistics import StatisticsFile
from procedures.spec.transforms import parse_transform
from procedures.spec.types import LONG, STRING, NestedField

FAST = RetryPolicy(num_retries=2, min_wait_ms=1, max_wait_ms=2)
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "cat", STRING)))
SPEC = PartitionSpec(0, (PartitionField(2, 1000, parse_transform("identity"), "cat"),))
FAR_FUTURE = 10**13  # "now" for the checks: every snapshot is older than any max age


@pytest.fixture()
def setup(tmp_path):
    wh = tmp_path / "wh"
    cat = HadoopCatalog("ours", str(wh))
    cat.create_namespace("db")
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(wh)}
    return cat, conf


def _table(cat, name="t", props=None):
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/{name}", spec=SPEC, format_version=2,
                               properties=props)
    return cat.create_table(("db", name), md)


def _data(t, i, part, size=1000, rows=100):
    return DataFile(f"{t.location}/data/cat={part}/f{i}.parquet", FileFormat.PARQUET, (part,), rows, size, spec_id=0)


def _pos_delete(t, i, target, rows):
    return DataFile(f"{t.location}/data/cat={target.partition[0]}/d{i}.parquet", FileFormat.PARQUET, target.partition,
                    rows, 500, content=FileContent.POSITION_DELETES, referenced_data_file=target.file_path, spec_id=0)


def _neglected(cat, props=None):
    t = _table(cat, props=props)
    files = []
    for i in range(15):  # five small files in each of three partitions, one commit (and manifest) each
        f = _data(t, i, "abc"[i % 3])
        files.append(f)
        t = commit(t, [FastAppend([f])], policy=FAST)
    # two delete files per partition: in a they hide 20 of its 500 rows, in b and c 200 of 500
    for i, f in enumerate(files[:6]):
        t = commit(t, [RowDelta(add_deletes=[_pos_delete(t, i, f, 10 if f.partition == ("a",) else 100)])], policy=FAST)
    return t


def _by_check(findings):
    out = {}
    for f in findings:
        out.setdefault(f.check, []).append(f)
    return out


def test_neglected_table_findings(setup):
    cat, _ = setup
    t = _neglected(cat)
    found = _by_check(analyze(t.io, t.metadata, "db.t", now_ms=FAR_FUTURE))
    assert {f.partition for f in found["small_files"]} == {"cat=a", "cat=b", "cat=c"}
    assert all(f.measured == 5 and f.threshold == 5 and f.severity == "warning" for f in found["small_files"])
    shares = {f.partition: (f.measured, f.severity, f.procedure) for f in found["deleted_rows"]}
    heavy = (200 / 500, "warning", "rewrite_data_files")
    assert shares == {"cat=a": (20 / 500, "info", None), "cat=b": heavy, "cat=c": heavy}
    # 15 data manifests below the 8 MiB target, fitting in one
    assert [(f.measured, f.threshold) for f in found["small_manifests"]] == [(15, MIN_SMALL_MANIFESTS)]
    # every snapshot but the current one is past 5 days at FAR_FUTURE
    assert [f.measured for f in found["expired_snapshots"]] == [len(t.metadata.snapshots) - 1]
    assert found["expired_snapshots"][0].arguments == (("table", "db.t"), ("retain_last", 1))
    assert [f.severity for f in found["missing_statistics"]] == ["info"]
    assert "delete_files" not in found  # two delete files per partition: below min-input-files
    # within the retention nothing expires
    assert "expired_snapshots" not in _by_check(analyze(t.io, t.metadata, "db.t"))


def test_plan_orders_and_merges(setup):
    cat, _ = setup
    t = _neglected(cat)
    steps = plan_steps(analyze(t.io, t.metadata, "db.t", now_ms=FAR_FUTURE) + orphan_finding(t.metadata, "db.t", 2))
    assert [s.procedure for s in steps] == [
        "rewrite_data_files", "rewrite_position_delete_files", "rewrite_manifests", "expire_snapshots",
        "remove_orphan_files", "compute_table_stats",
    ]
    rewrite = dict(steps[0].arguments)
    # the size options of small_files and the delete thresholds of deleted_rows in one call
    assert rewrite["options"] == {"target-file-size-bytes": str(512 * 1024 * 1024), "min-input-files": "5",
                                  "delete-file-threshold": "1", "remove-dangling-deletes": "true"}
    assert steps[0].reasons == ("small_files", "deleted_rows")
    # the deletes of the rewritten files are left dangling by sequence number: dropped right after
    assert steps[1].arguments == (("table", "db.t"), ("options", {"rewrite-all": "true"}))
    assert steps[1].reasons == ("deleted_rows",)


def test_delete_files_compacted_unless_rewrite_drops_them(setup):
    cat, _ = setup
    t = _table(cat)
    f = _data(t, 0, "a", rows=10_000)
    t = commit(t, [FastAppend([f])], policy=FAST)
    for i in range(5):
        t = commit(t, [RowDelta(add_deletes=[_pos_delete(t, i, f, 1)])], policy=FAST)
    findings = analyze(t.io, t.metadata, "db.t")
    found = _by_check(findings)
    assert [(x.measured, x.procedure) for x in found["delete_files"]] == [(5, "rewrite_position_delete_files")]
    assert [s.procedure for s in plan_steps(findings)] == ["rewrite_position_delete_files", "compute_table_stats"]
    heavy = Finding("deleted_rows", "warning", None, 0.5, 0.3, "m", "rewrite_data_files",
                    (("table", "db.t"), ("options", {"delete-file-threshold": "1"})))
    steps = plan_steps([*findings, heavy])
    assert [s.procedure for s in steps] == ["rewrite_data_files", "rewrite_position_delete_files",
                                            "compute_table_stats"]
    assert dict(steps[1].arguments)["options"] == {"target-file-size-bytes": str(64 * 1024 * 1024),
                                                   "min-input-files": "5", "rewrite-all": "true"}


def test_deletes_of_files_gone_are_dangling(setup):
    cat, _ = setup
    t = _table(cat)
    keep, gone = _data(t, 0, "a"), _data(t, 1, "a")
    t = commit(t, [FastAppend([keep, gone])], policy=FAST)
    t = commit(t, [RowDelta(add_deletes=[_pos_delete(t, 0, keep, 10), _pos_delete(t, 1, gone, 50)])], policy=FAST)
    t = commit(t, [DeleteFiles(paths=[gone.file_path])], policy=FAST)
    found = _by_check(analyze(t.io, t.metadata, "db.t"))
    assert [(f.measured, f.procedure) for f in found["dangling_deletes"]] == [(1, "rewrite_position_delete_files")]
    # only the delete of the live file hides rows
    assert [f.measured for f in found["deleted_rows"]] == [10 / 100]


def test_healthy_table_has_no_findings(setup):
    cat, _ = setup
    t = _table(cat)
    t = commit(t, [FastAppend([_data(t, i, p) for i, p in enumerate("abab")])], policy=FAST)
    sid = t.metadata.current_snapshot_id
    stats = StatisticsFile(sid, f"{t.location}/metadata/{sid}.stats", 10, 5)
    md = dataclasses.replace(t.metadata, statistics=(stats,))
    assert analyze(t.io, md, "db.t") == []
    assert [f.check for f in analyze(t.io, t.metadata, "db.t")] == ["missing_statistics"]
    assert analyze(t.io, _table(cat, "empty").metadata, "db.empty") == []


def test_thresholds_follow_table_properties(setup):
    cat, _ = setup
    t = _table(cat, props={"write.target-file-size-bytes": "800", "history.expire.max-snapshot-age-ms": "1",
                           "history.expire.min-snapshots-to-keep": "2", "write.metadata.previous-versions-max": "2",
                           "commit.manifest.min-count-to-merge": "3"})
    for i in range(4):
        t = commit(t, [FastAppend([_data(t, i, "a", size=1000)])], policy=FAST)  # above 75% of 800: not small
    found = _by_check(analyze(t.io, t.metadata, "db.t"))
    assert "small_files" not in found
    assert [(f.measured, f.arguments) for f in found["expired_snapshots"]] == [(2, (("table", "db.t"), ("retain_last", 2)))]
    assert [(f.measured, f.threshold, f.procedure) for f in found["manifest_count"]] == [(4, 3, "rewrite_manifests")]
    log = found["metadata_log"][0]
    assert (log.measured, log.threshold, log.procedure) == (2, 2, None)
    assert "delete-after-commit" in log.statement
    with pytest.raises(ValidationError, match="write.target-file-size-bytes"):
        HealthThresholds.of({"write.target-file-size-bytes": "big"})


def test_gc_disabled_findings_name_no_procedure(setup):
    cat, _ = setup
    t = _table(cat, props={"gc.enabled": "false"})
    for i in range(2):
        t = commit(t, [FastAppend([_data(t, i, "a")])], policy=FAST)
    exp = _by_check(analyze(t.io, t.metadata, "db.t", now_ms=FAR_FUTURE))["expired_snapshots"][0]
    assert exp.procedure is None and "gc.enabled" in exp.message
    assert orphan_finding(t.metadata, "db.t", 3)[0].procedure is None
    assert orphan_finding(t.metadata, "db.t", 0) == []


def test_rendered_calls_parse_back():
    args = (("table", "db.`we.ird`"), ("retain_last", 3), ("options", {"a": "it's", "b": "x\\y"}))
    stmt = parse_call(render_call("my-cat", "expire_snapshots", args))
    assert stmt.catalog == "my-cat" and stmt.name.endswith("expire_snapshots")
    named = {k: v.value for k, v in stmt.named}
    assert named["table"] == "db.`we.ird`" and named["retain_last"] == 3
    assert {k.value: v.value for k, v in named["options"]} == {"a": "it's", "b": "x\\y"}
    assert table_reference(("db", "we.ird")) == "db.`we.ird`"
    assert sql_literal(True) == "true" and sql_literal([1, "a"]) == "array(1, 'a')"


def test_procedures_through_the_runner(setup):
    cat, conf = setup
    t = _neglected(cat, props={"history.expire.max-snapshot-age-ms": "1"})
    rows = runner.run("table_health", kwargs={"table": "db.t"}, catalog="ours", conf=conf).rows
    assert {r[0] for r in rows} == {"small_files", "deleted_rows", "small_manifests", "expired_snapshots",
                                    "missing_statistics"}
    severities = [r[1] for r in rows]
    assert severities == sorted(severities, key=("critical", "warning", "info").index)
    for r in rows:
        if r[6] is not None:  # procedure -> its CALL parses and names the same procedure and arguments
            stmt = parse_call(r[8])
            assert stmt.name.endswith(r[6]) and r[7] in r[8]
    plan = runner.run("plan_maintenance", kwargs={"table": "db.t", "include_orphans": False}, catalog="ours",
                      conf=conf).rows
    assert [r[1] for r in plan] == ["rewrite_data_files", "rewrite_position_delete_files", "rewrite_manifests",
                                    "expire_snapshots", "compute_table_stats"]
    assert [r[0] for r in plan] == [1, 2, 3, 4, 5] and not any(r[5] for r in plan) and all(r[6] is None for r in plan)
    assert plan[3][3] == "CALL ours.system.expire_snapshots(table => 'db.t', retain_last => 1)"
    # nothing changed
    assert cat.load_table(("db", "t")).metadata_location == t.metadata_location


def test_plan_execute_runs_steps_through_the_runner(setup):
    cat, conf = setup
    t = _neglected(cat, props={"history.expire.max-snapshot-age-ms": "1"})
    before = len(t.metadata.snapshots)
    # rewrite_data_files needs Spark: plan and run only what the driver can do here
    only = {"rewrite_manifests", "expire_snapshots"}
    steps = [s for s in plan_steps(analyze(t.io, t.metadata, "db.t")) if s.procedure in only]
    ctx = ProcedureContext(get_procedure("plan_maintenance"), "ours", conf, None,
                           call=lambda n, a: runner.run(n, kwargs=list(a), catalog="ours", conf=conf, lenient=True))
    results = [ctx.call_procedure(s.procedure, s.arguments) for s in steps]
    assert results[0].rows == [(21, 2)] and len(cat.load_table(("db", "t")).metadata.snapshots) < before
    assert ctx.changed_tables == [("ours", ("db", "t"))] * 2
    with pytest.raises(ValidationError, match="without a runner"):
        ProcedureContext(get_procedure("plan_maintenance"), "ours", conf).call_procedure("expire_snapshots", [])


def test_equality_deletes_are_planned_for_a_rewrite(setup):
    cat, _ = setup
    t = _table(cat)
    f = _data(t, 0, "a")
    t = commit(t, [FastAppend([f])], policy=FAST)
    eq = DataFile(f"{t.location}/data/cat=a/eq.parquet", FileFormat.PARQUET, ("a",), 3, 300,
                  content=FileContent.EQUALITY_DELETES, equality_ids=(1,), spec_id=0)
    t = commit(t, [RowDelta(add_deletes=[eq])], policy=FAST)
    findings = analyze(t.io, t.metadata, "db.t")
    found = _by_check(findings)
    assert [(x.partition, x.measured, x.severity) for x in found["equality_deletes"]] == [("cat=a", 1, "warning")]
    steps = plan_steps(findings)
    assert [s.procedure for s in steps][:2] == ["rewrite_data_files", "rewrite_position_delete_files"]
    assert dict(steps[0].arguments)["options"]["delete-file-threshold"] == "1"


def test_procedures_validate_their_arguments(setup):
    cat, conf = setup
    _table(cat)
    with pytest.raises(NoSuchTableError, match="db.nope"):
        runner.run("table_health", kwargs={"table": "db.nope"}, catalog="ours", conf=conf)
    with pytest.raises(ValidationError):
        runner.run("plan_maintenance", kwargs={"table": "db.t", "execute": "soon"}, catalog="ours", conf=conf)
    with pytest.raises(MissingParameterError):
        runner.run("plan_maintenance", kwargs={"execute": True}, catalog="ours", conf=conf)
    # an empty table: nothing to report, nothing to plan
    assert runner.run("table_health", kwargs={"table": "db.t", "include_orphans": True}, catalog="ours",
                      conf=conf).rows == []
    assert runner.run("plan_maintenance", kwargs={"table": "db.t", "execute": True}, catalog="ours",
                      conf=conf).rows == []


def test_console_plan_statement():
    conf = {"spark.sql.catalog.wh.type": "hadoop", "spark.sql.catalog.wh.warehouse": "/tmp/x"}
    assert plan_statement("wh.db.events", conf, execute=True) == \
        "CALL wh.system.plan_maintenance(table => 'db.events', execute => true)"
    assert plan_statement("db.events", {}, execute=False, include_orphans=False) == \
        "CALL local.system.plan_maintenance(table => 'db.events', execute => false, include_orphans => false)"


def _steps_with_a_failing_third(monkeypatch):
    """Patch the planner to propose five steps whose third fails (a commit conflict raised by a
    procedure registered for the test) and whose fourth needs datasketches, hidden here."""
    calls = []

    @register("boom_for_test", parameters=[P("table", "STRING", True)], output=[Col("x", "INT")], replace=True)
    def boom(ctx, table):
        calls.append(table)
        raise CommitFailedError("injected conflict in step 3")

    table = (("table", "db.t"),)
    steps = [MaintenanceStep("rewrite_manifests", table, ("small_manifests",)),
             MaintenanceStep("expire_snapshots", table + (("retain_last", 1),), ("expired_snapshots",)),
             MaintenanceStep("boom_for_test", table, ("injected",)),
             MaintenanceStep("compute_table_stats", table, ("missing_statistics",)),
             MaintenanceStep("rewrite_manifests", table, ("small_manifests",))]
    monkeypatch.setattr(plan_maintenance_module, "plan_steps", lambda findings: steps)
    monkeypatch.setitem(sys.modules, "datasketches", None)  # `import datasketches` raises ImportError
    return calls


@pytest.mark.parametrize("continue_on_error", [False, True])
def test_plan_execute_reports_every_step_when_the_third_fails(setup, monkeypatch, continue_on_error):
    cat, conf = setup
    t = _neglected(cat, props={"history.expire.max-snapshot-age-ms": "1"})
    calls = _steps_with_a_failing_third(monkeypatch)
    try:
        result = runner.run("plan_maintenance", kwargs={"table": "db.t", "execute": True, "include_orphans": False,
                                                        "continue_on_error": continue_on_error},
                            catalog="ours", conf=conf)
    finally:
        unregister("boom_for_test")
    rows = [dict(zip([c.name for c in result.columns], r)) for r in result.rows]
    assert calls == ["db.t"]
    statuses = [r["status"] for r in rows]
    if continue_on_error:
        assert statuses == ["done", "done", "failed", "skipped", "done"]
    else:
        assert statuses == ["done", "done", "failed", "not started", "not started"]
    assert [r["executed"] for r in rows] == [s in ("done", "failed") for s in statuses]
    failed = rows[2]
    assert failed["error"] == "CommitFailedError: injected conflict in step 3" and failed["output"] is None
    assert failed["result"] is None and failed["duration_seconds"] >= 0
    # typed outputs: rewrite_manifests' counts and expire_snapshots' counts as column -> value maps
    assert rows[0]["output"][0].keys() == {"rewritten_manifests_count", "added_manifests_count"}
    assert int(rows[1]["output"][0]["deleted_data_files_count"]) >= 0
    assert all(r["duration_seconds"] >= 0 for r in rows if r["status"] in ("done", "failed", "skipped"))
    assert all(r["duration_seconds"] is None and r["output"] is None for r in rows if r["status"] == "not started")
    if continue_on_error:
        assert "pip install 'iceberg-procedures[stats]'" in rows[3]["error"] and rows[3]["output"] is None
    # steps 1-2 committed; nothing else changed the table but the fifth step (when run)
    after = cat.load_table(("db", "t")).metadata
    assert len(after.snapshots) < len(t.metadata.snapshots)
    assert not after.statistics


def test_a_missing_optional_dependency_skips_the_step_with_the_install_hint(setup, monkeypatch):
    cat, conf = setup
    t = _table(cat)
    t = commit(t, [FastAppend([_data(t, 0, "a")])], policy=FAST)
    monkeypatch.setitem(sys.modules, "datasketches", None)
    ctx = ProcedureContext(get_procedure("plan_maintenance"), "ours", conf, None,
                           call=lambda n, a: runner.run(n, kwargs=list(a), catalog="ours", conf=conf))
    outcome = plan_maintenance_module.run_step(ctx, "compute_table_stats", (("table", "db.t"),))
    assert outcome.status == "skipped" and "iceberg-procedures[stats]" in outcome.error
    assert cat.load_table(("db", "t")).metadata_location == t.metadata_location


def test_plan_output_columns_are_typed():
    proc = get_procedure("plan_maintenance")
    types = {c.name: str(c.type) for c in proc.output}
    assert types["output"] == "ARRAY<MAP<STRING,STRING>>" and types["duration_seconds"] == "DOUBLE"
    assert [c.name for c in proc.output][:7] == ["step", "procedure", "arguments", "call", "reason", "executed",
                                                 "result"]


def test_console_finds_the_plan_subcommand_after_options():
    assert subcommand_index(["plan", "t"], "plan") == 0
    assert subcommand_index(["--master", "local[2]", "plan", "t", "--execute"], "plan") == 2
    assert subcommand_index(["--conf", "a=plan", "--verbose", "plan", "db.t"], "plan") == 3
    # a value of an option, a statement, or an ordinary run: no subcommand
    assert subcommand_index(["-e", "plan"], "plan") is None
    assert subcommand_index(["--master", "plan"], "plan") is None
    assert subcommand_index(["-f", "x.sql"], "plan") is None
    assert plan_statement("db.t", {}, execute=True, continue_on_error=True) == \
        "CALL local.system.plan_maintenance(table => 'db.t', execute => true, continue_on_error => true)"


def test_console_reports_failed_plan_steps():
    columns = ["step", "procedure", "status", "error"]
    rows = [(1, "rewrite_manifests", "done", None), (2, "expire_snapshots", "failed", "CommitFailedError: x"),
            (3, "compute_table_stats", "not started", None)]
    assert failed_steps(columns, rows) == ["step 2 expire_snapshots: CommitFailedError: x"]
    assert failed_steps(["status", "error"], [("failed", "x")]) == []  # not a plan's output


def _fleet(cat, count=20):
    """``count`` tables in db (and two in db.sub): every third is neglected (small files, old
    snapshots), the rest have one file; table t07's metadata is corrupt."""
    cat.create_namespace(("db", "sub"))
    props = {"history.expire.max-snapshot-age-ms": "1"}
    for i in range(count):
        name = f"t{i:02d}"
        t = _table(cat, name, props=props)
        for j in range(12 if i % 3 == 0 else 1):
            t = commit(t, [FastAppend([_data(t, j, "abc"[j % 3])])], policy=FAST)
    for name in ("s1", "s2"):
        md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/sub/{name}", spec=SPEC,
                                   format_version=2)
        t = cat.create_table(("db", "sub", name), md)
        if name == "s1":
            commit(t, [FastAppend([_data(t, 0, "a")])], policy=FAST)
    broken = cat.load_table(("db", "t07"))
    with open(broken.metadata_location.removeprefix("file:"), "w") as f:
        f.write("{ not json")
    return count + 2


def test_health_of_a_namespace_ranks_tables_and_reports_a_broken_one(setup):
    cat, conf = setup
    total = _fleet(cat)
    result = runner.run("table_health", kwargs={"table": "db.*"}, catalog="ours", conf=conf)
    rows = [dict(zip([c.name for c in result.columns], r)) for r in result.rows]
    assert rows[0]["check"] == "error" and rows[0]["table"] == "db.t07" and "Cannot examine db.t07" in rows[0]["message"]
    tables = list(dict.fromkeys(r["table"] for r in rows[1:]))
    # the neglected tables (t00, t03, ...) rank before the maintained ones; sub-namespace tables included
    neglected = [f"db.t{i:02d}" for i in range(0, 20, 3)]
    assert tables[:len(neglected)] == sorted(neglected, key=tables.index) and set(tables[:len(neglected)]) == set(neglected)
    # the sub-namespace's tables are examined too (an empty table has no findings)
    assert total == 22 and "db.sub.s1" in tables and "db.sub.s2" not in tables
    same = runner.run("table_health", kwargs={"namespace": "db"}, catalog="ours", conf=conf).rows
    assert same == result.rows
    with pytest.raises(ValidationError, match="not both"):
        runner.run("table_health", kwargs={"table": "db.*", "namespace": "db"}, catalog="ours", conf=conf)
    with pytest.raises(ValidationError, match="does not exist"):
        runner.run("table_health", kwargs={"namespace": "nope"}, catalog="ours", conf=conf)
    with pytest.raises(MissingParameterError):
        runner.run("table_health", kwargs={}, catalog="ours", conf=conf)


def test_catalog_maintenance_within_a_budget(setup, monkeypatch):
    """20 tables, each step 'taking' a minute on a fake clock, a 10-minute budget: the first ten
    steps run (most neglected tables first), every later step is not started and says why, the
    broken table is reported and the others go on."""
    cat, conf = setup
    _fleet(cat)
    clock = [1000.0]
    real_run_step = plan_maintenance_module.run_step

    def one_minute_step(ctx, procedure, arguments):
        clock[0] += 60
        return real_run_step(ctx, procedure, arguments)

    only = {"rewrite_manifests", "expire_snapshots"}  # what runs without Spark here
    real_plan = plan_maintenance_module.plan_steps
    monkeypatch.setattr(plan_maintenance_module, "plan_steps",
                        lambda findings: [s for s in real_plan(findings) if s.procedure in only])
    monkeypatch.setattr(plan_maintenance_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(plan_maintenance_module, "run_step", one_minute_step)
    result = runner.run("plan_maintenance", kwargs={"table": "*", "execute": True, "include_orphans": False,
                                                    "max_duration": "10m"}, catalog="ours", conf=conf)
    rows = [dict(zip([c.name for c in result.columns], r)) for r in result.rows]
    assert rows[0]["status"] == "failed" and rows[0]["table"] == "db.t07" and rows[0]["step"] == 0
    steps = rows[1:]
    statuses = [r["status"] for r in steps]
    assert statuses[:10] == ["done"] * 10 and set(statuses[10:]) == {"not started"} and len(statuses) > 10
    assert all("max_duration '10m'" in r["error"] for r in steps[10:])
    # the neglected tables (12 snapshots each) were maintained first
    assert {r["table"] for r in steps[:10]} <= {f"db.t{i:02d}" for i in range(0, 20, 3)}
    assert len(cat.load_table(("db", "t00")).metadata.snapshots) < 12
    assert len(cat.load_table(("db", "t18")).metadata.snapshots) == 12  # not reached within the budget
    with pytest.raises(ValidationError, match="Cannot parse duration"):
        runner.run("plan_maintenance", kwargs={"table": "*", "max_duration": "soon"}, catalog="ours", conf=conf)


def test_durations():
    assert parse_duration("90s") == 90 and parse_duration("45m") == 2700 and parse_duration("2h") == 7200
    assert parse_duration("1d") == 86400 and parse_duration("500ms") == 0.5 and parse_duration("30") == 30
    assert parse_duration(None) is None
    for bad in ("0s", "-1m", "1w", ""):
        with pytest.raises(ValidationError):
            parse_duration(bad)


def test_console_maintain_statement_and_report():
    conf = {"spark.sql.catalog.wh.type": "hadoop", "spark.sql.catalog.wh.warehouse": "/tmp/x"}
    assert maintain_statement("wh", conf) == \
        "CALL wh.system.plan_maintenance(namespace => '*', execute => true)"
    assert maintain_statement("wh.db", conf, max_duration="2h", include_orphans=False) == \
        "CALL wh.system.plan_maintenance(namespace => 'db', execute => true, include_orphans => false, " \
        "max_duration => '2h')"
    assert maintain_statement("db", {}, execute=False, continue_on_error=True) == \
        "CALL local.system.plan_maintenance(namespace => 'db', execute => false, continue_on_error => true)"
    columns = ["step", "procedure", "status", "error", "output", "table"]
    rows = [(1, "rewrite_manifests", "done", None, [{"a": "1"}], "db.a"),
            (0, "table_health", "failed", "InvalidMetadataError: x", None, "db.b"),
            (2, "expire_snapshots", "not started", "max_duration", None, "db.a")]
    report = maintenance_report("CALL ...", columns, rows, 0.0, 12.5)
    assert report["tables"] == 2 and report["duration_seconds"] == 12.5
    assert report["status_counts"] == {"done": 1, "failed": 1, "not started": 1}
    assert report["failed"] == [dict(zip(columns, rows[1]))] and report["steps"][0]["output"] == [{"a": "1"}]
    assert report["started"] == "1970-01-01T00:00:00+00:00"
