"""Manifests and manifest lists PyIceberg writes, read by every one of our read paths and compared
with what PyIceberg reads of them (inheritance applied): the outside oracle for
procedures.spec.manifest.reader and manifest_list (mutation testing, docs/testing.md)."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest

from procedures.io.fileio import FileIO
from procedures.spec.manifest.manifest_list import (
    ManifestRows, decode_manifest_list_head, read_encoded_manifest_list, read_manifest_list, read_manifest_list_where,
)
from procedures.spec.manifest.model import FieldSummary
import procedures.spec.manifest.reader as manifest_reader
from procedures.spec.manifest.reader import read_manifest, read_manifest_where
from procedures.spec.partitioning import PartitionField as OurField, PartitionSpec as OurSpec
from procedures.spec.transforms import parse_transform
from tests.helpers.references import import_reference

pm = import_reference("pyiceberg.manifest", "PyIceberg not installed: pip install -e '.[test]'")
pio_module = import_reference("pyiceberg.io.pyarrow", "PyIceberg not installed: pip install -e '.[test]'")
from pyiceberg.partitioning import PartitionField, PartitionSpec  # noqa: E402
from pyiceberg.schema import Schema  # noqa: E402
from pyiceberg.transforms import IdentityTransform  # noqa: E402
from pyiceberg.typedef import Record  # noqa: E402
from pyiceberg.types import DateType, DecimalType, LongType, NestedField, StringType, UUIDType  # noqa: E402

SCHEMA = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "s", StringType()),
                NestedField(3, "d", DecimalType(9, 2)), NestedField(4, "u", UUIDType()),
                NestedField(5, "dt", DateType()))
SPEC = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "s"), PartitionField(3, 1001, IdentityTransform(), "d"),
                     PartitionField(5, 1002, IdentityTransform(), "dt"), spec_id=3)
# the same spec, its fields in another order than the file's: specs= orders our tuples by it
OUR_SPEC = OurSpec(3, (OurField(5, 1002, parse_transform("identity"), "dt"),
                       OurField(2, 1000, parse_transform("identity"), "s"),
                       OurField(3, 1001, parse_transform("identity"), "d")))
U1 = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")


def _data_file(path: str, partition: tuple, rows: int, content=None, **extra):
    return pm.DataFile.from_args(
        _table_format_version=2, content=content or pm.DataFileContent.DATA, file_path=path,
        file_format=pm.FileFormat.PARQUET, partition=Record(*partition), record_count=rows,
        file_size_in_bytes=rows * 10, **extra)


def _entries(content):
    """ADDED (sequence numbers inherited), EXISTING and DELETED entries of ``content``."""
    extra = {} if content == pm.DataFileContent.DATA else {"equality_ids": [1]} if content == pm.DataFileContent.EQUALITY_DELETES else {}
    metrics = {"value_counts": {1: 5, 2: 4}, "null_value_counts": {2: 1}, "nan_value_counts": {},
               "lower_bounds": {1: (1).to_bytes(8, "little"), 2: b"a"},
               "upper_bounds": {1: (9).to_bytes(8, "little"), 2: b"z"},
               "column_sizes": {1: 40, 2: 30}, "split_offsets": [4, 100], "sort_order_id": 0,
               "key_metadata": b"km"}
    return [
        pm.ManifestEntry.from_args(status=pm.ManifestEntryStatus.ADDED, snapshot_id=None, data_file=_data_file(
            "s3://b/a.parquet", ("x", Decimal("1.25"), 19000), 5, content, **metrics, **extra)),
        pm.ManifestEntry.from_args(status=pm.ManifestEntryStatus.ADDED, snapshot_id=77, sequence_number=4,
                                   data_file=_data_file("s3://b/a2.parquet", ("y", Decimal("-3.50"), 0), 6, content, **extra)),
        # snapshot id 2, the DELETED status's value: the decoder must tell status and snapshot apart
        pm.ManifestEntry.from_args(status=pm.ManifestEntryStatus.EXISTING, snapshot_id=2, sequence_number=2,
                                   file_sequence_number=3,
                                   data_file=_data_file("s3://b/b.parquet", (None, None, None), 7, content, **extra)),
        pm.ManifestEntry.from_args(status=pm.ManifestEntryStatus.DELETED, snapshot_id=77, sequence_number=1,
                                   file_sequence_number=1,
                                   data_file=_data_file("s3://b/c.parquet", ("z", Decimal("0.01"), 1), 8, content, **extra)),
    ]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Two manifests (data, position deletes) and a manifest list of sequence number 6, by PyIceberg."""
    d = tmp_path_factory.mktemp("pyi")
    io = pio_module.PyArrowFileIO()
    manifests = []
    for name, content in (("data", pm.DataFileContent.DATA), ("deletes", pm.DataFileContent.POSITION_DELETES)):
        if content == pm.DataFileContent.DATA:
            writer = pm.write_manifest(2, SPEC, SCHEMA, io.new_output(f"{d}/{name}.avro"), 77, "deflate")
        else:
            writer = pm.ManifestWriterV2(SPEC, SCHEMA, io.new_output(f"{d}/{name}.avro"), 77, "deflate")
            writer.content = lambda: pm.ManifestContent.DELETES  # PyIceberg writes delete manifests this way too
        with writer as w:
            for e in _entries(content):
                w.add_entry(e)
        manifests.append(w.to_manifest_file())
    with pm.write_manifest_list(2, io.new_output(f"{d}/list.avro"), 77, 70, 6, "deflate") as lw:
        lw.add_manifests(manifests)
    return io, str(d)


def _theirs_entries(io, manifest):
    return [(e.status.value, e.snapshot_id, e.sequence_number, e.file_sequence_number, e.data_file)
            for e in manifest.fetch_manifest_entry(io, discard_deleted=False)]


def _same_file(ours, theirs, reordered: bool) -> None:
    part = tuple(theirs.partition)
    if reordered:
        part = (part[2], part[0], part[1])
    assert (ours.file_path, ours.file_format.value, ours.partition, ours.record_count, ours.file_size_in_bytes,
            int(ours.content)) == (theirs.file_path, theirs.file_format.value, part, theirs.record_count,
                                   theirs.file_size_in_bytes, theirs.content.value)
    assert (ours.column_sizes, ours.value_counts, ours.null_value_counts, ours.nan_value_counts, ours.lower_bounds,
            ours.upper_bounds) == (theirs.column_sizes, theirs.value_counts, theirs.null_value_counts,
                                   theirs.nan_value_counts, theirs.lower_bounds, theirs.upper_bounds)
    assert (ours.key_metadata, ours.split_offsets, ours.equality_ids, ours.sort_order_id) == (
        theirs.key_metadata, None if theirs.split_offsets is None else tuple(theirs.split_offsets),
        None if theirs.equality_ids is None else tuple(theirs.equality_ids), theirs.sort_order_id)
    assert ours.spec_id == 3


def test_our_list_reads_answer_as_pyiceberg(written) -> None:
    io, d = written
    path = f"{d}/list.avro"
    theirs = list(pm.read_manifest_list(io.new_input(path)))
    ours = read_manifest_list(FileIO(), path)
    assert [(m.manifest_path, m.manifest_length, m.partition_spec_id, int(m.content), m.sequence_number,
             m.min_sequence_number, m.added_snapshot_id, m.added_files_count, m.existing_files_count,
             m.deleted_files_count, m.added_rows_count, m.existing_rows_count, m.deleted_rows_count, m.key_metadata)
            for m in ours] == [
        (m.manifest_path, m.manifest_length, m.partition_spec_id, m.content.value, m.sequence_number,
         m.min_sequence_number, m.added_snapshot_id, m.added_files_count, m.existing_files_count,
         m.deleted_files_count, m.added_rows_count, m.existing_rows_count, m.deleted_rows_count, m.key_metadata)
        for m in theirs]
    assert [m.sequence_number for m in ours] == [6, 6] and [int(m.content) for m in ours] == [0, 1]
    assert [m.partitions for m in ours] == [
        tuple(FieldSummary(s.contains_null, s.contains_nan, s.lower_bound, s.upper_bound) for s in m.partitions)
        for m in theirs]
    # the skimming reader, the encoded list and its head decode give the same rows
    where = read_manifest_list_where(FileIO(), path, None)
    assert isinstance(where, ManifestRows) and list(where) == ours
    assert list(read_manifest_list_where(FileIO(), path, lambda spec_id, parts: spec_id == 3)) == ours
    assert list(read_manifest_list_where(FileIO(), path, lambda spec_id, parts: spec_id != 3)) == []
    encoded = read_encoded_manifest_list(FileIO(), path)
    assert encoded.count == 2 and decode_manifest_list_head(encoded, len(encoded.records), 2) == ours


def _without(monkeypatch, mode: str) -> None:
    """Take away the generated readers (``mode``): the entry decoder alone, or the metrics skimmer
    too (a manifest schema the generator does not handle): the reads fall back on fastavro."""
    if mode == "skimmed":
        return
    real = manifest_reader.compile_skimmer

    def compile_some(schema, fields):
        decoding = any(f.kind == "string" for f in fields)  # only the entry decoder reads strings
        return None if mode == "no skimmer" or decoding else real(schema, fields)

    monkeypatch.setattr(manifest_reader, "compile_skimmer", compile_some)
    monkeypatch.setattr(manifest_reader, "_SKIM_PLANS", {})


@pytest.mark.parametrize("mode", ["skimmed", "no decoder", "no skimmer"])
@pytest.mark.parametrize("specs", [None, {3: OUR_SPEC}], ids=["file order", "table spec order"])
def test_our_manifest_reads_answer_as_pyiceberg(written, specs, mode: str, monkeypatch) -> None:
    _without(monkeypatch, mode)
    io, d = written
    for theirs_list in pm.read_manifest_list(io.new_input(f"{d}/list.avro")):
        theirs = _theirs_entries(io, theirs_list)
        [ours_list] = [m for m in read_manifest_list(FileIO(), f"{d}/list.avro")
                       if m.manifest_path == theirs_list.manifest_path]
        reads = {
            "full": list(read_manifest(FileIO(), ours_list, specs=specs)),
            "live": list(read_manifest(FileIO(), ours_list, specs=specs, skip_deleted=True)),
            "where all": list(read_manifest_where(FileIO(), ours_list, [1, 2], None, specs=specs)),
            "where kept": list(read_manifest_where(FileIO(), ours_list, [1, 2], lambda m: True, specs=specs)),
            "where some": list(read_manifest_where(FileIO(), ours_list, [1, 2],
                                                   lambda m: m.record_count != 6, specs=specs)),
        }
        live = [t for t in theirs if t[0] != 2]
        expected = {"full": theirs, "live": live, "where all": live, "where kept": live,
                    "where some": [t for t in live if t[4].record_count != 6]}
        for name, entries in reads.items():
            want = expected[name]
            assert [(int(e.status), e.snapshot_id, e.sequence_number, e.file_sequence_number) for e in entries] == [
                t[:4] for t in want], name
            for e, t in zip(entries, want):
                _same_file(e.data_file, t[4], specs is not None)
        # inheritance: the first ADDED entry takes the list's snapshot and sequence numbers
        assert reads["full"][0].snapshot_id == 77 and reads["full"][0].sequence_number == 6
        assert reads["full"][1].sequence_number == 4  # an explicit older data sequence number stays


@pytest.mark.parametrize("mode", ["skimmed", "no decoder"])
def test_metrics_a_filter_sees_are_the_files_own(written, mode: str, monkeypatch) -> None:
    """read_manifest_where hands ``keep`` the entry's record count and only the asked-for ids."""
    _without(monkeypatch, mode)
    io, d = written
    [data, _] = read_manifest_list(FileIO(), f"{d}/list.avro")
    seen = []

    def keep(m):
        seen.append((m.record_count, m.value_counts, m.null_value_counts, m.lower_bounds, m.upper_bounds))
        return False

    assert list(read_manifest_where(FileIO(), data, [2], keep)) == []
    assert seen[0] == (5, {2: 4}, {2: 1}, {2: b"a"}, {2: b"z"})
    assert [s[0] for s in seen] == [5, 6, 7]  # live entries only


# ------------------------------------------------------------------------ what we write, PyIceberg reads
def _our_schema_and_spec():
    from procedures.spec.schema import Schema as OurSchema
    from procedures.spec.types import DATE, DOUBLE, LONG, STRING, UUID, DecimalType as OurDecimal
    from procedures.spec.types import NestedField as OurNested

    schema = OurSchema((OurNested(1, "id", LONG, True), OurNested(2, "s", STRING), OurNested(3, "d", OurDecimal(9, 2)),
                        OurNested(4, "u", UUID), OurNested(5, "dt", DATE), OurNested(6, "f", DOUBLE)), schema_id=0)
    spec = OurSpec(1, tuple(OurField(i, 999 + i, parse_transform("identity"), n)
                            for i, n in ((1, "id"), (2, "s"), (3, "d"), (4, "u"), (5, "dt"), (6, "f"))))
    return schema, spec


PYI_SCHEMA = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "s", StringType()),
                    NestedField(3, "d", DecimalType(9, 2)), NestedField(4, "u", UUIDType()),
                    NestedField(5, "dt", DateType()), NestedField(6, "f", __import__("pyiceberg.types").types.DoubleType()))
PYI_SPEC = PartitionSpec(*(PartitionField(i, 999 + i, IdentityTransform(), n)
                           for i, n in ((1, "id"), (2, "s"), (3, "d"), (4, "u"), (5, "dt"), (6, "f"))), spec_id=1)


def _random_partitions(rng, n: int) -> list[tuple]:
    def pick(values):
        return rng.choice(values + [None])

    # doubles: no signed zeros (PyIceberg's summary keeps the first of -0.0 and 0.0), and only values
    # a float32 holds (PyIceberg 0.12 hands back a manifest entry's double partition value through a float32)
    return [(rng.randrange(-50, 50), pick(["", "a", "ab", "b", "é", "z" * 5]),
             pick([Decimal("0.00"), Decimal("-1.28"), Decimal("14.20"), Decimal("9999999.99")]),
             pick([U1, uuid.UUID(int=rng.getrandbits(128))]), pick([-3, 0, 19000, 17486]),
             pick([1.5, -2.25, 3.0, 2.0 ** 100, -0.5, float("nan")]))
            for _ in range(n)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pyiceberg_reads_what_we_write_and_summarises_as_we_do(tmp_path, seed: int) -> None:
    import random

    from procedures.spec.manifest.manifest_list import write_manifest_list
    from procedures.spec.manifest.model import DataFile, FileFormat, ManifestContent
    from procedures.spec.manifest.writer import ManifestWriter

    rng = random.Random(seed)
    schema, spec = _our_schema_and_spec()
    partitions = _random_partitions(rng, rng.randrange(1, 30))
    files = [DataFile(f"s3://b/{i}.parquet", FileFormat.PARQUET, p, rng.randrange(1, 100), rng.randrange(1, 10**6),
                      value_counts={1: 3}, lower_bounds={1: (i).to_bytes(8, "little")}, split_offsets=(4,))
             for i, p in enumerate(partitions)]
    w = ManifestWriter(FileIO(), str(tmp_path / "m.avro"), spec, schema, 2, ManifestContent.DATA, 9)
    statuses = []
    for i, f in enumerate(files):
        kind = rng.choice(["add", "existing", "delete"])
        statuses.append(kind)
        if kind == "add":
            w.add(f)
        elif kind == "existing":
            w.existing(f, 8, 2 + i, 3 + i)
        else:
            w.delete(f, 1, 1)
    written, _ = write_manifest_list(FileIO(), str(tmp_path / "l.avro"), 2, 9, 8, 50, None, [w.close()])
    io = pio_module.PyArrowFileIO()
    [theirs] = list(pm.read_manifest_list(io.new_input(str(tmp_path / "l.avro"))))
    expected = pm.construct_partition_summaries(PYI_SPEC, PYI_SCHEMA, [Record(*p) for p in partitions])
    assert [(s.contains_null, s.contains_nan, s.lower_bound, s.upper_bound) for s in theirs.partitions] == [
        (s.contains_null, s.contains_nan, s.lower_bound, s.upper_bound) for s in expected]
    counts = {k: sum(1 for s in statuses if s == k) for k in ("add", "existing", "delete")}
    rows = {k: sum(f.record_count for f, s in zip(files, statuses) if s == k) for k in ("add", "existing", "delete")}
    assert (theirs.added_files_count, theirs.existing_files_count, theirs.deleted_files_count) == (
        counts["add"], counts["existing"], counts["delete"])
    assert (theirs.added_rows_count, theirs.existing_rows_count, theirs.deleted_rows_count) == (
        rows["add"], rows["existing"], rows["delete"])
    live_seqs = [50 if s == "add" else 2 + i for i, s in enumerate(statuses) if s != "delete"]
    assert theirs.min_sequence_number == (min(live_seqs) if live_seqs else 50)
    assert (theirs.sequence_number, theirs.added_snapshot_id, theirs.manifest_length) == (
        50, 9, written[0].manifest_length)
    entries = theirs.fetch_manifest_entry(io, discard_deleted=False)
    assert [e.status.name for e in entries] == [{"add": "ADDED", "existing": "EXISTING", "delete": "DELETED"}[s]
                                                 for s in statuses]
    for e, f, s, i in zip(entries, files, statuses, range(len(files))):
        want = {"add": (9, 50, 50), "existing": (8, 2 + i, 3 + i), "delete": (9, 1, 1)}[s]
        assert (e.snapshot_id, e.sequence_number, e.file_sequence_number) == want
        got = tuple(e.data_file.partition)
        assert [("nan" if isinstance(v, float) and v != v else v) for v in got] == [
            ("nan" if isinstance(v, float) and v != v else v) for v in f.partition]
        assert (e.data_file.file_path, e.data_file.record_count, e.data_file.file_size_in_bytes,
                e.data_file.value_counts, e.data_file.lower_bounds, list(e.data_file.split_offsets)) == (
            f.file_path, f.record_count, f.file_size_in_bytes, f.value_counts, f.lower_bounds, [4])


@pytest.mark.parametrize("mode", ["skimmed", "no decoder", "no skimmer"])
def test_filtered_reads_of_many_entry_blocks_answer_as_pyiceberg(tmp_path, mode: str, monkeypatch) -> None:
    """PyIceberg writes a block per entry; ours hold many, so the skimming reads must keep their
    place inside a block past a kept entry."""
    import random

    from procedures.spec.manifest.manifest_list import write_manifest_list
    from procedures.spec.manifest.model import DataFile, FileFormat, ManifestContent
    from procedures.spec.manifest.writer import ManifestWriter

    _without(monkeypatch, mode)
    rng = random.Random(7)
    schema, spec = _our_schema_and_spec()
    w = ManifestWriter(FileIO(), str(tmp_path / "m.avro"), spec, schema, 2, ManifestContent.DATA, 9)
    for i, p in enumerate(_random_partitions(rng, 60)):
        f = DataFile(f"s3://b/{i}.parquet", FileFormat.PARQUET, p, i + 1, 10, value_counts={1: i})
        if i % 4:
            w.add(f)
        else:
            w.delete(f, 1, 1)
    [m], _ = write_manifest_list(FileIO(), str(tmp_path / "l.avro"), 2, 9, None, 5, None, [w.close()])
    io = pio_module.PyArrowFileIO()
    [theirs] = list(pm.read_manifest_list(io.new_input(str(tmp_path / "l.avro"))))
    want = [e.data_file.file_path for e in theirs.fetch_manifest_entry(io) if e.data_file.record_count % 3]
    got = read_manifest_where(FileIO(), m, [1], lambda metrics: metrics.record_count % 3 != 0)
    assert [e.data_file.file_path for e in got] == want and len(want) > 20
