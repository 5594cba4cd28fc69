"""Reading ahead: a background thread pulls the next items of an iterator while the caller works on
the current one.

A task that reads Parquet and writes Parquet spends about half its time in each, and both run in
Arrow's C++ code with the interpreter lock released, so decoding the next batch while the current one
is encoded uses a second core where there is one (a rewrite's single large file group, say) and costs
little where there is not.
"""

from __future__ import annotations

import queue
import threading
from typing import Iterable, Iterator, TypeVar

__all__ = ["read_ahead"]

T = TypeVar("T")

_DONE = object()


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def read_ahead(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    """The items of ``items`` in order, produced by a background thread that keeps up to ``depth``
    items ready.  An error in the producer is raised at the item where it happened; closing the
    returned generator early stops the producer (after the item it is producing)."""
    ready: queue.Queue = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(_DONE)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, which raises it
            put(_Failed(e))

    worker = threading.Thread(target=produce, name="read-ahead", daemon=True)
    worker.start()
    try:
        while True:
            item = ready.get()
            if item is _DONE:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        worker.join()
