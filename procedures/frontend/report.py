"""The health report a person looks at: one HTML page per run, a section per table, with pictures
drawn by matplotlib (the ``report`` extra; without it the page keeps its tables and numbers and names
the install command) from :func:`procedures.core.health.figures.health_figures`:
data file sizes against the target size, the share of deleted rows per partition, snapshots and
metadata files over time, manifests per snapshot and orphan files -- side by side before and after
when the maintenance plan ran.  The numbers of every picture are embedded in the page as JSON
(``<script id="health-figures">``) so they can be checked against the metadata tables.

From a shell: ``procedures-sql health <table | namespace | catalog> --html report.html [--maintain]
[--orphans]``; from a notebook: ``health_report(spark, "local.db.events", maintain=True)``, whose
result shows itself in the notebook and has ``save(path)``.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io as bytes_io
import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from procedures.catalog.base import split_dotted
from procedures.catalog.config import catalog_names, default_catalog_name
from procedures.core.gc.orphans import REMOVE_ORPHAN_FILES, RemoveOrphanFilesParams
from procedures.core.health.figures import HealthFigures, health_figures
from procedures.errors import ValidationError
from procedures.frontend import runner
from procedures.spark.catalog_conf import conf_from_spark, load_catalog
from procedures.spark.engine.action import Action
from procedures.spark.sql_quoting import quote_name
from procedures.spec.file_access import FileAccess

__all__ = ["TableReport", "HealthReport", "health_report", "render_html", "split_target", "REPORT_EXTRA_HINT"]

REPORT_EXTRA_HINT = "pip install 'iceberg-procedures[report]'"
_TOP_PARTITIONS = 30


@dataclass
class TableReport:
    """One table's part of the report: its figures before (and after) maintenance, its findings
    and the steps the plan ran (rows as column -> value maps)."""

    table: str
    before: HealthFigures
    after: HealthFigures | None = None
    findings: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class HealthReport:
    """A rendered report: its HTML, and the tables it covers."""

    title: str
    tables: list[TableReport]
    html: str

    def save(self, path: str) -> str:
        """Write the page to ``path``; returns the path."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.html)
        return path

    def _repr_html_(self) -> str:  # Jupyter's rich display hook
        return self.html


def split_target(target: str, conf: Any) -> tuple[str, str]:
    """``(catalog, rest)`` of a ``[catalog.]name`` target: the catalog its first part names when it
    is one of ours, else the default catalog; ``rest`` is ``''`` for a whole catalog."""
    parts = split_dotted(target.strip())
    names = catalog_names(conf)
    if parts and parts[0] in names:
        return parts[0], ".".join(quote_name(p) if "." in p or "`" in p else p for p in parts[1:])
    return default_catalog_name(conf), target.strip()


def health_report(spark: Any, target: str, *, maintain: bool = False, include_orphans: bool = False,
                  max_duration: str | None = None, title: str | None = None) -> HealthReport:
    """Examine ``target`` (a table, a namespace or a whole catalog of ours), and with ``maintain``
    run its maintenance plan and examine it again; returns the rendered report."""
    conf = conf_from_spark(spark)
    catalog_name, rest = split_target(target, conf)
    catalog = load_catalog(catalog_name, conf)
    kwargs = _target_arguments(catalog, rest)
    health = runner.run("table_health", kwargs={**kwargs, "include_orphans": include_orphans},
                        catalog=catalog_name, conf=conf, spark=spark)
    findings = _as_maps(health)
    tables = sorted({f["table"] for f in findings if f["check"] != "error"} | _all_tables(catalog, kwargs))
    reports = {t: TableReport(t, _figures(spark, catalog, t, include_orphans),
                              findings=[f for f in findings if f["table"] == t]) for t in tables}
    if maintain:
        plan = runner.run("plan_maintenance", kwargs={**kwargs, "execute": True, "include_orphans": include_orphans,
                                                      "max_duration": max_duration},
                          catalog=catalog_name, conf=conf, spark=spark)
        for step in _as_maps(plan):
            if step["table"] in reports:
                reports[step["table"]].steps.append(step)
        for t, report in reports.items():
            report.after = _figures(spark, catalog, t, include_orphans)
    name = title or (f"Table health: {catalog_name}.{rest}" if rest else f"Table health: catalog {catalog_name}")
    ordered = list(reports.values())
    return HealthReport(name, ordered, render_html(name, ordered))


def _target_arguments(catalog: Any, rest: str) -> dict[str, str]:
    if not rest:
        return {"namespace": "*"}
    ident = tuple(split_dotted(rest))
    if len(ident) > 1 and catalog.table_exists(ident):
        return {"table": rest}
    if catalog.namespace_exists(ident):
        return {"namespace": rest}
    raise ValidationError(f"{rest} is neither a table nor a namespace of catalog {catalog.name}")


def _all_tables(catalog: Any, kwargs: dict[str, str]) -> set[str]:
    """The tables of a one-table target (a maintained table has no findings but still gets figures)."""
    if "table" in kwargs:
        return {".".join(split_dotted(kwargs["table"]))}
    return set()


def _as_maps(result: Any) -> list[dict[str, Any]]:
    names = [c.name for c in result.columns]
    return [dict(zip(names, r)) for r in result.rows]


def _figures(spark: Any, catalog: Any, table: str, include_orphans: bool) -> HealthFigures:
    loaded = catalog.load_table(tuple(split_dotted(table)))
    orphans = None
    if include_orphans:
        found = Action(REMOVE_ORPHAN_FILES, spark).run(loaded, RemoveOrphanFilesParams(dry_run=True))
        orphans = [_size(loaded.io, p) for p in found.orphan_file_locations]
    return health_figures(loaded.io, loaded.metadata, table, orphans=orphans)


def _size(io: FileAccess, path: str) -> int:
    try:
        return io.new_input(path).size()
    except OSError:
        return 0  # gone since the listing


# ------------------------------------------------------------------------------------ rendering
def render_html(title: str, tables: Sequence[TableReport]) -> str:
    """The report page: a section per table with its summary, findings, steps and pictures (before |
    after), and every figure's numbers as JSON in ``<script id="health-figures">``."""
    figure_cls = _matplotlib()
    data = {"title": title, "tables": [{"table": t.table, "before": t.before.as_dict(),
                                        "after": t.after.as_dict() if t.after else None} for t in tables]}
    sections = [_section(figure_cls, t) for t in tables] or ["<p>No tables.</p>"]
    payload = json.dumps(data, default=str).replace("</", "<\\/")
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
h1 {{ font-size: 1.6em; }} h2 {{ border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }}
table.data {{ border-collapse: collapse; margin: .5em 0 1em; font-size: .9em; }}
table.data td, table.data th {{ border: 1px solid #ddd; padding: .25em .6em; text-align: left; }}
table.data th {{ background: #f4f4f4; }}
.pair {{ display: flex; gap: 1em; flex-wrap: wrap; }} .pair figure {{ margin: 0; }}
figcaption {{ font-size: .85em; color: #555; text-align: center; }}
.critical {{ color: #b00020; font-weight: bold; }} .warning {{ color: #b36b00; }} .failed {{ color: #b00020; }}
</style></head><body>
<h1>{html.escape(title)}</h1><p>Generated {generated} by iceberg-procedures.</p>
{''.join(sections)}
<script type="application/json" id="health-figures">{payload}</script>
</body></html>
"""


def _matplotlib() -> Any:
    """matplotlib's ``Figure``, or None without the ``report`` extra: the page then has its tables and
    numbers, and says how to get the pictures (a plain install still gets a report)."""
    try:
        from matplotlib.figure import Figure  # noqa: PLC0415 -- optional extra 'report'
    except ImportError:
        return None
    return Figure


def _section(figure_cls: Any, t: TableReport) -> str:
    b = t.before
    columns = ["", "before"] + (["after"] if t.after else [])
    rows = [("data files", lambda f: len(f.data_file_sizes)),
            ("mean data file size", lambda f: _human(_mean(f.data_file_sizes))),
            ("target file size", lambda f: _human(f.target_file_size)),
            ("delete files", lambda f: f.delete_files),
            ("snapshots", lambda f: len(f.snapshots)),
            ("metadata files", lambda f: len(f.metadata_files)),
            ("orphan files", lambda f: "not listed" if f.orphan_files is None
             else f"{f.orphan_files} ({_human(f.orphan_bytes or 0)})")]
    summary = _table(columns, [[name] + [get(f) for f in (b, t.after) if f is not None] for name, get in rows])
    parts = [f"<section><h2>{html.escape(t.table)}</h2>", summary]
    if t.findings:
        parts.append("<h3>Findings</h3>" + _table(
            ["severity", "check", "partition", "message", "fix"],
            [[(f["severity"], f["severity"]), f["check"], f["partition"] or "", f["message"], f["call"] or ""]
             for f in t.findings]))
    if t.steps:
        parts.append("<h3>Maintenance run</h3>" + _table(
            ["step", "procedure", "status", "seconds", "result or error"],
            [[s["step"], s["procedure"], (s["status"], s["status"]),
              "" if s["duration_seconds"] is None else f"{s['duration_seconds']:.2f}",
              s["error"] or s["result"] or ""] for s in t.steps]))
    if figure_cls is None:
        parts.append(f"<p class=\"warning\">The pictures need matplotlib: {html.escape(REPORT_EXTRA_HINT)}. Their numbers "
                     "are in this page's <code>health-figures</code> JSON.</p>")
    for caption, draw in _PICTURES if figure_cls is not None else ():
        images = [_svg(figure_cls, draw, f, label) for f, label in ((b, "before"), (t.after, "after")) if f is not None]
        parts.append(f"<h3>{html.escape(caption)}</h3><div class=\"pair\">{''.join(images)}</div>")
    if b.notes:
        parts.append("<p>" + "<br>".join(html.escape(n) for n in b.notes) + "</p>")
    parts.append("</section>")
    return "".join(parts)


def _table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(v: Any) -> str:
        if isinstance(v, tuple):  # (text, css class)
            return f"<td class=\"{html.escape(str(v[1]))}\">{html.escape(str(v[0]))}</td>"
        return f"<td>{html.escape(str(v))}</td>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(cell(v) for v in r) + "</tr>" for r in rows)
    return f"<table class=\"data\"><tr>{head}</tr>{body}</table>"


def _human(size: float) -> str:
    """``1.5 KiB``, ``512 MiB``: a byte count for people."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" or size == int(size) else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def _mean(values: Sequence[int]) -> float:
    return sum(values) / len(values) if values else 0.0


def _svg(figure_cls: Any, draw: Any, figures: HealthFigures, label: str) -> str:
    fig = figure_cls(figsize=(5.2, 3.2), dpi=100)
    ax = fig.add_subplot()
    draw(ax, figures)
    ax.set_title(f"{label}", fontsize=10)
    fig.tight_layout()
    buffer = bytes_io.BytesIO()
    fig.savefig(buffer, format="png")
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    alt = html.escape(f"{draw.__doc__ or ''} ({label})".strip())
    return f"<figure><img alt=\"{alt}\" src=\"data:image/png;base64,{encoded}\"></figure>"


def _draw_sizes(ax: Any, f: HealthFigures) -> None:
    """Data file sizes against the target file size"""
    # small files are the problem shown here: a log scale keeps KB-sized files visible beside a
    # 512 MiB target
    sizes = [max(s, 1) for s in f.data_file_sizes]
    low = min(sizes + [f.target_file_size]) / 2
    high = max(sizes + [f.target_file_size]) * 2
    edges = [low * (high / low) ** (i / 30) for i in range(31)]
    if sizes:
        ax.hist(sizes, bins=edges, color="#4c72b0", label="data files")
    ax.axvline(f.target_file_size, color="#c44e52", linestyle="--", label=f"target {_human(f.target_file_size)}")
    ax.set_xscale("log")
    ticks = [t for t in (2 ** k for k in range(0, 50, 5)) if low <= t <= high]
    ax.set_xticks(ticks, [_human(t) for t in ticks], fontsize=8)
    ax.set_xlabel("data file size")
    ax.set_ylabel("files")
    ax.legend(fontsize=8)


def _draw_deletes(ax: Any, f: HealthFigures) -> None:
    """Share of rows hidden by delete files, per partition"""
    ratios = sorted(f.delete_ratio_by_partition().items(), key=lambda kv: -kv[1])[:_TOP_PARTITIONS]
    if not ratios:
        ax.text(0.5, 0.5, "no delete files", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    names = [p or "(table)" for p, _ in ratios]
    ax.barh(range(len(ratios)), [r for _, r in ratios], color="#dd8452")
    ax.set_yticks(range(len(ratios)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("deleted rows / data rows")


def _draw_history(ax: Any, f: HealthFigures) -> None:
    """Snapshots and metadata files over time"""
    for stamps, label, color in (([s[0] for s in f.snapshots], "snapshots", "#4c72b0"),
                                 (f.metadata_files, "metadata files", "#55a868")):
        if stamps:
            times = [dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc) for ms in sorted(stamps)]
            ax.step(times, range(1, len(times) + 1), where="post", label=label, color=color)
    ax.set_ylabel("count (cumulative)")
    ax.legend(fontsize=8)
    ax.tick_params(axis="x", labelsize=7, labelrotation=30)


def _draw_manifests(ax: Any, f: HealthFigures) -> None:
    """Manifests per snapshot"""
    if not f.manifests_per_snapshot:
        ax.text(0.5, 0.5, "no snapshots", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    xs = list(range(1, len(f.manifests_per_snapshot) + 1))
    data = [m[2] for m in f.manifests_per_snapshot]
    deletes = [m[3] for m in f.manifests_per_snapshot]
    ax.bar(xs, data, color="#4c72b0", label="data manifests")
    ax.bar(xs, deletes, bottom=data, color="#dd8452", label="delete manifests")
    ax.set_xlabel("snapshot (oldest first)")
    ax.set_ylabel("manifests")
    ax.set_xticks(xs if len(xs) <= 20 else xs[::max(1, len(xs) // 10)])
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=8)


def _draw_orphans(ax: Any, f: HealthFigures) -> None:
    """Orphan files"""
    if f.orphan_files is None:
        ax.text(0.5, 0.5, "not listed (--orphans lists them)", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    ax.bar(["orphan files"], [f.orphan_files], color="#8172b3")
    noun = "file" if f.orphan_files == 1 else "files"
    ax.text(0, f.orphan_files, f"{f.orphan_files} {noun}, {_human(f.orphan_bytes or 0)}", ha="center", va="bottom")
    ax.set_ylim(0, max(1, f.orphan_files) * 1.25)
    ax.yaxis.get_major_locator().set_params(integer=True)


_PICTURES = (
    ("Data file sizes against the target size", _draw_sizes),
    ("Deleted rows per partition", _draw_deletes),
    ("Snapshots and metadata files over time", _draw_history),
    ("Manifests per snapshot", _draw_manifests),
    ("Orphan files", _draw_orphans),
)
