"""Row-level changes on Spark: the engine under SQL ``DELETE``, ``UPDATE`` and ``MERGE INTO``.

The front end (:mod:`procedures.frontend.sqldml`) reads the table's rows with their ``_file``/``_pos``
metadata columns (:func:`read_target`) and hands over two DataFrames computed from them:

* ``touched``: the ``_file``/``_pos`` of every target row the statement deletes or updates;
* ``new_rows``: the rows it writes (updated rows with their new values, inserted rows), in the
  table's columns, plus ``_row_id``/``_last_updated_sequence_number`` on v3 tables.

:func:`apply_row_changes` then commits them as the table's ``write.<op>.mode`` says, as Iceberg
Java's Spark writes do: copy-on-write rewrites every data file holding a touched row (its untouched
rows and the new rows are written to new files, one ``overwrite`` commit); merge-on-read writes
position deletes (v2) or deletion vectors (v3) for the touched rows and appends the new rows (one
row-delta commit).  Both validate concurrent commits by the table's isolation level
(:mod:`procedures.core.kernel.row_level`).  Everything runs through the DataFrame API, so a Spark
Connect session works as a classic one.
"""

from __future__ import annotations

from typing import Any

from procedures.catalog.base import Table
from procedures.core.kernel.row_level import (
    COPY_ON_WRITE, ConflictCheck, CopyOnWriteCommit, MergeOnReadCommit, write_mode,
)
from procedures.errors import CommitStateUnknownError
from procedures.spark.dataframes import functions
from procedures.spark.dml import FilterMatch, commit_write, file_scoped_deletes, match_files, write_position_changes
from procedures.spark.read import read_table
from procedures.spark.session import job_description
from procedures.spark.sql_quoting import quote_name
from procedures.spark.write import delete_quietly, distribution_of, write_dataframe
from procedures.spec.expressions import ALWAYS_TRUE, Expression
from procedures.spec.metadata_columns import row_lineage_names

__all__ = ["KEYS", "target_columns", "read_target", "apply_row_changes"]

#: the metadata columns that locate a target row
KEYS = ("_file", "_pos")


def target_columns(t: Table) -> tuple[list[str], tuple[str, ...]]:
    """The table's column names and the metadata columns a row-level change reads with them
    (``_file``, ``_pos`` and, on v3, the row lineage columns the rewritten rows keep)."""
    md = t.metadata
    return [f.name for f in md.schema().fields], KEYS + tuple(row_lineage_names(md.format_version))


def read_target(spark: Any, t: Table) -> Any:
    """The rows of the table's current snapshot with the metadata columns of :func:`target_columns`."""
    _, meta = target_columns(t)
    return read_table(spark, t, snapshot_id=t.metadata.current_snapshot_id, metadata_columns=meta)


def _positions(touched: Any) -> dict[str, list[int]]:
    hits: dict[str, list[int]] = {}
    for r in touched.select(*KEYS).collect():
        hits.setdefault(r[0], []).append(r[1])
    return hits


def apply_row_changes(spark: Any, t: Table, target: Any, touched: Any, new_rows: Any | None, *, op: str,
                      check: ConflictCheck, filter: Expression) -> Table:
    """Commit a row-level change of ``t`` (see the module doc); returns the committed table, or ``t``
    when nothing changes.  ``target`` is :func:`read_target`'s frame the other two were computed
    from; ``filter`` (a superset of the touched rows' files, ``true`` when unknown) prunes the
    files planned for the commit.  Files written for a change that does not commit are deleted."""
    md = t.metadata
    F = functions(spark)
    columns, meta = target_columns(t)
    lineage = list(meta[len(KEYS):])
    mode = write_mode(md, op)
    distribution = distribution_of(spark, t, op)
    start = md.current_snapshot_id
    hits = _positions(touched)
    has_new = new_rows is not None and bool(new_rows.limit(1).collect())
    if not hits and not has_new:
        return t
    match = match_files(t, filter, spark) if hits else FilterMatch(start)
    files = {f.file_path: f for f in match.full + match.partial}
    if set(hits) - set(files):
        # Spark matched a row the filter's pruning did not expect (the two evaluate a predicate
        # differently): plan every file rather than lose the change
        match = match_files(t, ALWAYS_TRUE, spark)
        files = {f.file_path: f for f in match.full + match.partial}
    written: list[str] = []
    try:
        if mode == COPY_ON_WRITE:
            affected = sorted(hits)
            with job_description(spark, f"{op.upper()} {t.name}: rewrite {len(affected)} file(s) (copy-on-write)"):
                kept = target.where(F.col("_file").isin(affected)).join(touched.select(*KEYS), list(KEYS), "left_anti")
                rows = kept.select(*[F.col(quote_name(c)) for c in columns + lineage])
                if has_new:
                    rows = rows.unionByName(new_rows.select(*[F.col(quote_name(c)) for c in columns + lineage]))
                new_files = write_dataframe(spark, t, rows, row_lineage=bool(lineage), distribution=distribution,
                                            description=f"{op.upper()} {t.name}: write rows")
            written = [f.file_path for f in new_files]
            removed = [files[p] for p in affected]
            commit_op = CopyOnWriteCommit(
                add_files=new_files, remove_paths=affected + file_scoped_deletes(match, removed),
                rewritten=affected, starting_snapshot_id=start, check=check,
            )
        else:
            with job_description(spark, f"{op.upper()} {t.name}: write deletes and rows (merge-on-read)"):
                new_files = []
                if has_new:
                    new_files = write_dataframe(spark, t, new_rows.select(*[F.col(quote_name(c)) for c in columns + lineage]),
                                                row_lineage=bool(lineage), distribution=distribution,
                                                description=f"{op.upper()} {t.name}: write rows")
                written = [f.file_path for f in new_files]
                new_deletes, replaced = write_position_changes(t, hits, files.values(), match.deletes,
                                                                absorb_file_scoped=True)
                written += [d.file_path for d in new_deletes]
            commit_op = MergeOnReadCommit(add_rows=new_files, add_deletes=new_deletes, remove_deletes=replaced,
                                          starting_snapshot_id=start, check=check)
        return commit_write(spark, t, [commit_op])
    except CommitStateUnknownError:
        raise
    except BaseException:
        # nothing of the change is visible: what it wrote goes (the commit loop deletes only its own files)
        delete_quietly(t.io, sorted(set(written)))
        raise
