import dataclasses
import json
import multiprocessing as mp
import os
import time
import uuid

import pytest

import procedures.catalog.hadoop as hadoop_module

from procedures.catalog import HadoopCatalog, load_catalog, parse_identifier, resolve_identifier
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
    now = int(time.time() * 1000)
    return dataclasses.replace(
        md,
        properties={**md.properties, **props},
        last_updated_ms=max(now, md.last_updated_ms + 1),
        metadata_log=md.metadata_log + (MetadataLogEntry(md.last_updated_ms, table.metadata_location),),
    )


@pytest.fixture()
def cat(tmp_path):
    c = HadoopCatalog("hcat", str(tmp_path / "wh"))
    c.create_namespace("db")
    return c


def new_table(cat, name="t", **props):
    ident = ("db", name)
    return cat.create_table(ident, make_metadata(cat.default_table_location(ident), **props))


def meta_files(cat, name="t"):
    return sorted(os.listdir(os.path.join(cat.warehouse, "db", name, "metadata")))


def test_create_writes_v1_and_hint_and_loads_back(cat):
    t = new_table(cat, a="1")
    assert t.metadata_location == f"{cat.warehouse}/db/t/metadata/v1.metadata.json"
    assert meta_files(cat) == ["v1.metadata.json", "version-hint.text"]
    with open(os.path.join(cat.warehouse, "db", "t", "metadata", "version-hint.text")) as f:
        assert f.read() == "1"
    loaded = cat.load_table("db.t")
    assert loaded.metadata == t.metadata and loaded.metadata_location == t.metadata_location
    assert cat.table_exists("db.t") and not cat.table_exists("db.u")
    assert cat.list_tables("db") == [("db", "t")]
    assert cat.list_namespaces() == [("db",)]  # a table directory is not a namespace


def test_commit_creates_next_version_and_refresh_sees_it(cat):
    t = new_table(cat)
    t2 = cat.commit_table(t, t.metadata, bumped(t, k="v"))
    assert t2.metadata_location.endswith("/v2.metadata.json")
    assert cat.load_table("db.t").metadata.properties == {"k": "v"}
    assert t.refresh().metadata.properties == {"k": "v"}
    assert t.metadata.metadata_log[-1].metadata_file.endswith("/v1.metadata.json")
    with open(os.path.join(cat.warehouse, "db", "t", "metadata", "version-hint.text")) as f:
        assert f.read() == "2"


def test_stale_base_loses_and_writes_nothing(cat):
    t = new_table(cat)
    stale = cat.load_table("db.t")
    cat.commit_table(t, t.metadata, bumped(t, winner="1"))
    with pytest.raises(CommitFailedError) as exc:
        cat.commit_table(stale, stale.metadata, bumped(stale, loser="1"))
    assert exc.value.table == "db.t"
    assert meta_files(cat) == ["v1.metadata.json", "v2.metadata.json", "version-hint.text"]
    assert cat.load_table("db.t").metadata.properties == {"winner": "1"}


def test_race_on_same_version_file(cat):
    """Both writers passed the staleness check; the file create decides."""
    t = new_table(cat)
    a, b = cat.load_table("db.t"), cat.load_table("db.t")
    # simulate the other writer landing v2 right between our check and our write
    other = os.path.join(cat.warehouse, "db", "t", "metadata", "v2.metadata.json")
    orig = cat._current_version
    cat._current_version = lambda path: (1, a.metadata_location)
    with open(other, "w") as f:
        f.write("{}")
    with pytest.raises(CommitFailedError):
        cat.commit_table(b, b.metadata, bumped(b, x="1"))
    cat._current_version = orig
    with open(other) as f:
        assert f.read() == "{}"  # never overwritten
    assert t.metadata_location.endswith("v1.metadata.json")


def test_lagging_or_missing_version_hint_is_walked_forward(cat):
    t = new_table(cat)
    t = cat.commit_table(t, t.metadata, bumped(t, n="2"))
    t = cat.commit_table(t, t.metadata, bumped(t, n="3"))
    hint = os.path.join(cat.warehouse, "db", "t", "metadata", "version-hint.text")
    with open(hint, "w") as f:
        f.write("1\n")
    assert cat.load_table("db.t").metadata_location.endswith("/v3.metadata.json")
    os.remove(hint)
    # Java's checksum side files and unrelated files are ignored
    for junk in (".v3.metadata.json.crc", ".version-hint.text.crc", "snap-1-1-x.avro"):
        open(os.path.join(cat.warehouse, "db", "t", "metadata", junk), "w").close()
    loaded = cat.load_table("db.t")
    assert loaded.metadata_location.endswith("/v3.metadata.json")
    assert loaded.metadata.properties == {"n": "3"}


def test_file_uri_spellings_load_the_same_table(tmp_path):
    wh = tmp_path / "wh"
    plain = HadoopCatalog("a", str(wh))
    plain.create_namespace("db")
    t = plain.create_table("db.t", make_metadata(f"file:{wh}/db/t"))  # Java's spelling of the location
    uri = HadoopCatalog("b", f"file://{wh}")
    loaded = uri.load_table("db.t")
    assert loaded.metadata == t.metadata
    assert loaded.metadata_location == f"file://{wh}/db/t/metadata/v1.metadata.json"
    committed = uri.commit_table(loaded, loaded.metadata, bumped(loaded, via="uri"))
    assert plain.load_table("db.t").metadata == committed.metadata


def test_gzip_codec_names_files_like_java(cat):
    t = new_table(cat, **{"write.metadata.compression-codec": "gzip"})
    assert t.metadata_location.endswith("/v1.gz.metadata.json")
    t2 = cat.commit_table(t, t.metadata, bumped(t, z="1"))
    assert t2.metadata_location.endswith("/v2.gz.metadata.json")
    assert cat.load_table("db.t").metadata.properties["z"] == "1"


def test_delete_after_commit_removes_dropped_log_entries(cat):
    props = {"write.metadata.delete-after-commit.enabled": "true", "write.metadata.previous-versions-max": "1"}
    t = new_table(cat, **props)
    t = cat.commit_table(t, t.metadata, bumped(t, n="2"))
    new = dataclasses.replace(bumped(t, n="3"), metadata_log=bumped(t).metadata_log[-1:])
    cat.commit_table(t, t.metadata, new)
    assert meta_files(cat) == ["v2.metadata.json", "v3.metadata.json", "version-hint.text"]
    assert cat.load_table("db.t").metadata.properties["n"] == "3"


def test_create_errors_write_nothing(cat, tmp_path):
    new_table(cat)
    before = sorted(os.walk(cat.warehouse))
    with pytest.raises(TableAlreadyExistsError):
        new_table(cat)
    with pytest.raises(NoSuchNamespaceError):
        cat.create_table("nope.t", make_metadata(f"{cat.warehouse}/nope/t"))
    with pytest.raises(ValidationError, match="path-based tables must live at"):
        cat.create_table("db.u", make_metadata(str(tmp_path / "elsewhere")))
    with pytest.raises(ValidationError, match="write.metadata.path"):
        cat.create_table("db.u", make_metadata(f"{cat.warehouse}/db/u", **{"write.metadata.path": "/x"}))
    for bad in ("t", "db..t", "db.t/x", "", ("db", ""), 42):
        with pytest.raises(ValidationError):
            cat.create_table(bad, make_metadata(f"{cat.warehouse}/db/u"))
    assert sorted(os.walk(cat.warehouse)) == before


def test_load_drop_rename_errors(cat):
    with pytest.raises(NoSuchTableError):
        cat.load_table("db.missing")
    with pytest.raises(NoSuchTableError):
        cat.drop_table("db.missing")
    new_table(cat)
    with pytest.raises(ValidationError, match="cannot be renamed"):
        cat.rename_table("db.t", "db.t2")
    cat.drop_table("db.t")
    assert not os.path.exists(os.path.join(cat.warehouse, "db", "t"))
    assert cat.list_tables("db") == []


def test_namespaces(cat):
    cat.create_namespace(("db", "inner"))
    cat.create_namespace("other")
    assert cat.list_namespaces() == [("db",), ("other",)]
    assert cat.list_namespaces("db") == [("db", "inner")]
    assert cat.load_namespace_properties("db") == {"location": f"{cat.warehouse}/db"}
    with pytest.raises(NamespaceAlreadyExistsError):
        cat.create_namespace("db")
    with pytest.raises(ValidationError):
        cat.create_namespace("x", {"owner": "me"})
    assert not os.path.exists(os.path.join(cat.warehouse, "x"))
    with pytest.raises(ValidationError):
        cat.update_namespace_properties("db", updates={"a": "b"})
    with pytest.raises(NamespaceNotEmptyError):
        cat.drop_namespace("db")
    with pytest.raises(NoSuchNamespaceError):
        cat.drop_namespace("missing")
    with pytest.raises(NoSuchNamespaceError):
        cat.list_tables("missing")
    cat.drop_namespace("other")
    assert cat.list_namespaces() == [("db",)]


def test_register_table_adopts_metadata_at_the_table_path(cat, tmp_path):
    t = new_table(cat, origin="x")
    src = tmp_path / "saved.metadata.json"
    src.write_bytes(open(t.metadata_location.replace("file:", ""), "rb").read())
    cat.drop_table("db.t")
    reg = cat.register_table("db.t", str(src))
    assert reg.metadata_location.endswith("/db/t/metadata/v1.metadata.json")
    assert cat.load_table("db.t").metadata.properties == {"origin": "x"}
    with pytest.raises(TableAlreadyExistsError):
        cat.register_table("db.t", str(src))
    with pytest.raises(ValidationError):
        cat.register_table("db.other", str(src))  # its location is db/t, not db/other


def test_config_builds_hadoop_catalog_and_resolves_names(tmp_path):
    conf = {
        "spark.sql.catalog.h": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.h.type": "hadoop",
        "spark.sql.catalog.h.warehouse": str(tmp_path),
        "spark.sql.catalog.h.commit.retry.num-retries": "7",
        "spark.sql.catalog.other.type": "glue",
        "spark.sql.defaultCatalog": "h",
    }
    c = load_catalog("h", conf)
    assert isinstance(c, HadoopCatalog) and c.warehouse == str(tmp_path)
    assert c.properties["commit.retry.num-retries"] == "7"
    assert resolve_identifier("h.db.t", conf=conf) == ("h", ("db", "t"))
    assert resolve_identifier("db.t", conf=conf) == ("h", ("db", "t"))
    assert resolve_identifier("other.db.t", conf=conf) == ("h", ("other", "db", "t"))
    assert resolve_identifier("db.t", conf={}) == ("local", ("db", "t"))
    assert resolve_identifier("`h`.db.`t`", "local", catalogs=["h"]) == ("h", ("db", "t"))
    plain = load_catalog("x", {"type": "hadoop", "warehouse": f"file:{tmp_path}"})
    assert plain.name == "x" and plain.warehouse == f"file:{tmp_path}"
    assert parse_identifier(["db", "t"]) == ("db", "t")


@pytest.mark.parametrize(
    "conf, key",
    [
        ({"spark.sql.catalog.h.type": "glue"}, "spark.sql.catalog.h.type"),
        ({"spark.sql.catalog.h.type": "hadoop"}, "spark.sql.catalog.h.warehouse"),
        ({"spark.sql.catalog.h.type": "hadoop", "spark.sql.catalog.h.warehouse": "rel/dir"},
         "spark.sql.catalog.h.warehouse"),
        ({"spark.sql.catalog.h.type": "hadoop", "spark.sql.catalog.h.warehouse": "/w",
          "spark.sql.catalog.h.commit.retry.num-retries": "many"}, "spark.sql.catalog.h.commit.retry.num-retries"),
        ({"type": "hadoop", "warehouse": "/w", "commit.retry.min-wait-ms": ["1"]}, "commit.retry.min-wait-ms"),
        ({}, "spark.sql.catalog.h.type"),
    ],
)
def test_bad_config_names_the_key(conf, key):
    with pytest.raises(CatalogConfigError) as exc:
        load_catalog("h", conf)
    assert key in str(exc.value)


def test_hive_without_a_spark_session_says_so(monkeypatch):
    from procedures.spark import catalog_conf

    # the whole suite runs a session in this process; this case is about a process without one
    monkeypatch.setattr(catalog_conf, "running_spark_session", lambda: None)
    with pytest.raises(CatalogConfigError, match="start a SparkSession first"):
        catalog_conf.load_catalog("h", {"spark.sql.catalog.h.type": "hive"})
    # the catalog layer alone knows no session: it says the same
    with pytest.raises(CatalogConfigError, match="start a SparkSession first"):
        load_catalog("h", {"spark.sql.catalog.h.type": "hive"})


def _commit_worker(args):
    conf, worker, commits = args
    cat = load_catalog("h", conf)
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
def test_four_processes_commit_without_lost_updates(tmp_path):
    conf = {"spark.sql.catalog.h.type": "hadoop", "spark.sql.catalog.h.warehouse": str(tmp_path / "wh")}
    cat = load_catalog("h", conf)
    cat.create_namespace("db")
    new_table(cat)
    commits = 8
    with mp.get_context("spawn").Pool(4) as pool:
        pool.map(_commit_worker, [(conf, w, commits) for w in range(4)])
    md = cat.load_table("db.t").metadata
    assert md.properties["counter"] == str(4 * commits)
    assert sum(1 for k in md.properties if k.startswith("w")) == 4 * commits
    expected = sorted([f"v{v}.metadata.json" for v in range(1, 4 * commits + 2)] + ["version-hint.text"])
    assert meta_files(cat) == expected  # no temp files, no orphaned versions
    assert len(md.metadata_log) == 4 * commits


def test_refresh_reads_no_metadata_while_the_table_is_unchanged(cat, monkeypatch):
    t = new_table(cat)
    check_refresh_reads_only_moved_metadata(cat, hadoop_module, t, bumped, monkeypatch)
    assert t.metadata_location.endswith("/v2.metadata.json")
