import dataclasses
import json
import multiprocessing as mp
import os
import sqlite3
import time
import uuid

import pytest

import procedures.catalog.jdbc as jdbc_module

from procedures.catalog import JdbcCatalog, load_catalog
from procedures.catalog.jdbc import parse_jdbc_uri
from procedures.errors import (
    CatalogConfigError,
    CommitFailedError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
    ValidationError,
)
from procedures.spec.metadata import metadata_from_json
from procedures.spec.snapshots import MetadataLogEntry
from tests.helpers.catalogs import check_refresh_reads_only_moved_metadata
from tests.helpers.references import import_reference, skip_missing_reference


def make_metadata(location, **props):
    doc = {
        "format-version": 2, "table-uuid": str(uuid.uuid4()), "location": location,
        "last-sequence-number": 0, "last-updated-ms": 1_700_000_000_000, "last-column-id": 1,
        "current-schema-id": 0,
        "schemas": [{"type": "struct", "schema-id": 0,
                     "fields": [{"id": 1, "name": "id", "required": False, "type": "long"}]}],
        "default-spec-id": 0, "partition-specs": [{"spec-id": 0, "fields": []}], "last-partition-id": 999,
        "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}], "properties": props,
    }
    return metadata_from_json(json.dumps(doc))


def bumped(table, **props):
    """What the metadata builder will do for a property change: new props, new log entry."""
    md = table.metadata
    return dataclasses.replace(
        md,
        properties={**md.properties, **props},
        last_updated_ms=max(int(time.time() * 1000), md.last_updated_ms + 1),
        metadata_log=md.metadata_log + (MetadataLogEntry(md.last_updated_ms, table.metadata_location),),
    )


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def conf(request, tmp_path):
    """Spark-style conf of catalog ``j`` on a fresh database of the parametrized backend."""
    extra = {}
    if request.param == "sqlite":
        uri = f"jdbc:sqlite:{tmp_path / 'catalog.db'}"
    else:
        import postgres_server

        server = request.getfixturevalue("pg_server")
        uri = postgres_server.create_database(server, "t_" + uuid.uuid4().hex[:12])
        extra["spark.sql.catalog.j.jdbc.user"] = server.user
    return {
        "spark.sql.catalog.j": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.j.type": "jdbc",
        "spark.sql.catalog.j.uri": uri,
        "spark.sql.catalog.j.warehouse": str(tmp_path / "wh"),
        **extra,
    }


@pytest.fixture()
def cat(conf):
    c = load_catalog("j", conf)
    c.create_namespace("db")
    return c


def new_table(cat, name="t", **props):
    ident = ("db", name)
    return cat.create_table(ident, make_metadata(cat.default_table_location(ident), **props))


def metadata_files(cat, name="t"):
    path = os.path.join(cat.warehouse, "db", name, "metadata")
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def rows(cat):
    return sorted(cat._query("SELECT catalog_name, table_namespace, table_name, iceberg_type FROM iceberg_tables"))


def test_create_load_commit(cat):
    t = new_table(cat, a="1")
    name = t.metadata_location.rsplit("/", 1)[-1]
    assert name.startswith("00000-") and name.endswith(".metadata.json")
    assert t.metadata_location.startswith(f"{cat.warehouse}/db/t/metadata/")
    assert rows(cat) == [("j", "db", "t", "TABLE")]
    loaded = cat.load_table("db.t")
    assert loaded.metadata == t.metadata and loaded.metadata_location == t.metadata_location
    t2 = cat.commit_table(t, t.metadata, bumped(t, a="2"))
    assert t2.metadata_location.rsplit("/", 1)[-1].startswith("00001-")
    assert cat._query("SELECT previous_metadata_location FROM iceberg_tables") == [(t.metadata_location,)]
    assert t.refresh().metadata.properties == {"a": "2"}
    assert len(metadata_files(cat)) == 2


def test_cas_conflict_loses_and_cleans_its_file(cat):
    t = new_table(cat)
    stale = cat.load_table("db.t")
    cat.commit_table(t, t.metadata, bumped(t, winner="1"))
    with pytest.raises(CommitFailedError) as exc:
        cat.commit_table(stale, stale.metadata, bumped(stale, loser="1"))
    assert exc.value.table == "db.t"
    assert len(metadata_files(cat)) == 2  # the loser's file was deleted
    assert cat.load_table("db.t").metadata.properties == {"winner": "1"}


def test_commit_to_dropped_table(cat):
    t = new_table(cat)
    cat.drop_table("db.t")
    with pytest.raises(NoSuchTableError):
        cat.commit_table(t, t.metadata, bumped(t, x="1"))
    assert len(metadata_files(cat)) == 1


def test_rename_drop_register(cat, tmp_path):
    t = new_table(cat)
    cat.create_namespace("other")
    cat.rename_table("db.t", "other.t2")
    assert cat.list_tables("db") == [] and cat.list_tables("other") == [("other", "t2")]
    assert cat.load_table("other.t2").metadata_location == t.metadata_location
    new_table(cat, "x")
    with pytest.raises(TableAlreadyExistsError):
        cat.rename_table("db.x", "other.t2")
    with pytest.raises(NoSuchNamespaceError):
        cat.rename_table("db.x", "missing.y")
    with pytest.raises(NoSuchTableError):
        cat.rename_table("db.nope", "db.y")
    cat.drop_table("other.t2")
    assert os.path.exists(t.metadata_location)  # no purge: files stay
    reg = cat.register_table("db.back", t.metadata_location)
    assert reg.metadata == t.metadata
    with pytest.raises(TableAlreadyExistsError):
        cat.register_table("db.back", t.metadata_location)
    cat.drop_table("db.back", purge=True)
    assert metadata_files(cat) == []
    with pytest.raises(NoSuchTableError):
        cat.drop_table("db.back")


def test_bad_input_writes_nothing(cat):
    new_table(cat)
    files_before, rows_before = metadata_files(cat), rows(cat)
    with pytest.raises(TableAlreadyExistsError):
        new_table(cat)
    with pytest.raises(NoSuchNamespaceError):
        cat.create_table("missing.t", make_metadata(f"{cat.warehouse}/missing/t"))
    for bad in ("t", "db.", "db.a/b", ".t", ("db",)):
        with pytest.raises(ValidationError):
            cat.create_table(bad, make_metadata(f"{cat.warehouse}/db/u"))
    with pytest.raises(NoSuchTableError):
        cat.load_table("db.missing")
    with pytest.raises(ValidationError):
        cat.create_namespace("n", {"k": 1})
    with pytest.raises(ValidationError):
        cat.update_namespace_properties("db", removals=["a"], updates={"a": "b"})
    assert metadata_files(cat) == files_before and rows(cat) == rows_before
    assert cat.list_namespaces() == [("db",)]


def test_namespaces(cat):
    assert cat.load_namespace_properties("db") == {"exists": "true"}
    with pytest.raises(NamespaceAlreadyExistsError):
        cat.create_namespace("db")
    cat.create_namespace(("db", "inner"), {"owner": "me"})
    cat.create_namespace("db_x")  # '_' must not match as a LIKE wildcard
    assert cat.list_namespaces() == [("db",), ("db_x",)]
    assert cat.list_namespaces("db") == [("db", "inner")]
    summary = cat.update_namespace_properties(("db", "inner"), removals=["owner", "nope"], updates={"k": "v"})
    assert (summary.removed, summary.updated, summary.missing) == (("owner",), ("k",), ("nope",))
    assert cat.load_namespace_properties("db.inner") == {"k": "v"}
    with pytest.raises(NamespaceNotEmptyError):
        cat.drop_namespace("db")  # has a child namespace
    cat.drop_namespace("db.inner")
    new_table(cat)
    with pytest.raises(NamespaceNotEmptyError):
        cat.drop_namespace("db")
    with pytest.raises(NoSuchNamespaceError):
        cat.drop_namespace("missing")
    with pytest.raises(NoSuchNamespaceError):
        cat.load_namespace_properties("missing")
    cat.drop_table("db.t")
    cat.drop_namespace("db_x")
    cat.drop_namespace("db")
    assert cat.list_namespaces() == []


def test_namespace_exists_through_tables_only(cat):
    """A namespace without property rows exists while it has tables (as rows written by Java)."""
    new_table(cat)
    with cat._db.transaction() as execute:
        execute("DELETE FROM iceberg_namespace_properties")
    assert cat.namespace_exists("db")
    assert cat.list_namespaces() == [("db",)]


def test_view_rows_are_not_tables(cat):
    new_table(cat)
    with cat._db.transaction() as execute:
        execute(
            "INSERT INTO iceberg_tables VALUES (?, ?, ?, ?, NULL, ?)", ("j", "db", "v", "/x/v.metadata.json", "VIEW")
        )
    assert cat.list_tables("db") == [("db", "t")]
    assert not cat.table_exists("db.v")


def test_v0_schema_without_iceberg_type(tmp_path):
    db = tmp_path / "v0.db"
    conn = sqlite3.connect(db)
    conn.execute(
        "CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL, table_namespace VARCHAR(255) NOT NULL, "
        "table_name VARCHAR(255) NOT NULL, metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000), "
        "PRIMARY KEY (catalog_name, table_namespace, table_name))"
    )
    conn.commit()
    conn.close()
    c = JdbcCatalog("j", f"jdbc:sqlite:{db}", str(tmp_path / "wh"))
    c.create_namespace("db")
    new_table(c)
    assert c.list_tables("db") == [("db", "t")]
    assert "iceberg_type" not in _columns(db)  # left at V0 unless told V1, as Java's default

    # jdbc.schema-version=V1 moves the database to V1 as Java does; the V0 row (NULL type) stays a table
    v1 = JdbcCatalog("j", f"jdbc:sqlite:{db}", str(tmp_path / "wh"), {"jdbc.schema-version": "v1"})
    assert "iceberg_type" in _columns(db)
    new_table(v1, "u")
    assert v1.list_tables("db") == [("db", "t"), ("db", "u")]
    assert sorted(v1._query("SELECT table_name, iceberg_type FROM iceberg_tables")) == [("t", None), ("u", "TABLE")]
    assert c.list_tables("db") == [("db", "t"), ("db", "u")]  # a catalog opened at V0 still sees both


def _columns(db) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return [row[1] for row in conn.execute("PRAGMA table_info(iceberg_tables)")]
    finally:
        conn.close()


@pytest.mark.parametrize(
    "uri, dialect, target",
    [
        ("jdbc:sqlite:/tmp/a.db", "sqlite", "/tmp/a.db"),
        ("jdbc:sqlite:file:/tmp/a.db", "sqlite", "/tmp/a.db"),
        ("sqlite:////tmp/a.db", "sqlite", "/tmp/a.db"),
        ("jdbc:postgresql://h:6543/cat", "postgresql", "host=h port=6543 dbname=cat"),
        ("postgresql+psycopg://u:p@h/cat", "postgresql", "host=h port=5432 dbname=cat"),
    ],
)
def test_parse_jdbc_uri(uri, dialect, target):
    parsed = parse_jdbc_uri(uri)
    assert (parsed.dialect, parsed.target) == (dialect, target)


@pytest.mark.parametrize(
    "props, key",
    [
        ({"spark.sql.catalog.j.type": "jdbc"}, "spark.sql.catalog.j.uri"),
        ({"spark.sql.catalog.j.type": "jdbc", "spark.sql.catalog.j.uri": "jdbc:mysql://h/db"}, "spark.sql.catalog.j.uri"),
        ({"spark.sql.catalog.j.type": "jdbc", "spark.sql.catalog.j.uri": "jdbc:sqlite::memory:"}, "spark.sql.catalog.j.uri"),
        ({"spark.sql.catalog.j.type": "jdbc", "spark.sql.catalog.j.uri": "jdbc:postgresql://h:x/db"}, "spark.sql.catalog.j.uri"),
        ({"type": "jdbc", "uri": "jdbc:sqlite:/tmp/x.db", "jdbc.busy-timeout-ms": "soon"}, "jdbc.busy-timeout-ms"),
        ({"type": "jdbc", "uri": "jdbc:sqlite:/tmp/x.db", "jdbc.schema-version": "V2"}, "jdbc.schema-version"),
    ],
)
def test_bad_jdbc_config_names_the_key(props, key, tmp_path):
    with pytest.raises(CatalogConfigError) as exc:
        load_catalog("j", props)
    assert key in str(exc.value)


def test_pyiceberg_sees_our_tables_and_we_see_its(tmp_path):
    import_reference("sqlalchemy", "sqlalchemy (for PyIceberg's SqlCatalog) not installed: pip install -e '.[test]'")
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    db = tmp_path / "shared.db"
    ours = JdbcCatalog("shared", f"jdbc:sqlite:{db}", str(tmp_path / "wh"))
    ours.create_namespace("db")
    t = new_table(ours, "ours", origin="procedures")
    t = ours.commit_table(t, t.metadata, bumped(t, step="2"))

    theirs = SqlCatalog("shared", uri=f"sqlite:///{db}", warehouse=f"file://{tmp_path / 'wh'}")
    assert ("db",) in theirs.list_namespaces()
    loaded = theirs.load_table("db.ours")
    assert loaded.metadata_location == t.metadata_location
    assert loaded.properties["step"] == "2" and str(loaded.metadata.table_uuid) == t.metadata.table_uuid

    created = theirs.create_table("db.theirs", Schema(NestedField(1, "x", LongType(), required=False)))
    with created.transaction() as tx:
        tx.set_properties(by="pyiceberg")
    mine = ours.load_table("db.theirs")
    assert mine.metadata.properties["by"] == "pyiceberg"
    assert mine.metadata.schema().find_field("x").field_id == 1
    ours.commit_table(mine, mine.metadata, bumped(mine, back="procedures"))
    assert theirs.load_table("db.theirs").properties["back"] == "procedures"
    assert sorted(ours.list_tables("db")) == [("db", "ours"), ("db", "theirs")]


def _commit_worker(args):
    conf, worker, commits = args
    cat = load_catalog("j", conf)
    conflicts = 0
    for i in range(commits):
        while True:
            t = cat.load_table("db.t")
            n = int(t.metadata.properties.get("counter", "0"))
            try:
                cat.commit_table(t, t.metadata, bumped(t, counter=str(n + 1), **{f"w{worker}-{i}": "1"}))
                break
            except CommitFailedError:
                conflicts += 1
    return conflicts


@pytest.mark.slow  # several processes
def test_four_processes_commit_without_lost_updates(cat, conf):
    new_table(cat)
    commits = 8
    with mp.get_context("spawn").Pool(4) as pool:
        pool.map(_commit_worker, [(conf, w, commits) for w in range(4)])
    table = cat.load_table("db.t")
    md = table.metadata
    assert md.properties["counter"] == str(4 * commits)
    assert sum(1 for k in md.properties if k.startswith("w")) == 4 * commits
    files = metadata_files(cat)
    assert len(files) == 4 * commits + 1  # losers deleted their files; nothing else left over
    assert all(f.endswith(".metadata.json") and not f.startswith(".") for f in files)
    versions = sorted(int(f.split("-", 1)[0]) for f in files)
    assert versions == list(range(4 * commits + 1))
    assert len(md.metadata_log) == 4 * commits


class _FaultyCommit:
    """Wraps the backend so the commit UPDATE raises a connection-style error without applying."""

    def __init__(self, db):
        self.db = db

    def __getattr__(self, name):
        return getattr(self.db, name)

    def transaction(self, write=True):
        import contextlib

        db = self.db

        @contextlib.contextmanager
        def tx():
            with db.transaction(write) as execute:
                def faulty(statement, params=()):
                    if statement.startswith("UPDATE iceberg_tables SET metadata_location"):
                        raise sqlite3.DatabaseError("connection reset during commit")
                    return execute(statement, params)

                yield faulty

        return tx()


def test_unknown_commit_outcome_is_decided_by_rereading(tmp_path):
    from procedures.errors import CommitStateUnknownError

    c = JdbcCatalog("j", f"jdbc:sqlite:{tmp_path / 'c.db'}", str(tmp_path / "wh"))
    c.create_namespace("db")
    t = new_table(c)
    real = c._db

    # the error hides a rollback: the pointer did not move, so the outcome is unknown and the file stays
    c._db = _FaultyCommit(real)
    with pytest.raises(CommitStateUnknownError) as exc:
        c.commit_table(t, t.metadata, bumped(t, x="1"))
    assert exc.value.table == "db.t"
    c._db = real
    assert c.load_table("db.t").metadata_location == t.metadata_location
    assert len(metadata_files(c)) == 2  # nothing deleted when the outcome is unknown

    # the pointer did move before the error surfaced: the re-read proves success
    class Applied(_FaultyCommit):
        """Commits, then raises once ``armed``: the caller cannot know the commit landed."""

        def transaction(self, write=True):
            import contextlib

            db = self.db

            @contextlib.contextmanager
            def tx():
                with db.transaction(write) as execute:
                    yield execute
                if write and getattr(self, "armed", False):
                    self.armed = False
                    raise sqlite3.DatabaseError("connection reset after commit")

            return tx()

    faulty = Applied(real)
    c._db = faulty
    faulty.armed = False
    t = c.load_table("db.t")
    faulty.armed = True
    done = c.commit_table(t, t.metadata, bumped(t, y="1"))
    c._db = real
    assert c.load_table("db.t").metadata_location == done.metadata_location
    assert c.load_table("db.t").metadata.properties == {"y": "1"}


def test_refresh_reads_no_metadata_while_the_table_is_unchanged(cat, monkeypatch):
    t = new_table(cat)
    check_refresh_reads_only_moved_metadata(cat, jdbc_module, t, bumped, monkeypatch)
