"""The conflict rules of row-level commits (core/kernel/row_level.py) by isolation level, without Spark,
and the DML front end's reading of statements (sqldml.parse)."""

from __future__ import annotations

import pytest

from procedures.core.kernel.operations import DeleteFiles, FastAppend, RowDelta
from procedures.core.kernel.row_level import (
    SERIALIZABLE, SNAPSHOT, ConflictCheck, CopyOnWriteCommit, MergeOnReadCommit, conflict_check, write_mode,
)
from procedures.core.kernel.transaction import commit
from procedures.errors import CommitConflictError, ValidationError
from procedures.frontend import sqldml
from procedures.frontend.sqltext import table_parts
from procedures.spec.expressions import eq
from procedures.core.kernel.builder import new_table_metadata
from tests.unit.test_core_commit import (  # noqa: F401 -- catalog is a fixture
    FAST, SCHEMA, catalog, data_file, live_paths, make_table, pos_delete,
)

#: data_file(t, i) is in partition (i % 4,) of bucket[4](id); id 6 is in bucket 1 (files 1, 5, 9), not in
#: bucket 2 (file 6)
IN_BUCKET_1 = eq("id", 6)


def _table_with_two_files(catalog):
    t = make_table(catalog)
    t = commit(t, [FastAppend([data_file(t, 1), data_file(t, 2)])], policy=FAST)
    return t, t.metadata.current_snapshot_id


def _cow(t, start, level, filter=None):
    return CopyOnWriteCommit(add_files=[data_file(t, 9)], remove_paths=[data_file(t, 1).file_path],
                             rewritten=[data_file(t, 1).file_path], starting_snapshot_id=start,
                             check=ConflictCheck("update", level, filter if filter is not None else IN_BUCKET_1))


def _concurrently(catalog, op):
    commit(catalog.load_table(("db", "t")), [op], policy=FAST)


@pytest.mark.parametrize("level,conflicts", [(SERIALIZABLE, True), (SNAPSHOT, False)])
def test_a_concurrent_append_in_the_filter_conflicts_only_when_serializable(catalog, level, conflicts):
    t, start = _table_with_two_files(catalog)
    # same partition, no column bounds: the new file may hold id = 6
    _concurrently(catalog, FastAppend([data_file(t, 5)]))
    if conflicts:
        with pytest.raises(CommitConflictError, match="serializable isolation.*new data file"):
            commit(t.refresh(), [_cow(t, start, level)], policy=FAST)
        assert data_file(t, 1).file_path in _live(t)
    else:
        done = commit(t.refresh(), [_cow(t, start, level)], policy=FAST)
        assert _live(done) == {data_file(t, i).file_path for i in (2, 5, 9)}


def test_an_append_outside_the_filter_partitions_does_not_conflict(catalog):
    t, start = _table_with_two_files(catalog)
    _concurrently(catalog, FastAppend([data_file(t, 6)]))  # bucket 2: cannot hold id = 6
    done = commit(t.refresh(), [_cow(t, start, SERIALIZABLE)], policy=FAST)
    assert data_file(t, 6).file_path in _live(done)


@pytest.mark.parametrize("level", [SERIALIZABLE, SNAPSHOT])
def test_a_concurrent_delete_of_a_rewritten_file_or_new_deletes_for_it_conflict(catalog, level):
    t, start = _table_with_two_files(catalog)
    _concurrently(catalog, DeleteFiles([data_file(t, 1).file_path]))
    with pytest.raises(CommitConflictError, match="was removed"):
        commit(t.refresh(), [_cow(t, start, level)], policy=FAST)
    catalog.drop_table(("db", "t"))
    t, start = _table_with_two_files(catalog)
    _concurrently(catalog, RowDelta(add_deletes=[pos_delete(t, data_file(t, 1), 7)]))
    with pytest.raises(CommitConflictError, match="applies to a data file it rewrites"):
        commit(t.refresh(), [_cow(t, start, level)], policy=FAST)


def test_merge_on_read_conflicts_on_deletes_in_the_filter_not_elsewhere(catalog):
    t, start = _table_with_two_files(catalog)
    mine = pos_delete(t, data_file(t, 2), 8)
    _concurrently(catalog, RowDelta(add_deletes=[pos_delete(t, data_file(t, 1), 7)]))
    # the other writer's delete file is in the filter's partition (bucket 1)
    op = MergeOnReadCommit(add_rows=[], add_deletes=[mine], remove_deletes=[], starting_snapshot_id=start,
                           check=ConflictCheck("delete", SNAPSHOT, IN_BUCKET_1))
    with pytest.raises(CommitConflictError, match="new delete file"):
        commit(t.refresh(), [op], policy=FAST)
    # with no pushed-down filter (true) only deletes for files it deletes from would conflict
    op = MergeOnReadCommit(add_rows=[], add_deletes=[mine], remove_deletes=[], starting_snapshot_id=start,
                           check=ConflictCheck("delete", SNAPSHOT))
    done = commit(t.refresh(), [op], policy=FAST)
    assert mine.file_path in _live(done)


def test_modes_and_levels_are_read_from_table_properties():
    md, _ = new_table_metadata(schema=SCHEMA, location="/tmp/nowhere")
    assert write_mode(md, "merge") == "copy-on-write"
    assert conflict_check(md, "update").isolation_level == SERIALIZABLE
    md, _ = new_table_metadata(schema=SCHEMA, location="/tmp/nowhere", properties={
        "write.update.isolation-level": "Snapshot", "write.delete.mode": "merge-on-read"})
    assert conflict_check(md, "update").isolation_level == SNAPSHOT
    assert write_mode(md, "delete") == "merge-on-read"
    with pytest.raises(ValidationError, match="write.merge.isolation-level"):
        new_md, _ = new_table_metadata(schema=SCHEMA, location="/tmp/nowhere",
                                       properties={"write.merge.isolation-level": "none"})
        conflict_check(new_md, "merge")
    v1, _ = new_table_metadata(schema=SCHEMA, location="/tmp/nowhere", format_version=1,
                               properties={"write.update.mode": "merge-on-read"})
    with pytest.raises(ValidationError, match="v2"):
        write_mode(v1, "update")


def _live(t):
    return live_paths(t)


@pytest.mark.parametrize("text,parts", [
    ("INSERT OVERWRITE local.db.t SELECT 1", ("local", "db", "t")),
    ("insert overwrite table local . db.t values (1)", ("local", "db", "t")),
    ("INSERT OVERWRITE `local`.db.t SELECT 1", ("local", "db", "t")),
    ("INSERT OVERWRITE other.db.t SELECT 1", ("other", "db", "t")),
])
def test_insert_overwrite_into_a_catalog_named_local_is_read_as_a_table(text, parts):
    assert sqldml.is_dml(text)
    assert table_parts(sqldml.parse(text).this) == parts


def test_only_dml_statements_are_routed():
    assert not sqldml.is_dml("INSERT INTO local.db.t VALUES (1)")
    assert not sqldml.is_dml("SELECT * FROM local.db.t")
    assert sqldml.is_dml("  merge into a.b.c t using s on t.id = s.id when matched then delete")
