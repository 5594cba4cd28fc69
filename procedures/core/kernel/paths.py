"""Path normalisation for everything that compares or deletes files (garbage collection).

Iceberg stores file locations as strings, and the same file can be spelled many ways: ``file:/x``,
``file:///x`` and ``/x``; ``s3a://b/k`` and ``s3://b/k``; ``/t/data/../m`` and ``/t/m``; ``/t//d/``
and ``/t/d``; ``/t/a%20b`` and ``/t/a b`` (depending on which layer decoded it).  Comparing raw strings
is how a ``location`` ending in ``/data/..`` once made remove_orphan_files see a table's own metadata
as orphans.  Every garbage collector goes through :func:`normalize_path` and :func:`is_within`.

Two readings of a path exist, and the safe answer differs by question:

* a *literal* one, where ``%xx`` is part of the name (Hadoop's ``Path`` and a local file system), and
* a *decoded* one, where ``%xx`` is an escape (URI-decoding layers, some object-store listings).

For "is this file still referenced?" a file is kept when *either* reading matches a referenced path
(:func:`path_keys`).  For "is this file inside the table?" it must be inside under *both*
readings (:func:`is_within`).  Both choices err towards deleting less.

``.`` and ``..`` are resolved lexically (``..`` never climbs above the root), so a path that names a
folder by going up and down again is judged by where it lands.  Nothing here touches storage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping
from urllib.parse import unquote

from procedures.errors import ValidationError

__all__ = [
    "is_table_metadata_file",
    "NormalizedPath",
    "DEFAULT_EQUAL_SCHEMES",
    "normalize_path",
    "path_keys",
    "is_within",
    "keys_within",
    "plain_prefix",
    "plainly_within",
    "relative_path",
    "flatten_equal_map",
    "PathSet",
    "local_path",
    "join_path",
]

#: schemes that always name the same storage (Iceberg Java's orphan-file default, and ours)
DEFAULT_EQUAL_SCHEMES: Mapping[str, str] = {"s3a": "s3", "s3n": "s3"}


@dataclass(frozen=True, slots=True)
class NormalizedPath:
    """One reading of a location: lower-case ``scheme`` and ``authority`` (None when absent) and a
    ``path`` with ``.``/``..`` resolved and no doubled or trailing slash."""

    scheme: str | None
    authority: str | None
    path: str

    def key(self) -> tuple[str | None, str | None, str]:
        """The comparable part: ``(scheme, authority, path)``."""
        return self.scheme, self.authority, self.path


def flatten_equal_map(mapping: Mapping[str, str] | None) -> dict[str, str]:
    """Split comma-separated keys (``{'s3a,s3n': 's3'}`` -> two entries), trimming keys and values."""
    out: dict[str, str] = {}
    for key, value in (mapping or {}).items():
        for k in str(key).split(","):
            out[k.strip()] = str(value).strip()
    return out


def _split(text: str) -> tuple[str | None, str | None, str]:
    """Scheme, authority and path of ``text`` as Hadoop's ``Path`` splits them."""
    scheme = authority = None
    start = 0
    colon, slash = text.find(":"), text.find("/")
    # a scheme ends before the first slash; one letter is a Windows drive, not a scheme
    if colon > 1 and (slash == -1 or colon < slash):
        scheme, start = text[:colon], colon + 1
    if text.startswith("//", start):
        end = text.find("/", start + 2)
        end = end if end >= 0 else len(text)
        authority, start = text[start + 2:end] or None, end
    return scheme, authority, text[start:]


def _resolve_dots(path: str) -> str:
    """Collapse slashes and resolve ``.``/``..`` lexically; ``..`` at the root stays at the root."""
    if path.startswith("/") and "//" not in path and "/." not in path and not path.endswith("/", 1):
        return path  # already resolved (most paths): skip the split and join
    absolute = path.startswith("/")
    out: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if out and out[-1] != "..":
                out.pop()
            elif not absolute:
                out.append("..")
            continue
        out.append(segment)
    joined = "/".join(out)
    return "/" + joined if absolute else joined


def normalize_path(text: str, equal_schemes: Mapping[str, str] | None = None,
                   equal_authorities: Mapping[str, str] | None = None, *, decode: bool = False) -> NormalizedPath:
    """Normalise ``text``: map the scheme (lower-cased, then through :data:`DEFAULT_EQUAL_SCHEMES` and
    ``equal_schemes``) and the authority (through ``equal_authorities``, then lower-cased), and
    resolve the path.  With ``decode`` percent-escapes of the path are decoded first."""
    scheme, authority, path = _split(text)
    if scheme is not None:
        scheme = scheme.lower()
        scheme = DEFAULT_EQUAL_SCHEMES.get(scheme, scheme)
        if equal_schemes:
            scheme = equal_schemes.get(scheme, scheme) or None
    if authority is not None and equal_authorities:
        authority = equal_authorities.get(authority, authority)
    authority = authority.lower() if authority else None
    if decode:
        path = unquote(path)
    return NormalizedPath(scheme, authority, _resolve_dots(path))


def path_keys(text: str, equal_schemes: Mapping[str, str] | None = None,
              equal_authorities: Mapping[str, str] | None = None) -> tuple[NormalizedPath, ...]:
    """Both readings of ``text`` (literal first, then decoded when it differs)."""
    literal = normalize_path(text, equal_schemes, equal_authorities)
    if "%" not in text:
        return (literal,)  # nothing to decode: the decoded reading is the literal one
    decoded = normalize_path(text, equal_schemes, equal_authorities, decode=True)
    return (literal,) if decoded.key() == literal.key() else (literal, decoded)


def _schemes_agree(outer: str | None, inner: str | None) -> bool:
    # a plain path is a local one: it agrees with file: and with another plain path, nothing else
    return (outer or "file") == (inner or "file")


def _within(outer: NormalizedPath, inner: NormalizedPath) -> bool:
    if not _schemes_agree(outer.scheme, inner.scheme) or (outer.authority or None) != (inner.authority or None):
        return False
    if outer.path and not outer.path.startswith("/"):
        # a relative location has no place in a file system: nothing is inside it
        return False
    base = outer.path.rstrip("/")
    return inner.path == outer.path or inner.path.startswith(base + "/")


def is_within(location: str, path: str, equal_schemes: Mapping[str, str] | None = None,
              equal_authorities: Mapping[str, str] | None = None) -> bool:
    """Whether ``path`` is ``location`` or lies below it under both readings of both strings
    (the literal and the percent-decoded one), after normalisation."""
    return keys_within(path_keys(location, equal_schemes, equal_authorities),
                       path_keys(path, equal_schemes, equal_authorities))


def keys_within(outer: tuple[NormalizedPath, ...], inner: tuple[NormalizedPath, ...]) -> bool:
    """:func:`is_within` on readings already computed by :func:`path_keys` (a location checked
    against many paths is normalised once)."""
    return _within(outer[0], inner[0]) and _within(outer[-1], inner[-1])


def plain_prefix(location: str) -> str | None:
    """A string prefix that places a path inside ``location`` without normalising it (see
    :func:`plainly_within`), or None when ``location``'s spelling is not plain enough for that
    (percent-escapes, or a spelling under which the location would not hold its own children)."""
    prefix = location if location.endswith("/") else location + "/"
    if "%" in prefix or not is_within(location, prefix + "x"):
        return None
    return prefix


def plainly_within(prefix: str, path: str) -> bool:
    """True when ``path`` is ``prefix`` (from :func:`plain_prefix`) followed by plain segments, so
    :func:`is_within` would say it lies inside; False says nothing (check with :func:`is_within`).

    Plain segments have no percent-escape, are not empty and do not start with a dot: appending them
    to the location changes neither the scheme, the authority nor the resolved folders above them.
    """
    if not path.startswith(prefix):
        return False
    rest = "/" + path[len(prefix):]
    return "%" not in rest and "//" not in rest and "/." not in rest


def relative_path(location: str, path: str) -> str | None:
    """``path`` relative to ``location`` in the literal reading (``""`` for the location itself), or
    None when :func:`is_within` says it is not inside."""
    if not is_within(location, path):
        return None
    base = normalize_path(location).path.rstrip("/")
    inner = normalize_path(path).path
    return inner[len(base):].lstrip("/")


class PathSet:
    """A set of locations compared by normalised path under both readings, ignoring scheme and
    authority: a path is "in" the set when any reading of it matches any reading of a member.
    Garbage collection asks it "is this file still reachable?", where a false yes only keeps a file.
    """

    __slots__ = ("_paths",)

    def __init__(self, paths: Iterable[str] = ()) -> None:
        self._paths: set[str] = set()
        self.update(paths)

    def add(self, text: str) -> None:
        """Add one location."""
        self._paths.update(k.path for k in path_keys(text))

    def update(self, paths: Iterable[str]) -> None:
        """Add every location of ``paths``."""
        for p in paths:
            self.add(p)

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and any(k.path in self._paths for k in path_keys(text))

    def __bool__(self) -> bool:
        return bool(self._paths)


# ------------------------------------------------------------------------------------ spelling
def local_path(path: str) -> str | None:
    """The OS path of a local location (``/x``, ``file:/x``, ``file:///x``), else ``None``.

    Hadoop writes paths unescaped (``file:/a b``), so no percent-decoding is done.
    """
    if path.startswith("file:"):
        rest = path[5:]
        if rest.startswith("//"):
            authority, _, tail = rest[2:].partition("/")
            if authority not in ("", "localhost"):
                raise ValidationError(f"Cannot use file URI {path!r}: only local files (no host) are supported")
            return "/" + tail
        if not rest.startswith("/"):
            raise ValidationError(f"Cannot use file URI {path!r}: the path must be absolute")
        return rest
    if _scheme(path):
        return None
    if path.startswith("/"):
        return path
    raise ValidationError(f"Cannot use relative path {path!r}: Iceberg locations must be absolute paths or URIs")


def _scheme(path: str) -> str | None:
    head, sep, _ = path.partition(":")
    # one letter is a Windows drive, not a scheme
    if sep and len(head) > 1 and head[0].isalpha() and all(c.isalnum() or c in "+-." for c in head):
        return head.lower()
    return None


def join_path(base: str, *parts: str) -> str:
    """``base`` joined with ``parts`` by ``/``, keeping ``base``'s scheme spelling."""
    out = base.rstrip("/") if base not in ("/",) else ""
    for part in parts:
        out = f"{out}/{part.strip('/')}"
    return out


def is_table_metadata_file(path: str) -> bool:
    """``*.metadata.json[.gz]`` and ``version-hint.text``: garbage collection of snapshots never
    deletes these (they are governed by ``write.metadata.*`` and remove_orphan_files), and
    rewrite_table_path refuses a staging folder holding them."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name == "version-hint.text" or name.endswith((".metadata.json", ".metadata.json.gz", ".gz.metadata.json"))
