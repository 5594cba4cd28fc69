"""Kill anywhere (issue #17): every procedure that changes a table, stopped at each of its write,
delete and commit points.

For each case a tiny table is built once with Iceberg Java and its folder saved.  A first run of our
procedure counts the points it reaches (:class:`procedures.core.fault_points.FaultPlan` with
``action="count"``, on the driver and in Spark tasks alike).  Then, for every kind and every N, the
folder is restored and the procedure runs again with an :class:`InjectedFault` raised at the N-th
point of that kind.  After each failure:

* PyIceberg and DuckDB read exactly the rows the table had before, or, for a procedure that adds
  rows, exactly the rows it has after a complete run (Java too, on the points after which the table
  changed, and on the first point of each kind);
* every file the metadata, any retained snapshot or statistics reference exists;
* a rerun, right away, completes (or, when the failed attempt had already landed, refuses as a second
  complete run would) and leaves the rows of a complete run;
* then remove_orphan_files (cutoff in the future) leaves nothing under the table location that nothing
  references, and every referenced file is still there: whatever the failed attempt wrote was
  deleted, reused or is collectable, never referenced.

``test_driver_killed`` runs the procedure in a child Python process killed with SIGKILL at sampled
points (right before the metadata swap, right after it, and at a write in between), and
``test_python_worker_killed`` kills a Spark Python worker in the middle of a rewrite task.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from procedures.core import fault_points as FP
from procedures.catalog.config import conf_from_spark
from procedures.core.fault_points import FaultPlan
from procedures.core.gc.reachability import metadata_file_paths, statistics_paths
from procedures.core.paths import local_path
from procedures.errors import IcebergError
from procedures.framework.context import open_catalog
from procedures.frontend import runner
from procedures.spec.manifest import read_manifest, read_manifest_list
from tests.helpers.faults import armed, count_points
from tests.helpers.files import fingerprint, touch
from tests.oracles import assert_rows_equal, duckdb_read, java_read, pyiceberg_read, spark_df_to_arrow

pytestmark = pytest.mark.spark

FUTURE = dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)
BASE = ("CREATE TABLE {t} (id bigint, v string, p int) USING iceberg PARTITIONED BY (p) "
        "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
FLAT = "CREATE TABLE {t} (id bigint, v string) USING iceberg TBLPROPERTIES ('format-version'='2')"
THREE_INSERTS = [f"INSERT INTO {{t}} VALUES ({i}, 'v{i}', {i % 2}), ({i + 10}, 'w{i}', {(i + 1) % 2})" for i in range(3)]
FLAT_INSERTS = [f"INSERT INTO {{t}} VALUES ({i}, 'v{i}'), ({i + 10}, 'w{i}')" for i in range(3)]


@dataclass(frozen=True)
class Case:
    """One procedure call on one tiny table."""

    id: str
    proc: str
    steps: tuple[str, ...]
    kwargs: dict = field(default_factory=dict)
    #: rows change (add_files): a complete run's rows are the expected ones, and a second run refuses
    adds_rows: bool = False


CASES = [
    Case("rewrite_binpack", "rewrite_data_files", (FLAT, *FLAT_INSERTS), {"options": {"min-input-files": "2"}}),
    Case("rewrite_sort", "rewrite_data_files", (BASE, *THREE_INSERTS),
         {"strategy": "sort", "sort_order": "id DESC NULLS LAST", "options": {"min-input-files": "2"}}),
    Case("rewrite_zorder", "rewrite_data_files", (FLAT, *FLAT_INSERTS),
         {"strategy": "sort", "sort_order": "zorder(id, v)", "options": {"min-input-files": "2"}}),
    Case("rewrite_manifests", "rewrite_manifests", (BASE, *THREE_INSERTS)),
    Case("rewrite_position_deletes", "rewrite_position_delete_files",
         (BASE, *THREE_INSERTS, "DELETE FROM {t} WHERE id = 1", "DELETE FROM {t} WHERE id = 11"),
         {"options": {"rewrite-all": "true"}}),
    Case("expire_snapshots", "expire_snapshots",
         (BASE, *THREE_INSERTS, "INSERT OVERWRITE {t} SELECT id, v, p FROM {t} WHERE id < 10"),
         {"older_than": FUTURE, "retain_last": 1}),
    Case("remove_orphan_files", "remove_orphan_files", (BASE, *THREE_INSERTS)),
    Case("add_files", "add_files", (FLAT, FLAT_INSERTS[0]), adds_rows=True),
    Case("compute_table_stats", "compute_table_stats", (BASE, *THREE_INSERTS)),
    Case("compute_partition_stats", "compute_partition_stats", (BASE, *THREE_INSERTS)),
]


@pytest.fixture(scope="module")
def env(spark, java_warehouse, tmp_path_factory):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.db")
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(java_warehouse),
            "spark.sql.session.timeZone": "UTC", "spark.sql.caseSensitive": "false", "spark.testing": "true"}
    return Env(spark, java_warehouse, conf, open_catalog("ours", conf), tmp_path_factory.mktemp("kill"))


@dataclass
class Env:
    spark: object
    warehouse: Path
    conf: dict
    catalog: object
    tmp: Path

    def location(self, name: str) -> str:
        return str(self.warehouse / "db" / name)

    def table(self, name: str):
        return self.catalog.load_table(("db", name))

    def run(self, proc: str, name: str, **kwargs):
        return runner.run(proc, kwargs={"table": f"db.{name}", **kwargs}, catalog="ours", conf=self.conf,
                          spark=self.spark).rows


# ------------------------------------------------------------------------------ table checks
def referenced(table) -> set[str]:
    """Every file the table's metadata reaches: metadata files, manifest lists, manifests, live
    content files of every retained snapshot, statistics files."""
    md = table.metadata
    out = set(metadata_file_paths(md, table.metadata_location)) | set(statistics_paths(md))
    for s in md.snapshots:
        out.add(s.manifest_list)
        for m in read_manifest_list(table.io, s.manifest_list):
            out.add(m.manifest_path)
            out.update(e.data_file.file_path for e in read_manifest(table.io, m, skip_deleted=True))
    return {local_path(p) or p for p in out}


def on_disk(root: str) -> set[str]:
    """Table files below ``root`` (hidden files and Hadoop's checksums are not table files)."""
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if not f.startswith(".")}


def check_table(env: Env, name: str, expected: pa.Table, label: str, java: bool) -> set[str]:
    """Rows through the oracles and every referenced file present; returns the referenced files."""
    table = env.table(name)
    refs = referenced(table)
    missing = sorted(p for p in refs if not os.path.exists(p))
    assert not missing, f"{label}: referenced files missing: {missing}"
    assert_rows_equal(pyiceberg_read(table.metadata_location), expected, key="id", label=f"{label} / pyiceberg")
    assert_rows_equal(duckdb_read(table.metadata_location), expected, key="id", label=f"{label} / duckdb")
    if java:
        env.spark.sql(f"REFRESH TABLE jcat.db.{name}")
        assert_rows_equal(java_read(env.spark, f"jcat.db.{name}"), expected, key="id", label=f"{label} / java")
    return refs


def collect_orphans(env: Env, name: str, label: str) -> None:
    """remove_orphan_files with a cutoff in the future: afterwards nothing unreferenced is left."""
    env.run("remove_orphan_files", name, older_than=FUTURE)
    table = env.table(name)
    refs = referenced(table)
    leftover = on_disk(env.location(name)) - refs - {os.path.join(env.location(name), "metadata", "version-hint.text")}
    assert not leftover, f"{label}: files nothing references survived remove_orphan_files: {sorted(leftover)}"


# ------------------------------------------------------------------------------ set-up
def build(env: Env, case: Case, name: str) -> str:
    """Build the case's table with Java; returns the folder holding its pristine copy."""
    spark = env.spark
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name} PURGE")
    for step in case.steps:
        spark.sql(step.format(t=f"jcat.db.{name}"))
    location = env.location(name)
    if case.proc == "remove_orphan_files":
        touch(os.path.join(location, "data", "p=0", "orphan-1.parquet"))
        touch(os.path.join(location, "metadata", "orphan-2.avro"))
    saved = str(env.tmp / f"{name}.saved")
    shutil.rmtree(saved, ignore_errors=True)
    shutil.copytree(location, saved)
    return saved


def restore(env: Env, name: str, saved: str) -> None:
    location = env.location(name)
    shutil.rmtree(location, ignore_errors=True)
    shutil.copytree(saved, location)
    env.spark.sql(f"REFRESH TABLE jcat.db.{name}")


def source_files(env: Env, case: Case) -> dict:
    """add_files' source: two Parquet files outside the warehouse."""
    folder = env.tmp / f"{case.id}_source"
    if not folder.exists():
        folder.mkdir()
        for i in range(2):
            pq.write_table(pa.table({"id": pa.array([100 + i, 200 + i], pa.int64()), "v": [f"s{i}", f"t{i}"]}),
                           folder / f"part-{i}.parquet")
    return {"source_table": f"`parquet`.`{folder}`"}


def call_kwargs(env: Env, case: Case) -> dict:
    return {**case.kwargs, **(source_files(env, case) if case.proc == "add_files" else {})}


def points(env: Env, case: Case, name: str, kwargs: dict) -> dict[str, int]:
    """Run the procedure once on the pristine table, counting its points per kind."""
    log = str(env.tmp / f"{name}.count.log")
    if os.path.exists(log):
        os.unlink(log)
    with armed(env.spark, FaultPlan(log, action="count"), str(env.tmp / f"{name}.count.plan")):
        env.run(case.proc, name, **kwargs)
    return count_points(log)


# ------------------------------------------------------------------------------ in-process faults
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fault_at_every_point(env, case):
    name = f"kill_{case.id}"
    saved = build(env, case, name)
    kwargs = call_kwargs(env, case)
    before_location = env.table(name).metadata_location
    before = pyiceberg_read(before_location)
    counts = points(env, case, name, kwargs)
    after = pyiceberg_read(env.table(name).metadata_location)
    expected = after if case.adds_rows else before
    assert_rows_equal(after, expected, key="id", label="complete run")
    assert counts.get(FP.WRITE, 0) > 0 and counts.get(FP.COMMIT, 0) > 0, counts
    print(f"{case.id}: {counts}")
    failures = []
    for kind in FP.KINDS:
        for n in range(1, counts.get(kind, 0) + 1):
            label = f"{case.id} {kind} #{n}"
            restore(env, name, saved)
            try:
                fail_once(env, case, name, kwargs, kind, n, before, expected, before_location, label)
            except AssertionError as e:
                failures.append(str(e))
    assert not failures, "\n".join(failures)


def fail_once(env, case, name, kwargs, kind, n, before, expected, before_location, label) -> None:
    log = str(env.tmp / f"{name}.log")
    if os.path.exists(log):
        os.unlink(log)
    plan = FaultPlan(log, kind=kind, n=n, action="raise")
    error = None
    with armed(env.spark, plan, str(env.tmp / f"{name}.plan")):
        try:
            env.run(case.proc, name, **kwargs)
        except Exception as e:  # noqa: BLE001 -- any failure is allowed; the table is what is checked
            error = e
    hits = [r for r in FP.read_log(log) if r[0] == kind]
    assert len(hits) >= n, f"{label}: the point was not reached again ({len(hits)} {kind} points)"
    landed = env.table(name).metadata_location != before_location
    rows_now = expected if (landed or not case.adds_rows) else before
    java = landed or n == 1
    check_table(env, name, rows_now, f"{label} (failed: {error!r:.200})", java)
    try:
        env.run(case.proc, name, **kwargs)
    except IcebergError as e:
        assert landed and case.adds_rows, f"{label}: the rerun failed: {e!r}"
    check_table(env, name, expected, f"{label} after a rerun", java=landed)
    collect_orphans(env, name, label)
    check_table(env, name, expected, f"{label} after remove_orphan_files", java=False)


# ------------------------------------------------------------------------------ SIGKILL of the driver
ROOT = Path(__file__).resolve().parents[2]
#: procedures the driver-kill test runs in a child without Spark (their driver path), and with it
DRIVER_ONLY = ("expire_snapshots", "remove_orphan_files", "rewrite_manifests", "rewrite_position_deletes",
               "compute_table_stats", "compute_partition_stats")
WITH_SPARK = ("rewrite_binpack",)


def sample_points(log: list[tuple[str, str, int, str]]) -> list[tuple[str, int]]:
    """The points a driver kill is tried at: the first write, right before the swap (the commit
    point and the write of the new metadata file), right after it (the write after that one and the
    swapped point), and the first delete."""
    out: list[tuple[str, int]] = []
    writes = [path for kind, _, _, path in log if kind == FP.WRITE]
    if writes:
        out.append((FP.WRITE, 1))
    metadata = [i for i, p in enumerate(writes, 1) if p.endswith(".metadata.json")]
    if metadata:
        out.append((FP.WRITE, metadata[-1]))
        if metadata[-1] < len(writes):
            out.append((FP.WRITE, metadata[-1] + 1))
    kinds = {kind for kind, _, _, _ in log}
    out += [(kind, 1) for kind in (FP.COMMIT, FP.SWAPPED, FP.DELETE) if kind in kinds]
    return list(dict.fromkeys(out))


def run_child(env: Env, case: Case, name: str, kwargs: dict, plan: FaultPlan, master: str | None):
    spec = {"proc": case.proc, "table": f"db.{name}", "conf": env.conf, "spark": master,
            "kwargs": {k: ({"ts": v.timestamp()} if isinstance(v, dt.datetime) else v) for k, v in kwargs.items()},
            "plan": {"log_path": plan.log_path, "kind": plan.kind, "n": plan.n, "action": plan.action,
                     "where": plan.where},
            "plan_file": str(env.tmp / f"{name}.child.plan")}
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "tests.helpers.kill_child", json.dumps(spec)], cwd=ROOT,
                          env=environ, capture_output=True, text=True, timeout=600)


KILL_CASES = [c for c in CASES if c.id in DRIVER_ONLY + WITH_SPARK]


@pytest.mark.parametrize("case", KILL_CASES, ids=[c.id for c in KILL_CASES])
def test_driver_killed(env, case):
    name = f"dkill_{case.id}"
    saved = build(env, case, name)
    kwargs = call_kwargs(env, case)
    before_location = env.table(name).metadata_location
    before = pyiceberg_read(before_location)
    count_log = str(env.tmp / f"{name}.count.log")
    points(env, case, name, kwargs)
    expected = pyiceberg_read(env.table(name).metadata_location) if case.adds_rows else before
    master = "local[2]" if case.id in WITH_SPARK else None
    sample = sample_points(FP.read_log(count_log))
    assert (FP.COMMIT, 1) in sample or case.proc == "remove_orphan_files", sample
    failures = []
    for kind, n in sample:
        label = f"{case.id} SIGKILL at {kind} #{n}"
        restore(env, name, saved)
        log = str(env.tmp / f"{name}.kill.log")
        if os.path.exists(log):
            os.unlink(log)
        child = run_child(env, case, name, kwargs, FaultPlan(log, kind=kind, n=n, action="kill", where="driver"),
                          master)
        try:
            assert child.returncode == -signal.SIGKILL, \
                f"{label}: the child was not killed (exit {child.returncode}): {child.stderr[-2000:]}"
            landed = env.table(name).metadata_location != before_location
            rows_now = expected if (landed or not case.adds_rows) else before
            check_table(env, name, rows_now, label, java=True)
            env.run(case.proc, name, **kwargs)
            check_table(env, name, expected, f"{label} after a rerun", java=False)
            collect_orphans(env, name, label)
            check_table(env, name, expected, f"{label} after remove_orphan_files", java=False)
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, "\n".join(failures)


# ------------------------------------------------------------------------------ SIGKILL of a worker
def test_python_worker_killed(env):
    """A Python worker dies (SIGKILL) as it starts writing a rewritten file; Spark (local[2,4]: up
    to 4 attempts per task) runs the task again, the rewrite completes, and the table references
    each new file once."""
    case = next(c for c in CASES if c.id == "rewrite_binpack")
    name = "wkill_rewrite_binpack"
    build(env, case, name)
    before = pyiceberg_read(env.table(name).metadata_location)
    log = str(env.tmp / f"{name}.kill.log")
    child = run_child(env, case, name, call_kwargs(env, case),
                      FaultPlan(log, kind=FP.WRITE, n=1, action="kill", where="task"), "local[2,4]")
    assert child.returncode == 0, child.stderr[-3000:]
    task_writes = [r for r in FP.read_log(log) if r[0] == FP.WRITE and r[1] == "task"]
    assert len(task_writes) >= 2 and len({pid for _, _, pid, _ in task_writes}) >= 2, task_writes  # killed, retried
    table = env.table(name)
    assert table.metadata.current_snapshot().summary["operation"] == "replace"
    check_table(env, name, before, "worker killed", java=True)
    live = [e.data_file.file_path for m in read_manifest_list(table.io, table.metadata.current_snapshot().manifest_list)
            for e in read_manifest(table.io, m, skip_deleted=True)]
    assert len(live) == len(set(live)) == 1, live
    collect_orphans(env, name, "worker killed")
    check_table(env, name, before, "worker killed, after remove_orphan_files", java=False)


# ------------------------------------------------------------------------------ snapshot
def test_snapshot_fault_at_every_point(spark, tmp_path):
    """snapshot of a Parquet table of Spark's session catalog into our hive catalog, failing at each
    point: either no table was created and a rerun creates it, or the table is complete; the source's
    files are never touched."""
    spark.conf.set("spark.sql.catalog.ohive.type", "hive")
    conf = {**conf_from_spark(spark), "spark.sql.catalog.ohive.type": "hive"}
    hive = open_catalog("ohive", conf)
    spark.sql("CREATE DATABASE IF NOT EXISTS spark_catalog.killdb")
    spark.sql("DROP TABLE IF EXISTS spark_catalog.killdb.snap_src")
    spark.sql("CREATE TABLE spark_catalog.killdb.snap_src (id bigint, v string) USING parquet")
    for i in range(2):
        spark.sql(f"INSERT INTO spark_catalog.killdb.snap_src VALUES ({i}, 'v{i}'), ({i + 10}, 'w{i}')")
    source_rows = spark_df_to_arrow(spark.table("spark_catalog.killdb.snap_src"))
    source_dir = local_path(next(r.data_type for r in spark.sql(
        "DESCRIBE TABLE EXTENDED spark_catalog.killdb.snap_src").collect() if r.col_name == "Location"))
    source_files = fingerprint(source_dir)
    ident = ("killdb", "snap_t")

    def drop_target():
        if hive.table_exists(ident):
            location = local_path(hive.load_table(ident).metadata.location)
            hive.drop_table(ident)
            shutil.rmtree(location, ignore_errors=True)

    def run():
        return runner.run("snapshot", kwargs={"source_table": "killdb.snap_src", "table": "killdb.snap_t"},
                          catalog="ohive", conf=conf, spark=spark)

    def check_target(label):
        table = hive.load_table(ident)
        missing = sorted(p for p in referenced(table) if not os.path.exists(p))
        assert not missing, f"{label}: referenced files missing: {missing}"
        assert_rows_equal(pyiceberg_read(table.metadata_location), source_rows, key="id", label=f"{label} / pyiceberg")
        assert_rows_equal(duckdb_read(table.metadata_location), source_rows, key="id", label=f"{label} / duckdb")

    drop_target()
    log = str(tmp_path / "count.log")
    with armed(spark, FaultPlan(log, action="count"), str(tmp_path / "count.plan")):
        run()
    counts = count_points(log)
    assert counts.get(FP.WRITE, 0) > 0 and counts.get(FP.COMMIT, 0) == 1, counts
    failures = []
    for kind in FP.KINDS:
        for n in range(1, counts.get(kind, 0) + 1):
            label = f"snapshot {kind} #{n}"
            drop_target()
            plan_log = str(tmp_path / f"{kind}{n}.log")
            try:
                with armed(spark, FaultPlan(plan_log, kind=kind, n=n, action="raise"), str(tmp_path / "plan")):
                    try:
                        run()
                    except Exception:  # noqa: BLE001 -- the catalog and files are what is checked
                        pass
                assert fingerprint(source_dir) == source_files, f"{label}: the source's files changed"
                if hive.table_exists(ident):
                    check_target(label)
                    spark.sql("REFRESH TABLE jhive.killdb.snap_t")
                    assert_rows_equal(java_read(spark, "jhive.killdb.snap_t"), source_rows, key="id",
                                      label=f"{label} / java")
                else:
                    run()
                    check_target(f"{label} after a rerun")
            except AssertionError as e:
                failures.append(str(e))
    drop_target()
    assert not failures, "\n".join(failures)
