"""The text the session-catalog reader and the thrift client parse, without Spark or a server: Spark's
``DESCRIBE TABLE EXTENDED`` rows (as Spark 3.5 prints them), ``SHOW PARTITIONS`` specs with Hive's
escapes, bucket specs, thrift uris and Hive time values; and add_files' slicing of its file list."""

from __future__ import annotations

import pytest

from procedures.catalog import hive_thrift
from procedures.catalog.hive_thrift import parse_thrift_uris
from procedures.errors import CatalogConfigError
from procedures.spark import session_catalog as SC
from procedures.spark.sql_quoting import quote_if_needed, quote_name, sql_string
from procedures.spark.engine import file_import_steps as AF

DESCRIBE = [
    ("id", "bigint", "the id"), ("p", "string", None), ("q", "int", None),
    ("# Partition Information", "", ""), ("# col_name", "data_type", "comment"),
    ("p", "string", None), ("q", "int", None), ("", "", ""),
    ("# Detailed Table Information", "", ""), ("Catalog", "spark_catalog", ""), ("Database", "db", ""),
    ("Table", "t", ""), ("Type", "MANAGED", ""), ("Provider", "parquet", ""),
    ("Num Buckets", "4", ""), ("Bucket Columns", "[`id`, `we``ird`]", ""), ("Sort Columns", "[]", ""),
    ("Location", "file:/wh/db.db/t", ""),
    ("Serde Library", "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe", ""),
]
PARTITION = [
    ("id", "bigint", None), ("p", "string", None), ("# Partition Information", "", ""),
    ("# col_name", "data_type", "comment"), ("p", "string", None), ("", "", ""),
    ("# Detailed Partition Information", "", ""), ("Partition Values", "[p=John Doe]", ""),
    ("Location", "file:/wh/db.db/t/p=John Doe", ""), ("Serde Library", "org.apache.hadoop.hive.serde2.avro.AvroSerDe", ""),
    ("", "", ""), ("# Storage Information", "", ""), ("Location", "file:/wh/db.db/t", ""),
    ("Serde Library", "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe", ""),
]


def test_describe_sections():
    columns, details = SC._sections(DESCRIBE)
    assert columns == ["p", "q"]
    assert details["Type"] == "MANAGED" and details["Location"] == "file:/wh/db.db/t"
    assert SC._bucket_spec(details) == "4 buckets, bucket columns: [id, we`ird]"
    assert SC._bucket_spec({"Num Buckets": "2", "Bucket Columns": "[`a`]", "Sort Columns": "[`b`]"}) == \
        "2 buckets, bucket columns: [a], sort columns: [b]"
    assert SC._bucket_spec({"Type": "MANAGED"}) is None
    # a partition's own location and serde, not the table's storage section printed after them
    columns, details = SC._sections(PARTITION)
    assert columns == ["p"]
    assert details["Location"] == "file:/wh/db.db/t/p=John Doe"
    assert details["Serde Library"].endswith("AvroSerDe")


def test_show_table_extended_information():
    info = SC._information("Partition Values: [p=a: b]\nLocation: file:/wh/t/p=a: b\n"
                           "Serde Library: org.apache.hadoop.hive.serde2.avro.AvroSerDe\nStorage Properties: [x=1]\n")
    assert info["Location"] == "file:/wh/t/p=a: b" and info["Serde Library"].endswith("AvroSerDe")
    assert SC._information("") == {}


def test_partition_specs_unescape_hive_folder_names():
    assert SC._partition_values("p=2023%2F05%2F30/q=1") == (("p", "2023/05/30"), ("q", "1"))
    assert SC._partition_values("p=a%3Db%25c/q=__HIVE_DEFAULT_PARTITION__") == \
        (("p", "a=b%c"), ("q", "__HIVE_DEFAULT_PARTITION__"))
    assert SC._partition_values("k%3Dey=John Doe") == (("k=ey", "John Doe"),)
    assert SC._unescape("100%") == "100%" and SC._unescape("%zz") == "%zz"


def test_sql_quoting():
    assert quote_name("we`ird") == "`we``ird`"
    assert sql_string("it's a \\ path") == "'it\\'s a \\\\ path'"
    # Spark's quoteIfNeeded: digits alone and anything past [A-Za-z0-9_] are quoted
    assert [quote_if_needed(p) for p in ("db", "1col", "123", "a.b", "a-b", "_x")] == \
        ["db", "1col", "`123`", "`a.b`", "`a-b`", "_x"]
    assert SC.table_name("db", "a.b") == "spark_catalog.`db`.`a.b`"


def test_thrift_uris_and_times():
    assert parse_thrift_uris("thrift://h:9083, thrift://g:1") == [("h", 9083), ("g", 1)]
    for bad in ("http://h:9083", "thrift://h", "thrift://:9083", "thrift://h:notaport", "h:9083"):
        with pytest.raises(CatalogConfigError, match="thrift://host:port"):
            parse_thrift_uris(bad, key="spark.sql.catalog.x.uri")
    assert [hive_thrift._seconds(v) for v in ("600", "600s", "2min", "1500ms", 30)] == [600, 600, 120, 1.5, 30]
    with pytest.raises(CatalogConfigError, match="socket.timeout"):
        hive_thrift._seconds("soon")


def test_a_missing_thrift_client_names_the_extra(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_pymetastore(name, *args, **kwargs):
        if name.startswith("pymetastore"):
            raise ImportError(name=name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pymetastore)
    with pytest.raises(CatalogConfigError, match=r"pip install 'iceberg-procedures\[hive\]'"):
        hive_thrift.ThriftMetastoreClient("thrift://127.0.0.1:1")


def test_add_files_slices_keep_the_listing_order():
    items = [(f"f{i}", 0, (), "parquet") for i in range(7)]
    slices = AF._slices(items, 3)
    assert [len(s) for _, s in slices] == [2, 2, 3]
    assert [start for start, _ in slices] == [0, 2, 4]
    assert [i for _, s in slices for i in s] == items
