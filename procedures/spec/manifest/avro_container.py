"""The Avro container files under manifests and manifest lists: reading their bytes and headers,
writing them with Java's codecs, and framing records already encoded into data blocks (what several
tasks writing one manifest share).  No Iceberg meaning here: :mod:`procedures.spec.manifest.reader`,
:mod:`~procedures.spec.manifest.writer` and :mod:`~procedures.spec.manifest.manifest_list` give the
records theirs.
"""

from __future__ import annotations

import io as _io
from typing import Any, Iterable, Mapping, Protocol

import fastavro

from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec import avro_codecs
from procedures.spec.avro_schemas import encode_long, without_logical_types

__all__ = [
    "GONE_FILE", "MetadataIO", "MetadataInput", "avro_codec", "write_avro", "avro_header", "avro_blocks",
    "write_encoded_avro", "read_bytes", "read_manifest_bytes", "read_stripped_manifest", "open_avro", "names_by_id",
    "record_type", "resolved_type", "read_manifest_metadata",
]

#: uncompressed bytes of records per Avro block (fastavro's default sync interval)
_BLOCK_BYTES = 16_000


class MetadataInput(Protocol):
    """What the readers need of an input file."""

    def read(self) -> bytes: ...


class MetadataIO(Protocol):
    """The FileIO subset manifests and manifest lists are read and written through."""

    def new_input(self, path: str) -> MetadataInput: ...

    def write(self, path: str, data: bytes, overwrite: bool = False) -> Any: ...


# ----------------------------------------------------------------------------------- codecs
_CODECS = {
    "deflate": "deflate", "gzip": "deflate", "null": "null", "none": "null", "uncompressed": "null",
    "snappy": "snappy", "zstd": "zstandard", "zstandard": "zstandard",
}


def avro_codec(name: str) -> str:
    """fastavro's name of a codec given by a table property (``gzip`` is deflate, ``zstd`` zstandard)."""
    codec = _CODECS.get(name.lower())
    if codec is None:
        raise ValidationError(f"unknown Avro codec {name!r}; use one of deflate, null, snappy, zstd")
    return codec


def write_avro(schema: dict[str, Any], records: Iterable[dict[str, Any]], metadata: dict[str, str],
               codec: str, level: int | None) -> bytes:
    """An Avro container file of ``records`` with the header ``metadata``, compressed with ``codec``."""
    avro_codecs.install()
    buf = _io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), records, codec=avro_codec(codec),
                    metadata=metadata, codec_compression_level=level)
    return buf.getvalue()


def avro_header(parsed: Any, metadata: dict[str, str], codec: str, level: int | None,
                sync: bytes | None) -> bytes:
    """The Avro container header fastavro writes for ``parsed`` (it ends with the sync marker:
    ``sync``, or a random one when None)."""
    head = _io.BytesIO()
    fastavro.writer(head, parsed, [], codec=codec, metadata=metadata, codec_compression_level=level,
                    sync_marker=sync)
    return head.getvalue()


def avro_blocks(parsed: Any, records: Iterable[dict[str, Any] | bytes], codec: str, level: int | None,
                sync: bytes) -> bytes:
    """``records`` (dicts, or bytes already encoded with ``parsed``) framed as Avro data blocks,
    each ending with ``sync``: what follows a header written with the same marker."""
    out: list[bytes] = []
    block: list[bytes] = []
    size = 0

    def flush() -> None:
        payload = avro_codecs.compress_block(codec, b"".join(block), level)
        out.extend((encode_long(len(block)), encode_long(len(payload)), payload, sync))

    for r in records:
        if not isinstance(r, bytes):
            buf = _io.BytesIO()
            fastavro.schemaless_writer(buf, parsed, r)
            r = buf.getvalue()
        block.append(r)
        size += len(r)
        if size >= _BLOCK_BYTES:
            flush()
            block, size = [], 0
    if block:
        flush()
    return b"".join(out)


def write_encoded_avro(schema: dict[str, Any], records: Iterable[dict[str, Any] | bytes],
                       metadata: dict[str, str], codec: str, level: int | None,
                       sync: bytes | None = None) -> bytes:
    """:func:`write_avro` for records of which some are already encoded: fastavro writes the header
    (the same one :func:`write_avro` writes) and the blocks are framed here."""
    avro_codecs.install()
    parsed = fastavro.parse_schema(schema)
    name = avro_codec(codec)
    header = avro_header(parsed, metadata, name, level, sync)
    return header + avro_blocks(parsed, records, name, level, header[-16:])


def read_bytes(io: MetadataIO, path: str) -> bytes:
    """The bytes of the file at ``path``; an unreadable one is an :class:`InvalidMetadataError` naming
    it, a missing one stays ``FileNotFoundError`` (callers decide what absence means)."""
    try:
        return io.new_input(path).read()
    except FileNotFoundError:
        raise
    except OSError as e:
        raise InvalidMetadataError(f"cannot read file: {e}", location=path) from e


#: the words of every error about a manifest or manifest list the metadata names but that is gone
#: (a Spark task's error carries them in its text, where the error's type is lost)
GONE_FILE = "the table's metadata references a file that is gone"


def read_manifest_bytes(io: MetadataIO, path: str) -> bytes:
    """:func:`read_bytes` of a manifest the table's metadata names: a gone one is damaged metadata
    (an :class:`InvalidMetadataError` naming it), which garbage collection must stop at rather than
    take for "references nothing"."""
    try:
        return read_bytes(io, path)
    except FileNotFoundError as e:
        raise InvalidMetadataError(f"the manifest is missing; {GONE_FILE}", location=path) from e



def read_stripped_manifest(io: MetadataIO, path: str) -> tuple[bytes, bytes, Any]:
    """A manifest's bytes (:func:`read_manifest_bytes`), the same file with its header schema's
    logical types stripped (what the skimming readers read), and the original schema."""
    data = read_manifest_bytes(io, path)
    try:
        stripped, schema = without_logical_types(data)
    except Exception as e:  # the header parser raises several unrelated types for corrupt files
        raise InvalidMetadataError(f"not a readable Avro file ({type(e).__name__}: {e})", location=path) from e
    return data, stripped, schema

def open_avro(data: bytes, path: str, strip: bool) -> tuple[Any, Any]:
    """A fastavro reader over ``data`` and the file's original schema; with ``strip`` values come
    back as raw ints and bytes (our representation, or cheap to convert) instead of datetimes."""
    avro_codecs.install()
    try:
        if strip:
            data, schema = without_logical_types(data)
            return fastavro.reader(_io.BytesIO(data)), schema
        reader = fastavro.reader(_io.BytesIO(data))
        return reader, reader.writer_schema
    except Exception as e:  # fastavro raises several unrelated types for corrupt files
        raise InvalidMetadataError(f"not a readable Avro file ({type(e).__name__}: {e})", location=path) from e


def names_by_id(record_schema: Mapping[str, Any]) -> dict[int, str]:
    """Field name by Iceberg field id of an Avro record schema (fields without an id left out)."""
    return {f["field-id"]: f["name"] for f in record_schema.get("fields", ()) if "field-id" in f}


def record_type(field_type: Any) -> Any:
    """The non-null branch of an optional field's union (the type itself when not a union)."""
    if isinstance(field_type, list):
        return next(t for t in field_type if t != "null")
    return field_type


def resolved_type(avro_type: Any, named: Mapping[str, Any]) -> Any:
    """:func:`record_type` with a named type's reference replaced by its definition (``named``)."""
    t = record_type(avro_type)
    return named.get(t, t) if isinstance(t, str) else t


def read_manifest_metadata(io: MetadataIO, path: str) -> dict[str, str]:
    """The key/value metadata of a manifest or manifest list header (``schema``, ``partition-spec``...)."""
    reader, _ = open_avro(read_bytes(io, path), path, strip=False)
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in reader.metadata.items() if not k.startswith("avro.")}
