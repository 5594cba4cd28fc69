"""Concurrent writers on every catalog (issue 17): two of our writers and Iceberg Java's writer append to
one table at once (Java also deletes one of its rows), while a third thread of ours runs maintenance
(rewrite_manifests, expire_snapshots) on it.  No commit and no row may be lost: every writer's rows are
there and the deleted one is not, read by Iceberg Java, PyIceberg and DuckDB, and every file a snapshot
references exists.  Then our rewrite_data_files against a concurrent Java commit: an append commits
with it, a delete of a rewritten file makes it fail with a ValidationError and leaves the table and its
folder as they were.

Every catalog is shared with Iceberg Java in the test session (``tests.helpers.catalogs.shared_catalog``):
hadoop (``jcat``), hive (``jhive``), and JdbcCatalog on SQLite and on PostgreSQL (the drivers of Debian's
packages on ``spark.jars``).  On the jdbc catalogs PyIceberg's SqlCatalog is a third writer too.  The
long version of this run is ``benchmarks/soak.py``.
"""

from __future__ import annotations

import os
import threading
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import procedures
import procedures.spark.engine.data_rewrite_steps as rewrite_action  # where the engine looks rewrite_group up
from procedures.core.gc import reachability as R
from procedures.core.kernel.operations import FastAppend
from procedures.core.kernel.paths import normalize_path
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.errors import ValidationError
from procedures.spark.session import catalog_for
from procedures.spec.conversions import to_bytes
from procedures.spec.manifest.model import DataFile, FileFormat
from procedures.spec.types import LONG
from tests.helpers.catalogs import SharedCatalog, shared_catalog
from tests.oracles import assert_rows_equal, duckdb_read, java_read, pyiceberg_read

# every test here reads or writes through Iceberg Java (deselected on pyspark 4)
pytestmark = [pytest.mark.spark, pytest.mark.java]

KINDS = ["hadoop", "hive", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
COMMITS_PER_WRITER = 8
RETRIES = RetryPolicy(num_retries=50, min_wait_ms=5, max_wait_ms=200, total_timeout_ms=120_000)
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"1"}),
                    pa.field("who", pa.string(), metadata={b"PARQUET:field_id": b"2"})])


def _our_file(table, ids: list[int], who: str) -> DataFile:
    path = f"{table.location}/data/{who}-{uuid.uuid4().hex}.parquet"
    local = normalize_path(path).path
    os.makedirs(os.path.dirname(local), exist_ok=True)
    pq.write_table(pa.table({"id": ids, "who": [who] * len(ids)}, schema=SCHEMA), local)
    # id bounds, as any writer keeps: Java's DELETE ... WHERE id = 3000 then knows our files hold no such
    # row (without them it would rewrite every file and report a conflict with each of our appends)
    return DataFile(path, FileFormat.PARQUET, (), len(ids), table.io.new_input(path).size(),
                    value_counts={1: len(ids), 2: len(ids)}, null_value_counts={1: 0, 2: 0},
                    lower_bounds={1: to_bytes(min(ids), LONG)}, upper_bounds={1: to_bytes(max(ids), LONG)},
                    spec_id=0)


def _run_all(workers) -> None:
    errors: list[BaseException] = []

    def guard(fn):
        def run():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 -- reported after join
                errors.append(e)
        return run

    threads = [threading.Thread(target=guard(w)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a writer hung"
    assert not errors, errors


def _our_writer(cat, ident, who: str, base: int):
    def run():
        for i in range(COMMITS_PER_WRITER):
            t = cat.load_table(ident)
            commit(t, [FastAppend([_our_file(t, [base + i], who)])], policy=RETRIES)
    return run


def _maintainer(spark, cat_name: str, ident):
    name = ".".join(ident)

    def rewrite() -> None:
        # a concurrent delete may rewrite a manifest this rewrite replaces: the rewrite is refused, as
        # Java's is, and the message says to rerun it -- which is what a maintainer does
        for _ in range(5):
            try:
                procedures.call("rewrite_manifests", spark=spark, table=f"{cat_name}.{name}")
                return
            except ValidationError as e:
                if "a concurrent commit rewrote it, rerun rewrite_manifests" not in str(e):
                    raise
        raise AssertionError("rewrite_manifests lost its race five times in a row")

    def run():
        for _ in range(3):
            rewrite()
            procedures.call("expire_snapshots", spark=spark, table=f"{cat_name}.{name}", retain_last=3)
    return run


def _check(spark, cat, ident, java_ident: str | None, deleted: set[int] = frozenset()) -> None:
    t = cat.load_table(ident)
    written = [base + i for base in (1000, 2000, 3000) for i in range(COMMITS_PER_WRITER)]
    expected = sorted(set(written) - deleted)
    location = normalize_path(t.metadata_location).path
    rows = java_read(spark, java_ident or location)
    assert sorted(rows.column("id").to_pylist()) == expected
    assert_rows_equal(pyiceberg_read(location), rows, key="id", label="pyiceberg")
    assert_rows_equal(duckdb_read(location), rows, key="id", label="duckdb")
    sm = R.read_snapshot_manifests(t.io, t.metadata)
    missing = [p for p in R.content_paths_driver(t.io, sm.distinct().values())
               if not t.io.exists(p)]
    assert not missing, missing


def _create(spark, catalog: str | SharedCatalog, name: str, extra: str = ""):
    """Our table ``<catalog>.cw.<name>`` (created anew) with quick commit retries; our catalog and the
    identifier."""
    if isinstance(catalog, SharedCatalog):
        cat, cat_name = catalog.catalog, catalog.ours
    else:
        cat, cat_name = catalog_for(spark, catalog), catalog
    ns = "cw"
    if not cat.namespace_exists(ns):
        cat.create_namespace(ns)
    if cat.table_exists((ns, name)):
        cat.drop_table((ns, name), purge=True)
    procedures.sql(spark, f"CREATE TABLE {cat_name}.{ns}.{name} (id bigint NOT NULL, who string) USING iceberg "
                          "TBLPROPERTIES ('format-version'='2', 'commit.retry.num-retries'='50', "
                          f"'commit.retry.min-wait-ms'='5', 'commit.retry.max-wait-ms'='200'{extra})")
    return cat, (ns, name)


@pytest.mark.parametrize("kind", KINDS)
def test_two_of_ours_and_java_on_one_table(spark, request, kind):
    sc = shared_catalog(spark, kind, request)
    # on the metastore both sides take its table lock: Java's commit there is check-then-alter
    cat, ident = _create(spark, sc, f"cw_{kind}", ", 'engine.hive.lock-enabled'='true'" if kind == "hive" else "")
    java_ident = f"{sc.java}.{ident[0]}.{ident[1]}"

    def java_writer():
        for i in range(COMMITS_PER_WRITER):
            spark.sql(f"INSERT INTO {java_ident} VALUES ({3000 + i}, 'java')")
        # a whole file matches: Java deletes it in metadata, re-applying the filter on each retry
        spark.sql(f"DELETE FROM {java_ident} WHERE id = 3000")

    _run_all([_our_writer(cat, ident, "a", 1000), _our_writer(cat, ident, "b", 2000), java_writer,
              _maintainer(spark, sc.ours, ident)])
    spark.sql(f"REFRESH TABLE {java_ident}")
    _check(spark, cat, ident, java_ident, deleted={3000})


@pytest.mark.parametrize("kind", KINDS)
def test_rewrite_against_java_append_commits_and_against_java_delete_fails(spark, request, monkeypatch, kind):
    sc = shared_catalog(spark, kind, request)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {sc.java}.cw")
    original = rewrite_action.rewrite_group

    def rewrite_during(name: str, statement: str):
        """Our rewrite of Java's table ``name``, with Java's ``statement`` committed once its first
        file group is written."""
        java = f"{sc.java}.cw.{name}"
        spark.sql(f"CREATE TABLE {java} (id bigint, cat string) USING iceberg TBLPROPERTIES "
                  "('format-version'='2', 'write.delete.mode'='merge-on-read')")
        for i in range(6):
            spark.sql(f"INSERT INTO {java} VALUES ({i}, 'a'), ({i + 100}, 'a')")
        fired = threading.Event()

        def rewrite_group(*args, **kwargs):
            out = original(*args, **kwargs)
            if not fired.is_set():
                fired.set()
                spark.sql(statement.format(t=java))
            return out

        monkeypatch.setattr(rewrite_action, "rewrite_group", rewrite_group)
        before = _live_files(sc.catalog, ("cw", name))
        run = lambda: procedures.call("rewrite_data_files", spark=spark, table=f"{sc.ours}.cw.{name}",  # noqa: E731
                                      options={"min-input-files": "2"})
        return java, before, run

    java, before, run = rewrite_during(f"rw_{kind}_append", "INSERT INTO {t} VALUES (999, 'a')")
    assert run().collect()[0]["rewritten_data_files_count"] == len(before)
    assert _java_ids(spark, java) == sorted([*range(6), *range(100, 106), 999])
    assert not _live_files(sc.catalog, ("cw", java.rsplit(".", 1)[1])) & before  # all rewritten

    java, before, run = rewrite_during(f"rw_{kind}_delete", "DELETE FROM {t} WHERE id = 3")
    table = sc.catalog.load_table(("cw", java.rsplit(".", 1)[1]))
    data_dir = normalize_path(table.location).path + "/data"
    disk_before = _files_under(data_dir)
    with pytest.raises(ValidationError, match="Cannot commit rewrite"):
        run()
    assert _java_ids(spark, java) == sorted([i for i in range(6) if i != 3] + list(range(100, 106)))
    after = sc.catalog.load_table(table.identifier)
    assert after.metadata.current_snapshot().summary["operation"] in ("delete", "overwrite")  # Java's, not ours
    referenced = {normalize_path(p).path for p in _live_files(sc.catalog, table.identifier, content=True)}
    # nothing our failed rewrite wrote is left behind
    assert _files_under(data_dir) - disk_before <= referenced


def _java_ids(spark, java_ident: str) -> list[int]:
    spark.sql(f"REFRESH TABLE {java_ident}")
    return sorted(java_read(spark, java_ident).column("id").to_pylist())


def _live_files(cat, ident, content: bool = False) -> set[str]:
    """Paths of the current snapshot's live data files (with ``content``, its delete files too)."""
    t = cat.load_table(ident)
    sm = R.read_snapshot_manifests(t.io, t.metadata, [t.metadata.current_snapshot_id])
    paths = R.content_paths_driver(t.io, sm.distinct().values())
    return {p for p, kind in paths.items() if content or kind == R.DATA}


def _files_under(folder: str) -> set[str]:
    return {os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs if not f.startswith(".")}


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_two_of_ours_and_pyiceberg_on_a_jdbc_table(spark, tmp_path, request, backend):
    from pyiceberg.catalog.sql import SqlCatalog

    name = f"jc{backend}"
    if backend == "sqlite":
        uri = f"jdbc:sqlite:{tmp_path / 'catalog.db'}"
        py_uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    else:
        from tests import postgres_server

        server = request.getfixturevalue("pg_server")
        uri = postgres_server.create_database(server, "cw_" + uuid.uuid4().hex[:10])
        spark.conf.set(f"spark.sql.catalog.{name}.jdbc.user", server.user)
        py_uri = f"postgresql+psycopg://{server.user}@{server.host}:{server.port}/{uri.rsplit('/', 1)[1]}"
    spark.conf.set(f"spark.sql.catalog.{name}.type", "jdbc")
    spark.conf.set(f"spark.sql.catalog.{name}.uri", uri)
    spark.conf.set(f"spark.sql.catalog.{name}.warehouse", str(tmp_path / "wh"))
    cat, ident = _create(spark, name, "t")
    py_cat = SqlCatalog(name, uri=py_uri, warehouse=f"file://{tmp_path / 'wh'}")

    def pyiceberg_writer():
        for i in range(COMMITS_PER_WRITER):
            table = py_cat.load_table(".".join(ident))
            for attempt in range(50):
                try:
                    table.append(pa.table({"id": [3000 + i], "who": ["pyiceberg"]}, schema=SCHEMA))
                    break
                except Exception as e:  # noqa: BLE001 -- PyIceberg's commit conflict: reload and retry
                    if "CommitFailed" not in type(e).__name__ or attempt == 49:
                        raise
                    table = py_cat.load_table(".".join(ident))

    _run_all([_our_writer(cat, ident, "a", 1000), _our_writer(cat, ident, "b", 2000), pyiceberg_writer,
              _maintainer(spark, name, ident)])
    _check(spark, cat, ident, None)
