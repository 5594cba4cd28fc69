"""Iceberg's DDL through ``procedures.sql`` on a classic and (pyspark 4) a Spark Connect session: the
statements that read or write rows (CTAS, REPLACE ... AS SELECT) and changes followed by writes.
The comparison with Iceberg Java is tests/spark/test_sql_ddl.py (classic pyspark 3.5 only)."""

from __future__ import annotations

import uuid

import pytest

import procedures
from procedures.errors import SchemaEvolutionError
from procedures.spark.dataframes import is_connect
from procedures.spark.session import catalog_for
from tests.helpers.our_tables import SCHEMA, fresh_table

pytestmark = [pytest.mark.spark, pytest.mark.both_sessions]


def test_alter_ctas_and_replace_on_both_session_kinds(spark):
    name = f"ddl_{uuid.uuid4().hex[:8]}"
    fresh_table(spark, name, SCHEMA)
    t = f"jcat.db.{name}"
    procedures.sql(spark, f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')")
    procedures.sql(spark, f"ALTER TABLE {t} ADD COLUMN n int COMMENT 'new' AFTER id")
    procedures.sql(spark, f"ALTER TABLE {t} ADD PARTITION FIELD bucket(4, id)")
    procedures.sql(spark, f"INSERT INTO {t} VALUES (3, 30, 'c')")
    rows = procedures.sql(spark, f"SELECT id, n, cat FROM {t} ORDER BY id").collect()
    assert [tuple(r) for r in rows] == [(1, None, "a"), (2, None, "b"), (3, 30, "c")]
    with pytest.raises(SchemaEvolutionError, match="cat"):
        procedures.sql(spark, f"ALTER TABLE {t} ALTER COLUMN cat TYPE int")

    ctas = f"{t}_ctas"
    procedures.sql(spark, f"CREATE TABLE {ctas} USING iceberg PARTITIONED BY (cat) AS SELECT id, cat FROM {t} WHERE id > 1")
    assert sorted(tuple(r) for r in procedures.sql(spark, f"SELECT * FROM {ctas}").collect()) == [(2, "b"), (3, "c")]
    procedures.sql(spark, f"REPLACE TABLE {ctas} USING iceberg AS SELECT id * 10 AS id, cat FROM {t}")
    assert sorted(r[0] for r in procedures.sql(spark, f"SELECT * FROM {ctas}").collect()) == [10, 20, 30]
    md = catalog_for(spark, "jcat").load_table(("db", f"{name}_ctas")).metadata
    assert [s.summary["operation"] for s in md.snapshots] == ["append", "overwrite"]
    assert [f.name for f in md.schema().fields] == ["id", "cat"] and md.spec().is_unpartitioned()


def test_statement_results_are_empty_frames_without_a_job(spark):
    """INSERT and DDL hand back an empty frame of no columns; on a classic session collecting it
    starts no Spark job (a createDataFrame of an empty list parallelized an RDD and ran one)."""
    name = f"ddl_{uuid.uuid4().hex[:8]}"
    fresh_table(spark, name, SCHEMA)
    results = [procedures.sql(spark, f"INSERT INTO jcat.db.{name} VALUES (1, 'a')"),
               procedures.sql(spark, f"ALTER TABLE jcat.db.{name} ADD COLUMN n int")]
    tracker = None if is_connect(spark) else spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(None)) if tracker else set()
    for df in results:
        assert df.columns == [] and df.collect() == []
    if tracker is not None:
        assert set(tracker.getJobIdsForGroup(None)) == before
