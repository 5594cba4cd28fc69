"""``dry_run`` without Spark: the sandbox FileIO and catalog, and every procedure that runs on the
driver alone (expire_snapshots, rewrite_manifests, compute_partition_stats and the six ref-moving
snapshot procedures) on twin tables of our hadoop and JDBC (SQLite) catalogs.

Twins are built by the same deterministic steps; the dry run on one must return the rows the real
run returns on the other (snapshot ids compared by position in the table's history), leave its
folder byte for byte as it was (every file hashed, every folder listed) and its metadata current,
and a real run after it must return what the dry run and the twin's real run returned.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from procedures.catalog.config import load_catalog
from procedures.catalog.sandbox import SandboxCatalog, is_sandboxed
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.manage import ManageRef
from procedures.core.kernel.operations import DeleteFiles, FastAppend
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.errors import IcebergError, ValidationError
from procedures.frontend import runner
from procedures.io.fileio import FileIO, FileNotFoundInStorageError
from procedures.io.sandbox_fileio import SANDBOX_PROPERTY, SandboxFileIO, file_io, is_sandbox
from procedures.spec.manifest.model import DataFile, FileFormat
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.snapshots import SnapshotRefType
from procedures.spec.transforms import parse_transform
from procedures.spec.types import LONG, STRING, NestedField
from tests.helpers.files import folder_state
from tests.helpers.outputs import normalized

FAST = RetryPolicy(num_retries=4, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=60_000)
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "data", STRING)))
SPEC = PartitionSpec(0, (PartitionField(1, 1000, parse_transform("identity"), "id"),))
FUTURE = 2**62


# ------------------------------------------------------------------------------ helpers
@pytest.fixture(params=["hadoop", "jdbc"])
def catalog(request, tmp_path):
    keys = {"spark.sql.catalog.local.type": request.param, "spark.sql.catalog.local.warehouse": str(tmp_path / "wh")}
    if request.param == "jdbc":  # SQLite: the catalog's table pointers live outside the warehouse
        keys["spark.sql.catalog.local.uri"] = f"jdbc:sqlite:{tmp_path / 'catalog.db'}"
    cat = load_catalog("local", keys)
    cat.test_conf = keys
    cat.create_namespace("db")
    return cat


def conf(catalog) -> dict[str, str]:
    return catalog.test_conf


def data_file(location: str, name: str, part: int) -> DataFile:
    path = f"{location}/data/id={part}/{name}.parquet"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"x" * 10)
    return DataFile(path, FileFormat.PARQUET, (part,), 10, 10, spec_id=0)


def build(catalog, name: str, steps) -> None:
    """Create ``db.<name>`` and apply ``steps`` (each: table -> list of operations)."""
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{catalog.warehouse}/db/{name}", spec=SPEC, format_version=2)
    t = catalog.create_table(("db", name), md)
    for step in steps:
        time.sleep(0.002)  # distinct commit times, for rollback_to_timestamp
        t = commit(t, step(t), policy=FAST)


def appends(n: int, *, staged_wap: str | None = None, branch: str | None = None):
    """``n`` one-file appends, then optionally a staged WAP append and a branch at the first snapshot."""
    steps = [lambda t, i=i: [FastAppend([data_file(t.location, f"f{i}", i % 2)])] for i in range(n)]
    if staged_wap is not None:
        steps.append(lambda t: [FastAppend([data_file(t.location, "staged", 0)], stage_only=True,
                                           snapshot_properties={"wap.id": staged_wap})])
    if branch is not None:
        steps.append(lambda t: [ManageRef("create", branch, SnapshotRefType.BRANCH,
                                          snapshot_id=t.metadata.snapshots[0].snapshot_id)])
    return steps


def positions(catalog, name: str) -> dict[int, int]:
    snaps = sorted(catalog.load_table(("db", name)).metadata.snapshots, key=lambda s: (s.sequence_number, s.timestamp_ms))
    return {s.snapshot_id: i for i, s in enumerate(snaps)}


def twins(catalog, name: str, steps, procedure: str, args, *, expect_changes: bool = True):
    """Build ``<name>_d`` and ``<name>_r`` by ``steps``; dry run on the first, real run on the second,
    then a real run on the first.  ``args(table_name)`` gives the call's kwargs.  Returns the rows."""
    dry_name, real_name = f"{name}_d", f"{name}_r"
    for n in (dry_name, real_name):
        build(catalog, n, steps)
    dry_table = catalog.load_table(("db", dry_name))
    root = dry_table.location
    before_state, before_location = folder_state(root), dry_table.metadata_location
    pos_dry, pos_real = positions(catalog, dry_name), positions(catalog, real_name)

    def call(n: str, **extra):
        return runner.run(procedure, kwargs={"table": f"db.{n}", **args(n), **extra}, catalog="local",
                          conf=conf(catalog)).rows

    dry = call(dry_name, dry_run=True)
    assert folder_state(root) == before_state, f"dry run of {procedure} changed the table's folder"
    assert catalog.load_table(("db", dry_name)).metadata_location == before_location
    real_before = catalog.load_table(("db", real_name)).metadata_location
    real = call(real_name)
    real_location = catalog.load_table(("db", real_name)).location
    assert normalized(dry, pos_dry, root) == normalized(real, pos_real, real_location)
    if expect_changes:  # the real run changes its twin, so the dry run really held something back
        assert catalog.load_table(("db", real_name)).metadata_location != real_before
    again = call(dry_name)
    assert normalized(again, pos_dry, root) == normalized(real, pos_real, real_location)
    assert normalized(again, pos_dry, root) == normalized(dry, pos_dry, root)
    return dry


# ------------------------------------------------------------------------------ the sandbox
def test_sandbox_file_io_writes_and_deletes_nothing(tmp_path):
    real = tmp_path / "real.bin"
    real.write_bytes(b"stored")
    io = SandboxFileIO.over(FileIO())
    assert is_sandbox(io) and io.properties[SANDBOX_PROPERTY] == "true"
    io.write(str(tmp_path / "new.avro"), b"abc")
    assert io.new_input(str(tmp_path / "new.avro")).read() == b"abc"
    assert io.exists(str(tmp_path / "new.avro")) and not (tmp_path / "new.avro").exists()
    with io.new_output(str(tmp_path / "sub" / "big.parquet")).create() as out:
        pq.write_table(pa.table({"a": list(range(100))}), out)
    size = io.new_input(str(tmp_path / "sub" / "big.parquet")).size()
    assert size > 100 and not (tmp_path / "sub").exists()
    with pytest.raises(FileNotFoundInStorageError, match="dry run"):
        io.new_input(str(tmp_path / "sub" / "big.parquet")).read()
    assert io.delete(str(real)) and real.read_bytes() == b"stored"
    assert not io.exists(str(real))
    with pytest.raises(FileNotFoundInStorageError):
        io.new_input(str(real)).read()
    assert io.deleted == [str(real)]
    assert sorted(f.path for f in io.list_prefix(str(tmp_path))) == sorted(
        [str(tmp_path / "new.avro"), str(tmp_path / "sub" / "big.parquet")])
    assert sorted(os.listdir(tmp_path)) == ["real.bin"]


def test_tasks_rebuild_the_sandbox_from_properties():
    io = SandboxFileIO.over(FileIO({"s3.region": "x"}))
    rebuilt = file_io(io.properties)
    assert is_sandbox(rebuilt) and rebuilt.base.properties == {"s3.region": "x"}
    assert not is_sandbox(file_io({"s3.region": "x"}))


def test_sandbox_catalog_plans_commits(catalog):
    build(catalog, "t", appends(1))
    real = catalog.load_table(("db", "t"))
    state = folder_state(real.location)
    sandbox = SandboxCatalog(catalog)
    t = sandbox.load_table(("db", "t"))
    assert is_sandboxed(t) and is_sandbox(t.io)
    planned = commit(t, [FastAppend([DataFile(f"{real.location}/data/id=0/x.parquet", FileFormat.PARQUET, (0,), 1, 1,
                                               spec_id=0)])], policy=FAST)
    assert len(planned.metadata.snapshots) == 2
    assert len(sandbox.load_table(("db", "t")).metadata.snapshots) == 2  # later steps see the plan
    again = commit(planned.refresh(), [DeleteFiles([f"{real.location}/data/id=0/f0.parquet"])], policy=FAST)
    assert len(again.metadata.snapshots) == 3
    assert catalog.load_table(("db", "t")).metadata_location == real.metadata_location
    assert folder_state(real.location) == state
    with pytest.raises(ValidationError, match="dry run"):
        sandbox.drop_table(("db", "t"))


def test_sandbox_refresh_follows_the_plan_and_reads_nothing_otherwise(catalog):
    build(catalog, "t", appends(1))
    sandbox = SandboxCatalog(catalog)
    t, stale = sandbox.load_table(("db", "t")), sandbox.load_table(("db", "t"))
    held = t.metadata
    assert sandbox.current_metadata_location(("db", "t")) == catalog.current_metadata_location(("db", "t"))
    assert t.refresh().metadata is held  # unchanged: the same objects, nothing re-read
    planned = commit(t, [DeleteFiles([f"{t.location}/data/id=0/f0.parquet"])], policy=FAST)
    assert sandbox.current_metadata_location(("db", "t")) == planned.metadata_location
    assert len(stale.refresh().metadata.snapshots) == 2 and stale.metadata_location == planned.metadata_location
    assert catalog.load_table(("db", "t")).metadata is not planned.metadata  # the real table did not move


# ------------------------------------------------------------------------------ procedures
def test_expire_snapshots_dry_run(catalog):
    rows = twins(catalog, "exp", appends(4) + [lambda t: [DeleteFiles([f"{t.location}/data/id=0/f0.parquet"])]],
                 "expire_snapshots", lambda n: {"older_than": FUTURE // 1000 * 1000, "retain_last": 1})
    assert rows[0][0] == 1 and rows[0][4] == 4  # the deleted data file and the expired manifest lists


def test_rewrite_manifests_dry_run(catalog):
    rows = twins(catalog, "rm", appends(4), "rewrite_manifests", lambda n: {})
    assert rows == [(4, 1)]


def test_compute_partition_stats_dry_run(catalog):
    rows = twins(catalog, "cps", appends(3), "compute_partition_stats", lambda n: {})
    assert len(rows) == 1 and "partition-stats-" in rows[0][0] and not os.path.exists(rows[0][0])


def _nth(catalog, n, i=0):
    return sorted(catalog.load_table(("db", n)).metadata.snapshots, key=lambda s: s.sequence_number)[i]


def test_rollback_to_snapshot_dry_run(catalog):
    twins(catalog, "rb", appends(3), "rollback_to_snapshot", lambda n: {"snapshot_id": _nth(catalog, n).snapshot_id})


def test_rollback_to_timestamp_dry_run(catalog):
    twins(catalog, "rbt", appends(3), "rollback_to_timestamp",
          lambda n: {"timestamp": datetime.fromtimestamp(_nth(catalog, n, 1).timestamp_ms / 1000, tz=timezone.utc)})


def test_set_current_snapshot_dry_run(catalog):
    twins(catalog, "scs", appends(3, branch="b1"), "set_current_snapshot", lambda n: {"ref": "b1"})


def test_cherrypick_snapshot_dry_run(catalog):
    def staged(n):
        md = catalog.load_table(("db", n)).metadata
        return {"snapshot_id": next(s.snapshot_id for s in md.snapshots if s.summary.get("wap.id"))}

    steps = appends(2, staged_wap="w1") + [lambda t: [FastAppend([data_file(t.location, "later", 1)])]]
    rows = twins(catalog, "cp", steps, "cherrypick_snapshot", staged)
    # main moved on after staging: the append is re-applied as a new snapshot, planned only
    assert rows[0][1] != rows[0][0]


def test_publish_changes_dry_run(catalog):
    twins(catalog, "pub", appends(2, staged_wap="w1"), "publish_changes", lambda n: {"wap_id": "w1"})


def test_fast_forward_dry_run(catalog):
    # b1 sits at the first snapshot; fast-forwarding it to main moves it to the head
    twins(catalog, "ff", appends(3, branch="b1"), "fast_forward", lambda n: {"branch": "b1", "to": "main"})


def test_dry_run_refusals_are_the_real_ones(catalog):
    build(catalog, "bad", appends(2))
    before = folder_state(catalog.load_table(("db", "bad")).location)
    with pytest.raises(IcebergError, match="unknown snapshot id: 12345"):
        runner.run("rollback_to_snapshot", kwargs={"table": "db.bad", "snapshot_id": 12345, "dry_run": True},
                   catalog="local", conf=conf(catalog))
    with pytest.raises(ValidationError, match="Number of snapshots to retain must be at least 1"):
        runner.run("expire_snapshots", kwargs={"table": "db.bad", "retain_last": 0, "dry_run": True},
                   catalog="local", conf=conf(catalog))
    assert folder_state(catalog.load_table(("db", "bad")).location) == before
