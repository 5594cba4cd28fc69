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
* remove_orphan_files (cutoff in the future) leaves nothing under the table location that nothing
  references: whatever the failed attempt wrote is deleted or collectable, never referenced;
* a rerun completes (or, when the failed attempt had already landed, refuses as a second complete
  run would) and leaves the rows of a complete run.

``test_driver_killed`` runs the procedure in a child Python process killed with SIGKILL at sampled
points (right before the metadata swap, right after it, and at a write in between), and
``test_python_worker_killed`` kills a Spark Python worker in the middle of a rewrite task.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from procedures.core import fault_points as FP
from procedures.core.fault_points import FaultPlan
from procedures.core.gc.reachability import metadata_file_paths, statistics_paths
from procedures.core.paths import local_path
from procedures.errors import IcebergError
from procedures.framework.context import open_catalog
from procedures.frontend import runner
from procedures.spec.manifest import read_manifest, read_manifest_list
from tests.helpers.faults import armed, count_points
from tests.helpers.files import OLD, touch
from tests.oracles import assert_rows_equal, duckdb_read, java_read, pyiceberg_read

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
    collect_orphans(env, name, label)
    check_table(env, name, rows_now, f"{label} after remove_orphan_files", java=False)
    try:
        env.run(case.proc, name, **kwargs)
    except IcebergError as e:
        assert landed and case.adds_rows, f"{label}: the rerun failed: {e!r}"
    check_table(env, name, expected, f"{label} after a rerun", java=landed)
