"""Sorting more Arrow rows than fit in memory by an Iceberg sort order, for rewrites that sort a file
group inside one task (no engine shuffle).

Rows are buffered up to a memory budget; a full buffer is sorted (:func:`sort_keys`) and spilled to a
local Arrow IPC file as a *run*, its sort-key columns stored beside the data.  Reading back merges the
runs by key ranges rather than row by row: boundary keys are picked from the keys that start each
run's batches (known without reading the runs), every run is cut at each boundary by a binary search
(a run is sorted), and the rows of one range, taken from every run, are sorted together and handed
out.  A range holds about one budget of rows, so memory stays bounded whatever the number of rows.

Many rows with one key would make a single range as large as they are, so a key that starts more than
one batch always becomes a boundary, and the rows equal to a range's lower boundary are handed out
first without sorting (they are equal; any order is the sorted order).  What is left to sort in a range
is then at most its share of the budget plus one batch per run.

With one buffer and nothing spilled, the rows are sorted in memory and nothing touches the disk.
"""

from __future__ import annotations

import functools
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from procedures.core.data_rewrite.arrow_sort import sort_keys
from procedures.spec.schema import Schema
from procedures.spec.sorting import SortField

__all__ = ["BatchCursor", "ExternalSorter", "SORT_MEMORY_BYTES", "SPILL_BATCH_ROWS", "sort_memory_pool"]

#: Arrow bytes of rows sorted at once (a buffer before it spills, a range when merging).  The process
#: grows by several times that (the rows made contiguous, keys, indices, the taken batches, and what
#: the allocator keeps): measured sorting and writing 20M rows, 16 MiB peaks at about 330 MiB in a
#: bare process, 64 MiB at 590 MiB, so a Spark Python worker that sorts and writes stays well under
#: 512 MiB whatever the number of rows.
SORT_MEMORY_BYTES = 16 * 1024 * 1024
#: Rows per batch of a spilled run: the granularity of the boundary keys and of a binary search's read.
SPILL_BATCH_ROWS = 32_768
#: Key columns are stored in the run files under this prefix (a NUL cannot start a table column name).
_KEY_PREFIX = "\x00key:"


def sort_memory_pool() -> pa.MemoryPool:
    """The Arrow memory pool a sort's process should allocate from: jemalloc where pyarrow has it.

    Sorting and writing 20M rows through the default pool (mimalloc in pyarrow's wheels) peaked at
    491 MiB of resident memory for 207 MiB of Arrow allocations, the system allocator at 538 MiB,
    jemalloc (which Arrow sets up to hand freed pages back within a second) at 414 MiB and no slower."""
    try:
        return pa.jemalloc_memory_pool()
    except NotImplementedError:
        return pa.default_memory_pool()


def _compare(a: tuple, b: tuple, descending: tuple[bool, ...]) -> int:
    """-1, 0 or 1 as key tuple ``a`` sorts before, with or after ``b`` (the order of
    :func:`sort_keys`: null and NaN flags are keys of their own, so values compare only when both
    flags agree; two NaNs or two nulls are equal)."""
    for x, y, desc in zip(a, b, descending):
        if x == y or (x != x and y != y):
            continue
        if x is None or y is None:  # both flags agree, so both are null
            continue
        smaller = x < y
        return (1 if smaller else -1) if desc else (-1 if smaller else 1)
    return 0


@dataclass
class _Run:
    """One spilled, sorted run: its file, row count and the key of the first row of each batch."""

    path: str
    rows: int
    starts: list[int] = field(default_factory=list)
    first_keys: list[tuple] = field(default_factory=list)
    reader: Any = None

    def open(self) -> Any:
        if self.reader is None:
            # read, not mapped: batches are decompressed into new buffers anyway, and mapped pages
            # would count in the worker's resident memory
            self.reader = pa.ipc.open_file(pa.OSFile(self.path, "rb"))
        return self.reader

    def close(self) -> None:
        self.reader = None


class ExternalSorter:
    """Sort a stream of Arrow batches by ``fields`` in bounded memory (module docstring).

    ``add`` every batch, then iterate ``sorted_batches`` once; ``close`` (or use as a context manager)
    removes the spill files.  ``spill_dir`` is where runs go (a task's local scratch directory)."""

    def __init__(self, schema: Schema, fields: Sequence[SortField], spill_dir: str | None = None, *,
                 memory_bytes: int = SORT_MEMORY_BYTES, batch_rows: int = SPILL_BATCH_ROWS,
                 compression: str | None = "lz4") -> None:
        self.schema = schema
        self.fields = list(fields)
        self.memory_bytes = max(1, memory_bytes)
        self.batch_rows = max(1, batch_rows)
        self.compression = compression
        self.rows = 0
        #: the most rows sorted at once while merging (bounded by the budget; tests check it)
        self.max_sorted_rows = 0
        self._spill_parent = spill_dir
        self._dir: tempfile.TemporaryDirectory | None = None
        self._buffer: list[pa.RecordBatch] = []
        self._buffered = 0
        self._runs: list[_Run] = []
        self._order: list[tuple[str, str]] | None = None
        self._bytes = 0

    def __enter__(self) -> "ExternalSorter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def spilled_runs(self) -> int:
        """How many runs went to disk so far."""
        return len(self._runs)

    def add(self, batch: pa.RecordBatch) -> None:
        """Buffer ``batch``; a full buffer is sorted and spilled."""
        if not batch.num_rows:
            return
        self._buffer.append(batch)
        self._buffered += batch.nbytes
        self._bytes += batch.nbytes
        self.rows += batch.num_rows
        if self._buffered >= self.memory_bytes:
            self._spill()

    def close(self) -> None:
        """Drop buffered rows and remove every spill file."""
        self._buffer = []
        for run in self._runs:
            run.close()
        self._runs = []
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    # -- sorting one buffer -----------------------------------------------------------------------

    def _sorted_buffer(self) -> tuple[pa.Table, pa.Table, pa.Array]:
        """The buffered rows made contiguous, their key table and their sorted order; the buffer is emptied."""
        data = pa.Table.from_batches(self._buffer).combine_chunks()
        self._buffer, self._buffered = [], 0
        keys, order = sort_keys(data, self.schema, self.fields)
        self._order = order
        return data, keys, pc.sort_indices(keys, sort_keys=order)

    def _descending(self) -> tuple[bool, ...]:
        return tuple(direction == "descending" for _, direction in self._order or ())

    def _spill(self) -> None:
        data, keys, indices = self._sorted_buffer()
        if self._dir is None:
            parent = self._spill_parent
            if parent is not None:
                os.makedirs(parent, exist_ok=True)
            self._dir = tempfile.TemporaryDirectory(prefix="sort-spill-", dir=parent)
        combined = _with_keys(data, keys)
        del data, keys
        run = _Run(os.path.join(self._dir.name, f"run-{len(self._runs):05d}.arrow"), combined.num_rows)
        options = pa.ipc.IpcWriteOptions(compression=self.compression)
        key_names = [n for n in combined.schema.names if n.startswith(_KEY_PREFIX)]
        with pa.OSFile(run.path, "wb") as sink, pa.ipc.new_file(sink, combined.schema, options=options) as writer:
            for start in range(0, combined.num_rows, self.batch_rows):
                batch = combined.take(indices[start:start + self.batch_rows]).combine_chunks().to_batches()[0]
                writer.write_batch(batch)
                run.starts.append(start)
                run.first_keys.append(tuple(batch.column(n)[0].as_py() for n in key_names))
        self._runs.append(run)

    # -- reading back ----------------------------------------------------------------------------

    def sorted_batches(self, max_rows: int = 65_536) -> Iterator[pa.RecordBatch]:
        """Every added row, in order, in batches of at most ``max_rows`` rows."""
        if not self._runs:
            if not self._buffer:
                return
            data, _, indices = self._sorted_buffer()
            self.max_sorted_rows = max(self.max_sorted_rows, data.num_rows)
            for start in range(0, data.num_rows, max_rows):
                yield from data.take(indices[start:start + max_rows]).to_batches()
            return
        if self._buffer:
            self._spill()
        yield from self._merge(max_rows)

    def _merge(self, max_rows: int) -> Iterator[pa.RecordBatch]:
        descending = self._descending()
        cmp = functools.cmp_to_key(lambda a, b: _compare(a, b, descending))
        row_bytes = max(1, self._bytes // max(1, self.rows))
        range_rows = max(self.batch_rows, self.memory_bytes // row_bytes)
        bounds = _boundaries(self._runs, cmp, self.batch_rows, range_rows)
        data_names = [n for n in self._runs[0].open().schema.names if not n.startswith(_KEY_PREFIX)]
        key_names = [n for n in self._runs[0].open().schema.names if n.startswith(_KEY_PREFIX)]
        order = [(_KEY_PREFIX + name, direction) for name, direction in self._order or ()]
        edges = [None, *bounds, None]
        for low, high in zip(edges, edges[1:]):
            # rows equal to the lower boundary come first and need no sorting
            equal_parts, open_parts = [], []
            for run in self._runs:
                lo = 0 if low is None else _search(run, low, cmp, key_names, strict=False)
                eq = lo if low is None else _search(run, low, cmp, key_names, strict=True)
                hi = run.rows if high is None else _search(run, high, cmp, key_names, strict=False)
                equal_parts.extend(_slices(run, lo, eq))
                open_parts.extend(_slices(run, eq, max(eq, hi)))
            yield from _copied(equal_parts, data_names, max_rows)
            if not open_parts:
                continue
            block = pa.Table.from_batches(open_parts).combine_chunks()
            del open_parts
            self.max_sorted_rows = max(self.max_sorted_rows, block.num_rows)
            indices = pc.sort_indices(block.select(key_names), sort_keys=order)
            block = block.select(data_names)
            for start in range(0, block.num_rows, max_rows):
                yield from block.take(indices[start:start + max_rows]).to_batches()


def _copied(parts: Sequence[pa.RecordBatch], names: list[str], max_rows: int) -> Iterator[pa.RecordBatch]:
    """The rows of ``parts`` (slices of run batches) as new batches of at most ``max_rows`` rows.

    A slice keeps its whole run batch alive (keys included) while reporting only its own rows'
    bytes, so a writer buffering a row group of one-row slices would hold hundreds of run batches:
    the rows are copied instead (a merge of 20M rows with few distinct keys peaked at 480 MiB of
    Arrow memory that way)."""
    pending: list[pa.RecordBatch] = []
    count = 0
    for part in parts:
        for start in range(0, part.num_rows, max_rows):
            piece = part.slice(start, max_rows).select(names)
            if count + piece.num_rows > max_rows and pending:
                yield pa.concat_batches(pending)
                pending, count = [], 0
            pending.append(piece)
            count += piece.num_rows
    if pending:
        yield pa.concat_batches(pending)


def _with_keys(data: pa.Table, keys: pa.Table) -> pa.Table:
    for name, column in zip(keys.schema.names, keys.columns):
        data = data.append_column(_KEY_PREFIX + name, column)
    return data


def _boundaries(runs: Sequence[_Run], cmp: Any, batch_rows: int, range_rows: int) -> list[tuple]:
    """Boundary keys cutting the runs' rows into ranges of about ``range_rows`` rows, from the keys
    starting each run's batches; a key that starts two or more batches is always a boundary."""
    firsts = sorted((k for run in runs for k in run.first_keys), key=cmp)
    bounds: list[tuple] = []
    pending = 0
    i = 0
    while i < len(firsts):
        j = i + 1
        while j < len(firsts) and cmp(firsts[j]) == cmp(firsts[i]):
            j += 1
        repeated = j - i > 1
        if repeated or (i > 0 and pending >= range_rows):
            bounds.append(firsts[i])
            pending = 0
        # the rows of a repeated key are handed out unsorted: only the batch after each counts
        pending += batch_rows if repeated else (j - i) * batch_rows
        i = j
    return bounds


def _search(run: _Run, key: tuple, cmp: Any, key_names: list[str], *, strict: bool) -> int:
    """The first row of ``run`` that sorts after ``key`` (``strict``) or not before it."""
    target = cmp(key)

    def before(k: tuple) -> bool:  # k is still left of the answer
        return cmp(k) <= target if strict else cmp(k) < target

    # the last batch whose first key is left of the answer holds the answer or ends right before it
    lo, hi = 0, len(run.first_keys)
    while lo < hi:
        mid = (lo + hi) // 2
        if before(run.first_keys[mid]):
            lo = mid + 1
        else:
            hi = mid
    if lo == 0:
        return 0
    b = lo - 1
    batch = run.open().get_batch(b)
    columns = [batch.column(n) for n in key_names]
    lo, hi = 1, batch.num_rows  # row 0 is the batch's first key, already known to be left
    while lo < hi:
        mid = (lo + hi) // 2
        if before(tuple(c[mid].as_py() for c in columns)):
            lo = mid + 1
        else:
            hi = mid
    return run.starts[b] + lo


def _slices(run: _Run, start: int, stop: int) -> list[pa.RecordBatch]:
    """Rows ``[start, stop)`` of a run as record batches (only the batches they touch are read)."""
    if stop <= start:
        return []
    reader = run.open()
    out = []
    for b, first in enumerate(run.starts):
        last = run.starts[b + 1] if b + 1 < len(run.starts) else run.rows
        if last <= start or first >= stop:
            continue
        batch = reader.get_batch(b)
        lo, hi = max(start, first) - first, min(stop, last) - first
        out.append(batch.slice(lo, hi - lo))
    return out


class BatchCursor:
    """A stream of record batches handed out in consecutive runs of a given number of rows (a batch
    that straddles two runs is cut, its rest kept for the next)."""

    def __init__(self, batches: Iterator[pa.RecordBatch]) -> None:
        self._batches = iter(batches)
        self._rest: pa.RecordBatch | None = None

    def take(self, count: int) -> Iterator[pa.RecordBatch]:
        """The next ``count`` rows (fewer if the stream ends first)."""
        while count > 0:
            batch = self._rest if self._rest is not None else next(self._batches, None)
            self._rest = None
            if batch is None:
                return
            if batch.num_rows > count:
                self._rest = batch.slice(count)
                batch = batch.slice(0, count)
            count -= batch.num_rows
            if batch.num_rows:
                yield batch
