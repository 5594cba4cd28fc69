"""SQL DML on our tables through ``procedures.sql`` (issue 35): DELETE, UPDATE, MERGE INTO and INSERT
OVERWRITE, copy-on-write and merge-on-read, against Iceberg Java 1.10.2's Spark SQL on twin tables.

Twins: ``jcat.db.<name>_j`` is changed by Java (``spark.sql``), ``ours.db.<name>_o`` -- our hadoop
catalog on the same warehouse -- by ``procedures.sql``.  After every statement both tables must hold
the same rows (read by Java, PyIceberg and DuckDB), their new snapshots the same operation and the
same summary counts of records and of delete files, and the same kinds of live delete files.
"""

from __future__ import annotations

import pytest

import procedures
from procedures.errors import CommitConflictError, ValidationError
from procedures.spark import row_changes
from tests.helpers.catalogs import SHARED_KINDS, java_twins, ours_on_java_warehouse, shared_catalog
from tests.oracles import assert_rows_equal, java_metadata_location, java_read, read_all

pytestmark = [pytest.mark.spark]

COLUMNS = "id bigint, part string, data string, n int"
#: summary counts compared exactly while both twins have the same files (they are laid out alike until
#: a statement writes new data files: Java shuffles rows to its writers, we write per input task): which
#: rows and files a statement rewrites or marks then depends on the rows alone.  ``added-data-files``
#: never is: Java's shuffle decides how many files the new rows go to, our input tasks do
RECORD_KEYS = ("added-position-deletes", "removed-position-deletes", "total-position-deletes", "added-dvs",
               "removed-dvs", "added-records", "deleted-records", "deleted-data-files", "added-delete-files",
               "removed-delete-files")
#: merge-on-read counts compared exactly whatever the layout: new data files hold only the new rows
#: (updated and inserted) and no data file is removed; on v2 every deleted row is one new position
#: delete.  (A v3 deletion vector also carries the positions its data file had deleted before, so its
#: count follows the layout; so does the number of delete files, one per data file touched.)
MOR_KEYS = {2: ("added-records", "deleted-records", "added-position-deletes"),
            3: ("added-records", "deleted-records")}
#: counts compared exactly always (copy-on-write rewrites whole files, so added-/deleted-records
#: depend on the layout; their difference does not)
ROW_KEYS = ("total-records", "total-equality-deletes")
#: counts compared by presence: a file of that kind was added or removed
PRESENCE_KEYS = ("added-data-files", "deleted-data-files", "added-delete-files", "removed-delete-files",
                 "added-dvs", "removed-dvs", "added-position-deletes", "removed-position-deletes")


@pytest.fixture(scope="module")
def ours(spark, java_warehouse):
    return ours_on_java_warehouse(spark, java_warehouse)


def _twins(spark, name, *, fv=2, partitioned=False, mode="copy-on-write", extra=""):
    props = (f"'format-version'='{fv}', 'write.delete.mode'='{mode}', 'write.update.mode'='{mode}', "
             f"'write.merge.mode'='{mode}'" + (f", {extra}" if extra else ""))
    mine, java = java_twins(spark, name, COLUMNS, "part" if partitioned else "", props)
    for n in (mine, java):
        # two commits: several data files per partition
        for lo in (0, 10):
            rows = ", ".join(f"({i}, 'p{i % 3}', 'd{i}', {i * 10})" for i in range(lo, lo + 10))
            spark.sql(f"INSERT INTO jcat.db.{n} VALUES {rows}")
    return mine, java


def _snapshot(spark, name):
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    rows = spark.sql(f"SELECT operation, summary FROM jcat.db.{name}.snapshots ORDER BY committed_at DESC, "
                     "snapshot_id").collect()
    return (rows[0]["operation"], dict(rows[0]["summary"])) if rows else (None, {})


def _delete_kinds(spark, name):
    """(content, file_format) of each live delete file, with counts."""
    out: dict[tuple, int] = {}
    for r in spark.sql(f"SELECT content, file_format FROM jcat.db.{name}.delete_files").collect():
        key = (r["content"], r["file_format"])
        out[key] = out.get(key, 0) + 1
    return {k: bool(v) for k, v in out.items()}


def _run_both(spark, mine, java, statement, same_layout=False, exact=()):
    """Run ``statement`` (with ``{t}`` for the target and ``{cat}`` for the catalog) on both twins
    and compare them; ``same_layout`` when both still have the same data files; ``exact``: summary
    counts equal whatever the layout."""
    procedures.sql(spark, statement.format(t=f"ours.db.{mine}", cat="ours"))
    spark.sql(statement.format(t=f"jcat.db.{java}", cat="jcat"))
    _compare(spark, mine, java, statement, same_layout, exact)


def _counts(summary, same_layout, exact=()):
    out = {k: summary.get(k) for k in ROW_KEYS + tuple(exact) + (RECORD_KEYS if same_layout else ())}
    out.update({f"has {k}": int(summary.get(k, 0)) > 0 for k in PRESENCE_KEYS})
    out["net-records"] = int(summary.get("added-records", 0)) - int(summary.get("deleted-records", 0))
    return out


def _compare(spark, mine, java, label, same_layout=False, exact=()):
    # Java's catalog caches tables: see our commits
    spark.sql(f"REFRESH TABLE jcat.db.{mine}")
    got = java_read(spark, f"jcat.db.{mine}")
    assert_rows_equal(got, java_read(spark, f"jcat.db.{java}"), key="id", label=label)
    (op_o, sum_o), (op_j, sum_j) = _snapshot(spark, mine), _snapshot(spark, java)
    assert op_o == op_j, f"{label}: operation {op_o} != Java's {op_j}"
    assert _counts(sum_o, same_layout, exact) == _counts(sum_j, same_layout, exact), \
        f"{label}: {sum_o} vs Java's {sum_j}"
    assert _delete_kinds(spark, mine) == _delete_kinds(spark, java), label
    location = java_metadata_location(spark.conf.get("spark.sql.catalog.jcat.warehouse"), "db", mine)
    for reader, rows in read_all(spark, f"jcat.db.{mine}", location).items():
        assert_rows_equal(rows, got, key="id", label=f"{label} ({reader})")


STATEMENTS = [
    "DELETE FROM {t} WHERE id % 4 = 1",
    "UPDATE {t} SET data = concat(data, '-u'), n = n + 1 WHERE id > 12",
    "DELETE FROM {t} AS x WHERE x.id IN (2, 3) OR x.data = 'd19-u'",
    "MERGE INTO {t} AS t USING (SELECT id, 'p9' AS part, concat('m', id) AS data, -1 AS n FROM range(14, 26)) AS s "
    "ON t.id = s.id WHEN MATCHED AND t.id = 14 THEN DELETE WHEN MATCHED THEN UPDATE SET t.data = s.data, t.n = s.n "
    "WHEN NOT MATCHED AND s.id < 24 THEN INSERT * WHEN NOT MATCHED BY SOURCE AND t.id < 5 THEN UPDATE SET n = 0",
    "MERGE INTO {t} t USING (SELECT 100 AS id, 'p1' AS part, 'x' AS data, 7 AS n) s ON t.id = s.id "
    "WHEN NOT MATCHED THEN INSERT (id, part, data) VALUES (s.id, s.part, s.data)",
    "UPDATE {t} SET n = -n",
]


@pytest.mark.java
@pytest.mark.parametrize("fv", [2, 3])
@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_dml_statements_match_java(spark, ours, fv, partitioned, mode):
    mine, java = _twins(spark, f"dml_{fv}_{int(partitioned)}_{mode[0]}", fv=fv, partitioned=partitioned, mode=mode)
    for i, statement in enumerate(STATEMENTS):
        # copy-on-write rewrites files from the first statement on; merge-on-read adds data files
        # from the second (UPDATE) on
        _run_both(spark, mine, java, statement, same_layout=i < (1 if mode == "copy-on-write" else 2),
                  exact=MOR_KEYS[fv] if mode == "merge-on-read" else ())


# ------------------------------------------------------------------------------------ INSERT OVERWRITE
@pytest.mark.java
@pytest.mark.parametrize("fv", [2, 3])
def test_insert_overwrite_static_and_dynamic_match_java(spark, ours, fv):
    mine, java = _twins(spark, f"dml_io_{fv}", fv=fv, partitioned=True)
    try:
        # static: the whole table, then one partition given in PARTITION
        _run_both(spark, mine, java, "INSERT OVERWRITE {t} SELECT id + 100, part, data, n FROM {t} WHERE id < 12")
        _run_both(spark, mine, java, "INSERT OVERWRITE TABLE {t} PARTITION (part = 'p1') SELECT 7, 'seven', 70")
        # dynamic: only the partitions the query writes
        spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
        _run_both(spark, mine, java, "INSERT OVERWRITE {t} VALUES (1, 'p2', 'one', 1), (2, 'p2', 'two', 2)")
        _run_both(spark, mine, java, "INSERT OVERWRITE {t} PARTITION (part = 'p0') SELECT 3, 'three', 3")
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")


@pytest.mark.java
@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_nested_field_assignments_match_java(spark, ours, mode):
    """UPDATE and MERGE setting struct fields (``SET s.x = ...``, nested two deep, qualified by the
    alias): the struct is rebuilt with the other fields kept; a null struct gets the assigned fields."""
    props = f"'format-version'='2', 'write.update.mode'='{mode}', 'write.merge.mode'='{mode}'"
    mine, java = java_twins(spark, f"dml_nested_{mode[0]}", "id bigint, s struct<x:int, y:struct<a:string, b:string>>",
                            props=props)
    for n in (mine, java):
        spark.sql(f"INSERT INTO jcat.db.{n} VALUES (1, named_struct('x', 1, 'y', named_struct('a', 'a1', 'b', 'b1'))), "
                  "(2, null), (3, named_struct('x', 3, 'y', null)), (4, named_struct('x', 4, 'y', "
                  "named_struct('a', 'a4', 'b', null)))")
    _run_both(spark, mine, java, "UPDATE {t} SET s.x = s.x * 10 + id WHERE id < 3")
    _run_both(spark, mine, java, "UPDATE {t} AS u SET u.s.y.b = concat('n', id), id = id + 100 WHERE id >= 3")
    _run_both(spark, mine, java, "MERGE INTO {t} AS t USING (SELECT 1 AS id, 'm' AS v UNION ALL SELECT 9, 'z') AS s "
                                 "ON t.id = s.id WHEN MATCHED THEN UPDATE SET t.s.y.a = s.v, s.x = -1 "
                                 "WHEN NOT MATCHED THEN INSERT (id, s) VALUES (s.id, named_struct('x', 9, 'y', null))")


@pytest.mark.java
@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_hostile_column_names_match_java(spark, ours, mode):
    """Column and struct field names a careless or hostile user picks (a back-quote, a space, a quote,
    a dot, a backslash) through UPDATE, DELETE, MERGE and a partition on one of them: every name is
    quoted, never pasted into the statement's text as is."""
    props = f"'format-version'='2', 'write.delete.mode'='{mode}', 'write.update.mode'='{mode}', 'write.merge.mode'='{mode}'"
    columns = "id bigint, `we``ird` int, `a b` string, `it's` string, `s` struct<`x.y`: int, `q\\\\z`: string>"
    mine, java = java_twins(spark, f"dml_names_{mode[0]}", columns, "`a b`", props)
    for n in (mine, java):
        spark.sql(f"INSERT INTO jcat.db.{n} VALUES " + ", ".join(
            f"({i}, {i * 10}, 'g{i % 2}', 'q\\'{i}', named_struct('x.y', {i}, 'q\\\\\\\\z', 'v{i}'))" for i in range(6)))
    _run_both(spark, mine, java, "UPDATE {t} SET `we``ird` = `we``ird` + 1, `it's` = concat(`it's`, '-u') "
                                 "WHERE `a b` = 'g1'")
    # after a copy-on-write UPDATE a partition's rows are in one file, as Java's hash distribution
    # writes them, so this DELETE of some of them is an overwrite on both sides
    _run_both(spark, mine, java, "UPDATE {t} AS u SET u.s.`x.y` = -u.s.`x.y`, u.s.`q\\\\z` = 'n' WHERE id < 2")
    _run_both(spark, mine, java, "DELETE FROM {t} WHERE `it's` = 'q\\'2' OR s.`x.y` = 4")
    _run_both(spark, mine, java, "MERGE INTO {t} AS t USING (SELECT 3 AS id, 7 AS `we``ird` UNION ALL SELECT 9, 8) AS s "
                                 "ON t.id = s.id WHEN MATCHED THEN UPDATE SET t.`we``ird` = s.`we``ird` "
                                 "WHEN NOT MATCHED THEN INSERT (id, `we``ird`, `a b`, `it's`, s) VALUES "
                                 "(s.id, s.`we``ird`, 'g9', 'new', named_struct('x.y', 9, 'q\\\\\\\\z', 'z'))")


@pytest.mark.java
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_insert_overwrite_with_a_column_list_matches_java(spark, ours, dynamic):
    """``INSERT OVERWRITE t (cols) ...``: the query's columns go to the listed ones by position; with
    ``PARTITION`` the list names the other columns; a list leaving a column out is refused, as by Java."""
    mine, java = _twins(spark, f"dml_cols_{int(dynamic)}", partitioned=True)
    try:
        if dynamic:
            spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
        _run_both(spark, mine, java, "INSERT OVERWRITE {t} (n, part, data, id) SELECT n * 2, part, upper(data), id "
                                     "FROM {t} WHERE id < 12")
        _run_both(spark, mine, java, "INSERT OVERWRITE TABLE {t} PARTITION (part = 'p1') (n, id, data) "
                                     "VALUES (70, 7, 'seven')")
        # a list leaving a column out: Java refuses ("Cannot find data for the output column"), so do we
        before = _snapshot_id(ours, mine)
        with pytest.raises(Exception, match="Cannot find data"):
            spark.sql(f"INSERT OVERWRITE jcat.db.{java} (id, part) SELECT 31, 'p2'")
        with pytest.raises(ValidationError, match="leaves out the column"):
            procedures.sql(spark, f"INSERT OVERWRITE ours.db.{mine} (id, part) SELECT 31, 'p2'")
        assert _snapshot_id(ours, mine) == before
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")


def test_insert_overwrite_into_a_catalog_named_local(spark, tmp_path):
    """sqlglot reads ``INSERT OVERWRITE local...`` as Hive's ``INSERT OVERWRITE LOCAL DIRECTORY``."""
    spark.conf.set("spark.sql.catalog.local.type", "hadoop")
    spark.conf.set("spark.sql.catalog.local.warehouse", str(tmp_path / "wh"))
    try:
        procedures.sql(spark, "CREATE NAMESPACE local.db")
        procedures.sql(spark, "CREATE TABLE local.db.t (id bigint, data string) USING iceberg")
        procedures.sql(spark, "INSERT INTO local.db.t VALUES (1, 'a'), (2, 'b')")
        procedures.sql(spark, "INSERT OVERWRITE local.db.t SELECT id * 10, data FROM local.db.t")
        assert sorted(tuple(r) for r in procedures.sql(spark, "SELECT * FROM local.db.t").collect()) == \
            [(10, "a"), (20, "b")]
        procedures.sql(spark, "insert overwrite table local . db.t values (3, 'c')")
        assert [tuple(r) for r in procedures.sql(spark, "SELECT * FROM local.db.t").collect()] == [(3, "c")]
    finally:
        spark.conf.unset("spark.sql.catalog.local.type")
        spark.conf.unset("spark.sql.catalog.local.warehouse")


# ------------------------------------------------------------------------------------ conflicts
def _snapshot_id(cat, name):
    return cat.load_table(("db", name)).metadata.current_snapshot_id


def _rows(spark, name):
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    return sorted(tuple(r) for r in spark.sql(f"SELECT id, data, n FROM jcat.db.{name}").collect())


def _with_concurrent(monkeypatch, statement_runner):
    """Make our next row-level commit run ``statement_runner()`` (another writer's commit) first."""
    real = row_changes.commit_write
    fired = []

    def commit_after_another(spark, t, ops):
        if not fired:
            fired.append(True)
            statement_runner()
        return real(spark, t, ops)

    monkeypatch.setattr(row_changes, "commit_write", commit_after_another)
    return fired


CONFLICTS = [
    # (mode, isolation, our statement, the other writer's statement, conflicts?)
    ("copy-on-write", "serializable", "DELETE FROM {t} WHERE id < 5 AND data <> 'd3'",
     "INSERT INTO {t} VALUES (1, 'p1', 'new', 0)", True),
    ("copy-on-write", "snapshot", "DELETE FROM {t} WHERE id < 5 AND data <> 'd3'",
     "INSERT INTO {t} VALUES (1, 'p1', 'new', 0)", False),
    # a new file whose bounds are outside the condition: no conflict even when serializable
    ("copy-on-write", "serializable", "UPDATE {t} SET n = -1 WHERE id < 5",
     "INSERT INTO {t} VALUES (500, 'p1', 'new', 0)", False),
    # the other writer deleted rows of a file we rewrite
    ("copy-on-write", "snapshot", "UPDATE {t} SET n = -1 WHERE id < 5",
     "DELETE FROM {t} WHERE id = 2", True),
    ("merge-on-read", "serializable", "UPDATE {t} SET n = -1 WHERE id < 5",
     "INSERT INTO {t} VALUES (3, 'p0', 'new', 0)", True),
    ("merge-on-read", "snapshot", "DELETE FROM {t} WHERE id < 5 AND data <> 'd3'",
     "INSERT INTO {t} VALUES (3, 'p0', 'new', 0)", False),
    # a concurrent delete in the rows our condition matches
    ("merge-on-read", "snapshot", "DELETE FROM {t} WHERE id < 5 AND data <> 'd3'",
     "DELETE FROM {t} WHERE id = 4", True),
    # MERGE has no pushed-down filter: any new data file conflicts when serializable
    ("merge-on-read", "serializable", "MERGE INTO {t} t USING (SELECT 1 AS id) s ON t.id = s.id "
     "WHEN MATCHED THEN DELETE", "INSERT INTO {t} VALUES (900, 'p0', 'new', 0)", True),
]


@pytest.mark.java
@pytest.mark.parametrize("fv", [2, 3])
@pytest.mark.parametrize("mode,isolation,ours_sql,other_sql,conflicts", CONFLICTS)
def test_concurrent_commit_conflicts_by_isolation_level(spark, ours, monkeypatch, fv, mode, isolation, ours_sql,
                                                        other_sql, conflicts):
    op = ours_sql.split()[0].lower()
    name = f"dml_cf_{fv}_{CONFLICTS.index((mode, isolation, ours_sql, other_sql, conflicts))}"
    mine, twin = _twins(spark, name, fv=fv, mode=mode, extra=f"'write.{op}.isolation-level'='{isolation}'")
    fired = _with_concurrent(monkeypatch, lambda: spark.sql(other_sql.format(t=f"jcat.db.{mine}")))
    if conflicts:
        with pytest.raises(CommitConflictError, match=f"{isolation} isolation"):
            procedures.sql(spark, ours_sql.format(t=f"ours.db.{mine}"))
        assert fired
        # the table is as the other writer left it: the twin with only the other writer's statement
        spark.sql(other_sql.format(t=f"jcat.db.{twin}"))
        assert _rows(spark, mine) == _rows(spark, twin)
    else:
        procedures.sql(spark, ours_sql.format(t=f"ours.db.{mine}"))
        assert fired
        # rebased: both changes are in, ours on the rows it read, as when ours runs before the other
        spark.sql(ours_sql.format(t=f"jcat.db.{twin}"))
        spark.sql(other_sql.format(t=f"jcat.db.{twin}"))
        assert _rows(spark, mine) == _rows(spark, twin)


# ------------------------------------------------------------------------------------ failures
@pytest.mark.java
@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_merge_cardinality_violation_leaves_the_table_unchanged(spark, ours, mode):
    mine, java = _twins(spark, f"dml_card_{mode[0]}", mode=mode)
    before = _snapshot_id(ours, mine)
    statement = ("MERGE INTO {t} t USING (SELECT id FROM range(0, 3) UNION ALL SELECT 1) s ON t.id = s.id "
                 "WHEN MATCHED THEN UPDATE SET n = 0")
    with pytest.raises(ValidationError, match="MERGE_CARDINALITY_VIOLATION"):
        procedures.sql(spark, statement.format(t=f"ours.db.{mine}"))
    with pytest.raises(Exception, match="MERGE_CARDINALITY_VIOLATION|matched a single row from the target"):
        spark.sql(statement.format(t=f"jcat.db.{java}"))
    assert _snapshot_id(ours, mine) == before
    assert _rows(spark, mine) == _rows(spark, java)
    # one unconditional DELETE may match a row twice, as in Spark
    _run_both(spark, mine, java, "MERGE INTO {t} t USING (SELECT id FROM range(0, 3) UNION ALL SELECT 1) s "
                                 "ON t.id = s.id WHEN MATCHED THEN DELETE")


def _data_files_on_disk(ours, name):
    root = ours.load_table(("db", name)).metadata.location.removeprefix("file:")
    import os

    return sorted(os.path.join(d, f) for d, _, fs in os.walk(os.path.join(root, "data")) for f in fs)


@pytest.mark.parametrize("statement", [
    "UPDATE {t} SET data = raise_error('boom') WHERE id = 3",
    "MERGE INTO {t} t USING (SELECT 3 AS id) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET data = raise_error('boom')",
    "DELETE FROM {t} WHERE id = 3 AND raise_error('boom') IS NULL",
])
@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
@pytest.mark.java  # the table is made by Java's SQL (twins)
def test_a_failing_statement_leaves_the_table_and_no_files(spark, ours, mode, statement):
    mine, _ = _twins(spark, f"dml_fail_{mode[0]}_{statement.split()[0].lower()}", mode=mode)
    before, files = _snapshot_id(ours, mine), _data_files_on_disk(ours, mine)
    with pytest.raises(Exception, match="boom"):
        procedures.sql(spark, statement.format(t=f"ours.db.{mine}"))
    assert _snapshot_id(ours, mine) == before
    assert _data_files_on_disk(ours, mine) == files


@pytest.mark.parametrize("statement,message", [
    ("MERGE INTO {t} t USING (SELECT 1 AS id) s ON t.id = s.id WHEN MATCHED THEN INSERT *", "INSERT"),
    ("MERGE INTO {t} t USING (SELECT 1 AS id) s ON t.id = s.id WHEN NOT MATCHED THEN DELETE", "only INSERT"),
    ("UPDATE {t} SET nope = 1", "not a column"),
    ("UPDATE {t} SET data.x = 1", "only struct fields"),
    ("UPDATE {t} SET n = 1, n = 2", "assigned twice"),
    ("INSERT OVERWRITE {t} (id, nope) SELECT 1, 'a'", "not a column"),
    ("INSERT OVERWRITE {t} (id, id) SELECT 1, 2", "given twice"),
    ("INSERT OVERWRITE {t} SELECT 1", "columns"),
])
@pytest.mark.java  # the table is made by Java's SQL (twins)
def test_unsupported_or_wrong_statements_get_a_typed_error(spark, ours, statement, message):
    mine, _ = _twins(spark, "dml_unsupported")
    before = _snapshot_id(ours, mine)
    with pytest.raises(ValidationError, match=message) as err:
        procedures.sql(spark, statement.format(t=f"ours.db.{mine}"))
    assert "__procedures_" not in str(err.value)
    assert _snapshot_id(ours, mine) == before


# ------------------------------------------------------------------------------------ every catalog
def _catalog(spark, request, kind):
    """(Java's catalog name, ours) on one catalog of ``kind``."""
    if kind == "rest":
        server = request.getfixturevalue("rest_server")
        for name in ("jrest", "orest"):
            spark.conf.set(f"spark.sql.catalog.{name}.type", "rest")
            spark.conf.set(f"spark.sql.catalog.{name}.uri", server.uri)
        spark.conf.set("spark.sql.catalog.jrest", "org.apache.iceberg.spark.SparkCatalog")
        return "jrest", "orest"
    sc = shared_catalog(spark, kind, request)
    return sc.java, sc.ours


@pytest.mark.java
@pytest.mark.parametrize("kind", [*SHARED_KINDS, "rest"])
def test_one_statement_of_each_family_on_every_catalog(spark, request, kind):
    java, mine = _catalog(spark, request, kind)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {java}.dmlcat")
    jt, ot = f"{java}.dmlcat.t_{kind}", f"{mine}.dmlcat.t_{kind}"
    spark.sql(f"DROP TABLE IF EXISTS {jt}")
    spark.sql(f"CREATE TABLE {jt} ({COLUMNS}) USING iceberg PARTITIONED BY (part) TBLPROPERTIES "
              "('format-version'='2', 'write.update.mode'='merge-on-read')")
    spark.sql(f"INSERT INTO {jt} VALUES " + ", ".join(f"({i}, 'p{i % 2}', 'd{i}', {i})" for i in range(8)))
    expected = {i: (f"p{i % 2}", f"d{i}", i) for i in range(8)}

    def check(statement):
        procedures.sql(spark, statement.format(t=ot))
        spark.sql(f"REFRESH TABLE {jt}")
        got = {r["id"]: (r["part"], r["data"], r["n"]) for r in spark.sql(f"SELECT * FROM {jt}").collect()}
        assert got == expected, statement

    for i in (1, 2):
        del expected[i]
    check("DELETE FROM {t} WHERE id IN (1, 2)")
    expected[3] = ("p1", "d3", 33)
    check("UPDATE {t} SET n = 33 WHERE id = 3")
    expected[4] = ("p0", "m4", 4)
    expected[9] = ("p1", "m9", 9)
    check("MERGE INTO {t} t USING (SELECT * FROM VALUES (4, 'p0'), (9, 'p1') AS v(id, part)) s ON t.id = s.id "
          "WHEN MATCHED THEN UPDATE SET data = concat('m', s.id) "
          "WHEN NOT MATCHED THEN INSERT (id, part, data, n) VALUES (s.id, s.part, concat('m', s.id), s.id)")
    for k in [k for k, v in expected.items() if v[0] == "p1"]:
        del expected[k]
    expected[11] = ("p1", "o", 11)
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        check("INSERT OVERWRITE {t} VALUES (11, 'p1', 'o', 11)")
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
    spark.sql(f"DROP TABLE {jt}")


# ------------------------------------------------------------------------------------ Spark Connect
@pytest.mark.both_sessions
@pytest.mark.parametrize("fv", [2, 3])
def test_every_family_on_classic_and_connect_sessions(spark, tmp_path, fv):
    spark.conf.set("spark.sql.catalog.dmlc.type", "hadoop")
    spark.conf.set("spark.sql.catalog.dmlc.warehouse", str(tmp_path / "wh"))
    try:
        procedures.sql(spark, "CREATE NAMESPACE dmlc.db")
        procedures.sql(spark, f"CREATE TABLE dmlc.db.t ({COLUMNS}) USING iceberg PARTITIONED BY (part) "
                              f"TBLPROPERTIES ('format-version'='{fv}', 'write.update.mode'='merge-on-read', "
                              "'write.merge.mode'='merge-on-read')")
        procedures.sql(spark, "CREATE TABLE dmlc.db.src (id bigint, data string) USING iceberg")
        procedures.sql(spark, "INSERT INTO dmlc.db.t VALUES " + ", ".join(
            f"({i}, 'p{i % 2}', 'd{i}', {i})" for i in range(10)))
        procedures.sql(spark, "INSERT INTO dmlc.db.src VALUES (2, 'two'), (20, 'twenty')")
        expected = {i: (f"p{i % 2}", f"d{i}", i) for i in range(10)}

        def check(statement):
            procedures.sql(spark, statement)
            got = {r["id"]: (r["part"], r["data"], r["n"])
                   for r in procedures.sql(spark, "SELECT * FROM dmlc.db.t").collect()}
            assert got == expected, statement

        del expected[3]
        check("DELETE FROM dmlc.db.t WHERE data = 'd3'")
        expected[4] = ("p0", "d4", 44)
        check("UPDATE dmlc.db.t SET n = 44 WHERE id = 4")
        expected[2] = ("p0", "two", 2)
        expected[20] = ("p0", "twenty", None)
        check("MERGE INTO dmlc.db.t t USING dmlc.db.src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET data = s.data "
              "WHEN NOT MATCHED THEN INSERT (id, part, data) VALUES (s.id, 'p0', s.data)")
        expected = {i: v for i, v in expected.items() if v[0] != "p1"}
        expected[7] = ("p1", "seven", 7)
        check("INSERT OVERWRITE dmlc.db.t PARTITION (part = 'p1') SELECT 7, 'seven', 7")
    finally:
        spark.conf.unset("spark.sql.catalog.dmlc.type")
        spark.conf.unset("spark.sql.catalog.dmlc.warehouse")


# ------------------------------------------------------------------------------------ the console
def test_the_console_runs_every_family_on_the_default_catalog(tmp_path):
    """The quickstart's ``local`` catalog (embedded SQLite JDBC) in ``procedures-sql``, as the issue tried."""
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "dml.sql"
    script.write_text(
        "CREATE NAMESPACE IF NOT EXISTS local.db;\n"
        "CREATE TABLE local.db.events (id bigint, kind string) USING iceberg "
        "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read');\n"
        "INSERT INTO local.db.events VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd');\n"
        "DELETE FROM local.db.events WHERE id = 1;\n"
        "UPDATE local.db.events SET kind = upper(kind) WHERE id >= 3;\n"
        "MERGE INTO local.db.events t USING (SELECT 2 AS id, 'bb' AS kind UNION ALL SELECT 5, 'e') s\n"
        "  ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *;\n"
        "INSERT OVERWRITE local.db.events SELECT id * 10, kind FROM local.db.events;\n"
        "SELECT id, kind FROM local.db.events ORDER BY id;\n"
    )
    run = subprocess.run([sys.executable, "-m", "procedures.frontend.cli", "-f", str(script)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-6:] == ["id  kind", "--  ----", "20  bb", "30  C", "40  D", "50  e"]
