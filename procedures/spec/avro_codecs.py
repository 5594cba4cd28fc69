"""The ``zstandard`` and ``snappy`` Avro codecs through pyarrow, for manifests and manifest lists.

fastavro needs extra libraries for these two codecs (``backports.zstd`` / ``zstandard`` and
``cramjam`` / ``python-snappy``) and otherwise refuses such files.  Tables written with
``write.avro.compression-codec`` set to ``zstd`` or ``snappy`` are common, and pyarrow (a runtime
dependency) already ships both codecs, so :func:`install` registers block readers and writers built
on it, only where fastavro has no working codec of its own.

Why not fastavro's own codecs (with ``cramjam`` and ``backports.zstd`` as two more dependencies):
benchmarks/bench_avro_codecs.py on the blocks of a 10,000-entry manifest (2.0 MB raw, 16 KB and
1 MiB blocks; min of 5, ours / fastavro's, two runs on a shared 2-core machine) measured
compression at 0.86-0.90x (snappy) and 0.43-0.97x (zstandard); decompression at 1.03-1.50x
(zstandard, pyarrow's stream decoder, which Java's frames without a content size need) and
2.2-2.3x for snappy, 1.6x of it without our CRC-32 check (fastavro's snappy reader checks no CRC):
0.3-0.6 ms per 2 MB of manifest, well under 1% of decoding its records.  Deflate is zlib on both
sides (0.83-1.15x, noise): fastavro reads deflate blocks itself, and :func:`compress_block` stays
because fastavro's deflate writer leaves 3 bytes of the zlib checksum after each raw stream.

Avro's block layout (the Avro specification, "Object Container Files"): a block's payload is
preceded by its length as a zig-zag varint; a zstandard payload is one or more zstd frames; a
snappy payload is raw snappy followed by the big-endian CRC-32 of the uncompressed bytes.
"""

from __future__ import annotations

import io as _io
import struct
import zlib
from functools import lru_cache
from typing import Any, BinaryIO

import pyarrow as pa

from procedures.errors import InvalidMetadataError

__all__ = ["install", "zstd_decompress", "snappy_decompress", "snappy_compress", "compress_block"]

_installed = False


def _read_long(fo: BinaryIO) -> int:
    shift = 0
    n = 0
    while True:
        byte = fo.read(1)
        if not byte:
            raise InvalidMetadataError("Avro block ends inside its length")
        b = byte[0]
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return (n >> 1) ^ -(n & 1)
        shift += 7


def _write_long(fo: BinaryIO, value: int) -> None:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    fo.write(bytes(out))


def _read_payload(fo: BinaryIO, length: int) -> bytes:
    data = fo.read(length)
    if len(data) != length:
        raise InvalidMetadataError(f"Avro block truncated: {len(data)} of {length} bytes")
    return data


@lru_cache(maxsize=None)
def _arrow_codec(name: str, level: int | None = None) -> pa.Codec:
    # a Codec's one-shot compress/decompress keep no state between calls; building one costs about
    # as much as decompressing a small block
    return pa.Codec(name) if level is None else pa.Codec(name, compression_level=level)


def zstd_decompress(data: bytes) -> bytes:
    """All zstd frames of ``data`` (streaming writers such as Java's omit the content size, so the
    frames are decoded as a stream)."""
    return pa.CompressedInputStream(pa.BufferReader(data), "zstd").read()


def _snappy_length(data: bytes) -> int:
    # raw snappy starts with the uncompressed length as a little-endian base-128 varint
    n = shift = 0
    for b in data[:5]:
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n
        shift += 7
    raise InvalidMetadataError("snappy block has no valid length preamble")


def snappy_decompress(data: bytes) -> bytes:
    """Raw snappy ``data`` decompressed."""
    return _arrow_codec("snappy").decompress(data, decompressed_size=_snappy_length(data), asbytes=True)


def snappy_compress(data: bytes) -> bytes:
    """``data`` as raw snappy."""
    return _arrow_codec("snappy").compress(data, asbytes=True)


def compress_block(codec: str, block: bytes, level: int | None) -> bytes:
    """A container block's payload in fastavro's codec ``codec`` (``null``, ``deflate``, ``snappy``,
    ``zstandard``), as it follows the block's byte count: raw deflate, snappy with its CRC-32."""
    if codec == "null":
        return block
    if codec == "deflate":
        c = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, -15)
        return c.compress(block) + c.flush()
    if codec == "snappy":
        return snappy_compress(block) + struct.pack(">I", zlib.crc32(block) & 0xFFFFFFFF)
    if codec == "zstandard":
        return _arrow_codec("zstd", level).compress(block, asbytes=True)
    raise InvalidMetadataError(f"no block compressor for Avro codec {codec!r}")


def _zstd_read_block(fo: BinaryIO) -> _io.BytesIO:
    return _io.BytesIO(zstd_decompress(_read_payload(fo, _read_long(fo))))


def _snappy_read_block(fo: BinaryIO) -> _io.BytesIO:
    length = _read_long(fo)
    data = _snappy_decompress_checked(_read_payload(fo, length - 4), _read_payload(fo, 4))
    return _io.BytesIO(data)


def _snappy_decompress_checked(payload: bytes, crc: bytes) -> bytes:
    data = snappy_decompress(payload)
    if struct.unpack(">I", crc)[0] != zlib.crc32(data) & 0xFFFFFFFF:
        raise InvalidMetadataError("snappy Avro block fails its CRC-32 check")
    return data


def _zstd_write_block(fo: BinaryIO, block: bytes, level: Any) -> None:
    data = compress_block("zstandard", block, level)
    _write_long(fo, len(data))
    fo.write(data)


def _snappy_write_block(fo: BinaryIO, block: bytes, level: Any) -> None:
    data = compress_block("snappy", block, level)
    _write_long(fo, len(data))
    fo.write(data)


def _works(registry: dict[str, Any], name: str) -> bool:
    # fastavro registers a stand-in that raises when the codec's library is missing
    fn = registry.get(name)
    return fn is not None and "missing" not in getattr(fn, "__qualname__", "")


def install() -> None:
    """Register the pyarrow-based codecs with fastavro where it lacks them (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    try:
        # the compiled modules fastavro's reader and writer use (their block functions take files)
        import fastavro._read as c_read  # noqa: PLC0415
        import fastavro._write as c_write  # noqa: PLC0415
    except ImportError:  # a pure-Python fastavro: its own codec errors stay
        return

    readers = {"zstandard": _zstd_read_block, "snappy": _snappy_read_block}
    writers = {"zstandard": _zstd_write_block, "snappy": _snappy_write_block}
    codecs = {"zstandard": "zstd", "snappy": "snappy"}
    for name, arrow_name in codecs.items():
        if not pa.Codec.is_available(arrow_name):
            continue
        if not _works(c_read.BLOCK_READERS, name):
            c_read.BLOCK_READERS[name] = readers[name]
        if not _works(c_write.BLOCK_WRITERS, name):
            c_write.BLOCK_WRITERS[name] = writers[name]
