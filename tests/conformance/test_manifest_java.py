"""Manifests against Iceberg Java 1.10: read Java-written manifest lists and manifests and compare
every field with Java's metadata tables; compare our Avro schemas with the ones in Java's files;
write manifests ourselves and have Java and PyIceberg read them back."""

from __future__ import annotations

import datetime
import io as _io
import json
from decimal import Decimal
from pathlib import Path

import fastavro
import pytest

from procedures.core.gc.live_paths import manifest_live_paths
from procedures.core.kernel.scan import EntryFilter
from procedures.io.fileio import FileIO
from procedures.spec.avro_scan import SkimField, compile_skimmer
from procedures.spec.avro_schemas import manifest_entry_avro_schema, manifest_list_avro_schema
from procedures.spec.evaluators import InclusiveMetricsEvaluator
from procedures.spec.expression_parser import parse_filter
from procedures.spec.expressions import referenced_field_ids
from procedures.spec.manifest.avro_container import read_manifest_metadata
from procedures.spec.manifest.manifest_list import read_manifest_list, read_manifest_list_where, write_manifest_list
from procedures.spec.manifest.model import FileContent, ManifestContent, ManifestEntryStatus
from procedures.spec.manifest.reader import read_manifest, read_manifest_where
from procedures.spec.manifest.writer import ManifestWriter
from procedures.spec.metadata import read_table_metadata

# every test here reads or writes through Iceberg Java (deselected on pyspark 4)
pytestmark = [pytest.mark.spark, pytest.mark.java]
EPOCH = datetime.date(1970, 1, 1)


def _create(spark, name: str, version: int) -> str:
    t = f"jcat.db.{name}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.db")
    spark.sql(f"DROP TABLE IF EXISTS {t}")
    spark.sql(
        f"CREATE TABLE {t} (id BIGINT, price DECIMAL(9,2), d DATE, ts TIMESTAMP, name STRING) USING iceberg "
        f"PARTITIONED BY (price, days(ts), name) "
        f"TBLPROPERTIES ('format-version'='{version}', 'write.delete.mode'='merge-on-read', "
        f"'write.update.mode'='merge-on-read')"
    )
    spark.sql(f"""INSERT INTO {t} VALUES
        (1, 14.20, DATE'2017-11-16', TIMESTAMP'2017-11-16 22:31:08', 'a'),
        (2, 14.20, DATE'2017-11-16', TIMESTAMP'2017-11-16 23:00:00', 'a'),
        (3, -1.28, DATE'2020-01-01', TIMESTAMP'2020-01-01 00:00:00', 'b'),
        (4, NULL, NULL, NULL, NULL)""")
    spark.sql(f"INSERT INTO {t} VALUES (5, 14.20, DATE'2017-11-16', TIMESTAMP'2017-11-16 10:00:00', 'a')")
    spark.sql(f"DELETE FROM {t} WHERE id = 2")
    return t


def _metadata(spark, t: str):
    location = spark.sql(f"SELECT file FROM {t}.metadata_log_entries ORDER BY timestamp DESC LIMIT 1").collect()[0][0]
    return read_table_metadata(FileIO(), location)


@pytest.mark.parametrize("version", [2, 3])
def test_read_java_manifests_matches_metadata_tables(spark, version: int) -> None:
    t = _create(spark, f"mf_java_v{version}", version)
    md = _metadata(spark, t)
    snap = md.current_snapshot()
    fio = FileIO()
    manifests = read_manifest_list(fio, snap.manifest_list)

    java_manifests = {
        r["path"]: r for r in spark.sql(
            f"SELECT * FROM {t}.manifests").collect()
    }
    assert {m.manifest_path for m in manifests} == set(java_manifests)
    for m in manifests:
        j = java_manifests[m.manifest_path]
        assert m.manifest_length == j["length"]
        assert m.partition_spec_id == j["partition_spec_id"]
        assert int(m.content) == j["content"]
        assert m.added_snapshot_id == j["added_snapshot_id"]
        assert (m.added_files_count, m.existing_files_count) == (
            j["added_data_files_count"] + j["added_delete_files_count"],
            j["existing_data_files_count"] + j["existing_delete_files_count"])
        assert m.deleted_files_count == j["deleted_data_files_count"] + j["deleted_delete_files_count"]
        assert [(s.contains_null, s.contains_nan) for s in m.partitions] == [
            (s["contains_null"], s["contains_nan"]) for s in j["partition_summaries"]]
        if version >= 3:
            assert (m.first_row_id is not None) == (m.content == ManifestContent.DATA)

    # every entry vs the entries table (which applies Java's inheritance)
    java_entries = {
        r["data_file"]["file_path"]: r for r in spark.sql(f"SELECT * FROM {t}.entries").collect()
    }
    specs = {s.spec_id: s for s in md.partition_specs}
    ours = [e for m in manifests for e in read_manifest(fio, m, specs=specs)]
    assert {e.data_file.file_path for e in ours} == set(java_entries)
    for e in ours:
        j = java_entries[e.data_file.file_path]
        jf = j["data_file"]
        f = e.data_file
        assert (int(e.status), e.snapshot_id, e.sequence_number, e.file_sequence_number) == (
            j["status"], j["snapshot_id"], j["sequence_number"], j["file_sequence_number"])
        assert int(f.content) == jf["content"]
        assert f.file_format.value == jf["file_format"]
        assert f.spec_id == jf["spec_id"]
        assert (f.record_count, f.file_size_in_bytes) == (jf["record_count"], jf["file_size_in_bytes"])
        assert f.column_sizes == (dict(jf["column_sizes"]) if jf["column_sizes"] is not None else None)
        assert f.value_counts == (dict(jf["value_counts"]) if jf["value_counts"] is not None else None)
        assert f.null_value_counts == (dict(jf["null_value_counts"]) if jf["null_value_counts"] is not None else None)
        assert f.nan_value_counts == (dict(jf["nan_value_counts"]) if jf["nan_value_counts"] is not None else None)
        assert f.lower_bounds == ({k: bytes(v) for k, v in jf["lower_bounds"].items()} if jf["lower_bounds"] is not None else None)
        assert f.upper_bounds == ({k: bytes(v) for k, v in jf["upper_bounds"].items()} if jf["upper_bounds"] is not None else None)
        assert list(f.split_offsets or []) == list(jf["split_offsets"] or [])
        assert f.equality_ids == (tuple(jf["equality_ids"]) if jf["equality_ids"] is not None else None)
        assert f.sort_order_id == jf["sort_order_id"]
        assert f.referenced_data_file == jf["referenced_data_file"]
        if version >= 3:
            assert f.first_row_id == jf["first_row_id"]
            assert (f.content_offset, f.content_size_in_bytes) == (jf["content_offset"], jf["content_size_in_bytes"])
        # partition: decimal, day (date int), string
        jp = jf["partition"]
        price, day, name = f.partition
        assert price == jp["price"]
        assert day == (None if jp["ts_day"] is None else (jp["ts_day"] - EPOCH).days)
        assert name == jp["name"]
    partitions = {e.data_file.partition for e in ours if e.data_file.content == FileContent.DATA}
    assert (Decimal("14.20"), 17486, "a") in partitions and (None, None, None) in partitions
    deletes = [e for e in ours if e.data_file.content == FileContent.POSITION_DELETES]
    assert len(deletes) == 1
    if version >= 3:
        assert deletes[0].data_file.file_format.value == "PUFFIN"
        dv = spark.sql(f"SELECT content_offset, content_size_in_bytes, referenced_data_file FROM {t}.all_delete_files").collect()
        assert (deletes[0].data_file.content_offset, deletes[0].data_file.content_size_in_bytes,
                deletes[0].data_file.referenced_data_file) == tuple(dv[0])


@pytest.mark.parametrize("version", [2, 3])
def test_our_schemas_equal_java_written(spark, version: int) -> None:
    t = _create(spark, f"mf_schema_v{version}", version)
    md = _metadata(spark, t)
    snap = md.current_snapshot()
    fio = FileIO()
    raw = fio.new_input(snap.manifest_list).read()
    java_list = fastavro.reader(_io.BytesIO(raw))
    assert json.loads(java_list.metadata["avro.schema"]) == manifest_list_avro_schema(version)
    assert {k for k in java_list.metadata if not k.startswith("avro.")} >= {
        "snapshot-id", "parent-snapshot-id", "sequence-number", "format-version"}
    m = read_manifest_list(fio, snap.manifest_list)[0]
    header = fastavro.reader(_io.BytesIO(fio.new_input(m.manifest_path).read()))
    java_schema = json.loads(header.metadata["avro.schema"])
    ours = manifest_entry_avro_schema(version, md.spec_by_id(m.partition_spec_id).partition_type(md.schema()))
    assert java_schema == ours
    meta = read_manifest_metadata(fio, m.manifest_path)
    assert {"schema", "partition-spec", "partition-spec-id", "format-version", "content"} <= set(meta)


@pytest.mark.parametrize("version", [2, 3])
def test_java_and_pyiceberg_read_our_manifests(spark, version: int, tmp_path: Path) -> None:
    t = _create(spark, f"mf_ours_v{version}", version)
    md = _metadata(spark, t)
    snap = md.current_snapshot()
    fio = FileIO()
    specs = {s.spec_id: s for s in md.partition_specs}
    originals = read_manifest_list(fio, snap.manifest_list)
    rewritten = []
    for i, m in enumerate(originals):
        path = f"{tmp_path}/ours-{i}.avro"
        with ManifestWriter(fio, path, specs[m.partition_spec_id], md.schema(), version, m.content, snap.snapshot_id) as w:
            for e in read_manifest(fio, m, specs=specs):
                if e.status == ManifestEntryStatus.ADDED and e.snapshot_id == snap.snapshot_id:
                    w.add(e.data_file)
                elif e.status == ManifestEntryStatus.DELETED:
                    w.delete(e.data_file, e.sequence_number, e.file_sequence_number)
                else:
                    w.existing(e.data_file, e.snapshot_id, e.sequence_number, e.file_sequence_number)
        rewritten.append(w.close())
    list_path = f"{tmp_path}/snap-ours.avro"
    listed, _ = write_manifest_list(fio, list_path, version, snap.snapshot_id, snap.parent_snapshot_id,
                                    snap.sequence_number, snap.first_row_id, rewritten)

    # Java reads each of our manifests with its own reader and table specs
    jvm = spark._jvm
    jtable = jvm.org.apache.iceberg.hadoop.HadoopTables(spark._jsc.hadoopConfiguration()).load(md.location)
    jio = jtable.io()
    snap_json = {"snapshot-id": snap.snapshot_id, "sequence-number": snap.sequence_number,
                 "timestamp-ms": snap.timestamp_ms, "manifest-list": list_path,
                 "summary": {"operation": "append"}, "schema-id": md.current_schema_id}
    if snap.parent_snapshot_id is not None:
        snap_json["parent-snapshot-id"] = snap.parent_snapshot_id
    if version >= 3:
        snap_json["first-row-id"] = snap.first_row_id
        snap_json["added-rows"] = snap.added_rows
    jsnap = jvm.org.apache.iceberg.SnapshotParser.fromJson(json.dumps(snap_json))
    java_listed = {str(jm.path()): jm for jm in jsnap.allManifests(jio)}
    for ours_m, orig in zip(listed, originals):
        jm = java_listed[ours_m.manifest_path]
        assert (jm.length(), jm.sequenceNumber(), jm.minSequenceNumber(), jm.snapshotId()) == (
            ours_m.manifest_length, ours_m.sequence_number, ours_m.min_sequence_number, ours_m.added_snapshot_id)
        if version >= 3:
            assert jm.firstRowId() == ours_m.first_row_id
        expected = sorted(
            (e.data_file.file_path, _rewritten_status(e, snap.snapshot_id), e.snapshot_id, e.sequence_number,
             e.file_sequence_number,
             e.data_file.record_count, e.data_file.first_row_id if version >= 3 else None)
            for e in read_manifest(fio, orig, specs=specs))
        if ours_m.content == ManifestContent.DATA:
            reader = jvm.org.apache.iceberg.ManifestFiles.read(jm, jio, jtable.specs())
        else:
            reader = jvm.org.apache.iceberg.ManifestFiles.readDeleteManifest(jm, jio, jtable.specs())
        got = []
        it = reader.entries().iterator()
        while it.hasNext():
            je = it.next()
            f = je.file()
            frid = f.firstRowId() if version >= 3 else None
            got.append((str(f.location()), je.status().id(), je.snapshotId(), je.dataSequenceNumber(),
                        je.fileSequenceNumber(), f.recordCount(), frid))
        reader.close()
        assert sorted(got) == expected

    # PyIceberg reads the list and the manifests with the same values
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import read_manifest_list as pyi_read_list

    pio = PyArrowFileIO()
    pyi = list(pyi_read_list(pio.new_input(list_path)))
    assert [(p.manifest_path, p.manifest_length, p.sequence_number, p.min_sequence_number, p.added_rows_count)
            for p in pyi] == [(m.manifest_path, m.manifest_length, m.sequence_number, m.min_sequence_number,
                               m.added_rows_count) for m in listed]
    for p, m in zip(pyi, listed):
        theirs = sorted((e.data_file.file_path, e.status.value, e.snapshot_id, e.sequence_number, e.file_sequence_number,
                         e.data_file.record_count) for e in p.fetch_manifest_entry(pio, discard_deleted=False))
        mine = sorted((e.data_file.file_path, int(e.status), e.snapshot_id, e.sequence_number, e.file_sequence_number,
                       e.data_file.record_count) for e in read_manifest(fio, m, specs=specs))
        assert theirs == mine


def _rewritten_status(entry, snapshot_id: int) -> int:
    """The status our rewrite gives an entry: files added by other snapshots become EXISTING."""
    if entry.status == ManifestEntryStatus.ADDED and entry.snapshot_id != snapshot_id:
        return int(ManifestEntryStatus.EXISTING)
    return int(entry.status)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_metrics_first_reading_of_java_manifests_keeps_what_a_full_read_keeps(spark, version: int) -> None:
    # Java's manifest schemas (field order, names, unions) through the skimming reader of scan planning
    t = f"jcat.db.mf_skim_v{version}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.db")
    spark.sql(f"DROP TABLE IF EXISTS {t}")
    spark.sql(f"CREATE TABLE {t} (id BIGINT, x DOUBLE, name STRING) USING iceberg PARTITIONED BY (bucket(2, id)) "
              f"TBLPROPERTIES ('format-version'='{version}')")
    for k in range(4):
        spark.sql(f"INSERT INTO {t} VALUES ({k * 10}, {k}.5, 'n{k}'), ({k * 10 + 5}, NULL, NULL), "
                  f"({k * 10 + 7}, double('NaN'), 'z')")
    md = _metadata(spark, t)
    fio = FileIO()
    manifests = [m for m in read_manifest_list(fio, md.current_snapshot().manifest_list)
                 if m.content == ManifestContent.DATA]
    for m in manifests:  # the skimming reader handles Java's schemas (no fallback to a full read)
        header = fastavro.reader(_io.BytesIO(fio.new_input(m.manifest_path).read())).metadata["avro.schema"]
        assert compile_skimmer(json.loads(header), [SkimField((2, 125), "map", frozenset({1}))]) is not None
    kept_somewhere = 0
    for flt in ("id < 12", "x > 2.0", "name = 'n3' OR id >= 35", "x IS NULL"):
        ev = InclusiveMetricsEvaluator(md.schema(), parse_filter(flt))
        for m in manifests:
            full = [e for e in read_manifest(fio, m, specs=md.specs_by_id, skip_deleted=True) if ev.eval(e.data_file)]
            got = list(read_manifest_where(fio, m, referenced_field_ids(ev.expr), ev.eval, specs=md.specs_by_id))
            assert got == full
            kept_somewhere += len(got)
    assert 0 < kept_somewhere < 4 * sum(m.added_files_count or 0 for m in manifests)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_summary_first_reading_of_java_manifest_lists_keeps_what_a_full_read_keeps(spark, version: int) -> None:
    # Java's manifest-list schemas through scan planning's skimming reader, with delete manifests
    # (v2/v3) and manifests left with deleted entries only (the copy-on-write delete of v1)
    t = f"jcat.db.ml_skim_v{version}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.db")
    spark.sql(f"DROP TABLE IF EXISTS {t}")
    mode = "" if version == 1 else ", 'write.delete.mode'='merge-on-read'"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, x DOUBLE, name STRING) USING iceberg PARTITIONED BY (name, bucket(2, id)) "
              f"TBLPROPERTIES ('format-version'='{version}'{mode})")
    for k in range(4):
        spark.sql(f"INSERT INTO {t} VALUES ({k * 10}, {k}.5, 'n{k}'), ({k * 10 + 5}, NULL, NULL), "
                  f"({k * 10 + 7}, double('NaN'), 'z')")
    spark.sql(f"DELETE FROM {t} WHERE name = 'n1'")
    md = _metadata(spark, t)
    fio = FileIO()
    path = md.current_snapshot().manifest_list
    header = json.loads(fastavro.reader(_io.BytesIO(fio.new_input(path).read())).metadata["avro.schema"])
    listed = [SkimField((502,), "long"), SkimField((504,), "long"), SkimField((505,), "long"),
              SkimField((507,), "span")]
    skimmer = compile_skimmer(header, listed)  # the skimming reader handles Java's schema (no full-read fallback)
    assert skimmer is not None and len(skimmer.found) == len(listed)
    full = read_manifest_list(fio, path)
    assert len({m.partitions for m in full}) > 2
    for flt in ("name = 'n2'", "name IS NULL", "id < 12", "name > 'n1' AND name < 'z'", "true"):
        ef = EntryFilter(md.specs_by_id, md.schema(), parse_filter(flt), True)
        for live_only in (False, True):
            expected = [m for m in full if ef.keeps_manifest(m) and not (
                live_only and m.added_files_count == 0 and m.existing_files_count == 0)]
            assert read_manifest_list_where(fio, path, ef.keeps_summaries, live_only=live_only) == expected


@pytest.mark.parametrize("version", [1, 2, 3])
def test_gc_path_reading_of_java_manifests_equals_the_full_read(spark, version: int) -> None:
    # garbage collection reads an entry's status, content and path with the skimming reader: on Java's
    # manifests (data and delete manifests, DELETED entries, v3 deletion vectors) it must give what a full
    # read gives, and the reader must take Java's schemas without falling back to fastavro
    t = f"jcat.db.mf_gc_paths_v{version}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.db")
    spark.sql(f"DROP TABLE IF EXISTS {t}")
    mor = "'write.delete.mode'='merge-on-read', " if version >= 2 else ""
    spark.sql(f"CREATE TABLE {t} (id BIGINT, name STRING) USING iceberg PARTITIONED BY (bucket(2, id)) "
              f"TBLPROPERTIES ({mor}'format-version'='{version}')")
    for k in range(3):
        spark.sql(f"INSERT INTO {t} SELECT id, IF(id % 3 = 0, NULL, CAST(id AS STRING)) FROM range({k * 100}, {k * 100 + 40})")
    spark.sql(f"DELETE FROM {t} WHERE id = 111")  # v1: a rewritten file (DELETED entry); v2: position deletes; v3: a DV
    spark.sql(f"DELETE FROM {t} WHERE id >= 200")  # whole files: DELETED entries
    md = _metadata(spark, t)
    fio = FileIO()
    specs = {s.spec_id: s for s in md.partition_specs}
    wanted = [SkimField((0,), "long"), SkimField((2, 134), "long"), SkimField((2, 100), "string")]
    seen_status: set[int] = set()
    seen_content: set[FileContent] = set()
    for snap in md.snapshots:
        for m in read_manifest_list(fio, snap.manifest_list):
            header = fastavro.reader(_io.BytesIO(fio.new_input(m.manifest_path).read())).metadata["avro.schema"]
            assert compile_skimmer(json.loads(header), wanted) is not None
            entries = list(read_manifest(fio, m, specs=specs))
            seen_status.update(int(e.status) for e in entries)
            full = [(e.data_file.file_path, e.data_file.content) for e in entries
                    if e.status != ManifestEntryStatus.DELETED]
            seen_content.update(c for _, c in full)
            assert list(manifest_live_paths(fio, m)) == full
    assert {1, 2} <= seen_status
    assert seen_content == ({FileContent.DATA} if version == 1 else {FileContent.DATA, FileContent.POSITION_DELETES})
