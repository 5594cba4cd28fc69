"""Issue 2: corrupt or truncated metadata, manifests and manifest lists, an unsupported format
version and an unknown type each raise a typed error that names the file and the problem."""

from __future__ import annotations

import json

import pytest

from procedures.errors import InvalidMetadataError, UnsupportedFormatVersionError
from procedures.io.fileio import FileIO
from procedures.spec.manifest.manifest_list import read_manifest_list, write_manifest_list
from procedures.spec.manifest.model import FileContent, ManifestContent, ManifestFile
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.manifest.writer import ManifestWriter
from procedures.spec.metadata import read_table_metadata

from tests.unit.test_manifest import PARTITION, SCHEMA, SPEC, MemIO, _full_file, replace_seq


@pytest.fixture()
def written():
    mio = MemIO()
    w = ManifestWriter(mio, "s3://b/m.avro", SPEC, SCHEMA, 2, ManifestContent.DATA, 1)
    for _ in range(50):
        w.add(_full_file(FileContent.DATA, 2, PARTITION))
    manifest = replace_seq(w.close(), 1)
    write_manifest_list(mio, "s3://b/list.avro", 2, 1, None, 1, None, [manifest])
    return mio, manifest


def test_truncated_manifest_names_the_file(written):
    mio, manifest = written
    data = mio.files[manifest.manifest_path]
    mio.files["s3://b/cut.avro"] = data[: len(data) // 2]
    with pytest.raises(InvalidMetadataError) as err:
        list(read_manifest(mio, ManifestFile("s3://b/cut.avro", len(data) // 2, 0, sequence_number=1, added_snapshot_id=1)))
    assert err.value.location == "s3://b/cut.avro"
    assert "s3://b/cut.avro" in str(err.value)


def test_truncated_manifest_list_names_the_file(written):
    mio, _ = written
    data = mio.files["s3://b/list.avro"]
    mio.files["s3://b/list-cut.avro"] = data[:-30]
    with pytest.raises(InvalidMetadataError, match="corrupt manifest list") as err:
        read_manifest_list(mio, "s3://b/list-cut.avro")
    assert err.value.location == "s3://b/list-cut.avro"


def _golden_with(golden_dir, tmp_path, change):
    md = json.loads((golden_dir / "TableMetadataV2Valid.json").read_text())
    change(md)
    path = tmp_path / "v1.metadata.json"
    path.write_text(json.dumps(md))
    return str(path)


def test_unknown_type_in_a_metadata_file_names_the_file_and_type(golden_dir, tmp_path):
    path = _golden_with(golden_dir, tmp_path, lambda md: md["schemas"][0]["fields"][0].update(type="bookmark"))
    with pytest.raises(InvalidMetadataError, match="unknown Iceberg type 'bookmark'") as err:
        read_table_metadata(FileIO(), path)
    assert err.value.location == path


def test_unsupported_format_version_in_a_metadata_file_names_the_file(golden_dir, tmp_path):
    path = _golden_with(golden_dir, tmp_path, lambda md: md.update({"format-version": 9}))
    with pytest.raises(UnsupportedFormatVersionError, match="unsupported version 9") as err:
        read_table_metadata(FileIO(), path)
    assert err.value.location == path
