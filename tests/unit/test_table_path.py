"""rewrite_table_path's core on the driver: path rules, parameter refusals, the rewritten metadata,
manifests, position delete files and DVs with their new sizes, the copy plan of full and
incremental rewrites, staging refusals and cleanup, and the procedure through the registry."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.operations import FastAppend, RowDelta
from procedures.core.table_stats.statistics_files import RegisterStatistics
from procedures.core.table_relocation.relocation import (
    RewriteTablePathParams, check_params, file_list_text, new_path, relativize, replace_paths, staging_path,
)
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.errors import ValidationError
from procedures.frontend import runner
from procedures.io.delete_writers import write_deletion_vectors, write_position_delete_file
from procedures.io.fileio import FileIO
from procedures.io.path_rewrite import rewrite_delete_file_paths
from tests.helpers.capability_actions import rewrite_table_path
from procedures.spec.manifest.manifest_list import read_manifest_list
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.metadata import read_table_metadata
from procedures.spec.metadata_columns import DELETE_FILE_PATH_ID
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.puffin import read_puffin
from procedures.spec.schema import Schema
from procedures.spec.statistics import PartitionStatisticsFile, StatisticsFile
from procedures.spec.transforms import parse_transform
from procedures.spec.types import LONG, STRING, NestedField
from tests.helpers.files import fingerprint

FAST = RetryPolicy(num_retries=4, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=60_000)
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "data", STRING)))
SPEC = PartitionSpec(0, (PartitionField(1, 1000, parse_transform("identity"), "id"),))


# ------------------------------------------------------------------------------------------ paths
def test_path_rules():
    assert new_path("/a/t/data/f.parquet", "/a/t", "/b/u") == "/b/u/data/f.parquet"
    assert new_path("/a/t/data/f.parquet", "/a/t/", "/b/u/") == "/b/u/data/f.parquet"
    assert new_path("/a/t", "/a/t/", "s3://b/u") == "s3://b/u"  # the prefix itself
    assert relativize("/a/t/", "/a/t") == ""
    assert staging_path("/a/t/metadata/v1.metadata.json", "/a/t", "/s/") == "/s/metadata/v1.metadata.json"
    with pytest.raises(ValidationError, match="Path /a/table2/x/ does not start with /a/t/"):
        new_path("/a/table2/x", "/a/t", "/b")  # a string prefix is not a folder prefix
    assert file_list_text([("a", "b"), ("c", "d")]) == "a,b\nc,d\n"


@pytest.mark.parametrize("kwargs, message", [
    ({"source_prefix": ""}, r"Source prefix\(''\) cannot be empty\."),
    ({"target_prefix": ""}, r"Target prefix\(''\) cannot be empty\."),
    ({"target_prefix": "/a"}, r"Source prefix cannot be the same as target prefix \(/a\)"),
    ({"start_version": "  "}, r"Start version\('  '\) cannot be empty\."),
    ({"end_version": ""}, r"End version\(''\) cannot be empty\."),
    ({"staging_location": ""}, r"Staging location\(''\) cannot be empty\."),
])
def test_parameter_refusals(kwargs, message):
    with pytest.raises(ValidationError, match=message):
        check_params(RewriteTablePathParams(**{"source_prefix": "/a", "target_prefix": "/b", **kwargs}))


# ------------------------------------------------------------------------------------------ tables
@pytest.fixture()
def catalog(tmp_path):
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    return cat


def make_table(catalog, fv=2, properties=None):
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{catalog.warehouse}/db/t", spec=SPEC, format_version=fv,
                               properties=properties or {})
    return catalog.create_table(("db", "t"), md)


def data_file(t, name: str, part: int) -> DataFile:
    path = f"{t.location}/data/id={part}/{name}.parquet"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"x")
    return DataFile(path, FileFormat.PARQUET, (part,), 10, 1, spec_id=0)


def build(catalog, fv=2):
    """Two appends, position deletes (v2: one file per partition; v3: a DV Puffin file), a
    statistics and a partition statistics file."""
    t = make_table(catalog, fv, {"write.data.path": f"{catalog.warehouse}/db/t/data"})
    files = [data_file(t, f"f{i}", i % 2) for i in range(4)]
    t = commit(t, [FastAppend(files[:2])], policy=FAST)
    t = commit(t, [FastAppend(files[2:])], policy=FAST)
    if fv >= 3:
        deletes = write_deletion_vectors(t.io, t.metadata, {files[0]: [1, 3], files[1]: [2]})
    else:
        deletes = [write_position_delete_file(t.io, f"{t.location}/data/id={p}/d{p}-deletes.parquet",
                                              {files[p].file_path: [1, 2], files[p + 2].file_path: [0]},
                                              partition=(p,)) for p in (0, 1)]
    t = commit(t, [RowDelta(add_deletes=deletes)], policy=FAST)
    sid = t.metadata.current_snapshot_id
    for path in (f"{t.location}/metadata/{sid}.stats", f"{t.location}/metadata/p-{sid}.parquet"):
        with open(path, "wb") as f:
            f.write(b"stats")
    t = commit(t, [RegisterStatistics(StatisticsFile(sid, f"{t.location}/metadata/{sid}.stats", 5, 1))], policy=FAST)
    t = commit(t, [RegisterStatistics(PartitionStatisticsFile(sid, f"{t.location}/metadata/p-{sid}.parquet", 5))],
               policy=FAST)
    return t, files, deletes


def run(t, **kwargs):
    return rewrite_table_path(t, RewriteTablePathParams(**kwargs))


@pytest.mark.parametrize("fv", [2, 3])
def test_full_rewrite_moves_every_path(catalog, tmp_path, fv):
    t, files, deletes = build(catalog, fv)
    source, target, staging = t.location, "s3://bucket/new/t", str(tmp_path / "staging")
    before = fingerprint(t.location)
    r = run(t, source_prefix=source, target_prefix=target, staging_location=staging)
    assert fingerprint(t.location) == before
    assert r.latest_version == os.path.basename(t.metadata_location)
    assert r.staging_location == staging + "/" and r.file_list_location == staging + "/file-list"
    assert r.rewritten_manifest_file_paths_count == 3
    assert r.rewritten_delete_file_paths_count == len(deletes)
    with open(r.file_list_location) as f:
        plan = [tuple(line.rstrip("\n").split(",")) for line in f]
    assert plan == list(r.copy_plan)
    assert all(dst.startswith(target + "/") for _, dst in plan)
    sources = {src for src, _ in plan}
    targets = {dst for _, dst in plan}
    # content files copied from where they are, metadata and delete files from the staging folder
    assert {f.file_path for f in files} <= sources
    assert {staging_path(d.file_path, source, staging + "/") for d in deletes} <= sources
    assert {new_path(d.file_path, source, target) for d in deletes} <= targets
    md = t.metadata
    assert {new_path(e.metadata_file, source, target) for e in md.metadata_log} | {
        new_path(t.metadata_location, source, target)} == {p for p in targets if p.endswith(".metadata.json")}
    assert new_path(md.statistics[0].statistics_path, source, target) in targets
    assert new_path(md.partition_statistics[0].statistics_path, source, target) in targets
    for src, _ in plan:
        if src.startswith(staging):
            assert os.path.exists(src), src
        else:
            assert src.startswith(source)

    staged = read_table_metadata(t.io, staging_path(t.metadata_location, source, staging))
    assert staged == replace_paths(md, source, target)
    assert staged.location == target and staged.properties["write.data.path"] == target + "/data"
    assert staged.statistics[0].statistics_path.startswith(target)
    assert staged.partition_statistics[0].statistics_path.startswith(target)
    for s in md.snapshots:
        rows = read_manifest_list(t.io, staging_path(s.manifest_list, source, staging))
        for m in rows:
            assert m.manifest_path.startswith(target)
            staged_manifest = staging_path(m.manifest_path, target, staging)
            assert m.manifest_length == os.path.getsize(staged_manifest)
            for e in read_manifest(t.io, m.__class__(**{**_fields(m), "manifest_path": staged_manifest})):
                f = e.data_file
                assert f.file_path.startswith(target)
                if f.content == FileContent.POSITION_DELETES:
                    staged_delete = staging_path(f.file_path, target, staging)
                    assert f.file_size_in_bytes == os.path.getsize(staged_delete)
                    assert f.referenced_data_file is None or f.referenced_data_file.startswith(target)
                    if f.lower_bounds and DELETE_FILE_PATH_ID in f.lower_bounds:
                        assert f.lower_bounds[DELETE_FILE_PATH_ID].decode().startswith(target)
    for d in deletes:
        staged_delete = staging_path(d.file_path, source, staging + "/")
        if fv >= 3:
            pf = read_puffin(t.io, staged_delete)
            refs = sorted(b.properties["referenced-data-file"] for b in pf.blobs)
            assert refs == sorted(new_path(f.file_path, source, target) for f in files[:2])
            assert [(b.offset, b.length) for b in pf.blobs] == [
                (x.content_offset, x.content_size_in_bytes) for x in sorted(deletes, key=lambda x: x.content_offset)]
            assert pf.deletion_vectors() == {new_path(files[0].file_path, source, target): [1, 3],
                                             new_path(files[1].file_path, source, target): [2]}
        else:
            p = d.partition[0]
            rows = [(r["file_path"], r["pos"]) for r in pq.read_table(staged_delete).to_pylist()]
            assert sorted(rows) == sorted([(new_path(files[p].file_path, source, target), 1),
                                           (new_path(files[p].file_path, source, target), 2),
                                           (new_path(files[p + 2].file_path, source, target), 0)])


def _fields(m):
    return {f: getattr(m, f) for f in m.__dataclass_fields__}


def test_incremental_rewrite_lists_only_the_new_files(catalog, tmp_path):
    t, files, deletes = build(catalog)
    first = os.path.basename(t.metadata_location)
    extra = data_file(t, "late", 0)
    t = commit(t, [FastAppend([extra])], policy=FAST)
    r = run(t, source_prefix=t.location, target_prefix="/copy/t", start_version=first,
            staging_location=str(tmp_path / "s"))
    sources = [src for src, _ in r.copy_plan]
    assert extra.file_path in sources
    assert not {f.file_path for f in files} & set(sources)
    assert r.rewritten_manifest_file_paths_count == 1 and r.rewritten_delete_file_paths_count == 0
    assert sum(s.endswith(".metadata.json") for s in sources) == 1  # only the version after the start
    assert sum(os.path.basename(s).startswith("snap-") for s in sources) == 1
    # the statistics files are still referenced by the new version: listed again, as in Java
    assert sum(s.endswith(".stats") for s in sources) == 1
    # an end version before the start gives just the end version's own files
    r2 = run(t, source_prefix=t.location, target_prefix="/copy/t", end_version=first,
             staging_location=str(tmp_path / "s2"), create_file_list=False)
    assert r2.latest_version == first and r2.file_list_location == "N/A"
    assert not os.path.exists(tmp_path / "s2" / "file-list")
    assert extra.file_path not in {src for src, _ in r2.copy_plan}


def test_default_staging_is_next_to_the_current_metadata(catalog):
    t, _, _ = build(catalog)
    r = run(t, source_prefix=t.location, target_prefix="/elsewhere")
    assert r.staging_location.startswith(f"{t.location}/metadata/copy-table-staging-")
    assert os.path.exists(r.file_list_location)


def test_refusals_leave_no_staged_file(catalog, tmp_path):
    t, files, _ = build(catalog)
    before = fingerprint(t.location)
    staging = tmp_path / "stage"
    with pytest.raises(ValidationError, match="does not start with"):
        run(t, source_prefix=t.location + "/data", target_prefix="/x", staging_location=str(staging))
    with pytest.raises(ValidationError, match="Cannot find provided version file v9.metadata.json in metadata log"):
        run(t, source_prefix=t.location, target_prefix="/x", start_version="v9.metadata.json",
            staging_location=str(staging))
    with pytest.raises(ValidationError, match="is the source prefix"):
        run(t, source_prefix=t.location, target_prefix="/x", staging_location=t.location + "/")
    # a data file outside the prefix is found while manifests are rewritten: staged files are removed
    outside = DataFile(str(tmp_path / "elsewhere.parquet"), FileFormat.PARQUET, (0,), 1, 1, spec_id=0)
    t = commit(t, [FastAppend([outside])], policy=FAST)
    before = fingerprint(t.location)
    with pytest.raises(ValidationError, match="not under the source prefix"):
        run(t, source_prefix=t.location, target_prefix="/x", staging_location=str(staging))
    assert fingerprint(t.location) == before
    assert not [f for _, _, fs in os.walk(staging) for f in fs]


def test_procedure_through_the_registry(catalog, tmp_path):
    t, _, _ = build(catalog)
    conf = {"spark.sql.catalog.local.type": "hadoop", "spark.sql.catalog.local.warehouse": catalog.warehouse}
    rows = runner.run("rewrite_table_path", args=["db.t", t.location, "/copy/t", None, None, str(tmp_path / "s")],
                      catalog="local", conf=conf).rows
    assert rows == [(os.path.basename(t.metadata_location), str(tmp_path / "s") + "/file-list", 3, 2)]


def test_position_delete_copy_keeps_columns_ids_and_codec(tmp_path):
    ids = [DELETE_FILE_PATH_ID, DELETE_FILE_PATH_ID - 1]
    schema = pa.schema([pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": str(ids[0]).encode()}),
                        pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": str(ids[1]).encode()})])
    src = str(tmp_path / "d.parquet")
    pq.write_table(pa.table({"file_path": ["/a/t/x.parquet", "/a/t/x.parquet", "/a/t/y.parquet"], "pos": [1, 5, 0]},
                            schema=schema), src, compression="snappy")
    f = DataFile(src, FileFormat.PARQUET, (), 3, os.path.getsize(src), content=FileContent.POSITION_DELETES)
    out = str(tmp_path / "out.parquet")
    size = rewrite_delete_file_paths(FileIO(), f, out, lambda p: new_path(p, "/a/t", "/b"))
    assert size == os.path.getsize(out)
    pf = pq.ParquetFile(out)
    assert pf.metadata.row_group(0).column(0).compression == "SNAPPY"
    assert [fl.metadata[b"PARQUET:field_id"] for fl in pf.schema_arrow] == [str(i).encode() for i in ids]
    assert pf.read().to_pylist() == [{"file_path": "/b/x.parquet", "pos": 1}, {"file_path": "/b/x.parquet", "pos": 5},
                                     {"file_path": "/b/y.parquet", "pos": 0}]
    with pytest.raises(ValidationError, match="does not start with"):
        rewrite_delete_file_paths(FileIO(), f, out, lambda p: new_path(p, "/c", "/b"))


def test_call_without_a_file_list(catalog, tmp_path):
    t, _, _ = build(catalog)
    conf = {"spark.sql.catalog.local.type": "hadoop", "spark.sql.catalog.local.warehouse": catalog.warehouse}
    rows = runner.run("rewrite_table_path", kwargs={"table": "db.t", "source_prefix": t.location,
                                                    "target_prefix": "/copy/t", "staging_location": str(tmp_path / "s"),
                                                    "create_file_list": False}, catalog="local", conf=conf).rows
    assert rows == [(os.path.basename(t.metadata_location), "N/A", 3, 2)]
    assert not os.path.exists(tmp_path / "s" / "file-list")
    assert os.path.exists(tmp_path / "s" / "metadata" / os.path.basename(t.metadata_location))
