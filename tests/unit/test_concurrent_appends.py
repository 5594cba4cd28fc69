"""Issue 3: 4 processes x 25 appends into one table, through the hadoop catalog and through SQLite.

Exactly 100 new snapshots, every appended file present, and no metadata file left behind by a
lost race.  Each process commits through the real retry loop with a generous retry budget.
"""

from __future__ import annotations

import multiprocessing as mp
import os

import pytest

from procedures.catalog.config import load_catalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.operations import FastAppend
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.spec.manifest.manifest_list import read_manifest_list
from procedures.spec.manifest.model import DataFile, FileFormat, ManifestEntryStatus
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.schema import Schema
from procedures.spec.types import LONG, NestedField

PROCESSES, APPENDS = 4, 25
POLICY = RetryPolicy(num_retries=200, min_wait_ms=1, max_wait_ms=50, total_timeout_ms=300_000)


def _conf(kind: str, root: str) -> dict[str, str]:
    if kind == "hadoop":
        return {"type": "hadoop", "warehouse": f"{root}/wh"}
    return {"type": "jdbc", "warehouse": f"{root}/wh", "uri": f"jdbc:sqlite:{root}/catalog.db"}


def _worker(kind: str, root: str, worker: int) -> None:
    catalog = load_catalog("local", _conf(kind, root))
    for i in range(APPENDS):
        table = catalog.load_table(("db", "t"))
        f = DataFile(f"{table.location}/data/w{worker}-{i}.parquet", FileFormat.PARQUET, (), 1, 10)
        commit(table, [FastAppend([f])], policy=POLICY)


@pytest.mark.slow  # several processes
@pytest.mark.parametrize("kind", ["hadoop", "sqlite"])
def test_four_processes_append_concurrently(tmp_path, kind):
    root = str(tmp_path)
    catalog = load_catalog("local", _conf(kind, root))
    catalog.create_namespace("db")
    md, _ = new_table_metadata(schema=Schema((NestedField(1, "id", LONG, True),)), location=f"{root}/wh/db/t")
    catalog.create_table(("db", "t"), md)

    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(kind, root, w)) for w in range(PROCESSES)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
    assert [p.exitcode for p in procs] == [0] * PROCESSES

    table = catalog.load_table(("db", "t"))
    md = table.metadata
    assert len(md.snapshots) == PROCESSES * APPENDS
    assert md.last_sequence_number == PROCESSES * APPENDS
    # one linear history: every snapshot's parent is the one before it
    chain = []
    s = md.current_snapshot()
    while s is not None:
        chain.append(s.snapshot_id)
        s = md.snapshot_by_id(s.parent_snapshot_id) if s.parent_snapshot_id else None
    assert len(chain) == PROCESSES * APPENDS
    files = set()
    for m in read_manifest_list(table.io, md.current_snapshot().manifest_list):
        for e in read_manifest(table.io, m, specs={0: md.spec()}):
            assert e.status != ManifestEntryStatus.DELETED
            files.add(os.path.basename(e.data_file.file_path))
    assert files == {f"w{w}-{i}.parquet" for w in range(PROCESSES) for i in range(APPENDS)}
    assert md.current_snapshot().summary["total-data-files"] == str(PROCESSES * APPENDS)

    # nothing left behind by lost races: every manifest and list on disk belongs to a snapshot
    meta = os.path.join(md.location, "metadata")
    on_disk = {f for f in os.listdir(meta) if f.endswith(".avro")}
    referenced = set()
    for snap in md.snapshots:
        referenced.add(os.path.basename(snap.manifest_list))
        for m in read_manifest_list(table.io, snap.manifest_list):
            referenced.add(os.path.basename(m.manifest_path))
    assert on_disk == referenced
    jsons = [f for f in os.listdir(meta) if f.endswith(".metadata.json")]
    assert len(jsons) == PROCESSES * APPENDS + 1
