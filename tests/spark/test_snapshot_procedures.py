"""Snapshot-management procedures, ours against Iceberg Java's on the same warehouse.

Each test builds one scenario twice with Iceberg Java SQL (tables ``jcat.db.<t>_j`` and ``_o``), runs
Java's ``CALL jcat.system.<proc>`` on the first and ours (``CALL ours.system.<proc>`` through
:func:`procedures.sql`, catalog ``ours`` = our hadoop catalog on the same warehouse) on the second,
then compares: the output rows with snapshot ids replaced by their position in the table's history,
the output schema, and the resulting tables as Java reads them (rows, refs, snapshot log, summaries).
Every error case Java raises must be an error here too, naming the bad value, with the table unchanged.
"""

from __future__ import annotations

import pytest

import procedures
from procedures.errors import IcebergError
from procedures.framework.context import open_catalog

# every test here reads or writes through Iceberg Java (deselected on pyspark 4)
pytestmark = [pytest.mark.spark, pytest.mark.java]


@pytest.fixture(scope="module")
def ours(spark, java_warehouse):
    spark.conf.set("spark.sql.catalog.ours.type", "hadoop")
    spark.conf.set("spark.sql.catalog.ours.warehouse", str(java_warehouse))
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.db")
    return open_catalog("ours", {"spark.sql.catalog.ours.type": "hadoop",
                                          "spark.sql.catalog.ours.warehouse": str(java_warehouse)})


def build(spark, name: str, steps: list[str]) -> None:
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name} PURGE")
    for step in steps:
        spark.sql(step.format(t=f"jcat.db.{name}"))


def order(ours, name: str) -> dict[int, int]:
    md = ours.load_table(("db", name)).metadata
    snaps = sorted(md.snapshots, key=lambda s: (s.sequence_number, s.timestamp_ms))
    return {s.snapshot_id: i for i, s in enumerate(snaps)}


def ids(ours, name: str) -> list[int]:
    """Snapshot ids in commit order."""
    return sorted(order(ours, name), key=order(ours, name).get)


def normalize(rows, ours, name: str):
    """Replace snapshot ids by ``S<position>`` and commit times by ``T<position>``."""
    md = ours.load_table(("db", name)).metadata
    pos = order(ours, name)
    times = {s.timestamp_ms: pos[s.snapshot_id] for s in md.snapshots}
    out = []
    for row in rows:
        vals = []
        for v in row:
            if isinstance(v, int) and not isinstance(v, bool) and v in pos:
                vals.append(f"S{pos[v]}")
            elif isinstance(v, int) and not isinstance(v, bool) and v in times and v > 10**12:
                vals.append(f"T{times[v]}")
            else:
                vals.append(v)
        out.append(tuple(vals))
    return out


def state(spark, ours, name: str):
    """The table as Java reads it, with snapshot ids replaced by positions."""
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    pos = order(ours, name)
    md = ours.load_table(("db", name)).metadata
    rows = sorted(tuple(r) for r in spark.sql(f"SELECT * FROM jcat.db.{name}").collect())
    refs = sorted((r.name, r.type, pos[r.snapshot_id]) for r in spark.sql(f"SELECT * FROM jcat.db.{name}.refs").collect())
    log = [pos[e.snapshot_id] for e in md.snapshot_log]
    snaps = [(s.summary.get("operation"), s.parent_snapshot_id and pos.get(s.parent_snapshot_id),
              s.summary.get("added-records"), s.summary.get("total-records"),
              "source-snapshot-id" in s.summary, s.summary.get("published-wap-id"))
             for s in sorted(md.snapshots, key=lambda s: pos[s.snapshot_id])]
    return rows, refs, log, snaps


def compare(spark, ours, name: str, java_call: str, our_call: str):
    """Run Java's CALL on ``<name>_j`` and ours on ``<name>_o``; assert equal outputs and tables; return rows."""
    jdf = spark.sql(java_call.format(t=f"db.{name}_j"))
    odf = procedures.sql(spark, our_call.format(t=f"db.{name}_o"))
    jrows, orows = [tuple(r) for r in jdf.collect()], [tuple(r) for r in odf.collect()]
    assert [(f.name, f.dataType, f.nullable) for f in odf.schema] == [(f.name, f.dataType, f.nullable) for f in jdf.schema]
    assert normalize(orows, ours, f"{name}_o") == normalize(jrows, ours, f"{name}_j")
    assert state(spark, ours, f"{name}_o") == state(spark, ours, f"{name}_j")
    return normalize(orows, ours, f"{name}_o")


def _java_message(e: BaseException) -> str:
    """The Java exception's first line (py4j wraps it in a long message)."""
    java = getattr(e, "java_exception", None)
    return str(java.toString()) if java is not None else str(e).split("\n")[0]


def both_fail(spark, ours, name: str, java_call: str, our_call: str, message: str) -> None:
    """Java's CALL fails; ours fails naming ``message``; our table is unchanged."""
    with pytest.raises(Exception) as java_error:
        spark.sql(java_call.format(t=f"db.{name}_j")).collect()
    print("java:", _java_message(java_error.value))
    before = ours.load_table(("db", f"{name}_o")).metadata_location
    with pytest.raises(IcebergError) as e:
        procedures.sql(spark, our_call.format(t=f"db.{name}_o"))
    assert message in str(e.value)
    assert ours.load_table(("db", f"{name}_o")).metadata_location == before


THREE_APPENDS = [
    "CREATE TABLE {t} (id bigint, data string) USING iceberg",
    "INSERT INTO {t} VALUES (1, 'a')",
    "INSERT INTO {t} VALUES (2, 'b')",
    "INSERT INTO {t} VALUES (3, 'c')",
]


def twice(spark, name: str, steps: list[str]) -> None:
    build(spark, f"{name}_j", steps)
    build(spark, f"{name}_o", steps)


def test_rollback_to_snapshot(spark, ours):
    twice(spark, "rb", THREE_APPENDS)
    j, o = ids(ours, "rb_j"), ids(ours, "rb_o")
    rows = compare(spark, ours, "rb", f"CALL jcat.system.rollback_to_snapshot('{{t}}', {j[0]}L)",
                   f"CALL ours.system.rollback_to_snapshot('{{t}}', {o[0]}L)")
    assert rows == [("S2", "S0")]
    both_fail(spark, ours, "rb", f"CALL jcat.system.rollback_to_snapshot('{{t}}', {j[2]}L)",
              f"CALL ours.system.rollback_to_snapshot('{{t}}', {o[2]}L)", f"not an ancestor of the current state: {o[2]}")
    both_fail(spark, ours, "rb", "CALL jcat.system.rollback_to_snapshot('{t}', 12345L)",
              "CALL ours.system.rollback_to_snapshot('{t}', 12345L)", "Cannot roll back to unknown snapshot id: 12345")
    both_fail(spark, ours, "rb", "CALL jcat.system.rollback_to_snapshot('{t}', '1')",
              "CALL ours.system.rollback_to_snapshot('{t}', '1')", "Wrong arg type for snapshot_id")
    both_fail(spark, ours, "rb", "CALL jcat.system.rollback_to_snapshot(table => '{t}')",
              "CALL ours.system.rollback_to_snapshot(table => '{t}')", "Missing required parameters: [snapshot_id]")


def test_rollback_to_timestamp(spark, ours):
    twice(spark, "rt", THREE_APPENDS)
    mdj, mdo = ours.load_table(("db", "rt_j")).metadata, ours.load_table(("db", "rt_o")).metadata

    def ts(md, i: int) -> str:
        snap = sorted(md.snapshots, key=lambda s: s.sequence_number)[i]
        return f"TIMESTAMP '{_utc(snap.timestamp_ms + 1)}'"  # just after snapshot i: i is the newest older one

    rows = compare(spark, ours, "rt", f"CALL jcat.system.rollback_to_timestamp('{{t}}', {ts(mdj, 1)})",
                   f"CALL ours.system.rollback_to_timestamp('{{t}}', {ts(mdo, 1)})")
    assert rows == [("S2", "S1")]
    first_j = f"TIMESTAMP '{_utc(sorted(mdj.snapshots, key=lambda s: s.sequence_number)[0].timestamp_ms)}'"
    first_o = f"TIMESTAMP '{_utc(sorted(mdo.snapshots, key=lambda s: s.sequence_number)[0].timestamp_ms)}'"
    both_fail(spark, ours, "rt", f"CALL jcat.system.rollback_to_timestamp('{{t}}', {first_j})",
              f"CALL ours.system.rollback_to_timestamp('{{t}}', {first_o})", "Cannot roll back, no valid snapshot older than")
    both_fail(spark, ours, "rt", "CALL jcat.system.rollback_to_timestamp('{t}', 2.2)",
              "CALL ours.system.rollback_to_timestamp('{t}', 2.2)", "Wrong arg type for timestamp")


def _utc(ms: int) -> str:
    import datetime as dt

    return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def test_set_current_snapshot(spark, ours):
    twice(spark, "sc", THREE_APPENDS + ["ALTER TABLE {t} CREATE TAG first_tag"])
    j, o = ids(ours, "sc_j"), ids(ours, "sc_o")
    compare(spark, ours, "sc", f"CALL jcat.system.rollback_to_snapshot('{{t}}', {j[0]})",
            f"CALL ours.system.rollback_to_snapshot('{{t}}', {o[0]})")
    # jump to a snapshot that is no longer an ancestor
    assert compare(spark, ours, "sc", f"CALL jcat.system.set_current_snapshot('{{t}}', {j[2]})",
                   f"CALL ours.system.set_current_snapshot('{{t}}', {o[2]})") == [("S0", "S2")]
    assert compare(spark, ours, "sc", "CALL jcat.system.set_current_snapshot(table => '{t}', ref => 'first_tag')",
                   "CALL ours.system.set_current_snapshot(table => '{t}', ref => 'first_tag')") == [("S2", "S2")]
    for args, message in [
        ("'{t}'", "Either snapshot_id or ref must be provided, not both"),
        (None, "Either snapshot_id or ref must be provided, not both"),
        ("table => '{t}', ref => 'nope'", "Cannot find matching snapshot ID for ref nope"),
        ("'{t}', 777", "Cannot roll back to unknown snapshot id: 777"),
    ]:
        args = args or f"'{{t}}', {{sid}}, 'main'"
        both_fail(spark, ours, "sc", f"CALL jcat.system.set_current_snapshot({args.replace('{sid}', str(j[0]))})",
                  f"CALL ours.system.set_current_snapshot({args.replace('{sid}', str(o[0]))})", message)


WAP = [
    "CREATE TABLE {t} (id bigint, part string) USING iceberg PARTITIONED BY (part) "
    "TBLPROPERTIES ('write.wap.enabled'='true')",
    "INSERT INTO {t} VALUES (1, 'a'), (2, 'b')",
]


def stage(spark, name: str, wap_id: str, sql: str, conf: dict | None = None) -> None:
    spark.conf.set("spark.wap.id", wap_id)
    for k, v in (conf or {}).items():
        spark.conf.set(k, v)
    try:
        spark.sql(sql.format(t=f"jcat.db.{name}"))
    finally:
        spark.conf.unset("spark.wap.id")
        for k in conf or {}:
            spark.conf.unset(k)


def test_cherrypick_snapshot(spark, ours):
    twice(spark, "cp", WAP)
    for side in ("cp_j", "cp_o"):
        stage(spark, side, "w1", "INSERT INTO {t} VALUES (3, 'c')")
        stage(spark, side, "w2", "INSERT OVERWRITE {t} VALUES (9, 'a')",
              {"spark.sql.sources.partitionOverwriteMode": "dynamic"})
        spark.sql(f"INSERT INTO jcat.db.{side} VALUES (4, 'd')")
    j, o = ids(ours, "cp_j"), ids(ours, "cp_o")
    # j[1] staged append (not a fast-forward any more), j[2] staged dynamic overwrite, j[3] the normal insert
    assert compare(spark, ours, "cp", f"CALL jcat.system.cherrypick_snapshot('{{t}}', {j[1]})",
                   f"CALL ours.system.cherrypick_snapshot('{{t}}', {o[1]})") == [("S1", "S4")]
    assert compare(spark, ours, "cp", f"CALL jcat.system.cherrypick_snapshot(snapshot_id => {j[2]}, table => '{{t}}')",
                   f"CALL ours.system.cherrypick_snapshot(snapshot_id => {o[2]}, table => '{{t}}')") == [("S2", "S5")]
    both_fail(spark, ours, "cp", f"CALL jcat.system.cherrypick_snapshot('{{t}}', {j[1]})",
              f"CALL ours.system.cherrypick_snapshot('{{t}}', {o[1]})",
              "Duplicate request to cherry pick wap id that was published already: w1")
    both_fail(spark, ours, "cp", f"CALL jcat.system.cherrypick_snapshot('{{t}}', {j[3]})",
              f"CALL ours.system.cherrypick_snapshot('{{t}}', {o[3]})", f"Cannot cherrypick snapshot {o[3]}: already an ancestor")
    both_fail(spark, ours, "cp", "CALL jcat.system.cherrypick_snapshot('{t}', 31337)",
              "CALL ours.system.cherrypick_snapshot('{t}', 31337)", "Cannot cherry-pick unknown snapshot ID: 31337")


def test_cherrypick_fast_forward_and_publish_changes(spark, ours):
    twice(spark, "pub", WAP)
    for side in ("pub_j", "pub_o"):
        stage(spark, side, "w1", "INSERT INTO {t} VALUES (3, 'c')")
        stage(spark, side, "w2", "INSERT INTO {t} VALUES (5, 'e')")
    # w1's parent is the head: publishing it is a fast-forward (no new snapshot)
    assert compare(spark, ours, "pub", "CALL jcat.system.publish_changes('{t}', 'w1')",
                   "CALL ours.system.publish_changes('{t}', 'w1')") == [("S1", "S1")]
    # w2 was staged on the old head: now it is re-appended
    assert compare(spark, ours, "pub", "CALL jcat.system.publish_changes(wap_id => 'w2', table => '{t}')",
                   "CALL ours.system.publish_changes(wap_id => 'w2', table => '{t}')") == [("S2", "S3")]
    both_fail(spark, ours, "pub", "CALL jcat.system.publish_changes('{t}', 'w2')",
              "CALL ours.system.publish_changes('{t}', 'w2')", "Duplicate request to cherry pick wap id that was published already: w2")
    both_fail(spark, ours, "pub", "CALL jcat.system.publish_changes('{t}', 'nope')",
              "CALL ours.system.publish_changes('{t}', 'nope')", "Cannot apply unknown WAP ID 'nope'")


def test_fast_forward(spark, ours):
    twice(spark, "ff", THREE_APPENDS[:2] + ["ALTER TABLE {t} CREATE BRANCH audit", "ALTER TABLE {t} CREATE TAG t1",
                                            "INSERT INTO {t}.branch_audit VALUES (7, 'x')"])
    assert compare(spark, ours, "ff", "CALL jcat.system.fast_forward('{t}', 'main', 'audit')",
                   "CALL ours.system.fast_forward('{t}', 'main', 'audit')") == [("main", "S0", "S1")]
    assert compare(spark, ours, "ff", "CALL jcat.system.fast_forward('{t}', 'newb', 'main')",
                   "CALL ours.system.fast_forward('{t}', 'newb', 'main')") == [("newb", None, "S1")]
    assert compare(spark, ours, "ff", "CALL jcat.system.fast_forward('{t}', 'main', 'main')",
                   "CALL ours.system.fast_forward('{t}', 'main', 'main')") == [("main", "S1", "S1")]
    both_fail(spark, ours, "ff", "CALL jcat.system.fast_forward('{t}', 'main', 'nope')",
              "CALL ours.system.fast_forward('{t}', 'main', 'nope')", "Ref does not exist: nope")
    both_fail(spark, ours, "ff", "CALL jcat.system.fast_forward('{t}', 't1', 'main')",
              "CALL ours.system.fast_forward('{t}', 't1', 'main')", "Ref t1 is a tag not a branch")
    both_fail(spark, ours, "ff", "CALL jcat.system.fast_forward('{t}', 'main', 't1')",
              "CALL ours.system.fast_forward('{t}', 'main', 't1')", "Cannot fast-forward: main is not an ancestor of t1")


def test_ancestors_of(spark, ours):
    twice(spark, "anc", THREE_APPENDS)
    j, o = ids(ours, "anc_j"), ids(ours, "anc_o")
    assert compare(spark, ours, "anc", "CALL jcat.system.ancestors_of('{t}')",
                   "CALL ours.system.ancestors_of('{t}')") == [("S2", "T2"), ("S1", "T1"), ("S0", "T0")]
    assert compare(spark, ours, "anc", f"CALL jcat.system.ancestors_of('{{t}}', {j[1]})",
                   f"CALL ours.system.ancestors_of('{{t}}', {o[1]})") == [("S1", "T1"), ("S0", "T0")]
    both_fail(spark, ours, "anc", "CALL jcat.system.ancestors_of('{t}', 99)",
              "CALL ours.system.ancestors_of('{t}', 99)", "Cannot find snapshot: 99")
    twice(spark, "anc_empty", THREE_APPENDS[:1])
    both_fail(spark, ours, "anc_empty", "CALL jcat.system.ancestors_of('{t}')",
              "CALL ours.system.ancestors_of('{t}')", "Cannot find snapshot: -1")


def test_table_argument_errors(spark, ours):
    twice(spark, "args", THREE_APPENDS[:2])
    both_fail(spark, ours, "args", "CALL jcat.system.ancestors_of('')", "CALL ours.system.ancestors_of('')",
              "Cannot handle an empty identifier for parameter 'table'")
    both_fail(spark, ours, "args", "CALL jcat.system.ancestors_of('db.missing')", "CALL ours.system.ancestors_of('db.missing')",
              "Couldn't load table 'db.missing' in catalog 'ours'")
    both_fail(spark, ours, "args", "CALL jcat.system.ancestors_of('ours.{t}')", "CALL ours.system.ancestors_of('jcat.{t}')",
              "Cannot run procedure in catalog 'ours': 'jcat.db.args_o' is a table in catalog 'jcat'")
    # the catalog prefix naming the CALL's own catalog is accepted
    assert len(procedures.sql(spark, "CALL ours.system.ancestors_of('ours.db.args_o')").collect()) == 1


def test_register_table_in_a_jdbc_catalog(spark, ours, tmp_path):
    build(spark, "src", THREE_APPENDS)
    src = ours.load_table(("db", "src"))
    spark.conf.set("spark.sql.catalog.reg.type", "jdbc")
    spark.conf.set("spark.sql.catalog.reg.uri", f"jdbc:sqlite:{tmp_path}/reg.db")
    spark.conf.set("spark.sql.catalog.reg.warehouse", str(tmp_path / "reg"))
    procedures.sql(spark, "CREATE NAMESPACE reg.db")
    out = procedures.sql(spark, f"CALL reg.system.register_table('db.copy', '{src.metadata_location}')")
    assert [(f.name, f.nullable) for f in out.schema] == [
        ("current_snapshot_id", True), ("total_records_count", True), ("total_data_files_count", True)]
    java_count = spark.sql("SELECT count(*) FROM jcat.db.src").collect()[0][0]
    java_files = spark.sql("SELECT count(*) FROM jcat.db.src.files").collect()[0][0]
    assert [tuple(r) for r in out.collect()] == [(src.metadata.current_snapshot_id, java_count, java_files)]
    with pytest.raises(IcebergError, match="already exists"):
        procedures.sql(spark, f"CALL reg.system.register_table('db.copy', '{src.metadata_location}')")
    with pytest.raises(IcebergError, match="Cannot handle an empty argument metadata_file"):
        procedures.sql(spark, "CALL reg.system.register_table('db.copy2', '')")
    with pytest.raises(Exception):  # Java refuses the same empty argument
        spark.sql("CALL jcat.system.register_table('db.copy2', '')").collect()


def test_python_call_api(spark, ours):
    build(spark, "api", THREE_APPENDS)
    first = ids(ours, "api")[0]
    df = procedures.call("rollback_to_snapshot", table="ours.db.api", snapshot_id=first)
    assert [f.name for f in df.schema] == ["previous_snapshot_id", "current_snapshot_id"]
    assert normalize([tuple(r) for r in df.collect()], ours, "api") == [("S2", "S0")]
    spark.sql("REFRESH TABLE jcat.db.api")
    assert [tuple(r) for r in spark.sql("SELECT * FROM jcat.db.api").collect()] == [(1, "a")]
    with pytest.raises(IcebergError, match="Unknown argument: snapshot"):
        procedures.call("ours.system.rollback_to_snapshot", table="db.api", snapshot=first)
