"""The Avro container layer under manifests and manifest lists (procedures.spec.manifest.avro_container):
files framed here are the files fastavro writes, byte for byte, and reading errors name the file.
Written against the survivors of mutation testing (docs/testing.md)."""

from __future__ import annotations

import io

import fastavro
import pytest

from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec.manifest.avro_container import (
    GONE_FILE, avro_codec, names_by_id, open_avro, read_bytes, read_manifest_bytes, read_manifest_metadata,
    read_stripped_manifest, resolved_type, write_avro, write_encoded_avro,
)

SCHEMA = {"type": "record", "name": "r", "fields": [{"name": "s", "type": "string"}]}
SYNC = bytes(range(16))


class _IO:
    """An input that fails (or returns ``data``) the way a FileIO does."""

    def __init__(self, data: bytes | None = None, error: Exception | None = None) -> None:
        self.data, self.error = data, error

    def new_input(self, path: str):
        outer = self

        class _In:
            def read(self) -> bytes:
                if outer.error is not None:
                    raise outer.error
                return outer.data

        return _In()


def _records(n: int, width: int) -> list[dict]:
    return [{"s": f"x{i}".ljust(width, "y")} for i in range(n)]


def _fastavro(records, codec: str, level: int | None) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(SCHEMA), records, codec=codec, codec_compression_level=level,
                    sync_marker=SYNC, metadata={"k": "v"})
    return buf.getvalue()


# 98-character strings encode as 100 bytes: 160 of them fill a block exactly (fastavro's 16,000 bytes);
# 5331-character ones as 5333: three come one byte short of it
@pytest.mark.parametrize("n,width", [(160, 98), (161, 98), (500, 98), (1000, 30), (3, 20_000), (0, 1), (8, 5331)])
@pytest.mark.parametrize("codec,level", [("null", None), ("zstd", 1), ("zstd", 19)])
def test_encoded_files_are_the_files_fastavro_writes(n: int, width: int, codec: str, level: int | None) -> None:
    """Blocks cut where fastavro cuts them, the given sync marker, the codec at the given level: the same
    bytes as fastavro's own writer (deflate is left out: fastavro's deflate writer leaves checksum
    bytes after each raw stream, which ours does not, see avro_codecs)."""
    records = _records(n, width)
    expected = _fastavro(records, avro_codec(codec), level)
    assert write_encoded_avro(SCHEMA, records, {"k": "v"}, codec, level, SYNC) == expected
    # records already encoded frame the same
    encoded = []
    for r in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, fastavro.parse_schema(SCHEMA), r)
        encoded.append(buf.getvalue())
    assert write_encoded_avro(SCHEMA, encoded, {"k": "v"}, codec, level, SYNC) == expected


@pytest.mark.parametrize("codec", ["deflate", "zstd"])
def test_the_compression_level_is_used(codec: str) -> None:
    records = _records(2000, 60)
    for write in (lambda level: write_avro(SCHEMA, records, {}, codec, level),
                  lambda level: write_encoded_avro(SCHEMA, records, {}, codec, level, SYNC)):
        fast, small = write(1), write(19 if codec == "zstd" else 9)
        assert len(small) < len(fast)
        assert list(fastavro.reader(io.BytesIO(small))) == list(fastavro.reader(io.BytesIO(fast))) == records


def test_unknown_codec_names_the_choices() -> None:
    with pytest.raises(ValidationError, match="^unknown Avro codec 'lzo'; use one of deflate, null, snappy, zstd$"):
        avro_codec("lzo")
    assert [avro_codec(c) for c in ("GZIP", "None", "uncompressed", "zstd", "Snappy")] == [
        "deflate", "null", "null", "zstandard", "snappy"]


def test_read_errors_name_the_file() -> None:
    with pytest.raises(InvalidMetadataError, match="^s3://b/m.avro: cannot read file: denied$") as err:
        read_bytes(_IO(error=PermissionError("denied")), "s3://b/m.avro")
    assert err.value.location == "s3://b/m.avro"
    with pytest.raises(FileNotFoundError):
        read_bytes(_IO(error=FileNotFoundError("gone")), "s3://b/m.avro")
    with pytest.raises(InvalidMetadataError, match=f"^s3://b/m.avro: the manifest is missing; {GONE_FILE}$"):
        read_manifest_bytes(_IO(error=FileNotFoundError("gone")), "s3://b/m.avro")
    with pytest.raises(InvalidMetadataError, match=r"^s3://b/m.avro: not a readable Avro file \(IndexError: "):
        read_stripped_manifest(_IO(b"Obj\x01garbage"), "s3://b/m.avro")
    with pytest.raises(InvalidMetadataError, match=r"^s3://b/m.avro: not a readable Avro file \(ValueError: "):
        open_avro(b"Obj\x01garbage", "s3://b/m.avro", strip=False)
    with pytest.raises(InvalidMetadataError, match=r"^s3://b/m.avro: not a readable Avro file \(ValueError: "):
        read_manifest_metadata(_IO(b"Obj\x01garbage"), "s3://b/m.avro")


def test_header_metadata_without_avro_keys() -> None:
    data = write_avro(SCHEMA, _records(2, 3), {"schema": "{}", "format-version": "2"}, "null", None)
    assert read_manifest_metadata(_IO(data), "m.avro") == {"schema": "{}", "format-version": "2"}


def test_schema_helpers() -> None:
    assert names_by_id({"type": "record", "name": "empty"}) == {}
    assert names_by_id({"fields": [{"name": "a", "field-id": 1}, {"name": "b"}]}) == {1: "a"}
    assert resolved_type(["null", "long"], {}) == "long"
    assert resolved_type(["null", "r1"], {"r1": {"type": "record"}}) == {"type": "record"}
    assert resolved_type({"type": "fixed"}, {}) == {"type": "fixed"}
