"""The hive catalog on a real Hive metastore server (tests/metastore_server.py: Hive 2.3 over thrift,
no lock support) through the thrift client, on a classic session and on a Spark Connect session, with
PyIceberg's HiveCatalog on the same server as the oracle: each side loads the other's tables and
sees the other's commits.  Without a ``uri`` a Connect session cannot reach a metastore (Spark's
embedded one lives in the server's JVM): the catalog says how to configure one.
"""

from __future__ import annotations

import pytest

from procedures.spark.catalog_conf import load_catalog
from procedures.catalog.hive import HiveCatalog
from procedures.spark.hive_jvm import JvmMetastoreClient
from procedures.catalog.hive_thrift import ThriftMetastoreClient
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.operations import FastAppend
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.errors import (
    CatalogConfigError, CommitFailedError, NamespaceAlreadyExistsError, NoSuchTableError, TableAlreadyExistsError,
)
from procedures.spark import session as session_module
from procedures.spark.dataframes import is_connect
from procedures.spark.session import active_session, catalog_for
from procedures.spec import types as T
from procedures.spec.manifest.model import DataFile, FileFormat
from procedures.spec.schema import Schema
from tests.helpers.references import import_reference
from tests.metastore_server import start_metastore, stop_metastore

pytestmark = [pytest.mark.spark, pytest.mark.both_sessions]

ONCE = RetryPolicy(num_retries=0)
SCHEMA = Schema((T.NestedField(1, "id", T.LONG, False), T.NestedField(2, "data", T.STRING, False)))


@pytest.fixture(scope="module")
def metastore():
    server = start_metastore()
    yield server
    stop_metastore(server)


@pytest.fixture()
def conf(spark):
    """Sets session conf keys for one test and unsets them afterwards (the session is shared: a stray
    hive catalog would change which catalog other modules' calls pick)."""
    keys: list[str] = []

    def set_key(key: str, value: str) -> None:
        keys.append(key)
        spark.conf.set(key, value)

    yield set_key
    for key in keys:
        spark.conf.unset(key)


def _kind(spark) -> str:
    return "connect" if is_connect(spark) else "classic"


def _catalog(spark, conf, metastore, tmp_path, lock: str = "false", suffix: str = "") -> HiveCatalog:
    name = f"thr_{_kind(spark)}{suffix}"
    conf(f"spark.sql.catalog.{name}.type", "hive")
    conf(f"spark.sql.catalog.{name}.uri", metastore.uri)
    conf(f"spark.sql.catalog.{name}.warehouse", str(tmp_path / "wh"))
    conf(f"spark.sql.catalog.{name}.lock-enabled", lock)
    cat = catalog_for(spark, name)
    assert isinstance(cat, HiveCatalog) and isinstance(cat.client, ThriftMetastoreClient)
    return cat


def _pyiceberg(metastore):
    hive = import_reference("pyiceberg.catalog.hive", "PyIceberg's hive catalog: pip install 'pyiceberg[hive]'")
    return hive.HiveCatalog("pyi", uri=metastore.uri)


def _files(location: str, *names: str) -> list[DataFile]:
    return [DataFile(f"{location}/data/{n}.parquet", FileFormat.PARQUET, (), 1, 10) for n in names]


def _create(cat: HiveCatalog, ident: tuple[str, str], location: str):
    md, _ = new_table_metadata(schema=SCHEMA, location=location, properties={"format-version": "2"})
    return cat.create_table(ident, md)


def test_tables_and_commits_over_thrift_match_pyiceberg(spark, conf, metastore, tmp_path):
    cat = _catalog(spark, conf, metastore, tmp_path)
    db = f"tdb_{_kind(spark)}"
    cat.create_namespace(db, {"owner-team": "data"})
    with pytest.raises(NamespaceAlreadyExistsError):
        cat.create_namespace(db)
    assert (db,) in cat.list_namespaces()
    assert cat.load_namespace_properties(db)["owner-team"] == "data"
    pyi = _pyiceberg(metastore)
    assert pyi.load_namespace_properties(db)["owner-team"] == "data"

    t = _create(cat, (db, "ours"), str(tmp_path / "wh" / db / "ours"))
    with pytest.raises(TableAlreadyExistsError):
        _create(cat, (db, "ours"), str(tmp_path / "elsewhere"))
    first = commit(t, [FastAppend(_files(t.location, "a"))], policy=ONCE)
    second = commit(first, [FastAppend(_files(t.location, "b"))], policy=ONCE)
    # a stale base cannot commit over the pointer that moved
    with pytest.raises(CommitFailedError, match="another writer committed|moved"):
        cat.commit_table(first, first.metadata, second.metadata)
    assert not cat.client.swap_parameters(db, "ours", first.metadata_location, {"metadata_location": "file:/nowhere"})
    # PyIceberg reads what we registered and committed
    theirs = pyi.load_table(f"{db}.ours")
    assert theirs.metadata_location == second.metadata_location == cat.current_metadata_location((db, "ours"))
    assert [s.snapshot_id for s in theirs.metadata.snapshots] == [s.snapshot_id for s in second.metadata.snapshots]
    params = cat.client.get_table(db, "ours").parameters
    assert params["previous_metadata_location"] == first.metadata_location
    assert params["table_type"] == "ICEBERG" and params["numFiles"] == "2"  # the snapshot's, not a listing

    # and we read what PyIceberg created
    from pyiceberg.schema import Schema as PySchema
    from pyiceberg.types import LongType, NestedField

    made = pyi.create_table(f"{db}.theirs", PySchema(NestedField(1, "id", LongType(), required=False)),
                            location=str(tmp_path / "wh" / db / "theirs"))
    assert cat.load_table((db, "theirs")).metadata_location == made.metadata_location
    assert sorted(cat.list_tables(db)) == [(db, "ours"), (db, "theirs")]

    cat.rename_table((db, "theirs"), (db, "renamed"))
    assert not cat.table_exists((db, "theirs")) and pyi.load_table(f"{db}.renamed").metadata_location == made.metadata_location
    cat.drop_table((db, "renamed"))
    with pytest.raises(NoSuchTableError):
        cat.load_table((db, "renamed"))
    cat.register_table((db, "renamed"), made.metadata_location)
    assert pyi.load_table(f"{db}.renamed").metadata_location == made.metadata_location


def test_a_server_without_locks_refuses_a_locked_commit_and_changes_nothing(spark, conf, metastore, tmp_path):
    cat = _catalog(spark, conf, metastore, tmp_path, lock="true", suffix="_locked")
    db = f"ldb_{_kind(spark)}"
    cat.create_namespace(db)
    t = _create(cat, (db, "t"), str(tmp_path / "wh" / db / "t"))
    with pytest.raises(CatalogConfigError, match="lock-enabled=false"):
        commit(t, [FastAppend(_files(t.location, "a"))], policy=ONCE)
    assert cat.current_metadata_location((db, "t")) == t.metadata_location
    assert [p.name for p in (tmp_path / "wh" / db / "t" / "metadata").iterdir()] == [t.metadata_location.rsplit("/", 1)[1]]
    # the same table through a catalog with lock-enabled=false commits
    free = _catalog(spark, conf, metastore, tmp_path, lock="false", suffix="_free")
    done = commit(free.load_table((db, "t")), [FastAppend(_files(t.location, "a"))], policy=ONCE)
    assert cat.current_metadata_location((db, "t")) == done.metadata_location


def test_a_dict_with_a_uri_needs_no_session_and_a_bad_uri_is_refused(spark, metastore):
    cat = load_catalog("d", {"type": "hive", "uri": metastore.uri})
    assert isinstance(cat.client, ThriftMetastoreClient) and cat.namespace_exists("default")
    for bad in ("http://localhost:1", "thrift://nohost", "thrift://127.0.0.1:1,http://x:2"):
        with pytest.raises(CatalogConfigError, match="thrift://"):
            load_catalog("d", {"type": "hive", "uri": bad})
    with pytest.raises(CatalogConfigError, match="Cannot reach the Hive metastore"):
        load_catalog("d", {"type": "hive", "uri": "thrift://127.0.0.1:1"}).list_namespaces()


def test_without_a_uri_classic_opens_its_own_metastore_and_connect_says_to_set_one(spark, conf):
    conf("spark.sql.catalog.own.type", "hive")
    if is_connect(spark):
        with pytest.raises(CatalogConfigError, match=r"spark\.sql\.catalog\.own\.uri=thrift://"):
            catalog_for(spark, "own")
    else:
        assert isinstance(catalog_for(spark, "own").client, JvmMetastoreClient)


def test_active_session_finds_the_session_of_either_kind(spark, monkeypatch):
    if is_connect(spark):
        # the run's classic session is active in this process too: without it, Connect's is found
        monkeypatch.setattr(session_module, "_classic_active_session", lambda: None)
    assert active_session() is spark
