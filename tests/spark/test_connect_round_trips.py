"""What a procedure, a read and a write ask a Spark Connect server besides running their jobs: no plan
analysis of their own payload and task frames (the client is told their schemas), no conf read per
collect of task results.  Each round trip costs milliseconds on loopback and more to a remote server,
on every job.  On a classic session the same calls run and give the same results (nothing to count)."""

from __future__ import annotations

import collections

import pytest

import procedures
from procedures.spark.dataframes import is_connect, run_slices
from procedures.spark.read import read_table

pytestmark = [pytest.mark.spark, pytest.mark.both_sessions]


@pytest.fixture()
def round_trips(spark, monkeypatch):
    """Counts of the Connect client's plan analyses (``_analyze``) and conf requests (``config``)."""
    counts: collections.Counter = collections.Counter()
    if is_connect(spark):
        client = spark.client
        for name in ("_analyze", "config"):
            original = getattr(client, name)

            def counted(*args, _original=original, _name=name, **kwargs):
                counts[_name] += 1
                return _original(*args, **kwargs)

            monkeypatch.setattr(client, name, counted)
    return counts


def test_run_slices_asks_the_server_nothing_but_its_job(spark, round_trips):
    def double(items):  # defined here: the workers do not import this test module
        for item in items:
            yield item * 2

    run_slices(spark, [[0]], double)  # once-per-client reads (the server's plan compression) go first
    round_trips.clear()
    assert sorted(run_slices(spark, [[1, 2], [3]], double)) == [2, 4, 6]
    assert round_trips["_analyze"] == 0
    assert round_trips["config"] == 0


def test_insert_read_and_rewrite_analyze_no_plan_of_their_own(spark, round_trips):
    name = f"jcat.db.round_trips_{'connect' if is_connect(spark) else 'classic'}"
    procedures.sql(spark, "CREATE NAMESPACE IF NOT EXISTS jcat.db")
    procedures.sql(spark, f"DROP TABLE IF EXISTS {name}")
    procedures.sql(spark, f"CREATE TABLE {name} (id bigint, s string, p int) USING iceberg PARTITIONED BY (p)")
    # the first write of an application also checks the Python workers (a probe job): not counted
    procedures.sql(spark, f"INSERT INTO {name} SELECT id, concat('r', id), CAST(id % 2 AS int) FROM range(0, 20)")
    round_trips.clear()
    procedures.sql(spark, f"INSERT INTO {name} SELECT id, concat('r', id), CAST(id % 2 AS int) FROM range(20, 40)")
    # the INSERT's query is analyzed once, for its columns; its cast to the table's types is not
    assert round_trips["_analyze"] == (1 if is_connect(spark) else 0)

    round_trips.clear()
    df = read_table(spark, name)
    assert round_trips["_analyze"] == 0
    assert sorted(r["id"] for r in df.select("id").collect()) == list(range(40))

    round_trips.clear()
    rows = procedures.sql(spark, f"CALL jcat.system.rewrite_data_files(table => '{name.split('.', 1)[1]}', "
                                 "options => map('min-input-files', '2'))").collect()
    assert round_trips["_analyze"] == 0
    # one file per partition from the files of both INSERTs (how many each wrote depends on its tasks)
    assert rows[0]["rewritten_data_files_count"] >= 4 and rows[0]["added_data_files_count"] == 2
    assert sorted(r["id"] for r in read_table(spark, name).select("id").collect()) == list(range(40))
    procedures.sql(spark, f"DROP TABLE IF EXISTS {name}")
