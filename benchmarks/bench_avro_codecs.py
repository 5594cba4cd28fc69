"""Avro block codecs: ours (``procedures.spec.avro_codecs``: zlib for deflate, pyarrow for snappy and
zstandard) beside fastavro's own block writers and readers, on the same manifest blocks; outputs are
compared (each side decodes the other's payloads) before anything is timed.

fastavro's snappy needs ``cramjam`` and its zstandard ``backports.zstd`` (Python < 3.14), neither a
dependency of ours: pass ``--codec-libs DIR`` (a ``pip install --target DIR cramjam backports.zstd``)
to measure them; without them only deflate is compared.

Inputs: the uncompressed blocks of a manifest of ``10,000 x --scale`` entries with full column metrics,
as our writer frames them (16,000-byte blocks), and the same bytes as 1 MiB blocks.  Figures are the
time to compress / decompress every block once (min of ``--repeat``), and the compressed size.
"""

from __future__ import annotations

import io
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _codec_libs_first() -> None:
    # before fastavro is imported: it picks its codec libraries at import time
    if "--codec-libs" in sys.argv:
        sys.path.insert(0, sys.argv[sys.argv.index("--codec-libs") + 1])


_codec_libs_first()

import fastavro  # noqa: E402
import fastavro._read as c_read  # noqa: E402
import fastavro._write as c_write  # noqa: E402
from _common import Figure, arg_parser, print_figures, scratch_dir, time_call  # noqa: E402

from procedures.io.fileio import FileIO  # noqa: E402
from procedures.spec import avro_codecs  # noqa: E402
from procedures.spec.conversions import to_bytes  # noqa: E402
from procedures.spec.manifest.model import DataFile, FileFormat, ManifestContent  # noqa: E402
from procedures.spec.manifest.writer import ManifestWriter  # noqa: E402
from procedures.spec.partitioning import PartitionField, PartitionSpec  # noqa: E402
from procedures.spec.schema import Schema  # noqa: E402
from procedures.spec.transforms import parse_transform  # noqa: E402
from procedures.spec.types import DATE, LONG, STRING, NestedField  # noqa: E402

SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "data", STRING), NestedField(3, "d", DATE)))
SPEC = PartitionSpec(0, (PartitionField(3, 1000, parse_transform("day"), "d_day"),))
#: fastavro's codec names -> (our decompressor of a block's payload, as fastavro frames it)
CODECS = ("deflate", "snappy", "zstandard")


def manifest_blocks(root: Path, entries: int) -> list[bytes]:
    """The uncompressed data blocks of one manifest written by our ManifestWriter."""
    path = f"{root}/m.avro"
    w = ManifestWriter(FileIO(), path, SPEC, SCHEMA, 2, ManifestContent.DATA, snapshot_id=1, codec="null")
    for n in range(entries):
        w.add(DataFile(
            f"{root}/data/d_day={n % 365}/00000-{n}-4a1f3c9e-{n:05d}.parquet", FileFormat.PARQUET, (n % 365,),
            1000 + n, 4096 + n, column_sizes={1: 800, 2: 1200, 3: 300}, value_counts={1: 1000, 2: 1000, 3: 1000},
            null_value_counts={1: 0, 2: 3, 3: 0},
            lower_bounds={1: to_bytes(n, LONG), 2: b"aaaa", 3: to_bytes(n % 365, DATE)},
            upper_bounds={1: to_bytes(n + 999, LONG), 2: b"zzzz", 3: to_bytes(n % 365, DATE)},
            split_offsets=(4,), sort_order_id=0, spec_id=0,
        ))
    w.close()
    with open(path, "rb") as f:
        return [block.bytes_.getvalue() for block in fastavro.block_reader(f)]


def regroup(blocks: list[bytes], size: int) -> list[bytes]:
    """The same bytes in blocks of about ``size`` bytes."""
    data = b"".join(blocks)
    return [data[i:i + size] for i in range(0, len(data), size)]


def available(registry: dict, codec: str) -> bool:
    fn = registry.get(codec)
    return fn is not None and "missing" not in getattr(fn, "__qualname__", "")


def fastavro_frames(codec: str, blocks: list[bytes]) -> list[bytes]:
    """Each block as fastavro's block writer frames it: byte count, payload."""
    out = []
    for block in blocks:
        buf = io.BytesIO()
        c_write.BLOCK_WRITERS[codec](buf, block, None)
        out.append(buf.getvalue())
    return out


def our_frames(codec: str, blocks: list[bytes]) -> list[bytes]:
    """Each block as our writer frames it (manifest._avro_blocks): byte count, payload."""
    out = []
    for block in blocks:
        payload = avro_codecs.compress_block(codec, block, None)
        buf = io.BytesIO()
        c_write.BLOCK_WRITERS["null"](buf, payload, None)  # the byte count, then the bytes as they are
        out.append(buf.getvalue())
    return out


def payload(frame: bytes) -> bytes:
    """A frame's payload (after its zig-zag varint byte count)."""
    i = 0
    while frame[i] & 0x80:
        i += 1
    return frame[i + 1:]


def our_decompress(codec: str, data: bytes, crc: bool = True) -> bytes:
    """What our block reader does with one frame's payload (avro_codecs' registered readers; deflate
    is fastavro's own in both columns, zlib here); ``crc=False`` leaves out the snappy CRC-32 check,
    which fastavro's snappy reader does not make."""
    if codec == "deflate":
        return zlib.decompress(data, -15)
    if codec == "zstandard":
        return avro_codecs.zstd_decompress(data)
    out = avro_codecs.snappy_decompress(data[:-4])
    if crc and int.from_bytes(data[-4:], "big") != zlib.crc32(out):
        raise ValueError("snappy CRC")
    return out


def fastavro_decompress(codec: str, frame: bytes) -> bytes:
    """fastavro's own block reader on one frame."""
    return c_read.BLOCK_READERS[codec](io.BytesIO(frame)).getvalue()


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--codec-libs", default=None, help="folder with cramjam and backports.zstd")
    args = parser.parse_args()
    # fastavro's own codecs, before our writer registers the pyarrow ones where fastavro has none
    own = {c for c in CODECS if available(c_write.BLOCK_WRITERS, c) and available(c_read.BLOCK_READERS, c)}
    blocks16k = manifest_blocks(scratch_dir("bench-avro-codecs"), 10_000 * args.scale)
    inputs = {"16 KB blocks": blocks16k, "1 MiB blocks": regroup(blocks16k, 1 << 20)}
    raw = sum(map(len, blocks16k))
    figures = []
    for codec in CODECS:
        if codec not in own:
            print(f"{codec}: fastavro has no library for it here (see --codec-libs); skipped")
            continue
        for label, blocks in inputs.items():
            ours, theirs = our_frames(codec, blocks), fastavro_frames(codec, blocks)
            # each side reads the other's output back to the same bytes
            assert [fastavro_decompress(codec, f) for f in ours] == blocks, codec
            payloads = [payload(f) for f in theirs]
            assert [our_decompress(codec, p) for p in payloads] == blocks, codec
            case = f"{codec}, {label} ({raw / 1e6:.1f} MB raw)"

            def best(fn):
                return min(time_call(fn, repeat=args.repeat, warmup=args.warmup).runs) * 1e3

            figures += [
                Figure(case, "compress min", best(lambda: our_frames(codec, blocks)),
                       best(lambda: fastavro_frames(codec, blocks)), "ms"),
                Figure(case, "decompress min", best(lambda: [our_decompress(codec, p) for p in payloads]),
                       best(lambda: [fastavro_decompress(codec, f) for f in theirs]), "ms"),
                *([Figure(case, "decompress, no CRC min",
                          best(lambda: [our_decompress(codec, p, crc=False) for p in payloads]),
                          best(lambda: [fastavro_decompress(codec, f) for f in theirs]), "ms")]
                  if codec == "snappy" else []),
                Figure(case, "compressed size", sum(map(len, ours)) / 1e3, sum(map(len, theirs)) / 1e3, "KB"),
            ]
    print_figures(figures, "Avro block codecs: ours (zlib / pyarrow) vs fastavro's own (reference)")


if __name__ == "__main__":
    main()
