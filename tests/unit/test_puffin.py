"""Puffin files and deletion vectors against Java's golden files, the spec's DV test vector and
pyroaring."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from procedures.errors import InvalidMetadataError
from procedures.spec.deletion_vector import deserialize_bitmap, deserialize_dv, serialize_bitmap, serialize_dv
from procedures.spec.puffin import BlobMetadata, PuffinFile, PuffinWriter
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
