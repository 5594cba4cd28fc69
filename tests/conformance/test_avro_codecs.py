"""Manifests and manifest lists compressed with zstd or snappy (as engines write them when
``write.avro.compression-codec`` applies to metadata): a Java-written table's current metadata is
re-encoded with our codecs, and Java, PyIceberg and we read the same rows.  (DuckDB 1.5.5's Avro
reader knows neither codec: "File header contains an unknown codec".)"""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path

import fastavro
import pytest

from oracles import assert_rows_equal, java_metadata_location, java_read, pyiceberg_read, spark_df_to_arrow
from procedures.catalog.hadoop import HadoopCatalog
from procedures.spark.read import read_table
from procedures.spec.manifest.manifest_list import read_manifest_list

# every test here reads or writes through Iceberg Java (deselected on pyspark 4)
pytestmark = [pytest.mark.spark, pytest.mark.java]


def _recompress(table, path: str, codec: str, fix=None) -> int:
    """Re-encode one Avro container file in place with ``codec``; returns its new length."""
    reader = fastavro.reader(io.BytesIO(table.io.new_input(path).read()))
    records = [fix(r) if fix else r for r in reader]
    meta = {k: v.decode() if isinstance(v, bytes) else v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    out = io.BytesIO()
    fastavro.writer(out, reader.writer_schema, records, codec=codec, metadata=meta)
    table.io.write(path, out.getvalue(), overwrite=True)
    # Hadoop's local file system checks a .crc sidecar that now describes the old bytes
    local = path[len("file:"):] if path.startswith("file:") else path
    Path(local).with_name(f".{Path(local).name}.crc").unlink(missing_ok=True)
    return len(out.getvalue())


@pytest.mark.parametrize("codec", ["zstandard", "snappy"])
def test_compressed_metadata_reads_everywhere(spark, java_warehouse, codec):
    name = f"codec_{codec}"
    ident = f"jcat.db.{name}"
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    spark.sql(f"CREATE TABLE {ident} (id bigint, cat string) USING iceberg PARTITIONED BY (cat) "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    spark.sql(f"INSERT INTO {ident} SELECT id, concat('c', cast(id % 3 as string)) FROM range(0, 60)")
    spark.sql(f"INSERT INTO {ident} SELECT id, concat('c', cast(id % 3 as string)) FROM range(60, 90)")
    spark.sql(f"DELETE FROM {ident} WHERE id % 7 = 0")
    expected = [{"id": i, "cat": f"c{i % 3}"} for i in range(90) if i % 7]

    table = HadoopCatalog("ours", str(java_warehouse)).load_table(("db", name))
    snap = table.metadata.current_snapshot()
    lengths = {m.manifest_path: _recompress(table, m.manifest_path, codec)
               for m in read_manifest_list(table.io, snap.manifest_list)}
    assert len(lengths) >= 3  # two data manifests and a delete manifest
    _recompress(table, snap.manifest_list, codec,
                fix=lambda r: {**r, "manifest_length": lengths[r["manifest_path"]]})
    assert fastavro.reader(io.BytesIO(table.io.new_input(snap.manifest_list).read())).metadata["avro.codec"] == codec

    spark.sql(f"REFRESH TABLE {ident}")
    metadata = java_metadata_location(java_warehouse, "db", name)
    readers = {
        "ours": lambda: spark_df_to_arrow(read_table(spark, ident)),
        "java": lambda: java_read(spark, ident),
    }
    # PyIceberg decodes snappy only with python-snappy, not a test dependency (its cramjam would
    # also take fastavro off our pyarrow codec)
    if codec != "snappy" or importlib.util.find_spec("snappy") is not None:
        readers["pyiceberg"] = lambda: pyiceberg_read(metadata)
    for reader, read in readers.items():
        assert_rows_equal(read(), expected, key="id", label=f"{codec} metadata / {reader}")
