"""Fault points (``procedures.core.kernel.fault_points``): the hook itself, plans counted across processes,
and what the commit loop does when a fault comes from inside the catalog's metadata swap."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from procedures.catalog.base import staged_create
from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel import fault_points as FP
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.fault_points import FaultPlan, InjectedFault
from procedures.core.kernel.operations import FastAppend
from procedures.core.data_rewrite.grouping import plan_rewrite
from procedures.core.data_rewrite.options import parse_rewrite_options
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.errors import CommitFailedError, CommitStateUnknownError
from procedures.io.fileio import FileIO
from procedures.spec.manifest.manifest_list import read_manifest_list
from procedures.spec.manifest.model import DataFile, FileFormat
from procedures.spec.schema import Schema
from procedures.spec.types import LONG, NestedField
from tests.helpers.fake_rewrite import run_groups

FAST = RetryPolicy(num_retries=2, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=60_000)
SCHEMA = Schema((NestedField(1, "id", LONG, True),))


@pytest.fixture(autouse=True)
def no_injector():
    previous = FP.install(None)
    yield
    FP.install(previous)


def test_unarmed_points_do_nothing(tmp_path):
    assert FP.installed() is None
    FP.reached(FP.WRITE, "x")
    io = FileIO()
    io.write(str(tmp_path / "a"), b"1")
    assert io.delete(str(tmp_path / "a"))


def test_io_reports_writes_and_deletes(tmp_path):
    seen: list[tuple[str, str]] = []
    FP.install(lambda kind, path: seen.append((kind, os.path.basename(path))))
    io = FileIO()
    io.write(str(tmp_path / "a"), b"1")
    with io.new_output(str(tmp_path / "b")).create() as out:
        out.write(b"2")
    io.rename_if_absent(str(tmp_path / "b"), str(tmp_path / "c"))
    io.delete_many([str(tmp_path / "a"), str(tmp_path / "c")], max_workers=1)
    assert seen == [("write", "a"), ("write", "b"), ("write", "c"), ("delete", "a"), ("delete", "c")]


def _reach_writes(plan_file: str, n: int) -> None:
    FP.install_plan(plan_file, side="task")
    for i in range(n):
        FP.reached(FP.WRITE, f"child-{i}")


@pytest.mark.slow  # several processes
def test_a_plan_counts_across_processes_and_raises_at_the_nth_point(tmp_path):
    log, plan_file = str(tmp_path / "log"), str(tmp_path / "plan")
    with open(plan_file, "w") as f:
        f.write(FaultPlan(log, kind=FP.WRITE, n=5, action="raise").to_json())
    child = multiprocessing.get_context("spawn").Process(target=_reach_writes, args=(plan_file, 3))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    FP.install_plan(plan_file, side="driver")
    FP.reached(FP.DELETE, "d")  # another kind: not counted with the writes
    FP.reached(FP.WRITE, "w4")
    with pytest.raises(InjectedFault, match="write #5"):
        FP.reached(FP.WRITE, "w5")
    FP.reached(FP.WRITE, "w6")  # only the N-th point fails
    rows = FP.read_log(log)
    assert [(k, s) for k, s, _, _ in rows] == [("write", "task")] * 3 + [
        ("delete", "driver"), ("write", "driver"), ("write", "driver"), ("write", "driver")]
    FP.install_plan(None)
    assert FP.installed() is None


def test_a_plan_limited_to_tasks_ignores_the_driver(tmp_path):
    log = str(tmp_path / "log")
    FP.install(FaultPlan(log, kind=FP.WRITE, n=1, action="raise", where="task").injector("driver"))
    FP.reached(FP.WRITE, "x")
    assert FP.read_log(log) == []


def _table(tmp_path):
    catalog = HadoopCatalog("local", str(tmp_path / "wh"))
    catalog.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{catalog.warehouse}/db/t")
    return catalog, catalog.create_table(("db", "t"), md)


def _hint_write_fails(error: BaseException):
    def inject(kind: str, path: str) -> None:
        if kind == FP.WRITE and path.endswith("version-hint.text"):
            raise error
    return inject


@pytest.mark.parametrize("error, raised", [(RuntimeError("disk gone"), CommitStateUnknownError),
                                           (KeyboardInterrupt(), KeyboardInterrupt)])
def test_a_failure_after_the_swap_deletes_nothing_the_table_references(tmp_path, error, raised):
    # the hadoop catalog writes the version hint after the new version file: the swap has happened
    catalog, table = _table(tmp_path)
    FP.install(_hint_write_fails(error))
    with pytest.raises(raised) as e:
        commit(table, [FastAppend([DataFile(f"{table.location}/data/f.parquet", FileFormat.PARQUET, (), 1, 10)])],
               policy=FAST)
    FP.install(None)
    if raised is CommitStateUnknownError:
        # the error names the table and says what to do; the I/O error stays reachable
        assert e.value.table == "local.db.t" and e.value.cause is error and e.value.__cause__ is error
        assert str(e.value).startswith("Cannot tell whether the commit to local.db.t happened: the metadata swap "
                                        "failed with RuntimeError('disk gone'); reload the table")
    landed = catalog.load_table(("db", "t"))
    snapshot = landed.metadata.current_snapshot()
    assert snapshot is not None
    assert os.path.exists(snapshot.manifest_list)
    for m in read_manifest_list(landed.io, snapshot.manifest_list):
        assert os.path.exists(m.manifest_path)


def test_a_commit_reports_its_points_with_the_table_and_the_new_metadata(tmp_path):
    """Fault plans pick their point by kind and path: the commit point carries the table's name, the
    swapped point the metadata file that just became current."""
    _, table = _table(tmp_path)
    seen: list[tuple[str, str]] = []
    FP.install(lambda kind, path: seen.append((kind, path)) if kind in (FP.COMMIT, FP.SWAPPED) else None)
    try:
        done = commit(table, [FastAppend([DataFile(f"{table.location}/data/f.parquet", FileFormat.PARQUET, (), 1, 10)])],
                      policy=FAST)
    finally:
        FP.install(None)
    assert seen == [(FP.COMMIT, "local.db.t"), (FP.SWAPPED, done.metadata_location)]


def test_a_failure_before_the_swap_still_cleans_up(tmp_path):
    catalog, table = _table(tmp_path)

    def fail_commit(kind: str, path: str) -> None:
        if kind == FP.COMMIT:
            raise InjectedFault("before the swap")

    FP.install(fail_commit)
    with pytest.raises(InjectedFault):
        commit(table, [FastAppend([DataFile(f"{table.location}/data/f.parquet", FileFormat.PARQUET, (), 1, 10)])],
               policy=FAST)
    FP.install(None)
    assert catalog.load_table(("db", "t")).metadata.current_snapshot() is None
    assert sorted(os.listdir(os.path.join(table.location, "metadata"))) == ["v1.metadata.json", "version-hint.text"]


def test_a_rewrite_failing_after_its_commit_landed_keeps_the_files_it_wrote(tmp_path):
    # the commit lands, then the process fails before the commit returns (the "swapped" point):
    # the rewrite's new data files are referenced now and must stay
    catalog, table = _table(tmp_path)
    for i in range(3):
        table = commit(table, [FastAppend([DataFile(f"{table.location}/data/f{i}.parquet", FileFormat.PARQUET,
                                                    (), 10, 100)])], policy=FAST)
    opts = parse_rewrite_options({"target-file-size-bytes": "1000", "min-input-files": "2"})
    plan = plan_rewrite(table.metadata, table.io, opts)
    assert plan.groups
    written = []

    def rewrite(group, p):
        path = f"{table.location}/data/new-{group.global_index}.parquet"
        table.io.write(path, b"x")
        written.append(path)
        return [DataFile(path, FileFormat.PARQUET, (), sum(f.record_count for f in group.files), 1)]

    def fail_after_swap(kind: str, path: str) -> None:
        if kind == FP.SWAPPED:
            raise InjectedFault("after the swap")

    starting_id = table.metadata.current_snapshot_id
    FP.install(fail_after_swap)
    with pytest.raises(InjectedFault):
        run_groups(table, opts, plan, starting_id, rewrite, lambda t, ops: commit(t, ops, policy=FAST))
    FP.install(None)
    landed = catalog.load_table(("db", "t"))
    assert landed.metadata.current_snapshot().summary["operation"] == "replace"
    assert written and all(os.path.exists(p) for p in written)


def test_a_create_failing_before_the_table_exists_leaves_no_files(tmp_path):
    # snapshot and migrate create their table with its first snapshot in one commit; when writing the
    # first metadata file fails, nothing was created and the manifests written for it must go
    catalog = HadoopCatalog("local", str(tmp_path / "wh"))
    catalog.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{catalog.warehouse}/db/t")

    def fail_first_version(kind: str, path: str) -> None:
        if kind == FP.WRITE and path.endswith("v1.metadata.json"):
            raise InjectedFault("disk full")

    FP.install(fail_first_version)
    with pytest.raises(CommitFailedError):
        commit(staged_create(catalog, ("db", "t"), md),
               [FastAppend([DataFile(f"{md.location}/data/f.parquet", FileFormat.PARQUET, (), 1, 10)])], policy=FAST)
    FP.install(None)
    assert not catalog.table_exists(("db", "t"))
    left = [f for _, _, fs in os.walk(md.location) for f in fs]
    assert left == [], left
