"""expire_snapshots on the Spark path reads what it needs before it commits: a manifest list or a
manifest that cannot be read fails the call and leaves every file of the table as it was."""

from __future__ import annotations

import os

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.gc import reachability as R
from procedures.core.gc.expire import ExpireSnapshotsParams
from procedures.core.kernel.operations import DeleteFiles, FastAppend
from procedures.core.kernel.transaction import commit
from tests.helpers.gc_runs import expire_snapshots
from procedures.spec.manifest.manifest_list import read_manifest_list
from procedures.spec.manifest.model import DataFile, FileFormat
from procedures.spec.partitioning import PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.types import LONG, NestedField
from tests.helpers.files import fingerprint, touch

pytestmark = [pytest.mark.spark, pytest.mark.both_sessions]

FUTURE = 2**62


def _table(tmp_path):
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=Schema((NestedField(1, "id", LONG, True),)),
                               location=f"{cat.warehouse}/db/t", spec=PartitionSpec(0, ()))
    return cat, cat.create_table(("db", "t"), md)


def _file(t, name):
    return DataFile(touch(f"{t.location}/data/{name}.parquet"), FileFormat.PARQUET, (), 1, 10, spec_id=0)


@pytest.mark.parametrize("gone", ["retained manifest list", "expired manifest"])
def test_spark_path_fails_before_the_commit(spark, tmp_path, monkeypatch, gone):
    monkeypatch.setattr(R, "use_spark", lambda *a, **k: True)  # the content comparison runs as a Spark job
    cat, t = _table(tmp_path)
    f0 = _file(t, "f0")
    t = commit(t, [FastAppend([f0])])
    first = t.metadata.current_snapshot()
    t = commit(t, [FastAppend([_file(t, "f1")])])
    t = commit(t, [DeleteFiles([f0.file_path])])
    if gone == "retained manifest list":
        os.remove(t.metadata.current_snapshot().manifest_list)
    else:  # the first snapshot's manifest: only expired snapshots reach it once f0 is deleted
        os.remove(read_manifest_list(t.io, first.manifest_list)[0].manifest_path)
    loc, before = t.metadata_location, fingerprint(t.location)
    with pytest.raises(Exception, match="missing|not found|No such file"):
        expire_snapshots(t, ExpireSnapshotsParams(older_than_ms=FUTURE, retain_last=1), spark=spark)
    assert fingerprint(t.location) == before
    assert cat.load_table(("db", "t")).metadata_location == loc
