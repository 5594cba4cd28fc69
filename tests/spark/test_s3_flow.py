"""A table in an S3 bucket (issue 20): a jdbc (SQLite) catalog whose ``warehouse`` is ``s3://`` and whose
FileIO settings are Iceberg's ``s3.*`` properties given as ``spark.sql.catalog.<name>.*`` keys, against
a SeaweedFS server on loopback.  Writes, rewrite_data_files, expire_snapshots and remove_orphan_files
run on the driver and the executors through the catalog's FileIO; PyIceberg reads the same rows.
"""

from __future__ import annotations

import datetime as dt


import pyarrow.fs as pafs
import pytest

import procedures
from procedures.spark.catalog_conf import conf_from_spark
from procedures.frontend import runner
from procedures.io.storage import s3_options
from procedures.spark.dml import append
from procedures.spark.read import read_table
from procedures.spark.session import catalog_for
from tests.helpers.references import import_reference

pytestmark = pytest.mark.spark

CATALOG = "s3cat"
FUTURE = "TIMESTAMP '2100-01-01 00:00:00'"


@pytest.fixture(scope="module")
def s3_catalog(spark, s3_server, tmp_path_factory):
    db = tmp_path_factory.mktemp("s3-catalog") / "catalog.db"
    conf = {
        "type": "jdbc",
        "uri": f"jdbc:sqlite:{db}",
        "warehouse": f"s3://{s3_server.bucket}/wh",
        **s3_server.properties(),
    }
    for key, value in conf.items():
        spark.conf.set(f"spark.sql.catalog.{CATALOG}.{key}", value)
    cat = catalog_for(spark, CATALOG)
    if not cat.namespace_exists(("db",)):
        cat.create_namespace(("db",))
    yield cat
    for key in conf:
        spark.conf.unset(f"spark.sql.catalog.{CATALOG}.{key}")


def _bucket_files(s3_server, prefix: str) -> set[str]:
    fs = pafs.S3FileSystem(**s3_options(s3_server.properties()))
    infos = fs.get_file_info(pafs.FileSelector(prefix, recursive=True, allow_not_found=True))
    return {f"s3://{i.path}" for i in infos if i.type == pafs.FileType.File}


def _rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def test_s3_table_lifecycle(spark, s3_server, s3_catalog):
    name = f"{CATALOG}.db.events"
    if s3_catalog.table_exists(("db", "events")):
        s3_catalog.drop_table(("db", "events"), purge=True)
    procedures.sql(spark, f"CREATE TABLE {name} (id bigint, cat string, v double) USING iceberg "
                          "PARTITIONED BY (cat) TBLPROPERTIES ('format-version'='2')")
    t = s3_catalog.load_table(("db", "events"))
    assert t.location.startswith(f"s3://{s3_server.bucket}/wh/")
    assert t.metadata_location.startswith(f"s3://{s3_server.bucket}/wh/")
    expected = []
    for batch in range(3):
        rows = [(batch * 10 + i, "ab"[i % 2], float(i)) for i in range(6)]
        expected += rows
        t = append(spark, name, spark.createDataFrame(rows, "id bigint, cat string, v double"))
    prefix = f"{s3_server.bucket}/wh/db/events"
    data_before = {p for p in _bucket_files(s3_server, f"{prefix}/data") if p.endswith(".parquet")}
    assert len(data_before) >= 6  # three appends, two partitions each
    assert _rows(read_table(spark, name)) == sorted(expected)

    # rewrite_data_files: compacts each partition into one file (tasks on the executors)
    rows = procedures.sql(spark, f"CALL {CATALOG}.system.rewrite_data_files(table => 'db.events', "
                                 "options => map('min-input-files', '2'))").collect()
    assert rows[0][0] == len(data_before) and rows[0][1] == 2
    assert _rows(read_table(spark, name)) == sorted(expected)

    # expire_snapshots: the replaced files leave the bucket
    procedures.sql(spark, f"CALL {CATALOG}.system.expire_snapshots(table => 'db.events', older_than => {FUTURE}, "
                          "retain_last => 1)").collect()
    data_after = {p for p in _bucket_files(s3_server, f"{prefix}/data") if p.endswith(".parquet")}
    assert not (data_before & data_after), "replaced data files must be deleted from the bucket"
    assert len(data_after) == 2
    assert _rows(read_table(spark, name)) == sorted(expected)

    # remove_orphan_files: an object nobody references is found by listing the bucket and deleted
    fs = pafs.S3FileSystem(**s3_options(s3_server.properties()))
    orphan = f"{prefix}/data/cat=a/orphan-planted.parquet"
    with fs.open_output_stream(orphan) as out:
        out.write(b"not referenced")
    # S3 mtimes cannot be set back: skip the 24-hour guard as Java's tests do (spark.testing)
    conf = {**conf_from_spark(spark), "spark.testing": "true"}
    result = runner.run("remove_orphan_files", kwargs={"table": "db.events",
                                                       "older_than": dt.datetime.now(dt.timezone.utc)
                                                       + dt.timedelta(minutes=1)},
                        catalog=CATALOG, conf=conf, spark=spark, lenient=True)
    found = result.rows
    assert [r[0] for r in found] == [f"s3://{orphan}"]
    assert fs.get_file_info(orphan).type == pafs.FileType.NotFound
    assert _rows(read_table(spark, name)) == sorted(expected)

    # PyIceberg reads the same rows from the bucket with the same properties
    import_reference("pyiceberg", "PyIceberg not installed: pip install -e '.[test]'")
    from pyiceberg.table import StaticTable

    t = s3_catalog.load_table(("db", "events"))
    static = StaticTable.from_metadata(t.metadata_location, properties=s3_server.properties())
    arrow = static.scan().to_arrow()
    assert sorted(zip(arrow["id"].to_pylist(), arrow["cat"].to_pylist(), arrow["v"].to_pylist())) == sorted(expected)


def test_s3_orphan_listing_on_executors(spark, s3_server, s3_catalog):
    """The executors' part of the orphan listing gets the catalog's s3.* properties too."""
    from procedures.core.gc.hidden_paths import HiddenPathFilter
    from procedures.spark.listing import list_directories

    fs = pafs.S3FileSystem(**s3_options(s3_server.properties()))
    base = f"{s3_server.bucket}/listing"
    for i in range(3):
        with fs.open_output_stream(f"{base}/d{i}/f{i}.bin") as out:
            out.write(b"x")
    dirs = [f"s3a://{base}/d{i}" for i in range(3)]
    df = list_directories(spark, dirs, 2**62, (), dict(s3_catalog.io.properties))
    assert sorted(r[0] for r in df.collect()) == sorted(f"s3a://{base}/d{i}/f{i}.bin" for i in range(3))
    assert HiddenPathFilter(()).accept("d0")
