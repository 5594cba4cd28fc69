"""Puffin files and deletion vectors against Java's golden files, the spec's DV test vector and
pyroaring."""

from __future__ import annotations

import json
import random
import re
import struct
import sys
import types
from pathlib import Path

import pytest

from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec.deletion_vector import deserialize_bitmap, deserialize_dv, serialize_bitmap, serialize_dv
from procedures.io.fileio import FileIO
from procedures.spec.puffin import MAGIC, BlobMetadata, PuffinFile, PuffinWriter, read_puffin
from tests.helpers.references import import_reference

BITMAP_OFFSET = 1 << 32
CONTAINER_OFFSET = 1 << 16


def _pos(bitmap: int, container: int, value: int) -> int:
    return bitmap * BITMAP_OFFSET + container * CONTAINER_OFFSET + value


def _golden(golden_dir: Path, name: str) -> bytes:
    return (golden_dir / "org/apache/iceberg/deletes" / name).read_bytes()


def test_dv_spec_test_vector() -> None:
    blob = serialize_dv([3, 1])
    assert blob == bytes.fromhex(
        "00000024 D1D33964 0100000000000000 00000000"
        " 3A300000 01000000 00000100 10000000 01000300"
        " 683497A9"
    )
    assert len(blob) == 44
    assert deserialize_dv(blob) == [1, 3]


# the sets Java's TestBitmapPositionDeleteIndex serializes into its golden files (ranges end-exclusive)
JAVA_INDEXES = {
    "empty-position-index.bin": [],
    "small-alternating-values-position-index.bin": [1, 3, 5, 7, 9],
    "small-and-large-values-position-index.bin": [100, 101, 2**31 - 1 + 100, 2**31 - 1 + 101],
    "all-container-types-position-index.bin": sorted(
        [_pos(0, 0, 5), _pos(0, 0, 7)]
        + list(range(_pos(0, 1, 1), _pos(0, 1, 1000)))
        + list(range(_pos(0, 2, 1), _pos(0, 2, CONTAINER_OFFSET - 1)))
        + [_pos(1, 0, 10), _pos(1, 0, 20)]
        + list(range(_pos(1, 1, 10), _pos(1, 1, 500)))
        + list(range(_pos(1, 2, 1), _pos(1, 2, CONTAINER_OFFSET - 1)))
    ),
}


@pytest.mark.parametrize("name", sorted(JAVA_INDEXES))
def test_java_position_index_golden_files(golden_dir: Path, name: str) -> None:
    data = _golden(golden_dir, name)
    assert deserialize_dv(data) == JAVA_INDEXES[name]
    assert serialize_dv(JAVA_INDEXES[name]) == data  # byte-identical to Java, incl. run containers


def test_portable_64bit_golden_maps(golden_dir: Path) -> None:
    assert deserialize_bitmap(_golden(golden_dir, "64mapempty.bin")) == []
    assert deserialize_bitmap(_golden(golden_dir, "64map32bitvals.bin")) == list(range(10))
    spread = deserialize_bitmap(_golden(golden_dir, "64mapspreadvals.bin"))
    assert spread == [(key << 32) | v for key in range(10) for v in range(10)]
    # Java rejects this file ("Invalid unsigned key"); its first key is 4022190063
    with pytest.raises(InvalidMetadataError, match="key 4022190063 is larger"):
        deserialize_bitmap(_golden(golden_dir, "64maphighvals.bin"), max_key=2**31 - 2)


def test_dv_errors() -> None:
    blob = serialize_dv([1, 3])
    with pytest.raises(InvalidMetadataError, match="CRC mismatch"):
        deserialize_dv(blob[:-1] + bytes([blob[-1] ^ 1]), location="s3://b/x.puffin")
    with pytest.raises(InvalidMetadataError, match="bad magic"):
        deserialize_dv(blob[:4] + b"\0\0\0\0" + blob[8:])
    with pytest.raises(InvalidMetadataError, match="length field"):
        deserialize_dv(blob[:-2])


def test_dense_keys_like_java() -> None:
    data = serialize_bitmap([5, (2 << 32) | 1])
    assert struct.unpack_from("<Q", data)[0] == 3  # keys 0, 1 (empty), 2
    assert deserialize_bitmap(data) == [5, (2 << 32) | 1]
    assert struct.unpack_from("<Q", serialize_bitmap([5, (2 << 32) | 1], dense_keys=False))[0] == 2


def test_encoder_matches_pyroaring_for_random_sets() -> None:
    pyroaring = import_reference("pyroaring", "pyroaring (the reference Roaring encoder) not installed: pip install -e '.[test]'")
    rng = random.Random(1234)
    for _ in range(40):
        n = rng.choice([1, 3, 100, 4096, 5000, 60000])
        upper = rng.choice([200, 70_000, 1 << 20, 1 << 34])
        values = {rng.randrange(upper) for _ in range(n)}
        if rng.random() < 0.5:
            start = rng.randrange(1 << 20)
            values |= set(range(start, start + rng.randrange(1, 20000)))
        bm = pyroaring.BitMap64(values)
        bm.run_optimize()
        expected = bm.serialize()
        assert serialize_bitmap(values, dense_keys=False) == expected
        assert deserialize_bitmap(expected) == sorted(values)


def _puffin(golden_dir: Path, name: str) -> PuffinFile:
    return PuffinFile((golden_dir / "org/apache/iceberg/puffin/v1" / name).read_bytes(), name)


def test_empty_puffin(golden_dir: Path) -> None:
    p = _puffin(golden_dir, "empty-puffin-uncompressed.bin")
    assert p.blobs == [] and p.properties == {}
    assert p.footer_size == 28  # Java's EMPTY_PUFFIN_UNCOMPRESSED_FOOTER_SIZE


SECOND_BLOB = "some blob \u0000 binary data 🤯 that is not very very very very very very long, is it?".encode()


@pytest.mark.parametrize("name,codec", [("sample-metric-data-uncompressed.bin", None),
                                        ("sample-metric-data-compressed-zstd.bin", "zstd")])
def test_sample_metric_data(golden_dir: Path, name: str, codec: str | None) -> None:
    if codec == "zstd":
        import_reference("zstandard", "zstandard not installed: the golden zstd Puffin file cannot be read")
    p = _puffin(golden_dir, name)
    assert p.properties == {"created-by": "Test 1234"}
    first, second = p.blobs
    assert (first.type, first.fields, first.offset, first.compression_codec) == ("some-blob", (1,), 4, codec)
    assert (second.type, second.fields, second.offset, second.compression_codec) == (
        "some-other-blob", (2,), first.offset + first.length, codec)
    assert (first.snapshot_id, first.sequence_number) == (2, 1)
    assert p.read_blob(first) == b"abcdefghi"
    assert p.read_blob(second) == SECOND_BLOB
    if codec == "zstd":
        assert p.footer_size == 314  # Java's SAMPLE_METRIC_DATA_COMPRESSED_ZSTD_FOOTER_SIZE


def test_write_read_round_trip_with_dv() -> None:
    w = PuffinWriter(created_by="test")
    stats = w.add("apache-datasketches-theta-v1", b"sketch", [1], snapshot_id=7, sequence_number=3,
                  properties={"ndv": "4"})
    dv, cardinality = w.add_deletion_vector("s3://b/data/a.parquet", [9, 1, 3])
    data = w.finish()
    assert cardinality == 3
    assert dv == BlobMetadata("deletion-vector-v1", (2147483645,), -1, -1, 4 + 6,
                              # len, magic, count, key, cookie, size, key/card, offset, 3 values, crc
                              4 + 4 + 8 + 4 + 4 + 4 + 4 + 4 + 6 + 4,
                              None, {"referenced-data-file": "s3://b/data/a.parquet", "cardinality": "3"})
    p = PuffinFile(data)
    assert p.blobs == [stats, dv]
    assert p.properties == {"created-by": "test"}
    assert p.read_blob(stats) == b"sketch"
    assert p.deletion_vectors() == {"s3://b/data/a.parquet": [1, 3, 9]}
    assert data[:4] == b"PFA1" and data[-4:] == b"PFA1"
    assert w.footer_size == len(data) - dv.offset - dv.length


def test_puffin_errors_name_the_file() -> None:
    data = PuffinWriter().finish()
    with pytest.raises(InvalidMetadataError, match="x.puffin: not a Puffin file"):
        PuffinFile(b"XXXX" + data[4:], "x.puffin")
    with pytest.raises(InvalidMetadataError, match="y.puffin: Puffin file is truncated"):
        PuffinFile(data[:-2], "y.puffin")
    with pytest.raises(InvalidMetadataError, match="z.puffin: Puffin file is truncated"):
        PuffinFile(b"PFA1", "z.puffin")
    bad_size = data[:-12] + struct.pack("<i", 9999) + data[-8:]
    with pytest.raises(InvalidMetadataError, match="invalid Puffin footer size"):
        PuffinFile(bad_size, "w.puffin")


# ------------------------------------------------------------------ edges found by mutation testing
def _java_puffin_bytes(golden_dir: Path, name: str) -> bytes:
    return (golden_dir / "org/apache/iceberg/puffin/v1" / name).read_bytes()


def test_writer_writes_javas_golden_files_byte_for_byte(golden_dir: Path) -> None:
    """Java's footer: compact JSON, its key order, no codec or properties keys when there are none."""
    w = PuffinWriter(created_by="Test 1234")
    first = w.add("some-blob", b"abcdefghi", [1], snapshot_id=2, sequence_number=1)
    second = w.add("some-other-blob", SECOND_BLOB, [2], snapshot_id=2, sequence_number=1)
    data = w.finish()
    assert data == _java_puffin_bytes(golden_dir, "sample-metric-data-uncompressed.bin")
    assert w.finish() is data  # finishing twice gives the same file
    assert (first.offset, first.length, second.offset, second.length) == (4, 9, 13, len(SECOND_BLOB))
    assert w.footer_size == len(data) - 13 - len(SECOND_BLOB)
    assert PuffinWriter(created_by=None).finish() == _java_puffin_bytes(golden_dir, "empty-puffin-uncompressed.bin")
    assert PuffinWriter(created_by="").finish() == _java_puffin_bytes(golden_dir, "empty-puffin-uncompressed.bin")
    with pytest.raises(ValidationError, match="^Puffin writer is already finished$"):
        w.add("late", b"x", [1])


def test_writer_properties_and_created_by() -> None:
    assert PuffinFile(PuffinWriter().finish()).properties == {"created-by": "iceberg-procedures"}
    kept = PuffinWriter({"created-by": "someone", "k": "v"}, created_by="me")
    assert PuffinFile(kept.finish()).properties == {"created-by": "someone", "k": "v"}
    assert PuffinFile(PuffinWriter({"k": "v"}, created_by="me").finish()).properties == {"k": "v", "created-by": "me"}


def test_pyiceberg_reads_our_puffin_files() -> None:
    import_reference("zstandard", "zstandard not installed: PyIceberg's Puffin reader imports it")
    pyi_puffin = import_reference("pyiceberg.table.puffin", "PyIceberg not installed: pip install -e '.[test]'")
    pyi_dv = import_reference("pyiceberg.table.deletion_vector", "PyIceberg not installed: pip install -e '.[test]'")
    w = PuffinWriter({"k": "v"}, created_by="me")
    w.add("apache-datasketches-theta-v1", b"plain", [1, 4], snapshot_id=7, sequence_number=3, properties={"ndv": "4"})
    w.add("some-blob", SECOND_BLOB * 3, [2], compression_codec="zstd")
    ours = PuffinFile(w.finish())
    theirs = pyi_puffin.PuffinFile(w.finish())
    assert theirs.footer.properties == {"k": "v", "created-by": "me"}
    assert [(b.type, tuple(b.fields), b.snapshot_id, b.sequence_number, b.offset, b.length, b.compression_codec,
             b.properties) for b in theirs.footer.blobs] == [
        (b.type, b.fields, b.snapshot_id, b.sequence_number, b.offset, b.length, b.compression_codec, b.properties)
        for b in ours.blobs]
    assert [theirs.get_blob_payload(b) for b in theirs.footer.blobs] == [b"plain", SECOND_BLOB * 3]
    assert [ours.read_blob(b) for b in ours.blobs] == [b"plain", SECOND_BLOB * 3]
    assert ours.blobs[1].length < len(SECOND_BLOB * 3)  # really compressed
    assert ours.deletion_vectors() == {}
    # a deletion-vector file (PyIceberg takes every blob of it for a DV)
    w = PuffinWriter()
    w.add_deletion_vector("s3://b/data/a.parquet", [9, 1, 3, 70_000, (1 << 32) + 5])
    w.add_deletion_vector("s3://b/data/b.parquet", [0])
    ours, theirs = PuffinFile(w.finish()), pyi_puffin.PuffinFile(w.finish())
    dvs = {dv.referenced_data_file: dv.to_vector().to_pylist() for dv in pyi_dv.deletion_vectors_from_puffin_file(theirs)}
    assert dvs == {"s3://b/data/a.parquet": [1, 3, 9, 70_000, (1 << 32) + 5], "s3://b/data/b.parquet": [0]}
    assert ours.deletion_vectors() == dvs
    assert [b.properties for b in ours.blobs] == [
        {"referenced-data-file": "s3://b/data/a.parquet", "cardinality": "5"},
        {"referenced-data-file": "s3://b/data/b.parquet", "cardinality": "1"}]
    assert [b.properties for b in theirs.footer.blobs] == [b.properties for b in ours.blobs]


def _footer_file(payload: bytes, blobs_area: bytes = b"", flags: int = 0) -> bytes:
    return MAGIC + blobs_area + MAGIC + payload + struct.pack("<iI", len(payload), flags) + MAGIC


def _blob_json(**overrides) -> dict:
    blob = {"type": "t", "fields": [1], "snapshot-id": 1, "sequence-number": 1, "offset": 4, "length": 2}
    blob.update(overrides)
    return {k: v for k, v in blob.items() if v is not None}


@pytest.mark.parametrize("data,message", [
    (MAGIC + b"\0" * 8 + MAGIC, "Puffin file is truncated: 16 bytes"),
    (b"XXXXYYYY" + PuffinWriter().finish()[4:], "not a Puffin file: starts with b'XXXX', expected b'PFA1'"),
    (PuffinWriter().finish()[:-1] + b"2", "Puffin file is truncated or corrupt: ends with b'PFA2', expected b'PFA1'"),
    (MAGIC + MAGIC + struct.pack("<iI", -1, 0) + MAGIC, "invalid Puffin footer size -1 for a 20-byte file"),
    (MAGIC + MAGIC + struct.pack("<iI", 9, 0) + MAGIC, "invalid Puffin footer size 9 for a 20-byte file"),
    (MAGIC + b"ab" + _footer_file(b"{}")[4:].replace(MAGIC, b"PFA0", 1), "invalid Puffin file: expected footer magic at offset 6"),
    (_footer_file(b""), "Puffin footer is not valid JSON"),  # the smallest file: 20 bytes
    (_footer_file(b"\xff{}"), "Puffin footer is not valid JSON"),
    (_footer_file(b"[1]"), "Puffin footer has no 'blobs' list"),
    (_footer_file(b'{"blobs": 3}'), "Puffin footer has no 'blobs' list"),
    (_footer_file(json.dumps({"blobs": [_blob_json(length=None)]}).encode(), b"ab"),
     "Puffin blob metadata lacks 'length': {'type'"),
    (_footer_file(json.dumps({"blobs": [_blob_json(fields=["x"])]}).encode(), b"ab"),
     "malformed Puffin blob metadata {'type': 't', 'fields': \\['x'\\]"),
    (_footer_file(json.dumps({"blobs": [_blob_json(offset=0, length=1)]}).encode(), b"ab"),
     "Puffin blob t at offset 0 with length 1 lies outside the blob area 4..6"),
    (_footer_file(json.dumps({"blobs": [_blob_json(offset=5, length=2)]}).encode(), b"ab"),
     "Puffin blob t at offset 5 with length 2 lies outside the blob area 4..6"),
], ids=["short", "head magic", "tail magic", "negative size", "size past start", "footer magic", "empty footer",
        "not utf-8", "not an object", "blobs not a list", "missing key", "bad field", "blob before", "blob after"])
def test_corrupt_puffin_files_are_refused_naming_the_file(data: bytes, message: str) -> None:
    with pytest.raises(InvalidMetadataError, match="^c.puffin: " + message):
        PuffinFile(data, "c.puffin")


def test_a_blob_just_inside_the_blob_area_is_read() -> None:
    data = _footer_file(json.dumps({"blobs": [_blob_json(offset=4, length=2)]}).encode(), b"ab")
    p = PuffinFile(data, "c.puffin")
    assert p.read_blob(p.blobs[0]) == b"ab" and p.footer_size == len(data) - 6


def test_read_puffin_names_the_path(tmp_path) -> None:
    path = tmp_path / "x.stats"
    path.write_bytes(b"XXXX" + PuffinWriter().finish()[4:])
    with pytest.raises(InvalidMetadataError, match=f"^{re.escape(str(path))}: not a Puffin file"):
        read_puffin(FileIO(), str(path))
    path.write_bytes(PuffinWriter().finish())
    assert read_puffin(FileIO(), str(path)).location == str(path)


def test_unreadable_blobs_name_the_file(monkeypatch) -> None:
    w = PuffinWriter()
    w.add("t", b"x", [1], compression_codec="zstd")
    data = w.finish().replace(b'"zstd"', b'"snap"')
    p = PuffinFile(data, "c.puffin")
    with pytest.raises(InvalidMetadataError, match="^c.puffin: unknown Puffin compression codec 'snap'$"):
        p.read_blob(p.blobs[0])
    w = PuffinWriter()
    w.add("deletion-vector-v1", serialize_dv([1]), [1])
    p = PuffinFile(w.finish(), "c.puffin")
    with pytest.raises(InvalidMetadataError, match="^c.puffin: deletion vector blob lacks 'referenced-data-file'$"):
        p.deletion_vectors()
    w = PuffinWriter()
    w.add("deletion-vector-v1", serialize_dv([1])[:-1] + b"\0", [1], properties={"referenced-data-file": "d"})
    p = PuffinFile(w.finish(), "c.puffin")
    with pytest.raises(InvalidMetadataError, match="^deletion vector in c.puffin: CRC mismatch"):
        p.deletion_vectors()
    w = PuffinWriter()
    w.add("t", b"x", [1], compression_codec="zstd")
    p = PuffinFile(w.finish(), "c.puffin")
    monkeypatch.setitem(sys.modules, "zstandard", None)  # as if not installed
    with pytest.raises(InvalidMetadataError, match="^c.puffin: blob is zstd-compressed; install 'zstandard' to read it$"):
        p.read_blob(p.blobs[0])
    with pytest.raises(ValidationError, match="^writing zstd-compressed Puffin blobs needs 'zstandard': pip install zstandard$"):
        PuffinWriter().add("t", b"x", [1], compression_codec="zstd")
    with pytest.raises(ValidationError, match="^unknown Puffin compression codec 'snap'; use zstd or lz4$"):
        PuffinWriter().add("t", b"x", [1], compression_codec="snap")


def _fake_lz4(monkeypatch) -> None:
    """lz4 is no dependency of the tests: a stand-in frame codec (reversed bytes) shows that lz4 blobs
    and a compressed footer go through ``lz4.frame``."""
    lz4 = types.ModuleType("lz4")
    lz4.frame = types.SimpleNamespace(compress=lambda d: b"LZ" + bytes(d)[::-1],
                                      decompress=lambda d: bytes(d)[2:][::-1] if d[:2] == b"LZ" else 1 / 0)
    monkeypatch.setitem(sys.modules, "lz4", lz4)
    monkeypatch.setitem(sys.modules, "lz4.frame", lz4.frame)


def test_lz4_blobs_and_footers_go_through_lz4_frame(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "lz4", None)
    monkeypatch.setitem(sys.modules, "lz4.frame", None)
    with pytest.raises(InvalidMetadataError, match="^c.puffin: data is lz4-compressed; install 'lz4' to read it$"):
        PuffinFile(_footer_file(b"LZ" + b'{"blobs":[]}'[::-1], flags=1), "c.puffin")
    with pytest.raises(ValidationError, match="^writing lz4-compressed Puffin blobs needs 'lz4': pip install lz4$"):
        PuffinWriter().add("t", b"x", [1], compression_codec="lz4")
    _fake_lz4(monkeypatch)
    p = PuffinFile(_footer_file(b"LZ" + b'{"blobs":[],"properties":{"a":"b"}}'[::-1], flags=1), "c.puffin")
    assert p.properties == {"a": "b"}
    w = PuffinWriter()
    meta = w.add("t", b"abc", [1], compression_codec="lz4")
    assert (meta.compression_codec, meta.length) == ("lz4", 5)
    p = PuffinFile(w.finish())
    assert p.read_blob(p.blobs[0]) == b"abc"
    assert w.finish()[4:9] == b"LZcba"
