"""Progress of long statements in the console: the step being run (the Spark job description our
procedures set, such as ``rewrite_data_files: rewrite group 3/10``) and the Spark stage's tasks.

On a terminal a compact bar is redrawn in place on stderr; elsewhere (a log file, a scheduler)
a plain line is written whenever the step or the stage changes, never a redraw.  A daemon thread
polls the figures: on a classic session from its SparkContext's status tracker, on a Spark Connect
session (which has no SparkContext) from the progress the server streams with each operation's
results, received by a progress handler (pyspark 4's ``spark.registerProgressHandler``,
:class:`ConnectStages`).  The step always comes from our own open job descriptions
(:func:`procedures.spark.session.active_descriptions`), so a session with neither source still shows
the step lines.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TextIO

from procedures.spark.dataframes import is_connect
from procedures.spark.session import active_descriptions

__all__ = ["StageProgress", "ConnectStages", "ConsoleProgress", "render_bar", "render_line", "stage_progress"]

#: characters of the bar on a terminal
_BAR = 20


@dataclass(frozen=True)
class StageProgress:
    """One active Spark stage: its id, tasks in all and done."""

    stage_id: int
    total: int
    done: int


def render_bar(step: str | None, stages: Sequence[StageProgress], width: int = 100) -> str:
    """One terminal line: the step, then the stages' tasks done of all with a bar (cut to ``width``)."""
    total = sum(s.total for s in stages)
    done = sum(min(s.done, s.total) for s in stages)
    filled = _BAR * done // total if total else 0
    ids = ",".join(str(s.stage_id) for s in stages)
    head = step or "running"
    tail = f" [{'#' * filled}{'.' * (_BAR - filled)}] {done}/{total} tasks (stage {ids})" if stages else ""
    line = head + tail
    return line if len(line) <= width else line[:max(width - 3, 0)] + "..."


def render_line(step: str | None, stages: Sequence[StageProgress]) -> str:
    """A plain log line for a step or stage change (no bar, no carriage return)."""
    if not stages:
        return f"progress: {step or 'running'}"
    parts = ", ".join(f"stage {s.stage_id} ({s.total} tasks)" for s in stages)
    return f"progress: {step or 'running'}: {parts}"


class ConnectStages:
    """A Spark Connect progress handler (``spark.registerProgressHandler(handler)``) keeping the
    unfinished stages of each running operation; :meth:`read` gives them as the status tracker would.

    pyspark calls the handler in the thread that runs the operation (the statement's thread) while
    the console reads it from its own, hence the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._operations: dict[Any, list[StageProgress]] = {}

    def __call__(self, stages: Any = None, inflight_tasks: int = 0, operation_id: Any = None,
                 done: bool = False, **_: Any) -> None:
        """Record one progress message of operation ``operation_id`` (``done``: it ended)."""
        with self._lock:
            if done:
                self._operations.pop(operation_id, None)
                return
            self._operations[operation_id] = [
                StageProgress(int(s.stage_id), int(s.num_tasks), int(s.num_completed_tasks))
                for s in (stages or ()) if not getattr(s, "done", False)]

    def read(self) -> list[StageProgress]:
        """The unfinished stages of every running operation, by stage id."""
        with self._lock:
            stages = [s for running in self._operations.values() for s in running]
        return sorted(stages, key=lambda s: s.stage_id)


def stage_progress(spark: Any) -> Callable[[], list[StageProgress]] | None:
    """A function reading the active stages from ``spark``'s status tracker, or None when the session
    has none (a Spark Connect session has no SparkContext: :class:`ConsoleProgress` registers a
    :class:`ConnectStages` handler there instead)."""
    if is_connect(spark):
        return None
    try:
        tracker = spark.sparkContext.statusTracker()
    except Exception:  # noqa: BLE001 -- Connect raises on sparkContext; progress is optional there
        return None

    def read() -> list[StageProgress]:
        out = []
        for stage_id in sorted(tracker.getActiveStageIds()):
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                out.append(StageProgress(stage_id, info.numTasks, info.numCompletedTasks))
        return out

    return read


class ConsoleProgress:
    """Context manager showing progress on ``stream`` while a statement runs (see the module doc)."""

    def __init__(self, spark: Any, stream: TextIO | None = None, *, interval: float = 0.5,
                 tty: bool | None = None, stages: Callable[[], list[StageProgress]] | None = None) -> None:
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty() if tty is None else tty
        self._interval = interval
        self._spark = spark
        self._handler: ConnectStages | None = None
        if stages is None and is_connect(spark) and hasattr(spark, "registerProgressHandler"):
            self._handler = ConnectStages()
            stages = self._handler.read
        self._stages = stages if stages is not None else stage_progress(spark)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: tuple | None = None
        self._drawn = 0

    def __enter__(self) -> "ConsoleProgress":
        if self._handler is not None:
            self._spark.registerProgressHandler(self._handler)
        self._thread = threading.Thread(target=self._run, name="procedures-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._handler is not None:
            with contextlib.suppress(Exception):  # a session closed by the statement has no handlers left
                self._spark.removeProgressHandler(self._handler)
        if self._tty and self._drawn:
            self._stream.write("\r" + " " * self._drawn + "\r")
            self._stream.flush()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 -- progress must never fail the statement
                return

    def poll(self) -> None:
        """Read the step and stages once and show them (public for tests)."""
        labels = active_descriptions()
        step = labels[-1] if labels else None
        stages = self._stages() if self._stages is not None else []
        if step is None and not stages:
            return
        if self._tty:
            line = render_bar(step, stages)
            self._stream.write("\r" + line.ljust(self._drawn))
            self._drawn = max(self._drawn, len(line))
        else:
            key = (step, tuple(s.stage_id for s in stages))
            if key == self._last:
                return
            self._last = key
            self._stream.write(render_line(step, stages) + "\n")
        self._stream.flush()
