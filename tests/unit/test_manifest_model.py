"""The manifest model's own behaviour (procedures.spec.manifest.model): the has-files answers as
PyIceberg gives them, and data files through pickle (how executors send planned files back)."""

from __future__ import annotations

import pickle

import pytest

from procedures.spec.manifest.model import DataFile, FileContent, FileFormat, ManifestFile
from tests.helpers.references import import_reference


@pytest.mark.parametrize("count", [None, 0, 1, 2])
def test_has_files_answers_as_pyiceberg(count: int | None) -> None:
    pyi = import_reference("pyiceberg.manifest", "PyIceberg not installed: pip install -e '.[test]'")
    ours = ManifestFile("m.avro", 1, 0, added_files_count=count, existing_files_count=count, deleted_files_count=count)
    theirs = pyi.ManifestFile.from_args(manifest_path="m.avro", manifest_length=1, partition_spec_id=0,
                                        added_files_count=count, existing_files_count=count)
    assert ours.has_added_files() == theirs.has_added_files() == (count != 0)
    assert ours.has_existing_files() == theirs.has_existing_files() == (count != 0)
    # PyIceberg has no has_deleted_files; Java's hasDeletedFiles is the same rule
    assert ours.has_deleted_files() == (count != 0)


def test_data_files_pickle_to_equal_files() -> None:
    df = DataFile("s3://b/d.puffin", FileFormat.PUFFIN, (1, "a"), 3, 100, FileContent.POSITION_DELETES,
                  value_counts={1: 3}, lower_bounds={1: b"\x01"}, split_offsets=(4,), sort_order_id=0,
                  referenced_data_file="s3://b/a.parquet", content_offset=4, content_size_in_bytes=40, spec_id=2)
    back = pickle.loads(pickle.dumps(df))
    assert back == df and back is not df and hash(back) == hash(df)
    assert [getattr(back, f) for f in DataFile.__slots__] == [getattr(df, f) for f in DataFile.__slots__]
