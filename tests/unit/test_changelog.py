"""create_changelog_view's core: option refusals, the snapshot range (ids, timestamps, replace
snapshots skipped), change planning (added, removed and re-deleted files) and the row rules."""

from __future__ import annotations

from dataclasses import replace

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.changelog.changes import (
    DELETE,
    INSERT,
    UPDATE_AFTER,
    UPDATE_BEFORE,
    ChangelogOptions,
    changelog_snapshots,
    compute_updates,
    default_view_name,
    parse_changelog_options,
    plan_changelog,
    remove_carryovers,
    remove_net_carryovers,
    resolve_columns,
    row_key,
    unorderable_columns,
)
from procedures.core.kernel.operations import DeleteFiles, FastAppend, RewriteFiles, RowDelta
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.errors import NoSuchSnapshotError, ValidationError
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
from procedures.spec.schema import Schema
from procedures.spec.types import INT, LONG, STRING, ListType, MapType, NestedField, StructType

FAST = RetryPolicy(num_retries=2, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=60_000)
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "data", STRING)))


# ------------------------------------------------------------------------------ options
def test_options_parse_and_refusals():
    assert parse_changelog_options(None) == ChangelogOptions()
    got = parse_changelog_options({"Start-Snapshot-Id": "5", "end-timestamp": "9", "split-size": "1"})
    assert got == ChangelogOptions(start_snapshot_id=5, end_timestamp=9)
    for bad, text in [
        ({"snapshot-id": "1"}, "Cannot set neither"),
        ({"branch": "b"}, "Cannot set neither"),
        ({"start-snapshot-id": "1", "start-timestamp": "1"}, "both start-snapshot-id and start-timestamp"),
        ({"end-snapshot-id": "1", "end-timestamp": "1"}, "both end-snapshot-id and end-timestamp"),
        ({"start-timestamp": "3", "end-timestamp": "3"}, "greater than end-timestamp"),
        ({"end-snapshot-id": "x"}, "end-snapshot-id='x'"),
    ]:
        with pytest.raises(ValidationError, match=text):
            parse_changelog_options(bad)


# ------------------------------------------------------------------------------ tables
@pytest.fixture()
def table(tmp_path):
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/t", format_version=2)
    return cat.create_table(("db", "t"), md)


def _file(t, name: str, records: int = 10) -> DataFile:
    return DataFile(f"{t.location}/data/{name}.parquet", FileFormat.PARQUET, (), records, 100, spec_id=0)


def _pos(t, name: str, target: DataFile) -> DataFile:
    return DataFile(f"{t.location}/data/{name}.parquet", FileFormat.PARQUET, (), 1, 10,
                    content=FileContent.POSITION_DELETES, referenced_data_file=target.file_path, spec_id=0)


def _timed(t, times: list[int]):
    """The table with its snapshots' commit times replaced (snapshot order kept)."""
    snaps = [replace(s, timestamp_ms=ms) for s, ms in zip(t.metadata.snapshots, times)]
    return replace(t.metadata, snapshots=snaps)


def _name(df: DataFile) -> str:
    return df.file_path.rsplit("/", 1)[1].removesuffix(".parquet")


def test_range_by_ids_skips_replace_snapshots(table):
    t = table
    a, b, c = _file(t, "a"), _file(t, "b"), _file(t, "c")
    t = commit(t, [FastAppend([a])], policy=FAST)
    t = commit(t, [FastAppend([b])], policy=FAST)
    t = commit(t, [RewriteFiles(remove_files=[a, b], add_files=[c])], policy=FAST)
    t = commit(t, [DeleteFiles([c.file_path])], policy=FAST)
    s1, s2, s3, s4 = (s.snapshot_id for s in t.metadata.snapshots)
    md = t.metadata
    assert [s.snapshot_id for s in changelog_snapshots(md, ChangelogOptions())] == [s1, s2, s4]
    assert [s.snapshot_id for s in changelog_snapshots(md, ChangelogOptions(start_snapshot_id=s1))] == [s2, s4]
    assert [s.snapshot_id for s in changelog_snapshots(md, ChangelogOptions(end_snapshot_id=s2))] == [s1, s2]
    with pytest.raises(ValidationError, match="not a parent ancestor"):  # Java: the start must precede the end
        changelog_snapshots(md, ChangelogOptions(start_snapshot_id=s4))
    with pytest.raises(NoSuchSnapshotError, match="Cannot find the end snapshot: 77"):
        changelog_snapshots(md, ChangelogOptions(end_snapshot_id=77))
    with pytest.raises(NoSuchSnapshotError, match="77"):
        changelog_snapshots(md, ChangelogOptions(start_snapshot_id=77))
    with pytest.raises(ValidationError, match="not a parent ancestor"):
        changelog_snapshots(md, ChangelogOptions(start_snapshot_id=s2, end_snapshot_id=s1))

    # the replace snapshot has no changes of its own; the delete of c is planned at s4 (ordinal 2)
    tasks = plan_changelog(md, t.io, changelog_snapshots(md, ChangelogOptions()))
    got = sorted((_name(x.data_file), x.kind, x.ordinal, x.snapshot_id) for x in tasks)
    assert got == [("a", INSERT, 0, s1), ("b", INSERT, 1, s2), ("c", DELETE, 2, s4)]


def test_range_by_timestamps(table):
    t = table
    for n in "abc":
        t = commit(t, [FastAppend([_file(t, n)])], policy=FAST)
    s1, s2, s3 = (s.snapshot_id for s in t.metadata.snapshots)
    md = _timed(t, [1000, 2000, 3000])

    def ids(**kw):
        return [s.snapshot_id for s in changelog_snapshots(md, ChangelogOptions(**kw))]

    assert ids(start_timestamp=1000) == [s2, s3]  # a commit at the start time is excluded
    assert ids(start_timestamp=1500) == [s2, s3]
    assert ids(start_timestamp=999) == [s1, s2, s3]
    assert ids(end_timestamp=2000) == [s1, s2]
    assert ids(start_timestamp=1000, end_timestamp=2999) == [s2]
    assert ids(start_timestamp=3001) == []  # after the last commit
    assert ids(end_timestamp=999) == []  # before the first
    assert ids(start_timestamp=2100, end_timestamp=2900) == []  # no commit in between


def test_merge_on_read_changes_are_planned(table):
    t = table
    a, b = _file(t, "a"), _file(t, "b")
    t = commit(t, [FastAppend([a, b])], policy=FAST)
    p1 = _pos(t, "p1", a)
    t = commit(t, [RowDelta(add_deletes=[p1])], policy=FAST)
    n = _file(t, "n")
    p2 = _pos(t, "p2", a)
    t = commit(t, [RowDelta(add_rows=[n], add_deletes=[p2])], policy=FAST)
    t = commit(t, [DeleteFiles([a.file_path])], policy=FAST)
    md = t.metadata
    tasks = plan_changelog(md, t.io, changelog_snapshots(md, ChangelogOptions()))
    got = {(_name(x.data_file), x.ordinal): x for x in tasks}
    assert sorted(got) == [("a", 0), ("a", 1), ("a", 2), ("a", 3), ("b", 0), ("n", 2)]
    assert got[("a", 0)].kind == INSERT and got[("a", 0)].after == ()
    assert got[("a", 1)].kind == "DIFF"
    assert [_name(d.data_file) for d in got[("a", 1)].before] == []
    assert [_name(d.data_file) for d in got[("a", 1)].after] == ["p1"]
    assert sorted(_name(d.data_file) for d in got[("a", 2)].after) == ["p1", "p2"]
    # the removed file deletes the rows it still had: both delete files apply before the removal
    assert got[("a", 3)].kind == DELETE and sorted(_name(d.data_file) for d in got[("a", 3)].before) == ["p1", "p2"]
    assert got[("n", 2)].kind == INSERT and got[("n", 2)].after == ()


# ------------------------------------------------------------------------------ columns
def test_columns():
    schema = Schema((NestedField(1, "id", INT, True), NestedField(2, "m", MapType(3, STRING, 4, INT)),
                     NestedField(5, "s", StructType((NestedField(6, "l", ListType(7, MapType(8, INT, 9, INT))),))),
                     NestedField(10, "ok", ListType(11, STRING))))
    assert unorderable_columns(schema) == ["m", "s"]
    assert resolve_columns(["ID", "`ok`"], ["id", "ok"], case_sensitive=False) == ["id", "ok"]
    with pytest.raises(ValidationError, match="'ID'"):
        resolve_columns(["ID"], ["id"], case_sensitive=True)
    assert default_view_name("events") == "`events_changes`"


# ------------------------------------------------------------------------------ row rules
def test_row_key_nan_equal():
    assert row_key((float("nan"), 1), [0]) == row_key((float("nan"), 2), [0])


def test_remove_carryovers_counts():
    keys = ["a", "a", "b", "b", "b", "c", "c", "c", "d"]
    types = [DELETE, INSERT, DELETE, DELETE, INSERT, DELETE, INSERT, INSERT, INSERT]
    assert remove_carryovers(keys, types) == [(2, DELETE), (7, INSERT), (8, INSERT)]
    assert remove_carryovers(["x"], [DELETE]) == [(0, DELETE)]


def test_remove_net_carryovers():
    # one key across ordinals: insert, delete, insert -> the last insert survives
    assert remove_net_carryovers(["k"] * 3, [INSERT, DELETE, INSERT]) == [(2, INSERT)]
    # two inserts of the same row stay two, as copies of the first
    assert remove_net_carryovers(["k", "k"], [INSERT, INSERT]) == [(0, INSERT), (0, INSERT)]
    assert remove_net_carryovers(["k", "k", "j"], [DELETE, INSERT, DELETE]) == [(2, DELETE)]
    assert remove_net_carryovers(["k", "k", "k"], [INSERT, INSERT, DELETE]) == [(0, INSERT)]


def test_compute_updates():
    keys = [("1", "a"), ("1", "b"), ("2", "c"), ("2", "c"), ("3", "d")]
    ids = [1, 1, 2, 2, 3]
    types = [DELETE, INSERT, DELETE, INSERT, INSERT]
    assert compute_updates(keys, ids, types, ["id"]) == [(0, UPDATE_BEFORE), (1, UPDATE_AFTER), (4, INSERT)]
    with pytest.raises(ValidationError, match=r"same identifier fields\(\[id\]\)"):
        compute_updates([("1", "a"), ("1", "b")], [1, 1], [DELETE, DELETE], ["id"])
