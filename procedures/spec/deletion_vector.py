"""Deletion vectors (spec "Deletion Vectors", Puffin blob type ``deletion-vector-v1``; on-disk notes
section 8.3), in pure Python.

A DV blob is ``length (4 bytes BE) | magic D1 D3 39 64 | vector | CRC-32 (4 bytes BE)`` where the
length and the CRC cover magic plus vector, and the vector is a Roaring "portable 64-bit" map:
an 8-byte little-endian count of 32-bit bitmaps, then per bitmap its 4-byte key (high 32 bits of
the positions) and a standard portable 32-bit RoaringBitmap.

The reader handles array, bitmap and run containers, with and without the run cookie, and sparse
keys.  The writer reproduces Java's ``BitmapPositionDeleteIndex.serialize()`` byte for byte: every
container takes the smallest of the array/bitmap/run encodings (``runOptimize``) and, like Java's
dense bitmap array, keys between 0 and the largest key are written even when empty.
"""

from __future__ import annotations

import struct
import zlib
from typing import Iterable

from procedures.errors import InvalidMetadataError, ValidationError

__all__ = [
    "DV_BLOB_TYPE",
    "DV_MAGIC",
    "MAX_POSITION",
    "serialize_bitmap",
    "deserialize_bitmap",
    "serialize_dv",
    "deserialize_dv",
]

DV_BLOB_TYPE = "deletion-vector-v1"
DV_MAGIC = bytes.fromhex("D1D33964")
#: Java supports keys up to 2**31 - 2, so positions stay below (2**31 - 1) << 32
MAX_POSITION = ((2**31 - 2) << 32) | 0xFFFFFFFF

_COOKIE_NO_RUNS = 12346
_COOKIE_RUNS = 12347
_NO_OFFSET_THRESHOLD = 4
_ARRAY_MAX = 4096
_BITMAP_BYTES = 8192


# ------------------------------------------------------------------------------- decoding
class _Cursor:
    __slots__ = ("data", "pos", "what")

    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = memoryview(data), 0, what

    def take(self, n: int) -> memoryview:
        end = self.pos + n
        if end > len(self.data):
            raise InvalidMetadataError(f"{self.what} is truncated: needs {end} bytes, has {len(self.data)}")
        out = self.data[self.pos:end]
        self.pos = end
        return out

    def unpack(self, fmt: str) -> tuple:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))


def _read_bitmap32(cur: _Cursor, base: int, out: list[int]) -> None:
    (cookie,) = cur.unpack("<I")
    if cookie & 0xFFFF == _COOKIE_RUNS:
        size = (cookie >> 16) + 1
        run_flags = bytes(cur.take((size + 7) // 8))
        has_offsets = size >= _NO_OFFSET_THRESHOLD
    elif cookie == _COOKIE_NO_RUNS:
        (size,) = cur.unpack("<I")
        run_flags = b""
        has_offsets = True
    else:
        raise InvalidMetadataError(f"{cur.what}: unknown roaring cookie {cookie} at byte {cur.pos - 4}")
    header = cur.unpack(f"<{2 * size}H")
    if has_offsets:
        cur.take(4 * size)  # container offsets; containers follow in order anyway
    last_key = -1
    for i in range(size):
        key, card = header[2 * i], header[2 * i + 1] + 1
        if key <= last_key:
            raise InvalidMetadataError(f"{cur.what}: container keys are not ascending ({key} after {last_key})")
        last_key = key
        hi = base | (key << 16)
        if run_flags and run_flags[i // 8] >> (i % 8) & 1:
            (n_runs,) = cur.unpack("<H")
            runs = cur.unpack(f"<{2 * n_runs}H")
            for r in range(n_runs):
                start = hi | runs[2 * r]
                out.extend(range(start, start + runs[2 * r + 1] + 1))
        elif card <= _ARRAY_MAX:
            out.extend(hi | v for v in cur.unpack(f"<{card}H"))
        else:
            words = cur.unpack("<1024Q")
            for w_i, w in enumerate(words):
                word_base = hi | (w_i << 6)
                while w:
                    low = w & -w
                    out.append(word_base | (low.bit_length() - 1))
                    w ^= low


def deserialize_bitmap(data: bytes, *, max_key: int | None = None, what: str = "roaring bitmap") -> list[int]:
    """Positions of a portable 64-bit Roaring map, ascending.

    ``max_key`` rejects larger 32-bit keys (Java's limit is ``2**31 - 2``); keys must ascend.
    """
    cur = _Cursor(data, what)
    (count,) = cur.unpack("<Q")
    out: list[int] = []
    last = -1
    for _ in range(count):
        (key,) = cur.unpack("<I")
        if key <= last:
            raise InvalidMetadataError(f"{what}: bitmap keys are not ascending ({key} after {last})")
        if max_key is not None and key > max_key:
            raise InvalidMetadataError(f"{what}: bitmap key {key} is larger than the supported {max_key}")
        last = key
        _read_bitmap32(cur, key << 32, out)
    if cur.pos != len(cur.data):
        raise InvalidMetadataError(f"{what}: {len(cur.data) - cur.pos} trailing bytes after the bitmap")
    return out


def deserialize_dv(blob: bytes, *, location: str | None = None) -> list[int]:
    """Deleted positions of a ``deletion-vector-v1`` blob, checking length, magic and CRC."""
    where = f"deletion vector in {location}" if location else "deletion vector"
    if len(blob) < 12:
        raise InvalidMetadataError(f"{where} is truncated: {len(blob)} bytes, at least 12 needed")
    (length,) = struct.unpack(">I", blob[:4])
    if length + 8 != len(blob):
        raise InvalidMetadataError(f"{where}: length field says {length} + 8 bytes, blob has {len(blob)}")
    body = blob[4:4 + length]
    if body[:4] != DV_MAGIC:
        raise InvalidMetadataError(f"{where}: bad magic {bytes(body[:4]).hex()}, expected {DV_MAGIC.hex()}")
    (crc,) = struct.unpack(">I", blob[4 + length:])
    actual = zlib.crc32(body) & 0xFFFFFFFF
    if crc != actual:
        raise InvalidMetadataError(f"{where}: CRC mismatch (stored {crc:08x}, computed {actual:08x})")
    return deserialize_bitmap(body[4:], max_key=2**31 - 2, what=where)


# ------------------------------------------------------------------------------- encoding
def _runs(lows: list[int]) -> list[tuple[int, int]]:
    runs = []
    start = prev = lows[0]
    for v in lows[1:]:
        if v != prev + 1:
            runs.append((start, prev - start))
            start = v
        prev = v
    runs.append((start, prev - start))
    return runs


def _container(lows: list[int]) -> tuple[bool, bytes]:
    """(is_run, payload) choosing the smallest encoding, ties going to array/bitmap like runOptimize."""
    card = len(lows)
    runs = _runs(lows)
    run_size = 2 + 4 * len(runs)
    plain_size = 2 * card if card <= _ARRAY_MAX else _BITMAP_BYTES
    if run_size < plain_size:
        return True, struct.pack(f"<H{2 * len(runs)}H", len(runs), *(x for r in runs for x in r))
    if card <= _ARRAY_MAX:
        return False, struct.pack(f"<{card}H", *lows)
    words = [0] * 1024
    for v in lows:
        words[v >> 6] |= 1 << (v & 63)
    return False, struct.pack("<1024Q", *words)


def _bitmap32(lows32: list[int]) -> bytes:
    groups: list[tuple[int, list[int]]] = []
    for v in lows32:
        key = v >> 16
        if not groups or groups[-1][0] != key:
            groups.append((key, []))
        groups[-1][1].append(v & 0xFFFF)
    containers = [(key, len(vals), *_container(vals)) for key, vals in groups]
    size = len(containers)
    any_run = any(c[2] for c in containers)
    head = bytearray()
    if any_run:
        head += struct.pack("<I", _COOKIE_RUNS | ((size - 1) << 16))
        flags = bytearray((size + 7) // 8)
        for i, c in enumerate(containers):
            if c[2]:
                flags[i // 8] |= 1 << (i % 8)
        head += flags
    else:
        head += struct.pack("<II", _COOKIE_NO_RUNS, size)
    for key, card, _, _ in containers:
        head += struct.pack("<HH", key, card - 1)
    if not any_run or size >= _NO_OFFSET_THRESHOLD:
        offset = len(head) + 4 * size
        for c in containers:
            head += struct.pack("<I", offset)
            offset += len(c[3])
    return bytes(head) + b"".join(c[3] for c in containers)


def serialize_bitmap(positions: Iterable[int], *, dense_keys: bool = True) -> bytes:
    """The portable 64-bit Roaring serialization of a set of non-negative positions.

    ``dense_keys`` writes an (empty) bitmap for every key from 0 to the largest, as Java does;
    without it only keys holding positions are written (CRoaring, pyroaring).
    """
    values = sorted(set(positions))
    if values and (values[0] < 0 or values[-1] > MAX_POSITION):
        bad = values[0] if values[0] < 0 else values[-1]
        raise ValidationError(f"deletion vector position {bad} is outside 0..{MAX_POSITION}")
    by_key: dict[int, list[int]] = {}
    for v in values:
        by_key.setdefault(v >> 32, []).append(v & 0xFFFFFFFF)
    keys = list(range(max(by_key) + 1)) if (dense_keys and by_key) else sorted(by_key)
    parts = [struct.pack("<Q", len(keys))]
    for key in keys:
        parts.append(struct.pack("<I", key))
        parts.append(_bitmap32(by_key.get(key, [])) if key in by_key else struct.pack("<II", _COOKIE_NO_RUNS, 0))
    return b"".join(parts)


def serialize_dv(positions: Iterable[int]) -> bytes:
    """A ``deletion-vector-v1`` blob for the positions, byte-identical to Java's."""
    body = DV_MAGIC + serialize_bitmap(positions)
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
