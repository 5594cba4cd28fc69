"""Parquet data files: metrics (exact bytes), metrics modes, rolling, partitions and file names."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from procedures.errors import ValidationError
from procedures.io.fileio import FileIO
from procedures.io.parquet_writer import (
    MetricsConfig,
    MetricsMode,
    WriteSettings,
    coalesce_batches,
    data_location,
    parse_metrics_mode,
    partition_table,
    write_data_files,
)
from procedures.spec.partitioning import UNPARTITIONED_SPEC, PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.sorting import SortField, SortOrder
from procedures.spec.transforms import BucketTransform, DayTransform, IdentityTransform, TruncateTransform
from procedures.spec.types import (
    DATE,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    STRING,
    TIMESTAMPTZ,
    DecimalType,
    ListType,
    MapType,
    NestedField,
    StructType,
)

SCHEMA = Schema((
    NestedField(1, "id", LONG, True),
    NestedField(2, "s", STRING),
    NestedField(3, "d", DecimalType(9, 2)),
    NestedField(4, "f", FLOAT),
    NestedField(5, "x", DOUBLE),
    NestedField(6, "tags", ListType(7, STRING)),
    NestedField(8, "m", MapType(9, STRING, 10, INT)),
    NestedField(11, "st", StructType((NestedField(12, "a", INT),))),
    NestedField(13, "big", DecimalType(38, 3)),
))

ROWS = {
    "id": [5, -3, 7],
    "s": ["héllo wörld, this is long", "abc", None],
    "d": [Decimal("1.25"), Decimal("-3.10"), None],
    "f": [float("nan"), 2.5, -1.0],
    "x": [float("nan"), float("nan"), None],
    "tags": [["z", "a"], None, []],
    "m": pa.array([[("k", 1)], None, None], pa.map_(pa.string(), pa.int32())),
    "st": [{"a": 4}, {"a": None}, None],
    "big": [Decimal("12345678901234567890.123"), Decimal("-1.000"), None],
}


def write(tmp_path, rows=ROWS, props=None, schema=SCHEMA, spec=UNPARTITIONED_SPEC, order=None, **kw):
    props = dict(props or {})
    settings = WriteSettings(
        schema, spec, str(tmp_path / "data"), props, sort_order_id=kw.pop("sort_order_id", None),
        metrics=MetricsConfig.from_properties(props, schema, order),
    )
    return write_data_files(FileIO(), settings, [pa.table(rows) if isinstance(rows, dict) else rows], **kw)


def test_metrics_exact_bytes(tmp_path):
    (f,) = write(tmp_path, sort_order_id=0)
    assert f.record_count == 3 and f.sort_order_id == 0 and f.spec_id == 0
    assert f.value_counts == {1: 3, 2: 3, 3: 3, 4: 3, 5: 3, 12: 3, 13: 3}
    assert f.null_value_counts == {1: 0, 2: 1, 3: 1, 4: 0, 5: 1, 12: 2, 13: 1}
    assert f.nan_value_counts == {4: 1, 5: 2}
    assert f.lower_bounds[1] == struct.pack("<q", -3) and f.upper_bounds[1] == struct.pack("<q", 7)
    # truncate(16): 16 code points; the upper bound's last code point is incremented
    assert f.lower_bounds[2] == "abc".encode()
    assert f.upper_bounds[2] == "héllo wörld, thj".encode()
    # decimal(9,2): minimal big-endian two's complement of the unscaled value
    assert f.lower_bounds[3] == (-310).to_bytes(2, "big", signed=True) and f.upper_bounds[3] == b"\x7d"
    assert f.lower_bounds[13] == (-1000).to_bytes(2, "big", signed=True)
    assert f.upper_bounds[13] == (12345678901234567890123).to_bytes(10, "big", signed=True)
    # NaN is never a bound; an all-NaN/null column has none
    assert f.lower_bounds[4] == struct.pack("<f", -1.0) and f.upper_bounds[4] == struct.pack("<f", 2.5)
    assert 5 not in f.lower_bounds and 5 not in f.upper_bounds
    # struct children keep bounds; list/map leaves get sizes only
    assert f.lower_bounds[12] == f.upper_bounds[12] == struct.pack("<i", 4)
    assert set(f.column_sizes) == {1, 2, 3, 4, 5, 7, 9, 10, 12, 13}
    for fid in (7, 9, 10):
        assert fid not in f.value_counts and fid not in f.lower_bounds and fid not in f.null_value_counts
    md = pq.ParquetFile(f.file_path).metadata
    assert f.file_size_in_bytes == (tmp_path / "data" / f.file_path.rsplit("/", 1)[1]).stat().st_size
    assert md.row_group(0).column(0).compression == "ZSTD"
    assert sum(f.column_sizes.values()) == sum(md.row_group(0).column(i).total_compressed_size for i in range(md.num_columns))
    assert f.split_offsets == (4,)


def test_metrics_modes(tmp_path):
    props = {
        "write.metadata.metrics.default": "counts",
        "write.metadata.metrics.column.id": "none",
        "write.metadata.metrics.column.s": "full",
        "write.metadata.metrics.column.st.a": "truncate(2)",
    }
    (f,) = write(tmp_path, props=props)
    assert 1 not in f.value_counts and 1 in f.column_sizes and 1 not in f.lower_bounds
    assert f.upper_bounds[2] == "héllo wörld, this is long".encode()
    assert 3 in f.value_counts and 3 not in f.lower_bounds
    assert f.lower_bounds[12] == struct.pack("<i", 4)


def test_metrics_mode_parsing_and_inferred_defaults():
    assert parse_metrics_mode("Truncate(8)") == MetricsMode("truncate", 8)
    assert str(parse_metrics_mode("FULL")) == "full"
    with pytest.raises(ValidationError, match="invalid metrics mode 'trunc'"):
        parse_metrics_mode("trunc")
    wide = Schema(tuple(NestedField(i, f"c{i}", INT) for i in range(1, 103)))
    cfg = MetricsConfig.from_properties({}, wide)
    assert cfg.mode("c100") == MetricsMode("truncate", 16) and cfg.mode("c101") == MetricsMode("none")
    ordered = MetricsConfig.from_properties({}, wide, SortOrder(1, (SortField(102),)))
    assert ordered.mode("c102") == MetricsMode("counts")
    small = MetricsConfig.from_properties({"write.metadata.metrics.max-inferred-column-defaults": "200"}, wide)
    assert small.mode("c102") == MetricsMode("truncate", 16)


def test_long_strings_still_get_bounds(tmp_path):
    # Arrow drops footer statistics for values over 4 KiB; the writer keeps bounds anyway
    schema = Schema((NestedField(1, "s", STRING),))
    (f,) = write(tmp_path, rows={"s": ["b" * 5000, "a" * 5000]}, schema=schema)
    assert f.lower_bounds[1] == b"a" * 16 and f.upper_bounds[1] == b"b" * 15 + b"c"
    assert f.null_value_counts == {1: 0}


def test_long_strings_in_a_later_row_group_keep_both_row_groups_bounds(tmp_path):
    # the writer computes its own min/max only for row groups holding a value over Arrow's limit:
    # the file's bounds then come from the footer of one row group and that fallback of the other
    schema = Schema((NestedField(1, "s", STRING),))
    rows = pa.table({"s": ["m", "0short"] * 500 + ["z" * 5000, "k"] * 500})
    settings = WriteSettings(schema, UNPARTITIONED_SPEC, str(tmp_path / "data"),
                             {"write.parquet.row-group-size-bytes": "1"})  # a row group per batch
    (f,) = write_data_files(FileIO(), settings, rows.to_batches(max_chunksize=1000))
    assert pq.ParquetFile(f.file_path).metadata.num_row_groups == 2
    assert f.lower_bounds[1] == b"0short" and f.upper_bounds[1] == b"z" * 15 + b"{"


def test_short_strings_are_not_scanned_for_bounds(tmp_path, monkeypatch):
    # the footer keeps min/max of values within Arrow's statistics limit: no second pass over them
    import pyarrow.compute as pc

    calls = []
    real = pc.min_max
    monkeypatch.setattr(pc, "min_max", lambda *a, **k: calls.append(1) or real(*a, **k))
    schema = Schema((NestedField(1, "s", STRING),))
    (f,) = write(tmp_path, rows={"s": ["b", "a", None]}, schema=schema)
    assert f.lower_bounds[1] == b"a" and f.upper_bounds[1] == b"b"
    assert calls == []


def test_unique_columns_are_not_dictionary_encoded(tmp_path):
    # as parquet-mr decides after a column's first page: a dictionary that saves nothing over plain
    # values is dropped (pyarrow would keep one until it outgrew 2 MiB, and store it)
    schema = Schema((NestedField(1, "id", LONG, True), NestedField(2, "name", STRING),
                     NestedField(3, "kind", STRING), NestedField(4, "day", DATE),
                     NestedField(5, "tags", ListType(6, STRING))))
    n = 30_000
    rows = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "name": [f"row-{i}" for i in range(n)],
        "kind": [("a", "b", "c")[i % 3] for i in range(n)],
        "day": pa.array([dt.date(2024, 1, 1 + i % 8) for i in range(n)], pa.date32()),
        "tags": [[str(i)] for i in range(n)],
    })
    (f,) = write(tmp_path, rows=rows, schema=schema)
    chunk = pq.ParquetFile(f.file_path).metadata.row_group(0)
    dictionary = {chunk.column(i).path_in_schema for i in range(chunk.num_columns)
                  if "RLE_DICTIONARY" in chunk.column(i).encodings}
    assert dictionary == {"kind", "day", "tags.list.element"}
    assert pq.read_table(f.file_path).equals(rows.cast(pq.read_table(f.file_path).schema))


def test_rolling_and_file_names(tmp_path):
    schema = Schema((NestedField(1, "id", LONG, True), NestedField(2, "s", STRING)))
    rows = pa.table({"id": pa.array(range(200_000), pa.int64()), "s": [f"v{i % 977}" for i in range(200_000)]})
    props = {"write.target-file-size-bytes": "200000", "write.parquet.compression-codec": "snappy"}
    batches = rows.to_batches(max_chunksize=10_000)
    settings = WriteSettings(schema, UNPARTITIONED_SPEC, str(tmp_path / "data"), props)
    files = write_data_files(FileIO(), settings, batches, partition_id=3, task_id=42, operation_id="op")
    assert len(files) > 2
    assert sum(f.record_count for f in files) == 200_000
    names = [f.file_path.rsplit("/", 1)[1] for f in files]
    assert names == [f"00003-42-op-{i:05d}.parquet" for i in range(1, len(files) + 1)]
    for f in files[:-1]:
        assert f.file_size_in_bytes >= 200_000
    assert pq.ParquetFile(files[0].file_path).metadata.row_group(0).column(0).compression == "SNAPPY"
    back = pa.concat_tables(pq.read_table(f.file_path) for f in files)
    assert back.column("id").to_pylist() == list(range(200_000))


def test_split_offsets_are_row_group_starts(tmp_path):
    schema = Schema((NestedField(1, "id", LONG, True),))
    rows = pa.table({"id": pa.array(range(100_000), pa.int64())})
    props = {"write.parquet.row-group-size-bytes": "20000"}
    settings = WriteSettings(schema, UNPARTITIONED_SPEC, str(tmp_path / "data"), props)
    (f,) = write_data_files(FileIO(), settings, rows.to_batches(max_chunksize=10_000))
    md = pq.ParquetFile(f.file_path).metadata
    assert md.num_row_groups > 1 and len(f.split_offsets) == md.num_row_groups
    starts = []
    for g in range(md.num_row_groups):
        c = md.row_group(g).column(0)
        starts.append(min(o for o in (c.dictionary_page_offset, c.data_page_offset) if o))
    assert list(f.split_offsets) == starts and f.split_offsets[0] == 4


def test_a_row_group_ends_at_the_arrow_buffer_limit(tmp_path, monkeypatch):
    # pyarrow encodes a row group from rows held in memory: a big row-group size must not make the
    # writer hold them all (the limit is lowered here; 800 KB of Arrow rows, 80 KB a batch)
    import procedures.io.parquet_writer as writer

    schema = Schema((NestedField(1, "id", LONG, True),))
    rows = pa.table({"id": pa.array(range(100_000), pa.int64())})
    settings = WriteSettings(schema, UNPARTITIONED_SPEC, str(tmp_path / "data"),
                             {"write.parquet.row-group-size-bytes": str(1 << 30)})
    (big,) = write_data_files(FileIO(), settings, rows.to_batches(max_chunksize=10_000))
    assert pq.ParquetFile(big.file_path).metadata.num_row_groups == 1
    monkeypatch.setattr(writer, "ROW_GROUP_BUFFER_MAX_BYTES", 200_000)
    (f,) = write_data_files(FileIO(), settings, rows.to_batches(max_chunksize=10_000), operation_id="capped")
    md = pq.ParquetFile(f.file_path).metadata
    assert md.num_row_groups == 4 and md.num_rows == 100_000
    assert len(f.split_offsets) == 4


def test_settings_lower_the_arrow_buffer_limit_of_one_writer(tmp_path):
    # an in-task sort keeps its worker within a memory budget by buffering less per row group
    from dataclasses import replace

    schema = Schema((NestedField(1, "id", LONG, True),))
    rows = pa.table({"id": pa.array(range(100_000), pa.int64())})
    settings = WriteSettings(schema, UNPARTITIONED_SPEC, str(tmp_path / "data"),
                             {"write.parquet.row-group-size-bytes": str(1 << 30)})
    (f,) = write_data_files(FileIO(), replace(settings, row_group_buffer_bytes=200_000),
                            rows.to_batches(max_chunksize=10_000))
    md = pq.ParquetFile(f.file_path).metadata
    assert md.num_row_groups == 4 and md.num_rows == 100_000


def test_partitioned_write_paths_and_tuples(tmp_path):
    schema = Schema((
        NestedField(1, "id", LONG, True),
        NestedField(2, "cat", STRING),
        NestedField(3, "ts", TIMESTAMPTZ),
        NestedField(4, "dt", DATE),
    ))
    spec = PartitionSpec(1, (
        PartitionField(2, 1000, IdentityTransform(), "cat"),
        PartitionField(3, 1001, DayTransform(), "ts_day"),
        PartitionField(1, 1002, BucketTransform(4), "id_bucket"),
        PartitionField(2, 1003, TruncateTransform(1), "cat_trunc"),
    ))
    utc = dt.timezone.utc
    rows = pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "cat": ["a b", "a b", None],
        "ts": pa.array([dt.datetime(2024, 3, 1, 5, tzinfo=utc), dt.datetime(2024, 3, 1, 23, tzinfo=utc), None],
                       pa.timestamp("us", tz="UTC")),
        "dt": pa.array([dt.date(2024, 1, 1)] * 3, pa.date32()),
    })
    files = write(tmp_path, rows=rows, schema=schema, spec=spec)
    by_partition = {f.partition: f for f in files}
    # (murmur3 of the 8-byte little-endian long & 0x7fffffff) % 4: 1 -> 0, 2 -> 0, 3 -> 3
    assert set(by_partition) == {("a b", 19783, 0, "a"), (None, None, 3, None)}
    for f in files:
        assert f.spec_id == 1
        rel = f.file_path[len(str(tmp_path / "data")) + 1:]
        assert rel.startswith(spec.partition_to_path(f.partition, schema) + "/")
    null_file = next(f for f in files if f.partition[0] is None)
    assert "/cat=null/ts_day=null/" in null_file.file_path
    ab = [f for f in files if f.partition[0] == "a b"]
    assert all("/cat=a+b/ts_day=2024-03-01/" in f.file_path for f in ab)
    assert sum(f.record_count for f in ab) == 2


def test_partition_table_groups_rows():
    schema = Schema((NestedField(1, "id", LONG, True), NestedField(2, "d", DATE)))
    spec = PartitionSpec(0, (PartitionField(2, 1000, IdentityTransform(), "d"),))
    t = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "d": pa.array([0, 1, 0, None], pa.date32())})
    groups = {k: v.column("id").to_pylist() for k, v in partition_table(t, spec, schema)}
    assert groups == {(0,): [1, 3], (1,): [2], (None,): [4]}


def test_data_location_properties():
    assert data_location("s3://b/t/", {}) == "s3://b/t/data"
    assert data_location("s3://b/t", {"write.data.path": "s3://other/x/"}) == "s3://other/x"
    assert data_location("/t", {"write.folder-storage.path": "/f"}) == "/f"


def test_bad_codec_is_refused(tmp_path):
    with pytest.raises(ValidationError, match="write.parquet.compression-codec='lzo'"):
        write(tmp_path, props={"write.parquet.compression-codec": "lzo"})


# --------------------------------------------------------------------------- delete writers
class _Meta:
    """The few TableMetadata members the delete writers use."""

    def __init__(self, location, version, spec=UNPARTITIONED_SPEC, schema=SCHEMA):
        self.location, self.format_version, self.properties = location, version, {}
        self._spec, self._schema = spec, schema

    def schema(self):
        return self._schema

    def spec_by_id(self, spec_id):
        assert spec_id == self._spec.spec_id
        return self._spec


def test_position_delete_files(tmp_path):
    from procedures.io.delete_writers import DeleteTarget, read_position_deletes, write_position_delete_files
    from procedures.spec.manifest.model import FileContent, FileFormat

    schema = Schema((NestedField(1, "id", LONG, True), NestedField(2, "cat", STRING)))
    spec = PartitionSpec(1, (PartitionField(2, 1000, IdentityTransform(), "cat"),))
    meta = _Meta(str(tmp_path), 2, spec, schema)
    a = DeleteTarget(f"{tmp_path}/data/cat=x/a.parquet", ("x",), 1)
    b = DeleteTarget(f"{tmp_path}/data/cat=x/b.parquet", ("x",), 1)
    c = DeleteTarget(f"{tmp_path}/data/cat=y/c.parquet", ("y",), 1)
    # by default (write.delete.granularity = file, as Java's Spark writers) one file per data file
    scoped = write_position_delete_files(FileIO(), meta, {b: [9, 2], a: [5, 1, 5], c: [0]}, operation_id="f")
    assert sorted(f.referenced_data_file for f in scoped) == sorted([a.file_path, b.file_path, c.file_path])
    meta.properties = {"write.delete.granularity": "nonsense"}
    with pytest.raises(ValidationError, match="write.delete.granularity"):
        write_position_delete_files(FileIO(), meta, {a: [1]})
    meta.properties = {"write.delete.granularity": "partition"}
    files = write_position_delete_files(FileIO(), meta, {b: [9, 2], a: [5, 1, 5], c: [0]}, operation_id="op")
    assert len(files) == 2
    fx = next(f for f in files if f.partition == ("x",))
    fy = next(f for f in files if f.partition == ("y",))
    assert "/data/cat=x/00000-0-op-" in fx.file_path and fx.file_path.endswith("-deletes.parquet")
    assert (fx.content, fx.file_format, fx.record_count, fx.spec_id) == (FileContent.POSITION_DELETES, FileFormat.PARQUET, 4, 1)
    assert fx.referenced_data_file is None and fy.referenced_data_file == c.file_path
    assert fx.sort_order_id is None
    # full, untruncated bounds on file_path (longer than 16 characters) and pos
    assert fx.lower_bounds[2147483546] == a.file_path.encode() and fx.upper_bounds[2147483546] == b.file_path.encode()
    assert fx.lower_bounds[2147483545] == struct.pack("<q", 1) and fx.upper_bounds[2147483545] == struct.pack("<q", 9)
    t = pq.read_table(fx.file_path)
    assert t.column("file_path").to_pylist() == [a.file_path] * 2 + [b.file_path] * 2
    assert t.column("pos").to_pylist() == [1, 5, 2, 9]
    assert pq.read_schema(fx.file_path).field("pos").metadata == {b"PARQUET:field_id": b"2147483545"}
    assert read_position_deletes(FileIO(), fx) == {a.file_path: [1, 5], b.file_path: [2, 9]}
    with pytest.raises(ValidationError, match="format v1"):
        write_position_delete_files(FileIO(), _Meta(str(tmp_path), 1), {a: [1]})


def test_deletion_vectors_in_one_puffin(tmp_path):
    from procedures.io.delete_writers import (
        DeleteTarget,
        merge_positions,
        read_existing_positions,
        write_deletes,
    )
    from procedures.spec.manifest.model import FileFormat
    from procedures.spec.puffin import read_puffin

    meta = _Meta(str(tmp_path), 3)
    a, b = DeleteTarget("s3://x/a.parquet"), DeleteTarget("s3://x/b.parquet")
    files = write_deletes(FileIO(), meta, {a: [3, 1], b: [1 << 33, 7]}, operation_id="op")
    assert [f.referenced_data_file for f in files] == [a.file_path, b.file_path]
    assert len({f.file_path for f in files}) == 1 and files[0].file_path.endswith("00000-0-op-00001-deletes.puffin")
    fa = files[0]
    assert fa.file_format == FileFormat.PUFFIN and fa.record_count == 2 and fa.lower_bounds is None
    data = (tmp_path / "data" / "00000-0-op-00001-deletes.puffin").read_bytes()
    assert fa.file_size_in_bytes == len(data)
    # the spec's test vector for positions {1, 3}
    assert data[fa.content_offset:fa.content_offset + fa.content_size_in_bytes] == bytes.fromhex(
        "00 00 00 24  D1 D3 39 64  01 00 00 00 00 00 00 00  00 00 00 00"
        "3A 30 00 00  01 00 00 00  00 00 01 00  10 00 00 00  01 00 03 00"
        "68 34 97 A9"
    )
    assert read_puffin(FileIO(), fa.file_path).deletion_vectors() == {a.file_path: [1, 3], b.file_path: [7, 1 << 33]}
    assert merge_positions([3, 1], (1, 2)) == [1, 2, 3]
    assert read_existing_positions(FileIO(), files, b.file_path) == [7, 1 << 33]
    with pytest.raises(ValidationError, match="non-negative"):
        merge_positions([-1])


def test_position_delete_file_from_arrays_is_sorted_and_keeps_pos_plain(tmp_path):
    import numpy as np

    from procedures.io.delete_writers import merged_positions, read_position_arrays, write_position_delete_file

    assert merged_positions(np.array([5, 1]), [3, 1], ()).tolist() == [1, 3, 5]
    with pytest.raises(ValidationError, match="non-negative"):
        merged_positions(np.array([2, -4]))
    path = str(tmp_path / "d.parquet")
    deletes = {"s3://x/b.parquet": np.arange(0, 10_000, 2), "s3://x/a.parquet": [9, 2, 2]}
    f = write_position_delete_file(FileIO(), path, deletes)
    assert f.record_count == 5_002 and f.referenced_data_file is None
    rows = pq.read_table(path)
    assert rows.column("file_path").to_pylist()[:3] == ["s3://x/a.parquet", "s3://x/a.parquet", "s3://x/b.parquet"]
    assert rows.column("pos").to_pylist()[:4] == [2, 9, 0, 2]
    got = read_position_arrays(FileIO(), f)
    assert {k: v.tolist()[:3] for k, v in got.items()} == {"s3://x/a.parquet": [2, 9], "s3://x/b.parquet": [0, 2, 4]}
    # unique positions are not dictionary-encoded (a dictionary of them doubles the file)
    chunk = pq.ParquetFile(path).metadata.row_group(0)
    encodings = {chunk.column(i).path_in_schema: chunk.column(i).encodings for i in range(chunk.num_columns)}
    assert "RLE_DICTIONARY" not in encodings["pos"] and "RLE_DICTIONARY" in encodings["file_path"]


# --------------------------------------------------------------------------- coalesce_batches
def _ids(start: int, n: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"id": pa.array(range(start, start + n), pa.int64())})


def test_coalesce_batches_gathers_small_batches_in_order():
    out = list(coalesce_batches((_ids(i * 10, 10) for i in range(7)), min_rows=25, max_bytes=1 << 30))
    assert [t.num_rows for t in out] == [30, 30, 10]
    assert [v for t in out for v in t.column(0).to_pylist()] == list(range(70))


def test_coalesce_batches_stops_at_the_byte_budget():
    out = list(coalesce_batches([_ids(0, 10), _ids(10, 10), _ids(20, 10)], min_rows=1000, max_bytes=160))
    assert [t.num_rows for t in out] == [20, 10]  # 80 bytes a batch


def test_coalesce_batches_passes_tables_and_large_batches_through_and_keeps_schemas_apart():
    table = pa.table({"id": pa.array([100, 101], pa.int64())})
    big = _ids(200, 50)
    other = pa.RecordBatch.from_pydict({"name": pa.array(["a"])})
    out = list(coalesce_batches([_ids(0, 5), table, _ids(5, 5), big, _ids(10, 5), other, _ids(15, 5)],
                                min_rows=50, max_bytes=1 << 30))
    assert out[1] is table and out[3] is big
    assert [t.num_rows for t in out] == [5, 2, 5, 50, 5, 1, 5]
    assert [t.schema.names for t in out] == [["id"]] * 5 + [["name"], ["id"]]


def test_write_data_files_writes_coalesced_batches_in_order(tmp_path):
    schema = Schema((NestedField(1, "id", LONG, True),))
    settings = WriteSettings(schema, UNPARTITIONED_SPEC, str(tmp_path / "data"), {})
    files = write_data_files(FileIO(), settings, (_ids(i * 1000, 1000) for i in range(300)))
    assert sum(f.record_count for f in files) == 300_000
    got = pq.read_table(files[0].file_path).column("id").to_pylist()
    assert got == list(range(300_000))
