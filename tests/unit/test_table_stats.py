"""compute_table_stats and compute_partition_stats without Spark: theta hashing and the compact
sketch layout, column validation, the Puffin blob layout, partition counts from manifests and the
partition statistics file, and the driver path of both procedures on a hadoop table."""

from __future__ import annotations

import os
import struct
import uuid
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.operations import DeleteFiles, FastAppend, RowDelta
from procedures.core.kernel.scan import unified_partition_type
from procedures.core.table_stats.partition_counts import aggregate_entries, count_partitions as counts
from procedures.core.table_stats.partition_counts import partition_stats_schema
from procedures.core.table_stats.statistics_files import stats_columns
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.errors import MissingDependencyError, NoSuchSnapshotError, ValidationError
from procedures.io.arrow_schema import schema_to_arrow
from procedures.io.fileio import FileIO
from procedures.io.parquet_writer import ParquetFileWriter, WriteSettings
from procedures.io.stats_files import ThetaBlob, write_partition_stats, write_statistics_file
from tests.helpers import capability_actions as CTS
from tests.helpers.capability_actions import compute_partition_stats
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.puffin import read_puffin
from procedures.spec.schema import Schema
from procedures.spec.transforms import parse_transform
from procedures.spec.theta import MAX_THETA, HashSketch, compact_sketch_bytes, seed_hash, sketch_input, value_hash
from procedures.spec.types import (
    DATE, INT, LONG, STRING, TIMESTAMP_NS, UUID, DecimalType, ListType, NestedField, StructType,
)
from tests.helpers.references import import_reference

FAST = RetryPolicy(num_retries=2, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=60_000)
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "data", STRING), NestedField(3, "p", INT),
                 NestedField(4, "st", StructType((NestedField(5, "x", INT),))),
                 NestedField(6, "l", ListType(7, INT)), NestedField(8, "ns", TIMESTAMP_NS)))
SPEC = PartitionSpec(0, (PartitionField(3, 1000, parse_transform("identity"), "p"),))


# ------------------------------------------------------------------------------ theta
def test_hash_is_murmur3_x64_128_seed_9001_shifted():
    # the single retained hash of DataSketches' sketch of the long 5 (seed 9001), from its serialized bytes
    assert value_hash(struct.pack("<q", 5)) == struct.unpack("<Q", bytes.fromhex("bd3273724691cc14"))[0]
    assert seed_hash() == 37836


def test_sketch_input_is_the_single_value_form_spark_hands_java():
    assert sketch_input(7, INT) == struct.pack("<i", 7)
    assert sketch_input(19724, DATE) == struct.pack("<i", 19724)
    assert sketch_input(Decimal("1.25"), DecimalType(10, 2)) == bytes([125])
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert sketch_input(u, UUID) == sketch_input(u.bytes, UUID) == str(u).encode()  # Spark reads uuids as strings


def test_compact_sketch_layout():
    assert compact_sketch_bytes([], MAX_THETA, 37836) == bytes.fromhex("01030300001ecc93")
    exact = compact_sketch_bytes([5, 9], MAX_THETA, 37836)
    assert exact[:8] == bytes.fromhex("02030300001acc93") and struct.unpack("<II", exact[8:16]) == (2, 0)
    assert struct.unpack("<2q", exact[16:]) == (5, 9)
    est = compact_sketch_bytes([5], 100, 37836)
    assert est[0] == 3 and struct.unpack("<q", est[16:24]) == (100,) and struct.unpack("<q", est[24:]) == (5,)


def test_hash_sketch_matches_datasketches():
    ds = import_reference("datasketches")
    for n in (0, 1, 100, 3000):
        mine, ref = HashSketch(), ds.update_theta_sketch()
        mine.update_all([*range(n), None], LONG)
        mine.update_all(["", "a"], STRING)
        for v in range(n):
            ref.update(v)
        ref.update("a")
        assert ds.compact_theta_sketch.deserialize(mine.compact_bytes()).serialize() == ref.compact().serialize()
    big = HashSketch()
    big.update_all(range(50_000), LONG)
    sketch = ds.compact_theta_sketch.deserialize(big.compact_bytes())
    assert sketch.is_estimation_mode() and sketch.num_retained == 4096
    assert sketch.get_lower_bound(3) <= 50_000 <= sketch.get_upper_bound(3)


def test_seed_hash_matches_datasketches_for_any_seed():
    ds = import_reference("datasketches")
    for seed in (9001, 1, -5, -(1 << 63)):  # Java's seed is a long; the C++ library takes its 64 bits
        ref = ds.update_theta_sketch(12, 1.0, seed % (1 << 64))
        ref.update(1)
        assert struct.unpack_from("<H", ref.compact().serialize(), 6)[0] == seed_hash(seed)


def test_hash_sketch_keeps_the_k_smallest_like_a_trimmed_datasketches_sketch():
    """At and just past k distinct values, and far past it: the k smallest hashes and the next one as
    theta, as DataSketches keeps them once trimmed to its nominal k."""
    ds = import_reference("datasketches")
    for n in (4096, 4097, 20_000):
        mine, ref = HashSketch(), ds.update_theta_sketch()
        mine.update_all(range(n), LONG)
        for v in range(n):
            ref.update(v)
        ref.trim()
        assert mine.compact_bytes() == ref.compact().serialize()
        assert ds.compact_theta_sketch.deserialize(mine.compact_bytes()).is_estimation_mode() == (n > 4096)


def test_a_hash_at_theta_is_not_kept():
    """DataSketches drops a hash equal to theta (no hash is ever at or above it)."""
    sketch = HashSketch()
    sketch.update_hash(MAX_THETA)
    assert sketch.compact_bytes() == compact_sketch_bytes([], MAX_THETA, seed_hash())
    small = HashSketch(lg_k=1)
    for h in (5, 1, 4, 2, 3):
        small.update_hash(h)
    assert small.compact_bytes() == compact_sketch_bytes([1, 2], 3, seed_hash())
    small.update_hash(3)
    assert small.compact_bytes() == compact_sketch_bytes([1, 2], 3, seed_hash())


# ------------------------------------------------------------------------------ columns
def test_stats_columns_rules():
    assert [c.name for c in stats_columns(SCHEMA, None)] == ["id", "data", "p"]
    assert [c.field.field_id for c in stats_columns(SCHEMA, ["data", "st.x", "data"])] == [2, 5]
    for cols, msg in ([[], "Columns cannot be null/empty"], [["nope"], "Can't find column nope"],
                      [["l"], r"non-primitive type column: l \(list<int>\)"], [["st"], "non-primitive"],
                      [["ns"], "ns of type timestamp_ns"]):
        with pytest.raises(ValidationError, match=msg):
            stats_columns(SCHEMA, cols)
    with pytest.raises(ValidationError, match="No columns found"):
        stats_columns(Schema((NestedField(1, "st", StructType((NestedField(2, "x", INT),))),)), None)


# ------------------------------------------------------------------------------ files
def test_puffin_blob_layout(tmp_path):
    io = FileIO()
    path = str(tmp_path / "1-x.stats")
    stats = write_statistics_file(io, path, 11, 3, [ThetaBlob(1, b"abc", 7), ThetaBlob(2, b"de", 2)],
                                  blob_type="apache-datasketches-theta-v1", ndv_property="ndv", created_by="me")
    assert stats.file_size_in_bytes == os.path.getsize(path)
    puffin = read_puffin(io, path)
    assert stats.file_footer_size_in_bytes == puffin.footer_size
    assert puffin.properties == {"created-by": "me"}
    assert [(b.type, b.fields, b.snapshot_id, b.sequence_number, b.properties) for b in puffin.blobs] == [
        ("apache-datasketches-theta-v1", (1,), 11, 3, {"ndv": "7"}),
        ("apache-datasketches-theta-v1", (2,), 11, 3, {"ndv": "2"})]
    assert [puffin.read_blob(b) for b in puffin.blobs] == [b"abc", b"de"]
    assert [(b.fields, b.properties) for b in stats.blob_metadata] == [((1,), {"ndv": "7"}), ((2,), {"ndv": "2"})]


def test_partition_stats_schema_and_file(tmp_path):
    ptype = StructType((NestedField(1000, "p", INT), NestedField(1001, "d", DATE)))
    with pytest.raises(ValidationError, match="Table must be partitioned"):
        partition_stats_schema(StructType(()), 2)
    v2, v3 = partition_stats_schema(ptype, 2), partition_stats_schema(ptype, 3)
    assert [f.field_id for f in v2.fields] == list(range(1, 13)) and v3.fields[-1].name == "dv_count"
    assert not v2.find_field("position_delete_record_count").required and v3.find_field("position_delete_record_count").required
    path = str(tmp_path / "ps.parquet")
    row = ((1, 19000), 0, 10, 1, 100, 0, 0, 0, 0, None, 5, 6, 0)
    size = write_partition_stats(FileIO(), path, v3, [row, ((None, None), 1, 1, 1, 1, 0, 0, 0, 0, None, 7, 8, 0)])
    assert size == os.path.getsize(path)
    t = pq.read_table(path)
    assert [(f.name, f.metadata[b"PARQUET:field_id"]) for f in t.schema][:3] == [
        ("partition", b"1"), ("spec_id", b"2"), ("data_record_count", b"3")]
    assert [f.metadata[b"PARQUET:field_id"] for f in t.schema.field("partition").type] == [b"1000", b"1001"]
    assert t.to_pylist()[0]["partition"]["p"] == 1 and t.column("last_updated_at").to_pylist() == [5, 7]


# ------------------------------------------------------------------------------ tables
@pytest.fixture()
def table(tmp_path):
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/t", spec=SPEC, format_version=3)
    return cat.create_table(("db", "t"), md)


def _write(t, rows: list[tuple], part: int) -> DataFile:
    settings = WriteSettings.from_metadata(t.metadata)
    w = ParquetFileWriter(t.io, f"{t.location}/data/p={part}/{uuid.uuid4()}.parquet", settings, (part,))
    w.write(pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "data": [r[1] for r in rows],
                      "p": pa.array([part] * len(rows), pa.int32()),
                      "st": pa.array([{"x": r[0] % 3} for r in rows]),
                      "l": pa.array([[1]] * len(rows), pa.list_(pa.int32())),
                      "ns": pa.array([None] * len(rows), pa.timestamp("ns"))},
                     schema=pa.schema([f.remove_metadata() for f in schema_to_arrow(SCHEMA)])))
    return w.close()


def _delete(t, content: FileContent, part: int, records: int, fmt=FileFormat.PARQUET, target=None) -> DataFile:
    path = f"{t.location}/data/p={part}/{uuid.uuid4()}-del.{fmt.value.lower()}"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "wb").write(b"x" * 10)
    if fmt == FileFormat.PUFFIN:
        return DataFile(path, fmt, (part,), records, 10, content=content, spec_id=0, referenced_data_file=target,
                        content_offset=4, content_size_in_bytes=6)
    return DataFile(path, fmt, (part,), records, 10, content=content, spec_id=0,
                    equality_ids=(1,) if content == FileContent.EQUALITY_DELETES else None)


def test_partition_counts_from_manifests(table):
    t = table
    a = _write(t, [(1, "a"), (2, "b")], 1)
    b = _write(t, [(3, "c")], 2)
    t = commit(t, [FastAppend([a, b])], policy=FAST)
    first = t.metadata.current_snapshot()
    t = commit(t, [RowDelta(add_deletes=[_delete(t, FileContent.POSITION_DELETES, 1, 1, FileFormat.PUFFIN, a.file_path),
                                           _delete(t, FileContent.EQUALITY_DELETES, 1, 2)])], policy=FAST)
    t = commit(t, [DeleteFiles([b.file_path])], policy=FAST)
    last = t.metadata.current_snapshot()
    stats = counts(t.io, t.metadata, last)
    delta = t.metadata.snapshot_by_id(last.parent_snapshot_id)
    assert [s.row() for s in stats] == [
        ((1,), 0, 2, 1, a.file_size_in_bytes, 1, 0, 2, 1, None, delta.timestamp_ms, delta.snapshot_id, 1),
        ((2,), 0, 0, 0, 0, 0, 0, 0, 0, None, last.timestamp_ms, last.snapshot_id, 0),
    ]
    assert [s.row()[2] for s in counts(t.io, t.metadata, first)] == [2, 1]
    assert unified_partition_type(t.metadata).fields[0].name == "p"
    assert aggregate_entries(t.metadata, []) == []


def test_driver_paths_of_both_procedures(table, monkeypatch):
    import_reference("datasketches")
    t = table
    assert CTS.compute_table_stats(t) is None and compute_partition_stats(t) is None  # no snapshot
    t = commit(t, [FastAppend([_write(t, [(i, f"v{i % 4}") for i in range(30)], i) for i in range(3)])], policy=FAST)
    sid = t.metadata.current_snapshot_id
    stats = CTS.compute_table_stats(t, columns=["id", "data", "st.x"])
    assert stats.statistics_path.startswith(f"{t.location}/metadata/{sid}-")
    assert {b.fields[0]: b.properties["ndv"] for b in stats.blob_metadata} == {1: "30", 2: "4", t.metadata.schema().find_field("st.x").field_id: "3"}
    t = t.refresh()
    assert t.metadata.statistics == (stats,) or list(t.metadata.statistics) == [stats]
    again = CTS.compute_table_stats(t, sid, ["p"])  # replaces the snapshot's file
    assert [s.statistics_path for s in t.refresh().metadata.statistics] == [again.statistics_path]
    ps = compute_partition_stats(t.refresh())
    assert ps.statistics_path.startswith(f"{t.location}/metadata/partition-stats-{sid}-")
    assert compute_partition_stats(t.refresh()) == ps  # the snapshot has one: returned as is
    assert pq.read_table(ps.statistics_path).column("data_record_count").to_pylist() == [30, 30, 30]
    before = t.refresh().metadata_location
    with pytest.raises(NoSuchSnapshotError, match="Snapshot not found: 1"):
        CTS.compute_table_stats(t.refresh(), 1)
    with pytest.raises(NoSuchSnapshotError, match="Snapshot not found: 1"):
        compute_partition_stats(t.refresh(), 1)
    monkeypatch.setitem(__import__("sys").modules, "datasketches", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'iceberg-procedures\[stats\]'"):
        CTS.compute_table_stats(t.refresh())
    assert t.refresh().metadata_location == before
