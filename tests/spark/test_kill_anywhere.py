"""Kill anywhere (issue #17): every procedure that changes a table, stopped at each of its write,
delete and commit points.

For each case a tiny table is built once with Iceberg Java and its folder saved.  A first run of our
procedure counts the points it reaches (:class:`procedures.core.kernel.fault_points.FaultPlan` with
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
points (right before the metadata swap, right after it, the first write and the first delete),
``test_interrupt_at_every_driver_point`` raises ``KeyboardInterrupt`` at every driver point, and
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from procedures.core.kernel import fault_points as FP
from procedures.spark.catalog_conf import conf_from_spark
from procedures.core.kernel.fault_points import FaultPlan
from procedures.core.manifest_rewrite import clustering as RM
from procedures.core.gc import reachability as R
from procedures.core.gc.reachability import metadata_file_paths, statistics_paths
from procedures.core.kernel.paths import local_path
from procedures.errors import IcebergError
from procedures.framework.context import open_catalog
from procedures.frontend import runner
from procedures.spark.session import in_caller_context, job_group
from procedures.spec.manifest.manifest_list import read_manifest_list
from procedures.spec.manifest.reader import read_manifest
from tests.helpers.faults import armed, count_points
from tests.helpers.files import fingerprint, touch
from tests.oracles import assert_rows_equal, duckdb_read, java_read, pyiceberg_read, spark_df_to_arrow

pytestmark = [pytest.mark.spark, pytest.mark.java]

FUTURE = dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)
#: the hadoop layout's version hint: counted as reachable, but optional (a hive table has none)
HINT = "/version-hint.text"
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
    #: Spark tasks write files (their points are counted with the driver's)
    task_writes: bool = False
    #: rewrite_manifests on the executors, each manifest written in parts that a task joins
    in_parts: bool = False


CASES = [
    Case("rewrite_binpack", "rewrite_data_files", (FLAT, *FLAT_INSERTS), {"options": {"min-input-files": "2"}},
         task_writes=True),
    Case("rewrite_sort", "rewrite_data_files", (BASE, *THREE_INSERTS),
         {"strategy": "sort", "sort_order": "id DESC NULLS LAST", "options": {"min-input-files": "2"}},
         task_writes=True),
    Case("rewrite_zorder", "rewrite_data_files", (FLAT, *FLAT_INSERTS),
         {"strategy": "sort", "sort_order": "zorder(id, v)", "options": {"min-input-files": "2"}},
         task_writes=True),
    Case("rewrite_manifests", "rewrite_manifests", (BASE, *THREE_INSERTS)),
    Case("rewrite_manifests_parts", "rewrite_manifests", (BASE, *THREE_INSERTS), task_writes=True, in_parts=True),
    # rows of one partition in one file, so that Java writes position deletes instead of dropping files
    Case("rewrite_position_deletes", "rewrite_position_delete_files",
         (BASE, "INSERT INTO {t} VALUES (1, 'a', 1), (3, 'b', 1), (5, 'c', 1), (2, 'd', 0)",
          "DELETE FROM {t} WHERE id = 1", "DELETE FROM {t} WHERE id = 3"),
         {"options": {"rewrite-all": "true"}}, task_writes=True),
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
    missing = sorted(p for p in refs if not os.path.exists(p) and not p.endswith(HINT))
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
    leftover = {p for p in on_disk(env.location(name)) - refs if not p.endswith(HINT)}
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


@dataclass(frozen=True)
class Prepared:
    """A case's table, built and counted: what each fault run starts from and is checked against."""

    name: str
    saved: str
    kwargs: dict
    before_location: str
    before: pa.Table
    #: the rows after a complete run
    expected: pa.Table
    #: the points of a complete run, in order: (kind, side, pid, path)
    log: list


def prepare(env: Env, case: Case, name: str) -> Prepared:
    """Build the case's table, then run the procedure once on it, counting its points."""
    saved = build(env, case, name)
    kwargs = call_kwargs(env, case)
    before_location = env.table(name).metadata_location
    before = pyiceberg_read(before_location)
    log = str(env.tmp / f"{name}.count.log")
    with armed(env.spark, FaultPlan(log, action="count"), str(env.tmp / f"{name}.count.plan")):
        env.run(case.proc, name, **kwargs)
    after = pyiceberg_read(env.table(name).metadata_location)
    if not case.adds_rows:
        assert_rows_equal(after, before, key="id", label=f"{case.id}: a complete run")
    return Prepared(name, saved, kwargs, before_location, before, after if case.adds_rows else before,
                    FP.read_log(log))


def check_after_failure(env: Env, case: Case, prep: Prepared, label: str, java: bool) -> None:
    """The table after a failed call, after a rerun, and after remove_orphan_files."""
    name = prep.name
    landed = env.table(name).metadata_location != prep.before_location
    check_table(env, name, prep.expected if (landed or not case.adds_rows) else prep.before, label, java or landed)
    try:
        env.run(case.proc, name, **prep.kwargs)
    except IcebergError as e:
        assert landed and case.adds_rows, f"{label}: the rerun failed: {e!r}"
    check_table(env, name, prep.expected, f"{label}, after a rerun", java=landed)
    collect_orphans(env, name, label)
    check_table(env, name, prep.expected, f"{label}, after remove_orphan_files", java=False)


def fresh_log(env: Env, name: str, what: str) -> str:
    log = str(env.tmp / f"{name}.{what}.log")
    if os.path.exists(log):
        os.unlink(log)
    return log


# ------------------------------------------------------------------------------ in-process faults
def write_in_parts(monkeypatch) -> None:
    """Send rewrite_manifests to the executors and cut even a tiny manifest into parts."""
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 0)
    monkeypatch.setattr(RM, "MIN_PART_ENTRIES", 1)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fault_at_every_point(env, case, monkeypatch):
    if case.in_parts:
        write_in_parts(monkeypatch)
    prep = prepare(env, case, f"kill_{case.id}")
    counts = count_points(prep.log)
    assert sum(counts.values()) > 0, counts
    assert counts.get(FP.COMMIT, 0) > 0 or case.proc == "remove_orphan_files", counts
    sides = {side for kind, side, _, _ in prep.log if kind == FP.WRITE}
    assert ("task" in sides) == case.task_writes, f"writes counted on {sides}"
    print(f"{case.id}: {counts}")
    failures = []
    for kind in FP.KINDS:
        for n in range(1, counts.get(kind, 0) + 1):
            label = f"{case.id} {kind} #{n}"
            restore(env, prep.name, prep.saved)
            log = fresh_log(env, prep.name, "fault")
            error = None
            with armed(env.spark, FaultPlan(log, kind=kind, n=n, action="raise"), str(env.tmp / f"{prep.name}.plan")):
                try:
                    env.run(case.proc, prep.name, **prep.kwargs)
                except Exception as e:  # noqa: BLE001 -- any failure is allowed; the table is what is checked
                    error = e
            try:
                hits = [r for r in FP.read_log(log) if r[0] == kind]
                assert len(hits) >= n, f"{label}: the point was not reached again ({len(hits)} {kind} points)"
                check_after_failure(env, case, prep, f"{label} (failed: {error!r:.200})", java=n == 1)
            except AssertionError as e:
                failures.append(str(e))
    assert not failures, "\n".join(failures)


INTERRUPT_CASES = [c for c in CASES if c.id in ("rewrite_binpack", "rewrite_manifests", "expire_snapshots",
                                                 "add_files", "compute_table_stats")]


@pytest.mark.parametrize("case", INTERRUPT_CASES, ids=[c.id for c in INTERRUPT_CASES])
def test_interrupt_at_every_driver_point(env, case):
    """A KeyboardInterrupt (Ctrl-C) at each of the driver's points: cleanup code that catches
    ``Exception`` does not see it, so this checks the ``BaseException`` paths."""
    prep = prepare(env, case, f"intr_{case.id}")
    counts = count_points([row for row in prep.log if row[1] == "driver"])
    failures = []
    for kind in FP.KINDS:
        for n in range(1, counts.get(kind, 0) + 1):
            label = f"{case.id} interrupt at {kind} #{n}"
            restore(env, prep.name, prep.saved)
            plan = FaultPlan(fresh_log(env, prep.name, "interrupt"), kind=kind, n=n, action="interrupt", where="driver")
            with armed(env.spark, plan, str(env.tmp / f"{prep.name}.plan")):
                try:
                    env.run(case.proc, prep.name, **prep.kwargs)
                except KeyboardInterrupt:
                    pass
                except Exception:  # noqa: BLE001 -- the table is what is checked
                    pass
            try:
                check_after_failure(env, case, prep, label, java=False)
            except AssertionError as e:
                failures.append(str(e))
    assert not failures, "\n".join(failures)


# ------------------------------------------------------------------------------ SIGKILL of the driver
ROOT = Path(__file__).resolve().parents[2]
#: procedures the driver-kill test runs in a child without Spark (their driver path), and with it
DRIVER_ONLY = ("expire_snapshots", "remove_orphan_files", "rewrite_manifests", "compute_table_stats",
               "compute_partition_stats")
WITH_SPARK = ("rewrite_binpack", "rewrite_position_deletes")


def sample_points(log: list[tuple[str, str, int, str]], swap_only: bool = False) -> list[tuple[str, int]]:
    """The points a driver kill is tried at: right before the swap (the commit point and the write
    of the new metadata file), right after it (the swapped point and the write after the metadata
    file), and, unless ``swap_only``, the first write and the first delete.  Only the driver's
    points count (Spark tasks have their own test)."""
    log = [row for row in log if row[1] == "driver"]
    kinds = {kind for kind, _, _, _ in log}
    out = [(kind, 1) for kind in (FP.COMMIT, FP.SWAPPED) if kind in kinds]
    writes = [path for kind, _, _, path in log if kind == FP.WRITE]
    metadata = [i for i, p in enumerate(writes, 1) if p.endswith(".metadata.json")]
    if metadata:
        out.append((FP.WRITE, metadata[-1]))
    if swap_only:
        return out
    if metadata and metadata[-1] < len(writes):
        out.append((FP.WRITE, metadata[-1] + 1))
    if writes:
        out.append((FP.WRITE, 1))
    if FP.DELETE in kinds:
        out.append((FP.DELETE, 1))
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
    prep = prepare(env, case, f"dkill_{case.id}")
    master = "local[2]" if case.id in WITH_SPARK else None
    sample = sample_points(prep.log, swap_only=master is not None)  # a child with Spark takes ~10 s
    assert (FP.COMMIT, 1) in sample or case.proc == "remove_orphan_files", sample
    failures = []
    for kind, n in sample:
        label = f"{case.id} SIGKILL at {kind} #{n}"
        restore(env, prep.name, prep.saved)
        plan = FaultPlan(fresh_log(env, prep.name, "kill"), kind=kind, n=n, action="kill", where="driver")
        child = run_child(env, case, prep.name, prep.kwargs, plan, master)
        try:
            assert child.returncode == -signal.SIGKILL, \
                f"{label}: the child was not killed (exit {child.returncode}): {child.stderr[-2000:]}"
            check_after_failure(env, case, prep, label, java=True)
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
    log = fresh_log(env, name, "kill")
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
        missing = sorted(p for p in referenced(table) if not os.path.exists(p) and not p.endswith(HINT))
        assert not missing, f"{label}: referenced files missing: {missing}"
        assert_rows_equal(pyiceberg_read(table.metadata_location), source_rows, key="id", label=f"{label} / pyiceberg")
        assert_rows_equal(duckdb_read(table.metadata_location), source_rows, key="id", label=f"{label} / duckdb")

    drop_target()
    log = str(tmp_path / "count.log")
    with armed(spark, FaultPlan(log, action="count"), str(tmp_path / "count.plan")):
        run()
    counts = count_points(FP.read_log(log))
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


def test_pool_threads_keep_the_callers_local_properties(spark):
    """The rewrites run their groups' Spark jobs on pool threads; those jobs keep the caller's job
    group and local properties (the fault plan among them), as in Java."""
    sc = spark.sparkContext
    sc.setLocalProperty("procedures.test.marker", "caller")
    try:
        with job_group(spark, "kill-anywhere-group", "caller's group"):
            seen = in_caller_context(spark, lambda: (sc.getLocalProperty("spark.jobGroup.id"),
                                                     sc.getLocalProperty("procedures.test.marker")))
            with ThreadPoolExecutor(1) as pool:
                assert pool.submit(seen).result() == ("kill-anywhere-group", "caller")
                # the thread's own properties come back after the call
                assert pool.submit(lambda: sc.getLocalProperty("procedures.test.marker")).result() is None
    finally:
        sc.setLocalProperty("procedures.test.marker", None)


# ------------------------------------------------------------------------------ migrate
def test_migrate_fault_at_every_point(spark, tmp_path):
    """migrate of an external Parquet table, failing at each point: either the Iceberg table
    replaced it completely, or the original Parquet table is back under its name with its files
    untouched and no backup left over; a rerun then migrates it."""
    spark.conf.set("spark.sql.catalog.ohive.type", "hive")
    conf = {**conf_from_spark(spark), "spark.sql.catalog.ohive.type": "hive"}
    hive = open_catalog("ohive", conf)
    db, name = "killdb", "mig_src"
    folder = tmp_path / "mig_src"
    pristine = tmp_path / "mig_pristine"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS spark_catalog.{db}")

    def unregister(table: str) -> None:
        if spark.catalog.tableExists(f"spark_catalog.{db}.{table}"):
            hive.client.drop_table(db, table)  # metastore entry only: the files stay

    def reset() -> None:
        for table in (name, f"{name}_backup_"):
            unregister(table)
        shutil.rmtree(folder, ignore_errors=True)
        if pristine.exists():
            shutil.copytree(pristine, folder)
        spark.sql(f"CREATE TABLE spark_catalog.{db}.{name} (id bigint, v string) USING parquet LOCATION '{folder}'")

    reset()
    for i in range(2):
        spark.sql(f"INSERT INTO spark_catalog.{db}.{name} VALUES ({i}, 'v{i}'), ({i + 10}, 'w{i}')")
    shutil.copytree(folder, pristine)
    source_rows = spark_df_to_arrow(spark.table(f"spark_catalog.{db}.{name}"))
    data_files = {k: v for k, v in fingerprint(str(folder)).items() if k.endswith(".parquet")}

    def run():
        return runner.run("migrate", kwargs={"table": f"{db}.{name}"}, catalog="ohive", conf=conf, spark=spark)

    def check_migrated(label):
        table = hive.load_table((db, name))
        missing = sorted(p for p in referenced(table) if not os.path.exists(p) and not p.endswith(HINT))
        assert not missing, f"{label}: referenced files missing: {missing}"
        assert_rows_equal(pyiceberg_read(table.metadata_location), source_rows, key="id", label=f"{label} / pyiceberg")
        assert_rows_equal(duckdb_read(table.metadata_location), source_rows, key="id", label=f"{label} / duckdb")

    log = str(tmp_path / "count.log")
    with armed(spark, FaultPlan(log, action="count"), str(tmp_path / "count.plan")):
        run()
    check_migrated("complete run")
    counts = count_points(FP.read_log(log))
    assert counts.get(FP.COMMIT, 0) == 1, counts
    failures = []
    for kind in FP.KINDS:
        for n in range(1, counts.get(kind, 0) + 1):
            label = f"migrate {kind} #{n}"
            reset()
            try:
                with armed(spark, FaultPlan(str(tmp_path / f"{kind}{n}.log"), kind=kind, n=n, action="raise"),
                           str(tmp_path / "plan")):
                    try:
                        run()
                    except Exception:  # noqa: BLE001 -- the catalog and files are what is checked
                        pass
                current = {k: v for k, v in fingerprint(str(folder)).items() if k.endswith(".parquet")}
                assert current == data_files, f"{label}: the table's data files changed"
                if hive.table_exists((db, name)):
                    check_migrated(label)
                else:
                    assert not spark.catalog.tableExists(f"spark_catalog.{db}.{name}_backup_"), \
                        f"{label}: the backup is left over"
                    spark.sql(f"REFRESH TABLE spark_catalog.{db}.{name}")
                    assert_rows_equal(spark_df_to_arrow(spark.table(f"spark_catalog.{db}.{name}")), source_rows,
                                      key="id", label=f"{label} / the Parquet table")
                    leftover = sorted(p for p in on_disk(str(folder))
                                      if not p.endswith(".parquet") and not os.path.basename(p).startswith("_"))
                    assert not leftover, f"{label}: files left by the failed migrate: {leftover}"
                    run()
                    check_migrated(f"{label} after a rerun")
            except AssertionError as e:
                failures.append(str(e))
    for table in (name, f"{name}_backup_"):
        unregister(table)
    assert not failures, "\n".join(failures)
