"""Hostile input (issue 17): bad CALLs across the procedures each raise a typed error that names what was
wrong, and leave the table byte for byte as it was -- every file under the warehouse, metadata included.

The CALL text goes through the real parser and runner, without Spark (the checks run before any Spark
step), on a hadoop-catalog table with three snapshots, a tag and a branch.
"""

from __future__ import annotations

import json
import os

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.operations import FastAppend
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.core.kernel.manage import ManageRef
from procedures.errors import (
    IcebergError, MissingParameterError, NoSuchCatalogError, NoSuchProcedureError, NoSuchRefError,
    NoSuchSnapshotError, NoSuchTableError, SqlSyntaxError, ValidationError,
)
from procedures.frontend import runner
from procedures.frontend.parser import parse_call
from procedures.spec.manifest.model import DataFile, FileFormat
from procedures.spec.partitioning import PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.snapshots import SnapshotRefType
from procedures.spec.types import LONG, STRING, NestedField
from tests.helpers.files import age_everything, fingerprint, touch

FAST = RetryPolicy(num_retries=2, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=10_000)
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "data", STRING)))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    wh = str(tmp_path_factory.mktemp("hostile") / "wh")
    cat = HadoopCatalog("h", wh)
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{wh}/db/t", spec=PartitionSpec(0, ()), format_version=2)
    t = cat.create_table(("db", "t"), md)
    for i in range(3):
        t = commit(t, [FastAppend([DataFile(touch(f"{t.location}/data/f{i}.parquet"), FileFormat.PARQUET, (), 1, 1)])],
                   policy=FAST)
    first = t.metadata.snapshots[0].snapshot_id
    t = commit(t, [ManageRef("create", "keep", SnapshotRefType.TAG, first),
                   ManageRef("create", "dev", SnapshotRefType.BRANCH, first)], policy=FAST)
    age_everything(wh)
    conf = {"spark.sql.catalog.h.type": "hadoop", "spark.sql.catalog.h.warehouse": wh}
    return {"warehouse": wh, "conf": conf, "table": t, "snapshots": [s.snapshot_id for s in t.metadata.snapshots]}


def call(world, text: str):
    stmt = parse_call(text)
    return runner.run(stmt.name, args=stmt.positional, kwargs=stmt.named, catalog=stmt.catalog or "h",
                      conf=world["conf"])


MISSING = 1234567890123
FUTURE = "TIMESTAMP '2100-01-01 00:00:00'"

#: (CALL text, expected error type, text the message must contain)
CASES = [
    # unknown objects
    ("CALL h.system.expire_snapshots(table => 'db.nope')", NoSuchTableError, "db.nope"),
    ("CALL h.system.rollback_to_snapshot(table => 'nodb.t', snapshot_id => 1)", NoSuchTableError, "nodb.t"),
    (f"CALL h.system.rollback_to_snapshot(table => 'db.t', snapshot_id => {MISSING})", NoSuchSnapshotError, str(MISSING)),
    (f"CALL h.system.set_current_snapshot(table => 'db.t', snapshot_id => {MISSING})", IcebergError, str(MISSING)),
    ("CALL h.system.set_current_snapshot(table => 'db.t', ref => 'no_such_ref')", IcebergError, "no_such_ref"),
    (f"CALL h.system.cherrypick_snapshot(table => 'db.t', snapshot_id => {MISSING})", IcebergError, str(MISSING)),
    ("CALL h.system.fast_forward(table => 'db.t', branch => 'main', to => 'no_branch')", IcebergError, "no_branch"),
    ("CALL h.system.fast_forward(table => 'db.t', branch => 'keep', to => 'main')", IcebergError, "keep"),
    (f"CALL h.system.ancestors_of(table => 'db.t', snapshot_id => {MISSING})", IcebergError, str(MISSING)),
    ("CALL h.system.publish_changes(table => 'db.t', wap_id => 'no-such-wap')", IcebergError, "no-such-wap"),
    ("CALL h.system.no_such_procedure(table => 'db.t')", NoSuchProcedureError, "no_such_procedure"),
    ("CALL nocat.system.expire_snapshots(table => 'db.t')", NoSuchCatalogError, "nocat"),
    ("CALL h.system.rewrite_manifests(table => 'db.t', spec_id => 99)", IcebergError, "99"),
    ("CALL h.system.register_table(table => 'db.t', metadata_file => '/no/such/v1.metadata.json')", IcebergError,
     "/no/such/v1.metadata.json"),
    # parameters: unknown, missing, duplicated, wrong types
    ("CALL h.system.expire_snapshots(table => 'db.t', retain_lats => 1)", ValidationError, "retain_lats"),
    ("CALL h.system.expire_snapshots(retain_last => 1)", MissingParameterError, "table"),
    ("CALL h.system.expire_snapshots(table => 'db.t', table => 'db.t')", ValidationError, "table"),
    ("CALL h.system.expire_snapshots(table => 'db.t', retain_last => 'three')", ValidationError, "retain_last"),
    ("CALL h.system.expire_snapshots(table => 'db.t', older_than => 'yesterday')", ValidationError, "older_than"),
    ("CALL h.system.expire_snapshots(table => 'db.t', snapshot_ids => 5)", ValidationError, "snapshot_ids"),
    ("CALL h.system.rollback_to_snapshot(table => 'db.t', snapshot_id => 'abc')", ValidationError, "snapshot_id"),
    ("CALL h.system.rollback_to_snapshot(table => 'db.t', snapshot_id => 1.5)", ValidationError, "snapshot_id"),
    ("CALL h.system.remove_orphan_files(table => 'db.t', dry_run => 'maybe')", ValidationError, "dry_run"),
    ("CALL h.system.remove_orphan_files(table => 'db.t', equal_schemes => 's3')", ValidationError, "equal_schemes"),
    ("CALL h.system.expire_snapshots(table => 42)", NoSuchTableError, "42"),
    ("CALL h.system.expire_snapshots('db.t', retain_last => 1)", ValidationError, "Named and positional"),
    # numbers out of range
    ("CALL h.system.expire_snapshots(table => 'db.t', retain_last => 0)", ValidationError, "retain"),
    ("CALL h.system.expire_snapshots(table => 'db.t', retain_last => -5)", ValidationError, "-5"),
    ("CALL h.system.expire_snapshots(table => 'db.t', max_concurrent_deletes => -1)", ValidationError, "max_concurrent_deletes"),
    ("CALL h.system.expire_snapshots(table => 'db.t', retain_last => 99999999999999)", ValidationError, "retain_last"),
    ("CALL h.system.remove_orphan_files(table => 'db.t', max_concurrent_deletes => 0)", ValidationError, "max_concurrent_deletes"),
    # empty strings and hostile identifiers
    ("CALL h.system.expire_snapshots(table => '')", ValidationError, "table"),
    ("CALL h.system.expire_snapshots(table => '   ')", ValidationError, "table"),
    ("CALL h.system.expire_snapshots(table => 'db.t; DROP TABLE db.t')", IcebergError, "DROP TABLE"),
    ("CALL h.system.expire_snapshots(table => 'db.t'' OR ''1''=''1')", IcebergError, "1"),
    ("CALL h.system.expire_snapshots(table => '../../etc/passwd')", IcebergError, "passwd"),
    ("CALL h.system.expire_snapshots(table => 'db.`t')", ValidationError, "db.`t"),
    ("CALL h.system.set_current_snapshot(table => 'db.t', ref => '')", IcebergError, "ref"),
    ("CALL h.system.publish_changes(table => 'db.t', wap_id => '')", IcebergError, "WAP ID"),
    # paths that escape the table
    ("CALL h.system.remove_orphan_files(table => 'db.t', location => '{wh}/db/t/..')", ValidationError, "location"),
    ("CALL h.system.remove_orphan_files(table => 'db.t', location => '{wh}')", ValidationError, "location"),
    ("CALL h.system.remove_orphan_files(table => 'db.t', location => '/')", ValidationError, "location"),
    ("CALL h.system.remove_orphan_files(table => 'db.t', location => '{wh}/db/t/data/%2E%2E/%2E%2E')", ValidationError,
     "location"),
    # bad options and filters
    ("CALL h.system.remove_orphan_files(table => 'db.t', prefix_mismatch_mode => 'NUKE')", ValidationError, "NUKE"),
    ("CALL h.system.rewrite_data_files(table => 'db.t', strategy => 'shuffle')", ValidationError, "shuffle"),
    ("CALL h.system.rewrite_data_files(table => 'db.t', options => map('no-such-option', '1'))", ValidationError,
     "no-such-option"),
    ("CALL h.system.rewrite_data_files(table => 'db.t', options => map('min-input-files', 'many'))", ValidationError,
     "min-input-files"),
    ("CALL h.system.rewrite_data_files(table => 'db.t', where => 'id >')", ValidationError, "id >"),
    ("CALL h.system.rewrite_data_files(table => 'db.t', where => 'nosuchcol = 1')", ValidationError, "nosuchcol"),
    ("CALL h.system.rewrite_data_files(table => 'db.t', strategy => 'sort', sort_order => 'nosuchcol DESC')",
     ValidationError, "nosuchcol"),
    ("CALL h.system.rewrite_position_delete_files(table => 'db.t', options => map('rewrite-all', 'perhaps'))",
     ValidationError, "rewrite-all"),
    ("CALL h.system.rewrite_position_delete_files(table => 'db.t', where => 'data = ')", ValidationError, "data ="),
    # statistics and imports
    (f"CALL h.system.compute_table_stats(table => 'db.t', snapshot_id => {MISSING})", IcebergError, str(MISSING)),
    ("CALL h.system.compute_table_stats(table => 'db.t', columns => array('nosuchcol'))", IcebergError, "nosuchcol"),
    ("CALL h.system.compute_partition_stats(table => 'db.t')", IcebergError, "partitioned"),
    (f"CALL h.system.compute_partition_stats(table => 'db.nope')", NoSuchTableError, "db.nope"),
    ("CALL h.system.add_files(table => 'db.nope', source_table => '`parquet`.`/tmp`')", NoSuchTableError, "db.nope"),
    ("CALL h.system.add_files(table => 'db.t', source_table => '`parquet`.`/tmp`', parallelism => 0)",
     ValidationError, "Parallelism"),
    ("CALL h.system.add_files(table => 'db.t', source_table => '`parquet`.`/tmp`', partition_filter => 'x')",
     ValidationError, "partition_filter"),
    # syntax
    ("CALL h.system.expire_snapshots(table => 'db.t'", SqlSyntaxError, "Syntax error"),
    ("CALL h.system.expire_snapshots(table => 'db.t',, retain_last => 1)", SqlSyntaxError, "Syntax error"),
]


@pytest.mark.parametrize("text, error, needle", CASES, ids=[f"{i:02d}" for i in range(len(CASES))])
def test_bad_call_is_a_typed_error_and_changes_nothing(world, text, error, needle):
    wh = world["warehouse"]
    text = text.replace("{wh}", wh)
    before = fingerprint(wh)
    with pytest.raises(error) as e:
        call(world, text)
    assert isinstance(e.value, IcebergError), f"untyped error {type(e.value).__name__}: {e.value}"
    assert needle in str(e.value), f"message does not name {needle!r}: {e.value}"
    assert fingerprint(wh) == before, "the table's files changed"


def test_there_are_at_least_forty_cases():
    assert len(CASES) >= 40


def test_a_corrupt_metadata_file_is_a_typed_error_and_changes_nothing(world, tmp_path):
    cat = HadoopCatalog("c", str(tmp_path / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/t", spec=PartitionSpec(0, ()),
                               format_version=2)
    t = cat.create_table(("db", "t"), md)
    t = commit(t, [FastAppend([DataFile(touch(f"{t.location}/data/f.parquet"), FileFormat.PARQUET, (), 1, 1)])],
               policy=FAST)
    with open(t.metadata_location.replace("file:", ""), "w") as f:
        f.write('{"format-version": 2, "table-uuid": ')  # cut short
    conf = {"spark.sql.catalog.c.type": "hadoop", "spark.sql.catalog.c.warehouse": cat.warehouse}
    before = fingerprint(cat.warehouse)
    for text in ("CALL c.system.expire_snapshots(table => 'db.t', retain_last => 1)",
                 "CALL c.system.remove_orphan_files(table => 'db.t', dry_run => true)"):
        stmt = parse_call(text)
        with pytest.raises(IcebergError) as e:
            runner.run(stmt.name, kwargs=stmt.named, catalog="c", conf=conf)
        assert "metadata" in str(e.value).lower()
    assert fingerprint(cat.warehouse) == before


def test_a_manifest_pointing_to_a_missing_file_keeps_the_table(world, tmp_path):
    """A data file the metadata references is gone: expiring snapshots still commits, deletes nothing
    that is referenced, and remove_orphan_files never treats the missing file as anything to delete."""
    cat = HadoopCatalog("m", str(tmp_path / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/t", spec=PartitionSpec(0, ()),
                               format_version=2)
    t = cat.create_table(("db", "t"), md)
    for i in range(2):
        t = commit(t, [FastAppend([DataFile(touch(f"{t.location}/data/f{i}.parquet"), FileFormat.PARQUET, (), 1, 1)])],
                   policy=FAST)
    os.unlink(f"{t.location}/data/f0.parquet")
    age_everything(cat.warehouse)
    conf = {"spark.sql.catalog.m.type": "hadoop", "spark.sql.catalog.m.warehouse": cat.warehouse}
    stmt = parse_call("CALL m.system.remove_orphan_files(table => 'db.t')")
    result = runner.run(stmt.name, kwargs=stmt.named, catalog="m", conf=conf)
    assert result.rows == []
    assert os.path.exists(f"{t.location}/data/f1.parquet")
    stmt = parse_call(f"CALL m.system.expire_snapshots(table => 'db.t', older_than => {FUTURE}, retain_last => 2)")
    assert runner.run(stmt.name, kwargs=stmt.named, catalog="m", conf=conf).rows == [(0, 0, 0, 0, 0, 0)]
    assert os.path.exists(f"{t.location}/data/f1.parquet")
    assert json.loads(open(cat.load_table(("db", "t")).metadata_location.replace("file:", "")).read())["snapshots"]

