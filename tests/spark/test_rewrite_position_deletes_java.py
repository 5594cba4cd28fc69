"""rewrite_position_delete_files on Java-written merge-on-read tables: our procedure on one table,
Java's CALL on a twin built by the same statements.  Both rewrite the same delete files into the
same number, drop the deletes of data files that are gone, and Java, PyIceberg and DuckDB read the
same rows before and after.  The v3 case is a v2 table with position delete files upgraded to v3
(Java 1.10 writes only deletion vectors into v3 tables): both rewrite those files into DVs."""

from __future__ import annotations

import os
import shutil

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.snapshot_producer import live_entries, snapshot_manifests
from procedures.core.kernel.summary import is_dv
from procedures.io.delete_writers import read_position_deletes
from procedures.frontend import runner
from procedures.spark.write import JOURNAL_PREFIX
from procedures.spec.manifest.model import FileContent, ManifestContent
from tests.oracles import assert_rows_equal, java_metadata_location, read_all

# every test here reads or writes through Iceberg Java (deselected on pyspark 4)
pytestmark = [pytest.mark.spark, pytest.mark.java]


def _build(spark, name: str, fv: int) -> None:
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
    spark.sql(f"CREATE TABLE jcat.db.{name} (id bigint, cat string) USING iceberg PARTITIONED BY (cat) "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', "
              "'write.update.mode'='merge-on-read')")
    for i in range(4):
        spark.sql(f"INSERT INTO jcat.db.{name} SELECT id, concat('c', cast(id % 2 as string)) "
                  f"FROM range({i * 100}, {(i + 1) * 100})")
    # several position delete files per partition
    for lo in (5, 55, 105, 205):
        spark.sql(f"DELETE FROM jcat.db.{name} WHERE id BETWEEN {lo} AND {lo + 10}")
    # compacting partition c0's data files leaves its position deletes dangling
    spark.sql(f"CALL jcat.system.rewrite_data_files(table => 'db.{name}', where => \"cat = 'c0'\", "
              "options => map('rewrite-all', 'true'))")
    if fv == 3:  # the v2 position delete files stay: a v3 table's rewrite must turn them into DVs
        spark.sql(f"ALTER TABLE jcat.db.{name} SET TBLPROPERTIES ('format-version'='3')")


def _deletes(table):
    md = table.metadata
    manifests = snapshot_manifests(table.io, md.current_snapshot())
    live = {e.data_file.file_path for e in live_entries(table.io, md, [m for m in manifests if m.content == ManifestContent.DATA])}
    deletes = [e.data_file for e in live_entries(table.io, md, [m for m in manifests if m.content == ManifestContent.DELETES])
               if e.data_file.content == FileContent.POSITION_DELETES]
    return live, deletes


@pytest.mark.parametrize("fv", [2, 3])
def test_rewrite_position_delete_files_matches_java(spark, java_warehouse, fv):
    name = f"rpd_v{fv}"
    for n in (name, name + "_twin"):
        _build(spark, n, fv)
    metadata = java_metadata_location(java_warehouse, "db", name)
    before = read_all(spark, f"jcat.db.{name}", metadata)
    assert before["java"].num_rows == 400 - 4 * 11
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(java_warehouse)}
    table = HadoopCatalog("ours", str(java_warehouse)).load_table(("db", name))
    assert table.metadata.format_version == fv
    live, deletes = _deletes(table)
    # the fixture really has position delete files (no DVs yet) and dangling deletes to drop
    assert len(deletes) >= 4 and not any(is_dv(f) for f in deletes)
    assert any(p not in live for f in deletes for p in read_position_deletes(table.io, f))

    ours = runner.run("rewrite_position_delete_files", kwargs={"table": f"db.{name}", "options": {"rewrite-all": "true"}},
                        catalog="ours", conf=conf, spark=spark).rows
    java = [tuple(r) for r in spark.sql(f"CALL jcat.system.rewrite_position_delete_files(table => 'db.{name}_twin', "
                                        "options => map('rewrite-all', 'true'))").collect()]
    assert [r[:2] for r in ours] == [r[:2] for r in java]
    assert ours[0][0] == len(deletes) and ours[0][1] >= 1 and ours[0][2] > 0

    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    metadata = java_metadata_location(java_warehouse, "db", name)
    for reader, got in read_all(spark, f"jcat.db.{name}", metadata).items():
        assert_rows_equal(got, before["java"], key="id", label=f"after rewrite_position_delete_files / {reader}")
    table = table.refresh()
    live, deletes = _deletes(table)
    kept = {p for f in deletes for p in read_position_deletes(table.io, f)}
    assert kept and kept <= live  # every remaining delete points at a live data file
    assert table.metadata.current_snapshot().summary["operation"] == "replace"
    twin = HadoopCatalog("ours", str(java_warehouse)).load_table(("db", name + "_twin"))
    _, twin_deletes = _deletes(twin)

    def positions(t, files):  # data file names differ between the twins: compare partitions and positions
        return sorted((tuple(f.partition), tuple(pos)) for f in files for pos in read_position_deletes(t.io, f).values())

    assert positions(table, deletes) == positions(twin, twin_deletes)
    if fv == 3:  # the v2 files became one DV per data file, as in Java's twin
        assert all(is_dv(f) for f in deletes) and all(is_dv(f) for f in twin_deletes)
        assert len(deletes) == len(twin_deletes)


def test_unreadable_delete_file_fails_cleanly(spark, java_warehouse):
    name = "rpd_broken"
    _build(spark, name, 2)
    table = HadoopCatalog("ours", str(java_warehouse)).load_table(("db", name))
    _, deletes = _deletes(table)
    # a delete of partition c0 goes missing; the c1 group still writes its files, which must go too
    victim = next(d for d in deletes if tuple(d.partition) == ("c0",)).file_path
    os.remove(victim[len("file:"):] if victim.startswith("file:") else victim)
    before = table.metadata_location
    data_dir = os.path.join(str(java_warehouse), "db", name, "data")
    files_before = {os.path.join(d, f) for d, _, fs in os.walk(data_dir) for f in fs}
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(java_warehouse)}
    # the failing group's task reports the missing file; the groups that finished lose their files
    with pytest.raises(Exception, match="File does not exist"):
        runner.run("rewrite_position_delete_files", kwargs={"table": f"db.{name}", "options": {"rewrite-all": "true"}},
                     catalog="ours", conf=conf, spark=spark)
    assert table.refresh().metadata_location == before
    assert {os.path.join(d, f) for d, _, fs in os.walk(data_dir) for f in fs} == files_before


# ------------------------------------------------------------------ every group in one Spark job
def _build_four_partitions(spark, name: str) -> None:
    """Four partitions of three data files each, every data file with deletes of three DELETEs."""
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
    spark.sql(f"CREATE TABLE jcat.db.{name} (id bigint, cat string) USING iceberg PARTITIONED BY (cat) "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    for i in range(3):
        spark.sql(f"INSERT INTO jcat.db.{name} SELECT id, concat('c', cast(id % 4 as string)) "
                  f"FROM range({i * 100}, {(i + 1) * 100})")
    for k in (7, 11, 13):
        spark.sql(f"DELETE FROM jcat.db.{name} WHERE id % {k} = 0")


def _jobs_of(spark, group: str, call):
    """Run ``call`` in Spark job group ``group``; returns its result and the ids of the jobs it ran."""
    from procedures.spark.environment import check_python_workers

    sc = spark.sparkContext
    check_python_workers(spark)  # its one-off probe job is not the procedure's
    sc.setJobGroup(group, group)
    try:
        result = call()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
    return result, sorted(sc.statusTracker().getJobIdsForGroup(group))


def _files(folder: str) -> set[str]:
    return {os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs}


def test_groups_are_rewritten_by_one_spark_job(spark, java_warehouse):
    name = "rpd_one_job"
    _build_four_partitions(spark, name)
    table = HadoopCatalog("ours", str(java_warehouse)).load_table(("db", name))
    _, deletes = _deletes(table)
    assert len({tuple(d.partition) for d in deletes}) == 4  # four groups
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(java_warehouse)}
    rows, jobs = _jobs_of(spark, "rpd-one-job", lambda: runner.run(
        "rewrite_position_delete_files", kwargs={"table": f"db.{name}", "options": {"rewrite-all": "true"}},
        catalog="ours", conf=conf, spark=spark).rows)
    assert len(jobs) == 1, f"expected the four groups in one Spark job, ran {len(jobs)}"
    assert rows[0][0] == len(deletes) and rows[0][1] == 12  # one new file per data file
    live, after = _deletes(table.refresh())
    assert {p for f in after for p in read_position_deletes(table.io, f)} <= live


@pytest.mark.parametrize("partial", [False, True])
def test_failing_group_in_a_shared_task(spark, java_warehouse, tmp_path, partial):
    """One task rewrites all four groups (max-concurrent-file-group-rewrites 1); the task's last write
    fails, in the last group after it wrote its other files.  Without partial progress every file
    written goes and the table is unchanged; with it the three other groups are committed and the
    failed group's delete files stay live.  Either way one Spark job ran and no file is left over."""
    from procedures.core.kernel import fault_points as FP
    from tests.helpers.faults import armed

    name = f"rpd_fail_{'partial' if partial else 'all'}"
    _build_four_partitions(spark, name)
    folder = os.path.join(str(java_warehouse), "db", name)
    saved = str(tmp_path / "saved")
    shutil.copytree(folder, saved)
    metadata = java_metadata_location(java_warehouse, "db", name)
    before_rows = read_all(spark, f"jcat.db.{name}", metadata)["java"]
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(java_warehouse)}
    options = {"rewrite-all": "true", "max-concurrent-file-group-rewrites": "1",
               "partial-progress.enabled": str(partial).lower()}

    def call():
        return runner.run("rewrite_position_delete_files", kwargs={"table": f"db.{name}", "options": options},
                          catalog="ours", conf=conf, spark=spark).rows

    # count the task's writes on a complete run, then put the table back
    count_log = str(tmp_path / "count.log")
    with armed(spark, FP.FaultPlan(count_log, action="count", where="task"), str(tmp_path / "count.plan")):
        call()
    # the task's writes of delete files (its journal entry, written last, is not one)
    writes = [r for r in FP.read_log(count_log) if r[0] == FP.WRITE and r[1] == "task" and JOURNAL_PREFIX not in r[3]]
    assert len(writes) == 12 and len({pid for _, _, pid, _ in writes}) == 1, writes  # one task wrote them all
    shutil.rmtree(folder)
    shutil.copytree(saved, folder)
    spark.sql(f"REFRESH TABLE jcat.db.{name}")

    table = HadoopCatalog("ours", str(java_warehouse)).load_table(("db", name))
    _, deletes = _deletes(table)
    files_before = _files(folder)
    plan = FP.FaultPlan(str(tmp_path / "fault.log"), kind=FP.WRITE, n=len(writes), action="raise", where="task")
    with armed(spark, plan, str(tmp_path / "fault.plan")):
        if partial:
            rows, jobs = _jobs_of(spark, f"rpd-fail-{name}", call)
        else:
            with pytest.raises(FP.InjectedFault, match="injected fault"):
                _jobs_of(spark, f"rpd-fail-{name}", call)
            jobs = sorted(spark.sparkContext.statusTracker().getJobIdsForGroup(f"rpd-fail-{name}"))
    assert len(jobs) == 1, f"expected the four groups in one Spark job, ran {len(jobs)}"
    table = table.refresh()
    _, after = _deletes(table)
    new_files = {f.file_path.removeprefix("file:") for f in after} - {f.file_path.removeprefix("file:") for f in deletes}
    if partial:
        failed = {tuple(d.partition) for d in after if d in deletes}
        assert len(failed) == 1, failed  # the last group's delete files are still live, the others rewritten
        assert rows[0][0] == sum(1 for d in deletes if tuple(d.partition) not in failed) and rows[0][1] == 9
        assert len(new_files) == 9
    else:
        assert table.metadata_location.endswith(os.path.basename(metadata))  # no commit
        assert not new_files
    # the files written by the group that failed, and without partial progress by every group, are gone
    assert _files(folder) - files_before == {p for p in new_files} | _new_metadata(folder, files_before)
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    for reader, got in read_all(spark, f"jcat.db.{name}", table.metadata_location).items():
        assert_rows_equal(got, before_rows, key="id", label=f"after a failed group / {reader}")


def _new_metadata(folder: str, before: set[str]) -> set[str]:
    return {p for p in _files(os.path.join(folder, "metadata")) if p not in before}
