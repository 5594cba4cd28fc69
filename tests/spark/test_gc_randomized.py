"""Random histories written by Iceberg Java, then our expire_snapshots and remove_orphan_files.

For a few fixed seeds, Java builds a history of appends, merge-on-read deletes, overwrites,
branches (with writes to them), tags and rollbacks.  Every snapshot is read through Java
(``spark.read.option("snapshot-id", ...)``).  Iceberg Java's ``expire_snapshots`` runs first with a
random cutoff and ``retain_last`` on the table folder, which is then restored byte for byte, and ours
expires the same table with the same arguments: the expired snapshots, the deleted files and the
counts must be Java's (every file of these histories lies under the table location, so our
confinement to it changes nothing here).  Then ours removes orphans with a cutoff in the future.
Afterwards every retained snapshot must read exactly as before, and nothing any retained snapshot or
metadata file references is gone.
"""

from __future__ import annotations

import datetime
import os
import random
import shutil
import time

import pytest

from procedures.framework.context import open_catalog
from procedures.core.gc.expire import ExpireSnapshotsParams
from tests.helpers.gc_runs import expire_snapshots
from procedures.core.gc.reachability import metadata_file_paths
from procedures.core.kernel.paths import normalize_path
from procedures.core.gc.orphans import RemoveOrphanFilesParams
from tests.helpers.gc_runs import remove_orphan_files
from procedures.spec.manifest.manifest_list import read_manifest_list
from procedures.spec.manifest.reader import read_manifest

# every test here reads or writes through Iceberg Java (deselected on pyspark 4)
pytestmark = [pytest.mark.spark, pytest.mark.java]


@pytest.fixture(scope="module")
def ours(spark, java_warehouse):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.db")
    return open_catalog("ours", {"spark.sql.catalog.ours.type": "hadoop",
                                          "spark.sql.catalog.ours.warehouse": str(java_warehouse)})


def random_history(spark, ours, name: str, rng: random.Random, steps: int) -> None:
    t = f"jcat.db.{name}"
    spark.sql(f"DROP TABLE IF EXISTS {t} PURGE")
    spark.sql(f"CREATE TABLE {t} (id bigint, v string) USING iceberg PARTITIONED BY (bucket(2, id)) "
              f"TBLPROPERTIES ('format-version'='{rng.choice([2, 3])}', 'write.delete.mode'='merge-on-read')")
    next_id = 0
    branches: list[str] = []
    for step in range(steps):
        op = rng.choice(["append", "append", "delete", "overwrite", "branch", "tag", "rollback"])
        if op == "append" or step == 0:
            rows = ", ".join(f"({next_id + i}, 'v{step}')" for i in range(rng.randint(1, 4)))
            next_id += 4
            target = t if not branches or rng.random() < 0.6 else f"{t}.branch_{rng.choice(branches)}"
            spark.sql(f"INSERT INTO {target} VALUES {rows}")
        elif op == "delete":
            spark.sql(f"DELETE FROM {t} WHERE id % 3 = {rng.randint(0, 2)} AND id < {next_id}")
        elif op == "overwrite":
            spark.sql(f"INSERT OVERWRITE {t} SELECT id, concat(v, 'o') FROM {t} WHERE id % 2 = {rng.randint(0, 1)}")
        elif op == "branch":
            branches.append(f"b{step}")
            spark.sql(f"ALTER TABLE {t} CREATE BRANCH b{step}")
        elif op == "tag":
            spark.sql(f"ALTER TABLE {t} CREATE TAG tag{step}")
        else:
            md = ours.load_table(("db", name)).metadata
            current = md.current_snapshot()
            if current is not None and current.parent_snapshot_id is not None:
                spark.sql(f"CALL jcat.system.rollback_to_snapshot('db.{name}', {current.parent_snapshot_id})")


def read_snapshot(spark, name: str, sid: int) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.option("snapshot-id", sid).table(f"jcat.db.{name}").collect())


def referenced(table) -> set[str]:
    md = table.metadata
    out = set(metadata_file_paths(md, table.metadata_location))
    for s in md.snapshots:
        out.add(s.manifest_list)
        for m in read_manifest_list(table.io, s.manifest_list):
            out.add(m.manifest_path)
            out.update(e.data_file.file_path for e in read_manifest(table.io, m, skip_deleted=True))
    out.update(f.statistics_path for f in md.statistics)
    return {normalize_path(p).path for p in out}


def files(root: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
            if not f.startswith(".")}  # Hadoop's .crc sidecars are not table files


def java_expire(spark, ours, name: str, location: str, saved: str, cutoff_ms: int, retain_last: int):
    """Java's CALL on the table folder: (output row, expired snapshot ids, deleted paths); the folder
    is restored from a copy at ``saved`` afterwards."""
    shutil.copytree(location, saved)
    ids = {s.snapshot_id for s in ours.load_table(("db", name)).metadata.snapshots}
    existing = files(location)
    ts = datetime.datetime.fromtimestamp(cutoff_ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    row = tuple(spark.sql(f"CALL jcat.system.expire_snapshots(table => 'db.{name}', older_than => TIMESTAMP '{ts}', "
                          f"retain_last => {retain_last})").collect()[0])
    expired = ids - {s.snapshot_id for s in ours.load_table(("db", name)).metadata.snapshots}
    deleted = existing - files(location)
    shutil.rmtree(location)
    shutil.move(saved, location)
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    return row, expired, deleted


@pytest.mark.parametrize("seed", [7, 2024, 31])
def test_random_histories_survive_expire_and_orphan_removal(spark, ours, seed, tmp_path):
    rng = random.Random(seed)
    name = f"gc_random_{seed}"
    random_history(spark, ours, name, rng, steps=9)
    table = ours.load_table(("db", name))
    snaps = sorted(table.metadata.snapshots, key=lambda s: s.sequence_number)
    before = {s.snapshot_id: read_snapshot(spark, name, s.snapshot_id) for s in snaps}

    cutoff = snaps[rng.randint(len(snaps) // 2, len(snaps) - 1)].timestamp_ms + 1
    retain_last = rng.randint(1, 3)
    location = table.location.removeprefix("file:")
    java_row, java_expired, java_deleted = java_expire(spark, ours, name, location, str(tmp_path / "saved"), cutoff,
                                                           retain_last)
    assert files(location) >= java_deleted, "the folder was not restored"

    existing = files(location)
    table = ours.load_table(("db", name))
    result = expire_snapshots(table, ExpireSnapshotsParams(older_than_ms=cutoff, retain_last=retain_last))
    table = ours.load_table(("db", name))
    kept = {s.snapshot_id for s in table.metadata.snapshots}
    assert result.expired_snapshot_ids, "the history should have something to expire"
    assert kept == set(before) - set(result.expired_snapshot_ids)
    # the same decisions as Iceberg Java's procedure on the identical table
    assert set(result.expired_snapshot_ids) == java_expired
    assert existing - files(location) == java_deleted
    assert result.row() == java_row
    assert {r.snapshot_id for r in table.metadata.refs.values()} <= kept

    orphans = remove_orphan_files(table, RemoveOrphanFilesParams(older_than_ms=int(time.time() * 1000) + 5000,
                                                                 testing=True))
    # nothing left to clean but metadata files Java keeps outside the log (there are none here)
    assert all(not p.endswith((".parquet", ".avro", ".puffin")) for p in orphans.orphan_file_locations)

    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    for sid in kept:
        assert read_snapshot(spark, name, sid) == before[sid], f"snapshot {sid} reads differently"
    for path in referenced(ours.load_table(("db", name))):
        assert os.path.exists(path), f"{path} is referenced but gone"
