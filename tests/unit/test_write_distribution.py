"""The distribution mode of an append (procedures.core.kernel.distribution): Java's precedence and
adjustments, our default, and clear errors for a bad value."""

from __future__ import annotations

import pytest

from procedures.core.kernel.distribution import HASH, NONE, RANGE, append_distribution, row_change_distribution
from procedures.errors import ValidationError

PROP = "write.distribution-mode"


@pytest.mark.parametrize("props, requested, partitioned, sorted_, expected", [
    ({}, None, True, True, NONE),                      # unset: no shuffle (Java would derive range)
    ({PROP: "hash"}, None, True, False, HASH),
    ({PROP: " HASH "}, None, True, False, HASH),       # trimmed, any case, as Java reads it
    ({PROP: "hash"}, None, False, True, NONE),         # hash on an unpartitioned table is none
    ({PROP: "range"}, None, False, False, NONE),       # range with nothing to order by is none
    ({PROP: "range"}, None, False, True, RANGE),       # a sorted unpartitioned table keeps range
    ({PROP: "range"}, None, True, False, RANGE),
    ({PROP: "hash"}, "none", True, False, NONE),       # the session's mode wins over the table's
    ({PROP: "none"}, "range", True, True, RANGE),
    ({}, "", True, False, NONE),                       # an empty session value is unset
])
def test_modes(props, requested, partitioned, sorted_, expected):
    assert append_distribution(props, requested, partitioned=partitioned, sorted_=sorted_) == expected


def test_bad_values_name_where_they_come_from():
    with pytest.raises(ValidationError, match="write.distribution-mode='fanout' is not supported; use none, hash or range"):
        append_distribution({PROP: "fanout"}, None, partitioned=True, sorted_=False)
    with pytest.raises(ValidationError, match="'roundrobin' from spark.sql.iceberg.distribution-mode"):
        append_distribution({}, "roundrobin", partitioned=True, sorted_=False,
                            requested_by="spark.sql.iceberg.distribution-mode")


@pytest.mark.parametrize("op, props, partitioned, expected", [
    ("delete", {}, True, HASH),                                   # Java's default for row-level writes
    ("update", {}, True, HASH),
    ("merge", {}, True, HASH),
    ("delete", {}, False, NONE),                                  # hash by data file: not ours
    ("merge", {}, False, NONE),                                   # the append's mode, unset: none
    ("merge", {PROP: "range"}, False, NONE),                      # ... adjusted: nothing to order by
    ("update", {"write.update.distribution-mode": "none"}, True, NONE),
    ("delete", {"write.delete.distribution-mode": "range"}, True, RANGE),
    ("merge", {"write.merge.distribution-mode": "none", PROP: "hash"}, True, NONE),
])
def test_row_change_modes(op, props, partitioned, expected):
    assert row_change_distribution(props, None, op, partitioned=partitioned, sorted_=False) == expected


def test_row_change_session_mode_and_bad_property():
    assert row_change_distribution({}, "none", "update", partitioned=True, sorted_=False) == NONE
    with pytest.raises(ValidationError, match="write.merge.distribution-mode='x' is not supported"):
        row_change_distribution({"write.merge.distribution-mode": "x"}, None, "merge", partitioned=True, sorted_=False)
