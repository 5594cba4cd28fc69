"""Reading ahead in a background thread (procedures.io.prefetch): order kept, errors raised where
they happened, and a consumer that stops early stops the producer."""

from __future__ import annotations

import threading
import time

import pytest

from procedures.io.prefetch import read_ahead


def counted(n: int, produced: list[int]):
    """0 .. n-1, each noted in ``produced`` as it is produced."""
    for i in range(n):
        produced.append(i)
        yield i


def test_items_come_in_order_and_the_producer_runs_ahead():
    produced: list[int] = []
    it = read_ahead(counted(10, produced), depth=3)
    assert next(it) == 0
    time.sleep(0.2)
    assert len(produced) >= 3  # produced while the consumer was elsewhere
    assert list(it) == list(range(1, 10))


def test_an_error_is_raised_after_the_items_before_it():
    def items():
        yield 1
        yield 2
        raise OSError("disk gone")

    got = []
    with pytest.raises(OSError, match="disk gone"):
        for x in read_ahead(items()):
            got.append(x)
    assert got == [1, 2]


def test_stopping_early_stops_the_producer():
    produced: list[int] = []
    it = read_ahead(counted(1_000_000, produced), depth=2)
    assert next(it) == 0
    it.close()
    count = len(produced)
    time.sleep(0.2)
    assert len(produced) == count < 10
    assert not [t for t in threading.enumerate() if t.name == "read-ahead"]
