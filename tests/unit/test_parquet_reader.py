"""The Parquet task reader: projection by field id (renames, reorders, drops, adds with defaults,
promotions, identity-partition constants, name mapping, nested types), the three kinds of
deletes and the metadata columns."""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from procedures.core.kernel.scan import DeleteFileEntry, FileScanTask
from procedures.errors import ValidationError
from procedures.io.arrow_schema import schema_to_arrow
from procedures.io.data_writers import write_data_files
from procedures.io.fileio import FileIO
from procedures.io.parquet_reader import output_schema, read_task_table
from procedures.io.parquet_writer import WriteSettings
from procedures.spec.expressions import ALWAYS_TRUE
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
from procedures.spec.metadata_columns import LAST_UPDATED_SEQUENCE_NUMBER_ID, POSITION_DELETE_SCHEMA, ROW_ID_ID
from procedures.spec.name_mapping import create_mapping
from procedures.spec.partitioning import UNPARTITIONED_SPEC, PartitionField, PartitionSpec
from procedures.spec.puffin import PuffinWriter
from procedures.spec.schema import Schema
from procedures.spec.transforms import parse_transform
from procedures.spec.types import (
    DATE, DOUBLE, FLOAT, INT, LONG, STRING, TIMESTAMP, DecimalType, ListType, MapType, NestedField, StructType,
)

IO = FileIO()

FILE_SCHEMA = Schema((
    NestedField(1, "id", INT, True),
    NestedField(2, "name", STRING),
    NestedField(3, "gone", STRING),
    NestedField(4, "f", FLOAT),
    NestedField(5, "dec", DecimalType(9, 2)),
    NestedField(6, "d", DATE),
    NestedField(7, "loc", StructType((NestedField(8, "lat", DOUBLE), NestedField(9, "lon", DOUBLE)))),
    NestedField(10, "tags", ListType(11, STRING)),
    NestedField(12, "props", MapType(13, STRING, 14, INT)),
))
ROWS = {
    "id": [0, 1, 2, 3, 4],
    "name": ["a", None, "c", "d", "e"],
    "gone": ["x"] * 5,
    "f": [0.5, 1.5, None, 3.5, 4.5],
    "dec": [Decimal("1.25"), None, Decimal("-3.00"), Decimal("4.10"), Decimal("0.01")],
    "d": [dt.date(2024, 1, 1), None, dt.date(1969, 12, 31), dt.date(2000, 2, 29), dt.date(2024, 1, 2)],
    "loc": [{"lat": 1.0, "lon": 2.0}, None, {"lat": 3.0, "lon": None}, {"lat": 4.0, "lon": 5.0}, None],
    "tags": [["t1"], [], None, ["t2", "t3"], ["t4"]],
    "props": [[("k", 1)], None, [], [("a", 2), ("b", 3)], [("z", None)]],
}
SPEC = PartitionSpec(0, (PartitionField(20, 1000, parse_transform("identity"), "region"),))


def _write(path, schema: Schema, rows: dict, with_ids: bool = True) -> DataFile:
    arrow = schema_to_arrow(schema)
    if not with_ids:
        arrow = pa.schema([pa.field(f.name, f.type, f.nullable) for f in arrow])
    table = pa.Table.from_pydict(rows, schema=arrow)
    pq.write_table(table, str(path), store_decimal_as_integer=True)
    return DataFile(str(path), FileFormat.PARQUET, ("eu",), table.num_rows, path.stat().st_size, spec_id=0)


def _task(df: DataFile, schema: Schema, deletes=(), seq: int = 1) -> FileScanTask:
    return FileScanTask(df, seq, tuple(deletes), ALWAYS_TRUE, df.spec_id, df.partition, schema)


def _evolved() -> Schema:
    """id promoted to long and moved last, name renamed, gone dropped, f -> double, dec widened,
    d -> timestamp, a nested rename, a column with an initial default and an identity-partition
    source column that the file never had."""
    return Schema((
        NestedField(2, "full_name", STRING),
        NestedField(4, "f", DOUBLE),
        NestedField(5, "dec", DecimalType(12, 2)),
        NestedField(6, "d", TIMESTAMP),
        NestedField(7, "loc", StructType((NestedField(9, "longitude", DOUBLE), NestedField(8, "lat", DOUBLE),
                                           NestedField(15, "alt", DOUBLE)))),
        NestedField(10, "tags", ListType(11, STRING)),
        NestedField(12, "props", MapType(13, STRING, 14, LONG)),
        NestedField(16, "added", LONG, False, None, 7),
        NestedField(20, "region", STRING),
        NestedField(1, "id", LONG, True),
    ), schema_id=1)


def test_projection_by_id_with_renames_promotions_defaults_and_partition_values(tmp_path):
    df = _write(tmp_path / "d.parquet", FILE_SCHEMA, ROWS)
    schema = _evolved()
    out = read_task_table(IO, _task(df, schema), schema, specs={0: SPEC})
    assert out.schema.names == ["full_name", "f", "dec", "d", "loc", "tags", "props", "added", "region", "id"]
    assert out.schema.field("id").type == pa.int64()
    assert out.schema.field("dec").type == pa.decimal128(12, 2)
    assert out.schema.field("d").type == pa.timestamp("us")
    rows = out.to_pylist()
    assert [r["id"] for r in rows] == [0, 1, 2, 3, 4]
    assert [r["full_name"] for r in rows] == ["a", None, "c", "d", "e"]
    assert rows[0]["f"] == 0.5 and rows[2]["f"] is None
    assert rows[2]["dec"] == Decimal("-3.00")
    assert rows[0]["d"] == dt.datetime(2024, 1, 1) and rows[2]["d"] == dt.datetime(1969, 12, 31)
    assert rows[0]["loc"] == {"longitude": 2.0, "lat": 1.0, "alt": None}
    assert rows[1]["loc"] is None
    assert rows[3]["tags"] == ["t2", "t3"] and rows[2]["tags"] is None
    assert rows[3]["props"] == [("a", 2), ("b", 3)] and rows[1]["props"] is None
    assert {r["added"] for r in rows} == {7}
    assert {r["region"] for r in rows} == {"eu"}


def test_small_files_are_fetched_in_one_read_and_large_ones_streamed(tmp_path, monkeypatch):
    import procedures.io.fileio as fileio
    import procedures.io.parquet_reader as reader

    df = _write(tmp_path / "d.parquet", FILE_SCHEMA, ROWS)
    pos = _pos_delete_file(tmp_path / "pos.parquet", [(df.file_path, 1)])
    schema = _evolved()
    task = _task(df, schema, [DeleteFileEntry(pos, 2)])
    calls = []
    for name in ("read", "open"):
        original = getattr(fileio.InputFile, name)
        monkeypatch.setattr(fileio.InputFile, name,
                            lambda self, _o=original, _n=name: calls.append(_n) or _o(self))

    whole = read_task_table(IO, task, schema, specs={0: SPEC}, metadata_columns=("_pos",))
    assert calls == ["read", "read"]  # the delete file and the data file, one read each
    calls.clear()
    monkeypatch.setattr(reader, "_pos_cache", reader._RecentFiles())
    monkeypatch.setattr(reader, "WHOLE_FILE_READ_BYTES", 16)
    streamed = read_task_table(IO, task, schema, specs={0: SPEC}, metadata_columns=("_pos",))
    assert calls == ["open", "open"]
    assert whole.equals(streamed) and whole.num_rows == 4
    # a split of a file is streamed whatever the file's size
    calls.clear()
    monkeypatch.setattr(reader, "WHOLE_FILE_READ_BYTES", 1 << 30)
    split = dataclasses.replace(task, deletes=(), start=0, length=df.file_size_in_bytes)
    assert read_task_table(IO, split, schema, specs={0: SPEC}).num_rows == 5
    assert calls == ["open"]

    from procedures.io.fileio import FileNotFoundInStorageError

    gone = dataclasses.replace(task, deletes=(), data_file=dataclasses.replace(df, file_path=str(tmp_path / "gone.parquet")))
    for limit in (16, 1 << 30):
        monkeypatch.setattr(reader, "WHOLE_FILE_READ_BYTES", limit)
        with pytest.raises(FileNotFoundInStorageError):
            read_task_table(IO, gone, schema)


def test_name_mapping_resolves_files_without_ids(tmp_path):
    flat = Schema(FILE_SCHEMA.fields[:3])
    df = _write(tmp_path / "n.parquet", flat, {k: ROWS[k] for k in ("id", "name", "gone")}, with_ids=False)
    schema = Schema((NestedField(2, "renamed", STRING), NestedField(1, "id", LONG, True)))
    mapping = create_mapping(FILE_SCHEMA)
    out = read_task_table(IO, _task(df, schema), schema, name_mapping=mapping)
    assert out.to_pydict() == {"renamed": ["a", None, "c", "d", "e"], "id": [0, 1, 2, 3, 4]}
    # without a mapping Java falls back to top-level positions: id 1 is the first column, id 2 the second
    out = read_task_table(IO, _task(df, schema), schema)
    assert out.column("id").to_pylist() == [0, 1, 2, 3, 4]


def _pos_delete_file(path, rows: list[tuple[str, int]]) -> DataFile:
    arrow = schema_to_arrow(POSITION_DELETE_SCHEMA)
    table = pa.Table.from_pydict({"file_path": [r[0] for r in rows], "pos": [r[1] for r in rows]}, schema=arrow)
    pq.write_table(table, str(path))
    return DataFile(str(path), FileFormat.PARQUET, ("eu",), len(rows), path.stat().st_size,
                    content=FileContent.POSITION_DELETES, spec_id=0)


def test_position_deletes_only_remove_rows_of_this_file(tmp_path):
    df = _write(tmp_path / "d.parquet", FILE_SCHEMA, ROWS)
    pos = _pos_delete_file(tmp_path / "pos.parquet", [(df.file_path, 1), (df.file_path, 3), ("/other.parquet", 0)])
    schema = Schema((NestedField(1, "id", INT, True),))
    out = read_task_table(IO, _task(df, schema, [DeleteFileEntry(pos, 2)]), schema, metadata_columns=("_pos",))
    assert out.to_pydict() == {"id": [0, 2, 4], "_pos": [0, 2, 4]}


def test_deletion_vector_and_deleted_column(tmp_path):
    df = _write(tmp_path / "d.parquet", FILE_SCHEMA, ROWS)
    w = PuffinWriter()
    w.add_deletion_vector("/elsewhere.parquet", [0])
    meta, _ = w.add_deletion_vector(df.file_path, [0, 4])
    (tmp_path / "dv.puffin").write_bytes(w.finish())
    dv = DataFile(str(tmp_path / "dv.puffin"), FileFormat.PUFFIN, ("eu",), 2, 100,
                  content=FileContent.POSITION_DELETES, referenced_data_file=df.file_path,
                  content_offset=meta.offset, content_size_in_bytes=meta.length, spec_id=0)
    schema = Schema((NestedField(1, "id", INT, True),))
    task = _task(df, schema, [DeleteFileEntry(dv, 1)])
    assert read_task_table(IO, task, schema).column("id").to_pylist() == [1, 2, 3]
    marked = read_task_table(IO, task, schema, metadata_columns=("_deleted", "_file", "_spec_id"))
    assert marked.column("_deleted").to_pylist() == [True, False, False, False, True]
    assert set(marked.column("_file").to_pylist()) == {df.file_path}
    assert set(marked.column("_spec_id").to_pylist()) == {0}


def test_equality_deletes_are_null_safe_and_use_projected_values(tmp_path):
    df = _write(tmp_path / "d.parquet", FILE_SCHEMA, ROWS)
    eq_schema = Schema((NestedField(2, "name", STRING),))
    eq_path = tmp_path / "eq.parquet"
    pq.write_table(pa.Table.from_pydict({"name": [None, "c", "zzz"]}, schema=schema_to_arrow(eq_schema)), str(eq_path))
    eqd = DataFile(str(eq_path), FileFormat.PARQUET, ("eu",), 3, 10, content=FileContent.EQUALITY_DELETES,
                   equality_ids=(2,), spec_id=0)
    schema = Schema((NestedField(1, "id", LONG, True),))  # the delete column is not even projected
    out = read_task_table(IO, _task(df, _evolved(), [DeleteFileEntry(eqd, 2)]), schema)
    assert out.column("id").to_pylist() == [0, 3, 4]


def test_row_lineage_inheritance_and_partition_column(tmp_path):
    df = _write(tmp_path / "d.parquet", FILE_SCHEMA, ROWS)
    from dataclasses import replace

    df = replace(df, first_row_id=100)
    schema = Schema((NestedField(1, "id", INT, True),))
    ptype = StructType((NestedField(1000, "region", STRING), NestedField(1001, "other", INT)))
    out = read_task_table(IO, _task(df, schema, seq=9), schema, specs={0: SPEC}, partition_type=ptype,
                          metadata_columns=("_row_id", "_last_updated_sequence_number", "_partition"))
    assert out.column("_row_id").to_pylist() == [100, 101, 102, 103, 104]
    assert set(out.column("_last_updated_sequence_number").to_pylist()) == {9}
    assert out.column("_partition").to_pylist()[0] == {"region": "eu", "other": None}
    # files from before row lineage (no first_row_id) read both columns as null
    out = read_task_table(IO, _task(replace(df, first_row_id=None), schema), schema,
                          metadata_columns=("_row_id", "_last_updated_sequence_number"))
    assert out.column("_row_id").null_count == 5 and out.column("_last_updated_sequence_number").null_count == 5


def test_count_only_reads_and_output_schema(tmp_path):
    df = _write(tmp_path / "d.parquet", FILE_SCHEMA, ROWS)
    empty = Schema(())
    out = read_task_table(IO, _task(df, FILE_SCHEMA), empty, metadata_columns=("_pos",), batch_size=2)
    assert out.column("_pos").to_pylist() == [0, 1, 2, 3, 4]
    assert output_schema(empty, ("_file",)).field("_file").type == pa.string()
    with pytest.raises(ValidationError, match="Cannot read metadata column '_nope'"):
        output_schema(empty, ("_nope",))


@pytest.mark.parametrize("fmt", ["parquet", "orc", "avro"])
def test_rows_copied_with_their_lineage_keep_it(tmp_path, fmt):
    """A compaction writes each row's lineage into the new file (the two reserved columns): read back,
    stored values win over the new file's inheritance, and a row whose stored sequence number is null
    (or that carries no id) takes the file's, as the spec's row lineage says."""
    schema = Schema((NestedField(1, "id", LONG, True), NestedField(2, "v", STRING)))
    props = {"write.format.default": fmt}
    settings = WriteSettings(schema, UNPARTITIONED_SPEC, str(tmp_path / "data"), props).with_row_lineage()
    rows = pa.table({"id": [1, 2, 3, 4], "v": ["a", "b", "c", "d"],
                     "_row_id": pa.array([40, 7, None, 12], pa.int64()),
                     "_last_updated_sequence_number": pa.array([3, None, 5, 1], pa.int64())})
    [df] = write_data_files(IO, settings, [rows])
    # the lineage columns are written after the table's, with their reserved ids and metrics
    # (Avro data files carry no column metrics)
    assert fmt == "avro" or {ROW_ID_ID, LAST_UPDATED_SEQUENCE_NUMBER_ID} <= set(df.value_counts)
    if fmt == "parquet":
        written = pq.read_schema(df.file_path)
        assert written.names == ["id", "v", "_row_id", "_last_updated_sequence_number"]
        assert [written.field(n).metadata[b"PARQUET:field_id"] for n in written.names[2:]] == [
            str(ROW_ID_ID).encode(), str(LAST_UPDATED_SEQUENCE_NUMBER_ID).encode()]
    df = dataclasses.replace(df, first_row_id=100)
    out = read_task_table(IO, _task(df, schema, seq=9), schema,
                          metadata_columns=("_row_id", "_last_updated_sequence_number"))
    assert out.column("_row_id").to_pylist() == [40, 7, 102, 12]
    assert out.column("_last_updated_sequence_number").to_pylist() == [3, 9, 5, 1]
    # appended rows (no lineage columns in the data) still write files without them
    plain = WriteSettings(schema, UNPARTITIONED_SPEC, str(tmp_path / "plain"), props)
    [new] = write_data_files(IO, plain, [rows.select(["id", "v"])])
    assert not {ROW_ID_ID, LAST_UPDATED_SEQUENCE_NUMBER_ID} & set(new.value_counts or {})
    out = read_task_table(IO, _task(dataclasses.replace(new, first_row_id=100), schema, seq=9), schema,
                          metadata_columns=("_row_id", "_last_updated_sequence_number"))
    assert out.column("_row_id").to_pylist() == [100, 101, 102, 103]
    assert out.column("_last_updated_sequence_number").to_pylist() == [9, 9, 9, 9]


def _key_delete_file(tmp_path, schema: Schema, ids: tuple[int, ...], keys: list[tuple]) -> tuple[Schema, DataFile]:
    """An equality delete file on the columns ``ids`` of ``schema`` holding the key tuples ``keys``."""
    eq_schema = Schema(tuple(f for f in schema.fields if f.field_id in ids))
    eq_path = tmp_path / f"eq{len(ids)}.parquet"
    columns = {f.name: [k[i] for k in keys] for i, f in enumerate(eq_schema.fields)}
    pq.write_table(pa.Table.from_pydict(columns, schema=schema_to_arrow(eq_schema)), str(eq_path))
    return eq_schema, DataFile(str(eq_path), FileFormat.PARQUET, ("eu",), len(keys), 10,
                               content=FileContent.EQUALITY_DELETES, equality_ids=ids, spec_id=0)


def test_multi_column_equality_deletes_match_null_safe_rows_of_every_type(tmp_path):
    """Two- and three-column keys (nulls equal to nulls, as the spec asks) delete exactly the rows a
    Python comparison of the key tuples deletes, including key values that are not in the batch."""
    import random

    rng = random.Random(7)
    n = 3000
    data = {
        "id": list(range(n)),
        "name": [rng.choice([None, "a", "b", "c", "d"]) for _ in range(n)],
        "f": [rng.choice([None, 0.5, 1.5, 2.5]) for _ in range(n)],
        "d": [rng.choice([None, dt.date(2024, 1, 1), dt.date(1969, 12, 31)]) for _ in range(n)],
    }
    schema = Schema((NestedField(1, "id", INT, True), NestedField(2, "name", STRING), NestedField(4, "f", FLOAT),
                     NestedField(6, "d", DATE)))
    df = _write(tmp_path / "d.parquet", schema, data)
    for ids, keys in [
        ((2, 4), [("a", 0.5), (None, 1.5), ("zz", 0.5), (None, None), ("c", 9.0)]),
        ((2, 4, 6), [("b", 2.5, dt.date(2024, 1, 1)), (None, None, None), ("d", 0.5, None)]),
    ]:
        eq_schema, eqd = _key_delete_file(tmp_path, schema, ids, keys)
        projected = Schema((schema.fields[0],))
        out = read_task_table(IO, _task(df, schema, [DeleteFileEntry(eqd, 2)]), projected, batch_size=700)
        names = [f.name for f in eq_schema.fields]
        gone = {tuple(k) for k in keys}
        expected = [i for i in range(n) if tuple(data[c][i] for c in names) not in gone]
        assert out.column("id").to_pylist() == expected
        assert len(expected) < n


def test_multi_column_integer_like_keys_match_null_safe_without_hashing_per_batch(tmp_path, monkeypatch):
    """Keys of several integer-like columns are numbered by binary search in each column's sorted
    distinct values and looked up in row keys sorted once per delete file (the old path hashed every
    column's distinct values with ``index_in`` and re-sorted the row keys in ``np.isin`` per batch).
    A null in a key matches only a null in that column; a key half present in the data deletes nothing."""
    import random

    import pyarrow.compute as pc

    rng = random.Random(5)
    n = 4000
    data = {
        "id": list(range(n)),
        "a": [rng.choice([None, -3, 0, 7, 1 << 33]) for _ in range(n)],
        "b": [rng.choice([None, 1, 2, 3]) for _ in range(n)],
        "d": [rng.choice([None, dt.date(2024, 1, 1), dt.date(1969, 12, 31)]) for _ in range(n)],
    }
    schema = Schema((NestedField(1, "id", INT, True), NestedField(2, "a", LONG), NestedField(3, "b", INT),
                     NestedField(4, "d", DATE)))
    df = _write(tmp_path / "d.parquet", schema, data)
    for ids, keys in [
        ((2, 3), [(None, 1), (7, None), (None, None), (-3, 3), (5, 1), (0, 99)]),
        ((2, 3, 4), [(0, 2, None), (None, None, dt.date(2024, 1, 1)), (1 << 33, 1, dt.date(1969, 12, 31)),
                     (7, 2, dt.date(2000, 1, 1))]),
    ]:
        eq_schema, eqd = _key_delete_file(tmp_path, schema, ids, keys)
        calls = []
        real = pc.index_in
        monkeypatch.setattr(pc, "index_in", lambda *a, **kw: calls.append(1) or real(*a, **kw))
        out = read_task_table(IO, _task(df, schema, [DeleteFileEntry(eqd, 2)]), Schema((schema.fields[0],)),
                              batch_size=300)
        names = [f.name for f in eq_schema.fields]
        gone = set(keys)
        expected = [i for i in range(n) if tuple(data[c][i] for c in names) not in gone]
        assert out.column("id").to_pylist() == expected and 0 < len(expected) < n
        assert calls == []


@pytest.mark.parametrize("field_type", [INT, LONG, DATE, TIMESTAMP], ids=str)
def test_single_integer_like_key_equality_deletes_hash_no_key_set_per_batch(tmp_path, monkeypatch, field_type):
    """One integer-like key column is matched against keys sorted once per delete file: Arrow's
    is_in hashed all 250k keys again for every batch (0.3 s per 2.5M rows on one core, most of
    an equality-deleted scan's Python time).  Nulls match only a null key, as before."""
    import random

    import pyarrow.compute as pc

    rng = random.Random(11)
    n = 5000
    base = {INT: 0, LONG: 1 << 40, DATE: dt.date(1969, 6, 1), TIMESTAMP: dt.datetime(1969, 12, 31, 23, 59)}[field_type]

    def value(i):
        if isinstance(base, dt.datetime):
            return base + dt.timedelta(microseconds=i)
        if isinstance(base, dt.date):
            return base + dt.timedelta(days=i)
        return base - 2500 + i  # negative and positive values alike

    schema = Schema((NestedField(1, "id", INT, True), NestedField(2, "k", field_type)))
    data = {"id": list(range(n)), "k": [None if i % 97 == 0 else value(rng.randrange(3000)) for i in range(n)]}
    df = _write(tmp_path / "d.parquet", schema, data)
    eq_schema = Schema((schema.fields[1],))
    for name, keys in [("with-null", [value(i) for i in range(0, 3000, 7)] + [None]),
                       ("no-null", [value(i) for i in range(1, 3000, 5)] + [value(10_000)])]:
        eq_path = tmp_path / f"eq-{name}.parquet"
        pq.write_table(pa.Table.from_pydict({"k": keys}, schema=schema_to_arrow(eq_schema)), str(eq_path))
        eqd = DataFile(str(eq_path), FileFormat.PARQUET, ("eu",), len(keys), 10, content=FileContent.EQUALITY_DELETES,
                       equality_ids=(2,), spec_id=0)
        calls = []
        real = pc.is_in
        monkeypatch.setattr(pc, "is_in", lambda *a, **kw: calls.append(1) or real(*a, **kw))
        out = read_task_table(IO, _task(df, schema, [DeleteFileEntry(eqd, 2)]), Schema((schema.fields[0],)),
                              batch_size=300)
        gone = set(keys)
        expected = [i for i in range(n) if data["k"][i] not in gone]
        assert out.column("id").to_pylist() == expected and 0 < len(expected) < n
        assert calls == []


def test_file_scoped_position_deletes_read_only_positions_and_need_not_be_sorted(tmp_path, monkeypatch):
    import procedures.io.parquet_reader as reader

    df = _write(tmp_path / "d.parquet", FILE_SCHEMA, ROWS)
    pos = dataclasses.replace(_pos_delete_file(tmp_path / "pos.parquet", [(df.file_path, 3), (df.file_path, 1)]),
                              referenced_data_file=df.file_path)
    read_columns = []
    original = pq.ParquetFile.read
    monkeypatch.setattr(pq.ParquetFile, "read",
                        lambda self, columns=None, **kw: read_columns.append(columns) or original(self, columns, **kw))
    monkeypatch.setattr(reader, "_pos_cache", reader._RecentFiles())
    schema = Schema((NestedField(1, "id", INT, True),))
    out = read_task_table(IO, _task(df, schema, [DeleteFileEntry(pos, 2)]), schema, metadata_columns=("_pos",))
    assert out.to_pydict() == {"id": [0, 2, 4], "_pos": [0, 2, 4]}
    assert read_columns == [["pos"]]


def test_files_without_ids_or_mapping_project_a_subset_by_file_position(tmp_path):
    flat = Schema(FILE_SCHEMA.fields[:3])
    df = _write(tmp_path / "n.parquet", flat, {k: ROWS[k] for k in ("id", "name", "gone")}, with_ids=False)
    schema = Schema((NestedField(2, "renamed", STRING),))  # the file's second column only
    assert read_task_table(IO, _task(df, schema), schema).to_pydict() == {"renamed": ["a", None, "c", "d", "e"]}


def test_nested_projection_reads_only_the_wanted_leaves(tmp_path, monkeypatch):
    df = _write(tmp_path / "d.parquet", FILE_SCHEMA, ROWS)
    columns = []
    original = pq.ParquetFile.iter_batches
    monkeypatch.setattr(pq.ParquetFile, "iter_batches",
                        lambda self, *a, **kw: columns.append(kw.get("columns")) or original(self, *a, **kw))
    evolved = _evolved()
    full = read_task_table(IO, _task(df, evolved), evolved, specs={0: SPEC})
    # loc.lat (id 8) alone, and the renamed longitude (id 9) with a child the file lacks (id 15)
    only_lat = Schema((NestedField(7, "loc", StructType((NestedField(8, "lat", DOUBLE),))),))
    columns.clear()
    out = read_task_table(IO, _task(df, evolved), only_lat)
    assert columns == [["loc.lat"]]
    assert out.column("loc").to_pylist() == [None if r is None else {"lat": r["lat"]} for r in full.column("loc").to_pylist()]
    lon_alt = Schema((NestedField(1, "id", LONG, True),
                      NestedField(7, "loc", StructType((NestedField(9, "longitude", DOUBLE), NestedField(15, "alt", DOUBLE))))))
    columns.clear()
    out = read_task_table(IO, _task(df, evolved), lon_alt)
    assert columns == [["id", "loc.lon"]]
    assert out.column("loc").to_pylist() == [
        None if r is None else {"longitude": r["longitude"], "alt": None} for r in full.column("loc").to_pylist()]
    # only children the file lacks: the struct is read whole for its nulls
    alt = Schema((NestedField(7, "loc", StructType((NestedField(15, "alt", DOUBLE),))),))
    columns.clear()
    out = read_task_table(IO, _task(df, evolved), alt)
    assert columns == [["loc"]]
    assert out.column("loc").to_pylist() == [None if r is None else {"alt": None} for r in full.column("loc").to_pylist()]
    # through a name mapping (a file without ids)
    no_ids = pa.schema([pa.field("id", pa.int32(), False),
                        pa.field("loc", pa.struct([pa.field("lat", pa.float64()), pa.field("lon", pa.float64())]))])
    pq.write_table(pa.Table.from_pydict({k: ROWS[k] for k in ("id", "loc")}, schema=no_ids), str(tmp_path / "m.parquet"))
    plain = DataFile(str(tmp_path / "m.parquet"), FileFormat.PARQUET, ("eu",), 5, (tmp_path / "m.parquet").stat().st_size,
                     spec_id=0)
    columns.clear()
    out = read_task_table(IO, _task(plain, evolved), only_lat, name_mapping=create_mapping(FILE_SCHEMA))
    assert columns == [["loc.lat"]]
    assert out.column("loc").to_pylist() == [{"lat": 1.0}, None, {"lat": 3.0}, {"lat": 4.0}, None]


def test_position_delete_files_match_columns_by_id_whatever_their_names(tmp_path):
    df = _write(tmp_path / "d.parquet", FILE_SCHEMA, ROWS)
    arrow = schema_to_arrow(POSITION_DELETE_SCHEMA)
    renamed = pa.schema([arrow.field(1).with_name("position"), arrow.field(0).with_name("path")])
    path = tmp_path / "pos.parquet"
    pq.write_table(pa.Table.from_pydict({"position": [4, 0], "path": [df.file_path, "/other.parquet"]},
                                        schema=renamed), str(path))
    pos = DataFile(str(path), FileFormat.PARQUET, ("eu",), 2, path.stat().st_size,
                   content=FileContent.POSITION_DELETES, spec_id=0)
    schema = Schema((NestedField(1, "id", INT, True),))
    out = read_task_table(IO, _task(df, schema, [DeleteFileEntry(pos, 2)]), schema)
    assert out.column("id").to_pylist() == [0, 1, 2, 3]
