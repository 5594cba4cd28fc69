"""Table properties (procedures/core/kernel/properties.py): every property the package reads is declared
once, with Iceberg Java's default and a typed accessor, and read nowhere else by its key.

Parsing follows Java's ``PropertyUtil``: a boolean is ``Boolean.parseBoolean`` (``true`` in any case,
nothing trimmed), an integer that does not parse is a ValidationError naming the property.  The
rules that hang on one property (gc.enabled, retain_last, max_concurrent_deletes, the deletion of
old metadata files) each live in one place, checked here through the code paths that use them.
"""

from __future__ import annotations

import ast
import dataclasses
import os
from pathlib import Path

import pytest

from procedures.catalog.base import metadata_dir as catalog_metadata_dir
from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel import properties as P
from procedures.core.kernel import updates as U
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.gc.expire import ExpireSnapshotsParams
from procedures.core.gc.orphans import RemoveOrphanFilesParams
from procedures.core.kernel.manage import ExpireSnapshots
from procedures.core.kernel.snapshot_producer import metadata_dir
from procedures.core.kernel.transaction import MetadataChange, commit
from procedures.errors import ValidationError
from procedures.io.parquet_writer import WriteSettings
from procedures.spec.partitioning import UNPARTITIONED_SPEC
from procedures.spec.schema import Schema
from procedures.spec.types import LONG, NestedField

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = Schema((NestedField(1, "id", LONG, True),))
MIB = 1024 * 1024

#: Iceberg Java 1.10's TableProperties defaults for the properties we read, copied by hand from its
#: source (None: no default constant).  Where ours differ, the declaration's doc says why.
JAVA_DEFAULTS = {
    "commit.retry.num-retries": 4,
    "read.native-parquet.enabled": False,  # ours (Spark's Parquet reader where exact); Java has none
    "commit.retry.min-wait-ms": 100,
    "commit.retry.max-wait-ms": 60_000,
    "commit.retry.total-timeout-ms": 1_800_000,
    "commit.manifest.target-size-bytes": 8 * MIB,
    "commit.manifest.min-count-to-merge": 100,
    "commit.manifest-merge.enabled": True,
    "write.format.default": "parquet",
    "write.parquet.row-group-size-bytes": 128 * MIB,
    "write.parquet.page-size-bytes": MIB,
    "write.parquet.page-row-limit": 20_000,
    "write.parquet.dict-size-bytes": 2 * MIB,
    "write.parquet.compression-codec": "zstd",  # PARQUET_COMPRESSION_DEFAULT_SINCE_1_4_0, set on create
    "write.parquet.compression-level": None,
    "write.avro.compression-codec": "gzip",
    "write.avro.compression-level": None,
    "write.orc.compression-codec": "zlib",
    "write.target-file-size-bytes": 512 * MIB,
    "write.delete.target-file-size-bytes": 64 * MIB,
    "write.delete.granularity": "file",  # Spark's writers' effective default since 1.8
    "write.delete.mode": "copy-on-write",
    "write.data.path": None,
    "write.object-storage.path": None,
    "write.folder-storage.path": None,
    "write.metadata.path": None,
    "write.metadata.compression-codec": "none",
    "write.metadata.previous-versions-max": 100,
    "write.metadata.delete-after-commit.enabled": False,
    "write.metadata.metrics.default": None,  # unset means inferred (truncate(16) for the first 100)
    "write.metadata.metrics.max-inferred-column-defaults": 100,
    "schema.name-mapping.default": None,
    "read.split.target-size": 128 * MIB,
    "read.split.open-file-cost": 4 * MIB,
    "read.split.planning-lookback": 10,
    "gc.enabled": True,
    "history.expire.max-snapshot-age-ms": 5 * 24 * 60 * 60 * 1000,
    "history.expire.min-snapshots-to-keep": 1,
    "history.expire.max-ref-age-ms": 2**63 - 1,
    "compatibility.snapshot-id-inheritance.enabled": False,
    "engine.hive.lock-enabled": True,
    "format-version": 2,
    # Java has no default: unset, its Spark writes derive one from the spec and the sort order
    "write.distribution-mode": "",
    # Java's Spark writes default these to hash (a MERGE on an unpartitioned table: the append's mode)
    "write.delete.distribution-mode": "",
    "write.update.distribution-mode": "",
    "write.merge.distribution-mode": "",
}


# ------------------------------------------------------------------------------------ declarations
def test_every_declared_property_has_javas_default():
    declared = {key: prop.default for key, prop in P.TABLE_PROPERTIES.items()}
    assert declared == JAVA_DEFAULTS


def test_declared_names_are_exported_and_keys_unique():
    exported = [getattr(P, name) for name in P.__all__]
    props = [p for p in exported if isinstance(p, P.TableProperty)]
    assert sorted(p.key for p in props) == sorted(P.TABLE_PROPERTIES)
    assert len({p.key for p in props}) == len(props)


# ------------------------------------------------------------------------------------ accessors
@pytest.mark.parametrize("raw, expected", [
    ("true", True), ("TRUE", True), ("True", True), ("tRuE", True),
    ("false", False), ("FALSE", False), (" true", False), ("true ", False), ("yes", False), ("1", False),
    ("", False), ("on", False),
])
def test_booleans_read_as_javas_parse_boolean(raw, expected):
    assert P.parse_bool(raw, not expected) is expected
    assert P.GC_ENABLED.read({"gc.enabled": raw}) is expected
    assert P.METADATA_DELETE_AFTER_COMMIT_ENABLED.read({"write.metadata.delete-after-commit.enabled": raw}) is expected


def test_unset_booleans_take_the_default_and_setting_tells_unset_apart():
    assert P.GC_ENABLED.read({}) is True and P.MANIFEST_MERGE_ENABLED.read({}) is True
    assert P.SNAPSHOT_ID_INHERITANCE_ENABLED.read({}) is False
    assert P.HIVE_LOCK_ENABLED.setting({}) is None
    assert P.HIVE_LOCK_ENABLED.setting({"engine.hive.lock-enabled": "FALSE"}) is False
    assert P.HIVE_LOCK_ENABLED.setting({"engine.hive.lock-enabled": " true"}) is False
    assert P.HIVE_LOCK_ENABLED.setting({"engine.hive.lock-enabled": "True"}) is True


def test_integers_bytes_and_durations():
    assert P.MIN_SNAPSHOTS_TO_KEEP.read({}) == 1
    assert P.MIN_SNAPSHOTS_TO_KEEP.read({"history.expire.min-snapshots-to-keep": "7"}) == 7
    assert P.WRITE_TARGET_FILE_SIZE_BYTES.read({"write.target-file-size-bytes": "1024"}) == 1024
    assert P.MAX_SNAPSHOT_AGE_MS.read({"history.expire.max-snapshot-age-ms": "-1"}) == -1
    assert isinstance(P.SPLIT_SIZE, P.BytesProperty) and isinstance(P.MAX_REF_AGE_MS, P.DurationProperty)
    with pytest.raises(ValidationError, match=r"Table property read.split.target-size must be an integer, got 'big'"):
        P.SPLIT_SIZE.read({"read.split.target-size": "big"})
    # the declared minimum, and a stricter one a reader asks for
    with pytest.raises(ValidationError, match="commit.retry.num-retries must be at least 0, got -1"):
        P.COMMIT_NUM_RETRIES.read({"commit.retry.num-retries": "-1"})
    assert P.MANIFEST_MIN_MERGE_COUNT.read({"commit.manifest.min-count-to-merge": "0"}) == 0
    with pytest.raises(ValidationError, match="commit.manifest.min-count-to-merge must be at least 1, got 0"):
        P.MANIFEST_MIN_MERGE_COUNT.read({"commit.manifest.min-count-to-merge": "0"}, minimum=1)
    assert P.PARQUET_COMPRESSION_LEVEL.read({}) is None
    assert P.PARQUET_COMPRESSION_LEVEL.read({"write.parquet.compression-level": "3"}) == 3
    with pytest.raises(ValidationError, match="write.avro.compression-level must be an integer, got 'x'"):
        P.AVRO_COMPRESSION_LEVEL.read({"write.avro.compression-level": "x"})


def test_choices_are_trimmed_case_insensitive_and_refused_by_name():
    assert P.DELETE_MODE.read({"write.delete.mode": " Merge-On-Read "}) == "merge-on-read"
    assert P.DEFAULT_FILE_FORMAT.read({}) == "parquet"
    with pytest.raises(ValidationError, match="write.format.default='csv' is not supported; use parquet, orc or avro"):
        P.DEFAULT_FILE_FORMAT.read({"write.format.default": "CSV"})
    # a reader that knows what it supports passes the choices
    assert P.ORC_COMPRESSION.read({"write.orc.compression-codec": "LZ4"}, choices=("lz4", "zlib")) == "lz4"
    with pytest.raises(ValidationError, match="use lz4 or zlib"):
        P.ORC_COMPRESSION.read({"write.orc.compression-codec": "brotli"}, choices=("lz4", "zlib"))


def test_paths_treat_empty_as_unset():
    assert P.WRITE_DATA_LOCATION.read({}) is None
    assert P.WRITE_DATA_LOCATION.read({"write.data.path": ""}) is None
    assert P.WRITE_DATA_LOCATION.read({"write.data.path": "s3://b/d/"}) == "s3://b/d/"
    assert P.WRITE_METADATA_LOCATION.is_set({"write.metadata.path": ""})


# ------------------------------------------------------------------------------------ rules, once
def test_gc_disabled_message_is_one_template():
    P.require_gc_enabled({}, "delete orphan files")
    with pytest.raises(ValidationError) as e:
        P.require_gc_enabled({"gc.enabled": "False"}, "delete orphan files", advice="; see docs")
    assert str(e.value) == ("Cannot delete orphan files: GC is disabled (deleting files may corrupt other tables)"
                            "; see docs")


def _table(tmp_path, **props):
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/t", spec=UNPARTITIONED_SPEC,
                               properties=props)
    return cat.create_table(("db", "t"), md)


def test_gc_enabled_with_padding_refuses_expiration_as_java(tmp_path):
    # Java's Boolean.parseBoolean(" true") is false: GC is off, and nothing may be expired
    # (this package used to trim the value and expire)
    t = _table(tmp_path, **{"gc.enabled": " true"})
    with pytest.raises(ValidationError, match=r"Cannot expire snapshots: GC is disabled"):
        commit(t, [ExpireSnapshots(older_than_ms=0)])


def test_delete_after_commit_with_padding_keeps_old_metadata_as_java(tmp_path):
    # " true" is false in Java: the metadata files the log drops stay (they used to be deleted)
    t = _table(tmp_path, **{"write.metadata.previous-versions-max": "1",
                            "write.metadata.delete-after-commit.enabled": " true"})
    for i in range(3):
        t = commit(t, [MetadataChange((U.SetProperties(((f"k{i}", "v"),)),))])
    jsons = sorted(f for f in os.listdir(os.path.join(t.location, "metadata")) if f.endswith(".metadata.json"))
    assert jsons == [f"v{n}.metadata.json" for n in range(1, 5)]


@pytest.mark.parametrize("make", [
    lambda: ExpireSnapshotsParams(max_concurrent_deletes=0),
    lambda: RemoveOrphanFilesParams(max_concurrent_deletes=-2),
])
def test_max_concurrent_deletes_is_refused_where_the_arguments_are_taken(make):
    # once, before any table is loaded (the builtins and the actions no longer check it again)
    with pytest.raises(ValidationError, match="max_concurrent_deletes should have value > 0"):
        make()


def test_retain_last_is_checked_by_the_expiration_alone():
    assert not hasattr(ExpireSnapshotsParams, "validate_retain_last")
    assert not hasattr(ExpireSnapshotsParams, "validate_deletes")


def test_metadata_dir_is_one_rule(tmp_path):
    t = _table(tmp_path)
    md = t.metadata
    base = md.location.rstrip("/")
    for props, expected in [({}, f"{base}/metadata"), ({"write.metadata.path": ""}, f"{base}/metadata"),
                            ({"write.metadata.path": "s3://b/m/"}, "s3://b/m")]:
        m = dataclasses.replace(md, properties=props)
        assert metadata_dir(m) == catalog_metadata_dir(m) == expected
    # a location with a trailing slash gets no double slash (Java strips it)
    m = dataclasses.replace(md, location=base + "/", properties={})
    assert metadata_dir(m) == f"{base}/metadata"


def test_malformed_writer_property_is_a_validation_error_naming_it():
    settings = WriteSettings(SCHEMA, UNPARTITIONED_SPEC, "/d", properties={"write.parquet.page-size-bytes": "1MB"})
    with pytest.raises(ValidationError, match="Table property write.parquet.page-size-bytes must be an integer"):
        settings.parquet_options()


# ------------------------------------------------------------------------------------ no inline reads
#: spec/ is the format itself (metadata JSON fields named like reserved properties) and below core
EXEMPT = ("procedures/core/kernel/properties.py", "procedures/spec/")
#: legacy names of property keys that must be read through their declaration
KEY_CONSTANTS = {"DEFAULT_NAME_MAPPING_PROPERTY"}


def inline_property_reads(package: Path = ROOT / "procedures") -> list[str]:
    """Places outside the properties module that spell a declared property's key: a string literal
    equal to a key (but as a key written into a dict display or assigned through a subscript, which
    sets a property rather than reading it), ``.get``/subscript reads of a declaration's ``.key``,
    and reads through the spec's key constant."""
    keys = set(P.TABLE_PROPERTIES)
    found: list[str] = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).as_posix()
        if rel.startswith(EXEMPT):
            continue
        tree = ast.parse(path.read_text(), rel)
        allowed: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                allowed.update(id(k) for k in node.keys if k is not None)
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
                allowed.add(id(node.slice))
        for node in ast.walk(tree):
            where = f"{rel}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Constant) and node.value in keys and id(node) not in allowed:
                found.append(f"{where}: {node.value!r}")
            read_arg = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("get", "property", "pop") and node.args:
                read_arg = node.args[0]
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                read_arg = node.slice
            elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
                read_arg = node.left
            if read_arg is None:
                continue
            if isinstance(read_arg, ast.Attribute) and read_arg.attr == "key":
                found.append(f"{where}: {ast.unparse(node)}")
            elif isinstance(read_arg, ast.Name) and read_arg.id in KEY_CONSTANTS:
                found.append(f"{where}: {ast.unparse(node)}")
    return found


def test_no_property_is_read_by_its_key_outside_the_properties_module():
    assert inline_property_reads() == [], "read table properties through procedures.core.kernel.properties"


def test_the_scan_finds_inline_reads(tmp_path):
    pkg = tmp_path / "procedures"
    pkg.mkdir()
    (pkg / "m.py").write_text(
        'A = "gc.enabled"\n'
        'def f(md, GC_ENABLED):\n'
        '    x = md.properties.get("write.target-file-size-bytes", "1")\n'
        '    y = md.properties[GC_ENABLED.key]\n'
        '    z = "format-version" in md.properties\n'
        '    md.properties["gc.enabled"] = "false"\n'
        '    return {"write.target-file-size-bytes": "1"}\n'
    )
    found = inline_property_reads(pkg)
    assert sorted(int(f.split(":")[1]) for f in found) == [1, 3, 4, 5]
