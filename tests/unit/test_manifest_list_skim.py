"""Reading a manifest list through its rows' encoded partition summaries first
(``read_manifest_list_where``): the rows it returns must be exactly a full read's rows that pass the
same test, whatever the format version, the summaries (nulls, NaN, missing bounds) and the blocks."""

from __future__ import annotations

import io
import json
import pickle
import random
import struct
from dataclasses import replace

import fastavro
import pytest

import procedures.spec.manifest.manifest_list as manifest_list_module
from procedures.core.kernel.scan import listed_entries
from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec.manifest.manifest_list import (
    ManifestRows, read_manifest_list, read_manifest_list_where, write_manifest_list,
)
from procedures.spec.manifest.model import FieldSummary, ManifestContent, ManifestFile
from tests.unit.test_manifest_skim import MemIO, one_block


def _summary(rng: random.Random) -> FieldSummary:
    kind = rng.randrange(6)
    lo = rng.randrange(0, 50)
    if kind == 0:  # nulls only
        return FieldSummary(True, False, None, None)
    if kind == 1:  # NaN flag unknown (v1 writers)
        return FieldSummary(False, None, struct.pack("<i", lo), struct.pack("<i", lo + 3))
    return FieldSummary(kind == 2, kind == 3, struct.pack("<i", lo), struct.pack("<i", lo + rng.randrange(4)))


def _rows(version: int, count: int = 3000) -> list[ManifestFile]:
    rng = random.Random(version)
    rows = []
    for n in range(count):
        spec_id = n % 3
        content = ManifestContent.DELETES if version > 1 and n % 7 == 0 else ManifestContent.DATA
        parts = None if spec_id == 2 and n % 2 else () if spec_id == 2 else tuple(
            _summary(rng) for _ in range(spec_id + 1))
        added, existing = (0, 0) if n % 11 == 0 else (rng.randrange(3), rng.randrange(3))
        rows.append(ManifestFile(
            f"s3://bucket/t/metadata/m-{n:05}-{'x' * (n % 70)}.avro", 4000 + n, spec_id, content,
            sequence_number=n, min_sequence_number=n // 2, added_snapshot_id=10**17 + n,
            added_files_count=added, existing_files_count=existing, deleted_files_count=n % 4,
            added_rows_count=added * 10**6, existing_rows_count=existing * 7, deleted_rows_count=n % 4,
            partitions=parts, key_metadata=b"key" if n % 13 == 0 else None))
    return rows


def _written(version: int) -> tuple[MemIO, str]:
    mio, path = MemIO(), f"s3://bucket/t/metadata/snap-v{version}.avro"
    write_manifest_list(mio, path, version, 55, 54, 3000, 100 if version >= 3 else None, _rows(version))
    return mio, path


def _keep_low(spec_id: int, summaries) -> bool:
    # the first field's lower bound below 20 (no bound: keep); every spec and shape reaches here
    if not summaries:
        return spec_id != 1
    lo = summaries[0].lower_bound
    return lo is None or struct.unpack("<i", lo)[0] < 20


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("live_only", [False, True])
def test_kept_rows_are_a_full_reads_passing_rows(version, live_only):
    mio, path = _written(version)
    full = read_manifest_list(mio, path)
    expected = [m for m in full if _keep_low(m.partition_spec_id, m.partitions)
                and not (live_only and m.added_files_count == 0 and m.existing_files_count == 0)]
    got = read_manifest_list_where(mio, path, _keep_low, live_only=live_only)
    assert got == expected
    assert 0 < len(got) < len(full)


def test_the_test_runs_once_per_distinct_summaries():
    mio, path = _written(2)
    full = read_manifest_list(mio, path)
    asked: list[tuple] = []

    def keep(spec_id, summaries):
        asked.append((spec_id, summaries))
        return True

    assert read_manifest_list_where(mio, path, keep) == full
    assert len(asked) == len(set(asked)) == len({(m.partition_spec_id, m.partitions) for m in full})


def test_rows_with_the_same_summaries_get_the_same_answer():
    rows = [replace(m, partitions=(FieldSummary(False, False, b"\x01\x00\x00\x00", b"\x02\x00\x00\x00"),))
            for m in _rows(2, 40)]
    mio, path = MemIO(), "s3://b/l.avro"
    write_manifest_list(mio, path, 2, 55, None, 3000, None, rows)
    calls = []
    got = read_manifest_list_where(mio, path, lambda s, p: calls.append(s) or s == 0)
    assert got == [m for m in read_manifest_list(mio, path) if m.partition_spec_id == 0]
    assert sorted(calls) == [0, 1, 2]


@pytest.mark.parametrize("count_change", [0, 1, -1])
def test_a_block_whose_count_disagrees_with_its_bytes_is_corrupt(count_change):
    mio, path = _written(2)
    expected = read_manifest_list(mio, path)
    mio.files[path] = one_block(mio.files[path], count_change)
    if count_change == 0:
        assert read_manifest_list_where(mio, path, lambda s, p: True) == expected
        return
    message = rf"^{path}: corrupt manifest list \((EOFError|IndexError|ValueError): "
    if count_change < 0:  # one row fewer counted than the bytes hold: the last row's bytes are left
        rows = read_manifest_list_where(_memio_with(path, _written(2)[0].files[path]), path, None).rows
        message += rf"a block holds {len(rows[-1])} bytes past its {len(expected) - 1} rows\)$"
    with pytest.raises(InvalidMetadataError, match=message):
        read_manifest_list_where(mio, path, lambda s, p: True)


def _memio_with(path: str, data: bytes) -> MemIO:
    mio = MemIO()
    mio.files[path] = data
    return mio


@pytest.mark.parametrize("version", [1, 2, 3])
def test_kept_rows_stay_encoded_until_read(version):
    mio, path = _written(version)
    full = read_manifest_list(mio, path)
    rows = read_manifest_list_where(mio, path, lambda s, p: True)
    assert isinstance(rows, ManifestRows) and len(rows) == len(full)
    assert list(rows) == full and rows[7] == full[7] and list(rows[10:20]) == full[10:20]
    again = pickle.loads(pickle.dumps(rows))  # what a Spark task gets: the rows' bytes
    assert list(again[5:9]) == full[5:9]
    data = rows.with_content(ManifestContent.DATA)
    assert list(data) == [m for m in full if m.content == ManifestContent.DATA]
    assert list(rows.with_content(ManifestContent.DELETES)) == [m for m in full if m.content == ManifestContent.DELETES]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_keeping_every_row_reads_the_whole_list_without_its_summaries(version, monkeypatch):
    mio, path = _written(version)
    full = read_manifest_list(mio, path)
    asked = []
    real = manifest_list_module._list_reader

    def spied(schema_text):
        reader = real(schema_text)
        return replace(reader, summaries=lambda span: asked.append(span) or reader.summaries(span))

    monkeypatch.setattr(manifest_list_module, "_list_reader", spied)
    rows = read_manifest_list_where(mio, path, None)
    assert list(rows) == full and not asked
    assert read_manifest_list_where(mio, path, lambda s, p: True) == full and asked  # the spy sees a keep's reads


def test_a_row_that_decodes_to_another_length_is_corrupt():
    mio, path = _written(2)
    rows = read_manifest_list_where(mio, path, lambda s, p: True)
    longer = ManifestRows(rows.path, rows.schema, [rows.rows[0] + b"\x00"], [0])
    with pytest.raises(InvalidMetadataError, match=rf"^{path}: a row read as {len(rows.rows[0])} bytes and as "
                                                   rf"{len(rows.rows[0]) + 1}$"):
        list(longer)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_taken_rows_and_a_row_decoded_alone_are_the_full_reads(version):
    mio, path = _written(version)
    full = read_manifest_list(mio, path)
    rows = read_manifest_list_where(mio, path, lambda s, p: True)
    at = [2999, 0, 17, 17, 1500]
    taken = rows.take(at)
    assert isinstance(taken, ManifestRows) and list(taken) == [full[i] for i in at]
    assert taken.contents == tuple(rows.contents[i] for i in at)
    # a Spark task gets one row's bytes and decodes it with the list's path and schema
    assert [ManifestRows.decode_one(rows.path, rows.schema, rows.rows[i]) for i in at] == [full[i] for i in at]
    with pytest.raises(InvalidMetadataError, match="read as"):
        ManifestRows.decode_one(rows.path, rows.schema, rows.rows[3] + b"\x00")


@pytest.mark.parametrize("version", [1, 2, 3])
def test_kept_rows_count_their_listed_entries_without_decoding(version, monkeypatch):
    """The added + existing + deleted counts of kept rows, skimmed with them: what a scan's size rule
    reads of thousands of manifests, equal to the decoded rows' sum through slices, takes, a
    content's rows and pickling."""
    mio, path = _written(version)
    rows = read_manifest_list_where(mio, path, _keep_low)
    assert isinstance(rows, ManifestRows)
    decoded = list(rows)
    expected = listed_entries(decoded)
    assert expected and rows.listed_entries() == expected
    assert rows[100:400].listed_entries() == listed_entries(decoded[100:400])
    assert rows.take([5, 0, 5]).listed_entries() == listed_entries([decoded[5], decoded[0], decoded[5]])
    data = rows.with_content(ManifestContent.DATA)
    assert data.listed_entries() == listed_entries([m for m in decoded if m.content == ManifestContent.DATA])
    assert pickle.loads(pickle.dumps(rows[7:9])).listed_entries() == listed_entries(decoded[7:9])
    monkeypatch.setattr(ManifestRows, "_decode", lambda *a: pytest.fail("a row was decoded"))
    assert listed_entries(rows) == expected  # the scan's rule takes the skimmed counts


def test_a_row_without_a_count_makes_the_listed_entries_unknown():
    mio, path = MemIO(), "s3://b/v1-counts.avro"
    counted = _listed(1, manifest_path="s3://b/m1.avro")
    uncounted = _listed(1, manifest_path="s3://b/m2.avro", deleted_files_count=None)
    write_manifest_list(mio, path, 1, 55, None, -1, None, [counted, uncounted])
    rows = read_manifest_list_where(mio, path, None)
    assert isinstance(rows, ManifestRows) and rows[1].deleted_files_count is None
    assert rows[:1].listed_entries() == 3 and rows.listed_entries() is None and listed_entries(rows) is None
    # rows built without their counts (not skimmed) decode to answer
    bare = ManifestRows(rows.path, rows.schema, rows.rows[:1], rows.contents[:1])
    assert bare.listed_entries() is None and listed_entries(bare) == 3
    with pytest.raises(ValueError, match="2 entry counts for 1 manifest-list rows"):
        ManifestRows(rows.path, rows.schema, rows.rows[:1], rows.contents[:1], [1, 2])


# ------------------------------------------------------------------ edges found by mutation testing
def test_encoded_lists_join_every_block_and_decode_their_head():
    from procedures.spec.manifest.manifest_list import decode_manifest_list_head, read_encoded_manifest_list

    mio, path = _written(2)
    encoded = read_encoded_manifest_list(mio, path)
    full = read_manifest_list(mio, path)
    assert encoded.path == path and encoded.count == len(full) == 3000  # several blocks
    assert decode_manifest_list_head(encoded, len(encoded.records), 3000) == full
    # the head: the first rows alone, which must end where they are said to
    buf = io.BytesIO(encoded.records)
    parsed = fastavro.parse_schema(json.loads(encoded.schema))
    for _ in range(2):
        fastavro.schemaless_reader(buf, parsed, None)
    assert decode_manifest_list_head(encoded, buf.tell(), 2) == full[:2]


def test_encoded_list_errors_name_the_file():
    from procedures.spec.manifest.manifest_list import decode_manifest_list_head, read_encoded_manifest_list

    mio, path = _written(2)
    encoded = read_encoded_manifest_list(mio, path)
    with pytest.raises(InvalidMetadataError, match=rf"^{path}: manifest list rows end at byte \d+, expected 7$"):
        decode_manifest_list_head(encoded, 7, 0)
    with pytest.raises(InvalidMetadataError, match=rf"^{path}: corrupt manifest list \((EOFError|IndexError|ValueError|"
                                                   r"UnicodeDecodeError|StopIteration|TypeError): "):
        decode_manifest_list_head(encoded, 3, 1)
    mio.files["s3://b/bad.avro"] = b"Obj\x01garbage"
    with pytest.raises(InvalidMetadataError, match=r"^s3://b/bad.avro: not a readable Avro file \(\w+Error: "):
        read_encoded_manifest_list(mio, "s3://b/bad.avro")


def test_kept_rows_compare_as_their_rows_and_name_the_list_in_errors():
    mio, path = _written(2)
    rows = read_manifest_list_where(mio, path, None)
    assert isinstance(rows, ManifestRows)
    assert rows == rows.take(range(len(rows))) and rows == list(rows) and rows[:5] == list(rows)[:5]
    assert rows[:5] != rows[1:6] and rows[:5] != list(rows)[1:6] and rows != 5
    bad = b"\xff\xff\xff\xff"  # a negative string length: no row
    corrupt = ManifestRows(path, rows.schema, [bad, rows.rows[1]], [0, 1])
    message = rf"^{path}: corrupt manifest list \(IndexError: "
    for read in (lambda: corrupt[0], lambda: list(corrupt), lambda: corrupt[0:1][0], lambda: corrupt.take([0])[0],
                 lambda: corrupt.with_content(ManifestContent.DATA)[0],
                 lambda: ManifestRows.decode_one(path, rows.schema, bad)):
        with pytest.raises(InvalidMetadataError, match=message):
            read()


@pytest.mark.parametrize("version", [1, 2])
def test_a_truncated_or_foreign_list_names_the_file(version):
    mio, path = _written(version)
    mio.files["s3://b/cut.avro"] = mio.files[path][:len(mio.files[path]) // 2]
    with pytest.raises(InvalidMetadataError, match=r"^s3://b/cut.avro: corrupt manifest list \(EOFError: "):
        read_manifest_list(mio, "s3://b/cut.avro")
    mio.files["s3://b/bad.avro"] = b"Obj\x01garbage"
    for read in (read_manifest_list, lambda io, p: read_manifest_list_where(io, p, None)):
        with pytest.raises(InvalidMetadataError, match=r"^s3://b/bad.avro: not a readable Avro file \(ValueError: "):
            read(mio, "s3://b/bad.avro")


def _old_writer_list(mio: MemIO, path: str, drop_partitions: bool, drop_nan: bool, drop_added: bool) -> None:
    """A v1 list as older writers wrote it: without the partitions field, or with field summaries
    that have no contains_nan (written through fastavro with that schema)."""
    import copy

    from procedures.spec.avro_schemas import manifest_list_avro_schema

    schema = copy.deepcopy(manifest_list_avro_schema(1))
    if drop_partitions:
        schema["fields"] = [f for f in schema["fields"] if f.get("field-id") != 507]
    if drop_added:
        schema["fields"] = [f for f in schema["fields"] if f.get("field-id") != 504]
    if drop_nan:
        parts = next(f for f in schema["fields"] if f.get("field-id") == 507)
        items = parts["type"][1]["items"]
        items["fields"] = [f for f in items["fields"] if f["name"] != "contains_nan"]
    records = []
    for row in _rows(1, 300):
        rec = {"manifest_path": row.manifest_path, "manifest_length": row.manifest_length,
               "partition_spec_id": row.partition_spec_id, "added_snapshot_id": row.added_snapshot_id,
               "existing_files_count": row.existing_files_count,
               "deleted_files_count": row.deleted_files_count}
        if not drop_added:
            rec["added_files_count"] = row.added_files_count
        if not drop_partitions:
            rec["partitions"] = None if row.partitions is None else [
                {"contains_null": s.contains_null, "contains_nan": s.contains_nan, "lower_bound": s.lower_bound,
                 "upper_bound": s.upper_bound} for s in row.partitions]
        records.append(rec)
    buf = io.BytesIO()
    fastavro.writer(buf, schema, records, metadata={"format-version": "1"})
    mio.files[path] = buf.getvalue()


@pytest.mark.parametrize("drop_partitions,drop_nan,drop_added", [(True, False, False), (False, True, False),
                                                                (False, False, True)],
                         ids=["no partitions field", "no contains_nan", "no added_files_count"])
def test_lists_of_older_writers_keep_the_rows_a_full_read_keeps(drop_partitions, drop_nan, drop_added):
    mio, path = MemIO(), "s3://b/old.avro"
    _old_writer_list(mio, path, drop_partitions, drop_nan, drop_added)
    full = read_manifest_list(mio, path)
    if drop_nan:
        assert all(s.contains_nan is None for m in full for s in (m.partitions or ()))
    for live_only in (False, True):
        kept = read_manifest_list_where(mio, path, _keep_low, live_only=live_only)
        assert list(kept) == [m for m in full if _keep_low(m.partition_spec_id, m.partitions)
                              and not (live_only and m.added_files_count == 0 and m.existing_files_count == 0)]
        assert len(kept) > 0


def _listed(version: int, **kw) -> ManifestFile:
    base = dict(sequence_number=-1, min_sequence_number=-1, added_snapshot_id=55, added_files_count=1,
                existing_files_count=2, deleted_files_count=0, added_rows_count=10, existing_rows_count=20,
                deleted_rows_count=0)
    base.update(kw)
    return ManifestFile(kw.pop("manifest_path", "s3://b/m.avro"), 100, 0, **{k: v for k, v in base.items()
                                                                           if k != "manifest_path"})


def test_list_headers_and_refusals_as_java_writes_them():
    from procedures.spec.manifest.avro_container import read_manifest_metadata

    mio = MemIO()
    expected = {1: {"snapshot-id": "55", "parent-snapshot-id": "54", "format-version": "1"},
                2: {"snapshot-id": "55", "parent-snapshot-id": "54", "sequence-number": "7", "format-version": "2"},
                3: {"snapshot-id": "55", "parent-snapshot-id": "54", "sequence-number": "7", "first-row-id": "100",
                    "format-version": "3"}}
    for version, meta in expected.items():
        write_manifest_list(mio, f"s3://b/l{version}.avro", version, 55, 54, 7, 100 if version >= 3 else None,
                            [_listed(version)])
        assert read_manifest_metadata(mio, f"s3://b/l{version}.avro") == meta
    # v1 rows may leave their counts unknown; v2 and v3 rows may not
    write_manifest_list(mio, "s3://b/v1-counts.avro", 1, 55, None, 7, None, [_listed(1, added_files_count=None)])
    for version in (2, 3):
        with pytest.raises(ValidationError, match=rf"^s3://b/x.avro: manifest s3://b/m.avro lacks added_files_count, "
                                                  rf"deleted_rows_count required in v{version}$"):
            write_manifest_list(mio, "s3://b/x.avro", version, 55, None, 7, 1,
                                [_listed(version, added_files_count=None, deleted_rows_count=None)])
    with pytest.raises(ValidationError, match="^s3://b/x.avro: a v3 manifest list needs the snapshot's first-row-id$"):
        write_manifest_list(mio, "s3://b/x.avro", 3, 55, None, 7, None, [_listed(3)])
    with pytest.raises(ValidationError, match="^s3://b/x.avro: delete manifest s3://b/m.avro cannot be listed in "
                                              "format version 1$"):
        write_manifest_list(mio, "s3://b/x.avro", 1, 55, None, 7, None, [_listed(1, content=ManifestContent.DELETES)])
    asked = []
    mio.write = lambda path, data, overwrite=False: asked.append(overwrite)
    write_manifest_list(mio, "s3://b/y.avro", 2, 55, 54, 7, None, [_listed(2)])
    assert asked == [False]  # never written over another file
    assert "s3://b/x.avro" not in mio.files


def test_v3_row_ids_go_to_data_manifests_only():
    mio = MemIO()
    rows = [_listed(3, manifest_path="s3://b/d.avro"),
            _listed(3, manifest_path="s3://b/del.avro", content=ManifestContent.DELETES, first_row_id=5),
            _listed(3, manifest_path="s3://b/kept.avro", first_row_id=7)]
    out, next_row_id = write_manifest_list(mio, "s3://b/l.avro", 3, 55, None, 9, 1000, rows)
    assert [m.first_row_id for m in out] == [1000, None, 7] and next_row_id == 1030
    assert [m.first_row_id for m in read_manifest_list(mio, "s3://b/l.avro")] == [1000, None, 7]


def test_the_list_codec_level_is_used():
    mio = MemIO()
    rows = _rows(2, 2000)
    sizes = []
    for level in (1, 19):
        write_manifest_list(mio, f"s3://b/{level}.avro", 2, 55, 54, 3000, None, rows, codec="zstd",
                            compression_level=level)
        sizes.append(len(mio.files[f"s3://b/{level}.avro"]))
    assert sizes[1] < sizes[0]
