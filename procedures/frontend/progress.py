"""Progress of long statements in the console: the step being run (the Spark job description our
procedures set, such as ``rewrite_data_files: rewrite group 3/10``) and the Spark stage's tasks.

On a terminal a compact bar is redrawn in place on stderr; elsewhere (a log file, a scheduler)
a plain line is written whenever the step or the stage changes, never a redraw.  The figures come
from the session's status tracker, polled by a daemon thread; a session without one (Spark
Connect) shows the step lines only.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TextIO

from procedures.spark.session import active_descriptions

__all__ = ["StageProgress", "ConsoleProgress", "render_bar", "render_line", "stage_progress"]

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


def stage_progress(spark: Any) -> Callable[[], list[StageProgress]] | None:
    """A function reading the active stages from ``spark``'s status tracker, or None when the session
    has none (a Spark Connect session has no SparkContext)."""
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
        self._stages = stages if stages is not None else stage_progress(spark)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: tuple | None = None
        self._drawn = 0

    def __enter__(self) -> "ConsoleProgress":
        self._thread = threading.Thread(target=self._run, name="procedures-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
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
