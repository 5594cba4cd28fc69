import multiprocessing as mp
import os

import pytest

from procedures.errors import AlreadyExistsError, ValidationError
from procedures.io.fileio import (
    FileAlreadyExistsError,
    FileInfo,
    FileIO,
    FileNotFoundInStorageError,
    join_path,
    local_path,
)


@pytest.fixture()
def io() -> FileIO:
    return FileIO()


def test_local_path_accepts_the_three_spellings(tmp_path):
    assert local_path("/x/y") == "/x/y"
    assert local_path("file:/x/y") == "/x/y"
    assert local_path("file:///x/y") == "/x/y"
    assert local_path("file://localhost/x/y") == "/x/y"
    assert local_path("file:/a b/c") == "/a b/c"  # Hadoop does not percent-encode
    assert local_path("s3://bucket/key") is None


@pytest.mark.parametrize("bad", ["relative/path", "file:relative", "file://otherhost/x"])
def test_local_path_rejects_relative_and_remote_file_uris(bad):
    with pytest.raises(ValidationError):
        local_path(bad)


def test_join_path_keeps_scheme_spelling():
    assert join_path("file:/w/", "db", "t") == "file:/w/db/t"
    assert join_path("file:///w", "db/") == "file:///w/db"
    assert join_path("/w", "a") == "/w/a"


@pytest.mark.parametrize("spelling", ["{p}", "file:{p}", "file://{p}"])
def test_write_read_size_exists_delete_in_every_spelling(io, tmp_path, spelling):
    path = spelling.format(p=str(tmp_path / "sub" / "f.bin"))
    io.write(path, b"hello")
    assert io.exists(path)
    assert (tmp_path / "sub" / "f.bin").read_bytes() == b"hello"
    inp = io.new_input(path)
    assert inp.read() == b"hello"
    assert inp.size() == 5
    with inp.open() as f:
        f.seek(1)
        assert f.read(3) == b"ell"
    assert io.delete(path) is True
    assert io.delete(path) is False
    assert not io.exists(path)


def test_write_without_overwrite_refuses_existing_and_keeps_content(io, tmp_path):
    path = str(tmp_path / "v1.metadata.json")
    io.write(path, b"first")
    with pytest.raises(FileAlreadyExistsError) as exc:
        io.write(path, b"second")
    assert isinstance(exc.value, AlreadyExistsError) and isinstance(exc.value, FileExistsError)
    assert exc.value.path == path
    assert (tmp_path / "v1.metadata.json").read_bytes() == b"first"
    assert sorted(os.listdir(tmp_path)) == ["v1.metadata.json"]  # no temp file left behind
    io.write(path, b"third", overwrite=True)
    assert (tmp_path / "v1.metadata.json").read_bytes() == b"third"


def test_read_missing_file_raises_typed_error(io, tmp_path):
    missing = str(tmp_path / "nope")
    with pytest.raises(FileNotFoundInStorageError) as exc:
        io.new_input(missing).read()
    assert exc.value.path == missing
    with pytest.raises(FileNotFoundError):
        io.new_input("file:" + missing).size()


def _race(args):
    path, i = args
    try:
        FileIO().write(path, f"writer-{i}".encode())
        return i
    except FileAlreadyExistsError:
        return None


@pytest.mark.slow  # several processes
def test_create_if_absent_has_exactly_one_winner_across_processes(tmp_path):
    path = str(tmp_path / "v2.metadata.json")
    with mp.get_context("spawn").Pool(4) as pool:
        results = pool.map(_race, [(path, i) for i in range(16)])
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    assert (tmp_path / "v2.metadata.json").read_bytes() == f"writer-{winners[0]}".encode()
    assert os.listdir(tmp_path) == ["v2.metadata.json"]


def test_list_prefix_is_recursive_and_respells_paths(io, tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "x.txt").write_bytes(b"12")
    (tmp_path / "a" / "b" / "y.txt").write_bytes(b"123")
    os.utime(tmp_path / "a" / "x.txt", (1_700_000_000, 1_700_000_000.25))
    listed = sorted(io.list_prefix(f"file:{tmp_path}/a"), key=lambda f: f.path)
    assert [(f.path, f.size) for f in listed] == [
        (f"file:{tmp_path}/a/b/y.txt", 3),
        (f"file:{tmp_path}/a/x.txt", 2),
    ]
    assert listed[1].mtime_ms == 1_700_000_000_250
    plain = sorted(f.path for f in io.list_prefix(str(tmp_path / "a") + "/"))
    assert plain == [f"{tmp_path}/a/b/y.txt", f"{tmp_path}/a/x.txt"]
    assert list(io.list_prefix(str(tmp_path / "missing"))) == []
    assert list(io.list_prefix(str(tmp_path / "a" / "x.txt"))) == [
        FileInfo(str(tmp_path / "a" / "x.txt"), 2, 1_700_000_000_250)
    ]


def test_delete_many_counts_and_reports_failures(io, tmp_path):
    paths = []
    for i in range(20):
        p = tmp_path / f"f{i}"
        p.write_bytes(b"x")
        paths.append(str(p))
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "inner").write_bytes(b"x")
    result = io.delete_many(paths + [str(tmp_path / "gone"), str(tmp_path / "dir")], max_workers=4)
    assert result.deleted == 20
    assert [p for p, _ in result.failures] == [str(tmp_path / "dir")]  # a directory is not a file
    assert sorted(os.listdir(tmp_path)) == ["dir"]
    assert io.delete_many([]).deleted == 0


def test_rename_if_absent(io, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "out" / "dst"
    src.write_bytes(b"payload")
    io.rename_if_absent(str(src), f"file://{dst}")
    assert dst.read_bytes() == b"payload" and not src.exists()
    src.write_bytes(b"other")
    with pytest.raises(FileAlreadyExistsError):
        io.rename_if_absent(str(src), str(dst))
    assert dst.read_bytes() == b"payload" and src.read_bytes() == b"other"
    with pytest.raises(FileNotFoundInStorageError):
        io.rename_if_absent(str(tmp_path / "none"), str(tmp_path / "z"))


def test_output_stream_refuses_existing_file(io, tmp_path):
    path = str(tmp_path / "d" / "data.parquet")
    with io.new_output(path).create() as out:
        out.write(b"abc")
    assert io.new_input(path).read() == b"abc"
    with pytest.raises(FileAlreadyExistsError):
        io.new_output(path).create()


def test_list_dir_names_children(io, tmp_path):
    (tmp_path / "ns").mkdir()
    (tmp_path / "f").write_bytes(b"")
    assert io.list_dir(str(tmp_path)) == [("f", False), ("ns", True)]
    assert io.list_dir(str(tmp_path / "missing")) == []
