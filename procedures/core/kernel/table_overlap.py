"""Table folders never overlap: the rule, and what garbage collection makes of it.

Garbage collection deletes inside a table's folders (its location and its ``write.*.path``
folders).  When one table's folder holds another table -- a table created inside another one, a
registered metadata file pointing there, a ``write.data.path`` aimed at another table or at ``/`` --
the outer table's orphan removal, snapshot expiration or purge deletes the inner table's files.
So:

* :func:`check_no_overlap` refuses a table whose folders contain, or lie inside, a folder of
  another table of the same catalog, or contain the catalog's warehouse root (a table *at* or
  *above* the warehouse; tables below it are where they belong) or a file-system or bucket root;
  the catalogs call it on create, register and every commit that moves a folder;
* :func:`gc_roots` gives the folders garbage collection may delete in: the table's folders that
  pass the same rule (a folder holding another table, the warehouse root or ``/`` is dropped);
* :class:`ForeignFolders` answers "does this file belong to another table?" for the last check
  before a delete: a file is another table's when the most specific folder holding it is one of
  that table's (so an outer table never deletes in an inner one, and an inner table still cleans
  its own folder).

Paths are compared lexically after :func:`procedures.core.kernel.paths.is_within`'s normalisation (scheme
and authority, ``.``/``..``, doubled slashes, both readings of percent-escapes).  Nothing here
touches storage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from procedures.core.kernel import properties as table_properties
from procedures.core.kernel.paths import NormalizedPath, is_within, keys_within, path_keys
from procedures.errors import ValidationError

__all__ = [
    "WRITE_PATH_PROPERTIES", "TableFolders", "write_paths", "table_folders", "overlap_problems",
    "check_no_overlap", "gc_roots", "ForeignFolders", "is_storage_root",
]

#: table properties naming folders the table writes to besides its location
WRITE_PATH_PROPERTIES = tuple(p.key for p in table_properties.WRITE_PATH_PROPERTIES)


@dataclass(frozen=True)
class TableFolders:
    """A table as the overlap rule sees it: its name, its location (None when unknown) and the
    folders its ``write.*.path`` properties name, as ``(property, folder)`` pairs."""

    name: str
    location: str | None
    write_paths: tuple[tuple[str, str], ...] = ()

    def folders(self) -> tuple[tuple[str, str], ...]:
        """``(what, folder)`` of every folder of the table: ``location`` first."""
        # an empty location is the root of its file system (a location of "/" is stored as "")
        head = (("location", self.location),) if self.location is not None else ()
        return head + self.write_paths


def write_paths(properties: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The ``(property, folder)`` pairs of the ``write.*.path`` properties that are set."""
    return tuple((p, properties[p]) for p in WRITE_PATH_PROPERTIES if properties.get(p))


def table_folders(name: str, metadata: object) -> TableFolders:
    """:class:`TableFolders` of table metadata (anything with ``location`` and ``properties``)."""
    return TableFolders(name, getattr(metadata, "location", None), write_paths(getattr(metadata, "properties", {})))


def is_storage_root(folder: str) -> bool:
    """Whether ``folder`` is a file-system root or a bucket root (``/``, ``file:/``, ``s3://b/``)."""
    return any(k.path in ("", "/") for k in path_keys(folder))


def _overlaps(a: str, b: str) -> bool:
    return is_within(a, b) or is_within(b, a)


def overlap_problems(candidate: TableFolders, others: Iterable[TableFolders], warehouse: str | None) -> list[str]:
    """Why ``candidate``'s folders may not be used: one sentence per folder that is a storage root,
    contains the warehouse root, or contains or lies inside a folder of a table of ``others``
    (tables of the same name as ``candidate`` are skipped: a table never overlaps itself)."""
    problems: list[str] = []
    folders = candidate.folders()
    for what, folder in folders:
        if is_storage_root(folder):
            problems.append(f"its {what} {folder!r} is the root of a file system or bucket")
        elif warehouse and is_within(folder, warehouse):
            problems.append(f"its {what} {folder!r} contains the catalog's warehouse root {warehouse!r}")
    for other in others:
        if other.name == candidate.name:
            continue
        for what, folder in folders:
            for other_what, other_folder in other.folders():
                if _overlaps(folder, other_folder):
                    relation = ("is the same folder as" if is_within(other_folder, folder) and is_within(folder, other_folder)
                                else "contains" if is_within(folder, other_folder) else "lies inside")
                    problems.append(f"its {what} {folder!r} {relation} table {other.name}'s {other_what} "
                                    f"{other_folder!r}")
    return problems


def check_no_overlap(candidate: TableFolders, others: Iterable[TableFolders], warehouse: str | None, *,
                     action: str) -> None:
    """Raise :class:`ValidationError` naming ``candidate`` and every table it overlaps when
    :func:`overlap_problems` finds any; ``action`` says what was refused (``"create table db.t"``)."""
    problems = overlap_problems(candidate, others, warehouse)
    if problems:
        raise ValidationError(
            f"Cannot {action}: table {candidate.name}'s folders would overlap another table's or the warehouse "
            f"root -- {'; '.join(problems)}. Garbage collection of one table would delete the other's files: "
            "choose a location (and write.*.path folders) that no other table uses, below the warehouse root."
        )


def gc_roots(own: TableFolders, others: Iterable[TableFolders], warehouse: str | None
             ) -> tuple[tuple[str, ...], list[str]]:
    """``(folders garbage collection may delete in, why each dropped folder was dropped)``.

    No folder that is a storage root or contains the warehouse root is kept.  A ``write.*.path``
    folder is also dropped when it contains a folder of another table: a property can point
    anywhere, and the files the table wrote there are not worth another table's.  The location
    stays when another table lies inside it (a table made before the rule): :class:`ForeignFolders`
    keeps that table's files, and the rest of the location is still cleaned.
    """
    others = [o for o in others if o.name != own.name]
    roots: list[str] = []
    dropped: list[str] = []
    for what, folder in own.folders():
        holder = None if what == "location" else next(
            (o.name for o in others for _, f in o.folders() if is_within(folder, f)), None)
        if is_storage_root(folder):
            dropped.append(f"{what} {folder!r} is the root of a file system or bucket")
        elif warehouse and is_within(folder, warehouse):
            dropped.append(f"{what} {folder!r} contains the catalog's warehouse root {warehouse!r}")
        elif holder is not None:
            dropped.append(f"{what} {folder!r} contains a folder of table {holder}")
        else:
            roots.append(folder.rstrip("/") or "/")
    return tuple(dict.fromkeys(roots)), dropped


class ForeignFolders:
    """Which files lie in another table's folder: a file belongs to the table owning the most
    specific (longest) folder that holds it; at equal depth another table wins (shared folders are
    never cleaned).  Built once per run from ``others``, keeping only the folders that overlap one
    of ``own`` (the folders the run deletes in): with none -- every table in its own folder -- a
    question costs nothing, else it normalises the path once."""

    def __init__(self, own: Sequence[str], others: Iterable[TableFolders], *, skip: str | None = None) -> None:
        self._own = [(path_keys(f), _depth(f)) for f in own]
        self._others: list[tuple[tuple[NormalizedPath, ...], int, str]] = []
        for other in others:
            if other.name == skip:
                continue
            for _, folder in other.folders():
                if any(_overlaps(folder, mine) for mine in own):
                    self._others.append((path_keys(folder), _depth(folder), other.name))

    def __bool__(self) -> bool:
        return bool(self._others)

    def owner(self, path: str) -> str | None:
        """The other table ``path`` belongs to, or None when it is not another table's."""
        if not self._others:
            return None
        keys = path_keys(path)
        best: tuple[int, str] | None = None
        for folder, depth, name in self._others:
            if keys_within(folder, keys) and (best is None or depth > best[0]):
                best = (depth, name)
        if best is None:
            return None
        mine = max((d for folder, d in self._own if keys_within(folder, keys)), default=-1)
        return best[1] if best[0] >= mine else None


def _depth(folder: str) -> int:
    return len([s for s in path_keys(folder)[0].path.split("/") if s])
