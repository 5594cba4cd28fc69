"""rewrite_manifests' byte-level copy of manifest entries: a manifest's live entries re-encoded as
EXISTING records for a :class:`~procedures.spec.manifest.writer.ManifestWriter` without decoding
their ``data_file`` structs (:func:`existing_records`).  A large table's rewrite copies millions of
entries; their metrics are copied as bytes instead of built into objects and written back.

An engine optimisation of :mod:`procedures.core.manifest_rewrite.clustering` (its only user): the format
itself is read and written by :mod:`procedures.spec.manifest`.
"""

from __future__ import annotations

import io as _io
import operator
import struct
from typing import Any, Callable, Iterator, Mapping

import fastavro

from procedures.errors import InvalidMetadataError
from procedures.spec.avro_scan import SkimField, compile_skimmer, named_types
from procedures.spec.avro_schemas import decode_long, encode_long, strip_logical_types
from procedures.spec.manifest.avro_container import MetadataIO, read_stripped_manifest, resolved_type
from procedures.spec.manifest.model import (
    DEFAULT_BLOCK_SIZE, FORMATS_BY_NAME, FileFormat, ManifestEntryStatus, ManifestFile,
)
from procedures.spec.manifest.reader import partition_tuple_getter

__all__ = ["existing_records"]


#: schema attributes that do not change how a value is encoded
_SHAPE_IGNORED = frozenset(("doc", "default", "name", "namespace", "aliases"))
#: the data_file fields a copy decodes (the rest of the struct is copied as bytes)
_COPY_FIELDS = ("content", "file_format", "partition", "record_count")


def _shape(node: Any, named: Mapping[str, Any]) -> Any:
    """What decides an Avro schema's encoding, comparable with ``==``: field names, ids and types
    in order, logical types and their parameters; not docs, defaults or record names."""
    if isinstance(node, str):
        return _shape(named[node], named) if node in named else node
    if isinstance(node, list):
        return tuple(_shape(n, named) for n in node)
    if not isinstance(node, dict):
        return node
    if node.get("type") == "record":
        return ("record", tuple((f["name"], f.get("field-id"), _shape(f["type"], named)) for f in node["fields"]))
    return tuple(sorted(((k, _shape(v, named)) for k, v in node.items() if k not in _SHAPE_IGNORED),
                        key=operator.itemgetter(0)))


def _optional_long(value: int | None) -> bytes:
    return b"\x00" if value is None else b"\x02" + encode_long(value)


def existing_records(
    io: MetadataIO,
    manifest: ManifestFile,
    avro_schema: Mapping[str, Any],
    format_version: int,
    *,
    specs: Mapping[int, Any] | None = None,
) -> Iterator[tuple[tuple, int, int | None, bytes]] | None:
    """The live entries of ``manifest`` as EXISTING records encoded in ``avro_schema`` (a
    :class:`~procedures.spec.manifest.writer.ManifestWriter`'s
    :attr:`~procedures.spec.manifest.writer.ManifestWriter.avro_schema`), without decoding their metrics.

    Rewriting an entry as EXISTING changes only the entry's own fields: status 0 and the snapshot
    id and sequence numbers made explicit by inheritance (as
    :func:`~procedures.spec.manifest.reader.read_manifest` fills them in).
    The ``data_file`` struct is copied byte for byte (the file format upper-cased, as the writer
    writes it), so its metrics are never decoded nor re-encoded.  Yields ``(partition, record_count,
    data sequence number, record)`` in file order, for
    :meth:`~procedures.spec.manifest.writer.ManifestWriter.existing_encoded`.

    In v1 the deprecated ``block_size_in_bytes`` is written as the writer writes it
    (:data:`~procedures.spec.manifest.model.DEFAULT_BLOCK_SIZE`), the only ``data_file`` field
    re-encoded besides the format.

    Returns None -- read with :func:`~procedures.spec.manifest.reader.read_manifest` instead --
    unless ``format_version`` is 1 or 2 and the manifest's schema encodes exactly like
    ``avro_schema`` (v3 makes inherited first row ids explicit inside ``data_file``).
    """
    if format_version not in (1, 2):
        return None
    path = manifest.manifest_path
    _, stripped, schema = read_stripped_manifest(io, path)
    plan = _copy_plan(schema, avro_schema)
    if plan is None:
        return None
    if format_version == 1:
        if plan.v1_split is None:
            return None
        return _existing_records_v1(stripped, plan, manifest, specs)
    return _existing_records(stripped, plan, manifest, specs)


class _CopyPlan:
    """What copying entries of one source schema into one target schema needs, built once per pair."""

    __slots__ = ("source", "target", "df_schema", "named", "writer", "projection", "part_getters", "v1_split",
                 "skims")

    def __init__(self, source: dict[str, Any], target: Mapping[str, Any]) -> None:
        self.source, self.target = source, target
        self.named = named_types(source)
        self.df_schema = resolved_type(next(f for f in source["fields"] if f["name"] == "data_file")["type"], self.named)
        stripped = strip_logical_types(source)
        self.writer = fastavro.parse_schema(stripped)
        self.projection = fastavro.parse_schema(_copy_projection(stripped))
        self.part_getters: dict[int, Callable[[dict], tuple]] = {}
        self.v1_split = _v1_split(stripped)
        self.skims = _copy_skimmer(stripped)

    def part_get(self, spec: Any | None) -> Callable[[dict], tuple]:
        key = id(spec)
        get = self.part_getters.get(key)
        if get is None:
            get = self.part_getters[key] = partition_tuple_getter(self.df_schema, spec, self.named)
        return get


#: (source schema, target schema) -> plan, or None when they encode differently; keyed by identity
#: (the header cache of ``without_logical_types`` hands out one object per schema text)
_COPY_PLANS: dict[tuple[int, int], tuple[Any, Any, _CopyPlan | None]] = {}


def _copy_plan(source: dict[str, Any], target: Mapping[str, Any]) -> _CopyPlan | None:
    key = (id(source), id(target))
    hit = _COPY_PLANS.get(key)
    if hit is not None and hit[0] is source and hit[1] is target:
        return hit[2]
    same = _shape(source, named_types(source)) == _shape(target, named_types(target))
    plan = _CopyPlan(source, target) if same else None
    if len(_COPY_PLANS) >= 64:
        _COPY_PLANS.clear()
    _COPY_PLANS[key] = (source, target, plan)
    return plan


#: what copying a v2 entry reads of it: status, the three inherited values, and data_file's
#: file_format, partition and record_count
_COPY_SKIM = (SkimField((0,), "long"), SkimField((1,), "long"), SkimField((3,), "long"), SkimField((4,), "long"),
              SkimField((2, 101), "string"), SkimField((2, 102), "record"), SkimField((2, 103), "long"))


def _copy_skimmer(stripped: dict[str, Any]) -> Callable[[bytes, int], tuple[int, tuple]] | None:
    """A skimming reader of what :func:`existing_records` needs of a v2 entry written with
    ``stripped``, or None when the generator does not handle the schema, misses a field, or the
    entry is not laid out as v2's (status, snapshot_id, sequence_number, file_sequence_number,
    data_file: the data_file bytes are the record's tail)."""
    if [f.get("field-id") for f in stripped["fields"]] != [0, 1, 3, 4, 2]:
        return None
    skimmer = compile_skimmer(stripped, _COPY_SKIM)
    if skimmer is None or len(skimmer.found) != len(_COPY_SKIM):
        return None
    return skimmer.skim


def _copy_projection(stripped: dict[str, Any]) -> dict[str, Any]:
    """The stripped entry schema reduced to the fields :func:`existing_records` decodes."""
    fields = []
    for f in stripped["fields"]:
        if f["name"] == "data_file":
            df = dict(f["type"], fields=[g for g in f["type"]["fields"] if g["name"] in _COPY_FIELDS])
            f = dict(f, type=df)
        fields.append(f)
    return dict(stripped, fields=fields)


def _entry_buffers(stripped_data: bytes) -> Iterator[tuple[bytes, _io.BytesIO]]:
    """``(block bytes, stream at the next entry)`` once per entry of an Avro file: the caller reads
    the entry from the stream and slices the bytes it read."""
    for block in fastavro.block_reader(_io.BytesIO(stripped_data)):
        buf = block.bytes_.getvalue()
        fo = _io.BytesIO(buf)
        for _ in range(block.num_records):
            yield buf, fo


def _format_recoded(buf: bytes, start: int, path_at: int, end: int, fmt: str) -> bytes:
    """``buf[start:end]`` (``data_file`` fields) with the ``file_format`` after the ``file_path``
    at ``path_at`` re-encoded upper-cased, as the writer writes it."""
    n, p = decode_long(buf, path_at)
    n_fmt, q = decode_long(buf, p + n)
    canonical = FileFormat(fmt).value.encode()
    return buf[start:p + n] + encode_long(len(canonical)) + canonical + buf[q + n_fmt:end]


def _v1_split(stripped: dict[str, Any]) -> tuple[Any, Any, Any] | None:
    """For a v1 entry schema: the entry read up to ``file_size_in_bytes`` (its fields flattened:
    Avro encodes a nested record as its fields in order), then the ``data_file`` fields after
    ``block_size_in_bytes`` with a reader that keeps none of them; None when the schema has no
    block size or cannot be cut there (the entry is then decoded in full)."""
    top = stripped["fields"]
    if [f["name"] for f in top] != ["status", "snapshot_id", "data_file"]:
        return None
    inner = top[2]["type"]
    names = [g["name"] for g in inner["fields"]] if isinstance(inner, dict) else []
    if "block_size_in_bytes" not in names:
        return None
    cut = names.index("block_size_in_bytes")
    if inner["fields"][cut]["type"] != "long":
        return None
    head = [g for g in inner["fields"][:cut] if g["name"] in _COPY_FIELDS or g["name"] == "file_path"]
    prefix = {"type": "record", "name": "v1_entry_head", "fields": top[:2] + inner["fields"][:cut]}
    wanted = {"type": "record", "name": "v1_entry_head", "fields": top[:2] + head}
    rest = {"type": "record", "name": "v1_entry_tail", "fields": inner["fields"][cut + 1:]}
    try:
        return (fastavro.parse_schema(prefix), fastavro.parse_schema(wanted), fastavro.parse_schema(rest),
                fastavro.parse_schema({"type": "record", "name": "v1_entry_tail", "fields": []}))
    except Exception:  # fastavro raises several types for a schema it cannot cut (named types split)
        return None


def _existing_records_v1(stripped_data: bytes, plan: _CopyPlan, manifest: ManifestFile,
                         specs: Mapping[int, Any] | None) -> Iterator[tuple[tuple, int, int | None, bytes]]:
    path = manifest.manifest_path
    part_get = plan.part_get(specs.get(manifest.partition_spec_id) if specs else None)
    prefix, wanted, rest, nothing = plan.v1_split
    m_snap, m_seq = manifest.added_snapshot_id, manifest.sequence_number
    formats, read, decode = FORMATS_BY_NAME, fastavro.schemaless_reader, decode_long
    block_size = encode_long(DEFAULT_BLOCK_SIZE)
    try:
        for buf, fo in _entry_buffers(stripped_data):
            start = fo.tell()
            r = read(fo, prefix, wanted)
            cut = fo.tell()
            tail = decode(buf, cut)[1]  # past block_size_in_bytes
            fo.seek(tail)
            read(fo, rest, nothing)
            end = fo.tell()
            status = r["status"]
            if status == ManifestEntryStatus.DELETED:
                continue
            pos = decode(buf, start)[1]
            branch, pos = decode(buf, pos)  # snapshot_id: null or long
            if branch:
                pos = decode(buf, pos)[1]
            snap = r["snapshot_id"]
            if snap is None:
                snap = m_snap
            head = b"\x00" + _optional_long(snap)
            fmt = r["file_format"]
            body = buf[pos:cut] if fmt in formats else _format_recoded(buf, pos, pos, cut, fmt)
            yield part_get(r["partition"]), r["record_count"], m_seq, head + body + block_size + buf[tail:end]
    except (KeyError, IndexError, ValueError, EOFError, TypeError) as e:
        raise InvalidMetadataError(f"corrupt manifest ({type(e).__name__}: {e})", location=path) from e


def _existing_records(stripped_data: bytes, plan: _CopyPlan, manifest: ManifestFile,
                      specs: Mapping[int, Any] | None) -> Iterator[tuple[tuple, int, int | None, bytes]]:
    path = manifest.manifest_path
    part_get = plan.part_get(specs.get(manifest.partition_spec_id) if specs else None)
    m_snap, m_seq = manifest.added_snapshot_id, manifest.sequence_number
    formats, decode, deleted = FORMATS_BY_NAME, decode_long, int(ManifestEntryStatus.DELETED)
    added = int(ManifestEntryStatus.ADDED)
    heads: dict[tuple, bytes] = {}  # a manifest's entries mostly share their inherited values
    entries = (_copy_fields_skimmed(stripped_data, plan.skims) if plan.skims is not None
               else _copy_fields_read(stripped_data, plan))
    try:
        for buf, start, end, (status, snap, seq, fseq, fmt, partition, record_count) in entries:
            if status == deleted:
                continue
            pos = decode(buf, start)[1]
            for _ in range(3):  # snapshot_id, sequence_number, file_sequence_number: null or long
                branch, pos = decode(buf, pos)
                if branch:
                    pos = decode(buf, pos)[1]
            if snap is None:
                snap = m_snap
            if status == added or m_seq == 0:
                if seq is None:
                    seq = m_seq
                if fseq is None:
                    fseq = m_seq
            key = (snap, seq, fseq)
            head = heads.get(key)
            if head is None:
                head = heads[key] = b"\x00" + _optional_long(snap) + _optional_long(seq) + _optional_long(fseq)
            # content comes before file_path
            body = buf[pos:end] if fmt in formats else _format_recoded(buf, pos, decode(buf, pos)[1], end, fmt)
            yield part_get(partition), record_count, seq, head + body
    except (KeyError, IndexError, ValueError, EOFError, TypeError, struct.error) as e:
        raise InvalidMetadataError(f"corrupt manifest ({type(e).__name__}: {e})", location=path) from e


#: what :func:`_existing_records` reads of an entry: ``(block bytes, entry start, entry end, (status,
#: snapshot_id, sequence_number, file_sequence_number, file_format, partition, record_count))``
_CopyFields = tuple[bytes, int, int, tuple]


def _copy_fields_skimmed(stripped_data: bytes, skim: Callable[[bytes, int], tuple[int, tuple]]) -> Iterator[_CopyFields]:
    """The fields through the generated reader of :func:`_copy_skimmer` (about half of fastavro's
    time per entry: the metrics it steps over are never built)."""
    for block in fastavro.block_reader(_io.BytesIO(stripped_data)):
        buf = block.bytes_.getvalue()
        pos = 0
        for _ in range(block.num_records):
            start = pos
            pos, values = skim(buf, start)
            yield buf, start, pos, values
        if pos != len(buf):  # the generated skips trust lengths: a block must end where its entries do
            raise ValueError(f"a block of {len(buf)} bytes held {pos} bytes of entries")


def _copy_fields_read(stripped_data: bytes, plan: _CopyPlan) -> Iterator[_CopyFields]:
    """The fields through fastavro's projection (schemas the generator refuses)."""
    writer, projection, read = plan.writer, plan.projection, fastavro.schemaless_reader
    for buf, fo in _entry_buffers(stripped_data):
        start = fo.tell()
        r = read(fo, writer, projection)
        d = r["data_file"]
        yield buf, start, fo.tell(), (r["status"], r["snapshot_id"], r["sequence_number"], r["file_sequence_number"],
                                      d["file_format"], d["partition"], d["record_count"])
