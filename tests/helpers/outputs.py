"""Procedure output rows made comparable between twin tables: what the tables drew at random
(snapshot ids, uuids in file names) and where they live are masked."""

from __future__ import annotations

import re

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def normalized(rows, positions: dict[int, int], location: str) -> list[tuple]:
    """``rows`` with snapshot ids as ``S<position in history>`` (``NEW`` for an id the table did not
    have), and paths below ``location`` relative to it with uuids and snapshot ids masked."""
    out = []
    for row in rows:
        vals = []
        for v in row:
            if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 10**9:
                vals.append(f"S{positions[v]}" if v in positions else "NEW")
            elif isinstance(v, str) and v.startswith(location):
                text = UUID.sub("UUID", v[len(location):])
                for sid, p in positions.items():
                    text = text.replace(str(sid), f"S{p}")
                vals.append("<loc>" + text)
            else:
                vals.append(v)
        out.append(tuple(vals))
    return out
