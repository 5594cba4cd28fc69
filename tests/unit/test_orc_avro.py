"""ORC and Avro data files without Spark: footer statistics, metrics as Java computes them, imports,
the writers of ``write.format.default`` and reading back through the data-file reader."""

from __future__ import annotations

import datetime
import io
import math
import struct
import uuid
from decimal import Decimal

import fastavro
import pyarrow as pa
import pyarrow.orc as po
import pytest

from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.scan import FileScanTask
from procedures.errors import InvalidMetadataError, ValidationError
from procedures.io.avro_data import avro_record_count, avro_table_bytes, read_avro_batches
from procedures.io.data_import import ImportTarget, imported_data_file
from procedures.io.data_writers import file_format, write_data_files
from procedures.io.fileio import FileIO
from procedures.io.orc_footer import OrcKind, read_orc_footer
from procedures.io.orc_metrics import orc_metrics
from procedures.io.parquet_reader import read_task_table
from procedures.io.parquet_writer import MetricsConfig, WriteSettings
from procedures.spec import types as T
from procedures.spec.conversions import from_bytes
from procedures.spec.expressions import ALWAYS_TRUE
from procedures.spec.manifest.model import FileFormat
from procedures.spec.name_mapping import create_mapping
from procedures.spec.schema import Schema

SCHEMA = Schema((
    T.NestedField(1, "id", T.LONG, True),
    T.NestedField(2, "s", T.STRING, False),
    T.NestedField(3, "f", T.DOUBLE, False),
    T.NestedField(4, "d", T.DATE, False),
    T.NestedField(5, "dec", T.DecimalType(10, 2), False),
    T.NestedField(6, "b", T.BOOLEAN, False),
    T.NestedField(7, "ts", T.TIMESTAMP, False),
    T.NestedField(8, "st", T.StructType((T.NestedField(9, "x", T.INT, False),)), False),
    T.NestedField(10, "l", T.ListType(11, T.INT, False), False),
))

ROWS = {
    "id": [1, 2, None, 4],
    "s": ["a" * 20, "b", None, "c"],
    "f": [1.5, math.nan, None, -2.0],
    "d": [datetime.date(2024, 1, 2), None, datetime.date(2023, 5, 1), datetime.date(2024, 3, 1)],
    "dec": [Decimal("1.25"), Decimal("-3.50"), None, Decimal("0.00")],
    "b": [True, True, None, True],
    "ts": [datetime.datetime(2024, 1, 1, 10, 0, 0, 123456), None, datetime.datetime(2020, 1, 1), None],
    "st": [{"x": 1}, None, {"x": None}, {"x": 7}],
    "l": [[1, 2], None, [], [3]],
}


def _spark_like_orc(tmp_path) -> str:
    """An ORC file as Spark or Hive writes it: the table's column names, no Iceberg ids."""
    path = str(tmp_path / "f.orc")
    po.write_table(pa.table(ROWS), path)
    return path


def _metrics(path: str, config: MetricsConfig = MetricsConfig()):
    with pa.OSFile(path) as f:
        footer = read_orc_footer(f, path)
    return footer, orc_metrics(footer, SCHEMA, config, create_mapping(SCHEMA))


def test_orc_footer_types_and_statistics(tmp_path):
    footer, _ = _metrics(_spark_like_orc(tmp_path))
    assert footer.number_of_rows == 4
    assert footer.types[0].kind == OrcKind.STRUCT and footer.types[0].field_names[:3] == ("id", "s", "f")
    stats = footer.statistics
    assert (stats[1].int_min, stats[1].int_max, stats[1].number_of_values, stats[1].has_null) == (1, 4, 3, True)
    assert (stats[2].string_min, stats[2].string_max) == ("a" * 20, "c")
    assert stats[6].true_count == 3


def _pb_varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _pb(number: int, value: int | bytes) -> bytes:
    """One protobuf field: a varint, or length-delimited bytes."""
    if isinstance(value, int):
        return _pb_varint(number << 3) + _pb_varint(value)
    return _pb_varint(number << 3 | 2) + _pb_varint(len(value)) + value


def test_orc_footer_reads_protobuf_as_java_does():
    """ORC's Java reader is protobuf-java: a scalar field written twice keeps its last value and a
    message field written twice is merged.  (The former hand decoder kept the first of each.)"""
    from procedures.io.orc_footer import parse_file_tail
    zig = lambda v: (v << 1) ^ (v >> 63)  # noqa: E731
    ints = lambda lo, hi: _pb(2, _pb(1, zig(lo)) + _pb(2, zig(hi)))  # noqa: E731
    root = _pb(4, _pb(1, OrcKind.STRUCT) + _pb(2, 1) + _pb(3, b"x"))
    column = _pb(4, _pb(1, OrcKind.LONG))
    stats = _pb(7, _pb(1, 3) + ints(-5, 9) + _pb(2, _pb(2, zig(42))) + _pb(10, 1))
    footer = _pb(6, 5) + _pb(6, 7) + root + column + _pb(7, _pb(1, 3)) + stats
    parsed = parse_file_tail(_pb(2, footer))
    assert parsed.number_of_rows == 7
    assert [t.kind for t in parsed.types] == [OrcKind.STRUCT, OrcKind.LONG]
    assert parsed.types[0].subtypes == (1,) and parsed.types[0].field_names == ("x",)
    assert (parsed.statistics[1].int_min, parsed.statistics[1].int_max) == (-5, 42)
    assert parsed.statistics[1].has_null and parsed.statistics[1].number_of_values == 3


def test_orc_metrics_by_name_mapping(tmp_path):
    _, m = _metrics(_spark_like_orc(tmp_path))
    assert m.record_count == 4
    # every column reached through structs has counts; list elements (11) have none
    assert set(m.value_counts) == {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
    assert m.null_value_counts[1] == 1 and m.value_counts[1] == 4
    assert m.null_value_counts[9] == 2  # the struct's null row and its null child
    bound = lambda fid, t: (from_bytes(m.lower_bounds[fid], t), from_bytes(m.upper_bounds[fid], t))  # noqa: E731
    assert bound(1, T.LONG) == (1, 4)
    assert bound(2, T.STRING) == ("a" * 16, "c")  # truncate(16) on strings only
    assert bound(4, T.DATE) == (19478, 19783)
    assert bound(5, T.DecimalType(10, 2)) == (Decimal("-3.50"), Decimal("1.25"))
    assert bound(6, T.BOOLEAN) == (True, True)
    assert bound(9, T.LONG) == (1, 7)  # bounds are typed by the file's column (pyarrow wrote a long)
    lo, hi = bound(7, T.TIMESTAMP)
    assert (lo, hi) == (1577836800000000, 1704103200123456)
    # no NaN counts from a footer, and list/struct columns have no bounds
    assert not m.nan_value_counts and 8 not in m.lower_bounds and 10 not in m.lower_bounds


def test_orc_metrics_modes_and_missing_ids(tmp_path):
    path = _spark_like_orc(tmp_path)
    config = MetricsConfig.from_properties({"write.metadata.metrics.default": "counts",
                                            "write.metadata.metrics.column.s": "full",
                                            "write.metadata.metrics.column.id": "none"}, SCHEMA)
    _, m = _metrics(path, config)
    assert 1 not in m.value_counts and 1 not in m.column_sizes
    assert set(m.lower_bounds) == {2} and from_bytes(m.lower_bounds[2], T.STRING) == "a" * 20
    with pa.OSFile(path) as f:
        footer = read_orc_footer(f, path)
    bare = orc_metrics(footer, SCHEMA, MetricsConfig(), None)
    assert bare.record_count == 4 and not bare.value_counts  # no ids and no mapping: the row count only


def test_orc_nan_bounds_of_imported_files_widen_to_infinity():
    from procedures.io.orc_footer import OrcColumnStats, OrcFooter, OrcType
    footer = OrcFooter(3, (OrcType(OrcKind.STRUCT, (1,), ("f",)), OrcType(OrcKind.DOUBLE)),
                       (OrcColumnStats(3), OrcColumnStats(3, double_min=math.nan, double_max=2.0)))
    schema = Schema((T.NestedField(1, "f", T.DOUBLE, False),))
    m = orc_metrics(footer, schema, MetricsConfig(), create_mapping(schema))
    assert from_bytes(m.lower_bounds[1], T.DOUBLE) == -math.inf and from_bytes(m.upper_bounds[1], T.DOUBLE) == 2.0


def test_not_an_orc_file_names_it(tmp_path):
    path = tmp_path / "bad.orc"
    path.write_bytes(b"not orc at all")
    with pytest.raises(InvalidMetadataError, match="ORC") as e:
        _metrics(str(path))
    assert e.value.location == str(path)


def _avro_rows() -> list[dict]:
    return [{"id": 1, "s": "x", "d": 3}, {"id": 2, "s": None, "d": None}, {"id": 3, "s": "z", "d": 5}]


def _foreign_avro(rows: list[dict]) -> bytes:
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "id", "type": "long"}, {"name": "s", "type": ["null", "string"]},
        {"name": "d", "type": ["null", {"type": "int", "logicalType": "date"}]}]}
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), rows, codec="deflate", sync_interval=10)
    return buf.getvalue()


def test_avro_record_count_reads_block_headers():
    data = _foreign_avro(_avro_rows() * 50)
    assert avro_record_count(data, "f.avro") == 150
    with pytest.raises(InvalidMetadataError, match="Unable to read Avro file"):
        avro_record_count(data[:-40], "f.avro")


def test_avro_write_read_round_trip_with_field_ids():
    schema = Schema((
        T.NestedField(1, "id", T.LONG, True), T.NestedField(2, "dec", T.DecimalType(9, 2), False),
        T.NestedField(3, "m", T.MapType(4, T.STRING, 5, T.DOUBLE, False), False),
        T.NestedField(6, "mi", T.MapType(7, T.INT, 8, T.STRING, False), False),
        T.NestedField(9, "u", T.UUID, False), T.NestedField(10, "ts", T.TIMESTAMPTZ, False),
    ))
    from procedures.io.arrow_schema import schema_to_arrow
    table = pa.Table.from_pylist([
        {"id": 1, "dec": Decimal("1.25"), "m": [("k", 1.5)], "mi": [(1, "v")], "u": uuid.UUID(int=5).bytes, "ts": 123},
        {"id": 2, "dec": None, "m": None, "mi": None, "u": None, "ts": None},
    ], schema=pa.schema([f if f.name != "u" else pa.field("u", pa.binary(16)) for f in schema_to_arrow(schema)]))
    data = avro_table_bytes(table, schema)
    assert fastavro.reader(io.BytesIO(data)).writer_schema["fields"][0]["field-id"] == 1
    arrow_schema, batches = read_avro_batches(data, "f.avro")
    assert [f.metadata[b"PARQUET:field_id"] for f in arrow_schema] == [b"1", b"2", b"3", b"6", b"9", b"10"]
    rows = pa.Table.from_batches(list(batches)).to_pylist()
    assert rows[0]["dec"] == Decimal("1.25") and rows[0]["m"] == [("k", 1.5)] and rows[0]["mi"] == [(1, "v")]
    assert rows[0]["u"] == uuid.UUID(int=5).bytes and rows[1]["m"] is None


def _target(schema: Schema = SCHEMA) -> ImportTarget:
    return ImportTarget(schema, create_mapping(schema), MetricsConfig(), {})


def test_imports_by_format(tmp_path):
    orc = _spark_like_orc(tmp_path)
    df = imported_data_file(FileIO(), orc, 123, _target(), 0, (), "orc")
    assert df.file_format == FileFormat.ORC and df.record_count == 4 and df.value_counts[1] == 4
    avro_path = tmp_path / "f.avro"
    avro_path.write_bytes(_foreign_avro(_avro_rows()))
    df = imported_data_file(FileIO(), str(avro_path), 99, _target(), 0, (), "avro")
    assert df.file_format == FileFormat.AVRO and df.record_count == 3
    assert df.value_counts is None and df.lower_bounds is None and df.column_sizes is None  # as Java's import
    with pytest.raises(InvalidMetadataError):
        imported_data_file(FileIO(), orc, 1, _target(), 0, (), "avro")


def _task(df, schema: Schema, start: int = 0, length: int | None = None) -> FileScanTask:
    return FileScanTask(data_file=df, data_sequence_number=0, deletes=(), residual=ALWAYS_TRUE, schema=schema,
                        spec_id=0, partition=(), start=start, length=length)


@pytest.mark.parametrize("fmt", ["orc", "avro"])
def test_table_format_writers_round_trip(tmp_path, fmt):
    schema = Schema(tuple(f for f in SCHEMA.fields if f.field_id != 7))
    md, _ = new_table_metadata(schema=schema, location=str(tmp_path), properties={"write.format.default": fmt})
    schema = md.schema()  # ids reassigned by the new table
    settings = WriteSettings.from_metadata(md)
    rows = pa.table({k: (v if k != "id" else [1, 2, 3, 4]) for k, v in ROWS.items() if k != "ts"})
    (df,) = write_data_files(FileIO(), settings, [rows])
    assert df.file_path.endswith("." + fmt) and df.file_format == FileFormat(fmt.upper()) and df.record_count == 4
    got = read_task_table(FileIO(), _task(df, schema)).to_pylist()
    want = rows.to_pylist()
    assert [r["id"] for r in got] == [r["id"] for r in want] and got[0]["st"] == {"x": 1} and got[1]["l"] is None
    assert math.isnan(got[1]["f"]) and got[0]["dec"] == Decimal("1.25") and got[2]["d"] == datetime.date(2023, 5, 1)
    # a range of the file that does not start it is another task's and reads nothing
    assert read_task_table(FileIO(), _task(df, schema, start=4, length=10)).num_rows == 0
    if fmt == "avro":
        assert df.value_counts is None and df.lower_bounds is None
    else:
        # Java's ORC writer: NaN counted, float bounds without the NaN
        assert df.nan_value_counts == {3: 1} and df.null_value_counts[3] == 1
        assert struct.unpack("<d", df.lower_bounds[3])[0] == -2.0 and struct.unpack("<d", df.upper_bounds[3])[0] == 1.5


def test_unknown_write_format_refused(tmp_path):
    md, _ = new_table_metadata(schema=SCHEMA, location=str(tmp_path), properties={"write.format.default": "csv"})
    with pytest.raises(ValidationError, match="write.format.default='csv' is not supported; use parquet, orc or avro"):
        file_format(WriteSettings.from_metadata(md))
