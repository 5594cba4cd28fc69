"""Table metadata, snapshot, ref and statistics codecs against Iceberg Java's golden files."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from procedures.errors import InvalidMetadataError, UnsupportedFormatVersionError
from procedures.spec.metadata import (
    TableMetadata,
    metadata_from_json,
    metadata_to_dict,
    metadata_json_bytes,
    metadata_to_json,
    read_table_metadata,
    write_table_metadata,
)
from procedures.spec.snapshots import (
    Operation,
    Snapshot,
    SnapshotLogEntry,
    SnapshotRef,
    SnapshotRefType,
    apply_totals,
    ref_from_json,
    ref_to_json,
    snapshot_from_json,
    snapshot_to_json,
)
from procedures.spec.statistics import BlobMetadata, PartitionStatisticsFile, StatisticsFile
from procedures.spec.types import LONG

VALID = [
    "TableMetadataV1Valid.json",
    "TableMetadataV2Valid.json",
    "TableMetadataV2ValidMinimal.json",
    "TableMetadataV3ValidMinimal.json",
    "TableMetadataStatisticsFiles.json",
    "TableMetadataPartitionStatisticsFiles.json",
]

# the messages Java's TestTableMetadata / TestTableMetadataParser expect for the same files
INVALID = [
    ("TableMetadataUnsupportedVersion.json", UnsupportedFormatVersionError, "Cannot read unsupported version 42"),
    ("TableMetadataV1MissingSchemaType.json", InvalidMetadataError, "Cannot parse type from json"),
    ("TableMetadataV2CurrentSchemaNotFound.json", InvalidMetadataError,
     "Cannot find schema with current-schema-id=2 from schemas"),
    ("TableMetadataV2MissingLastPartitionId.json", InvalidMetadataError, "last-partition-id must exist in format v2"),
    ("TableMetadataV2MissingPartitionSpecs.json", InvalidMetadataError, "partition-specs must exist in format v2"),
    ("TableMetadataV2MissingSchemas.json", InvalidMetadataError, "schemas must exist in format v2"),
    ("TableMetadataV2MissingSortOrder.json", InvalidMetadataError, "sort-orders must exist in format v2"),
]

JAVA_KEY_ORDER = [
    "format-version", "table-uuid", "location", "last-sequence-number", "last-updated-ms", "last-column-id",
    "schema", "current-schema-id", "schemas", "partition-spec", "default-spec-id", "partition-specs",
    "last-partition-id", "default-sort-order-id", "sort-orders", "properties", "current-snapshot-id",
    "next-row-id", "encryption-keys", "refs", "snapshots", "statistics", "partition-statistics",
    "snapshot-log", "metadata-log",
]

V2_CURRENT = 3055729675574597004
V2_PARENT = 3051729675574597004


class DictIO:
    """A FileIO stand-in over a dict: ``new_input(path).read()`` and ``write(path, data, overwrite)``."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def new_input(self, path: str):
        files = self.files

        class _In:
            def read(self) -> bytes:
                return files[path]

        return _In()

    def write(self, path: str, data: bytes, overwrite: bool = False) -> None:
        if not overwrite and path in self.files:
            raise FileExistsError(path)
        self.files[path] = bytes(data)


def load(golden_dir: Path, name: str) -> TableMetadata:
    path = golden_dir / name
    return metadata_from_json(path.read_bytes(), str(path))


# ---------------------------------------------------------------------- valid files
def test_v1_valid_derives_v2_fields_like_java(golden_dir):
    md = load(golden_dir, "TableMetadataV1Valid.json")
    assert md.format_version == 1
    assert md.table_uuid == "d20125c8-7284-442c-9aea-15fee620737c"
    assert md.location == "s3://bucket/test/location"
    assert md.last_sequence_number == 0
    assert md.last_updated_ms == 1602638573874
    assert md.last_column_id == 3
    assert len(md.schemas) == 1 and md.current_schema_id == 0
    assert [f.name for f in md.schema().fields] == ["x", "y", "z"]
    assert md.schema().find_field("y").doc == "comment"
    assert md.schema().find_type(3) == LONG
    assert md.default_spec_id == 0 and len(md.partition_specs) == 1
    (pf,) = md.spec().fields
    assert (pf.source_id, pf.field_id, pf.name, str(pf.transform)) == (1, 1000, "x", "identity")
    assert md.last_partition_id == 1000
    assert md.default_sort_order_id == 0
    assert len(md.sort_orders) == 1 and md.sort_order().order_id == 0 and not md.sort_order().fields
    assert md.current_snapshot_id is None and md.current_snapshot() is None
    assert md.snapshots == () and md.refs == {}
    assert md.properties == {} and md.extra == {}
    assert md.next_row_id is None


def test_v2_valid(golden_dir):
    md = load(golden_dir, "TableMetadataV2Valid.json")
    assert md.format_version == 2
    assert md.table_uuid == "9c12d441-03fe-4693-9a96-a0705ddf69c1"
    assert md.last_sequence_number == 34
    assert md.last_updated_ms == 1602638573590
    assert [s.schema_id for s in md.schemas] == [0, 1]
    assert md.schema().schema_id == 1
    assert md.schema().identifier_field_ids == (1, 2)
    assert [f.name for f in md.schema_by_id(0).fields] == ["x"]
    assert md.schema_by_id(7) is None
    assert md.spec_by_id(0) is md.spec()
    assert md.spec_by_id(1) is None
    assert md.last_partition_id == 1000
    order = md.sort_order()
    assert order.order_id == 3
    f1, f2 = order.fields
    assert (f1.source_id, str(f1.transform), str(f1.direction.value), str(f1.null_order.value)) == (
        2, "identity", "asc", "nulls-first")
    assert (f2.source_id, str(f2.transform), str(f2.direction.value), str(f2.null_order.value)) == (
        3, "bucket[4]", "desc", "nulls-last")
    assert md.current_snapshot_id == V2_CURRENT
    cur = md.current_snapshot()
    assert cur.snapshot_id == V2_CURRENT and cur.parent_snapshot_id == V2_PARENT
    assert cur.sequence_number == 1 and cur.timestamp_ms == 1555100955770
    assert cur.manifest_list == "s3://a/b/2.avro" and cur.schema_id == 1
    assert cur.summary == {"operation": "append"} and cur.operation is Operation.APPEND
    first = md.snapshot_by_id(V2_PARENT)
    assert first.sequence_number == 0 and first.schema_id is None and first.parent_snapshot_id is None
    # no refs in the file: Java creates main from current-snapshot-id
    assert md.refs == {"main": SnapshotRef(V2_CURRENT, SnapshotRefType.BRANCH)}
    assert md.snapshot_for_ref("main") is cur
    assert md.snapshot_for_ref("nope") is None
    assert [s.snapshot_id for s in md.ancestors_of(V2_CURRENT)] == [V2_CURRENT, V2_PARENT]
    assert list(md.ancestors_of(123)) == []
    assert md.snapshot_log == (SnapshotLogEntry(1515100955770, V2_PARENT), SnapshotLogEntry(1555100955770, V2_CURRENT))
    assert md.metadata_log == ()
    assert md.property("k") is None and md.property("k", "d") == "d"


def test_v2_valid_minimal_defaults_optional_fields(golden_dir):
    md = load(golden_dir, "TableMetadataV2ValidMinimal.json")
    assert md.properties == {}
    assert md.current_snapshot_id is None and md.snapshots == () and md.refs == {}
    assert md.snapshot_log == () and md.metadata_log == ()
    assert md.statistics == () and md.partition_statistics == ()
    assert md.sort_order().order_id == 3


def test_v3_valid_minimal(golden_dir):
    md = load(golden_dir, "TableMetadataV3ValidMinimal.json")
    assert md.format_version == 3
    assert md.next_row_id == 0
    x = md.schema().find_field("x")
    assert (x.initial_default, x.write_default) == (1, 1)
    assert md.current_snapshot_id is None


def test_statistics_files(golden_dir):
    md = load(golden_dir, "TableMetadataStatisticsFiles.json")
    assert md.statistics == (
        StatisticsFile(V2_CURRENT, "s3://a/b/stats.puffin", 413, 42,
                       (BlobMetadata("ndv", V2_CURRENT, 1, (1,)),)),
    )
    assert md.partition_statistics == ()
    assert md.spec().fields == () and md.last_partition_id == 1000


def test_partition_statistics_files(golden_dir):
    md = load(golden_dir, "TableMetadataPartitionStatisticsFiles.json")
    assert md.partition_statistics == (
        PartitionStatisticsFile(V2_CURRENT, "s3://a/b/partition-stats.parquet", 43),
    )
    assert md.statistics == ()


@pytest.mark.parametrize("name", VALID)
def test_round_trip(golden_dir, name):
    md = load(golden_dir, name)
    text = metadata_to_json(md)
    again = metadata_from_json(text)
    assert again == md
    assert metadata_to_json(again) == text
    assert metadata_from_json(metadata_to_json(md, indent=2)) == md
    # the streamed bytes are the whole tree encoded at once, compactly
    assert metadata_json_bytes(md) == _compact(metadata_to_dict(md))
    odd = dataclasses.replace(md, properties={**md.properties, "comment": "caf\u00e9 \u2603 \"q\" \\"},
                              extra={**md.extra, "x-extra": {"nested": [1, 2.5, None, "\u00fc"]}})
    assert metadata_json_bytes(odd) == _compact(metadata_to_dict(odd))


def _compact(tree) -> bytes:
    return json.dumps(tree, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@pytest.mark.parametrize("name", VALID)
def test_written_keys_follow_java(golden_dir, name):
    md = load(golden_dir, name)
    out = json.loads(metadata_to_json(md))
    keys = list(out)
    assert keys == [k for k in JAVA_KEY_ORDER if k in out]
    for always in ("refs", "snapshots", "statistics", "partition-statistics", "snapshot-log", "metadata-log",
                   "properties", "last-partition-id", "sort-orders"):
        assert always in out
    assert "row-lineage" not in out
    v = md.format_version
    assert ("schema" in out) == ("partition-spec" in out) == (v == 1)
    assert ("last-sequence-number" in out) == (v > 1)
    assert ("next-row-id" in out) == (v == 3)
    if md.current_snapshot_id is None:
        assert out["current-snapshot-id"] == (None if v == 3 else -1)
    if v == 1:
        assert out["schema"] == out["schemas"][0]
        assert out["partition-spec"] == [{"name": "x", "transform": "identity", "source-id": 1, "field-id": 1000}]


def test_v2_written_snapshots_match_java_conventions(golden_dir):
    out = metadata_to_dict(load(golden_dir, "TableMetadataV2Valid.json"))
    first, second = out["snapshots"]
    assert "sequence-number" not in first  # Java writes it only when > 0
    assert list(second) == ["sequence-number", "snapshot-id", "parent-snapshot-id", "timestamp-ms", "summary",
                            "manifest-list", "schema-id"]
    assert out["refs"] == {"main": {"snapshot-id": V2_CURRENT, "type": "branch"}}
    assert out["current-snapshot-id"] == V2_CURRENT


# ---------------------------------------------------------------------- invalid files
@pytest.mark.parametrize("name,error,message", INVALID)
def test_invalid_golden_files_are_refused(golden_dir, name, error, message):
    path = golden_dir / name
    with pytest.raises(error, match=message) as info:
        metadata_from_json(path.read_text(), str(path))
    assert info.value.location == str(path)
    assert str(path) in str(info.value)


def _v2_doc(golden_dir) -> dict:
    return json.loads((golden_dir / "TableMetadataV2Valid.json").read_text())


def test_truncated_json_names_the_file(golden_dir):
    data = (golden_dir / "TableMetadataV2Valid.json").read_bytes()[:500]
    with pytest.raises(InvalidMetadataError, match="not valid JSON") as info:
        metadata_from_json(data, "s3://b/t/metadata/v3.metadata.json")
    assert info.value.location == "s3://b/t/metadata/v3.metadata.json"


def test_non_object_json_is_refused():
    with pytest.raises(InvalidMetadataError, match="non-object"):
        metadata_from_json("[1, 2]")


@pytest.mark.parametrize("key", ["location", "last-column-id", "last-updated-ms", "last-sequence-number",
                                 "current-schema-id", "default-spec-id", "default-sort-order-id"])
def test_missing_required_field_is_named(golden_dir, key):
    doc = _v2_doc(golden_dir)
    del doc[key]
    with pytest.raises(InvalidMetadataError, match=key):
        metadata_from_json(json.dumps(doc))


def test_v2_requires_uuid_and_v3_requires_next_row_id(golden_dir):
    doc = _v2_doc(golden_dir)
    del doc["table-uuid"]
    with pytest.raises(InvalidMetadataError, match="table-uuid must exist in format v2"):
        metadata_from_json(json.dumps(doc))
    doc3 = json.loads((golden_dir / "TableMetadataV3ValidMinimal.json").read_text())
    del doc3["next-row-id"]
    with pytest.raises(InvalidMetadataError, match="next-row-id must exist in format v3"):
        metadata_from_json(json.dumps(doc3))


def test_ref_to_missing_snapshot_is_refused(golden_dir):
    doc = _v2_doc(golden_dir)
    doc["refs"] = {"main": {"snapshot-id": V2_CURRENT, "type": "branch"}, "t1": {"snapshot-id": 42, "type": "tag"}}
    with pytest.raises(InvalidMetadataError, match="ref 't1' points at snapshot 42"):
        metadata_from_json(json.dumps(doc))


def test_main_must_match_current_snapshot(golden_dir):
    doc = _v2_doc(golden_dir)
    doc["refs"] = {"main": {"snapshot-id": V2_PARENT, "type": "branch"}}
    with pytest.raises(InvalidMetadataError, match=f"current-snapshot-id {V2_CURRENT} does not match the main branch"):
        metadata_from_json(json.dumps(doc))
    doc["current-snapshot-id"] = -1
    with pytest.raises(InvalidMetadataError, match="current-snapshot-id is not set, but the main branch"):
        metadata_from_json(json.dumps(doc))


def test_current_snapshot_must_exist(golden_dir):
    doc = _v2_doc(golden_dir)
    doc["current-snapshot-id"] = 99
    with pytest.raises(InvalidMetadataError, match="current-snapshot-id 99 is not among"):
        metadata_from_json(json.dumps(doc))


def test_snapshot_sequence_number_above_last_is_refused(golden_dir):
    doc = _v2_doc(golden_dir)
    doc["last-sequence-number"] = 0
    with pytest.raises(InvalidMetadataError, match="greater than last-sequence-number 0"):
        metadata_from_json(json.dumps(doc))


def test_refs_are_read_and_written_with_retention(golden_dir):
    doc = _v2_doc(golden_dir)
    doc["refs"] = {
        "main": {"snapshot-id": V2_CURRENT, "type": "branch", "min-snapshots-to-keep": 2},
        "audit": {"snapshot-id": V2_PARENT, "type": "branch", "max-snapshot-age-ms": 10, "max-ref-age-ms": 20},
        "v1": {"snapshot-id": V2_PARENT, "type": "tag", "max-ref-age-ms": 30},
    }
    md = metadata_from_json(json.dumps(doc))
    assert md.refs["audit"] == SnapshotRef(V2_PARENT, SnapshotRefType.BRANCH, None, 10, 20)
    assert md.refs["v1"].is_tag and md.refs["v1"].max_ref_age_ms == 30
    assert md.snapshot_for_ref("v1").snapshot_id == V2_PARENT
    assert metadata_to_dict(md)["refs"] == doc["refs"]


def test_unknown_top_level_keys_survive_and_row_lineage_is_dropped(golden_dir):
    doc = json.loads((golden_dir / "TableMetadataV3ValidMinimal.json").read_text())
    doc["x-vendor"] = {"a": [1, 2]}
    doc["row-lineage"] = True
    md = metadata_from_json(json.dumps(doc))
    assert md.extra == {"x-vendor": {"a": [1, 2]}}
    out = metadata_to_dict(md)
    assert out["x-vendor"] == {"a": [1, 2]} and "row-lineage" not in out


def test_v3_snapshot_fields_and_null_current_snapshot(golden_dir):
    doc = json.loads((golden_dir / "TableMetadataV3ValidMinimal.json").read_text())
    doc["current-snapshot-id"] = None
    doc["snapshots"] = [{"sequence-number": 1, "snapshot-id": 5, "timestamp-ms": 1602638573590,
                         "summary": {"operation": "append", "added-records": "3"},
                         "manifest-list": "s3://a/snap-5.avro", "schema-id": 0,
                         "first-row-id": 0, "added-rows": 3, "key-id": "k1"}]
    doc["next-row-id"] = 3
    md = metadata_from_json(json.dumps(doc))
    (s,) = md.snapshots
    assert (s.first_row_id, s.added_rows, s.key_id) == (0, 3, "k1")
    assert md.current_snapshot() is None and md.refs == {}
    out = metadata_to_dict(md)
    assert out["snapshots"] == doc["snapshots"]
    assert out["current-snapshot-id"] is None and out["next-row-id"] == 3


# ---------------------------------------------------------------------- files and gzip
@pytest.mark.parametrize("name", ["v3.gz.metadata.json", "00003-abc.metadata.json.gz"])
def test_gzip_files_are_read_and_written_by_name(golden_dir, name):
    io = DictIO()
    path = "mem://t/metadata/" + name
    io.files[path] = gzip.compress((golden_dir / "TableMetadataV2Valid.json").read_bytes())
    md = read_table_metadata(io, path)
    assert md.current_snapshot_id == V2_CURRENT
    out = "mem://t/metadata/copy-" + name
    write_table_metadata(io, out, md)
    assert io.files[out][:2] == b"\x1f\x8b"
    assert read_table_metadata(io, out) == md


def test_plain_files_and_no_overwrite(golden_dir):
    io = DictIO()
    md = load(golden_dir, "TableMetadataV1Valid.json")
    write_table_metadata(io, "mem://t/metadata/v1.metadata.json", md)
    assert io.files["mem://t/metadata/v1.metadata.json"][:1] == b"{"
    assert read_table_metadata(io, "mem://t/metadata/v1.metadata.json") == md
    other = load(golden_dir, "TableMetadataV2Valid.json")
    with pytest.raises(FileExistsError):
        write_table_metadata(io, "mem://t/metadata/v1.metadata.json", other)
    assert read_table_metadata(io, "mem://t/metadata/v1.metadata.json") == md  # the refused write changed nothing
    write_table_metadata(io, "mem://t/metadata/v1.metadata.json", other, overwrite=True)
    assert read_table_metadata(io, "mem://t/metadata/v1.metadata.json") == other


def test_truncated_gzip_names_the_file(golden_dir):
    io = DictIO()
    path = "mem://t/metadata/v9.gz.metadata.json"
    io.files[path] = gzip.compress((golden_dir / "TableMetadataV2Valid.json").read_bytes())[:60]
    with pytest.raises(InvalidMetadataError) as info:
        read_table_metadata(io, path)
    assert info.value.location == path


def test_invalid_file_read_through_io_names_the_location(golden_dir):
    io = DictIO()
    path = "mem://t/metadata/v2.metadata.json"
    io.files[path] = (golden_dir / "TableMetadataV2MissingSortOrder.json").read_bytes()
    with pytest.raises(InvalidMetadataError, match="sort-orders must exist in format v2") as info:
        read_table_metadata(io, path)
    assert info.value.location == path


# ---------------------------------------------------------------------- snapshots, refs, summaries
def test_snapshot_codec_per_version():
    s = Snapshot(7, 6, 0, 1000, "s3://m.avro", {"added-records": "1", "operation": "overwrite"}, 0, 10, 1, None,
                 {"x-extra": "kept"})
    v2 = snapshot_to_json(s, 2)
    assert list(v2) == ["snapshot-id", "parent-snapshot-id", "timestamp-ms", "summary", "manifest-list",
                        "schema-id", "x-extra"]
    assert list(v2["summary"]) == ["operation", "added-records"]  # operation always first
    v3 = snapshot_to_json(s, 3)
    assert (v3["first-row-id"], v3["added-rows"]) == (10, 1)
    assert snapshot_from_json(v3) == s
    assert s.operation is Operation.OVERWRITE


def test_snapshot_without_operation_reads_as_overwrite_and_v1_manifests_are_kept():
    s = snapshot_from_json({"snapshot-id": 1, "timestamp-ms": 2, "manifests": ["a.avro", "b.avro"]})
    assert s.summary == {"operation": "overwrite"} and s.manifest_list is None
    assert snapshot_to_json(s, 1)["manifests"] == ["a.avro", "b.avro"]
    with pytest.raises(InvalidMetadataError, match="neither 'manifest-list' nor"):
        snapshot_from_json({"snapshot-id": 1, "timestamp-ms": 2})
    with pytest.raises(InvalidMetadataError, match="'timestamp-ms'"):
        snapshot_from_json({"snapshot-id": 1, "manifest-list": "m"})


def test_ref_codec_and_rules():
    ref = SnapshotRef(5, SnapshotRefType.BRANCH, 3, 1000, 2000)
    assert ref_to_json(ref) == {"snapshot-id": 5, "type": "branch", "min-snapshots-to-keep": 3,
                                "max-snapshot-age-ms": 1000, "max-ref-age-ms": 2000}
    assert ref_from_json(ref_to_json(ref)) == ref
    assert ref_from_json({"snapshot-id": 5, "type": "TAG"}).ref_type is SnapshotRefType.TAG
    with pytest.raises(InvalidMetadataError, match="only branches"):
        ref_from_json({"snapshot-id": 5, "type": "tag", "min-snapshots-to-keep": 1}, "t")
    with pytest.raises(InvalidMetadataError, match="unknown type 'bookmark'"):
        ref_from_json({"snapshot-id": 5, "type": "bookmark"}, "b")
    with pytest.raises(InvalidMetadataError, match="must be greater than 0"):
        SnapshotRef(5, SnapshotRefType.BRANCH, 0)


def test_apply_totals_follows_java():
    first = apply_totals({"operation": "append", "added-records": "3", "added-data-files": "1",
                          "added-files-size": "100"}, None)
    assert first["total-records"] == "3" and first["total-data-files"] == "1"
    assert first["total-files-size"] == "100" and first["total-delete-files"] == "0"
    second = apply_totals({"operation": "delete", "deleted-records": "2", "deleted-data-files": "1",
                           "removed-files-size": "100"}, first)
    assert (second["total-records"], second["total-data-files"], second["total-files-size"]) == ("1", "0", "0")
    # a parent without totals gives none, rather than wrong ones
    assert "total-records" not in apply_totals({"added-records": "1"}, {"operation": "append"})
