"""Maintenance over many tables: which of them gain most from maintenance, and the time budget of
a scheduled run.  Engine-free; ``table_health`` and ``plan_maintenance`` use it when given a
namespace or a whole catalog (:mod:`procedures.catalog.targets`) instead of one table.  Tables are
ranked by :func:`benefit_score` of their findings: critical findings first, then warnings, then the
measured excess over each threshold, so the run spends its budget where it helps most.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from procedures.core.health.findings import SEVERITIES, Finding
from procedures.errors import ValidationError

__all__ = [
    "benefit_score", "rank_by_benefit", "parse_duration",
    "SEVERITY_WEIGHTS",
]

#: how much one finding of each severity weighs in a table's rank (a critical finding outweighs any
#: number of warnings a table realistically has, a warning any number of infos)
SEVERITY_WEIGHTS = {severity: 1000.0 ** rank for rank, severity in enumerate(SEVERITIES)}

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|seconds?|m|min|minutes?|h|hours?|d|days?)?\s*$", re.I)
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "sec": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "minute": 60,
                 "minutes": 60, "h": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400, "days": 86400}


def benefit_score(findings: Iterable[Finding]) -> float:
    """How much maintenance would gain, for ranking tables: each finding's severity weight plus its
    relative excess over its threshold (capped, so one huge number cannot outrank a worse severity)."""
    score = 0.0
    for f in findings:
        score += SEVERITY_WEIGHTS.get(f.severity, 0.0)
        if f.threshold:
            score += min(max(f.measured / f.threshold - 1.0, 0.0), 100.0)
    return score


def rank_by_benefit(scored: Sequence[tuple[Any, float]]) -> list[Any]:
    """Items of ``(item, score)`` pairs, highest score first; ties keep their order."""
    return [item for item, _ in sorted(scored, key=lambda pair: -pair[1])]


def parse_duration(text: str | None) -> float | None:
    """Seconds of a duration such as ``'90s'``, ``'45m'``, ``'2h'``, ``'1d'``, ``'500ms'`` or a plain
    number of seconds; None for None.  Zero or negative durations are refused."""
    if text is None:
        return None
    match = _DURATION.match(str(text))
    if match is None:
        raise ValidationError(f"Cannot parse duration '{text}': use a number with ms, s, m, h or d (e.g. '45m')")
    seconds = float(match.group(1)) * _UNIT_SECONDS[(match.group(2) or "s").lower()]
    if seconds <= 0:
        raise ValidationError(f"Duration '{text}' must be positive")
    return seconds

