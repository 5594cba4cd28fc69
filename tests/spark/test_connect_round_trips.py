"""What a procedure, a read and a write ask a Spark Connect server besides running their jobs: no plan
analysis of their own payload and task frames (the client is told their schemas), no conf read per
collect of task results, one conf read per statement (not one more per distributed step or per
output frame), no ``spark.sql`` round trip before an INSERT's one analysis.  Each round trip costs milliseconds on loopback and more to a remote server,
on every job.  On a classic session the same calls run and give the same results (nothing to count)."""

from __future__ import annotations

import collections

import pytest

import procedures
from procedures.core.gc import reachability
from procedures.spark.dataframes import is_connect, run_slices
from procedures.spark.read import read_table

pytestmark = [pytest.mark.spark, pytest.mark.both_sessions]


class _CountingStub:
    """The Connect client's gRPC stub, counting the calls of each RPC (``ExecutePlan``,
    ``AnalyzePlan``, ``Config``...) before passing them on."""

    def __init__(self, stub, counts: collections.Counter) -> None:
        self._stub, self._counts = stub, counts

    def __getattr__(self, name):
        method = getattr(self._stub, name)

        def counted(*args, **kwargs):
            # the release of an earlier execution goes out on a background thread whenever it is
            # scheduled: it is no round trip the caller waits for, and counting it made counts racy
            if name != "ReleaseExecute":
                self._counts[name] += 1
            return method(*args, **kwargs)

        return counted


@pytest.fixture()
def round_trips(spark, monkeypatch):
    """Counts of the Connect client's requests to its server, by RPC: ``AnalyzePlan`` (a plan's
    schema), ``Config`` (conf reads) and ``ExecutePlan`` (jobs, commands and ``spark.sql``).
    ``ReleaseExecute`` goes in the background, is not waited for, and is not counted."""
    counts: collections.Counter = collections.Counter()
    if is_connect(spark):
        monkeypatch.setattr(spark.client, "_stub", _CountingStub(spark.client._stub, counts))
    return counts


def test_run_slices_asks_the_server_nothing_but_its_job(spark, round_trips):
    def double(items):  # defined here: the workers do not import this test module
        for item in items:
            yield item * 2

    run_slices(spark, [[0]], double)  # once-per-client reads (the server's plan compression) go first
    round_trips.clear()
    assert sorted(run_slices(spark, [[1, 2], [3]], double)) == [2, 4, 6]
    assert round_trips["AnalyzePlan"] == 0
    assert round_trips["Config"] == 0


def test_insert_read_and_rewrite_analyze_no_plan_of_their_own(spark, round_trips, monkeypatch):
    name = f"jcat.db.round_trips_{'connect' if is_connect(spark) else 'classic'}"
    procedures.sql(spark, "CREATE NAMESPACE IF NOT EXISTS jcat.db")
    procedures.sql(spark, f"DROP TABLE IF EXISTS {name}")
    procedures.sql(spark, f"CREATE TABLE {name} (id bigint, s string, p int) USING iceberg PARTITIONED BY (p)")
    # the first write of an application also checks the Python workers (a probe job): not counted
    procedures.sql(spark, f"INSERT INTO {name} SELECT id, concat('r', id), CAST(id % 2 AS int) FROM range(0, 20)")
    round_trips.clear()
    procedures.sql(spark, f"INSERT INTO {name} SELECT id, concat('r', id), CAST(id % 2 AS int) FROM range(20, 40)")
    connect = 1 if is_connect(spark) else 0
    # the statement's conf is read once; the INSERT's query is analyzed once, for its columns (not
    # sent to the server by spark.sql first), its cast to the table's types not at all; one job
    assert round_trips["Config"] == connect
    assert round_trips["AnalyzePlan"] == connect
    assert round_trips["ExecutePlan"] == connect

    round_trips.clear()
    df = read_table(spark, name)
    # one conf read serves the catalog and the planning steps' parallelism
    assert round_trips["AnalyzePlan"] == 0 and round_trips["Config"] == connect
    assert sorted(r["id"] for r in df.select("id").collect()) == list(range(40))

    round_trips.clear()
    out = procedures.sql(spark, f"CALL jcat.system.rewrite_data_files(table => '{name.split('.', 1)[1]}', "
                                "options => map('min-input-files', '2'))")
    # one conf read for the whole CALL, its rewrite threads and its output frame included
    assert round_trips["AnalyzePlan"] == 0 and round_trips["Config"] == connect
    rows = out.collect()
    # one file per partition from the files of both INSERTs (how many each wrote depends on its tasks)
    assert rows[0]["rewritten_data_files_count"] >= 4 and rows[0]["added_data_files_count"] == 2
    assert sorted(r["id"] for r in read_table(spark, name).select("id").collect()) == list(range(40))

    round_trips.clear()
    out = procedures.sql(spark, f"CALL jcat.system.expire_snapshots(table => '{name.split('.', 1)[1]}', "
                                "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)")
    # a procedure on the driver alone: its conf read and nothing else (no conf read for its output)
    assert dict(round_trips) == ({"Config": 1} if connect else {})
    assert out.collect()[0]["deleted_manifest_lists_count"] == 2  # the INSERTs' snapshots

    procedures.sql(spark, f"INSERT INTO {name} SELECT id, concat('r', id), CAST(id % 2 AS int) FROM range(40, 60)")
    monkeypatch.setattr(reachability, "DRIVER_MAX_MANIFESTS", 0)  # the executors' rewrite, small as it is
    round_trips.clear()
    out = procedures.sql(spark, f"CALL jcat.system.rewrite_manifests(table => '{name.split('.', 1)[1]}')")
    # its conf read and its two jobs (the mixed manifests' keys counted, the manifests written): no
    # plan analysis before a mapInArrow, no conf read per collect of a step
    assert dict(round_trips) == ({"Config": 1, "ExecutePlan": 2} if connect else {})
    assert out.collect()[0]["rewritten_manifests_count"] == 2
    procedures.sql(spark, f"DROP TABLE IF EXISTS {name}")


def test_output_frames_keep_their_schema_and_rows(spark):
    """A procedure's output frame (``local_frame``) has exactly the schema it was given, nullability,
    nested types and a column's comment included, and its rows.  On Connect the relation leaves its
    schema to the Arrow data, which carries all of that (the server then plans no projection to a
    given schema: about 4 ms of every output's collect)."""
    import decimal

    from pyspark.sql import types

    from procedures.spark.dataframes import local_frame

    plain = types.StructType([
        types.StructField("n", types.LongType(), False), types.StructField("s", types.StringType(), True),
        types.StructField("a", types.ArrayType(types.StringType(), False), True),
        types.StructField("m", types.MapType(types.StringType(), types.LongType()), True),
        types.StructField("d", types.DecimalType(10, 2), True), types.StructField("b", types.BooleanType(), False)])
    commented = types.StructType([types.StructField("n", types.LongType(), False, {"comment": "a count"})])
    rows = [(1, "x", ["p", "q"], {"k": 2}, decimal.Decimal("1.25"), True), (2, None, None, None, None, False)]
    for schema, data in ((plain, rows), (commented, [(7,)])):
        frame = local_frame(spark, data, schema)
        assert frame.schema == schema
        assert [f.metadata for f in frame.schema.fields] == [f.metadata for f in schema.fields]
        assert [tuple(r) for r in frame.collect()] == data
        if is_connect(spark):
            relation = frame._plan.plan(spark.client).local_relation
            assert not relation.HasField("schema")
