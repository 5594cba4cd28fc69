"""Issue 30 (part B): the pure overlap rule of :mod:`procedures.core.kernel.table_overlap` -- which table folders
may be used, which folders garbage collection may delete in, and which files belong to another table."""

from __future__ import annotations

import pytest

from procedures.core.kernel.table_overlap import (
    ForeignFolders, TableFolders, check_no_overlap, gc_roots, is_storage_root, overlap_problems, write_paths,
)
from procedures.errors import ValidationError

WH = "/wh"
T = TableFolders("db.t", "/wh/db/t")
U = TableFolders("db.u", "/wh/db/u", (("write.data.path", "/data/u"),))


@pytest.mark.parametrize("location, clash", [
    ("/wh/db/t/inner", "db.t"),                 # inside another table
    ("/wh/db/t", "db.t"),                       # the same folder
    ("file:///wh/db/t/", "db.t"),               # the same folder, spelt otherwise
    ("/wh/db/x/../t/sub", "db.t"),              # '..' landing inside
    ("/wh/db/t/%2E%2E/t/s", "db.t"),            # inside under one reading of the escapes
    ("/data", "db.u"),                          # holding another table's write.data.path
    ("/data/u/deeper", "db.u"),                 # inside another table's write.data.path
])
def test_a_location_overlapping_another_table_is_refused(location, clash):
    problems = overlap_problems(TableFolders("db.new", location), [T, U], WH)
    assert problems and all(clash in p for p in problems)
    with pytest.raises(ValidationError) as e:
        check_no_overlap(TableFolders("db.new", location), [T, U], WH, action="create table db.new")
    assert "db.new" in str(e.value) and clash in str(e.value) and "create table db.new" in str(e.value)


@pytest.mark.parametrize("location", ["/wh", "/", "file:/", "/wh/..", "s3://bucket", "s3a://bucket/"])
def test_a_location_at_or_above_the_warehouse_or_a_root_is_refused(location):
    assert overlap_problems(TableFolders("db.new", location), [], WH)


@pytest.mark.parametrize("location", ["/wh/db/tt", "/wh/db/new", "/wh/db/t2/x", "/elsewhere/new", "s3://b/wh/db/t"])
def test_separate_folders_are_fine(location):
    assert overlap_problems(TableFolders("db.new", location), [T, U], WH) == []


@pytest.mark.parametrize("prop, value", [("write.data.path", "/wh/db/t/data"), ("write.data.path", "/"),
                                         ("write.metadata.path", "/wh/db/u/metadata"),
                                         ("write.object-storage.path", "/wh"), ("write.folder-storage.path", "/data")])
def test_write_paths_follow_the_same_rule(prop, value):
    candidate = TableFolders("db.new", "/wh/db/new", write_paths({prop: value}))
    problems = overlap_problems(candidate, [T, U], WH)
    assert problems and prop in problems[0]


def test_a_table_never_overlaps_itself_and_its_own_write_path_may_lie_inside_it():
    own = TableFolders("db.t", "/wh/db/t", (("write.data.path", "/wh/db/t/custom"),))
    assert overlap_problems(own, [T, U], WH) == []


def test_no_warehouse_means_only_tables_and_roots_count():
    assert overlap_problems(TableFolders("db.new", "/anywhere/new"), [T], None) == []
    assert overlap_problems(TableFolders("db.new", "/"), [], None)


def test_storage_roots():
    assert is_storage_root("/") and is_storage_root("file:///") and is_storage_root("s3://b")
    assert not is_storage_root("/wh") and not is_storage_root("s3://b/k")


def test_gc_roots_drop_write_paths_holding_other_tables_the_warehouse_or_a_root():
    own = TableFolders("db.t", "/wh/db/t", (("write.data.path", "/"), ("write.metadata.path", "/wh/."),
                                            ("write.object-storage.path", "/data"),
                                            ("write.folder-storage.path", "/mine/t")))
    roots, dropped = gc_roots(own, [T, U], WH)
    assert roots == ("/wh/db/t", "/mine/t")
    assert len(dropped) == 3 and "root of a file system" in dropped[0] and "warehouse" in dropped[1] \
        and "db.u" in dropped[2]


def test_gc_roots_keep_a_location_holding_another_table_but_not_one_holding_the_warehouse():
    outer = TableFolders("db.outer", "/wh/db/outer")
    inner = TableFolders("db.inner", "/wh/db/outer/inner")
    assert gc_roots(outer, [inner], WH)[0] == ("/wh/db/outer",)
    assert gc_roots(TableFolders("db.top", "/wh"), [], WH)[0] == ()
    assert gc_roots(TableFolders("db.top", "/"), [], None)[0] == ()


def test_foreign_folders_give_each_file_to_the_most_specific_table():
    outer = ForeignFolders(["/wh/db/outer"], [TableFolders("db.inner", "/wh/db/outer/inner")], skip="db.outer")
    assert outer.owner("/wh/db/outer/inner/data/f.parquet") == "db.inner"
    assert outer.owner("file:/wh/db/outer/data/../inner/x") == "db.inner"
    assert outer.owner("/wh/db/outer/data/f.parquet") is None
    assert outer.owner("/wh/db/outer/innerx/f.parquet") is None
    inner = ForeignFolders(["/wh/db/outer/inner"], [TableFolders("db.outer", "/wh/db/outer")], skip="db.inner")
    assert inner.owner("/wh/db/outer/inner/data/f.parquet") is None  # the inner table's own file
    shared = ForeignFolders(["/wh/db/s"], [TableFolders("db.s2", "/wh/db/s")])
    assert shared.owner("/wh/db/s/data/f.parquet") == "db.s2"  # a shared folder is never cleaned


def test_foreign_folders_keep_only_what_overlaps_the_run():
    apart = ForeignFolders(["/wh/db/t"], [TableFolders(f"db.u{i}", f"/wh/db/u{i}") for i in range(50)])
    assert not apart and apart.owner("/wh/db/t/data/f.parquet") is None
    skipped = ForeignFolders(["/wh/db/t"], [TableFolders("db.t", "/wh/db/t")], skip="db.t")
    assert not skipped
