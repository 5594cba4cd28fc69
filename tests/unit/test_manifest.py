"""Manifests and manifest lists: Avro schemas (Appendix A), round trips for v1-v3, inheritance,
partition summaries, first_row_id assignment, and cross-reading with PyIceberg."""

from __future__ import annotations

import io
import json
import re
import struct
import uuid
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import fastavro
import pytest

import procedures.core.gc.live_paths as live_paths_module
import procedures.core.manifest_rewrite.entry_copy as manifest_copy_module
from procedures.core.gc.live_paths import manifest_live_paths
from procedures.core.manifest_rewrite.entry_copy import existing_records
from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec.avro_schemas import (
    manifest_entry_avro_schema,
    manifest_list_avro_schema,
    sanitize_name,
)
from procedures.spec.manifest.avro_container import read_manifest_metadata
from procedures.spec.manifest.manifest_list import read_manifest_list, write_manifest_list
from procedures.spec.manifest.model import (
    DEFAULT_BLOCK_SIZE, UNASSIGNED_SEQ, DataFile, FieldSummary, FileContent, FileFormat, ManifestContent,
    ManifestEntry, ManifestEntryStatus, ManifestFile,
)
from procedures.spec.manifest.reader import partition_tuple_getter, read_manifest, read_manifest_where
from procedures.spec.manifest.writer import ManifestWriter
from procedures.spec.partitioning import PartitionField, PartitionSpec, UNPARTITIONED_SPEC
from procedures.spec.schema import Schema
from procedures.spec.transforms import parse_transform
from procedures.spec.types import (
    BINARY,
    DATE,
    DOUBLE,
    LONG,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ_NS,
    UUID,
    DecimalType,
    FixedType,
    NestedField,
    StructType,
)
from tests.helpers.references import import_reference, shared_file

# the shared reference folder beside the clone (``../shared`` from the repository root)
SPEC_NOTES = "reference/spec-onfile.md"


class MemIO:
    """The FileIO subset manifests use, in memory."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def new_input(self, path: str):
        files = self.files

        class _In:
            def read(self) -> bytes:
                if path not in files:
                    raise FileNotFoundError(path)
                return files[path]

        return _In()

    def write(self, path: str, data: bytes, overwrite: bool = False) -> None:
        if not overwrite and path in self.files:
            raise FileExistsError(path)
        self.files[path] = bytes(data)


SCHEMA = Schema((
    NestedField(1, "id", LONG, True),
    NestedField(2, "price", DecimalType(9, 2)),
    NestedField(3, "u", UUID),
    NestedField(4, "ts", TIMESTAMP),
    NestedField(5, "f", DOUBLE),
    NestedField(6, "my-col", STRING),
    NestedField(7, "cost", DecimalType(9, 2)),
    NestedField(8, "t", TIME),
    NestedField(9, "b", BINARY),
    NestedField(10, "fx", FixedType(3)),
    NestedField(11, "tns", TIMESTAMPTZ_NS),
), schema_id=3)


def _pf(source_id: int, field_id: int, transform: str, name: str) -> PartitionField:
    return PartitionField(source_id, field_id, parse_transform(transform), name)


SPEC = PartitionSpec(2, (
    _pf(2, 1000, "identity", "price"),
    _pf(3, 1001, "identity", "u"),
    _pf(4, 1002, "day", "ts_day"),
    _pf(5, 1003, "identity", "f"),
    _pf(6, 1004, "identity", "my-col"),
    _pf(7, 1005, "identity", "cost"),
    _pf(8, 1006, "identity", "t"),
    _pf(9, 1007, "identity", "b"),
    _pf(10, 1008, "identity", "fx"),
    _pf(11, 1009, "identity", "tns"),
    _pf(4, 1010, "identity", "ts"),
))
U1 = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")


def _appendix_schemas() -> dict[tuple[str, int], dict]:
    text = shared_file(SPEC_NOTES).read_text()
    app = text[text.index("## Appendix A"):]
    blocks = re.findall(r"#### manifest (list|file), v(\d)[^\n]*\n\n```json\n(.*?)```", app, re.S)
    assert len(blocks) == 6
    return {(kind, int(v)): json.loads(body) for kind, v, body in blocks}


@pytest.mark.parametrize("version", [1, 2, 3])
def test_schemas_equal_appendix_a(version: int) -> None:
    schemas = _appendix_schemas()
    assert manifest_list_avro_schema(version) == schemas[("list", version)]
    assert manifest_entry_avro_schema(version, StructType(())) == schemas[("file", version)]


def test_partition_struct_avro_types() -> None:
    schema = manifest_entry_avro_schema(2, SPEC.partition_type(SCHEMA))
    fastavro.parse_schema(schema)  # named types defined once or the parser rejects the schema
    data_file = schema["fields"][-1]["type"]
    partition = next(f for f in data_file["fields"] if f["name"] == "partition")["type"]
    assert partition["name"] == "r102"
    fields = {f["field-id"]: f for f in partition["fields"]}
    assert fields[1000]["type"] == ["null", {
        "type": "fixed", "name": "decimal_9_2", "size": 4, "logicalType": "decimal", "precision": 9, "scale": 2,
    }]
    assert fields[1005]["type"] == ["null", "decimal_9_2"]  # second use is a name reference
    assert fields[1001]["type"] == ["null", {"type": "fixed", "name": "uuid_fixed", "size": 16, "logicalType": "uuid"}]
    assert fields[1002] == {"name": "ts_day", "type": ["null", {"type": "int", "logicalType": "date"}],
                            "default": None, "field-id": 1002}
    assert fields[1004]["name"] == "my_x2Dcol" and fields[1004]["iceberg-field-name"] == "my-col"
    assert fields[1006]["type"] == ["null", {"type": "long", "logicalType": "time-micros"}]
    assert fields[1008]["type"] == ["null", {"type": "fixed", "name": "fixed_3", "size": 3}]
    assert fields[1009]["type"] == ["null", {"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": True}]
    assert fields[1010]["type"] == ["null", {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": False}]


def test_void_field_of_a_dropped_column_writes_null_as_java() -> None:
    """A replaced v1 table keeps the old field as void of a column the schema no longer has: its
    partition type is ``unknown``, written as Avro ``null`` (Java's manifest of such a table), and the
    manifest round-trips with a null value for it."""
    spec = PartitionSpec(1, (_pf(99, 1000, "void", "gone_day"), _pf(1, 1001, "bucket[4]", "id_bucket")))
    ptype = spec.partition_type(SCHEMA)
    schema = manifest_entry_avro_schema(1, ptype)
    fastavro.parse_schema(schema)
    data_file = schema["fields"][-1]["type"]
    partition = next(f for f in data_file["fields"] if f["name"] == "partition")["type"]
    assert partition["fields"][0] == {"name": "gone_day", "type": "null", "default": None, "field-id": 1000}
    mio = MemIO()
    f = _full_file(FileContent.DATA, 1, (None, 3), spec_id=1)
    with ManifestWriter(mio, "s3://bucket/t/metadata/v.avro", spec, SCHEMA, 1, ManifestContent.DATA, 55) as w:
        w.add(f)
    m = w.close()
    assert m.partitions[0] == FieldSummary(True, False, None, None)
    assert [e.data_file.partition for e in read_manifest(mio, m, specs={1: spec})] == [(None, 3)]


def test_sanitize_name() -> None:
    assert sanitize_name("my-col") == "my_x2Dcol"
    assert sanitize_name("1a") == "_1a"
    assert sanitize_name("a b") == "a_x20b"
    assert sanitize_name("ok_name9") == "ok_name9"
    assert sanitize_name("é") == "_xE9"


def _full_file(content: FileContent, version: int, partition: tuple, **kw) -> DataFile:
    args = dict(
        file_path="s3://bucket/t/data/a.parquet",
        file_format=FileFormat.PARQUET,
        partition=partition,
        record_count=10,
        file_size_in_bytes=1234,
        content=content,
        column_sizes={1: 50, 2: 60},
        value_counts={1: 10, 2: 10},
        null_value_counts={1: 0, 2: 1},
        nan_value_counts={5: 2},
        lower_bounds={1: struct.pack("<q", -5), 2: b"\x05\x8c"},
        upper_bounds={1: struct.pack("<q", 99), 2: b"\x7f"},
        key_metadata=b"\x01\x02",
        split_offsets=(4, 1000),
        sort_order_id=0,
        spec_id=SPEC.spec_id,
    )
    if version >= 2 and content == FileContent.EQUALITY_DELETES:
        args["equality_ids"] = (1, 2)
    if version >= 2 and content == FileContent.POSITION_DELETES:
        args["referenced_data_file"] = "s3://bucket/t/data/x.parquet"
        args["sort_order_id"] = None
    if version >= 3 and content == FileContent.POSITION_DELETES:
        args.update(file_format=FileFormat.PUFFIN, content_offset=4, content_size_in_bytes=44)
    args.update(kw)
    return DataFile(**args)


PARTITION = (Decimal("14.20"), U1, 17486, -0.0, "x", Decimal("-1.28"), 81068000000, b"\x00\xff", b"abc",
             1510871468000000123, 1510871468000000)
NULL_PARTITION = (None,) * len(SPEC.fields)


def _write(mio: MemIO, version: int, content: ManifestContent, files: list[tuple[str, DataFile, int | None, int | None]],
           path: str = "s3://bucket/t/metadata/m.avro", snapshot_id: int = 55) -> ManifestFile:
    with ManifestWriter(mio, path, SPEC, SCHEMA, version, content, snapshot_id) as w:
        _write_into(w, files)
    return w.close()


def _write_into(w: ManifestWriter, files: list[tuple[str, DataFile, int | None, int | None]]) -> None:
    for status, f, seq, fseq in files:
        if status == "add":
            w.add(f, seq)
        elif status == "existing":
            w.existing(f, 44, seq, fseq)
        else:
            w.delete(f, seq, fseq)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_round_trip_every_field(version: int) -> None:
    mio = MemIO()
    contents = [FileContent.DATA] if version == 1 else [FileContent.DATA, FileContent.POSITION_DELETES, FileContent.EQUALITY_DELETES]
    for content in contents:
        mcontent = ManifestContent.DATA if content == FileContent.DATA else ManifestContent.DELETES
        f1 = _full_file(content, version, PARTITION)
        f2 = _full_file(content, version, NULL_PARTITION, file_path="s3://bucket/t/data/b.parquet",
                        first_row_id=700 if version >= 3 and content == FileContent.DATA else None)
        path = f"s3://bucket/t/metadata/m-{int(content)}.avro"
        m = _write(mio, version, mcontent, [("add", f1, None, None), ("existing", f2, 3, 4)], path)
        assert m.manifest_length == len(mio.files[path])
        assert (m.sequence_number, m.min_sequence_number) == (UNASSIGNED_SEQ, 3)
        listed, _ = write_manifest_list(mio, f"s3://bucket/t/metadata/snap-{int(content)}.avro", version, 55, 44, 7,
                                        1000 if version >= 3 else None, [m])
        back = read_manifest_list(mio, f"s3://bucket/t/metadata/snap-{int(content)}.avro")
        if version == 1:
            assert back == [ManifestFile(**{**_fields(listed[0]), "sequence_number": 0, "min_sequence_number": 0})]
        else:
            assert back == listed
            assert back[0].sequence_number == 7 and back[0].min_sequence_number == 3
        entries = list(read_manifest(mio, back[0], specs={SPEC.spec_id: SPEC}))
        seq = 0 if version == 1 else 7
        expected_first = (1000 if version >= 3 and content == FileContent.DATA else None)
        assert entries[0] == ManifestEntry(ManifestEntryStatus.ADDED, 55, seq, seq, _with(f1, first_row_id=expected_first))
        exp_seq, exp_fseq = (0, 0) if version == 1 else (3, 4)
        assert entries[1] == ManifestEntry(ManifestEntryStatus.EXISTING, 44, exp_seq, exp_fseq, f2)


def _fields(obj) -> dict:
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}


def _with(f: DataFile, **kw) -> DataFile:
    return DataFile(**{**_fields(f), **kw})


def test_v1_writes_no_v2_fields() -> None:
    mio = MemIO()
    m = _write(mio, 1, ManifestContent.DATA, [("add", _full_file(FileContent.DATA, 1, PARTITION), None, None)])
    records = list(fastavro.reader(io.BytesIO(mio.files[m.manifest_path])))
    assert set(records[0]) == {"status", "snapshot_id", "data_file"}
    assert records[0]["data_file"]["block_size_in_bytes"] == 64 * 1024 * 1024
    assert records[0]["data_file"]["file_format"] == "PARQUET"


def test_added_entries_have_null_sequence_numbers_and_inherit() -> None:
    mio = MemIO()
    f = _full_file(FileContent.DATA, 2, PARTITION)
    m = _write(mio, 2, ManifestContent.DATA, [("add", f, None, None), ("add", _with(f, file_path="s3://b/2"), 5, None),
                                              ("delete", _with(f, file_path="s3://b/3"), 2, 2)])
    raw = list(fastavro.reader(io.BytesIO(mio.files[m.manifest_path])))
    assert [(r["sequence_number"], r["file_sequence_number"]) for r in raw] == [(None, None), (5, None), (2, 2)]
    assert m.min_sequence_number == 5  # DELETED entries are not live
    [listed], _ = write_manifest_list(mio, "s3://b/l.avro", 2, 55, None, 9, None, [m])
    entries = list(read_manifest(mio, listed))
    assert [(e.sequence_number, e.file_sequence_number) for e in entries] == [(9, 9), (5, 9), (2, 2)]
    assert [e.status for e in read_manifest(mio, listed, skip_deleted=True)] == [ManifestEntryStatus.ADDED] * 2


def test_null_snapshot_id_inherits_added_snapshot_id() -> None:
    mio = MemIO()
    f = _full_file(FileContent.DATA, 2, NULL_PARTITION)
    w = ManifestWriter(mio, "s3://b/m.avro", SPEC, SCHEMA, 2, ManifestContent.DATA, 77)
    w.add_entry(ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f))
    m = replace_seq(w.close(), 4)
    [e] = read_manifest(mio, m)
    assert (e.snapshot_id, e.sequence_number, e.file_sequence_number) == (77, 4, 4)


def replace_seq(m: ManifestFile, seq: int) -> ManifestFile:
    return ManifestFile(**{**_fields(m), "sequence_number": seq, "min_sequence_number": seq})


def test_existing_entry_needs_sequence_number() -> None:
    w = ManifestWriter(MemIO(), "s3://b/m.avro", SPEC, SCHEMA, 2, ManifestContent.DATA, 1)
    with pytest.raises(ValidationError, match="explicit data sequence number"):
        w.existing(_full_file(FileContent.DATA, 2, NULL_PARTITION), 1, None, None)
    with pytest.raises(ValidationError, match="DATA manifest"):
        w.add(_full_file(FileContent.POSITION_DELETES, 2, NULL_PARTITION))


def test_partition_summaries() -> None:
    mio = MemIO()
    base = _full_file(FileContent.DATA, 2, NULL_PARTITION)
    parts = [
        (Decimal("14.20"), U1, 17486, -0.0, "b", None, 5, b"\x01", b"abc", 1, 10),
        (Decimal("-1.28"), None, 17000, float("nan"), "a", None, 7, b"\xff", b"abd", 2, 20),
        (None, None, None, 0.0, None, None, None, None, None, None, None),
    ]
    files = [("add", _with(base, file_path=f"s3://b/{i}", partition=p), None, None) for i, p in enumerate(parts)]
    m = _write(mio, 2, ManifestContent.DATA, files)
    s = m.partitions
    assert s[0] == FieldSummary(True, False, b"\xff\xff\xff\x80"[-1:], b"\x05\x8c")
    assert s[1] == FieldSummary(True, False, U1.bytes, U1.bytes)
    assert s[2] == FieldSummary(True, False, struct.pack("<i", 17000), struct.pack("<i", 17486))
    # -0.0 is the lower bound, +0.0 the upper, NaN is only flagged
    assert s[3] == FieldSummary(False, True, struct.pack("<d", -0.0), struct.pack("<d", 0.0))
    assert s[4] == FieldSummary(True, False, b"a", b"b")
    assert s[5] == FieldSummary(True, False, None, None)
    assert s[7] == FieldSummary(True, False, b"\x01", b"\xff")
    assert (m.added_files_count, m.added_rows_count, m.existing_files_count, m.deleted_files_count) == (3, 30, 0, 0)


def test_signed_zero_only_positive() -> None:
    mio = MemIO()
    spec = PartitionSpec(0, (_pf(5, 1000, "identity", "f"),))
    w = ManifestWriter(mio, "s3://b/m.avro", spec, SCHEMA, 2, ManifestContent.DATA, 1)
    for i, v in enumerate((0.0, 1.5, -0.0)):
        w.add(DataFile(f"s3://b/{i}", FileFormat.PARQUET, (v,), 1, 1))
    [s] = w.close().partitions
    assert s == FieldSummary(False, False, struct.pack("<d", -0.0), struct.pack("<d", 1.5))


def test_unpartitioned_summary_is_empty_list() -> None:
    mio = MemIO()
    w = ManifestWriter(mio, "s3://b/m.avro", UNPARTITIONED_SPEC, SCHEMA, 2, ManifestContent.DATA, 1)
    w.add(DataFile("s3://b/x", FileFormat.PARQUET, (), 1, 1))
    m = w.close()
    assert m.partitions == ()
    [listed], _ = write_manifest_list(mio, "s3://b/l.avro", 2, 1, None, 1, None, [m])
    raw = next(iter(fastavro.reader(io.BytesIO(mio.files["s3://b/l.avro"]))))
    assert raw["partitions"] == []


def test_first_row_id_assignment_example() -> None:
    """The example of section 2.3: next-row-id 1000, one reused manifest keeps 925."""

    def mf(name: str, added: int, existing: int, first: int | None, content=ManifestContent.DATA) -> ManifestFile:
        return ManifestFile(f"s3://b/{name}", 100, 0, content, 3, 3, 55, 1, 1, 0, added, existing, 0, (), None, first)

    manifests = [mf("reused", 75, 0, 925), mf("new1", 100, 25, None), mf("del", 50, 0, None, ManifestContent.DELETES),
                 mf("new2", 0, 100, None), mf("new3", 125, 25, None)]
    mio = MemIO()
    out, next_row_id = write_manifest_list(mio, "s3://b/l.avro", 3, 55, 54, 3, 1000, manifests)
    assert [m.first_row_id for m in out] == [925, 1000, None, 1125, 1225]
    assert next_row_id == 1375
    assert read_manifest_list(mio, "s3://b/l.avro") == out
    meta = read_manifest_metadata(mio, "s3://b/l.avro")
    assert meta == {"snapshot-id": "55", "parent-snapshot-id": "54", "sequence-number": "3",
                    "first-row-id": "1000", "format-version": "3"}


def test_manifest_list_metadata_without_parent() -> None:
    mio = MemIO()
    write_manifest_list(mio, "s3://b/l1.avro", 1, 5, None, 0, None, [])
    assert read_manifest_metadata(mio, "s3://b/l1.avro") == {
        "snapshot-id": "5", "parent-snapshot-id": "null", "format-version": "1"}


def test_unassigned_sequence_number_from_other_snapshot_is_refused() -> None:
    m = ManifestFile("s3://b/m", 1, 0, ManifestContent.DATA, UNASSIGNED_SEQ, UNASSIGNED_SEQ, 12, 0, 0, 0, 0, 0, 0)
    with pytest.raises(ValidationError, match="only manifests added by snapshot 13"):
        write_manifest_list(MemIO(), "s3://b/l.avro", 2, 13, None, 5, None, [m])


def test_first_row_id_read_walk_skips_deleted_and_keeps_values() -> None:
    mio = MemIO()
    base = _full_file(FileContent.DATA, 3, NULL_PARTITION, record_count=10)
    files = [
        ("add", _with(base, file_path="s3://b/1", record_count=10), None, None),
        ("delete", _with(base, file_path="s3://b/2", record_count=100), 1, 1),
        ("existing", _with(base, file_path="s3://b/3", record_count=5, first_row_id=3), 1, 1),
        ("add", _with(base, file_path="s3://b/4", record_count=7), None, None),
    ]
    m = _write(mio, 3, ManifestContent.DATA, files)
    [listed], nxt = write_manifest_list(mio, "s3://b/l.avro", 3, 55, None, 2, 500, [m])
    assert listed.first_row_id == 500 and nxt == 500 + 10 + 5 + 7 + 0  # added + existing rows
    got = [(e.data_file.file_path, e.data_file.first_row_id) for e in read_manifest(mio, listed)]
    assert got == [("s3://b/1", 500), ("s3://b/2", None), ("s3://b/3", 3), ("s3://b/4", 510)]


def test_v1_manifest_list_reads_as_sequence_zero() -> None:
    mio = MemIO()
    m = _write(mio, 1, ManifestContent.DATA, [("add", _full_file(FileContent.DATA, 1, PARTITION), None, None),
                                              ("existing", _full_file(FileContent.DATA, 1, PARTITION), 9, 9)])
    write_manifest_list(mio, "s3://b/l.avro", 1, 55, None, 0, None, [m])
    [listed] = read_manifest_list(mio, "s3://b/l.avro")
    assert (listed.content, listed.sequence_number, listed.min_sequence_number) == (ManifestContent.DATA, 0, 0)
    assert [(e.sequence_number, e.file_sequence_number) for e in read_manifest(mio, listed)] == [(0, 0), (0, 0)]


def test_manifest_header_metadata() -> None:
    mio = MemIO()
    m = _write(mio, 2, ManifestContent.DELETES, [("add", _full_file(FileContent.POSITION_DELETES, 2, NULL_PARTITION), None, None)])
    meta = read_manifest_metadata(mio, m.manifest_path)
    assert set(meta) == {"schema", "schema-id", "partition-spec", "partition-spec-id", "format-version", "content"}
    assert (meta["schema-id"], meta["partition-spec-id"], meta["format-version"], meta["content"]) == ("3", "2", "2", "deletes")
    assert json.loads(meta["partition-spec"])[2] == {"name": "ts_day", "transform": "day", "source-id": 4, "field-id": 1002}
    assert json.loads(meta["schema"])["schema-id"] == 3
    raw = fastavro.reader(io.BytesIO(mio.files[m.manifest_path]))
    assert raw.metadata["avro.codec"] == "deflate"


@pytest.mark.parametrize("codec,avro_name", [("null", "null"), ("zstd", "zstandard"), ("snappy", "snappy"),
                                            ("gzip", "deflate")])
def test_codecs(codec: str, avro_name: str) -> None:
    mio = MemIO()
    w = ManifestWriter(mio, "s3://b/m.avro", SPEC, SCHEMA, 2, ManifestContent.DATA, 1, codec=codec)
    f = _full_file(FileContent.DATA, 2, PARTITION)
    w.add(f)
    m = replace_seq(w.close(), 1)
    assert fastavro.reader(io.BytesIO(mio.files[m.manifest_path])).metadata["avro.codec"] == avro_name
    [e] = read_manifest(mio, m)
    assert e.data_file == f


# An Avro data file Iceberg Java 1.10.2 wrote (table property write.avro.compression-codec=snappy,
# 'write.format.default'='avro', rows ``range(0, 300)`` with cat = 'c' || id % 3, partition cat=c1):
# Apache Avro's own snappy codec and CRC, so our codec reads bytes another writer produced.
JAVA_SNAPPY_AVRO = Path(__file__).parent / "data" / "java-1.10.2-snappy-data.avro"


def test_snappy_avro_written_by_java() -> None:
    from procedures.spec import avro_codecs

    avro_codecs.install()
    reader = fastavro.reader(io.BytesIO(JAVA_SNAPPY_AVRO.read_bytes()))
    assert reader.metadata["avro.codec"] == "snappy"
    assert list(reader) == [{"id": i, "cat": "c1"} for i in range(1, 300, 3)]


def test_corrupt_manifest_names_file() -> None:
    mio = MemIO()
    mio.files["s3://b/bad.avro"] = b"Obj\x01garbage"
    with pytest.raises(InvalidMetadataError) as err:
        list(read_manifest(mio, ManifestFile("s3://b/bad.avro", 10, 0)))
    assert err.value.location == "s3://b/bad.avro"


def test_pyiceberg_reads_our_files() -> None:
    pyi_manifest = import_reference("pyiceberg.manifest", "PyIceberg not installed: pip install -e '.[test]'")
    from pyiceberg.io.pyarrow import PyArrowFileIO

    import tempfile

    from procedures.io.fileio import FileIO

    d = tempfile.mkdtemp()
    fio = FileIO()
    spec = PartitionSpec(0, (_pf(4, 1000, "day", "ts_day"), _pf(6, 1001, "identity", "my-col")))
    f1 = DataFile(f"file://{d}/a.parquet", FileFormat.PARQUET, (17486, "x"), 10, 100,
                  value_counts={1: 10}, lower_bounds={1: struct.pack("<q", 1)}, sort_order_id=0)
    f2 = DataFile(f"file://{d}/b.parquet", FileFormat.PARQUET, (None, "y"), 20, 200)
    w = ManifestWriter(fio, f"{d}/m.avro", spec, SCHEMA, 3, ManifestContent.DATA, 9)
    w.add(f1)
    w.existing(f2, 8, 1, 1)
    out, _ = write_manifest_list(fio, f"{d}/l.avro", 3, 9, 8, 2, 40, [w.close()])
    pio = PyArrowFileIO()
    [pm] = pyi_manifest.read_manifest_list(pio.new_input(f"{d}/l.avro"))
    assert (pm.manifest_length, pm.sequence_number, pm.min_sequence_number, pm.added_rows_count,
            pm.existing_rows_count) == (out[0].manifest_length, 2, 1, 10, 20)
    entries = pm.fetch_manifest_entry(pio, discard_deleted=False)
    assert [(e.status.value, e.snapshot_id, e.sequence_number, e.file_sequence_number) for e in entries] == [(1, 9, 2, 2), (0, 8, 1, 1)]
    assert [tuple(e.data_file.partition) for e in entries] == [(17486, "x"), (None, "y")]
    assert entries[0].data_file.lower_bounds == {1: struct.pack("<q", 1)}


def test_pyarrow_avro_codecs_read_what_other_writers_produce() -> None:
    import pyarrow as pa

    from procedures.errors import InvalidMetadataError
    from procedures.spec import avro_codecs

    payload = b"manifest entry bytes " * 500
    # streaming zstd writers (Java's Avro) leave the content size out of the frame
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "zstd") as out:
        out.write(payload)
    assert avro_codecs.zstd_decompress(sink.getvalue().to_pybytes()) == payload
    assert avro_codecs.snappy_decompress(avro_codecs.snappy_compress(payload)) == payload

    avro_codecs.install()
    schema = {"type": "record", "name": "r", "fields": [{"name": "s", "type": "string"}]}
    records = [{"s": f"row {i}"} for i in range(1000)]
    for codec in ("zstandard", "snappy"):
        buf = io.BytesIO()
        fastavro.writer(buf, schema, records, codec=codec)
        assert list(fastavro.reader(io.BytesIO(buf.getvalue()))) == records
    # a snappy block whose CRC does not match its bytes is refused, not silently read
    buf = io.BytesIO()
    fastavro.writer(buf, schema, records, codec="snappy")
    data = bytearray(buf.getvalue())
    data[len(data) - 16 - 4] ^= 0xFF  # the block's CRC sits just before the 16-byte sync marker
    with pytest.raises(InvalidMetadataError, match="CRC"):
        list(fastavro.reader(io.BytesIO(bytes(data))))


def _copied(mio: MemIO, manifest: ManifestFile, version: int, content: ManifestContent, path: str):
    """``manifest``'s live entries rewritten as EXISTING through ``existing_records`` (or None)."""
    w = ManifestWriter(mio, path, SPEC, SCHEMA, version, content, 99)
    records = existing_records(mio, manifest, w.avro_schema, version, specs={SPEC.spec_id: SPEC})
    if records is None:
        return None
    for partition, record_count, seq, record in records:
        w.existing_encoded(record, partition, record_count, seq)
    return w.close()


def _rewritten_by_driver(mio: MemIO, manifest: ManifestFile, version: int, content: ManifestContent, path: str):
    with ManifestWriter(mio, path, SPEC, SCHEMA, version, content, 99) as w:
        for e in read_manifest(mio, manifest, specs={SPEC.spec_id: SPEC}, skip_deleted=True):
            w.existing(e.data_file, e.snapshot_id, e.sequence_number, e.file_sequence_number)
    return w.close()


def _lower_case_formats(mio: MemIO, path: str) -> None:
    reader = fastavro.reader(io.BytesIO(mio.files[path]))
    records = list(reader)
    for r in records:
        r["data_file"]["file_format"] = r["data_file"]["file_format"].lower()
    meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    buf = io.BytesIO()
    fastavro.writer(buf, reader.writer_schema, records, codec="deflate", metadata=meta)
    mio.files[path] = buf.getvalue()


@pytest.mark.parametrize("skimmed", [True, False], ids=["skimmed", "fastavro"])
@pytest.mark.parametrize("content", [ManifestContent.DATA, ManifestContent.DELETES])
def test_existing_records_copy_what_the_driver_rewrites(content: ManifestContent, skimmed: bool, monkeypatch) -> None:
    """Entries copied as encoded EXISTING records read back as the driver's rewrite of them:
    inheritance made explicit, DELETED entries dropped, every data_file field and partition type
    kept, the file format upper-cased; the new manifest's counts and summaries are the same.  Both
    readers: the generated one and fastavro's, used for schemas the generator refuses."""
    monkeypatch.setattr(manifest_copy_module, "_COPY_PLANS", {})
    if not skimmed:
        monkeypatch.setattr(manifest_copy_module, "_copy_skimmer", lambda stripped: None)
    mio = MemIO()
    kind = FileContent.DATA if content == ManifestContent.DATA else FileContent.EQUALITY_DELETES
    files = [("add", _full_file(kind, 2, PARTITION), None, None),
             ("delete", _full_file(kind, 2, NULL_PARTITION, file_path="s3://bucket/t/data/gone.parquet"), 2, 2),
             ("existing", _full_file(kind, 2, NULL_PARTITION, file_path="s3://bucket/t/data/b.parquet"), 3, 4),
             ("add", _full_file(kind, 2, PARTITION, file_path="s3://bucket/t/data/c.parquet", nan_value_counts=None), 5, None)]
    path = "s3://bucket/t/metadata/source.avro"
    source = replace(_write(mio, 2, content, files, path), sequence_number=7, min_sequence_number=2)
    _lower_case_formats(mio, path)
    copied = _copied(mio, source, 2, content, "s3://bucket/t/metadata/copied.avro")
    driver = _rewritten_by_driver(mio, source, 2, content, "s3://bucket/t/metadata/driver.avro")
    assert replace(copied, manifest_path="", manifest_length=0) == replace(driver, manifest_path="", manifest_length=0)
    got = list(read_manifest(mio, copied, specs={SPEC.spec_id: SPEC}))
    assert got == list(read_manifest(mio, driver, specs={SPEC.spec_id: SPEC}))
    assert [(e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number) for e in got] == [
        (ManifestEntryStatus.EXISTING, 55, 7, 7), (ManifestEntryStatus.EXISTING, 44, 3, 4),
        (ManifestEntryStatus.EXISTING, 55, 5, 7)]
    raw = list(fastavro.reader(io.BytesIO(mio.files[copied.manifest_path])))
    assert [r["data_file"]["file_format"] for r in raw] == ["PARQUET"] * 3
    assert fastavro.reader(io.BytesIO(mio.files[copied.manifest_path])).writer_schema == \
        fastavro.reader(io.BytesIO(mio.files[driver.manifest_path])).writer_schema
    assert read_manifest_metadata(mio, copied.manifest_path) == read_manifest_metadata(mio, driver.manifest_path)


def _with_block_size(mio: MemIO, path: str, block_size: int) -> None:
    reader = fastavro.reader(io.BytesIO(mio.files[path]))
    records = list(reader)
    for r in records:
        r["data_file"]["block_size_in_bytes"] = block_size
    meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    buf = io.BytesIO()
    fastavro.writer(buf, reader.writer_schema, records, codec="deflate", metadata=meta)
    mio.files[path] = buf.getvalue()


def test_existing_records_copy_v1_entries_as_the_driver_rewrites_them() -> None:
    """v1 entries are copied too: the snapshot id made explicit, DELETED entries dropped, every
    data_file field kept but the file format (upper-cased) and the deprecated block size (written
    as the writer writes it); the result reads back, and encodes, as the driver's rewrite."""
    mio = MemIO()
    files = [("add", _full_file(FileContent.DATA, 1, PARTITION), None, None),
             ("delete", _full_file(FileContent.DATA, 1, NULL_PARTITION, file_path="s3://bucket/t/data/gone.parquet"), None, None),
             ("existing", _full_file(FileContent.DATA, 1, NULL_PARTITION, file_path="s3://bucket/t/data/b.parquet"), None, None),
             ("add", _full_file(FileContent.DATA, 1, PARTITION, file_path="s3://bucket/t/data/c.parquet", nan_value_counts=None), None, None)]
    path = "s3://bucket/t/metadata/source-v1.avro"
    source = replace(_write(mio, 1, ManifestContent.DATA, files, path), sequence_number=0, min_sequence_number=0)
    _lower_case_formats(mio, path)
    _with_block_size(mio, path, 12345)
    copied = _copied(mio, source, 1, ManifestContent.DATA, "s3://bucket/t/metadata/copied.avro")
    assert copied is not None
    driver = _rewritten_by_driver(mio, source, 1, ManifestContent.DATA, "s3://bucket/t/metadata/driver.avro")
    assert replace(copied, manifest_path="", manifest_length=0) == replace(driver, manifest_path="", manifest_length=0)
    got = list(read_manifest(mio, copied, specs={SPEC.spec_id: SPEC}))
    assert got == list(read_manifest(mio, driver, specs={SPEC.spec_id: SPEC}))
    assert [(e.status, e.snapshot_id, e.data_file.file_path) for e in got] == [
        (ManifestEntryStatus.EXISTING, 55, _full_file(FileContent.DATA, 1, PARTITION).file_path),
        (ManifestEntryStatus.EXISTING, 44, "s3://bucket/t/data/b.parquet"),
        (ManifestEntryStatus.EXISTING, 55, "s3://bucket/t/data/c.parquet")]
    raw = list(fastavro.reader(io.BytesIO(mio.files[copied.manifest_path])))
    assert raw == list(fastavro.reader(io.BytesIO(mio.files[driver.manifest_path])))
    assert [(r["data_file"]["file_format"], r["data_file"]["block_size_in_bytes"]) for r in raw] == \
        [("PARQUET", DEFAULT_BLOCK_SIZE)] * 3
    assert read_manifest_metadata(mio, copied.manifest_path) == read_manifest_metadata(mio, driver.manifest_path)


def test_existing_records_refuse_what_they_cannot_copy() -> None:
    """Other format versions and schemas that encode differently are left to read_manifest."""
    mio = MemIO()
    for version in (3,):
        m = _write(mio, version, ManifestContent.DATA, [("add", _full_file(FileContent.DATA, version, PARTITION), None, None)],
                   f"s3://bucket/t/metadata/v{version}.avro")
        target = ManifestWriter(mio, "unused", SPEC, SCHEMA, version).avro_schema
        assert existing_records(mio, m, target, version) is None
    m = _write(mio, 2, ManifestContent.DATA, [("add", _full_file(FileContent.DATA, 2, PARTITION), None, None)])
    other_spec = PartitionSpec(2, SPEC.fields[:-1])  # one partition field fewer
    assert existing_records(mio, m, ManifestWriter(mio, "unused", other_spec, SCHEMA, 2).avro_schema, 2) is None
    assert existing_records(mio, m, ManifestWriter(mio, "unused", SPEC, SCHEMA, 2).avro_schema, 2) is not None


@pytest.mark.parametrize("version", [1, 2, 3])
def test_live_paths_skim_what_the_full_reader_decodes(version: int, monkeypatch) -> None:
    # garbage collection's reader keeps status, content and path of each entry and skips the rest of
    # the bytes; the fastavro projection stands in for a schema the skimmer refuses: both must give
    # the full reader's live entries, in order
    mio = MemIO()
    contents = [FileContent.DATA] if version == 1 else list(FileContent)
    for content in contents:
        mcontent = ManifestContent.DATA if content == FileContent.DATA else ManifestContent.DELETES
        files = [_full_file(content, version, PARTITION if i % 2 else NULL_PARTITION,
                            file_path=f"s3://bucket/t/data/{int(content)}-{i}-\u00e9.parquet") for i in range(5)]
        path = f"s3://bucket/t/metadata/live-{int(content)}.avro"
        m = _write(mio, version, mcontent, [("add", files[0], None, None), ("delete", files[1], 3, 4),
                                            ("existing", files[2], 3, 4), ("delete", files[3], 3, 4),
                                            ("add", files[4], None, None)], path)
        full = [(e.data_file.file_path, e.data_file.content) for e in read_manifest(mio, m, skip_deleted=True)]
        assert [p.split("/")[-1] for p, _ in full] == [f"{int(content)}-{i}-\u00e9.parquet" for i in (0, 2, 4)]
        assert {c for _, c in full} == {content}
        assert list(manifest_live_paths(mio, m)) == full
        with monkeypatch.context() as mp:
            mp.setattr(live_paths_module, "compile_skimmer", lambda *a: None)
            mp.setattr(live_paths_module, "_LIVE_PATH_SKIMMERS", {})
            assert list(manifest_live_paths(mio, m)) == full


def test_live_paths_of_a_corrupt_manifest_name_the_file() -> None:
    mio = MemIO()
    f = _full_file(FileContent.DATA, 2, PARTITION)
    m = _write(mio, 2, ManifestContent.DATA, [("add", f, None, None)] * 3)
    data = mio.files[m.manifest_path]
    # the records cut short inside an uncompressed copy: the skimmer runs past the block's end
    records = list(fastavro.reader(io.BytesIO(data)))
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(json.loads(fastavro.reader(io.BytesIO(data)).metadata["avro.schema"])),
                    records, codec="null")
    raw = bytearray(out.getvalue())
    block_end = len(raw) - 16
    raw[block_end - 40:block_end] = b"\xff" * 40
    mio.files[m.manifest_path] = bytes(raw)
    with pytest.raises(InvalidMetadataError) as err:
        list(manifest_live_paths(mio, m))
    assert err.value.location == m.manifest_path


def test_manifest_list_rows_one_at_a_time_check_the_end_after_the_last() -> None:
    from procedures.spec.manifest.manifest_list import (
        decode_manifest_list_head, iter_manifest_list_rows, read_encoded_manifest_list,
    )

    mio = MemIO()
    ms = [_write(mio, 2, ManifestContent.DATA, [("add", _full_file(FileContent.DATA, 2, PARTITION), None, None)],
                 f"s3://bucket/t/metadata/r{i}.avro") for i in range(3)]
    write_manifest_list(mio, "s3://bucket/t/metadata/snap.avro", 2, 55, None, 1, None, ms)
    enc = read_encoded_manifest_list(mio, "s3://bucket/t/metadata/snap.avro")
    rows = list(iter_manifest_list_rows(enc, len(enc.records), enc.count))
    assert rows == decode_manifest_list_head(enc, len(enc.records), enc.count)
    assert [m.manifest_path for m in rows] == [m.manifest_path for m in ms]
    got = []
    with pytest.raises(InvalidMetadataError, match="rows end at byte"):
        for m in iter_manifest_list_rows(enc, len(enc.records), 2):
            got.append(m)
    assert len(got) == 2  # the rows came first, the error after the last


def _entries_spread(n: int) -> list[tuple[str, DataFile, int | None, int | None]]:
    """``n`` entries of every status whose partitions move each summary (signed zeros, NaN, nulls)."""
    base = _full_file(FileContent.DATA, 2, NULL_PARTITION)
    floats = (1.5, -0.0, float("nan"), 0.0, None, -7.25)
    out = []
    for i in range(n):
        p = (Decimal(f"{i % 17}.05"), None if i % 5 else U1, 17000 + i % 11, floats[i % len(floats)], f"k{i % 7}",
             None, i, bytes([i % 256]), b"abc", i * 3, None if i % 4 else i)
        f = _with(base, file_path=f"s3://b/data/{i}.parquet", partition=p, record_count=i + 1)
        status = ("add", "existing", "delete")[i % 3]
        out.append((status, f, None if status == "add" else 100 - i % 50, 200 - i % 50))
    return out


@pytest.mark.parametrize("codec", ["deflate", "zstd", "snappy", "null"])
def test_manifest_written_in_parts_equals_the_manifest_written_whole(codec: str) -> None:
    """Several writers sharing a sync marker each encode a run of the entries; joining their parts
    (and the joining writer's own entries after them) gives the manifest one writer gives: the same
    entries in order, counts, rows, partition summaries and minimum sequence number."""
    mio = MemIO()
    files = _entries_spread(3000)
    whole = ManifestWriter(mio, "s3://b/whole.avro", SPEC, SCHEMA, 2, ManifestContent.DATA, 55, codec=codec)
    _write_into(whole, files)
    expected = whole.close()
    sync = b"0123456789abcdef"
    runs = [files[:1000], files[1000:1001], [], files[1001:2900]]
    parts = []
    for i, run in enumerate(runs):
        w = ManifestWriter(mio, f"s3://b/unused-{i}.avro", SPEC, SCHEMA, 2, ManifestContent.DATA, 55, codec=codec,
                           sync_marker=sync)
        _write_into(w, run)
        parts.append(w.close_part())
        assert w.close_part() is parts[-1]  # idempotent
    assert [p.entries for p in parts] == [1000, 1, 0, 1899]
    assert not any(path.startswith("s3://b/unused") for path in mio.files)  # parts write no file
    joiner = ManifestWriter(mio, "s3://b/joined.avro", SPEC, SCHEMA, 2, ManifestContent.DATA, 55, codec=codec,
                            sync_marker=sync)
    _write_into(joiner, files[2900:])
    joined = joiner.close_parts(parts)
    assert joined.manifest_length == len(mio.files["s3://b/joined.avro"])
    assert replace(joined, manifest_path="", manifest_length=0) == replace(expected, manifest_path="", manifest_length=0)
    assert joined.partitions[3] == FieldSummary(True, True, struct.pack("<d", -7.25), struct.pack("<d", 1.5))
    specs = {SPEC.spec_id: SPEC}
    # compared as text: NaN partition values are not equal to themselves
    assert [repr(e) for e in read_manifest(mio, replace_seq(joined, 300), specs=specs)] == \
        [repr(e) for e in read_manifest(mio, replace_seq(expected, 300), specs=specs)]
    raw = fastavro.reader(io.BytesIO(mio.files["s3://b/joined.avro"]))
    assert sum(1 for _ in raw) == 3000 and raw.metadata == fastavro.reader(io.BytesIO(mio.files["s3://b/whole.avro"])).metadata


def test_manifest_parts_refuse_what_cannot_join() -> None:
    mio = MemIO()
    f = _full_file(FileContent.DATA, 2, PARTITION)
    with pytest.raises(ValidationError, match="sync marker is 16 bytes"):
        ManifestWriter(mio, "s3://b/m.avro", SPEC, SCHEMA, 2, sync_marker=b"short")
    w = ManifestWriter(mio, "s3://b/m.avro", SPEC, SCHEMA, 2)
    w.add(f)
    with pytest.raises(ValidationError, match="sync marker they share"):
        w.close_part()
    with pytest.raises(ValidationError, match="sync marker they were framed with"):
        w.close_parts([])
    sync = bytes(range(16))
    w = ManifestWriter(mio, "s3://b/m.avro", SPEC, SCHEMA, 2, sync_marker=sync)
    w.add(f)
    part = w.close_part()
    with pytest.raises(ValidationError, match="already closed"):
        w.add(f)
    with pytest.raises(ValidationError, match="closed as a part"):
        w.close()
    one_field = PartitionSpec(0, (_pf(5, 1000, "identity", "f"),))
    other = ManifestWriter(mio, "s3://b/other.avro", one_field, SCHEMA, 2, sync_marker=sync)
    with pytest.raises(ValidationError, match="11 partition fields cannot join"):
        other.close_parts([part])
    assert "s3://b/other.avro" not in mio.files and "s3://b/m.avro" not in mio.files


def test_avro_block_compression_keeps_each_level_apart() -> None:
    """The pyarrow codecs are built once per (codec, level): a level asked for is the level used."""
    from procedures.spec import avro_codecs

    block = b"".join(f"s3://bucket/table/data/part-{i:05d}-{i * 7919 % 10007}.parquet".encode() for i in range(3000))
    fast, small = (avro_codecs.compress_block("zstandard", block, level) for level in (1, 19))
    assert len(small) < len(fast)
    assert avro_codecs.compress_block("zstandard", block, 1) == fast
    for payload in (fast, small, avro_codecs.compress_block("zstandard", block, None)):
        assert avro_codecs.zstd_decompress(payload) == block


# ------------------------------------------------------------------ edges found by mutation testing
ONE_FIELD = PartitionSpec(0, (_pf(5, 1000, "identity", "f"),))


def _one(i: int, value, rows: int = 1) -> DataFile:
    return DataFile(f"s3://b/{i}.parquet", FileFormat.PARQUET, (value,), rows, 1)


def test_parts_join_flags_counts_and_bounds_of_every_part() -> None:
    """Parts that differ from each other: a null and a NaN only in the first part, the bounds in
    the middle one, existing files only in one part."""
    mio = MemIO()
    sync = bytes(range(16))
    runs = [[("add", _one(0, None), None, None), ("add", _one(1, float("nan")), None, None)],
            [("existing", _one(2, -3.0, 5), 4, 4), ("existing", _one(3, 9.0, 6), 2, 3)],
            [("add", _one(4, 1.0, 7), None, None), ("delete", _one(5, 100.0, 8), 1, 1)]]
    parts = []
    for i, run in enumerate(runs):
        w = ManifestWriter(mio, f"s3://b/p{i}.avro", ONE_FIELD, SCHEMA, 2, ManifestContent.DATA, 55, sync_marker=sync)
        _write_into(w, run)
        parts.append(w.close_part())
    assert [(p.files, p.rows) for p in parts] == [((0, 2, 0), (0, 2, 0)), ((2, 0, 0), (11, 0, 0)),
                                                  ((0, 1, 1), (0, 7, 8))]
    joined = ManifestWriter(mio, "s3://b/j.avro", ONE_FIELD, SCHEMA, 2, ManifestContent.DATA, 55,
                            sync_marker=sync).close_parts(parts)
    whole = ManifestWriter(mio, "s3://b/w.avro", ONE_FIELD, SCHEMA, 2, ManifestContent.DATA, 55)
    _write_into(whole, [e for run in runs for e in run])
    expected = whole.close()
    assert joined.partitions == expected.partitions == (
        FieldSummary(True, True, struct.pack("<d", -3.0), struct.pack("<d", 100.0)),)
    assert (joined.added_files_count, joined.existing_files_count, joined.deleted_files_count, joined.added_rows_count,
            joined.existing_rows_count, joined.deleted_rows_count, joined.min_sequence_number) == (3, 2, 1, 9, 11, 8, 2)
    # the last part without a null or NaN does not clear the flags of the first
    rev = ManifestWriter(mio, "s3://b/r.avro", ONE_FIELD, SCHEMA, 2, ManifestContent.DATA, 55,
                         sync_marker=sync).close_parts([parts[0], parts[2]])
    assert rev.partitions[0].contains_null and rev.partitions[0].contains_nan


def test_the_writer_keeps_its_codec_level_and_sync_marker() -> None:
    mio = MemIO()
    files = _entries_spread(600)
    sizes = {}
    for sync in (None, bytes(range(16))):
        for level in (1, 19):
            path = f"s3://b/{level}-{sync is None}.avro"
            w = ManifestWriter(mio, path, SPEC, SCHEMA, 2, ManifestContent.DATA, 55, codec="zstd",
                               compression_level=level, sync_marker=sync)
            _write_into(w, files)
            sizes[(sync is None, level)] = w.close().manifest_length
            if sync is not None:
                assert mio.files[path][-16:] == sync  # every block ends with the given marker
    assert sizes[(True, 19)] < sizes[(True, 1)] and sizes[(False, 19)] < sizes[(False, 1)]
    part_sizes = []
    for level in (1, 19):
        w = ManifestWriter(mio, "s3://b/x.avro", SPEC, SCHEMA, 2, codec="zstd", compression_level=level,
                           sync_marker=bytes(16))
        _write_into(w, files)
        part_sizes.append(len(w.close_part().blocks))
        joiner = ManifestWriter(mio, f"s3://b/j{level}.avro", SPEC, SCHEMA, 2, codec="zstd", compression_level=level,
                                sync_marker=bytes(16))
        _write_into(joiner, files)
        part_sizes.append(joiner.close_parts([]).manifest_length)
    assert part_sizes[2] < part_sizes[0] and part_sizes[3] < part_sizes[1]


def test_what_java_writes_into_entries_and_header() -> None:
    mio = MemIO()
    f = _full_file(FileContent.DATA, 2, PARTITION)
    m = _write(mio, 2, ManifestContent.DATA, [("add", f, None, None), ("delete", _with(f, file_path="s3://b/d"), 2, 2)],
               snapshot_id=55)
    raw = fastavro.reader(io.BytesIO(mio.files[m.manifest_path]))
    assert [r["snapshot_id"] for r in raw] == [55, 55]  # written, not left to inheritance
    assert raw.metadata["content"] == "data"
    for key in ("schema", "partition-spec"):  # compact JSON, as Java's parsers write it
        assert raw.metadata[key] == json.dumps(json.loads(raw.metadata[key]), separators=(",", ":"))
    m1 = _write(mio, 1, ManifestContent.DATA, [("add", _full_file(FileContent.DATA, 1, PARTITION), None, None)],
                path="s3://b/v1.avro")
    assert "content" not in read_manifest_metadata(mio, m1.manifest_path)
    # v3: a delete file's first_row_id is not written (Java keeps it for data files only)
    dv = _full_file(FileContent.POSITION_DELETES, 3, PARTITION, first_row_id=5)
    m3 = _write(mio, 3, ManifestContent.DELETES, [("add", dv, None, None)], path="s3://b/v3.avro")
    [rec] = fastavro.reader(io.BytesIO(mio.files[m3.manifest_path]))
    assert rec["data_file"]["first_row_id"] is None


def test_key_metadata_reaches_the_manifest_list_row() -> None:
    mio = MemIO()
    w = ManifestWriter(mio, "s3://b/m.avro", SPEC, SCHEMA, 2, ManifestContent.DATA, 1, key_metadata=b"\x07key")
    w.add(_full_file(FileContent.DATA, 2, PARTITION))
    m = w.close()
    assert m.key_metadata == b"\x07key"
    write_manifest_list(mio, "s3://b/l.avro", 2, 1, None, 3, None, [m])
    assert read_manifest_list(mio, "s3://b/l.avro")[0].key_metadata == b"\x07key"


def test_writer_refusals_say_what_is_wrong() -> None:
    mio = MemIO()
    with pytest.raises(ValidationError, match="^s3://b/m.avro: format version 1 has no delete manifests$"):
        ManifestWriter(mio, "s3://b/m.avro", SPEC, SCHEMA, 1, ManifestContent.DELETES)
    w = ManifestWriter(mio, "s3://b/m.avro", SPEC, SCHEMA, 2, ManifestContent.DATA, 1)
    f = _full_file(FileContent.DATA, 2, PARTITION)
    with pytest.raises(ValidationError, match="^s3://b/m.avro: DELETED entry for s3://bucket/t/data/a.parquet needs an "
                                              "explicit data sequence number; only ADDED entries may inherit it$"):
        w.delete(f, None, None)
    with pytest.raises(ValidationError, match=r"^s3://b/m.avro: partition \(1,\) of s3://bucket/t/data/a.parquet has "
                                              r"1 values, spec 2 has 11 fields$"):
        w.add(_with(f, partition=(1,)))
    with pytest.raises(ValidationError, match=r"^s3://b/m.avro: partition \(1,\) of an encoded entry has 1 values"):
        w.existing_encoded(b"", (1,), 1, 3)
    with pytest.raises(ValidationError, match="^s3://b/m.avro: an EXISTING entry needs an explicit data sequence number$"):
        w.existing_encoded(b"", PARTITION, 1, None)
    # v1 has no sequence numbers: an encoded EXISTING entry needs none
    v1 = ManifestWriter(mio, "s3://b/v1.avro", ONE_FIELD, SCHEMA, 1, ManifestContent.DATA, 1)
    v1.existing_encoded(b"", (1.0,), 1, None)
    assert v1.close().existing_files_count == 1


def test_a_manifest_is_never_written_over_an_existing_file() -> None:
    mio = MemIO()
    mio.files["s3://b/m.avro"] = b"someone else's"
    w = ManifestWriter(mio, "s3://b/m.avro", SPEC, SCHEMA, 2, ManifestContent.DATA, 1)
    w.add(_full_file(FileContent.DATA, 2, PARTITION))
    with pytest.raises(FileExistsError):
        w.close()
    assert mio.files["s3://b/m.avro"] == b"someone else's"


def test_a_failure_inside_the_with_block_writes_no_manifest() -> None:
    mio = MemIO()
    with pytest.raises(RuntimeError, match="task failed"):
        with ManifestWriter(mio, "s3://b/m.avro", SPEC, SCHEMA, 2, ManifestContent.DATA, 1) as w:
            w.add(_full_file(FileContent.DATA, 2, PARTITION))
            raise RuntimeError("task failed")
    assert mio.files == {}
    with ManifestWriter(mio, "s3://b/ok.avro", SPEC, SCHEMA, 2, ManifestContent.DATA, 1) as w:
        w.add(_full_file(FileContent.DATA, 2, PARTITION))
    assert "s3://b/ok.avro" in mio.files


def _one_record_short(data: bytes) -> tuple[bytes, int]:
    """``data`` (an uncompressed manifest of one block of 2 entries) with the block's count lowered to
    1, and the byte length of its second entry: what a reader trusting the count would leave."""
    reader = fastavro.reader(io.BytesIO(data))
    parsed = fastavro.parse_schema(reader.writer_schema)
    head = data.index(data[-16:]) + 16  # the header ends with the sync marker every block ends with
    assert data[head] == 4  # zigzag 2: the count of the only block
    [block] = fastavro.block_reader(io.BytesIO(data))
    buf = block.bytes_.getvalue()
    fo = io.BytesIO(buf)
    fastavro.schemaless_reader(fo, parsed, None)
    return data[:head] + b"\x02" + data[head + 1:], len(buf) - fo.tell()


def test_a_block_with_more_bytes_than_its_count_is_corrupt() -> None:
    """The skimming reads check that a block's records end where its bytes do, and say by how much
    they do not (a count that lost an entry would otherwise drop it silently), once: the error is
    not wrapped again on its way out."""
    mio = MemIO()
    f = _full_file(FileContent.DATA, 2, PARTITION)
    w = ManifestWriter(mio, "s3://b/m.avro", SPEC, SCHEMA, 2, ManifestContent.DATA, 1, codec="null")
    w.add(f)
    w.add(_with(f, file_path="s3://b/other.parquet"))
    m = replace_seq(w.close(), 3)
    mio.files[m.manifest_path], rest = _one_record_short(mio.files[m.manifest_path])
    message = rf"^s3://b/m.avro: corrupt manifest \(ValueError: a block holds {rest} bytes past its 1 records\)$"
    for keep in (None, lambda metrics: True, lambda metrics: False):
        with pytest.raises(InvalidMetadataError, match=message):
            list(read_manifest_where(mio, m, [1], keep))


def test_partition_values_in_the_logical_types_other_writers_use() -> None:
    """Avro's decimal scale defaults to 0 when the schema leaves it out, and a uuid may be a
    ``string`` (its text) as well as a ``fixed[16]``: both read as our values."""
    partition = {"type": "record", "name": "r102", "fields": [
        {"name": "d", "field-id": 1000, "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 9}]},
        {"name": "u", "field-id": 1001, "type": ["null", {"type": "string", "logicalType": "uuid"}]},
        {"name": "f", "field-id": 1002, "type": ["null", "fx16"]}]}
    df_schema = {"type": "record", "name": "r2", "fields": [{"name": "partition", "field-id": 102, "type": partition}]}
    get = partition_tuple_getter(df_schema, None, {"fx16": {"type": "fixed", "name": "fx16", "size": 16,
                                                            "logicalType": "uuid"}})
    assert get({"d": b"\x7d", "u": str(U1), "f": U1.bytes}) == (Decimal(125), U1, U1)
    assert str(get({"d": b"\xff\x38", "u": None, "f": None})[0]) == "-200"
    assert get({"d": None, "u": None, "f": None}) == (None, None, None)
    # the partition struct is found by its field id whatever its name, or by its name without an id
    renamed = {"type": "record", "name": "r2", "fields": [
        {"name": "x", "field-id": 100, "type": "string"}, {"name": "p", "field-id": 102, "type": partition}]}
    assert partition_tuple_getter(renamed, None, {})({"d": b"\x01", "u": None, "f": None}) == (Decimal(1), None, None)
    unnumbered = {"type": "record", "name": "r2", "fields": [{"name": "partition", "type": partition}]}
    assert partition_tuple_getter(unnumbered, None, {})({"d": b"\x01", "u": None, "f": None}) == (Decimal(1), None, None)


def _rewritten(mio: MemIO, path: str, change) -> None:
    """Rewrite the manifest at ``path`` through fastavro with ``change`` applied to its first record."""
    reader = fastavro.reader(io.BytesIO(mio.files[path]))
    records = list(reader)
    change(records[0])
    buf = io.BytesIO()
    fastavro.writer(buf, reader.writer_schema, records, metadata={k: v for k, v in reader.metadata.items()
                                                                  if not k.startswith("avro.")})
    mio.files[path] = buf.getvalue()


def test_entries_a_manifest_cannot_hold_name_the_file() -> None:
    mio = MemIO()
    m = _write(mio, 2, ManifestContent.DATA, [("add", _full_file(FileContent.DATA, 2, PARTITION), None, None)])
    m = replace_seq(m, 3)
    _rewritten(mio, m.manifest_path, lambda r: r.update(status=7))
    with pytest.raises(InvalidMetadataError, match=r"^s3://bucket/t/metadata/m.avro: corrupt manifest \(IndexError: "):
        list(read_manifest(mio, m))
    schema = {"type": "record", "name": "manifest_entry", "fields": [{"name": "status", "type": "int", "field-id": 0}]}
    buf = io.BytesIO()
    fastavro.writer(buf, schema, [{"status": 1}])
    mio.files["s3://b/odd.avro"] = buf.getvalue()
    with pytest.raises(InvalidMetadataError, match=r"^s3://b/odd.avro: manifest schema has no data_file field \(id 2\)$"):
        list(read_manifest(mio, ManifestFile("s3://b/odd.avro", 1, 0)))


def test_delete_files_never_inherit_row_ids() -> None:
    """First row ids are for data files: a delete manifest with a first_row_id (not one Java writes)
    gives its files none."""
    mio = MemIO()
    dv = _full_file(FileContent.POSITION_DELETES, 3, PARTITION)
    m = _write(mio, 3, ManifestContent.DELETES, [("add", dv, None, None)])
    [e] = read_manifest(mio, replace(replace_seq(m, 3), first_row_id=100))
    assert e.data_file.first_row_id is None


def test_partition_fields_the_file_lacks_read_as_null() -> None:
    """Ordered by a table spec with a field the file's partition struct lacks, that value is null."""
    partition = {"type": "record", "name": "r102", "fields": [
        {"name": "a", "field-id": 1000, "type": ["null", "int"]}, {"name": "b", "field-id": 1001, "type": ["null", "int"]}]}
    df_schema = {"type": "record", "name": "r2", "fields": [{"name": "partition", "field-id": 102, "type": partition}]}
    evolved = PartitionSpec(0, (_pf(1, 1001, "identity", "b"), _pf(1, 1005, "identity", "new"),
                                _pf(1, 1000, "identity", "a")))
    assert partition_tuple_getter(df_schema, evolved, {})({"a": 1, "b": 2}) == (2, None, 1)
    only_new = PartitionSpec(0, (_pf(1, 1005, "identity", "new"),))
    assert partition_tuple_getter(df_schema, only_new, {})({"a": 1, "b": 2}) == (None,)


def test_unpartitioned_entries_read_back_with_an_empty_partition() -> None:
    mio = MemIO()
    w = ManifestWriter(mio, "s3://b/m.avro", UNPARTITIONED_SPEC, SCHEMA, 2, ManifestContent.DATA, 1)
    w.add(DataFile("s3://b/x", FileFormat.PARQUET, (), 1, 1))
    m = replace_seq(w.close(), 1)
    assert [e.data_file.partition for e in read_manifest(mio, m)] == [()]
    assert [e.data_file.partition for e in read_manifest_where(mio, m, [1], None)] == [()]
