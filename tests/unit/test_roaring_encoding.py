"""The deletion-vector Roaring encoder (procedures/spec/deletion_vector.py) byte for byte against
pyroaring (CRoaring's portable serialization, which Java's RoaringBitmap writes too) and Java's golden
position indexes: every container kind, the size ties between them, the container count at which
the run format starts writing offsets, and seeded random position sets.

Each case names the rule it pins down, because a wrong choice here still round-trips through a
reader that is as lenient as the writer: only the bytes show it.
"""

from __future__ import annotations

import random
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec.deletion_vector import (
    DV_MAGIC,
    MAX_POSITION,
    deserialize_bitmap,
    deserialize_bitmap_array,
    deserialize_dv,
    deserialize_dv_array,
    position_bitmap,
    serialize_bitmap,
    serialize_dv,
)
from tests.helpers.references import import_reference

def _spread(count: int, base: int = 0) -> list[int]:
    """Values 0, 2, 4, ...: no two adjacent, so a run container never pays off."""
    return [base + 2 * i for i in range(count)]


def _runs(count: int, length: int, gap: int = 2, base: int = 0) -> list[int]:
    """``count`` runs of ``length`` consecutive values, ``gap`` missing values between runs."""
    return [base + r * (length + gap) + i for r in range(count) for i in range(length)]


def _container(key: int, lows: list[int]) -> list[int]:
    return [(key << 16) | v for v in lows]


def _pyroaring_bytes(values) -> bytes:
    pyroaring = import_reference("pyroaring", "pyroaring (the reference Roaring encoder) not installed: "
                                              "pip install -e '.[test]'")
    bm = pyroaring.BitMap64(values)
    bm.run_optimize()  # what Java's BitmapPositionDeleteIndex does before serializing
    return bm.serialize()


def _assert_like_pyroaring(values) -> bytes:
    values = list(values)
    expected = _pyroaring_bytes(values)
    ours = serialize_bitmap(values, dense_keys=False)
    assert ours.hex() == expected.hex()
    assert deserialize_bitmap(ours) == sorted(set(values))
    return ours


def _cookie_and_size(data: bytes) -> tuple[int, int]:
    """The first 32-bit bitmap's cookie (low 16 bits) and container count."""
    (cookie,) = struct.unpack_from("<I", data, 12)  # after the 8-byte map count and the 4-byte key
    if cookie & 0xFFFF == 12347:
        return 12347, (cookie >> 16) + 1
    return cookie, struct.unpack_from("<I", data, 16)[0]


# ------------------------------------------------------------------------------- container kinds
CONTAINER_CASES = {
    # array: at most 4096 values, no runs worth it
    "array, one value": [7],
    "array, spread": _spread(100),
    "array, 4096 values (the largest array)": _spread(4096),
    # bitmap: more than 4096 values, too many runs
    "bitmap, 4097 values (the smallest bitmap)": _spread(4097),
    "bitmap, every other value": _spread(32768),
    "bitmap, full but for every 64th": [v for v in range(65536) if v % 64],
    # run: fewer bytes than either
    "run, one long run": list(range(10_000)),
    "run, the whole container": list(range(65536)),
    "run, starts at 0 and ends at 65535": [0, 1, 2, 3, 65532, 65533, 65534, 65535],
    # run vs array ties: 2 + 4 * runs == 2 * values, i.e. values == 1 + 2 * runs: the array is kept
    "tie run/array {0,1,2}": [0, 1, 2],
    "tie run/array, 2 runs, 5 values": [0, 1, 2, 10, 11],
    "tie run/array, 3 runs, 7 values": [5, 6, 7, 20, 21, 40, 41],
    # one value more in the same runs: the run container is smaller
    "run/array, 2 runs, 6 values": [0, 1, 2, 10, 11, 12],
    "run/array, one run of 4": [100, 101, 102, 103],
    "array beats run by one byte pair": [0, 1, 10, 11, 20],
    # run vs bitmap (8192 bytes): 2047 runs (8190 bytes) win, 2048 runs (8194 bytes) lose
    "run, 2047 runs of 3 (8190 bytes)": _runs(2047, 3, gap=2),
    "bitmap, 2048 runs of 3 (8194 bytes as runs)": _runs(2048, 3, gap=2),
    "run, 2047 runs beside a bitmap's worth": _runs(2047, 20, gap=11),
}


@pytest.mark.parametrize("name", sorted(CONTAINER_CASES))
def test_one_container_of_each_kind_like_pyroaring(name):
    _assert_like_pyroaring(CONTAINER_CASES[name])


def test_the_run_array_tie_keeps_the_array():
    # Java and CRoaring write {0, 1, 2} as an array of three values, not as one run: the plain cookie
    data = _assert_like_pyroaring([0, 1, 2])
    assert _cookie_and_size(data) == (12346, 1)
    assert data[-6:] == struct.pack("<3H", 0, 1, 2)
    # one more value and the run is smaller: the run cookie and a single run (start 0, length - 1 = 3)
    data = _assert_like_pyroaring([0, 1, 2, 3])
    assert _cookie_and_size(data) == (12347, 1)
    assert data[-6:] == struct.pack("<3H", 1, 0, 3)


# ------------------------------------------------------------------------------- offsets
@pytest.mark.parametrize("containers", range(1, 8))
@pytest.mark.parametrize("kind", ["run", "array", "mixed"])
def test_offset_header_from_four_containers_when_there_are_runs(containers, kind):
    """The run cookie leaves out the container offsets below 4 containers (the "no offset
    threshold"); the plain cookie always writes them.  4 run containers: 73 bytes, not 57."""
    values = []
    for key in range(containers):
        if kind == "run" or (kind == "mixed" and key % 2 == 0):
            values += _container(key, list(range(100)))
        else:
            values += _container(key, _spread(10))
    data = _assert_like_pyroaring(values)
    cookie, size = _cookie_and_size(data)
    assert size == containers
    with_runs = kind != "array"
    assert cookie == (12347 if with_runs else 12346)
    offsets = not with_runs or containers >= 4
    header = 4 + (((containers + 7) // 8) if with_runs else 4) + 4 * containers + (4 * containers if offsets else 0)
    payload = sum(2 + 4 if kind == "run" or (kind == "mixed" and k % 2 == 0) else 20 for k in range(containers))
    assert len(data) == 8 + 4 + header + payload
    if kind == "run" and containers == 4:
        assert len(data) == 73


def test_offsets_point_at_each_container():
    values = _container(0, _spread(5)) + _container(1, list(range(300))) + _container(3, _spread(4097)) \
        + _container(9, [1, 2, 3, 9])
    data = _assert_like_pyroaring(values)
    body = data[12:]  # the 32-bit bitmap of key 0
    size = 4
    flags_end = 4 + 1
    headers = struct.unpack_from(f"<{2 * size}H", body, flags_end)
    offsets = struct.unpack_from(f"<{size}I", body, flags_end + 4 * size)
    assert [headers[2 * i] for i in range(size)] == [0, 1, 3, 9]
    assert offsets[0] == flags_end + 8 * size
    # array of 5 (10 bytes), one run (6 bytes), bitmap (8192 bytes), array of 4 (2 runs would take 10)
    assert [b - a for a, b in zip(offsets, offsets[1:])] == [10, 6, 8192]
    assert len(body) - offsets[-1] == 8


# ------------------------------------------------------------------------------- 64-bit keys
def test_several_32_bit_keys_like_pyroaring_and_dense_like_java():
    values = [3, 5, (1 << 32) | 7, (5 << 32) | 0xFFFFFFFF] + [(2 << 32) | v for v in range(70_000)]
    sparse = _assert_like_pyroaring(values)
    assert struct.unpack_from("<Q", sparse)[0] == 4
    dense = serialize_bitmap(values)
    # Java writes keys 0..5, the empty ones as a plain cookie with no containers
    assert struct.unpack_from("<Q", dense)[0] == 6
    assert deserialize_bitmap(dense) == sorted(values)
    empty_key = struct.pack("<I", 3) + struct.pack("<II", 12346, 0)
    assert empty_key in dense and len(dense) == len(sparse) + 2 * 12


def test_dv_blob_frames_the_portable_bitmap():
    values = list(range(10)) + [70_000, 70_001, 1 << 20]
    body = DV_MAGIC + _pyroaring_bytes(values)
    blob = serialize_dv(values)
    assert blob == struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))
    assert deserialize_dv(blob) == values


def test_java_golden_all_container_types_match_pyroaring(golden_dir: Path):
    """Java's golden index holds array, bitmap and run containers under keys 0 and 1: its bitmap
    bytes (after length and magic, before the CRC) are what pyroaring writes for the same set, and
    what we write."""
    data = (golden_dir / "org/apache/iceberg/deletes/all-container-types-position-index.bin").read_bytes()
    positions = deserialize_dv(data)
    assert _pyroaring_bytes(positions) == data[8:-4]
    assert serialize_dv(positions) == data
    kinds = set()
    for key in (0, 1):
        bitmap = serialize_bitmap([p & 0xFFFFFFFF for p in positions if p >> 32 == key])
        kinds.add(_cookie_and_size(bitmap)[0])
    assert kinds == {12347}  # both bitmaps hold a run container


# ------------------------------------------------------------------------------- random sets
def _random_positions(rng: random.Random) -> set[int]:
    """Containers of every kind, in one or more 32-bit keys, sizes near the thresholds."""
    out: set[int] = set()
    keys = rng.sample(range(3), rng.randint(1, 2))
    for key in keys:
        for container in rng.sample(range(8), rng.randint(1, 6)):
            base = (key << 32) | (container << 16)
            kind = rng.choice(["array", "bitmap", "run", "tie", "near-bitmap", "mixed"])
            if kind == "array":
                lows = rng.sample(range(65536), rng.choice([1, 2, 100, 4095, 4096]))
            elif kind == "bitmap":
                lows = rng.sample(range(65536), rng.choice([4097, 5000, 30000]))
            elif kind == "run":
                start = rng.randrange(60000)
                lows = list(range(start, start + rng.randint(1, 5535)))
            elif kind == "tie":
                # 1 + 2 * runs values in ``runs`` runs (one of 3, the others of 2): array and run tie
                runs, start, gap = rng.randint(1, 6), rng.randrange(30000), rng.randint(2, 9)
                lows = [start, start + 1, start + 2] + [start + (2 + gap) * r + i for r in range(1, runs) for i in (1, 2)]
            elif kind == "near-bitmap":
                lows = _runs(rng.choice([2046, 2047, 2048, 2049]), 3, gap=rng.randint(2, 20) // 2 * 2 or 2)
                lows = [v for v in lows if v < 65536]
            else:
                lows = sorted(set(rng.sample(range(65536), 50)) | set(range(1000, 1000 + rng.randint(0, 200))))
            out.update(base | v for v in lows)
    return out


@pytest.mark.parametrize("seed", range(30))
def test_random_position_sets_like_pyroaring_and_round_trip(seed):
    rng = random.Random(seed)
    values = _random_positions(rng)
    _assert_like_pyroaring(values)
    blob = serialize_dv(values)
    assert deserialize_dv(blob) == sorted(values)


# ------------------------------------------------------------------------------- many containers
def test_run_flags_past_the_first_byte_like_pyroaring():
    """Run flags are one bit per container, eight to a byte: containers 8, 16 and 17 set bits of the
    second and third bytes."""
    values = []
    for key in range(20):
        values += _container(key, list(range(50)) if key in (3, 8, 16, 17) else _spread(5))
    data = _assert_like_pyroaring(values)
    assert data[16:19] == bytes([0b00001000, 0b00000001, 0b00000011])


def test_more_than_32768_containers_like_pyroaring():
    """The run cookie keeps ``containers - 1`` in its high 16 bits: past 32768 containers the cookie
    has its top bit set, and must be read and written unsigned."""
    values = [key << 16 for key in range(40_000)] + list(range(1, 100))  # container 0 is a run
    data = _assert_like_pyroaring(values)
    assert _cookie_and_size(data) == (12347, 40_000)


# ------------------------------------------------------------------------------- positions refused
def test_positions_outside_the_supported_range_are_refused_naming_the_first_bad_one():
    assert MAX_POSITION == ((2**31 - 2) << 32) | 0xFFFFFFFF
    # the largest supported position is written, under key 2**31 - 2
    top = serialize_bitmap([5, MAX_POSITION], dense_keys=False)
    assert deserialize_bitmap(top, max_key=2**31 - 2) == [5, MAX_POSITION]
    assert top == _pyroaring_bytes([5, MAX_POSITION])
    for values, bad in (([-1], -1), ([-1, 5], -1), ([-3, -1, 5], -3), ([5, MAX_POSITION + 1], MAX_POSITION + 1),
                        ([0, MAX_POSITION + 1], MAX_POSITION + 1), ([1, 2, MAX_POSITION + 1], MAX_POSITION + 1)):
        with pytest.raises(ValidationError, match=rf"^deletion vector position {bad} is outside 0\.\.{MAX_POSITION}$"):
            serialize_bitmap(values)


# ------------------------------------------------------------------------------- what the reader refuses
def _one_key(bitmap32: bytes, key: int = 0) -> bytes:
    return struct.pack("<QI", 1, key) + bitmap32


def _dv_blob(vector: bytes) -> bytes:
    body = DV_MAGIC + vector
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def test_the_reader_refuses_malformed_bitmaps_saying_what_is_wrong():
    good = serialize_bitmap([1, 5])
    # CRoaring reads the 32-bit bitmaps; its reason follows the key and byte where it failed
    bad32 = r"^roaring bitmap: the 32-bit Roaring bitmap of key 0 at byte 12 is truncated or malformed \({}\)$"
    with pytest.raises(InvalidMetadataError, match=bad32.format("Could not deserialize bitmap")):
        deserialize_bitmap(good[:-1])
    with pytest.raises(InvalidMetadataError, match="^roaring bitmap: 3 trailing bytes after the bitmap$"):
        deserialize_bitmap(good + b"abc")
    with pytest.raises(InvalidMetadataError, match=bad32.format("Could not deserialize bitmap")):
        deserialize_bitmap(_one_key(struct.pack("<II", 0x1234, 0)))
    with pytest.raises(InvalidMetadataError, match=bad32.format(".+")):
        deserialize_bitmap(_one_key(b""))
    # a count of 2**64 - 1 bitmaps with none following is truncated, not an empty map
    with pytest.raises(InvalidMetadataError, match="^roaring bitmap is truncated: needs 12 bytes, has 8$"):
        deserialize_bitmap(b"\xff" * 8)
    # the same container key twice, and the same 32-bit key twice
    twice = struct.pack("<II", 12346, 2) + struct.pack("<4H", 5, 0, 5, 0) + struct.pack("<2I", 24, 26) \
        + struct.pack("<2H", 1, 2)
    with pytest.raises(InvalidMetadataError,
                       match=bad32.format("Invalid bitmap after deserialization: keys not strictly increasing")):
        deserialize_bitmap(_one_key(twice))
    # values of an array container out of order (a reader that trusts the order would misplace them)
    unordered = struct.pack("<II", 12346, 1) + struct.pack("<2H", 0, 1) + struct.pack("<I", 16) + struct.pack("<2H", 9, 3)
    with pytest.raises(InvalidMetadataError,
                       match=bad32.format("Invalid bitmap after deserialization: array elements not strictly increasing")):
        deserialize_bitmap(_one_key(unordered))
    bitmap = struct.pack("<II", 12346, 1) + struct.pack("<2H", 0, 0) + struct.pack("<I", 16) + struct.pack("<H", 9)
    with pytest.raises(InvalidMetadataError, match=r"^roaring bitmap: bitmap keys are not ascending \(3 after 3\)$"):
        deserialize_bitmap(struct.pack("<Q", 2) + struct.pack("<I", 3) + bitmap + struct.pack("<I", 3) + bitmap)
    with pytest.raises(InvalidMetadataError, match=r"^roaring bitmap: bitmap key 7 is larger than the supported 6$"):
        deserialize_bitmap(_one_key(bitmap, key=7), max_key=6)
    assert deserialize_bitmap(_one_key(bitmap, key=6), max_key=6) == [(6 << 32) | 9]


def test_32_bit_keys_are_unsigned():
    values = [((2**31 + 5) << 32) | 7, ((2**32 - 1) << 32) | 1]
    data = _pyroaring_bytes(values)
    assert deserialize_bitmap(data) == values


def test_a_dv_refuses_keys_past_javas_limit_and_names_its_location():
    at_limit = serialize_bitmap([((2**31 - 2) << 32) | 3], dense_keys=False)
    assert deserialize_dv(_dv_blob(at_limit)) == [((2**31 - 2) << 32) | 3]
    past = _pyroaring_bytes([((2**31 - 1) << 32) | 3])
    with pytest.raises(InvalidMetadataError,
                       match=r"^deletion vector in s3://b/x\.puffin: bitmap key 2147483647 is larger than the supported 2147483646$"):
        deserialize_dv(_dv_blob(past), location="s3://b/x.puffin")


def test_dv_framing_errors_say_what_is_wrong():
    blob = serialize_dv([1, 3])
    with pytest.raises(InvalidMetadataError, match="^deletion vector is truncated: 11 bytes, at least 12 needed$"):
        deserialize_dv(blob[:11])
    # 12 bytes is a well-framed blob around an empty vector: the vector's own reader says what is missing
    with pytest.raises(InvalidMetadataError, match="^deletion vector is truncated: needs 8 bytes, has 0$"):
        deserialize_dv(_dv_blob(b""))
    with pytest.raises(InvalidMetadataError, match="^deletion vector in s3://b/x: bad magic 00000000, expected d1d33964$"):
        deserialize_dv(blob[:4] + b"\0\0\0\0" + blob[8:], location="s3://b/x")
    with pytest.raises(InvalidMetadataError, match=r"^deletion vector: length field says 4294967280 \+ 8 bytes, blob has 44$"):
        deserialize_dv(struct.pack(">I", 0xFFFFFFF0) + blob[4:])


def test_a_run_container_of_32768_runs_is_read():
    """A run container may hold up to 32768 runs (every other value): its run count fills 16 bits
    and must be read unsigned.  No smallest-encoding writer makes one, but the format allows it."""
    evens = list(range(0, 65536, 2))
    bitmap32 = struct.pack("<I", 12347) + b"\x01" + struct.pack("<2H", 0, len(evens) - 1) \
        + struct.pack("<H", 32768) + struct.pack(f"<{2 * 32768}H", *(x for v in evens for x in (v, 0)))
    data = _one_key(bitmap32)
    pyroaring = import_reference("pyroaring", "pyroaring (the reference Roaring encoder) not installed")
    assert list(pyroaring.BitMap64.deserialize(data)) == evens
    assert deserialize_bitmap(data) == evens


# ------------------------------------------------------------------------------- arrays in, arrays out
@pytest.mark.parametrize("seed", range(5))
def test_int64_arrays_read_and_write_like_lists(seed):
    """The scan reads DVs as int64 arrays and writers may pass numpy positions: both forms give the
    bytes and positions of the list forms, under several keys and the dense keys Java writes."""
    values = sorted(_random_positions(random.Random(seed)))
    array = np.array(values[::-1], dtype=np.int64)  # unsorted: the bitmap sorts
    blob = serialize_dv(array)
    assert blob == serialize_dv(values)
    read = deserialize_dv_array(blob)
    assert read.dtype == np.int64 and read.tolist() == values
    assert deserialize_bitmap_array(serialize_bitmap(array)).tolist() == values
    assert len(position_bitmap(array)) == len(values)
    assert deserialize_dv_array(serialize_dv([])).tolist() == []


def test_numpy_positions_outside_the_range_are_refused_before_conversion():
    # int64 -1 would wrap to 2**64 - 1 as an unsigned 64-bit position
    for values, bad in (([-1, 5], -1), ([5, MAX_POSITION + 1], MAX_POSITION + 1)):
        with pytest.raises(ValidationError, match=rf"^deletion vector position {bad} is outside 0\.\.{MAX_POSITION}$"):
            serialize_dv(np.array(values, dtype=np.int64))
    with pytest.raises(ValidationError, match=rf"^deletion vector position {2**64 + 3} is outside"):
        serialize_dv(iter([1, 2**64 + 3]))


def test_a_bitmap_given_is_not_changed():
    bitmap = position_bitmap(range(100))
    copy = bitmap.copy()
    assert serialize_dv(bitmap) == serialize_dv(list(range(100)))
    assert bitmap == copy


def test_array_reader_refuses_keys_past_int64():
    data = _pyroaring_bytes([((2**31) << 32) | 7])
    assert deserialize_bitmap(data) == [((2**31) << 32) | 7]
    with pytest.raises(InvalidMetadataError, match=r"^roaring bitmap: bitmap key 2147483648 is too large for int64 positions$"):
        deserialize_bitmap_array(data)
