"""Deletion vectors (spec "Deletion Vectors", Puffin blob type ``deletion-vector-v1``; on-disk notes
section 8.3), with the Roaring bitmaps of ``pyroaring`` (CRoaring).

A DV blob is ``length (4 bytes BE) | magic D1 D3 39 64 | vector | CRC-32 (4 bytes BE)`` where the
length and the CRC cover magic plus vector, and the vector is a Roaring "portable 64-bit" map:
an 8-byte little-endian count of 32-bit bitmaps, then per bitmap its 4-byte key (high 32 bits of
the positions) and a standard portable 32-bit RoaringBitmap.

CRoaring reads and writes the 32-bit bitmaps (array, bitmap and run containers, with and without the
run cookie) and, after ``run_optimize``, chooses each container's encoding as Java's ``runOptimize``
does, so a bitmap's bytes are Java's.  This module keeps the 64-bit envelope: Java's
``BitmapPositionDeleteIndex.serialize()`` writes every key from 0 to the largest, empty ones
included (CRoaring writes only keys holding positions), and the reader checks what CRoaring's
64-bit reader would let through or not name: ascending keys, Java's key limit, trailing bytes.
benchmarks/bench_deletion_vectors.py measured the change from the former pure-Python codec.
"""

from __future__ import annotations

import struct
import zlib
from array import array
from typing import Iterable

import numpy as np
from pyroaring import BitMap, BitMap64

from procedures.errors import InvalidMetadataError, ValidationError

__all__ = [
    "DV_BLOB_TYPE",
    "DV_MAGIC",
    "MAX_POSITION",
    "position_bitmap",
    "serialize_bitmap",
    "deserialize_bitmap",
    "deserialize_bitmap_array",
    "serialize_dv",
    "deserialize_dv",
    "deserialize_dv_array",
]

DV_BLOB_TYPE = "deletion-vector-v1"
DV_MAGIC = bytes.fromhex("D1D33964")
#: Java supports keys up to 2**31 - 2, so positions stay below (2**31 - 1) << 32
MAX_POSITION = ((2**31 - 2) << 32) | 0xFFFFFFFF
_MAX_KEY = 2**31 - 2
#: an empty portable 32-bit bitmap: the no-run cookie and a container count of 0
_EMPTY_BITMAP32 = struct.pack("<II", 12346, 0)
_KEY_SPAN = 1 << 32


# ------------------------------------------------------------------------------- decoding
def _truncated(what: str, needs: int, has: int) -> InvalidMetadataError:
    return InvalidMetadataError(f"{what} is truncated: needs {needs} bytes, has {has}")


def _bitmaps(data: bytes, max_key: int | None, what: str) -> list[tuple[int, BitMap]]:
    """The (key, 32-bit bitmap) pairs of a portable 64-bit map, checked."""
    view = memoryview(data)
    size = len(view)
    if size < 8:
        raise _truncated(what, 8, size)
    (count,) = struct.unpack_from("<Q", view)
    pos = 8
    out: list[tuple[int, BitMap]] = []
    last = -1
    for _ in range(count):
        if pos + 4 > size:
            raise _truncated(what, pos + 4, size)
        (key,) = struct.unpack_from("<I", view, pos)
        if key <= last:
            raise InvalidMetadataError(f"{what}: bitmap keys are not ascending ({key} after {last})")
        if max_key is not None and key > max_key:
            raise InvalidMetadataError(f"{what}: bitmap key {key} is larger than the supported {max_key}")
        last = key
        pos += 4
        try:
            bitmap = BitMap.deserialize(view[pos:])
        except (ValueError, IndexError) as e:  # IndexError: CRoaring's reader given no bytes at all
            raise InvalidMetadataError(
                f"{what}: the 32-bit Roaring bitmap of key {key} at byte {pos} is truncated or malformed ({e})"
            ) from None
        # the containers keep the encodings they were read in, so the bitmap re-serializes to the
        # bytes it was read from: that is how far CRoaring read
        pos += len(bitmap.serialize())
        out.append((key, bitmap))
    if pos != size:
        raise InvalidMetadataError(f"{what}: {size - pos} trailing bytes after the bitmap")
    return out


def deserialize_bitmap_array(data: bytes, *, max_key: int | None = None, what: str = "roaring bitmap") -> np.ndarray:
    """Positions of a portable 64-bit Roaring map, ascending, as an int64 array.

    ``max_key`` rejects larger 32-bit keys (Java's limit is ``2**31 - 2``); keys must ascend.
    Positions under keys of 2**31 and above do not fit int64: read those with :func:`deserialize_bitmap`.
    """
    parts = []
    for key, bitmap in _bitmaps(data, max_key, what):
        if key >= 2**31:
            raise InvalidMetadataError(f"{what}: bitmap key {key} is too large for int64 positions")
        low = np.frombuffer(bitmap.to_array(), dtype=np.uint32)
        parts.append(low.astype(np.int64) | (key << 32) if key else low.astype(np.int64))
    if not parts:
        return np.empty(0, dtype=np.int64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def deserialize_bitmap(data: bytes, *, max_key: int | None = None, what: str = "roaring bitmap") -> list[int]:
    """Positions of a portable 64-bit Roaring map, ascending.

    ``max_key`` rejects larger 32-bit keys (Java's limit is ``2**31 - 2``); keys must ascend.  A list
    of millions of Python ints costs 0.4-0.6 s (benchmarks/bench_deletion_vectors.py); readers that
    need an array take :func:`deserialize_bitmap_array`, 10-20x faster there.
    """
    out: list[int] = []
    for key, bitmap in _bitmaps(data, max_key, what):
        low = bitmap.to_array()
        out.extend(low.tolist() if key == 0
                   else (np.frombuffer(low, dtype=np.uint32).astype(np.uint64) | np.uint64(key << 32)).tolist())
    return out


def _dv_vector(blob: bytes, location: str | None) -> tuple[memoryview, str]:
    """The vector of a ``deletion-vector-v1`` blob (after checking length, magic and CRC) and the
    words naming the blob in errors."""
    where = f"deletion vector in {location}" if location else "deletion vector"
    if len(blob) < 12:
        raise InvalidMetadataError(f"{where} is truncated: {len(blob)} bytes, at least 12 needed")
    (length,) = struct.unpack_from(">I", blob)
    if length + 8 != len(blob):
        raise InvalidMetadataError(f"{where}: length field says {length} + 8 bytes, blob has {len(blob)}")
    body = memoryview(blob)[4:4 + length]
    if body[:4] != DV_MAGIC:
        raise InvalidMetadataError(f"{where}: bad magic {bytes(body[:4]).hex()}, expected {DV_MAGIC.hex()}")
    (crc,) = struct.unpack_from(">I", blob, 4 + length)
    actual = zlib.crc32(body) & 0xFFFFFFFF
    if crc != actual:
        raise InvalidMetadataError(f"{where}: CRC mismatch (stored {crc:08x}, computed {actual:08x})")
    return body[4:], where


def deserialize_dv(blob: bytes, *, location: str | None = None) -> list[int]:
    """Deleted positions of a ``deletion-vector-v1`` blob, checking length, magic and CRC."""
    vector, where = _dv_vector(blob, location)
    return deserialize_bitmap(vector, max_key=_MAX_KEY, what=where)


def deserialize_dv_array(blob: bytes, *, location: str | None = None) -> np.ndarray:
    """:func:`deserialize_dv` as an ascending int64 array (no Python list in between)."""
    vector, where = _dv_vector(blob, location)
    return deserialize_bitmap_array(vector, max_key=_MAX_KEY, what=where)


# ------------------------------------------------------------------------------- encoding
def _out_of_range(positions: Iterable[int]) -> ValidationError:
    lowest = min(positions)
    bad = lowest if lowest < 0 else max(positions)
    return ValidationError(f"deletion vector position {bad} is outside 0..{MAX_POSITION}")


def position_bitmap(positions: Iterable[int] | BitMap64 | np.ndarray) -> BitMap64:
    """The positions as a run-optimized ``BitMap64``, refusing any outside ``0..MAX_POSITION``.

    An integer numpy array is handed to CRoaring as one buffer (building from a Python iterable
    walks it element by element, several times slower).
    """
    if isinstance(positions, BitMap64):
        bitmap = positions.copy()
    elif isinstance(positions, np.ndarray) and positions.dtype.kind in "iu":
        if positions.size and (positions.min() < 0 or positions.max() > MAX_POSITION):
            raise _out_of_range(positions.tolist())
        # array('Q') is the buffer pyroaring's constructor copies in one call
        bitmap = BitMap64(array("Q", positions.astype(np.uint64, copy=False).tobytes()))
    else:
        if not isinstance(positions, (list, tuple, set, frozenset, range)):
            positions = list(positions)
        try:
            bitmap = BitMap64(positions)
        except OverflowError:  # below 0 or past 2**64 - 1
            raise _out_of_range(positions) from None
    if bitmap and bitmap.max() > MAX_POSITION:
        raise ValidationError(f"deletion vector position {bitmap.max()} is outside 0..{MAX_POSITION}")
    bitmap.run_optimize()  # what Java's BitmapPositionDeleteIndex does before serializing
    return bitmap


def serialize_bitmap(positions: Iterable[int] | BitMap64 | np.ndarray, *, dense_keys: bool = True) -> bytes:
    """The portable 64-bit Roaring serialization of a set of non-negative positions.

    ``dense_keys`` writes an (empty) bitmap for every key from 0 to the largest, as Java does;
    without it only keys holding positions are written (CRoaring, pyroaring).
    """
    bitmap = position_bitmap(positions)
    if not bitmap or not dense_keys or bitmap.max() < _KEY_SPAN:
        return bitmap.serialize()
    # CRoaring writes the keys holding positions; their 32-bit bitmaps re-serialize to the same bytes
    present = dict(_bitmaps(bitmap.serialize(), None, "roaring bitmap"))
    top = max(present)
    parts = [struct.pack("<Q", top + 1)]
    for key in range(top + 1):
        parts.append(struct.pack("<I", key) + (present[key].serialize() if key in present else _EMPTY_BITMAP32))
    return b"".join(parts)


def serialize_dv(positions: Iterable[int] | BitMap64 | np.ndarray) -> bytes:
    """A ``deletion-vector-v1`` blob for the positions, byte-identical to Java's."""
    body = DV_MAGIC + serialize_bitmap(positions)
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
