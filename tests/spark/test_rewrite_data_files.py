"""rewrite_data_files on Java-written tables (issue 7).

Each scenario builds two identical tables with Iceberg Java (one for us, one "twin" for Java's own
CALL), rewrites ours with our procedure and the twin with Java's, and checks: Java, PyIceberg and
DuckDB read exactly the rows they read before; our rewritten count equals Java's and the added count
is comparable; sorted output is sorted per file; z-order clusters.  Concurrent Java commits during
a rewrite, on every catalog: ``tests/spark/test_concurrent_writers.py``.

``test_rewrite_on_both_session_kinds`` rewrites tables the package wrote itself on a classic and a
Spark Connect session alike (pyspark 4 runs both) and checks the same outcome on each.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from procedures.frontend import runner
from procedures.spark.dataframes import is_connect
from procedures.spark.write import JOURNAL_PREFIX
from procedures.spec.manifest.manifest_list import read_manifest_list
from procedures.spec.manifest.model import FileContent
from procedures.spec.manifest.reader import read_manifest
from tests.helpers.files import all_files, reached_paths
from tests.helpers.our_tables import merge_on_read_table
from tests.oracles import assert_rows_equal, duckdb_read, java_metadata_location, pyiceberg_read, read_all

pytestmark = [pytest.mark.spark]
#: the tests that read or write through Iceberg Java (deselected on pyspark 4)
JAVA = pytest.mark.java


def _conf(warehouse) -> dict:
    return {
        "spark.sql.catalog.ours.type": "hadoop",
        "spark.sql.catalog.ours.warehouse": str(warehouse),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.caseSensitive": "false",
    }


def _ours(spark, warehouse, **kwargs):
    return runner.run("rewrite_data_files", kwargs=kwargs, catalog="ours", conf=_conf(warehouse), spark=spark).rows[0]


def _java(spark, table, args: str):
    row = spark.sql(f"CALL jcat.system.rewrite_data_files(table => 'db.{table}'{args})").collect()[0]
    return tuple(row)


def _create(spark, name: str, ddl_tail: str, inserts: list[str], after: list[str] = ()) -> None:
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
    spark.sql(f"CREATE TABLE jcat.db.{name} {ddl_tail}")
    for values in inserts:
        spark.sql(f"INSERT INTO jcat.db.{name} VALUES {values}")
    for stmt in after:
        spark.sql(stmt.format(t=f"jcat.db.{name}"))


def _twins(spark, name, ddl_tail, inserts, after=()):
    for n in (name, name + "_twin"):
        _create(spark, n, ddl_tail, inserts, after)


def _snapshot_all(spark, warehouse, name):
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    return read_all(spark, f"jcat.db.{name}", java_metadata_location(warehouse, "db", name))


def _assert_same(spark, warehouse, name, before, key):
    after = _snapshot_all(spark, warehouse, name)
    for reader in ("java", "pyiceberg", "duckdb"):
        assert_rows_equal(after[reader], before["java"], key=key, label=f"{name} after rewrite / {reader}")


def _live_data_files(warehouse, name):
    from procedures.catalog.hadoop import HadoopCatalog

    t = HadoopCatalog("ours", str(warehouse)).load_table(("db", name))
    specs = {s.spec_id: s for s in t.metadata.partition_specs}
    out = []
    for m in read_manifest_list(t.io, t.metadata.current_snapshot().manifest_list):
        out.extend(e.data_file for e in read_manifest(t.io, m, specs=specs, skip_deleted=True))
    return t, out


PARTITIONED = ("(id bigint, cat string, v double) USING iceberg PARTITIONED BY (cat) "
               "TBLPROPERTIES ('format-version'='{fv}', 'write.delete.mode'='merge-on-read')")


@JAVA
@pytest.mark.parametrize("fv", [2, 3])
def test_binpack_with_deletes_matches_java(spark, java_warehouse, fv):
    name = f"rw_binpack_v{fv}"
    inserts = [", ".join(f"({i * 10 + j}, '{'ab'[j % 2]}', {j}.5)" for j in range(10)) for i in range(6)]
    _twins(spark, name, PARTITIONED.format(fv=fv), inserts, after=["DELETE FROM {t} WHERE id % 7 = 0"])
    before = _snapshot_all(spark, java_warehouse, name)
    ours = _ours(spark, java_warehouse, table=f"db.{name}", options={"min-input-files": "2"})
    java = _java(spark, name + "_twin", ", options => map('min-input-files', '2')")
    assert ours[0] == java[0] == 12 and ours[3] == 0
    assert ours[1] == java[1] == 2
    assert ours[2] > 0 and ours[4] == java[4]
    _assert_same(spark, java_warehouse, name, before, "id")
    t, files = _live_data_files(java_warehouse, name)
    assert all(f.content == FileContent.DATA for f in files) or fv == 2
    assert t.metadata.current_snapshot().summary["operation"] == "replace"


@JAVA
def test_evolved_table_where_and_errors(spark, java_warehouse):
    name = "rw_evolved"
    _twins(spark, name, "(id bigint, cat string, n int) USING iceberg TBLPROPERTIES ('format-version'='2')",
           [", ".join(f"({i * 5 + j}, 'c{j % 2}', {j})" for j in range(5)) for i in range(3)],
           after=["ALTER TABLE {t} ADD PARTITION FIELD cat", "ALTER TABLE {t} ALTER COLUMN n TYPE bigint",
                  "ALTER TABLE {t} ADD COLUMN extra string",
                  "INSERT INTO {t} VALUES (100, 'c0', 1, 'x'), (101, 'c1', 2, 'y')",
                  "INSERT INTO {t} VALUES (102, 'c0', 3, 'z')"])
    before = _snapshot_all(spark, java_warehouse, name)
    ours = _ours(spark, java_warehouse, table=f"db.{name}", options={"min-input-files": "2"}, where="cat = 'c0'")
    java = _java(spark, name + "_twin", ", options => map('min-input-files', '2'), where => 'cat = \"c0\"'")
    assert ours[0] == java[0] and ours[0] >= 2
    _assert_same(spark, java_warehouse, name, before, "id")
    ours2 = _ours(spark, java_warehouse, table=f"db.{name}", options={"rewrite-all": "true"}, where="id > 1000")
    assert ours2 == (0, 0, 0, 0, 0)
    from procedures.errors import ValidationError

    with pytest.raises(ValidationError, match="Cannot parse predicates in where option"):
        _ours(spark, java_warehouse, table=f"db.{name}", where="nope = 1")
    with pytest.raises(ValidationError, match=r"Cannot use options \[bogus\]"):
        _ours(spark, java_warehouse, table=f"db.{name}", options={"bogus": "1"})
    with pytest.raises(ValidationError, match="Cannot mix identity sort columns and a Zorder"):
        _ours(spark, java_warehouse, table=f"db.{name}", sort_order="zorder(id), n")


@JAVA
def test_sort_and_zorder(spark, java_warehouse):
    name = "rw_sort"
    ddl = "(id bigint, x int, y int) USING iceberg TBLPROPERTIES ('format-version'='2')"
    # the 400 (x, y) pairs of a 20 x 20 grid, in an order unrelated to id
    rows = [(i * 37 % 400, (i * 13) % 20, (i // 20 * 7) % 20) for i in range(400)]
    chunks = [", ".join(f"({a}, {b}, {c})" for a, b, c in rows[k:k + 40]) for k in range(0, 400, 40)]
    _twins(spark, name, ddl, chunks, after=["ALTER TABLE {t} WRITE ORDERED BY id"])
    before = _snapshot_all(spark, java_warehouse, name)
    t, files = _live_data_files(java_warehouse, name)
    target = sum(f.file_size_in_bytes for f in files) // 3
    n_input = len(files)
    opts = {"target-file-size-bytes": str(target), "rewrite-all": "true"}
    ours = _ours(spark, java_warehouse, table=f"db.{name}", strategy="sort", sort_order="id DESC NULLS LAST",
                 options=opts)
    java = _java(spark, name + "_twin", f", strategy => 'sort', sort_order => 'id DESC NULLS LAST', "
                                        f"options => map('target-file-size-bytes', '{target}', 'rewrite-all', 'true')")
    assert ours[0] == java[0] == n_input and abs(ours[1] - java[1]) <= 2
    _assert_same(spark, java_warehouse, name, before, "id")
    t, files = _live_data_files(java_warehouse, name)
    for f in files:
        ids = pq.read_table(f.file_path.removeprefix("file:"), columns=["id"]).column(0).to_pylist()
        assert ids == sorted(ids, reverse=True)
        assert f.sort_order_id == 0  # DESC is not the table's order (id ASC): not tagged
    # the table's own order: files are tagged with its id
    _ours(spark, java_warehouse, table=f"db.{name}", strategy="sort", options=opts)
    t, files = _live_data_files(java_warehouse, name)
    assert {f.sort_order_id for f in files} == {t.metadata.default_sort_order_id}
    # z-order over (x, y) clusters: as in Java's TestRewriteDataFilesAction (testZOrderSort), a lookup on
    # x, on y and on both must need a smaller share of the files than before.  "Before" is the same
    # rows sorted by id into files of the same size (each spans nearly the whole grid).
    small = {"target-file-size-bytes": str(sum(f.file_size_in_bytes for f in files) // 6), "rewrite-all": "true"}
    _ours(spark, java_warehouse, table=f"db.{name}", strategy="sort", options=small)
    t, idfiles = _live_data_files(java_warehouse, name)
    # as many z-ordered files as id-sorted ones: a share of more, smaller files would be smaller anyway
    same = {"target-file-size-bytes": str(sum(f.file_size_in_bytes for f in idfiles) // len(idfiles)),
            "rewrite-all": "true"}
    _ours(spark, java_warehouse, table=f"db.{name}", strategy="sort", sort_order="zorder(x, y)", options=same)
    _assert_same(spark, java_warehouse, name, before, "id")
    t, zfiles = _live_data_files(java_warehouse, name)
    assert len(idfiles) >= 4 and len(idfiles) - 1 <= len(zfiles) <= len(idfiles) + 1, (len(idfiles), len(zfiles))
    before_z, after_z = _files_required(idfiles), _files_required(zfiles)
    assert min(before_z) > 0.85, before_z
    # (measured: 1.0 for all three before; about 0.53, 0.73 and 0.40 after)
    assert all(a < 0.85 * b for a, b in zip(after_z, before_z)) and after_z[2] < 0.6 * before_z[2], (before_z, after_z)


def _files_required(files) -> tuple[float, float, float]:
    """Mean share of the files whose x bounds, y bounds, and both, admit a lookup ``x = a``, ``y = b``
    and ``x = a AND y = b``, over every a, b of the 20 x 20 grid (1.0: no file can be skipped)."""
    from procedures.spec.conversions import from_bytes
    from procedures.spec.types import INT

    boxes = [(from_bytes(f.lower_bounds[2], INT), from_bytes(f.upper_bounds[2], INT),
              from_bytes(f.lower_bounds[3], INT), from_bytes(f.upper_bounds[3], INT)) for f in files]
    n = len(boxes)
    on_x = sum(sum(xl <= a <= xu for xl, xu, _, _ in boxes) for a in range(20)) / (20 * n)
    on_y = sum(sum(yl <= b <= yu for _, _, yl, yu in boxes) for b in range(20)) / (20 * n)
    on_xy = sum(sum(xl <= a <= xu and yl <= b <= yu for xl, xu, yl, yu in boxes)
                for a in range(20) for b in range(20)) / (400 * n)
    return on_x, on_y, on_xy


def _jobs_without_group(spark) -> set[int]:
    return set(spark.sparkContext.statusTracker().getJobIdsForGroup())


@JAVA
def test_sort_of_one_range_partition_spills_in_task_and_matches_java(spark, java_warehouse, monkeypatch):
    # a group of one expected file is sorted by one task on either path; past the memory budget ours
    # sorts in runs spilled to the task's local disk instead of going through Spark's range shuffle
    import procedures.spark.engine.data_rewrite_steps as rewrite

    monkeypatch.setattr(rewrite, "IN_TASK_SORT_MAX_BYTES", 0)
    monkeypatch.setattr(rewrite, "SORT_MEMORY_BYTES", 4_000)  # a few hundred rows a run
    name = "rw_sort_spill"
    ddl = ("(id bigint, data string, v double) USING iceberg "
           "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    rows = [(i, f"k{(i * 7919) % 211:04d}" if i % 13 else None, float("nan") if i % 17 == 0 else (i % 29) / 3)
            for i in range(3_000)]
    nan = "double('NaN')"
    chunks = [", ".join(f"({a}, {'NULL' if b is None else repr(b)}, {nan if c != c else c})"
                        for a, b, c in rows[k:k + 500]) for k in range(0, 3_000, 500)]
    _twins(spark, name, ddl, chunks, after=["DELETE FROM {t} WHERE id % 10 = 3"])
    before = _snapshot_all(spark, java_warehouse, name)
    order = "data DESC NULLS FIRST, v ASC NULLS LAST"
    opts = {"rewrite-all": "true"}  # 512 MiB target: one file
    jobs = _jobs_without_group(spark)
    ours = _ours(spark, java_warehouse, table=f"db.{name}", strategy="sort", sort_order=order, options=opts)
    new_jobs = _jobs_without_group(spark) - jobs
    tracker = spark.sparkContext.statusTracker()
    # no shuffle: every job the rewrite ran has a single stage
    assert new_jobs and all(len(tracker.getJobInfo(j).stageIds) == 1 for j in new_jobs)
    java = _java(spark, name + "_twin", f", strategy => 'sort', sort_order => '{order}', "
                                        "options => map('rewrite-all', 'true')")
    assert ours[:1] == java[:1] and ours[1] == java[1] == 1 and ours[4] == java[4]
    _assert_same(spark, java_warehouse, name, before, "id")
    _, files = _live_data_files(java_warehouse, name)
    got = pq.read_table(files[0].file_path.removeprefix("file:"), columns=["data", "v"]).to_pylist()
    _, twin_files = _live_data_files(java_warehouse, name + "_twin")
    want = pq.read_table(twin_files[0].file_path.removeprefix("file:"), columns=["data", "v"]).to_pylist()
    key = lambda r: (r["data"], "NaN" if r["v"] != r["v"] else r["v"])  # noqa: E731
    # Java's file is in Spark's order: ours must list the same (data, v) keys in the same sequence
    assert [key(r) for r in got] == [key(r) for r in want]


@pytest.mark.both_sessions
@pytest.mark.parametrize("strategy", ["binpack", "sort"])
def test_rewrite_on_both_session_kinds(spark, classic_spark, java_warehouse, strategy):
    """A v2 table with position deletes, written by the package on the classic session, rewritten on
    ``spark`` (classic or Connect): bin-pack (splits written by the tasks that read them) and an
    in-task sort.  Same counts on both kinds, the same rows for PyIceberg and DuckDB, sorted files,
    and nothing left under the data folder that the metadata does not reach (no journal either)."""
    name = f"rw_kinds_{strategy}_{'connect' if is_connect(spark) else 'classic'}"
    sevens = ", ".join(str(i) for i in range(0, 60, 7))
    t = merge_on_read_table(classic_spark, name, appends=6, rows=10, cats=2, delete=f"id IN ({sevens})")
    before = pyiceberg_read(t.metadata_location)
    assert before.num_rows == 60 - 9
    kwargs = {"table": f"db.{name}", "options": {"min-input-files": "2"}}
    if strategy == "sort":
        kwargs.update(strategy="sort", sort_order="id DESC NULLS LAST")
    ours = _ours(spark, java_warehouse, **kwargs)
    assert ours[0] == 12 and ours[1] == 2 and ours[3] == 0  # six files per partition, one each after
    t = t.refresh()
    assert t.metadata.current_snapshot().summary["operation"] == "replace"
    for reader, got in (("pyiceberg", pyiceberg_read(t.metadata_location)), ("duckdb", duckdb_read(t.metadata_location))):
        assert_rows_equal(got, before, key="id", label=f"{name} after rewrite / {reader}")
    _, files = _live_data_files(java_warehouse, name)
    files = [f for f in files if f.content == FileContent.DATA]  # the old deletes stay (dangling)
    assert len(files) == 2
    if strategy == "sort":
        for f in files:
            ids = pq.read_table(f.file_path.removeprefix("file:"), columns=["id"]).column(0).to_pylist()
            assert ids == sorted(ids, reverse=True)
    data_dir = t.metadata.location.removeprefix("file:") + "/data"
    assert all_files(data_dir) <= reached_paths(t)
    assert not any(JOURNAL_PREFIX in p for p in all_files(data_dir))


def _task_partitions(files) -> set[int]:
    # data file names start with the Spark task partition that wrote them
    return {int(f.file_path.rsplit("/", 1)[-1].split("-")[0]) for f in files}


@JAVA
@pytest.mark.parametrize("strategy,max_concurrent", [("binpack", 2), ("sort", 1)])
def test_many_groups_share_one_job_and_match_java(spark, java_warehouse, strategy, max_concurrent):
    # twelve partitions of three files: twelve file groups, rewritten by one Spark job of at most
    # max-concurrent-file-group-rewrites tasks instead of a job per group, with Java's outcome
    name = f"rw_many_groups_{strategy}"
    inserts = [", ".join(f"({i * 100 + k}, 'c{k % 12:02d}', {k / 4})" for k in range(48)) for i in range(3)]
    _twins(spark, name, PARTITIONED.format(fv=2), inserts, after=["DELETE FROM {t} WHERE id % 7 = 3"])
    before = _snapshot_all(spark, java_warehouse, name)
    options = {"min-input-files": "2", "max-concurrent-file-group-rewrites": str(max_concurrent)}
    extra, java_extra = {}, ""
    if strategy == "sort":
        extra, java_extra = {"strategy": "sort", "sort_order": "id DESC"}, ", strategy => 'sort', sort_order => 'id DESC'"
    jobs = _jobs_without_group(spark)
    ours = _ours(spark, java_warehouse, table=f"db.{name}", options=options, **extra)
    new_jobs = _jobs_without_group(spark) - jobs
    java = _java(spark, name + "_twin", f", options => map('min-input-files', '2'){java_extra}")
    assert ours[0] == java[0] == 36 and ours[1] == java[1] == 12 and ours[2] == java[2]
    # planning reads the manifests in one job, the twelve groups take one more (a job each before)
    assert len(new_jobs) <= 2, new_jobs
    _assert_same(spark, java_warehouse, name, before, "id")
    _, files = _live_data_files(java_warehouse, name)
    files = [f for f in files if f.content == FileContent.DATA]
    assert len(files) == 12
    assert _task_partitions(files) <= set(range(max_concurrent))
    if strategy == "sort":
        for f in files:
            ids = pq.read_table(f.file_path.removeprefix("file:"), columns=["id"]).column(0).to_pylist()
            assert ids == sorted(ids, reverse=True)


@pytest.mark.parametrize("partial", [True, False])
def test_a_failing_group_in_a_shared_job(spark, java_warehouse, partial):
    """One of three groups of a shared job fails (a data file of partition c1 is gone).  With
    partial progress the other two commit, one commit each, and the failed group's files count as
    failed; without it the call fails and leaves the table and its folder exactly as they were."""
    import os

    name = f"rw_failing_group_{'partial' if partial else 'all'}"
    t = merge_on_read_table(spark, name, appends=4, rows=12, cats=3, delete="id IN (1, 6, 11, 16, 21)")
    _, live = _live_data_files(java_warehouse, name)
    victim = next(f for f in live if f.content == FileContent.DATA and tuple(f.partition) == ("c1",))
    os.remove(victim.file_path.removeprefix("file:"))
    data_dir = t.metadata.location.removeprefix("file:") + "/data"
    files_before = all_files(data_dir)
    snapshot_before = t.metadata.current_snapshot().snapshot_id
    options = {"min-input-files": "2", "partial-progress.enabled": str(partial).lower(),
               "partial-progress.max-commits": "3"}
    jobs = _jobs_without_group(spark)
    if partial:
        row = _ours(spark, java_warehouse, table=f"db.{name}", options=options)
        assert row[0] == 8 and row[1] == 2 and row[3] == 4
        t = t.refresh()
        new = [s for s in t.metadata.snapshots if s.snapshot_id > 0 and s.parent_snapshot_id is not None
               and s.summary["operation"] == "replace"]
        assert len(new) == 2
        _, live = _live_data_files(java_warehouse, name)
        assert victim.file_path in {f.file_path for f in live}
        assert all_files(data_dir) <= reached_paths(t)
    else:
        with pytest.raises(Exception):
            _ours(spark, java_warehouse, table=f"db.{name}", options=options)
        assert t.refresh().metadata.current_snapshot().snapshot_id == snapshot_before
        assert all_files(data_dir) == files_before
    assert len(_jobs_without_group(spark) - jobs) <= 2
