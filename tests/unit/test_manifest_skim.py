"""Reading a manifest's entries through their metrics first (spec/avro_scan.py and
``read_manifest_where``): the skimming reader must walk every Avro encoding to the record's end,
and the entries it keeps must be exactly those a full read followed by the metrics test keeps."""

from __future__ import annotations

import io
import math
import random
import struct
from dataclasses import replace

import fastavro
import pytest

from procedures.core.manifest_rewrite.entry_copy import existing_records
from procedures.errors import InvalidMetadataError
from procedures.spec.avro_schemas import encode_long
from procedures.spec.avro_scan import SkimField, compile_skimmer
from procedures.spec.evaluators import InclusiveMetricsEvaluator
from procedures.spec.expression_parser import parse_filter
from procedures.spec.expressions import referenced_field_ids
from procedures.spec.manifest.model import DataFile, FileFormat, ManifestContent
from procedures.spec.manifest.reader import read_manifest, read_manifest_where
from procedures.spec.manifest.writer import ManifestWriter
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.transforms import parse_transform
from procedures.spec.types import DOUBLE, LONG, STRING, NestedField
from tests.unit import test_manifest as rich

SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "x", DOUBLE), NestedField(3, "s", STRING)))
SPEC = PartitionSpec(0, (PartitionField(3, 1000, parse_transform("identity"), "s"),))


class MemIO:
    """The FileIO subset manifests use, in memory."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def new_input(self, path: str):
        data = self.files[path]

        class _In:
            def read(self) -> bytes:
                return data

        return _In()

    def write(self, path: str, data: bytes, overwrite: bool = False) -> None:
        self.files[path] = bytes(data)


def _file(rng: random.Random, n: int) -> DataFile:
    """A data file with metrics of every kind, some missing, null-only, NaN-only or absent maps."""
    lo = rng.randrange(-1000, 1000)
    hi = lo + rng.randrange(0, 300)
    x_lo, x_hi = rng.uniform(-5, 5), rng.uniform(5, 10)
    kind = n % 7
    rc = 0 if kind == 6 and n % 2 else rng.randrange(1, 10_000)
    lower = {1: struct.pack("<q", lo), 2: struct.pack("<d", x_lo), 3: b"a" * (n % 3)}
    upper = {1: struct.pack("<q", hi), 2: struct.pack("<d", x_hi if kind != 5 else math.nan), 3: b"z"}
    values = {1: rc, 2: rc, 3: rc}
    nulls = {1: 0, 2: rc if kind == 1 else 0, 3: n % 5}
    nans = {2: rc if kind == 2 else n % 3}
    if kind == 3:  # no bounds for id
        del lower[1], upper[1]
    return DataFile(
        f"s3://bucket/t/data/p={n % 4}/f-{n:05}-{'x' * (n % 90)}.parquet", FileFormat.PARQUET, (f"p{n % 4}",), rc,
        1000 + n, column_sizes={1: 8 * rc, 2: 8 * rc},
        value_counts=None if kind == 4 else values,
        null_value_counts=None if kind == 4 else nulls,
        nan_value_counts=None if kind == 0 else nans,
        lower_bounds=lower, upper_bounds=upper,
        key_metadata=b"k" if n % 11 == 0 else None,
        split_offsets=(4, 1000 + n) if n % 2 else None,
        sort_order_id=n % 2 or None,
        first_row_id=50_000 + n * 100 if n % 13 == 0 else None,
    )


def _manifest(version: int, count: int = 600):
    """A data manifest of ``count`` files (several Avro blocks): added, existing and deleted entries."""
    rng = random.Random(version)
    mio = MemIO()
    path = f"s3://bucket/t/metadata/m-v{version}.avro"
    with ManifestWriter(mio, path, SPEC, SCHEMA, version, ManifestContent.DATA, 55) as w:
        for n in range(count):
            f = _file(rng, n)
            if version < 3:
                f = replace(f, first_row_id=None)
            if n % 5 == 0 and version > 1:
                w.delete(f, 3, 3)
            elif n % 3 == 0:
                w.existing(f, 44, 3, 4)
            else:
                w.add(f)
    m = replace(w.close(), sequence_number=7, min_sequence_number=3)
    if version >= 3:
        m = replace(m, first_row_id=1_000_000)
    return mio, m


FILTERS = ["id < 0", "id = 100", "id >= 500 AND x < 0", "x > 7.5 OR id < -900", "x = 3.0", "id IN (1, 2, 3)",
           "x IS NOT NULL AND s IS NULL", "s LIKE 'ab%'", "isnan(x)", "NOT isnan(x) AND id > 0", "id <= 12 AND NOT x > 9"]


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("flt", FILTERS)
def test_kept_entries_are_a_full_reads_matching_entries(version, flt):
    mio, m = _manifest(version)
    specs = {0: SPEC}
    ev = InclusiveMetricsEvaluator(SCHEMA, parse_filter(flt))
    expected = [e for e in read_manifest(mio, m, specs=specs, skip_deleted=True) if ev.eval(e.data_file)]
    got = list(read_manifest_where(mio, m, referenced_field_ids(ev.expr), ev.eval, specs=specs))
    assert got == expected
    live = sum(1 for _ in read_manifest(mio, m, skip_deleted=True))
    assert 0 < len(got) < live or flt in ("s LIKE 'ab%'", "x IS NOT NULL AND s IS NULL")


def test_v3_row_ids_count_the_entries_left_out():
    mio, m = _manifest(3)
    ev = InclusiveMetricsEvaluator(SCHEMA, parse_filter("id > 900"))
    got = list(read_manifest_where(mio, m, {1}, ev.eval, specs={0: SPEC}))
    full = {e.data_file.file_path: e for e in read_manifest(mio, m, specs={0: SPEC}, skip_deleted=True)}
    inherited = [e for e in got if e.data_file.first_row_id >= 1_000_000]
    # a kept entry past the first one left out takes its row ids after the rows of those left out
    assert inherited and inherited[-1].data_file.first_row_id > 1_000_000 + sum(
        e.data_file.record_count for e in inherited[:-1])
    assert all(e == full[e.data_file.file_path] for e in got)


def test_the_test_sees_only_the_asked_ids():
    mio, m = _manifest(2, count=50)
    seen = []

    def keep(metrics) -> bool:
        seen.append((metrics.lower_bounds, metrics.value_counts))
        return False

    assert list(read_manifest_where(mio, m, {2}, keep)) == []
    assert seen and all(lb is None or set(lb) <= {2} for lb, _ in seen)
    assert any(vc == {2: vc[2]} for _, vc in seen if vc)


def one_block(data: bytes, count_change: int) -> bytes:
    """The manifest rewritten uncompressed as one block whose record count is off by ``count_change``."""
    reader = fastavro.reader(io.BytesIO(data))
    schema, meta, records = reader.writer_schema, reader.metadata, list(reader)
    sync = b"0123456789abcdef"
    head = io.BytesIO()
    fastavro.writer(head, schema, [], codec="null", sync_marker=sync,
                    metadata={k: v for k, v in meta.items() if not k.startswith("avro.")})
    body = io.BytesIO()
    parsed = fastavro.parse_schema(schema)
    for r in records:
        fastavro.schemaless_writer(body, parsed, r)
    return (head.getvalue() + encode_long(len(records) + count_change) + encode_long(len(body.getvalue()))
            + body.getvalue() + sync)


@pytest.mark.parametrize("count_change", [0, 1, -1])
def test_a_block_whose_count_disagrees_with_its_bytes_is_corrupt(count_change):
    mio, m = _manifest(2, count=20)
    expected = list(read_manifest(mio, m, skip_deleted=True))
    mio.files[m.manifest_path] = one_block(mio.files[m.manifest_path], count_change)
    if count_change == 0:
        assert list(read_manifest_where(mio, m, {1}, lambda f: True)) == expected
        return
    with pytest.raises(InvalidMetadataError, match="corrupt manifest"):
        list(read_manifest_where(mio, m, {1}, lambda f: True))


@pytest.mark.parametrize("count_change", [0, 1, -1])
def test_a_copied_block_whose_count_disagrees_with_its_bytes_is_corrupt(count_change):
    """The EXISTING-entry copy (existing_records, generated skimmer) trusts encoded lengths: a block
    holding more bytes than its count of entries (one entry would be silently dropped) or fewer must
    be refused, not copied."""
    mio, m = _manifest(2, count=20)
    live = [e.data_file.file_path for e in read_manifest(mio, m, skip_deleted=True)]
    mio.files[m.manifest_path] = one_block(mio.files[m.manifest_path], count_change)
    target = ManifestWriter(mio, "s3://bucket/t/metadata/copy.avro", SPEC, SCHEMA, 2, ManifestContent.DATA, 99)
    records = existing_records(mio, m, target.avro_schema, 2, specs={0: SPEC})
    assert records is not None  # the copy path, not the fallback to a full read
    if count_change == 0:
        for partition, record_count, seq, record in records:
            target.existing_encoded(record, partition, record_count, seq)
        copied = target.close()
        assert [e.data_file.file_path for e in read_manifest(mio, copied)] == live
        return
    with pytest.raises(InvalidMetadataError, match="corrupt manifest"):
        list(records)


# ------------------------------------------------------------------------------- every Avro type
EVERY_TYPE = {
    "type": "record", "name": "top", "fields": [
        {"name": "n", "type": "null"},
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int", "field-id": 1},
        {"name": "l", "type": ["null", "long"], "field-id": 2},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "by", "type": "bytes"},
        {"name": "s", "type": "string"},
        {"name": "fx", "type": {"type": "fixed", "name": "f3", "size": 3}},
        {"name": "e", "type": {"type": "enum", "name": "color", "symbols": ["r", "g", "b"]}},
        {"name": "a", "type": {"type": "array", "items": "string"}},
        {"name": "m", "type": {"type": "map", "values": ["null", "double"]}},
        {"name": "u", "type": ["null", "string", "f3", {"type": "record", "name": "inner", "fields": [
            {"name": "x", "type": "long"}, {"name": "y", "type": {"type": "array", "items": "f3"}}]}]},
        {"name": "again", "type": "inner"},
        {"name": "kv", "field-id": 3, "type": ["null", {"type": "array", "items": {
            "type": "record", "name": "k1_v2", "fields": [{"name": "key", "type": "int"},
                                                          {"name": "value", "type": "bytes"}]}}]},
        {"name": "nested", "field-id": 4, "type": {"type": "record", "name": "deep", "fields": [
            {"name": "skip", "type": "string"}, {"name": "count", "type": "long", "field-id": 5}]}},
    ]}


def _record(rng: random.Random, n: int) -> dict:
    inner = {"x": rng.randrange(-10**15, 10**15), "y": [bytes([n % 256] * 3)] * (n % 4)}
    return {
        "n": None, "b": bool(n % 2), "i": rng.randrange(-2**31, 2**31), "l": None if n % 3 == 0 else -n * 10**12,
        "f": 1.5, "d": -2.25, "by": bytes(range(n % 200)), "s": "é" * (n % 70), "fx": b"abc", "e": "gb"[n % 2],
        "a": ["x" * k for k in range(n % 5)], "m": {f"k{k}": (None if k % 2 else k / 3) for k in range(n % 4)},
        "u": [None, "str", b"xyz", inner][n % 4], "again": inner,
        "kv": None if n % 6 == 0 else [{"key": k, "value": bytes([k] * (k % 5))} for k in range(n % 9)],
        "nested": {"skip": "s" * n, "count": n * 1000},
    }


def test_the_skimmer_walks_every_type_to_the_record_end():
    rng = random.Random(7)
    parsed = fastavro.parse_schema(EVERY_TYPE)
    records = [_record(rng, n) for n in range(300)]
    buf = io.BytesIO()
    ends = []
    for r in records:
        fastavro.schemaless_writer(buf, parsed, r)
        ends.append(buf.tell())
    data = buf.getvalue()
    fields = [SkimField((1,), "long"), SkimField((2,), "long"), SkimField((3,), "map", frozenset({2, 5})),
              SkimField((4, 5), "long"), SkimField((9,), "long")]
    skimmer = compile_skimmer(EVERY_TYPE, fields)
    assert skimmer is not None
    pos = 0
    for r, end in zip(records, ends):
        pos, (i, l, kv, count, absent) = skimmer.skim(data, pos)
        assert pos == end
        assert (i, l, count, absent) == (r["i"], r["l"], r["nested"]["count"], None)
        assert kv == (None if r["kv"] is None else {d["key"]: d["value"] for d in r["kv"] if d["key"] in (2, 5)})


def test_blocks_with_byte_sizes_are_walked():
    # writers may give an array block a negative count followed by its size in bytes
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "a", "type": {"type": "array", "items": "long"}}, {"name": "i", "type": "int", "field-id": 1}]}
    body = bytes([3, 4, 2, 4, 0, 14])  # count -2, 2 bytes, items 1 and 2, end, then i = 7
    skimmer = compile_skimmer(schema, [SkimField((1,), "long")])
    assert skimmer.skim(body, 0) == (len(body), (7,))


def test_shapes_it_cannot_keep_fall_back():
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "m", "field-id": 1, "type": {"type": "map", "values": "long"}}]}
    assert compile_skimmer(schema, [SkimField((1,), "map", frozenset({1}))]) is None
    assert compile_skimmer(schema, [SkimField((1,), "long")]) is None


def test_hostile_lengths_fail_instead_of_walking_back():
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "s", "type": "string"}, {"name": "i", "type": "int", "field-id": 1}]}
    skimmer = compile_skimmer(schema, [SkimField((1,), "long")])
    assert skimmer.skim(bytes([2, 65, 4]), 0) == (3, (2,))
    with pytest.raises(ValueError, match="negative length"):
        skimmer.skim(bytes([1, 65, 4]), 0)
    empty_items = {"type": "record", "name": "r", "fields": [{"name": "a", "type": {"type": "array", "items": "null"}}]}
    assert compile_skimmer(empty_items, []) is None


@pytest.mark.parametrize("version", [1, 2, 3])
def test_kept_entries_of_every_partition_type_decode_as_a_full_read(version):
    # decimal, uuid, date, double, string, binary, fixed, time and timestamps as partition values,
    # null and not, and data files with every optional field set
    mio = MemIO()
    path = f"s3://bucket/t/metadata/rich-v{version}.avro"
    files = []
    other = rich.PARTITION[:3] + (2.5,) + rich.PARTITION[4:]
    for n, part in enumerate([rich.PARTITION, rich.NULL_PARTITION, other] * 3):
        files.append(DataFile(
            f"s3://bucket/t/data/é-{n}.parquet", FileFormat.PARQUET, part, 10 + n, 1234, column_sizes={1: 50},
            value_counts={1: 10 + n}, null_value_counts={1: 0}, nan_value_counts={5: n},
            lower_bounds={1: struct.pack("<q", n)}, upper_bounds={1: struct.pack("<q", 10 * n)},
            key_metadata=b"\x01\x02", split_offsets=(4, 1000), sort_order_id=0, spec_id=rich.SPEC.spec_id,
            first_row_id=None if version < 3 or n % 2 else 70 * n))
    with ManifestWriter(mio, path, rich.SPEC, rich.SCHEMA, version, ManifestContent.DATA, 55) as w:
        for n, f in enumerate(files):
            (w.add(f) if n % 2 else w.existing(f, 44, 3, 4))
    m = replace(w.close(), sequence_number=7, min_sequence_number=3, first_row_id=9000 if version >= 3 else None)
    specs = {rich.SPEC.spec_id: rich.SPEC}
    ev = InclusiveMetricsEvaluator(rich.SCHEMA, parse_filter("id > 15"))
    expected = [e for e in read_manifest(mio, m, specs=specs, skip_deleted=True) if ev.eval(e.data_file)]
    got = list(read_manifest_where(mio, m, {1}, ev.eval, specs=specs))
    assert got == expected and 0 < len(got) < len(files)
    assert {e.data_file.partition for e in got} == {rich.PARTITION, rich.NULL_PARTITION, other}
    assert {repr(e.data_file.partition[3]) for e in got} == {"-0.0", "None", "2.5"}


RUNS = {"type": "record", "name": "runs", "fields": [
    {"name": "a", "type": "long"}, {"name": "b", "type": "int"}, {"name": "c", "type": "long"},
    {"name": "kept", "type": "long", "field-id": 1},
    {"name": "d", "type": "long"}, {"name": "e", "type": "long"},
    {"name": "r", "type": {"type": "record", "name": "plain", "fields": [
        {"name": "x", "type": "long"}, {"name": "y", "type": "long"}, {"name": "s", "type": "string"},
        {"name": "z", "type": "int"}]}},
    {"name": "span", "field-id": 2, "type": ["null", {"type": "array", "items": "plain"}]},
    {"name": "last", "type": "long", "field-id": 3}]}


def test_runs_of_skipped_varints_are_stepped_over_together():
    # consecutive ints and longs outside the kept fields are skipped at once: values of every width
    rng = random.Random(3)
    widths = [0, 1, -1, 63, -64, 64, 2**20, -2**31, 2**62, -2**63, 2**63 - 1]
    parsed = fastavro.parse_schema(RUNS)
    span_schema = fastavro.parse_schema(["null", {"type": "array", "items": RUNS["fields"][6]["type"]}])
    records, ends, spans = [], [], []
    buf = io.BytesIO()
    for n in range(200):
        v = [rng.choice(widths) for _ in range(9)]
        plain = {"x": v[5], "y": v[6], "s": "t" * (n % 3), "z": v[1] >> 33}
        r = {"a": v[0], "b": v[1] >> 33, "c": v[2], "kept": v[3], "d": v[4], "e": v[5], "r": plain,
             "span": None if n % 4 == 0 else [plain] * (n % 3), "last": v[8]}
        fastavro.schemaless_writer(buf, parsed, r)
        one = io.BytesIO()
        fastavro.schemaless_writer(one, span_schema, r["span"])
        spans.append(one.getvalue())
        records.append(r)
        ends.append(buf.tell())
    data = buf.getvalue()
    skimmer = compile_skimmer(RUNS, [SkimField((1,), "long"), SkimField((2,), "span"), SkimField((3,), "long")])
    assert "VARINTS3" in skimmer.source and "VARINTS2" in skimmer.source  # the runs are coalesced
    pos = 0
    for r, end, encoded in zip(records, ends, spans):
        pos, (kept, span, last) = skimmer.skim(data, pos)
        assert (pos, kept, span, last) == (end, r["kept"], encoded, r["last"])
    with pytest.raises(ValueError, match="truncated varints"):
        skimmer.skim(bytes([0x80, 0x80]), 0)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_without_a_test_every_live_entry_is_decoded_as_a_full_read(version):
    mio, m = _manifest(version)
    specs = {0: SPEC}
    assert list(read_manifest_where(mio, m, (), None, specs=specs)) == list(
        read_manifest(mio, m, specs=specs, skip_deleted=True))
