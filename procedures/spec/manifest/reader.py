"""Reading manifests (spec "Manifests", "Sequence Number Inheritance", "First Row ID Inheritance"):
every entry comes back as a :class:`~procedures.spec.manifest.model.ManifestEntry` carrying its
snapshot id, data and file sequence numbers and (v3) first row id, inheritance applied.  Columns are
matched by field id, so files written with older field names read fine.

:func:`read_manifest_where` skims each entry's metrics from its bytes (the generated readers of
:mod:`procedures.spec.avro_scan`) and decodes only the entries a filter keeps.
"""

from __future__ import annotations

import io as _io
import operator
from decimal import Decimal
from typing import Any, Callable, Iterable, Iterator, Mapping
from uuid import UUID

import fastavro

from procedures.errors import InvalidMetadataError
from procedures.spec import avro_codecs
from procedures.spec.avro_scan import SkimField, compile_skimmer, named_types
from procedures.spec.avro_schemas import strip_logical_types
from procedures.spec.manifest.avro_container import (
    MetadataIO, names_by_id, open_avro, read_bytes, read_stripped_manifest, record_type, resolved_type,
)
from procedures.spec.manifest.model import (
    ENTRY_STATUSES, FILE_CONTENTS, FORMATS_BY_NAME, DataFile, FileContent, FileFormat, ManifestContent,
    ManifestEntry, ManifestEntryStatus, ManifestFile,
)

__all__ = ["read_manifest", "read_manifest_where", "EntryMetrics", "partition_tuple_getter"]


def _from_avro_converter(avro_type: Any) -> Callable[[Any], Any] | None:
    t = record_type(avro_type)
    if not isinstance(t, dict):
        return None
    logical = t.get("logicalType")
    if logical == "decimal":
        scale = int(t.get("scale", 0))
        return lambda b: None if b is None else Decimal(int.from_bytes(b, "big", signed=True)).scaleb(-scale)
    if logical == "uuid":
        if t.get("type") == "string":
            return lambda s: None if s is None else UUID(s)
        return lambda b: None if b is None else UUID(bytes=bytes(b))
    return None


def partition_tuple_getter(data_file_schema: Mapping[str, Any], spec: Any | None,
                           named: Mapping[str, Any]) -> Callable[[dict], tuple]:
    """A function from the Avro ``partition`` record of ``data_file_schema`` (its named types in
    ``named``) to our partition tuple, in the order of ``spec`` (the file's own order without it)."""
    pfield = next(f for f in data_file_schema["fields"] if f.get("field-id") == 102 or f["name"] == "partition")
    fields = record_type(pfield["type"]).get("fields", [])
    by_id = {f["field-id"]: f for f in fields if "field-id" in f}
    if spec is not None and len(by_id) == len(fields):
        chosen = [by_id.get(pf.field_id) for pf in spec.fields]
    else:
        chosen = list(fields)
    names = [f["name"] if f is not None else "\0missing" for f in chosen]
    convs = [_from_avro_converter(resolved_type(f["type"], named)) if f is not None else None for f in chosen]
    if any(f is None for f in chosen):
        get: Callable[[dict], tuple] = lambda p: tuple(p.get(n) for n in names)  # noqa: E731
    elif not names:
        get = lambda p: ()  # noqa: E731
    elif len(names) == 1:
        n0 = names[0]
        get = lambda p: (p[n0],)  # noqa: E731
    else:
        get = operator.itemgetter(*names)
    if any(convs):
        raw = get
        get = lambda p: tuple(v if c is None else c(v) for c, v in zip(convs, raw(p)))  # noqa: E731
    return get


def read_manifest(
    io: MetadataIO,
    manifest: ManifestFile,
    *,
    specs: Mapping[int, Any] | None = None,
    skip_deleted: bool = False,
) -> Iterator[ManifestEntry]:
    """Stream a manifest's entries with inheritance applied.

    * ``snapshot_id`` null -> the manifest's ``added_snapshot_id``;
    * null data/file sequence numbers of ADDED entries (or of any entry of a v1 manifest, whose
      sequence number is 0) -> the manifest's ``sequence_number``;
    * v3: data files without ``first_row_id`` get ids from the manifest's ``first_row_id`` in file
      order, skipping DELETED entries;
    * ``spec_id`` of every file -> the manifest's ``partition_spec_id``.

    ``specs`` (spec id -> PartitionSpec) orders partition tuples by the table's spec; without it the
    file's own partition field order is used.  ``skip_deleted`` drops DELETED entries.
    """
    path = manifest.manifest_path
    reader, schema = open_avro(read_bytes(io, path), path, strip=True)
    yield from _entries(reader, schema, manifest, specs, skip_deleted)


#: the metrics maps of a data_file struct by field id, in :class:`EntryMetrics` order
_METRIC_MAP_IDS = (109, 110, 137, 125, 128)


class EntryMetrics:
    """What a metrics filter reads of a manifest entry, taken from its bytes before any
    :class:`DataFile` is built: the record count and the metrics maps (``value_counts``,
    ``null_value_counts``, ``nan_value_counts``, ``lower_bounds``, ``upper_bounds``) holding only the
    field ids asked for, so a test that looks only at those ids answers as on the file itself.

    One instance is refilled for each entry of a manifest (building one per entry would cost
    about as much as the test): keep nothing from it past the call.
    """

    __slots__ = ("record_count", "value_counts", "null_value_counts", "nan_value_counts", "lower_bounds",
                 "upper_bounds")

    def __init__(self) -> None:
        self.record_count = 0
        self.value_counts = self.null_value_counts = self.nan_value_counts = None
        self.lower_bounds = self.upper_bounds = None


def read_manifest_where(
    io: MetadataIO,
    manifest: ManifestFile,
    field_ids: Iterable[int],
    keep: Callable[[Any], bool] | None,
    *,
    specs: Mapping[int, Any] | None = None,
) -> Iterator[ManifestEntry]:
    """The live entries of a manifest whose metrics pass ``keep``, as :func:`read_manifest` with
    ``skip_deleted`` gives them, decoding in full only those.

    ``keep`` gets an :class:`EntryMetrics` whose maps hold the ``field_ids`` only, or -- for a
    manifest schema the skimming reader does not handle -- the entry's :class:`DataFile`; it must
    answer from those fields and ids alone (an ``InclusiveMetricsEvaluator``'s ``eval`` over the
    ids its filter references does).  ``keep=None`` keeps every live entry, decoded by the same
    generated reader without a first pass over the metrics (faster than fastavro's full decode).
    """
    path = manifest.manifest_path
    data, stripped, schema = read_stripped_manifest(io, path)
    plan = _skim_plan(schema, frozenset(field_ids))
    if plan is None or (keep is None and plan.decode is None):
        reader, _ = open_avro(data, path, strip=True)
        yield from (e for e in _entries(reader, schema, manifest, specs, True) if keep is None or keep(e.data_file))
        return
    avro_codecs.install()
    numbered = manifest.first_row_id is not None and manifest.content == ManifestContent.DATA
    yield from _entries(_kept_records(stripped, plan, keep, path, numbered), schema, manifest, specs, True)


class _SkimPlan:
    """The skimming reader of one manifest schema for one set of field ids, and what decodes the
    entries it keeps: a generated decoder of the fields :func:`_entries` reads (``decode``, with
    ``build`` making fastavro's record shape of its values) or, for a schema it does not handle,
    fastavro with the parsed schema (``writer``)."""

    __slots__ = ("skim", "decode", "build", "writer")

    def __init__(self, skim: Callable[[bytes, int], tuple[int, tuple]],
                 decode: Callable[[bytes, int], tuple[int, tuple]] | None,
                 build: Callable[[tuple], dict] | None, writer: Any) -> None:
        self.skim, self.decode, self.build, self.writer = skim, decode, build, writer


#: what the decoder of kept entries reads of a data_file struct, by field id (the fields
#: :func:`_entries` uses; the metrics maps whole)
_DECODED_FIELDS = {
    134: "long", 100: "string", 101: "string", 102: "record", 103: "long", 104: "long", 108: "map", 109: "map",
    110: "map", 137: "map", 125: "map", 128: "map", 131: "bytes", 132: "longs", 135: "longs", 140: "long",
    142: "long", 143: "string", 144: "long", 145: "long",
}


def _entry_decoder(stripped: dict[str, Any]) -> tuple[Callable[[bytes, int], tuple[int, tuple]],
                                                      Callable[[tuple], dict]] | None:
    """A decoder of whole entries of ``stripped`` (a manifest schema without logical types) and the
    function turning its values into the record fastavro would give (the fields :func:`_entries`
    reads), or None when the generator does not handle the schema."""
    df_field = next((f for f in stripped["fields"] if f.get("field-id") == 2), None)
    if df_field is None:
        return None
    top_names = names_by_id(stripped)
    df_names = names_by_id(record_type(df_field["type"]))
    fields = [SkimField((fid,), "long") for fid in (0, 1, 3, 4)]
    fields += [SkimField((2, fid), kind, None) for fid, kind in _DECODED_FIELDS.items()]
    decoder = compile_skimmer(stripped, fields)
    if decoder is None:
        return None
    names = [top_names.get(fid) for fid in (0, 1, 3, 4)] + [df_names.get(fid) for fid in _DECODED_FIELDS]
    top = [(i, names[i]) for i in range(4) if i in decoder.found]
    inner = [(i, names[i]) for i in range(4, len(fields)) if i in decoder.found]
    df_name = df_field["name"]

    def build(values: tuple) -> dict:
        record = {name: values[i] for i, name in top}
        record[df_name] = {name: values[i] for i, name in inner}
        return record

    return decoder.skim, build


#: (schema, field ids) -> plan or None; keyed by the schema's identity (the header cache of
#: ``without_logical_types`` hands out one object per schema text)
_SKIM_PLANS: dict[tuple[int, frozenset[int]], tuple[Any, _SkimPlan | None]] = {}


def _skim_plan(schema: dict[str, Any], field_ids: frozenset[int]) -> _SkimPlan | None:
    key = (id(schema), field_ids)
    hit = _SKIM_PLANS.get(key)
    if hit is not None and hit[0] is schema:
        return hit[1]
    wanted = [SkimField((0,), "long"), SkimField((2, 103), "long"), SkimField((2, 142), "long")]
    wanted += [SkimField((2, fid), "map", field_ids) for fid in _METRIC_MAP_IDS]
    stripped = strip_logical_types(schema)
    skimmer = compile_skimmer(stripped, wanted)
    plan = None
    if skimmer is not None:
        decoder = _entry_decoder(stripped)
        plan = _SkimPlan(skimmer.skim, *(decoder or (None, None)), fastavro.parse_schema(stripped))
    if len(_SKIM_PLANS) >= 64:
        _SKIM_PLANS.clear()
    _SKIM_PLANS[key] = (schema, plan)
    return plan


def _kept_records(stripped_data: bytes, plan: _SkimPlan, keep: Callable[[Any], bool] | None, path: str,
                  numbered: bool) -> Iterator[dict | tuple[int, int | None]]:
    """The decoded records of the live entries ``keep`` accepts and, when the manifest gives its
    files row ids (``numbered``), each other live entry's ``(record_count, first_row_id)``: what
    :func:`_entries` needs to number the rows after it."""
    skim, decode, build, writer, read = plan.skim, plan.decode, plan.build, plan.writer, fastavro.schemaless_reader
    metrics = EntryMetrics()
    deleted = int(ManifestEntryStatus.DELETED)
    try:
        for block in fastavro.block_reader(_io.BytesIO(stripped_data)):
            buf = block.bytes_.getvalue()
            fo = _io.BytesIO(buf)
            pos = 0
            if keep is None:  # every live entry, decoded in one pass (status is the first value)
                for _ in range(block.num_records):
                    pos, values = decode(buf, pos)
                    if values[0] != deleted:
                        yield build(values)
                if pos != len(buf):
                    raise ValueError(f"a block holds {len(buf) - pos} bytes past its {block.num_records} records")
                continue
            for _ in range(block.num_records):
                start = pos
                pos, (status, rc, first_row_id, metrics.value_counts, metrics.null_value_counts,
                      metrics.nan_value_counts, metrics.lower_bounds, metrics.upper_bounds) = skim(buf, pos)
                if status == deleted:
                    continue
                metrics.record_count = rc
                if keep(metrics):
                    if decode is None:
                        fo.seek(start)
                        yield read(fo, writer, None)
                        continue
                    end, values = decode(buf, start)
                    if end != pos:
                        raise ValueError(f"an entry read as {end - start} bytes and as {pos - start}")
                    yield build(values)
                elif numbered:
                    yield rc, first_row_id
            if pos != len(buf):
                raise ValueError(f"a block holds {len(buf) - pos} bytes past its {block.num_records} records")
    except (KeyError, IndexError, ValueError, EOFError, TypeError) as e:
        raise InvalidMetadataError(f"corrupt manifest ({type(e).__name__}: {e})", location=path) from e


#: (schema, spec) -> the field names and partition reader of :func:`_entries`; keyed by identity (one
#: schema object per schema text, see ``without_logical_types``), as a table's manifests share a few
_LAYOUTS: dict[tuple[int, int], tuple[Any, Any, tuple[str, ...], Callable[[dict], tuple]]] = {}


def _entry_layout(schema: dict[str, Any], spec: Any | None, path: str) -> tuple[tuple[str, ...], Callable[[dict], tuple]]:
    key = (id(schema), id(spec))
    hit = _LAYOUTS.get(key)
    if hit is not None and hit[0] is schema and hit[1] is spec:
        return hit[2], hit[3]
    top = names_by_id(schema)
    df_field = next((f for f in schema["fields"] if f.get("field-id") == 2), None)
    if df_field is None:
        raise InvalidMetadataError("manifest schema has no data_file field (id 2)", location=path)
    df_schema = record_type(df_field["type"])
    dn = names_by_id(df_schema)
    part_get = partition_tuple_getter(df_schema, spec, named_types(schema))
    names = tuple(top.get(i, "") for i in (0, 1, 3, 4, 2)) + tuple(
        dn.get(i, "\0") for i in (134, 100, 101, 102, 103, 104, 108, 109, 110, 137, 125, 128, 131, 132, 135, 140,
                                  142, 143, 144, 145))
    if len(_LAYOUTS) >= 64:
        _LAYOUTS.clear()
    _LAYOUTS[key] = (schema, spec, names, part_get)
    return names, part_get


def _entries(records: Iterable[dict | tuple[int, int | None]], schema: dict[str, Any], manifest: ManifestFile,
             specs: Mapping[int, Any] | None, skip_deleted: bool) -> Iterator[ManifestEntry]:
    """Manifest entries, inheritance applied, from decoded records of ``schema`` (the file's own,
    logical types stripped from the records); a ``(record_count, first_row_id)`` tuple stands for a
    live entry left out that still takes its row ids."""
    path = manifest.manifest_path
    spec = specs.get(manifest.partition_spec_id) if specs else None
    names, part_get = _entry_layout(schema, spec, path)
    (n_status, n_snap, n_seq, n_fseq, n_df, n_content, n_path, n_fmt, n_part, n_rc, n_size, n_cs, n_vc, n_nc, n_nan,
     n_lb, n_ub, n_km, n_so, n_eq, n_sort, n_frid, n_ref, n_coff, n_csize) = names
    m_snap = manifest.added_snapshot_id
    m_seq = manifest.sequence_number
    spec_id = manifest.partition_spec_id
    next_row_id = manifest.first_row_id if manifest.content == ManifestContent.DATA else None
    ADDED, DELETED = ManifestEntryStatus.ADDED, ManifestEntryStatus.DELETED
    statuses, contents, formats = ENTRY_STATUSES, FILE_CONTENTS, FORMATS_BY_NAME

    def kv(lst: list | dict | None) -> dict | None:
        # fastavro gives a list of key/value records; the entry decoder the dict itself
        if lst is None or lst.__class__ is dict:
            return lst
        return {d["key"]: d["value"] for d in lst}

    try:
        for r in records:
            if r.__class__ is tuple:  # a live entry left out: it still numbers its rows
                if next_row_id is not None and r[1] is None:
                    next_row_id += r[0]
                continue
            status = statuses[r[n_status]]
            if skip_deleted and status is DELETED:
                continue
            d = r[n_df]
            snap = r.get(n_snap)
            if snap is None:
                snap = m_snap
            seq = r.get(n_seq)
            fseq = r.get(n_fseq)
            if status is ADDED or m_seq == 0:
                if seq is None:
                    seq = m_seq
                if fseq is None:
                    fseq = m_seq
            content = d.get(n_content)
            fmt = d[n_fmt]
            first_row_id = d.get(n_frid)
            if next_row_id is not None and status is not DELETED and first_row_id is None:
                first_row_id = next_row_id
                next_row_id += d[n_rc]
            so = d.get(n_so)
            eq = d.get(n_eq)
            df = DataFile(
                d[n_path],
                formats.get(fmt) or FileFormat(fmt),
                part_get(d[n_part]),
                d[n_rc],
                d[n_size],
                contents[content] if content is not None else FileContent.DATA,
                kv(d.get(n_cs)),
                kv(d.get(n_vc)),
                kv(d.get(n_nc)),
                kv(d.get(n_nan)),
                kv(d.get(n_lb)),
                kv(d.get(n_ub)),
                d.get(n_km),
                None if so is None else tuple(so),
                None if eq is None else tuple(eq),
                d.get(n_sort),
                first_row_id,
                d.get(n_ref),
                d.get(n_coff),
                d.get(n_csize),
                spec_id,
            )
            yield ManifestEntry(status, snap, seq, fseq, df)
    except InvalidMetadataError:  # the records' own reader named the file and the fault already
        raise
    except (KeyError, IndexError, ValueError, EOFError, TypeError) as e:
        raise InvalidMetadataError(f"corrupt manifest ({type(e).__name__}: {e})", location=path) from e
