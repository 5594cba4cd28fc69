"""Java's hidden-path rule of orphan-file listing, shared by the driver's walk and the engine's."""

from __future__ import annotations

from dataclasses import dataclass

from procedures.spec.metadata import TableMetadata

__all__ = ["HiddenPathFilter"]


@dataclass(frozen=True)
class HiddenPathFilter:
    """Java's ``PartitionAwareHiddenPathFilter``: names starting with ``_`` or ``.`` are hidden,
    except those starting with ``<partition field>=`` for partition fields named that way."""

    partition_prefixes: tuple[str, ...] = ()

    @classmethod
    def for_metadata(cls, md: TableMetadata) -> "HiddenPathFilter":
        """The filter for every partition spec of the table."""
        names = {f"{f.name}=" for spec in md.partition_specs for f in spec.fields if f.name.startswith(("_", "."))}
        return cls(tuple(sorted(names)))

    def accept(self, name: str) -> bool:
        """True when ``name`` (one path segment) is not hidden."""
        if any(name.startswith(p) for p in self.partition_prefixes):
            return True
        return not name.startswith(("_", "."))
