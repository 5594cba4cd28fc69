"""procedures/core/kernel/paths.py on the spellings that decide what garbage collection may delete: how a
location splits into scheme, authority and path, the scheme and authority maps, both readings of a
percent-escape, and the local-path and join helpers.  Written against the survivors of mutation
testing (docs/testing.md): each case pins a decision a plausible slip would get wrong."""

from __future__ import annotations

import pytest

from procedures.core.kernel.paths import (
    NormalizedPath, is_within, join_path, local_path, normalize_path, path_keys, relative_path,
)
from procedures.errors import ValidationError


@pytest.mark.parametrize("text, key", [
    ("C:/wh/t", (None, None, "C:/wh/t")),         # one letter before ':' is a Windows drive, not a scheme
    ("ab:/wh/t", ("ab", None, "/wh/t")),           # two letters are a scheme
    ("mailto:x", ("mailto", None, "x")),           # a scheme with no slash after it at all
    ("a/b:c", (None, None, "a/b:c")),              # a ':' after the first '/' is part of the path
    ("hdfs://nn:8020", ("hdfs", "nn:8020", "")),   # an authority with nothing after it
    ("a/../../../x", (None, None, "../../x")),     # a relative path keeps every '..' it cannot resolve
    ("../../x", (None, None, "../../x")),
    ("/", (None, None, "/")),
    ("/a/b/", (None, None, "/a/b")),
])
def test_split_and_resolve(text, key):
    assert normalize_path(text).key() == key


def test_equal_schemes_and_authorities_map_only_what_they_name():
    assert normalize_path("gs://b/x", {"gs": "gcs"}).scheme == "gcs"
    assert normalize_path("hdfs://n/x", {"gs": "gcs"}).scheme == "hdfs"  # not in the map: kept
    # authorities are mapped as written, then lower-cased; one not in the map is kept
    assert normalize_path("s3://Bucket/x", None, {"Bucket": "Other"}).authority == "other"
    assert normalize_path("s3://b1/x", None, {"b2": "b3"}).authority == "b1"


def test_both_readings_use_the_maps():
    assert path_keys("gs://b1/a%20b", {"gs": "gcs"}, {"b1": "main"}) == (
        NormalizedPath("gcs", "main", "/a%20b"), NormalizedPath("gcs", "main", "/a b"))
    # a '%' that is no escape decodes to itself: one reading only
    assert path_keys("/wh/100%") == (NormalizedPath(None, None, "/wh/100%"),)


def test_is_within_maps_both_the_location_and_the_path():
    maps = ({"gs": "gcs"}, {"b1": "main"})
    assert is_within("gs://b1/t", "gcs://main/t/x", *maps)
    assert is_within("gcs://main/t", "gs://b1/t/x", *maps)
    assert not is_within("gs://b1/t", "gcs://main/t/x")


def test_locations_ending_in_any_letter():
    # the location's own last characters must not be stripped along with a trailing slash
    assert is_within("/wh/TAX", "/wh/TAX/f")
    assert relative_path("/wh/TAX", "/wh/TAX/data/f") == "data/f"
    assert relative_path("/wh/t", "/wh/t/Xdata/f") == "Xdata/f"
    assert relative_path("/wh/t ", "/wh/t /x") == "x"  # a name may end in a space
    assert relative_path("/", "/a/b") == "a/b"


@pytest.mark.parametrize("path, expected", [
    ("file:///a/b", "/a/b"),
    ("file://localhost/a/b/c", "/a/b/c"),
    ("file:/a", "/a"),
    ("/a", "/a"),
    ("s3://b/k:v", None),        # a ':' later in the path does not hide the scheme
    ("git+ssh://h/x", None),     # '+', '-' and '.' may follow a scheme's first letter
    ("x-y.z://h/x", None),
])
def test_local_path(path, expected):
    assert local_path(path) == expected


@pytest.mark.parametrize("path, message", [
    ("file://host/a", "Cannot use file URI 'file://host/a': only local files (no host) are supported"),
    ("file://LOCALHOST/a", "only local files"),
    ("file:a", "Cannot use file URI 'file:a': the path must be absolute"),
    ("a/b", "Cannot use relative path 'a/b': Iceberg locations must be absolute paths or URIs"),
    ("C:/a", "Cannot use relative path 'C:/a'"),   # a drive letter is no scheme
    ("1ab:/a", "Cannot use relative path"),        # a scheme starts with a letter
    ("a b:/a", "Cannot use relative path"),        # and holds no space
])
def test_local_path_refusals(path, message):
    with pytest.raises(ValidationError) as e:
        local_path(path)
    assert message in str(e.value)


@pytest.mark.parametrize("base, parts, joined", [
    ("s3://b/t/", ("data",), "s3://b/t/data"),
    ("/wh/TAX", ("f",), "/wh/TAX/f"),
    ("/", ("x",), "/x"),
    ("/wh", ("/data/", "Xf"), "/wh/data/Xf"),
    ("/wh ", ("f",), "/wh /f"),
])
def test_join_path(base, parts, joined):
    assert join_path(base, *parts) == joined
