"""The commit loop's retry policy (procedures/core/kernel/transaction.py): the ``commit.retry.*`` properties
and Java's defaults, the exponential backoff with jitter, the total-timeout deadline and the attempt
count, and old metadata files kept unless delete-after-commit is on.  Time and jitter are stand-ins
(no test waits or depends on a clock); written against the survivors of mutation testing
(docs/testing.md)."""

from __future__ import annotations

import os

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel import transaction as T
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.operations import FastAppend
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.core.kernel.updates import SetProperties
from procedures.errors import CommitFailedError, ValidationError
from procedures.spec.manifest.model import DataFile, FileFormat
from procedures.spec.schema import Schema
from procedures.spec.types import LONG, NestedField
from tests.helpers.faults import FaultyCatalog

SCHEMA = Schema((NestedField(1, "id", LONG, True),))


class FixedJitter:
    """Stands in for the ``random`` module: ``random()`` returns ``value``."""

    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


class SteppingClock:
    """Stands in for the ``time`` module: each ``monotonic()`` is ``step`` seconds after the last;
    ``sleep`` records instead of sleeping."""

    def __init__(self, step: float) -> None:
        self.now, self.step, self.slept = 0.0, step, []

    def monotonic(self) -> float:
        value = self.now
        self.now += self.step
        return value

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


@pytest.fixture()
def table(tmp_path):
    catalog = HadoopCatalog("local", str(tmp_path / "wh"))
    catalog.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{catalog.warehouse}/db/t")
    catalog.create_table(("db", "t"), md)
    return catalog


def _append(table_, i: int = 1) -> FastAppend:
    return FastAppend([DataFile(f"{table_.location}/data/f{i}.parquet", FileFormat.PARQUET, (), 1, 10)])


def test_retry_properties_and_javas_defaults():
    assert RetryPolicy.from_properties({}) == RetryPolicy(4, 100, 60_000, 1_800_000)
    props = {"commit.retry.num-retries": "7", "commit.retry.min-wait-ms": "11",
             "commit.retry.max-wait-ms": "222", "commit.retry.total-timeout-ms": "3333"}
    assert RetryPolicy.from_properties(props) == RetryPolicy(7, 11, 222, 3333)
    zeros = {key: "0" for key in props}  # no retries, no waiting: all allowed
    assert RetryPolicy.from_properties(zeros) == RetryPolicy(0, 0, 0, 0)
    for key in props:
        with pytest.raises(ValidationError, match=f"{key} must be at least 0, got -1"):
            RetryPolicy.from_properties({key: "-1"})


@pytest.mark.parametrize("jitter, factor", [(0.0, 0.5), (1.0, 1.0), (0.5, 0.75)])
def test_backoff_doubles_from_the_minimum_up_to_the_maximum_with_jitter(monkeypatch, jitter, factor):
    monkeypatch.setattr(T, "random", FixedJitter(jitter))
    policy = RetryPolicy(num_retries=9, min_wait_ms=100, max_wait_ms=1000)
    assert [policy.backoff_ms(a) for a in range(1, 7)] == [w * factor for w in (100, 200, 400, 800, 1000, 1000)]


@pytest.mark.parametrize("total_timeout_ms, attempts", [
    (20_000, 2),   # the second failure comes 20 s after the start: the deadline is reached, no retry
    (20_010, 3),   # 10 ms more: one more attempt
    (0, 1),        # no time at all: only the first attempt
])
def test_the_total_timeout_stops_retrying(table, monkeypatch, total_timeout_ms, attempts):
    clock = SteppingClock(10.0)  # every reading of the clock is 10 s after the last
    monkeypatch.setattr(T, "time", clock)
    monkeypatch.setattr(T, "random", FixedJitter(1.0))
    faulty = FaultyCatalog(table, fail_times=50)
    policy = RetryPolicy(num_retries=20, min_wait_ms=100, max_wait_ms=100_000, total_timeout_ms=total_timeout_ms)
    t = faulty.load_table(("db", "t"))
    with pytest.raises(CommitFailedError, match=rf"after {attempts} attempt\(s\)") as err:
        commit(t, [_append(t)], policy=policy)
    assert faulty.attempts == attempts == err.value.attempts
    # between attempts the loop slept the backoff of each retry, in seconds
    assert clock.slept == [policy.backoff_ms(a) / 1000 for a in range(1, attempts)]


def test_retries_stop_after_num_retries(table, monkeypatch):
    monkeypatch.setattr(T, "time", SteppingClock(0.0))
    faulty = FaultyCatalog(table, fail_times=50)
    t = faulty.load_table(("db", "t"))
    with pytest.raises(CommitFailedError, match=r"Cannot commit to local\.db\.t after 4 attempt\(s\): injected conflict 4") as err:
        commit(t, [_append(t)], policy=RetryPolicy(num_retries=3))
    assert faulty.attempts == 4 and err.value.attempts == 4 and err.value.table == "local.db.t"


def test_retries_log_what_they_do(table, monkeypatch, caplog):
    monkeypatch.setattr(T, "time", SteppingClock(0.0))
    monkeypatch.setattr(T, "random", FixedJitter(1.0))
    faulty = FaultyCatalog(table, fail_times=1)
    t = faulty.load_table(("db", "t"))
    with caplog.at_level("INFO", logger=T.log.name):
        commit(t, [_append(t)], policy=RetryPolicy(min_wait_ms=100))
    assert "commit to local.db.t lost a race (injected conflict 1); retry 1 in 100 ms" in caplog.messages


def test_old_metadata_files_are_kept_unless_delete_after_commit_is_on(table):
    t = table.load_table(("db", "t"))
    t = commit(t, [T.MetadataChange((SetProperties((("write.metadata.previous-versions-max", "1"),)),))],
               policy=RetryPolicy())
    for i in range(3):
        t = commit(t, [_append(t, i)], policy=RetryPolicy())
    jsons = sorted(f for f in os.listdir(os.path.join(t.location, "metadata")) if f.endswith(".metadata.json"))
    assert len(t.metadata.metadata_log) == 1
    assert jsons == [f"v{n}.metadata.json" for n in range(1, 6)]  # dropped from the log, still on disk
    t = commit(t, [T.MetadataChange((SetProperties((("write.metadata.delete-after-commit.enabled", "TRUE"),)),))],
               policy=RetryPolicy())
    # from now on each commit deletes the file its log drops (older ones stay: they were dropped before)
    t = commit(t, [_append(t, 9)], policy=RetryPolicy())
    jsons = sorted(f for f in os.listdir(os.path.join(t.location, "metadata")) if f.endswith(".metadata.json"))
    # v4 dropped by the commit that turned it on, v5 by the append
    assert jsons == ["v1.metadata.json", "v2.metadata.json", "v3.metadata.json", "v6.metadata.json", "v7.metadata.json"]


def test_without_a_policy_the_tables_properties_decide(table, monkeypatch):
    monkeypatch.setattr(T, "time", SteppingClock(0.0))
    t = table.load_table(("db", "t"))
    t = commit(t, [T.MetadataChange((SetProperties((("commit.retry.num-retries", "1"),)),))], policy=RetryPolicy())
    faulty = FaultyCatalog(table, fail_times=50)
    with pytest.raises(CommitFailedError, match=r"after 2 attempt\(s\)"):
        commit(faulty.load_table(("db", "t")), [_append(t)])
    assert faulty.attempts == 2


def test_a_failed_clean_up_is_logged_and_the_commit_error_kept(table, monkeypatch, caplog):
    """Deleting the files of a failed commit must never hide why it failed."""
    monkeypatch.setattr(T, "time", SteppingClock(0.0))
    faulty = FaultyCatalog(table, fail_times=50)
    t = faulty.load_table(("db", "t"))

    def broken_delete_many(paths, *args, **kwargs):
        raise OSError("store unreachable")

    monkeypatch.setattr(t.io, "delete_many", broken_delete_many)
    with caplog.at_level("WARNING", logger=T.log.name), pytest.raises(CommitFailedError, match="injected conflict 1"):
        commit(t, [_append(t)], policy=RetryPolicy(num_retries=0))
    # the attempt wrote a manifest and a manifest list
    assert caplog.messages == ["could not delete 2 file(s) written by a failed commit to local.db.t: store unreachable"]
