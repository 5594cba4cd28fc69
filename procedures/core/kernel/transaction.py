"""The one commit path: every change to a table goes through :func:`commit`.

A change is a list of *operations*.  Each attempt loads the table, lets every operation compute its
metadata updates against that base (operations may write manifests and manifest lists, which they
register with the :class:`CommitContext`), builds the new metadata with the
:class:`~procedures.core.kernel.builder.MetadataBuilder` and asks the catalog to swap it in atomically.

On a lost race (``CommitFailedError`` from the catalog) the loop waits, reloads and replays,
honouring ``commit.retry.num-retries`` / ``min-wait-ms`` / ``max-wait-ms`` / ``total-timeout-ms``.
Operations that are not replayable (schema, spec or sort-order changes prepared against a base)
keep the requirements derived from their first attempt and fail cleanly if a concurrent commit
broke them.  Failure semantics:

* clean failure (conflict after retries, validation error): every file any attempt wrote is
  deleted, and the error says nothing of the change is visible;
* unknown outcome (``CommitStateUnknownError``, or anything but a typed error raised inside the
  catalog's swap, which may have come after the swap): nothing is deleted, the error is re-raised;
* success: files written by earlier, discarded attempts are deleted.  The metadata files trimmed
  from the log (``write.metadata.delete-after-commit.enabled``) are the catalog's to delete, as
  part of its swap (:func:`procedures.catalog.base.delete_removed_metadata_files`): a catalog whose
  server commits (REST) leaves them to the server.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from procedures.core.kernel import fault_points
from procedures.core.kernel import updates as metadata_updates
from procedures.core.kernel.builder import MetadataBuilder
from procedures.core.kernel.properties import (
    COMMIT_MAX_RETRY_WAIT_MS, COMMIT_MIN_RETRY_WAIT_MS, COMMIT_NUM_RETRIES, COMMIT_TOTAL_RETRY_TIME_MS,
)
from procedures.errors import CommitFailedError, CommitStateUnknownError, IcebergError
from procedures.spec.metadata import TableMetadata

__all__ = ["Operation", "Table", "CommitContext", "MetadataChange", "RetryPolicy", "commit"]

log = logging.getLogger(__name__)


class Table(Protocol):
    """What the core needs of a table: :class:`procedures.catalog.base.Table` is one.  The core
    never imports the catalog layer; the catalog's table is handed down to it."""

    identifier: Any
    catalog: Any

    @property
    def metadata(self) -> TableMetadata: ...  # pragma: no cover

    @property
    def metadata_location(self) -> str | None: ...  # pragma: no cover

    @property
    def io(self) -> Any: ...  # pragma: no cover

    def refresh(self) -> "Table": ...  # pragma: no cover


class Operation(Protocol):
    """One logical change inside a commit."""

    #: replayable operations recompute their updates from any newer base (snapshot producers);
    #: the others were prepared against one base and must not silently apply to another
    replayable: bool

    def apply(self, base: "TableMetadata", ctx: "CommitContext") -> list[metadata_updates.MetadataUpdate]:
        """Updates that perform the change on ``base``; may write files through ``ctx``."""
        ...  # pragma: no cover


@dataclass
class CommitContext:
    """What an operation sees of the commit in progress: the table, its FileIO, the attempt
    number, and a register of files it wrote so the loop can clean up safely."""

    table: "Table"
    attempt: int = 0
    written: dict[int, list[str]] = field(default_factory=dict)
    #: files written in an earlier attempt that the current attempt reuses
    reused: set[str] = field(default_factory=set)
    #: files written by this commit that the current attempt leaves out of its result (a new
    #: manifest merged into another): deleted once the commit lands, like Java's uncommitted appends
    superseded: set[str] = field(default_factory=set)

    @property
    def io(self):
        """The table's FileIO."""
        return self.table.io

    @property
    def identifier(self) -> str:
        """The table's name, for messages."""
        name = getattr(self.table, "name", None)
        return name if isinstance(name, str) else ".".join(self.table.identifier)

    def track(self, path: str) -> str:
        """Register a file written by the current attempt; returns ``path``."""
        self.written.setdefault(self.attempt, []).append(path)
        return path

    def reuse(self, path: str) -> str:
        """Mark a file of an earlier attempt as part of the current attempt."""
        self.reused.add(path)
        return path

    def supersede(self, path: str) -> str:
        """Mark a file written by this commit as left out of the current attempt's result."""
        self.superseded.add(path)
        return path

    def all_written(self) -> list[str]:
        """Every file any attempt wrote."""
        return [p for paths in self.written.values() for p in paths]

    def discarded(self) -> list[str]:
        """Files written by earlier attempts that the last attempt does not use, and files the last
        attempt left out of its result."""
        last = self.attempt
        return [p for a, paths in self.written.items() for p in paths
                if (a != last and p not in self.reused) or p in self.superseded]


@dataclass(frozen=True)
class MetadataChange:
    """A fixed list of metadata updates (properties, schema, spec, sort order, refs ...)."""

    updates: tuple[metadata_updates.MetadataUpdate, ...]
    replayable: bool = False

    def apply(self, base: "TableMetadata", ctx: CommitContext) -> list[metadata_updates.MetadataUpdate]:
        """The updates, unchanged."""
        return list(self.updates)


@dataclass(frozen=True)
class RetryPolicy:
    """``commit.retry.*`` table properties, with Java's defaults."""

    num_retries: int = COMMIT_NUM_RETRIES.default
    min_wait_ms: int = COMMIT_MIN_RETRY_WAIT_MS.default
    max_wait_ms: int = COMMIT_MAX_RETRY_WAIT_MS.default
    total_timeout_ms: int = COMMIT_TOTAL_RETRY_TIME_MS.default

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> "RetryPolicy":
        """Read the policy from table properties; a non-integer value is a ValidationError."""
        return cls(
            COMMIT_NUM_RETRIES.read(props),
            COMMIT_MIN_RETRY_WAIT_MS.read(props),
            COMMIT_MAX_RETRY_WAIT_MS.read(props),
            COMMIT_TOTAL_RETRY_TIME_MS.read(props),
        )

    def backoff_ms(self, attempt: int) -> float:
        """Exponential backoff with jitter for retry ``attempt`` (1-based)."""
        wait = min(self.min_wait_ms * (2 ** (attempt - 1)), self.max_wait_ms)
        return wait * (0.5 + random.random() / 2)


def commit(table: "Table", operations: Sequence[Operation], *, policy: RetryPolicy | None = None) -> "Table":
    """Commit ``operations`` to ``table`` atomically, retrying lost races; returns the new table.

    Raises :class:`CommitFailedError` when the change could not be committed (nothing of it is
    visible and its files are deleted), :class:`CommitStateUnknownError` when the catalog cannot
    tell (nothing is deleted), and any :class:`ValidationError` an operation raises (files deleted).
    """
    ctx = CommitContext(table)
    policy = policy or RetryPolicy.from_properties(dict(table.metadata.properties))
    started = time.monotonic()
    fixed_requirements: list[metadata_updates.Requirement] | None = None
    while True:
        base = ctx.table.metadata
        swapping = False
        try:
            builder = MetadataBuilder(base, ctx.table.metadata_location)
            fixed_updates: list[metadata_updates.MetadataUpdate] = []
            applied: list[metadata_updates.MetadataUpdate] = []
            for op in operations:
                ups = op.apply(builder.current(), ctx)
                builder.apply_all(ups)
                applied.extend(ups)
                if not op.replayable:
                    fixed_updates.extend(ups)
            if fixed_requirements is None:
                fixed_requirements = metadata_updates.requirements_for(base, fixed_updates)
            else:
                metadata_updates.check_requirements(fixed_requirements, base, table=ctx.identifier)
            new = builder.build()
            if new is base:
                return ctx.table
            fault_points.reached(fault_points.COMMIT, ctx.identifier)
            swapping = True
            committed = ctx.table.catalog.commit_changes(ctx.table, base, new, applied)
        except CommitStateUnknownError:
            log.error("commit to %s has an unknown outcome; no files were deleted", ctx.identifier)
            raise
        except CommitFailedError as e:
            elapsed_ms = (time.monotonic() - started) * 1000
            # a requirement broken by a concurrent commit is final; a lost swap is worth another try
            if not e.retryable or ctx.attempt >= policy.num_retries or elapsed_ms >= policy.total_timeout_ms:
                _delete_quietly(ctx, ctx.all_written())
                raise CommitFailedError(
                    f"Cannot commit to {ctx.identifier} after {ctx.attempt + 1} attempt(s): {e}",
                    table=ctx.identifier, attempts=ctx.attempt + 1, retryable=e.retryable,
                ) from e
            ctx.attempt += 1
            ctx.reused.clear()
            ctx.superseded.clear()
            wait = policy.backoff_ms(ctx.attempt)
            log.info("commit to %s lost a race (%s); retry %d in %.0f ms", ctx.identifier, e, ctx.attempt, wait)
            time.sleep(wait / 1000)
            ctx.table = ctx.table.refresh()
            continue
        except BaseException as e:
            # The catalogs raise typed errors only for swaps they know did not happen; anything else
            # from inside the swap (an I/O error, an interrupt) may have come after it, when the new
            # metadata already references the files: deleting them would break the table.
            if swapping and not isinstance(e, IcebergError):
                log.error("commit to %s was interrupted during the metadata swap; no files were deleted",
                          ctx.identifier)
                if isinstance(e, Exception):
                    raise CommitStateUnknownError(
                        f"Cannot tell whether the commit to {ctx.identifier} happened: the metadata swap failed "
                        f"with {e!r}; reload the table to see whether the change landed",
                        table=ctx.identifier, cause=e) from e
                raise
            _delete_quietly(ctx, ctx.all_written())
            raise
        # outside the try: from here on the change is visible, so nothing it wrote may be deleted
        fault_points.reached(fault_points.SWAPPED, committed.metadata_location or "")
        _delete_quietly(ctx, ctx.discarded())
        return committed


def _delete_quietly(ctx: CommitContext, paths: list[str]) -> None:
    if not paths:
        return
    try:
        ctx.io.delete_many(paths)
    except Exception as e:  # cleanup must never hide the real outcome
        log.warning("could not delete %d file(s) written by a failed commit to %s: %s", len(paths), ctx.identifier, e)

