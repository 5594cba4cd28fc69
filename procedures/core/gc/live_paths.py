"""What garbage collection reads of a manifest: the path (and content) of every live entry, skimmed
from the entries' bytes by a generated reader (:mod:`procedures.spec.avro_scan`) instead of decoded
into :class:`~procedures.spec.manifest.model.DataFile` objects -- at a million files, reachability
spends most of its time here.  A schema the generator does not handle is read through a fastavro
projection of the same three fields.
"""

from __future__ import annotations

import io as _io
from typing import Any, Callable, Iterator, Mapping

import fastavro

from procedures.errors import InvalidMetadataError
from procedures.spec import avro_codecs
from procedures.spec.avro_scan import SkimField, compile_skimmer
from procedures.spec.avro_schemas import strip_logical_types
from procedures.spec.manifest.avro_container import MetadataIO, open_avro, read_stripped_manifest, record_type
from procedures.spec.manifest.model import FILE_CONTENTS, FileContent, ManifestEntryStatus, ManifestFile

__all__ = ["manifest_live_paths", "manifest_live_path_list"]


def _live_paths_schema(schema: Mapping[str, Any]) -> tuple[dict[str, Any], str, str, str, str]:
    """A reader schema keeping only an entry's status and its file's content and path (by field id),
    with the names of status, data_file, content and file_path; fastavro skips everything else
    without building it."""
    top = {f.get("field-id"): f for f in schema["fields"]}
    status, df_field = top.get(0), top.get(2)
    if status is None or df_field is None:
        raise InvalidMetadataError("manifest schema has no status (id 0) or data_file (id 2) field")
    df_schema = record_type(df_field["type"])
    inner = {f.get("field-id"): f for f in df_schema["fields"]}
    if 100 not in inner:
        raise InvalidMetadataError("manifest schema has no file_path field (id 100)")
    kept = [inner[i] for i in (134, 100) if i in inner]
    reader = {"type": "record", "name": schema["name"], "fields": [
        status,
        {"name": df_field["name"], "type": {"type": "record", "name": df_schema["name"], "fields": kept}},
    ]}
    return (reader, status["name"], df_field["name"], inner[134]["name"] if 134 in inner else "\0",
            inner[100]["name"])


def manifest_live_paths(io: MetadataIO, manifest: ManifestFile) -> Iterator[tuple[str, FileContent]]:
    """``(file_path, content)`` of every live (ADDED or EXISTING) entry of a manifest, decoding only
    those fields: garbage collection needs nothing else and
    :func:`~procedures.spec.manifest.reader.read_manifest` builds far more."""
    paths: list[str] = []
    contents: list[int | None] = []
    projected = _read_live(io, manifest, paths, contents)
    if projected is not None:
        yield from projected
        return
    kinds = {None: FileContent.DATA, **{int(k): k for k in FileContent}}
    for p, c in zip(paths, contents):
        kind = kinds.get(c)
        if kind is None:
            raise InvalidMetadataError(f"corrupt manifest (content {c} of {p!r} is not 0, 1 or 2)",
                                       location=manifest.manifest_path)
        yield p, kind


def manifest_live_path_list(io: MetadataIO, manifest: ManifestFile) -> list[str]:
    """The ``file_path`` of every live entry of a manifest (:func:`manifest_live_paths` without the
    content)."""
    paths: list[str] = []
    projected = _read_live(io, manifest, paths, None)
    return paths if projected is None else [p for p, _ in projected]


def _read_live(io: MetadataIO, manifest: ManifestFile, paths: list[str], contents: list[int | None] | None
               ) -> Iterator[tuple[str, FileContent]] | None:
    """Append the live entries' paths (and, unless None, content codes) of a manifest to the lists,
    skimming each entry's bytes; for a schema the skimmer does not handle, return the entries
    read through a fastavro projection instead."""
    path = manifest.manifest_path
    data, stripped, schema = read_stripped_manifest(io, path)
    skim = _live_paths_skimmer(schema)
    if skim is None:
        return _live_paths_projected(data, schema, path)
    avro_codecs.install()
    deleted = int(ManifestEntryStatus.DELETED)
    add_path = paths.append
    add_content = contents.append if contents is not None else None
    try:
        for block in fastavro.block_reader(_io.BytesIO(stripped)):
            buf = block.bytes_.getvalue()
            pos = 0
            for _ in range(block.num_records):
                pos, (status, content, file_path) = skim(buf, pos)
                if status != deleted:
                    add_path(file_path)
                    if add_content is not None:
                        add_content(content)
            if pos != len(buf):
                raise ValueError(f"a block holds {len(buf) - pos} bytes past its {block.num_records} records")
    except (KeyError, IndexError, ValueError, EOFError, TypeError) as e:
        raise InvalidMetadataError(f"corrupt manifest ({type(e).__name__}: {e})", location=path) from e
    return None


#: what garbage collection reads of an entry: status, then data_file's content and file_path
_LIVE_PATH_FIELDS = (SkimField((0,), "long"), SkimField((2, 134), "long"), SkimField((2, 100), "string"))
#: schema -> its live-paths skimmer, or None (read through the fastavro projection instead); keyed by
#: identity (the header cache of ``without_logical_types`` hands out one object per schema text)
_LIVE_PATH_SKIMMERS: dict[int, tuple[Any, Callable[[bytes, int], tuple[int, tuple]] | None]] = {}


def _live_paths_skimmer(schema: dict[str, Any]) -> Callable[[bytes, int], tuple[int, tuple]] | None:
    """The skimming reader of status, content and file_path for manifests written with ``schema``,
    or None when the generator does not handle the schema or the schema lacks status or file_path
    (the projection then reads it, or names what is missing)."""
    hit = _LIVE_PATH_SKIMMERS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    skimmer = compile_skimmer(strip_logical_types(schema), _LIVE_PATH_FIELDS)
    # without status or file_path the skimmer would answer None: let the projection raise instead
    skim = skimmer.skim if skimmer is not None and {0, 2} <= skimmer.found else None
    if len(_LIVE_PATH_SKIMMERS) >= 64:
        _LIVE_PATH_SKIMMERS.clear()
    _LIVE_PATH_SKIMMERS[id(schema)] = (schema, skim)
    return skim


def _live_paths_projected(data: bytes, schema: dict[str, Any], path: str) -> Iterator[tuple[str, FileContent]]:
    """:func:`manifest_live_paths` through fastavro with a reader schema of the three fields (for a
    schema the skimmer does not handle)."""
    open_avro(data, path, strip=False)  # a readable container, or InvalidMetadataError naming the file
    try:
        projection, n_status, n_df, n_content, n_path = _live_paths_schema(schema)
        records = fastavro.reader(_io.BytesIO(data), reader_schema=projection)
        deleted = int(ManifestEntryStatus.DELETED)
        contents = FILE_CONTENTS
        for r in records:
            if r[n_status] == deleted:
                continue
            d = r[n_df]
            content = d.get(n_content)
            yield d[n_path], (
                FileContent.DATA if content is None else contents[content])
    except InvalidMetadataError as e:
        raise InvalidMetadataError(str(e), location=path) from e
    except (KeyError, IndexError, ValueError, EOFError, TypeError) as e:
        raise InvalidMetadataError(f"corrupt manifest ({type(e).__name__}: {e})", location=path) from e
