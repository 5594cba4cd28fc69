"""The REST catalog against a real server: Iceberg Java's own CatalogHandlers (tests/rest_server.py).

Namespaces, tables, commits sent as requirements + updates, lost races retried, refused requirements
typed, 5xx commits of unknown outcome keeping their files, OAuth2 and static tokens, bad configuration,
and PyIceberg's REST client reading what we commit and the reverse.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time

import pytest

from procedures.spark.catalog_conf import load_catalog
from procedures.catalog.rest import DEFAULT_ENDPOINTS
from procedures.catalog.rest_client import RestAuthError, RestClient
from procedures.core.kernel import updates as U
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.operations import FastAppend
from procedures.core.kernel.transaction import MetadataChange, RetryPolicy, commit
from procedures.errors import (
    CatalogConfigError,
    CommitFailedError,
    CommitStateUnknownError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from procedures.spec.manifest.manifest_list import read_manifest_list
from procedures.spec.manifest.model import DataFile, FileFormat
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.schema import Schema
from procedures.spec.types import LONG, STRING, NestedField
from tests.helpers.references import import_reference
from tests.rest_server import running

SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "name", STRING, False)))
FAST = RetryPolicy(num_retries=200, min_wait_ms=1, max_wait_ms=50, total_timeout_ms=300_000)


def _catalog(server, **props):
    return load_catalog("rc", {"type": "rest", "uri": server.uri, **props})


def _create(cat, ident):
    ns = ident[:-1]
    if not cat.namespace_exists(ns):
        cat.create_namespace(ns)
    md, _ = new_table_metadata(schema=SCHEMA, location=cat.default_table_location(ident))
    return cat.create_table(ident, md)


def _append(table, name, policy=None):
    f = DataFile(f"{table.location}/data/{name}.parquet", FileFormat.PARQUET, (), 1, 10)
    return commit(table, [FastAppend([f])], policy=policy)


def _data_files(table):
    md = table.metadata
    out = set()
    if md.current_snapshot() is None:
        return out
    for m in read_manifest_list(table.io, md.current_snapshot().manifest_list):
        for e in read_manifest(table.io, m, specs={s.spec_id: s for s in md.partition_specs}):
            out.add(os.path.basename(e.data_file.file_path))
    return out


def test_namespaces(rest_server):
    cat = _catalog(rest_server)
    cat.create_namespace(("ns_a",), {"owner": "me"})
    cat.create_namespace(("ns_a", "inner"))
    assert ("ns_a",) in cat.list_namespaces()
    assert cat.list_namespaces(("ns_a",)) == [("ns_a", "inner")]
    assert cat.load_namespace_properties("ns_a")["owner"] == "me"
    change = cat.update_namespace_properties("ns_a", removals=["owner", "absent"], updates={"k": "v"})
    assert change.removed == ("owner",) and change.missing == ("absent",) and change.updated == ("k",)
    with pytest.raises(NamespaceAlreadyExistsError):
        cat.create_namespace("ns_a")
    with pytest.raises(NoSuchNamespaceError):
        cat.load_namespace_properties("nope")
    assert not cat.namespace_exists("nope") and cat.namespace_exists("ns_a")
    _create(cat, ("ns_a", "t"))
    with pytest.raises(NamespaceNotEmptyError):
        cat.drop_namespace("ns_a")
    cat.drop_table(("ns_a", "t"))
    cat.drop_namespace(("ns_a", "inner"))
    cat.drop_namespace("ns_a")
    assert ("ns_a",) not in cat.list_namespaces()


def test_tables_keep_our_metadata_exactly(rest_server):
    cat = _catalog(rest_server)
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{rest_server.warehouse}/db1/exact",
                               properties={"write.format.default": "parquet"})
    if not cat.namespace_exists("db1"):
        cat.create_namespace("db1")
    table = cat.create_table(("db1", "exact"), md)
    assert table.metadata.table_uuid == md.table_uuid
    assert table.metadata.schema() == md.schema() and table.metadata.location == md.location
    assert table.metadata.properties["write.format.default"] == "parquet"
    with pytest.raises(TableAlreadyExistsError):
        cat.create_table(("db1", "exact"), md)
    assert cat.list_tables("db1") == [("db1", "exact")]
    assert cat.table_exists(("db1", "exact")) and not cat.table_exists(("db1", "other"))
    with pytest.raises(NoSuchTableError):
        cat.load_table(("db1", "other"))
    cat.rename_table(("db1", "exact"), ("db1", "renamed"))
    with pytest.raises(NoSuchTableError):
        cat.rename_table(("db1", "exact"), ("db1", "again"))
    location = cat.load_table(("db1", "renamed")).metadata_location
    cat.drop_table(("db1", "renamed"))
    assert os.path.exists(location)
    registered = cat.register_table(("db1", "back"), location)
    assert registered.metadata.table_uuid == md.table_uuid
    # a purge asks the server to delete the table's files (Iceberg Java's REST client does the same)
    cat.drop_table(("db1", "back"), purge=True)
    assert not os.path.exists(location) and not cat.table_exists(("db1", "back"))


def test_commits_send_updates_and_requirements(rest_server):
    cat = _catalog(rest_server)
    table = _create(cat, ("db2", "t"))
    for i in range(3):
        table = _append(cat.load_table(("db2", "t")), f"f{i}")
    assert _data_files(table) == {"f0.parquet", "f1.parquet", "f2.parquet"}
    assert len(table.metadata.snapshots) == 3
    table = commit(table, [MetadataChange((U.SetProperties((("a", "1"),)),))])
    assert cat.load_table(("db2", "t")).metadata.properties["a"] == "1"


def test_stale_append_is_rebased_not_lost(rest_server):
    """Two writers load the same head; the second's commit gets 409 (its ref assertion broke), the
    retry loop re-bases it, and both files stay in the branch's history."""
    cat = _catalog(rest_server)
    _create(cat, ("db3", "t"))
    first, second = cat.load_table(("db3", "t")), cat.load_table(("db3", "t"))
    _append(first, "a")
    table = _append(second, "b", policy=FAST)
    assert _data_files(table) == {"a.parquet", "b.parquet"}
    assert len(table.metadata.snapshots) == 2


def test_refused_requirement_is_typed(rest_server):
    """A schema change prepared on a base that another writer changed fails cleanly."""
    cat = _catalog(rest_server)
    _create(cat, ("db4", "t"))
    first, second = cat.load_table(("db4", "t")), cat.load_table(("db4", "t"))
    commit(first, [MetadataChange((U.SetDefaultSortOrder(0), U.SetCurrentSchema(0)))])
    bumped = Schema((*SCHEMA.fields, NestedField(3, "x", LONG, False)), schema_id=1)
    commit(first, [MetadataChange((U.AddSchema(bumped, 3), U.SetCurrentSchema(-1)))])
    other = Schema((*SCHEMA.fields, NestedField(3, "y", LONG, False)), schema_id=1)
    with pytest.raises(CommitFailedError) as info:
        commit(second, [MetadataChange((U.AddSchema(other, 3), U.SetCurrentSchema(-1)))], policy=FAST)
    assert not info.value.retryable
    assert [f.name for f in cat.load_table(("db4", "t")).metadata.schema().fields][-1] == "x"


def _rest_worker(uri: str, worker: int, appends: int) -> None:
    cat = load_catalog("rc", {"type": "rest", "uri": uri})
    for i in range(appends):
        _append(cat.load_table(("db5", "t")), f"w{worker}-{i}", policy=FAST)


@pytest.mark.slow
def test_concurrent_processes_lose_nothing(rest_server):
    cat = _catalog(rest_server)
    _create(cat, ("db5", "t"))
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_rest_worker, args=(rest_server.uri, w, 8)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    table = cat.load_table(("db5", "t"))
    assert _data_files(table) == {f"w{w}-{i}.parquet" for w in range(3) for i in range(8)}
    chain, s = [], table.metadata.current_snapshot()
    while s is not None:
        chain.append(s)
        s = table.metadata.snapshot_by_id(s.parent_snapshot_id) if s.parent_snapshot_id else None
    assert len(chain) == 24


def test_unavailable_commits_back_off_then_unknown_keeps_files(tmp_path):
    with running(fail_commits="2", fail_commits_after="1") as server:
        cat = _catalog(server)
        _create(cat, ("db", "t"))
        table = _append(cat.load_table(("db", "t")), "after-backoff")
        assert _data_files(table) == {"after-backoff.parquet"}
    with running(fail_commits="1000", fail_commits_after="1") as server:
        cat = _catalog(server)
        table = _create(cat, ("db", "t"))
        before = set(os.listdir(os.path.join(table.location, "metadata")))
        with pytest.raises(CommitStateUnknownError):
            _append(cat.load_table(("db", "t")), "unknown")
        written = set(os.listdir(os.path.join(table.location, "metadata"))) - before
        # the manifest and manifest list of the unknown commit are kept (it may have landed)
        assert any(n.endswith(".avro") for n in written)


def test_oauth2_client_credentials_and_refresh(monkeypatch):
    fetched: list[int] = []
    real = RestClient._fetch_token
    monkeypatch.setattr(RestClient, "_fetch_token", lambda self: fetched.append(1) or real(self))
    with running(credential="client:s3cret-value", token_seconds="61") as server:
        cat = _catalog(server, credential="client:s3cret-value", scope="catalog")
        cat.create_namespace("auth")
        assert len(fetched) == 1
        # every procedure call opens its catalog again; the shared client's fresh token serves it
        reopened = _catalog(server, credential="client:s3cret-value", scope="catalog")
        assert reopened.client is cat.client and ("auth",) in reopened.list_namespaces()
        assert len(fetched) == 1
        # tokens live 61 s and are renewed 60 s before they expire: after a second the next call renews
        time.sleep(1.2)
        assert ("auth",) in cat.list_namespaces()
        assert len(fetched) == 2
        with pytest.raises(RestAuthError) as info:
            _catalog(server, credential="client:wrong-secret").list_namespaces()
        assert "wrong-secret" not in str(info.value) and "s3cret" not in str(info.value)
        with pytest.raises(RestAuthError):
            _catalog(server).list_namespaces()
    with running(token="static-token-1") as server:
        assert _catalog(server, token="static-token-1").list_namespaces() == []
        with pytest.raises(RestAuthError) as info:
            _catalog(server, token="bad-token").list_namespaces()
        assert "bad-token" not in str(info.value)


def test_bad_configuration_is_named(rest_server):
    with pytest.raises(CatalogConfigError, match="has no uri"):
        load_catalog("rc", {"type": "rest"})
    with pytest.raises(CatalogConfigError, match="cannot connect"):
        load_catalog("rc", {"type": "rest", "uri": "http://127.0.0.1:1"})
    with pytest.raises(CatalogConfigError, match="sigv4"):
        load_catalog("rc", {"type": "rest", "uri": rest_server.uri, "rest.sigv4-enabled": "true"})
    with pytest.raises(CatalogConfigError, match="not found|prefix"):
        _catalog(rest_server, prefix="no-such-prefix").list_namespaces()


def test_prefix_endpoints_and_vended_config():
    with running(prefix="wh1", endpoints="GET /v1/{prefix}/namespaces,POST /v1/{prefix}/namespaces",
                 **{"table-config.s3.endpoint": "http://vended:9000"}) as server:
        cat = _catalog(server)
        assert cat.prefix == "wh1"
        cat.create_namespace("p")
        assert cat.list_namespaces() == [("p",)]
        with pytest.raises(CatalogConfigError, match="does not offer"):
            cat.list_tables("p")
    with running(**{"table-config.s3.endpoint": "http://vended:9000"}) as server:
        cat = _catalog(server)
        table = _create(cat, ("v", "t"))
        assert table.io.properties.get("s3.endpoint") == "http://vended:9000"
    # a server that vends credentials only through the advertised credentials endpoint
    endpoints = ",".join(sorted(DEFAULT_ENDPOINTS | {"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials"}))
    with running(endpoints=endpoints, credentials_only="true", **{"table-config.s3.endpoint": "http://cred:9000"}) as server:
        cat = _catalog(server)
        table = _create(cat, ("c", "t"))
        assert table.io.properties.get("s3.endpoint") == "http://cred:9000"


def test_pyiceberg_reads_ours_and_we_read_theirs(rest_server):
    import_reference("pyiceberg", "PyIceberg not installed: pip install -e '.[test]'")
    pa = import_reference("pyarrow")
    from pyiceberg.catalog.rest import RestCatalog as PyRest

    cat = _catalog(rest_server)
    ours = _create(cat, ("interop", "ours"))
    ours = commit(ours, [MetadataChange((U.SetProperties((("owner", "us"),)),))])
    py = PyRest("py", uri=rest_server.uri)
    theirs_view = py.load_table("interop.ours")
    assert theirs_view.metadata.table_uuid.hex == ours.metadata.table_uuid.replace("-", "")
    assert theirs_view.properties["owner"] == "us"
    # PyIceberg writes rows; we see its snapshot and files
    table = py.create_table("interop.theirs", schema=pa.schema([("id", pa.int64())]),
                            location=f"{rest_server.warehouse}/interop/theirs")
    table.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    seen = cat.load_table(("interop", "theirs"))
    assert seen.metadata.current_snapshot().summary["added-records"] == "3"
    # and we append to PyIceberg's table, which PyIceberg then reads
    path = next(iter(_data_files(seen)))
    f = DataFile(f"{seen.location}/data/{path}", FileFormat.PARQUET, (), 3,
                 os.path.getsize(f"{seen.location}/data/{path}"))
    commit(seen, [FastAppend([f])])
    assert len(py.load_table("interop.theirs").scan().to_arrow()) == 6
