"""Metadata files we write must load in Iceberg Java 1.10 and PyIceberg 0.12 with the same content those
readers see in the original golden file.

For every valid golden file we parse it, write it back (plain and gzip), and load both our file and the
original with each reader.  The comparison is done by the reader itself: Java re-serializes both
``TableMetadata`` objects with its own ``TableMetadataParser.toJson`` and PyIceberg dumps both models, so
every field the reader models (format version, uuid, schemas, specs, sort orders, snapshots with sequence
numbers and summaries, refs, properties, statistics, logs, row lineage) is compared, not only the ones
listed here.  Golden files point at manifest lists that do not exist; only metadata is loaded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from procedures.spec.metadata import metadata_from_json, read_table_metadata, write_table_metadata

pytestmark = pytest.mark.spark

VALID = [
    "TableMetadataV1Valid.json",
    "TableMetadataV2Valid.json",
    "TableMetadataV2ValidMinimal.json",
    "TableMetadataV3ValidMinimal.json",
    "TableMetadataStatisticsFiles.json",
    "TableMetadataPartitionStatisticsFiles.json",
]

NAMES = ["v1.metadata.json", "v2.gz.metadata.json", "00003-6c1e.metadata.json.gz"]


class LocalIO:
    """The two FileIO methods the metadata codec uses, over local files (keeps this test independent of
    ``procedures.io``)."""

    def new_input(self, path: str):
        class _In:
            def read(self) -> bytes:
                return Path(path).read_bytes()

        return _In()

    def write(self, path: str, data: bytes, overwrite: bool = False) -> None:
        with open(path, "wb" if overwrite else "xb") as f:
            f.write(data)


@pytest.fixture(scope="module")
def java_io(spark):
    return spark._jvm.org.apache.iceberg.hadoop.HadoopFileIO(spark._jsc.hadoopConfiguration())


def java_load(spark, java_io, path: Path):
    return spark._jvm.org.apache.iceberg.TableMetadataParser.read(java_io, str(path))


def java_json(spark, md) -> dict:
    return json.loads(spark._jvm.org.apache.iceberg.TableMetadataParser.toJson(md))


def write_ours(golden: Path, out: Path, text: str | None = None):
    md = metadata_from_json(golden.read_bytes() if text is None else text, str(golden))
    write_table_metadata(LocalIO(), str(out), md)
    return md


@pytest.mark.java
@pytest.mark.parametrize("name", VALID)
@pytest.mark.parametrize("file_name", NAMES)
def test_java_reads_our_metadata_like_the_original(spark, java_io, golden_dir, tmp_path, name, file_name):
    golden = golden_dir / name
    ours_path = tmp_path / file_name
    ours = write_ours(golden, ours_path)
    assert read_table_metadata(LocalIO(), str(ours_path)) == ours

    # golden names do not end in .metadata.json, which Java's file reader insists on; parse the text
    original = spark._jvm.org.apache.iceberg.TableMetadataParser.fromJson(golden.read_text())
    loaded = java_load(spark, java_io, ours_path)

    # explicit checks first, for readable failures
    assert loaded.formatVersion() == original.formatVersion() == ours.format_version
    assert loaded.uuid() == original.uuid() == ours.table_uuid
    assert loaded.lastSequenceNumber() == original.lastSequenceNumber() == ours.last_sequence_number
    assert loaded.currentSchemaId() == ours.current_schema_id
    assert loaded.defaultSpecId() == ours.default_spec_id
    assert loaded.lastAssignedPartitionId() == original.lastAssignedPartitionId() == ours.last_partition_id
    assert loaded.defaultSortOrderId() == ours.default_sort_order_id
    java_snaps = [(s.snapshotId(), s.sequenceNumber(), dict(s.summary()), s.operation()) for s in loaded.snapshots()]
    assert java_snaps == [
        (s.snapshot_id, s.sequence_number, {k: v for k, v in s.summary.items() if k != "operation"},
         s.summary["operation"])
        for s in ours.snapshots
    ]
    cur = loaded.currentSnapshot()
    assert (None if cur is None else cur.snapshotId()) == ours.current_snapshot_id
    assert sorted(loaded.refs().keySet()) == sorted(ours.refs)
    assert loaded.statisticsFiles().size() == len(ours.statistics)
    assert loaded.partitionStatisticsFiles().size() == len(ours.partition_statistics)
    if ours.format_version >= 3:
        assert loaded.nextRowId() == original.nextRowId() == ours.next_row_id

    # then everything Java models, through Java's own writer
    assert java_json(spark, loaded) == java_json(spark, original)


def _pyiceberg_dump(md) -> dict:
    return md.model_dump(mode="json")


def pyiceberg_input(golden: Path) -> str:
    """The golden text, with the one value PyIceberg 0.12 refuses replaced: it only accepts the spec's
    registered blob types, and Java's statistics test file uses the made-up type ``ndv``."""
    doc = json.loads(golden.read_text())
    for stats in doc.get("statistics", []):
        for blob in stats["blob-metadata"]:
            if blob["type"] == "ndv":
                blob["type"] = "apache-datasketches-theta-v1"
    return json.dumps(doc)


@pytest.mark.parametrize("name", VALID)
@pytest.mark.parametrize("file_name", ["v1.metadata.json", "v2.gz.metadata.json"])
def test_pyiceberg_reads_our_metadata_like_the_original(golden_dir, tmp_path, name, file_name):
    from pyiceberg.table import StaticTable
    from pyiceberg.table.metadata import TableMetadataUtil

    golden = golden_dir / name
    ours_path = tmp_path / file_name
    text = pyiceberg_input(golden)
    ours = write_ours(golden, ours_path, text)

    original = TableMetadataUtil.parse_raw(text)
    loaded = StaticTable.from_metadata(str(ours_path)).metadata

    assert loaded.format_version == original.format_version == ours.format_version
    assert str(loaded.table_uuid) == ours.table_uuid
    assert loaded.current_schema_id == ours.current_schema_id
    assert [s.schema_id for s in loaded.schemas] == [s.schema_id for s in ours.schemas]
    assert [s.spec_id for s in loaded.partition_specs] == [s.spec_id for s in ours.partition_specs]
    assert [o.order_id for o in loaded.sort_orders] == [o.order_id for o in ours.sort_orders]
    assert [(s.snapshot_id, s.sequence_number) for s in loaded.snapshots] == [
        (s.snapshot_id, s.sequence_number) for s in ours.snapshots
    ]
    assert loaded.current_snapshot_id == ours.current_snapshot_id
    assert sorted(loaded.refs) == sorted(ours.refs)
    assert len(loaded.statistics) == len(ours.statistics)
    assert len(loaded.partition_statistics) == len(ours.partition_statistics)
    assert loaded.properties == ours.properties

    assert _pyiceberg_dump(loaded) == _pyiceberg_dump(original)
