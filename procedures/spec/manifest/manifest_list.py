"""Manifest lists (spec "Manifest Lists", "First Row ID Inheritance"; on-disk notes section 9):
writing a snapshot's list as Java 1.10 does (sequence numbers of the committing snapshot's
manifests filled in, v3 ``first_row_id`` assigned), and reading it -- in full, skimming each row's
bytes so only the rows a filter keeps are decoded (:class:`ManifestRows`), or still encoded
(:class:`EncodedManifestList`) when consecutive snapshots share most of their rows.
"""

from __future__ import annotations

import io as _io
import json
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import fastavro

from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec import avro_codecs
from procedures.spec.avro_scan import SkimField, compile_skimmer
from procedures.spec.avro_schemas import check_format_version, manifest_list_avro_schema
from procedures.spec.manifest.avro_container import (
    MetadataIO, names_by_id, open_avro, read_bytes, record_type, write_avro,
)
from procedures.spec.manifest.model import UNASSIGNED_SEQ, FieldSummary, ManifestContent, ManifestFile

__all__ = [
    "write_manifest_list", "read_manifest_list", "read_manifest_list_where", "ManifestRows", "EncodedManifestList",
    "read_encoded_manifest_list", "decode_manifest_list_head", "iter_manifest_list_rows",
]


def _manifest_file_record(m: ManifestFile, v: int) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "manifest_path": m.manifest_path,
        "manifest_length": m.manifest_length,
        "partition_spec_id": m.partition_spec_id,
        "added_snapshot_id": m.added_snapshot_id,
        "added_files_count": m.added_files_count,
        "existing_files_count": m.existing_files_count,
        "deleted_files_count": m.deleted_files_count,
        "added_rows_count": m.added_rows_count,
        "existing_rows_count": m.existing_rows_count,
        "deleted_rows_count": m.deleted_rows_count,
        "partitions": None if m.partitions is None else [
            {"contains_null": s.contains_null, "contains_nan": s.contains_nan,
             "lower_bound": s.lower_bound, "upper_bound": s.upper_bound}
            for s in m.partitions
        ],
        "key_metadata": m.key_metadata,
    }
    if v > 1:
        rec["content"] = int(m.content)
        rec["sequence_number"] = m.sequence_number
        rec["min_sequence_number"] = m.min_sequence_number
    if v >= 3:
        rec["first_row_id"] = m.first_row_id
    return rec


def write_manifest_list(
    io: MetadataIO,
    path: str,
    format_version: int,
    snapshot_id: int,
    parent_snapshot_id: int | None,
    sequence_number: int,
    first_row_id: int | None,
    manifests: Sequence[ManifestFile],
    *,
    codec: str = "deflate",
    compression_level: int | None = None,
) -> tuple[list[ManifestFile], int | None]:
    """Write a snapshot's manifest list and return ``(manifests as written, next row id)``.

    Manifests written by this snapshot with :data:`UNASSIGNED_SEQ` get ``sequence_number``; in v3
    every data manifest without a ``first_row_id`` gets the next row id, starting at
    ``first_row_id`` and advancing by its existing plus added rows.  The returned next row id is the
    table's new ``next-row-id`` (``first_row_id`` unchanged for v1/v2).
    """
    check_format_version(format_version)
    if format_version >= 3 and first_row_id is None:
        raise ValidationError(f"{path}: a v3 manifest list needs the snapshot's first-row-id")
    next_row_id = first_row_id
    out: list[ManifestFile] = []
    for m in manifests:
        if format_version == 1 and m.content != ManifestContent.DATA:
            raise ValidationError(f"{path}: delete manifest {m.manifest_path} cannot be listed in format version 1")
        changes: dict[str, Any] = {}
        for name in ("sequence_number", "min_sequence_number"):
            if getattr(m, name) == UNASSIGNED_SEQ:
                if m.added_snapshot_id != snapshot_id:
                    raise ValidationError(
                        f"{path}: manifest {m.manifest_path} of snapshot {m.added_snapshot_id} has no "
                        f"{name}; only manifests added by snapshot {snapshot_id} may inherit one"
                    )
                changes[name] = sequence_number
        if format_version > 1:
            missing = [n for n in ("added_files_count", "existing_files_count", "deleted_files_count",
                                   "added_rows_count", "existing_rows_count", "deleted_rows_count")
                       if getattr(m, n) is None]
            if missing:
                raise ValidationError(f"{path}: manifest {m.manifest_path} lacks {', '.join(missing)} required in v{format_version}")
        if format_version >= 3:
            if m.content == ManifestContent.DATA:
                if m.first_row_id is None:
                    changes["first_row_id"] = next_row_id
                    next_row_id += m.existing_rows_count + m.added_rows_count
            elif m.first_row_id is not None:
                changes["first_row_id"] = None
        out.append(replace(m, **changes) if changes else m)
    meta = {
        "snapshot-id": str(snapshot_id),
        "parent-snapshot-id": str(parent_snapshot_id) if parent_snapshot_id is not None else "null",
    }
    if format_version > 1:
        meta["sequence-number"] = str(sequence_number)
    if format_version >= 3:
        meta["first-row-id"] = str(first_row_id)
    meta["format-version"] = str(format_version)
    data = write_avro(
        manifest_list_avro_schema(format_version),
        (_manifest_file_record(m, format_version) for m in out),
        meta, codec, compression_level,
    )
    io.write(path, data, overwrite=False)
    return out, next_row_id


def _manifest_file_converter(schema: Mapping[str, Any]) -> Callable[[dict], ManifestFile]:
    """A function from a decoded manifest-list record (writer ``schema``) to a :class:`ManifestFile`."""
    names = names_by_id(schema)
    g = {fid: names.get(fid, "") for fid in range(500, 521)}
    summaries_name = g[507]

    def convert(r: dict) -> ManifestFile:
        parts = r.get(summaries_name)
        content = r.get(g[517])
        return ManifestFile(
            r[g[500]], r[g[501]], r[g[502]],
            ManifestContent.DATA if content is None else ManifestContent(content),
            r.get(g[515]) or 0,
            r.get(g[516]) or 0,
            r.get(g[503]),
            r.get(g[504]), r.get(g[505]), r.get(g[506]),
            r.get(g[512]), r.get(g[513]), r.get(g[514]),
            _field_summaries(parts),
            r.get(g[519]),
            r.get(g[520]),
        )

    return convert


def read_manifest_list(io: MetadataIO, path: str) -> list[ManifestFile]:
    """The rows of a manifest list; v1 rows read as data manifests with sequence numbers 0."""
    data = read_bytes(io, path)
    reader, schema = open_avro(data, path, strip=False)
    convert = _manifest_file_converter(schema)
    try:
        return [convert(r) for r in reader]
    except (KeyError, ValueError, EOFError) as e:
        raise InvalidMetadataError(f"corrupt manifest list ({type(e).__name__}: {e})", location=path) from e


#: what :func:`read_manifest_list_where` skims of a manifest-list row, in this order
_LIST_SKIM = (SkimField((502,), "long"), SkimField((504,), "long"), SkimField((505,), "long"),
              SkimField((507,), "span"), SkimField((517,), "long"), SkimField((506,), "long"))
#: positions in :data:`_LIST_SKIM` of the fields a list must have to be skimmed (v1 has no content)
_LIST_REQUIRED = frozenset(range(4))


@dataclass(frozen=True)
class _ListReader:
    """How :func:`read_manifest_list_where` reads rows of one manifest-list schema: the parsed
    schema and row converter of a full decode, the skimmer (None: read in full) and the parsed
    schema of the ``partitions`` field alone, which decodes a skimmed span."""

    parsed: Any
    convert: Callable[[dict], ManifestFile]
    skim: Callable[[bytes, int], tuple[int, tuple]] | None
    summaries: Callable[[bytes], tuple[FieldSummary, ...] | None] | None


#: schema text -> reader, for the few schemas manifest lists have
_LIST_READERS: dict[str, _ListReader] = {}


def _list_reader(schema_text: str) -> _ListReader:
    hit = _LIST_READERS.get(schema_text)
    if hit is None:
        schema = json.loads(schema_text)
        skimmer = compile_skimmer(schema, _LIST_SKIM)
        parts = next((f for f in schema["fields"] if f.get("field-id") == 507), None)
        # every kept field must be in the schema: a list without them is read in full instead
        usable = skimmer is not None and _LIST_REQUIRED <= skimmer.found and parts is not None
        summaries = _summaries_reader(parts["type"]) if usable else None
        usable = usable and summaries is not None
        hit = _ListReader(fastavro.parse_schema(schema), _manifest_file_converter(schema),
                          skimmer.skim if usable else None, summaries)
        if len(_LIST_READERS) >= 16:
            _LIST_READERS.clear()
        _LIST_READERS[schema_text] = hit
    return hit


class ManifestRows(Sequence[ManifestFile]):
    """Rows of a manifest list kept Avro-encoded, decoded into :class:`ManifestFile` one at a time
    when read (by index, slice or iteration).  What :func:`read_manifest_list_where` returns: a
    large table's thousands of kept rows cost their bytes (about a fifth of the objects), and they
    travel to Spark tasks as those bytes."""

    __slots__ = ("path", "schema", "rows", "contents", "listed")

    def __init__(self, path: str, schema: str, rows: Sequence[bytes], contents: Sequence[int],
                 listed: Sequence[int | None] | None = None) -> None:
        self.path = path  # the manifest list, for errors
        self.schema = schema  # its writer schema (JSON text)
        self.rows = tuple(rows)
        self.contents = tuple(contents)  # each row's ManifestContent value
        # each row's added + existing + deleted file counts (None: a count is missing); None: not read
        self.listed = None if listed is None else tuple(listed)
        if self.listed is not None and len(self.listed) != len(self.rows):
            raise ValueError(f"{len(self.listed)} entry counts for {len(self.rows)} manifest-list rows")

    def __reduce__(self) -> tuple:
        return ManifestRows, (self.path, self.schema, self.rows, self.contents, self.listed)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return ManifestRows(self.path, self.schema, self.rows[index], self.contents[index],
                                None if self.listed is None else self.listed[index])
        return self._decode(self.rows[index], _list_reader(self.schema), self.path)

    def listed_entries(self) -> int | None:
        """How many entries (added, existing and deleted files) the rows' manifests list, by the
        counts skimmed from the rows: no row is decoded.  None when a row lacks a count (optional
        in v1) or the counts were not skimmed."""
        if self.listed is None or None in self.listed:
            return None
        return sum(self.listed)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[ManifestFile]:
        reader = _list_reader(self.schema)
        for row in self.rows:
            yield self._decode(row, reader, self.path)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ManifestRows) and other.schema == self.schema:
            return other.rows == self.rows
        return isinstance(other, (Sequence, ManifestRows)) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ManifestRows({len(self.rows)} rows)"

    def with_content(self, content: ManifestContent) -> "ManifestRows":
        """The rows of one content (data or delete manifests), in order."""
        want = int(content)
        keep = [i for i, c in enumerate(self.contents) if c == want]
        if len(keep) == len(self.rows):
            return self
        return self.take(keep)

    def take(self, indices: Iterable[int]) -> "ManifestRows":
        """The rows at ``indices``, in that order, still encoded."""
        at = list(indices)
        listed = None if self.listed is None else [self.listed[i] for i in at]
        return ManifestRows(self.path, self.schema, [self.rows[i] for i in at], [self.contents[i] for i in at], listed)

    @staticmethod
    def decode_one(path: str, schema: str, row: bytes) -> ManifestFile:
        """One encoded row of the manifest list at ``path`` (writer ``schema``): a task that was handed
        a row alone decodes it with the list's path and schema, shipped once."""
        return ManifestRows._decode(row, _list_reader(schema), path)

    @staticmethod
    def _decode(row: bytes, reader: "_ListReader", path: str) -> ManifestFile:
        fo = _io.BytesIO(row)
        try:
            m = reader.convert(fastavro.schemaless_reader(fo, reader.parsed, None))
        except Exception as e:  # fastavro raises several unrelated types for corrupt bytes
            raise InvalidMetadataError(f"corrupt manifest list ({type(e).__name__}: {e})", location=path) from e
        if fo.tell() != len(row):  # the skim and the decode must agree on where the row ends
            raise InvalidMetadataError(f"a row read as {fo.tell()} bytes and as {len(row)}", location=path)
        return m


def _summaries_reader(parts_type: Any) -> Callable[[bytes], tuple[FieldSummary, ...] | None] | None:
    """A function from the encoded ``partitions`` value of a manifest-list row (a skimmed span) to
    its summaries, through a generated reader; None when the field has a shape it does not handle."""
    wrapper = {"type": "record", "name": "span", "fields": [{"name": "p", "field-id": 1, "type": parts_type}]}
    skimmer = compile_skimmer(wrapper, [SkimField((1,), "records")])
    inner = record_type(parts_type)
    inner = inner if isinstance(inner, dict) else {}
    if skimmer is None or inner.get("type") != "array" or not isinstance(inner.get("items"), dict):
        return None
    names = [f["name"] for f in inner["items"].get("fields", ())]
    if "contains_null" not in names:
        return None
    at = [names.index(n) if n in names else None for n in ("contains_null", "contains_nan", "lower_bound", "upper_bound")]
    skim = skimmer.skim

    def read(span: bytes) -> tuple[FieldSummary, ...] | None:
        end, (rows,) = skim(span, 0)
        if end != len(span):
            raise ValueError(f"partition summaries read as {end} bytes and as {len(span)}")
        if rows is None:
            return None
        return tuple(FieldSummary(*(None if i is None else r[i] for i in at)) for r in rows)

    return read


def _field_summaries(parts: list[dict] | None) -> tuple[FieldSummary, ...] | None:
    if parts is None:
        return None
    return tuple(FieldSummary(p["contains_null"], p.get("contains_nan"), p.get("lower_bound"), p.get("upper_bound"))
                 for p in parts)


def read_manifest_list_where(
    io: MetadataIO,
    path: str,
    keep: Callable[[int, tuple[FieldSummary, ...] | None], bool] | None,
    *,
    live_only: bool = False,
) -> ManifestRows | list[ManifestFile]:
    """The rows of a manifest list whose partition spec id and field summaries pass ``keep``, as
    :func:`read_manifest_list` gives them: a :class:`ManifestRows` that decodes each row when it is
    read (a list, for a schema the skimming reader does not handle).

    Each row's spec id, file counts and encoded ``partitions`` are read from its bytes first; a row
    is decoded only when it passes.  ``keep(spec_id, summaries)`` must depend on its arguments
    alone: it is called once per distinct (spec id, encoded summaries) pair, and the answer reused
    for every other row with the same pair (a table's manifests repeat a few partition ranges).
    ``live_only`` also drops the rows known to list no added or existing file (deleted entries only).
    ``keep=None`` keeps every row, and no summaries are decoded.
    """
    data = read_bytes(io, path)
    avro_codecs.install()
    try:
        blocks = fastavro.block_reader(_io.BytesIO(data))
        schema_text = blocks.metadata["avro.schema"]
        if isinstance(schema_text, bytes):
            schema_text = schema_text.decode()
        reader = _list_reader(schema_text)
    except Exception as e:  # fastavro raises several unrelated types for corrupt files
        raise InvalidMetadataError(f"not a readable Avro file ({type(e).__name__}: {e})", location=path) from e
    if reader.skim is None:
        rows = read_manifest_list(io, path)
        return [m for m in rows if not (live_only and _no_live_files(m))
                and (keep is None or keep(m.partition_spec_id, m.partitions))]
    answers: dict[tuple[int, bytes], bool] = {}
    rows: list[bytes] = []
    contents: list[int] = []
    listed: list[int | None] = []
    skim = reader.skim
    try:
        for block in blocks:
            buf = block.bytes_.getvalue()
            pos = 0
            for _ in range(block.num_records):
                start = pos
                pos, (spec_id, added, existing, parts, content, deleted) = skim(buf, pos)
                if live_only and added == 0 and existing == 0:
                    continue
                key = (spec_id, parts)
                answer = True if keep is None else answers.get(key)
                if answer is None:  # first row with these summaries: decode them to ask
                    summaries = reader.summaries(parts)
                    answer = answers[key] = bool(keep(spec_id, summaries))
                if answer:
                    rows.append(buf[start:pos])
                    contents.append(content or 0)
                    listed.append(None if added is None or existing is None or deleted is None
                                  else added + existing + deleted)
            if pos != len(buf):
                raise ValueError(f"a block holds {len(buf) - pos} bytes past its {block.num_records} rows")
    except (KeyError, IndexError, ValueError, EOFError, TypeError) as e:
        raise InvalidMetadataError(f"corrupt manifest list ({type(e).__name__}: {e})", location=path) from e
    return ManifestRows(path, schema_text, rows, contents, listed)


def _no_live_files(m: ManifestFile) -> bool:
    return not (m.has_added_files() or m.has_existing_files())


@dataclass(frozen=True)
class EncodedManifestList:
    """A manifest list's rows still Avro-encoded: the writer schema (the header's JSON text) and the
    decompressed blocks joined into one byte string of ``count`` records.

    Iceberg writers carry a parent's manifests after the new ones, unchanged, so a snapshot's
    encoded rows usually end with its parent's byte for byte; :func:`decode_manifest_list_head`
    then decodes only the new rows in front.
    """

    path: str
    schema: str
    records: bytes
    count: int


def read_encoded_manifest_list(io: MetadataIO, path: str) -> EncodedManifestList:
    """A manifest list's rows, decompressed but not decoded (see :class:`EncodedManifestList`)."""
    data = read_bytes(io, path)
    avro_codecs.install()
    try:
        blocks = fastavro.block_reader(_io.BytesIO(data))
        schema = blocks.metadata["avro.schema"]
        parts = []
        count = 0
        for block in blocks:
            parts.append(block.bytes_.getvalue())
            count += block.num_records
    except Exception as e:  # fastavro raises several unrelated types for corrupt files
        raise InvalidMetadataError(f"not a readable Avro file ({type(e).__name__}: {e})", location=path) from e
    return EncodedManifestList(path, schema if isinstance(schema, str) else schema.decode(), b"".join(parts), count)


def decode_manifest_list_head(encoded: EncodedManifestList, size: int, count: int) -> list[ManifestFile]:
    """The first ``count`` rows of ``encoded``, which must take exactly its first ``size`` bytes.

    Decoding is deterministic, so when the rest of the bytes equal another list's rows (same
    schema), the rows of ``encoded`` are these followed by that list's.  Raises
    :class:`InvalidMetadataError` when the rows do not end exactly at ``size``.
    """
    return list(iter_manifest_list_rows(encoded, size, count))


def iter_manifest_list_rows(encoded: EncodedManifestList, size: int, count: int) -> Iterator[ManifestFile]:
    """:func:`decode_manifest_list_head` one row at a time (a caller that keeps a few fields of each
    row holds one whole row at a time); the check that the rows end at ``size`` comes after the
    last row, so only a caller that fails on the error may use rows before it."""
    schema = json.loads(encoded.schema)
    parsed = fastavro.parse_schema(schema)
    convert = _manifest_file_converter(schema)
    buf = _io.BytesIO(encoded.records[:size])
    read = fastavro.schemaless_reader
    for _ in range(count):
        try:
            row = convert(read(buf, parsed, None))
        except Exception as e:  # fastavro raises several unrelated types for corrupt bytes
            raise InvalidMetadataError(f"corrupt manifest list ({type(e).__name__}: {e})",
                                       location=encoded.path) from e
        yield row
    if buf.tell() != size:
        raise InvalidMetadataError(f"manifest list rows end at byte {buf.tell()}, expected {size}",
                                   location=encoded.path)
