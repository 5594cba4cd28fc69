"""Registry: declarations, binding and coercion with Spark 3.5's rules and messages, identifier
resolution, user procedures, and the snapshot-management procedures on a real hadoop catalog (no Spark)."""

from __future__ import annotations

import datetime as dt

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.operations import FastAppend
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.errors import NoSuchProcedureError, NoSuchTableError, TableAlreadyExistsError, ValidationError
from procedures.frontend import runner
from procedures.frontend.binding import bind
from procedures.framework.context import open_catalog
from procedures.framework import registry
from procedures.framework.declaration import OutputColumn, Parameter
from procedures.framework.sqltypes import Literal, TIMESTAMP, coerce, parse_sql_type
from procedures.spec.manifest.model import DataFile, FileFormat
from procedures.spec.schema import Schema
from procedures.spec.types import LONG, STRING, NestedField
from procedures.frontend.parser import parse_call

SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "data", STRING)))


def bind_sql(name: str, args: str) -> dict:
    stmt = parse_call(f"CALL c.system.{name}({args})")
    return bind(registry.get_procedure(name), stmt.positional, stmt.named)


# ------------------------------------------------------------------------------------ binding
def test_positional_and_named_binding():
    assert bind_sql("rollback_to_snapshot", "'db.t', 5L") == {"table": "db.t", "snapshot_id": 5, "dry_run": False}
    assert bind_sql("rollback_to_snapshot", "SNAPSHOT_ID => 5, TaBlE => 'db.t'") == {
        "table": "db.t", "snapshot_id": 5, "dry_run": False}
    assert bind_sql("rollback_to_snapshot", "'db.t', 5L, true") == {"table": "db.t", "snapshot_id": 5, "dry_run": True}
    assert bind_sql("set_current_snapshot", "'db.t'") == {"table": "db.t", "snapshot_id": None, "ref": None,
                                                          "dry_run": False}


@pytest.mark.parametrize(
    "name, args, message",
    [
        ("rollback_to_snapshot", "'db.t', snapshot_id => 1", "Named and positional arguments cannot be mixed"),
        ("rollback_to_snapshot", "table => 'a', TABLE => 'b', snapshot_id => 1",
         "Could not build name to arg map: Duplicate procedure argument: TABLE"),
        ("rollback_to_snapshot", "table => 'a', snapshot => 1", "Could not build name to arg map: Unknown argument: snapshot"),
        ("rollback_to_snapshot", "'a', 1, true, 2", "Too many arguments for procedure rollback_to_snapshot"),
        ("rollback_to_snapshot", "1L", "Wrong arg type for table"),  # BIGINT -> STRING is allowed by Spark ...
        ("rollback_to_snapshot", "table => 'a'", "Missing required parameters: [snapshot_id]"),
        ("rollback_to_snapshot", "table => 'a', snapshot_id => NULL", "Missing required parameters: [snapshot_id]"),
        ("rollback_to_snapshot", "'a', '1'", "Wrong arg type for snapshot_id: cannot cast STRING to BIGINT"),
        ("rollback_to_snapshot", "'a', 1.5", "Wrong arg type for snapshot_id: cannot cast DECIMAL(2,1) to BIGINT"),
        ("rollback_to_timestamp", "'a', 1", "Wrong arg type for timestamp: cannot cast INT to TIMESTAMP"),
        ("rollback_to_timestamp", "'a', 2.2", "Wrong arg type for timestamp: cannot cast DECIMAL(2,1) to TIMESTAMP"),
        ("rollback_to_timestamp", "'a', TIMESTAMP 'yesterday'", "Cannot parse the TIMESTAMP value of timestamp: 'yesterday'"),
        ("ancestors_of", "'a', map('k', 'v')", "Wrong arg type for snapshot_id: cannot cast MAP<STRING,STRING> to BIGINT"),
        ("fast_forward", "'a', map('k', 'v'), 'x'", "Wrong arg type for branch: cannot cast MAP<STRING,STRING> to STRING"),
    ],
)
def test_binding_errors_name_the_argument(name, args, message):
    if args == "1L":
        # Spark: 1L binds to table (BIGINT up-casts to STRING) and snapshot_id is reported missing
        with pytest.raises(ValidationError, match=r"Missing required parameters: \[snapshot_id\]"):
            bind_sql(name, args)
        return
    with pytest.raises(ValidationError) as e:
        bind_sql(name, args)
    assert message in str(e.value)


def test_up_casts_follow_spark():
    # INT -> BIGINT, BIGINT -> TIMESTAMP (seconds), DATE -> TIMESTAMP, atomic -> STRING
    assert bind_sql("ancestors_of", "'a', 7")["snapshot_id"] == 7
    assert bind_sql("rollback_to_timestamp", "'a', 1719705600L")["timestamp"] == 1719705600 * 1_000_000
    assert bind_sql("rollback_to_timestamp", "'a', DATE '2024-06-30'")["timestamp"] == 1719705600 * 1_000_000
    assert bind_sql("fast_forward", "'a', 12L, true")["branch"] == "12"
    assert bind_sql("fast_forward", "'a', 'b', true")["to"] == "true"


def test_timestamp_literals_use_the_session_time_zone():
    lit = Literal(TIMESTAMP, "2021-06-30 00:00:00.000")
    utc = coerce(lit, TIMESTAMP, "timestamp", tz="UTC")
    assert utc == 1625011200 * 1_000_000
    assert coerce(lit, TIMESTAMP, "timestamp", tz="America/Los_Angeles") == utc + 7 * 3600 * 1_000_000
    assert coerce(Literal(TIMESTAMP, "2021-06-30T02:00:00+02:00"), TIMESTAMP, "ts", tz="Asia/Tokyo") == utc
    assert coerce(Literal(TIMESTAMP, "1969-12-31 23:59:59.9995"), TIMESTAMP, "ts") == -500


def test_python_arguments_are_lenient_on_integer_width_only():
    proc = registry.get_procedure("ancestors_of")
    assert bind(proc, named={"table": "a", "snapshot_id": 2**40}, lenient=True)["snapshot_id"] == 2**40
    when = dt.datetime(2021, 6, 30, tzinfo=dt.timezone.utc)
    rb = registry.get_procedure("rollback_to_timestamp")
    assert bind(rb, named={"table": "a", "timestamp": when}, lenient=True)["timestamp"] == 1625011200 * 10**6
    with pytest.raises(ValidationError, match="Wrong arg type for snapshot_id: cannot cast STRING to BIGINT"):
        bind(proc, named={"table": "a", "snapshot_id": "12"}, lenient=True)
    with pytest.raises(ValidationError, match="Wrong arg type for timestamp: cannot cast INT to TIMESTAMP"):
        bind(rb, named={"table": "a", "timestamp": 5}, lenient=True)
    # epoch milliseconds as a Python int would be read as seconds, 50,000 years ahead: refused too
    with pytest.raises(ValidationError, match="cannot cast BIGINT to TIMESTAMP .pass a datetime"):
        bind(rb, named={"table": "a", "timestamp": 1_700_000_000_000}, lenient=True)
    # SQL keeps Spark's rule: a BIGINT literal is epoch seconds
    seconds = Literal(parse_sql_type("BIGINT"), 1_700_000_000)
    assert bind(rb, named={"table": "a", "timestamp": seconds})["timestamp"] == 1_700_000_000 * 10**6


def test_map_literals_reject_duplicate_keys():
    t = parse_sql_type("map<string,string>")
    stmt = parse_call("CALL c.system.p(map('a', 1, 'a', 2))")
    with pytest.raises(ValidationError, match="duplicate map key 'a'"):
        coerce(stmt.positional[0], t, "options")
    assert coerce(parse_call("CALL c.system.p(map('a', 1))").positional[0], t, "options") == {"a": "1"}


def test_unknown_procedure_lists_the_available_ones():
    with pytest.raises(NoSuchProcedureError, match="system.nope not found; available procedures: .*ancestors_of"):
        registry.get_procedure("nope")
    assert registry.get_procedure("ROLLBACK_TO_SNAPSHOT").name == "rollback_to_snapshot"


def test_output_schemas_match_java():
    out = {name: [(c.name, str(c.type), c.nullable) for c in registry.get_procedure(name).output]
           for name in registry.list_procedures()}
    assert out["set_current_snapshot"] == [("previous_snapshot_id", "BIGINT", True), ("current_snapshot_id", "BIGINT", False)]
    assert out["fast_forward"] == [("branch_updated", "STRING", False), ("previous_ref", "BIGINT", True),
                                   ("updated_ref", "BIGINT", False)]
    assert out["register_table"] == [("current_snapshot_id", "BIGINT", True), ("total_records_count", "BIGINT", True),
                                     ("total_data_files_count", "BIGINT", True)]
    assert out["ancestors_of"] == [("snapshot_id", "BIGINT", True), ("timestamp", "BIGINT", True)]
    assert [p.name for p in registry.get_procedure("fast_forward").parameters] == ["table", "branch", "to", "dry_run"]


# ------------------------------------------------------------------------------------ running on a catalog
@pytest.fixture()
def conf(tmp_path):
    wh = tmp_path / "wh"
    cat = HadoopCatalog("ours", str(wh))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{wh}/db/t")
    t = cat.create_table(("db", "t"), md)
    fast = RetryPolicy(num_retries=2, min_wait_ms=1, max_wait_ms=2)
    for i in range(3):
        f = DataFile(f"{t.location}/data/f{i}.parquet", FileFormat.PARQUET, (), 10 + i, 100, spec_id=0)
        t = commit(t, [FastAppend([f])], policy=fast)
    return {
        "spark.sql.catalog.ours.type": "hadoop",
        "spark.sql.catalog.ours.warehouse": str(wh),
        "spark.sql.catalog.other.type": "hadoop",
        "spark.sql.catalog.other.warehouse": str(tmp_path / "other"),
        "spark.sql.session.timeZone": "UTC",
    }


def snapshots(conf) -> list[int]:
    md = open_catalog("ours", conf).load_table(("db", "t")).metadata
    return [s.snapshot_id for s in sorted(md.snapshots, key=lambda s: s.sequence_number)]


def run(conf, text: str):
    stmt = parse_call(text)
    return runner.run(stmt.name, args=stmt.positional, kwargs=stmt.named, catalog=stmt.catalog or "ours", conf=conf).rows


def test_rollback_ancestors_and_set_current(conf):
    s1, s2, s3 = snapshots(conf)
    assert run(conf, "CALL ours.system.ancestors_of('db.t')") == [
        (sid, open_catalog("ours", conf).load_table(("db", "t")).metadata.snapshot_by_id(sid).timestamp_ms)
        for sid in (s3, s2, s1)
    ]
    assert run(conf, f"CALL ours.system.rollback_to_snapshot('db.t', {s1}L)") == [(s3, s1)]
    with pytest.raises(ValidationError, match=f"not an ancestor of the current state: {s3}"):
        run(conf, f"CALL ours.system.rollback_to_snapshot('db.t', {s3}L)")
    assert run(conf, f"CALL ours.system.set_current_snapshot(table => 'db.t', snapshot_id => {s3})") == [(s1, s3)]
    assert [r[0] for r in run(conf, f"CALL ours.system.ancestors_of('db.t', {s2})")] == [s2, s1]
    with pytest.raises(ValidationError, match="Cannot find snapshot: 42"):
        run(conf, "CALL ours.system.ancestors_of('db.t', 42)")
    with pytest.raises(ValidationError, match="Either snapshot_id or ref must be provided, not both"):
        run(conf, f"CALL ours.system.set_current_snapshot('db.t', {s1}, 'main')")


@pytest.mark.parametrize("args", ["'db.missing', 1L, 'main'", "'db.missing'"])
def test_set_current_snapshot_checks_its_arguments_before_loading_the_table(conf, args):
    # Java validates the snapshot_id/ref combination first: an unknown table does not hide it
    with pytest.raises(ValidationError, match="Either snapshot_id or ref must be provided, not both"):
        run(conf, f"CALL ours.system.set_current_snapshot({args})")


def test_fast_forward_creates_then_refuses_a_non_ancestor(conf):
    s1, s2, s3 = snapshots(conf)
    assert run(conf, "CALL ours.system.fast_forward('db.t', 'audit', 'main')") == [("audit", None, s3)]
    run(conf, f"CALL ours.system.rollback_to_snapshot('db.t', {s2})")
    with pytest.raises(ValidationError, match="Cannot fast-forward: audit is not an ancestor of main"):
        run(conf, "CALL ours.system.fast_forward('db.t', 'audit', 'main')")
    assert run(conf, "CALL ours.system.fast_forward('db.t', 'main', 'audit')") == [("main", s2, s3)]


def test_table_resolution_like_spark(conf):
    with pytest.raises(ValidationError, match="Cannot run procedure in catalog 'ours': 'other.db.t' is a table in catalog 'other'"):
        run(conf, "CALL ours.system.ancestors_of('other.db.t')")
    with pytest.raises(ValidationError, match="Cannot handle an empty identifier for parameter 'table'"):
        run(conf, "CALL ours.system.ancestors_of('  ')")
    with pytest.raises(NoSuchTableError, match="Couldn't load table 'default.t' in catalog 'ours'"):
        run(conf, "CALL ours.system.ancestors_of('t')")
    assert len(run(conf, "CALL ours.system.ancestors_of('ours.db.t')")) == 3
    assert len(run(conf, "CALL ours.system.ancestors_of('`db`.`t`')")) == 3
    # a Python call without a catalog takes the table's own catalog
    assert len(runner.run("ancestors_of", kwargs={"table": "ours.db.t"}, conf=conf, lenient=True).rows) == 3
    # ... also when the table is given by position and is not the first parameter (snapshot's
    # `table` is its second): the run gets past the catalog to the source, which needs Spark
    with pytest.raises(ValidationError, match="a session-catalog table needs a Spark session"):
        runner.run("snapshot", args=["spark_catalog.db.src", "ours.db.new"], conf=conf, lenient=True)


def test_register_table(conf, tmp_path):
    t = open_catalog("ours", conf).load_table(("db", "t"))
    snap = t.metadata.current_snapshot()
    conf = {**conf, "spark.sql.catalog.reg.type": "jdbc", "spark.sql.catalog.reg.uri": f"jdbc:sqlite:{tmp_path}/reg.db",
            "spark.sql.catalog.reg.warehouse": str(tmp_path / "reg")}
    open_catalog("reg", conf).create_namespace("db")
    assert run(conf, f"CALL reg.system.register_table('db.copy', '{t.metadata_location}')") == [(snap.snapshot_id, 33, 3)]
    assert open_catalog("reg", conf).load_table(("db", "copy")).metadata_location == t.metadata_location
    with pytest.raises(ValidationError, match="Cannot handle an empty argument metadata_file"):
        run(conf, "CALL reg.system.register_table('db.copy2', '')")
    with pytest.raises(ValidationError, match="Cannot handle an empty identifier for argument table"):
        run(conf, f"CALL reg.system.register_table('', '{t.metadata_location}')")
    with pytest.raises(TableAlreadyExistsError, match="already exists"):
        run(conf, f"CALL reg.system.register_table('db.copy', '{t.metadata_location}')")


def test_user_procedures_register_and_run(conf):
    @registry.register(
        "count_snapshots",
        parameters=[Parameter("table", "STRING", True), ("minimum", "INT", False, 0)],
        output=[OutputColumn("snapshots", "BIGINT", False)],
    )
    def count_snapshots(ctx, table, minimum):
        return [(max(minimum, len(ctx.load_table(table).metadata.snapshots)),)]

    try:
        assert run(conf, "CALL ours.system.COUNT_SNAPSHOTS('db.t')") == [(3,)]
        assert run(conf, "CALL ours.system.count_snapshots(minimum => 9, table => 'db.t')") == [(9,)]
        assert "count_snapshots" in registry.list_procedures()
        with pytest.raises(ValidationError, match="already registered"):
            registry.register("count_snapshots", parameters=[], output=[("x", "INT")])(lambda ctx: [])
    finally:
        registry.unregister("count_snapshots")


def test_declarations_are_validated():
    with pytest.raises(ValidationError, match="required parameters \\['b'\\] must come before optional ones"):
        registry.register("bad", parameters=[("a", "INT"), ("b", "INT", True)], output=[("x", "INT")])(lambda ctx, a, b: [])
    with pytest.raises(ValidationError, match="Unknown Spark SQL type 'INTEGRAL'"):
        Parameter("a", "INTEGRAL")


def test_a_session_catalog_table_belongs_to_the_hive_catalog_on_sparks_own_metastore():
    """procedures.call("migrate", table="spark_catalog.db.t") with several hive catalogs configured
    (others on thrift metastores, Java's plugin on the same metastore): the one without a uri, which
    uses Spark's own metastore like spark_catalog, is the table's catalog."""
    conf = {"spark.sql.catalog.ohive.type": "hive",
            "spark.sql.catalog.thrift_a.type": "hive", "spark.sql.catalog.thrift_a.uri": "thrift://127.0.0.1:1",
            "spark.sql.catalog.badhive.type": "hive", "spark.sql.catalog.badhive.uri": "http://localhost:1",
            "spark.sql.catalog.jhive": "org.apache.iceberg.spark.SparkCatalog", "spark.sql.catalog.jhive.type": "hive",
            "spark.sql.catalog.local.type": "hadoop", "spark.sql.catalog.local.warehouse": "/tmp/x"}
    assert runner._catalog_for_python_call("spark_catalog.db.t", conf) == "ohive"
    # two on Spark's metastore: ambiguous by that rule, and no other rule picks one: the default
    two = {**conf, "spark.sql.catalog.ohive2.type": "hive"}
    assert runner._catalog_for_python_call("spark_catalog.db.t", two) == "local"
