"""The engine-free rules of add_files (``procedures.core.file_import.source_rules``): filter checks, spec matching,
partition values, duplicates, and the summary of files appended the way Java appends manifests."""

from __future__ import annotations

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.file_import import source_rules as A
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.transaction import commit
from procedures.errors import DuplicateFilesError, UnsupportedFileFormatError, ValidationError
from procedures.spec.manifest.model import DataFile, FileFormat
from procedures.spec.name_mapping import DEFAULT_NAME_MAPPING_PROPERTY, parse_name_mapping
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.transforms import parse_transform
from procedures.spec.types import DATE, INT, LONG, STRING, NestedField

SCHEMA = Schema((NestedField(1, "id", LONG), NestedField(2, "p", INT), NestedField(3, "day", DATE), NestedField(4, "c", STRING)))
BY_P_DAY = PartitionSpec(0, (PartitionField(2, 1000, parse_transform("identity"), "p"),
                             PartitionField(3, 1001, parse_transform("identity"), "day")))


def _md(spec=None, fv=2):
    md, _ = new_table_metadata(schema=SCHEMA, location="/tmp/unused", spec=spec, format_version=fv)
    return md


def test_source_kind_and_formats():
    assert A.source_kind(["PARQUET", "/x"]) == "parquet"
    assert A.source_kind(["orc", "/x"]) == "orc"
    assert A.source_kind(["csv", "/x"]) is None and A.source_kind(["db", "t", "x"]) is None
    assert A.file_format("org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe") == "parquet"
    with pytest.raises(UnsupportedFileFormatError, match="Unknown partition format: csv"):
        A.file_format("csv")
    assert A.file_format("org.apache.hadoop.hive.ql.io.orc.OrcSerde") == "orc"
    assert A.file_format("org.apache.hadoop.hive.serde2.avro.AvroSerDe") == "avro"


def test_partition_filter_checks():
    spec = _md(BY_P_DAY).spec()
    A.check_partition_filter("t", spec, {"p": "1"})
    with pytest.raises(ValidationError, match=r"filter \(3\) is greater than the number of partitioned columns in table \(2\)"):
        A.check_partition_filter("t", spec, {"p": "1", "day": "x", "c": "y"})
    with pytest.raises(ValidationError, match=r"not partitioned: \[c\] \. Valid partition columns: \[p, day\]"):
        A.check_partition_filter("t", spec, {"c": "y"})
    with pytest.raises(ValidationError, match="Cannot use partition filter with an unpartitioned table t"):
        A.check_partition_filter("t", _md().spec(), {"p": "1"})


def test_identity_spec_match_and_values():
    md = _md(BY_P_DAY)
    spec = A.match_identity_spec(md, ["P", "Day"], "t")
    assert spec.spec_id == md.default_spec_id
    with pytest.raises(ValidationError, match=r"matches the partition columns \(\[day, p\]\) in input table"):
        A.match_identity_spec(md, ["day", "p"], "t")
    assert A.partition_tuple(spec, md, {"p": "3", "day": "1970-01-11"}) == (3, 10)
    assert A.partition_tuple(spec, md, {"P": "__HIVE_DEFAULT_PARTITION__", "DAY": None}) == (None, None)
    with pytest.raises(ValidationError, match="Cannot read partition value 'x'"):
        A.partition_tuple(spec, md, {"p": "x", "day": "1970-01-01"})
    bucketed = _md(PartitionSpec(0, (PartitionField(1, 1000, parse_transform("bucket[2]"), "id_bucket"),)))
    with pytest.raises(ValidationError):
        A.match_identity_spec(bucketed, ["id_bucket"], "t")


def test_filter_partitions_and_duplicates():
    parts = [A.SourcePartition((("p", "1"), ("c", "a")), "/d/p=1/c=a", "parquet"),
             A.SourcePartition((("p", "2"), ("c", "a")), "/d/p=2/c=a", "parquet")]
    assert A.filter_partitions(parts, {"c": "a"}) == parts
    assert A.filter_partitions(parts, {"p": "2"}) == parts[1:]
    assert A.filter_partitions(parts, {"p": "02"}) == []
    err = A.duplicate_error([f"/f{i}" for i in range(12)])
    assert isinstance(err, DuplicateFilesError) and len(err.paths) == 10
    assert "/f0,/f1," in str(err) and "/f10" not in str(err) and "'check_duplicate_files' to false" in str(err)


def _file(path: str, p: int) -> DataFile:
    return DataFile(file_path=path, file_format=FileFormat.PARQUET, partition=(p, 0), record_count=3,
                    file_size_in_bytes=100)


@pytest.mark.parametrize("fv, through_manifests, changed, size", [
    (2, True, None, None), (2, False, "2", "200"), (1, True, "2", "200"),
])
def test_append_summary_and_name_mapping(tmp_path, fv, through_manifests, changed, size):
    cat = HadoopCatalog("c", str(tmp_path))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=str(tmp_path / "db" / "t"), spec=BY_P_DAY, format_version=fv)
    t = cat.create_table(("db", "t"), md)
    op = A.AddFiles([_file("/x/a.parquet", 1), _file("/x/b.parquet", 2)], through_manifests=through_manifests)
    t = commit(t, [A.name_mapping_change(t.metadata), op])
    summary = t.metadata.current_snapshot().summary
    assert summary["operation"] == "append" and summary["added-data-files"] == "2" and summary["added-records"] == "6"
    assert summary.get("changed-partition-count") == changed and summary.get("added-files-size") == size
    mapping = parse_name_mapping(t.metadata.properties[DEFAULT_NAME_MAPPING_PROPERTY])
    assert mapping.find_id("day") == 3 and A.name_mapping_change(t.metadata) is None
    empty = A.AddFiles([], through_manifests=True)
    t = commit(t, [empty])
    assert t.metadata.current_snapshot().summary["changed-partition-count"] == "0"
